// The image_folder converter: any folder of <class>/ sub-folders of images
// (or of train/, validation/ and test/ folders of <class>/ sub-folders)
// becomes TFRecords of TF-Slim's image Examples, labels.txt and a dataset
// description (dataset_description.txt) that train_image_classifier and
// eval_image_classifier read with --dataset_name=image_folder. TF-Slim
// needed a Python dataset module per dataset for this.
//
// The validation split of a class-folder layout is TensorFlow retrain.py's
// which_set(): the SHA-1 of the file's base name (without any "_nohash_..."
// suffix) decides, so a file keeps its split when files are added.

#include <glog/logging.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "convert_util.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/core/python_random.h"
#include "slimtorch/core/sha1.h"
#include "slimtorch/core/strings.h"
#include "slimtorch/datasets/dataset.h"
#include "slimtorch/io/example.h"
#include "slimtorch/io/bmp_gif_codec.h"
#include "slimtorch/io/image_codec.h"
#include "slimtorch/io/jpeg_decoder.h"
#include "slimtorch/io/labels_file.h"
#include "slimtorch/io/tfrecord.h"

namespace fs = std::filesystem;

namespace slimtorch {

double ImageFolderSplitPercentage(const std::string& file_name) {
  std::string name = file_name;
  const size_t nohash = name.find("_nohash_");
  if (nohash != std::string::npos) name.resize(nohash);
  const std::array<uint8_t, 20> digest = Sha1(name);
  // int(hexdigest, 16) % (MAX_NUM_IMAGES_PER_CLASS + 1), with
  // MAX_NUM_IMAGES_PER_CLASS = 2**27 - 1: the digest's low 27 bits.
  const uint32_t low = (uint32_t{digest[16]} << 24) |
                       (uint32_t{digest[17]} << 16) |
                       (uint32_t{digest[18]} << 8) | uint32_t{digest[19]};
  constexpr double kMaxImagesPerClass = (1 << 27) - 1;
  return static_cast<double>(low & ((1u << 27) - 1)) *
         (100.0 / kMaxImagesPerClass);
}

namespace {

// Persisted names (the description records the pattern).
constexpr const char* kName = "image_folder";
constexpr const char* kFilePattern = "image_folder_%s_*.tfrecord";
constexpr const char* kStagingDir = ".image_folder-staging";
constexpr uint64_t kShardBytes = 64ull << 20;  // automatic shard size
constexpr uint32_t kShuffleSeed = 0;          // TF-Slim's flowers seed
constexpr int64_t kChunk = 64;                 // images in flight per batch

std::string ShardName(const std::string& split, int shard, int num_shards) {
  char name[128];
  std::snprintf(name, sizeof(name), "image_folder_%s_%05d-of-%05d.tfrecord",
                split.c_str(), shard, num_shards);
  return name;
}

struct Entry {
  std::string path;  // the file
  std::string cls;   // its class folder's name
  std::string split;
  uint64_t size = 0;
};

// What the scan found besides the images.
struct Scan {
  std::vector<Entry> entries;
  std::set<std::string> classes;
  std::vector<std::string> bad;  // "'<path>' <why>", in path order
  int64_t hidden = 0;            // hidden files and folders skipped
  int64_t stray = 0;             // files outside any class folder
};

bool IsHidden(const fs::path& p) {
  const std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

bool IsImageExtension(const std::string& ext) {
  static const std::set<std::string> kExtensions = {".jpg", ".jpeg", ".png",
                                                    ".bmp", ".gif"};
  return kExtensions.count(Lower(ext)) > 0;
}

// "" when `name` can be a label in labels.txt (valid UTF-8 without control
// characters; spaces and any letters are fine), else why not.
std::string ClassNameProblem(const std::string& name) {
  for (size_t i = 0; i < name.size();) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f) return "has a control character";
    const int extra = c < 0x80           ? 0
                      : (c >> 5) == 0x6  ? 1
                      : (c >> 4) == 0xe  ? 2
                      : (c >> 3) == 0x1e ? 3
                                         : -1;
    if (extra < 0 || i + extra >= name.size() + (extra == 0)) {
      return "is not valid UTF-8";
    }
    for (int k = 1; k <= extra; ++k) {
      if ((static_cast<unsigned char>(name[i + k]) >> 6) != 2) {
        return "is not valid UTF-8";
      }
    }
    i += 1 + extra;
  }
  return "";
}

std::vector<fs::path> SortedChildren(const fs::path& dir) {
  std::vector<fs::path> children;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    children.push_back(it->path());
  }
  SLIM_CHECK(!ec, "cannot list folder '", dir.string(), "': ", ec.message());
  std::sort(children.begin(), children.end());
  return children;
}

// The files under `cls_dir` (any depth), hidden ones counted and skipped.
void ScanClassFolder(const fs::path& cls_dir, const std::string& split,
                     Scan* scan) {
  const std::string cls = cls_dir.filename().string();
  const std::string problem = ClassNameProblem(cls);
  if (!problem.empty()) {
    scan->bad.push_back(StrCat("class folder '", cls_dir.string(), "' name ",
                               problem, " (labels.txt cannot hold it)"));
    return;
  }
  size_t images = 0;
  std::vector<fs::path> pending = {cls_dir};
  while (!pending.empty()) {
    const fs::path dir = pending.back();
    pending.pop_back();
    for (const fs::path& p : SortedChildren(dir)) {
      if (IsHidden(p)) {
        ++scan->hidden;
        continue;
      }
      std::error_code ec;
      if (fs::is_directory(p, ec)) {
        pending.push_back(p);
        continue;
      }
      if (!fs::is_regular_file(p, ec)) continue;  // sockets, broken links
      if (!IsImageExtension(p.extension().string())) {
        scan->bad.push_back(StrCat(
            "'", p.string(), "' has an unknown image format (extension '",
            p.extension().string(),
            "'; expected .jpg, .jpeg, .png, .bmp or .gif, any case)"));
        continue;
      }
      Entry e;
      e.path = p.string();
      e.cls = cls;
      e.split = split;
      e.size = fs::file_size(p, ec);
      scan->entries.push_back(std::move(e));
      ++images;
    }
  }
  if (images == 0) {
    scan->bad.push_back(
        StrCat("class folder '", cls_dir.string(), "' holds no images"));
    return;
  }
  scan->classes.insert(cls);
}

// Class folders of `dir` (split = "" in the class-folder layout).
void ScanClasses(const fs::path& dir, const std::string& split, Scan* scan) {
  for (const fs::path& p : SortedChildren(dir)) {
    std::error_code ec;
    if (IsHidden(p)) {
      ++scan->hidden;
    } else if (fs::is_directory(p, ec)) {
      ScanClassFolder(p, split, scan);
    } else {
      ++scan->stray;
    }
  }
}

// True when the folders of `image_dir` are train/ plus validation/ and/or
// test/ (and nothing else): the splits are given.
bool HasSplitFolders(const fs::path& image_dir) {
  std::set<std::string> folders;
  for (const fs::path& p : SortedChildren(image_dir)) {
    std::error_code ec;
    if (!IsHidden(p) && fs::is_directory(p, ec)) {
      folders.insert(p.filename().string());
    }
  }
  if (!folders.count("train") || folders.size() < 2) return false;
  for (const std::string& f : folders) {
    if (f != "train" && f != "validation" && f != "test") return false;
  }
  return true;
}

enum class Format { kJpeg, kPng, kBmp, kGif, kUnknown };

Format SniffFormat(const std::string& bytes) {
  const auto* b = reinterpret_cast<const uint8_t*>(bytes.data());
  if (JpegDecoder::IsJpeg(b, bytes.size())) return Format::kJpeg;
  if (bytes.size() >= 8 && bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0) {
    return Format::kPng;
  }
  if (bytes.size() >= 2 && bytes.compare(0, 2, "BM") == 0) return Format::kBmp;
  if (bytes.size() >= 6 && (bytes.compare(0, 6, "GIF87a") == 0 ||
                            bytes.compare(0, 6, "GIF89a") == 0)) {
    return Format::kGif;
  }
  return Format::kUnknown;
}

// One image turned into its record, or why it cannot be.
struct Converted {
  std::string record;
  std::string bad;
  int channels = 0;  // 1 gray, 3 color
  int height = 0, width = 0;
};

Converted ConvertImage(const Entry& e, int64_t label) {
  Converted out;
  std::string bytes;
  try {
    bytes = ReadFileToString(e.path);
  } catch (const Error& err) {
    out.bad = StrCat("'", e.path, "' cannot be read: ", err.what());
    return out;
  }
  if (bytes.empty()) {
    out.bad = StrCat("'", e.path, "' is empty (0 bytes)");
    return out;
  }
  const Format format = SniffFormat(bytes);
  if (format == Format::kUnknown) {
    out.bad = StrCat("'", e.path, "' is not a JPEG, PNG, BMP or GIF image");
    return out;
  }
  Image image;
  try {
    if (format == Format::kBmp) {
      // A palette BMP's colours, not the indices TensorFlow would give.
      DecodeBmpInto(
          bytes, 0,
          [&image](int h, int w, int c) {
            image.height = h;
            image.width = w;
            image.channels = c;
            image.pixels.resize(static_cast<size_t>(h) * w * c);
            return image.pixels.data();
          },
          StrCat("'", e.path, "'"), BmpPalette::kColors);
    } else {
      image = DecodeImage(bytes, 0, StrCat("'", e.path, "'"));
    }
  } catch (const Error& err) {
    out.bad = err.what();
    return out;
  }
  out.channels = image.channels;
  out.height = image.height;
  out.width = image.width;
  ImageExample ex;
  ex.label = label;
  ex.height = image.height;
  ex.width = image.width;
  if (format == Format::kJpeg || format == Format::kPng) {
    ex.encoded = std::move(bytes);  // kept byte for byte
    ex.format = format == Format::kJpeg ? "jpeg" : "png";
  } else {
    // BMP and GIF (first frame): re-encoded losslessly as PNG.
    ex.encoded = EncodePng(image.pixels.data(), image.height, image.width,
                           image.channels);
    ex.format = "png";
  }
  out.record = EncodeImageExample(ex);
  return out;
}

// Removes the staging folder unless released (a failed conversion leaves
// no shard under a final name).
class StagingGuard {
 public:
  explicit StagingGuard(std::string dir) : dir_(std::move(dir)) {}
  ~StagingGuard() {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  StagingGuard(const StagingGuard&) = delete;
  StagingGuard& operator=(const StagingGuard&) = delete;

 private:
  std::string dir_;
};

bool IsComplete(const std::string& dir) {
  if (!PathExists(JoinPath(dir, kDatasetDescriptionFilename)) ||
      !PathExists(JoinPath(dir, kLabelsFilename))) {
    return false;
  }
  const DatasetSpec spec = ReadDatasetDescription(dir);
  for (const auto& kv : spec.splits_to_sizes) {
    if (Glob(JoinPath(dir, "image_folder_" + kv.first + "_*.tfrecord"))
            .empty()) {
      return false;
    }
  }
  return true;
}

struct SplitResult {
  int64_t written = 0;
  std::vector<std::string> shards;  // staged file names
};

// Few images and a small percentage can leave the validation or test split
// that the percentages ask for empty: one warning each, with the counts.
void WarnEmptySplits(const ImageFolderConvertOptions& o,
                     std::map<std::string, std::vector<Entry>>& splits,
                     size_t total) {
  const std::pair<const char*, double> asked[] = {
      {"validation", o.validation_percentage}, {"test", o.testing_percentage}};
  for (const auto& [split, percentage] : asked) {
    if (percentage <= 0 || !splits[split].empty()) continue;
    LOG(WARNING) << "The " << split << " split got 0 of the " << total
                 << " images (--"
                 << (split == std::string("test") ? "testing" : "validation")
                 << "_percentage=" << percentage
                 << ", train: " << splits["train"].size()
                 << "); it is left out, so eval_image_classifier "
                    "--dataset_split_name="
                 << split
                 << " has nothing to read: raise the percentage or add images";
  }
}

void CheckFolders(const std::string& dir, const ImageFolderConvertOptions& o) {
  SLIM_CHECK(!o.image_dir.empty(),
             "--dataset_name=image_folder needs the folder of images: "
             "--image_dir=<folder of <class>/ sub-folders>");
  std::error_code ec;
  SLIM_CHECK(fs::is_directory(o.image_dir, ec), "--image_dir '", o.image_dir,
             "' is not a folder");
}

// The images of o.image_dir, each with its split: the folder it is in when
// the image dir holds train/, validation/ or test/ (`split_folders`), else
// drawn from the hash of its name by the percentages.
Scan ScanImageDir(const ImageFolderConvertOptions& o, bool split_folders) {
  Scan scan;
  if (split_folders) {
    SLIM_CHECK(o.validation_percentage == 10 && o.testing_percentage == 0,
               "--image_dir '", o.image_dir, "' holds train/ and validation/ "
               "or test/ folders, which give the splits: "
               "--validation_percentage and --testing_percentage do not apply");
    std::error_code ec;
    for (const char* split : {"train", "validation", "test"}) {
      const fs::path p = fs::path(o.image_dir) / split;
      if (fs::is_directory(p, ec)) ScanClasses(p, split, &scan);
    }
    return scan;
  }
  SLIM_CHECK(o.validation_percentage >= 0 && o.testing_percentage >= 0 &&
                 o.validation_percentage + o.testing_percentage < 100,
             "--validation_percentage (", o.validation_percentage,
             ") and --testing_percentage (", o.testing_percentage,
             ") must be >= 0 and leave some images for training (sum < 100)");
  ScanClasses(o.image_dir, "", &scan);
  for (Entry& e : scan.entries) {
    const double pct =
        ImageFolderSplitPercentage(fs::path(e.path).filename().string());
    e.split = pct < o.validation_percentage ? "validation"
              : pct < o.validation_percentage + o.testing_percentage
                  ? "test"
                  : "train";
  }
  return scan;
}

// Throws on a bad item (unless skipped) and on fewer than two classes.
void CheckScan(const Scan& scan, const ConvertOptions& options) {
  const ImageFolderConvertOptions& o = options.image_folder;
  if (!scan.bad.empty() && !options.skip_bad_images) {
    SLIM_FAIL(scan.bad.front(),
              scan.bad.size() > 1
                  ? StrCat(" (and ", scan.bad.size() - 1, " more)")
                  : std::string(),
              "; --skip_bad_images skips bad images and folders");
  }
  SLIM_CHECK(!scan.classes.empty(), "--image_dir '", o.image_dir,
             "' holds no class folder with images (expected "
             "<image_dir>/<class>/<image>, or train/<class>/<image> and "
             "validation/<class>/<image>)");
  SLIM_CHECK(scan.classes.size() >= 2, "--image_dir '", o.image_dir,
             "' holds one class folder with images, '", *scan.classes.begin(),
             "': a classifier needs at least 2 classes (with one its loss "
             "stays constant and it learns nothing). Give each class its own "
             "sub-folder of images: <image_dir>/<class>/<image>");
}

// Removes earlier partial outputs (a stale shard would match the pattern)
// and makes an empty staging folder; returns its path.
std::string StartStaging(const std::string& dir) {
  for (const std::string& old :
       Glob(JoinPath(dir, "image_folder_*_*-of-*.tfrecord"))) {
    std::remove(old.c_str());
  }
  const std::string staging = JoinPath(dir, kStagingDir);
  std::error_code ec;
  fs::remove_all(staging, ec);
  MakeDirs(staging);
  return staging;
}

// The split's shard count: the flag's, else one per kShardBytes of images;
// never more than the images.
int ShardCount(const std::string& split, const std::vector<Entry>& entries,
               const ImageFolderConvertOptions& o) {
  uint64_t bytes = 0;
  for (const Entry& e : entries) bytes += e.size;
  int shards = split == "train" ? o.train_shards : o.validation_shards;
  if (shards <= 0) {
    shards = static_cast<int>(
        std::max<uint64_t>(1, (bytes + kShardBytes - 1) / kShardBytes));
  }
  return static_cast<int>(
      std::min<int64_t>(shards, static_cast<int64_t>(entries.size())));
}

// Writes the splits' shards into the staging folder and keeps what the
// dataset description needs: the counts, the bad items, whether all images
// are gray and whether they share one size.
class SplitWriter {
 public:
  SplitWriter(const ConvertOptions& options, std::string staging,
              const std::map<std::string, int64_t>& ids,
              std::vector<std::string> bad)
      : options_(options),
        staging_(std::move(staging)),
        ids_(ids),
        bad_(std::move(bad)) {}

  // Sorted, then Python's random.seed(0) shuffle: a fixed, mixed order.
  void WriteSplit(const std::string& split, std::vector<Entry>& entries) {
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return a.path < b.path; });
    PythonRandom(kShuffleSeed).Shuffle(&entries);
    const int64_t n = static_cast<int64_t>(entries.size());
    const int shards = ShardCount(split, entries, options_.image_folder);
    const int64_t per_shard = (n + shards - 1) / shards;
    SplitResult& result = results_[split];
    for (int s = 0; s < shards; ++s) {
      const std::string name = ShardName(split, s, shards);
      TFRecordWriter writer(JoinPath(staging_, name));
      const int64_t first = s * per_shard;
      const int64_t last = std::min(n, first + per_shard);
      for (int64_t begin = first; begin < last; begin += kChunk) {
        WriteChunk(entries, begin, std::min(last, begin + kChunk), &writer,
                   &result);
      }
      writer.Close();
      result.shards.push_back(name);
    }
    LOG(INFO) << "Converted " << result.written << " " << split
              << " images into " << shards << " shard(s)";
  }

  std::map<std::string, SplitResult>& results() { return results_; }
  const std::vector<std::string>& bad() const { return bad_; }
  bool all_gray() const { return all_gray_; }
  int common_height() const { return common_height_; }
  int common_width() const { return common_width_; }

 private:
  // entries[begin, end) converted on the worker threads, then written in
  // order.
  void WriteChunk(const std::vector<Entry>& entries, int64_t begin,
                  int64_t end, TFRecordWriter* writer, SplitResult* result) {
    std::vector<Converted> out(end - begin);
    internal::ParallelFor(
        end - begin, options_.num_threads, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            const Entry& entry = entries[begin + i];
            out[i] = ConvertImage(entry, ids_.at(entry.cls));
            SLIM_CHECK(out[i].bad.empty() || options_.skip_bad_images,
                       out[i].bad, "; --skip_bad_images skips bad images");
          }
        });
    for (Converted& c : out) {
      if (!c.bad.empty()) {
        bad_.push_back(std::move(c.bad));
        continue;
      }
      writer->Write(c.record);
      ++result->written;
      all_gray_ = all_gray_ && c.channels == 1;
      if (common_height_ == -1) {
        common_height_ = c.height;
        common_width_ = c.width;
      } else if (common_height_ != c.height || common_width_ != c.width) {
        common_height_ = common_width_ = -2;
      }
    }
  }

  const ConvertOptions& options_;
  const std::string staging_;
  const std::map<std::string, int64_t>& ids_;
  std::vector<std::string> bad_;  // the scan's, then the unreadable images
  std::map<std::string, SplitResult> results_;
  bool all_gray_ = true;
  int common_height_ = -1, common_width_ = -1;  // -2 once they vary
};

// The description of what `writer` wrote; moves the shards of each
// non-empty split from `staging` to `dir` (an empty split is left out).
DatasetSpec PublishSplits(SplitWriter& writer, size_t num_classes,
                          std::map<std::string, std::vector<Entry>>& splits,
                          const std::string& staging, const std::string& dir) {
  DatasetSpec spec;
  spec.name = kName;
  spec.file_pattern = kFilePattern;
  spec.num_classes = static_cast<int64_t>(num_classes);
  spec.image_channels = writer.all_gray() ? 1 : 3;
  spec.image_height = writer.common_height() > 0 ? writer.common_height() : 0;
  spec.image_width = writer.common_width() > 0 ? writer.common_width() : 0;
  spec.default_format = "jpeg";
  for (const auto& kv : writer.results()) {
    if (kv.second.written == 0) {
      LOG(WARNING) << "The " << kv.first << " split is empty (none of its "
                   << splits[kv.first].size()
                   << " images could be read); it is left out";
      continue;
    }
    spec.splits_to_sizes[kv.first] = kv.second.written;
    for (const std::string& shard : kv.second.shards) {
      fs::rename(JoinPath(staging, shard), JoinPath(dir, shard));
    }
  }
  return spec;
}

void LogSummary(const DatasetSpec& spec, const Scan& scan,
                const std::vector<std::string>& bad, const std::string& dir,
                const ImageFolderConvertOptions& o) {
  for (const auto& kv : spec.splits_to_sizes) {
    LOG(INFO) << kv.first << ": " << kv.second << " images";
  }
  LOG(INFO) << spec.num_classes << " classes, "
            << (spec.image_channels == 1 ? "grayscale" : "color") << ", "
            << (spec.image_height > 0
                    ? StrCat("all ", spec.image_height, "x", spec.image_width)
                    : std::string("sizes vary"));
  if (scan.hidden > 0) {
    LOG(INFO) << "Skipped " << scan.hidden << " hidden file(s) or folder(s)";
  }
  if (scan.stray > 0) {
    LOG(INFO) << "Ignored " << scan.stray
              << " file(s) outside the class folders";
  }
  for (const std::string& b : bad) LOG(WARNING) << "Skipped: " << b;
  if (!bad.empty()) LOG(WARNING) << "Skipped " << bad.size() << " bad item(s)";
  LOG(INFO) << "Finished converting '" << o.image_dir << "': train with "
            << "--dataset_name=image_folder --dataset_dir=" << dir;
}

void ConvertImageFolder(const ConvertOptions& options) {
  const std::string& dir = options.dataset_dir;
  const ImageFolderConvertOptions& o = options.image_folder;
  CheckFolders(dir, o);
  MakeDirs(dir);
  if (IsComplete(dir)) {
    LOG(INFO) << "Dataset files already exist in '" << dir
              << "'. Exiting without re-creating them (remove "
              << kDatasetDescriptionFilename << " to convert again).";
    return;
  }

  const bool split_folders = HasSplitFolders(o.image_dir);
  Scan scan = ScanImageDir(o, split_folders);
  CheckScan(scan, options);
  const std::vector<std::string> classes(scan.classes.begin(),
                                         scan.classes.end());
  std::map<std::string, int64_t> ids;
  for (size_t i = 0; i < classes.size(); ++i) ids[classes[i]] = i;

  std::map<std::string, std::vector<Entry>> splits;
  for (Entry& e : scan.entries) splits[e.split].push_back(std::move(e));
  SLIM_CHECK(!splits["train"].empty(), "--image_dir '", o.image_dir,
             "' leaves no image for the train split");
  if (!split_folders) WarnEmptySplits(o, splits, scan.entries.size());

  const std::string staging = StartStaging(dir);
  StagingGuard guard(staging);
  SplitWriter writer(options, staging, ids, scan.bad);
  for (auto& kv : splits) {
    if (!kv.second.empty()) writer.WriteSplit(kv.first, kv.second);
  }
  SLIM_CHECK(writer.results()["train"].written > 0, "--image_dir '",
             o.image_dir, "': no readable image is left for the train split");

  const DatasetSpec spec =
      PublishSplits(writer, classes.size(), splits, staging, dir);
  std::map<int64_t, std::string> labels;
  for (size_t i = 0; i < classes.size(); ++i) labels[i] = classes[i];
  WriteLabelsFile(labels, dir);
  WriteDatasetDescription(spec, dir);  // last: marks the dataset complete
  LogSummary(spec, scan, writer.bad(), dir, o);
}

SLIM_REGISTER_DATASET_CONVERTER("image_folder", ConvertImageFolder);

}  // namespace
}  // namespace slimtorch
