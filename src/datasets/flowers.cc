// TF-Slim's flowers dataset (datasets/flowers.py) and its converter
// (datasets/download_and_convert_flowers.py): flower_photos.tgz, read in
// memory through libarchive, split with Python's random.seed(0) /
// random.shuffle over the sorted photo list, 350 validation photos, 5 shards
// per split holding the original JPEG bytes.

#include <glog/logging.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "convert_util.h"
#include "imagenet_sources.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/core/python_random.h"
#include "slimtorch/datasets/dataset.h"
#include "slimtorch/io/example.h"
#include "slimtorch/io/image_codec.h"
#include "slimtorch/io/jpeg_decoder.h"
#include "slimtorch/io/labels_file.h"
#include "slimtorch/io/tfrecord.h"

namespace slimtorch {
namespace {

// Persisted names and sizes (TF-Slim's; do not change).
constexpr const char* kDefaultUrl =
    "http://download.tensorflow.org/example_images/";
constexpr const char* kArchive = "flower_photos.tgz";
constexpr const char* kRoot = "flower_photos";
constexpr int64_t kTrainSize = 3320;
constexpr int64_t kValidationSize = 350;
constexpr int kNumShards = 5;
constexpr uint32_t kRandomSeed = 0;

DatasetSpec FlowersSpec() {
  DatasetSpec spec;
  spec.name = "flowers";
  spec.splits_to_sizes = {{"train", kTrainSize},
                          {"validation", kValidationSize}};
  spec.num_classes = 5;
  spec.file_pattern = "flowers_%s_*.tfrecord";
  spec.image_height = 0;  // photos of every size
  spec.image_width = 0;
  spec.image_channels = 3;
  spec.default_format = "png";  // flowers.py's keys_to_features default
  return spec;
}

std::string ShardPath(const std::string& dir, const std::string& split,
                      int shard) {
  char name[96];
  std::snprintf(name, sizeof(name), "flowers_%s_%05d-of-%05d.tfrecord",
                split.c_str(), shard, kNumShards);
  return JoinPath(dir, name);
}

struct Photo {
  std::string path;  // archive member, "flower_photos/<class>/<file>"
  std::string bytes;
  int64_t label = 0;
  int height = 0, width = 0;
  std::string bad;  // why it cannot be used, or ""
};

// The photos of the archive: regular files one folder below flower_photos/
// (a file at the top, like LICENSE.txt, is not a photo); hidden files are
// skipped and counted. Class names are the folder names.
std::vector<Photo> ReadFlowerPhotos(const std::string& archive,
                                    std::set<std::string>* classes,
                                    int64_t* hidden) {
  std::vector<Photo> photos;
  const std::string root = std::string(kRoot) + "/";
  internal::ForEachArchiveFile(
      archive, [&](const std::string& path, const std::string& data) {
        if (path.compare(0, root.size(), root) != 0) return;
        const std::string rest = path.substr(root.size());
        const size_t slash = rest.find('/');
        if (slash == std::string::npos) return;  // LICENSE.txt
        const std::string name = rest.substr(slash + 1);
        SLIM_CHECK(name.find('/') == std::string::npos,
                   "expected flower_photos/<class>/<photo>, not a deeper ",
                   "folder");
        if (name.empty() || name[0] == '.' || rest[0] == '.') {
          ++*hidden;
          return;
        }
        classes->insert(rest.substr(0, slash));
        Photo photo;
        photo.path = path;
        photo.bytes = data;
        photos.push_back(std::move(photo));
      });
  return photos;
}

// Height and width from a full decode, as TF-Slim's decode_jpeg (which
// also rejects a corrupt photo). Unusable photos are taken out and
// described ("archive 'a' member 'm' is ...") in the returned list.
std::vector<std::string> CheckPhotos(std::vector<Photo>* photos,
                                     const std::string& archive,
                                     int num_threads) {
  internal::ParallelFor(
      static_cast<int64_t>(photos->size()), num_threads,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          Photo& p = (*photos)[i];
          const auto* bytes = reinterpret_cast<const uint8_t*>(p.bytes.data());
          if (p.bytes.empty()) {
            p.bad = "is empty (0 bytes)";
          } else if (!JpegDecoder::IsJpeg(bytes, p.bytes.size())) {
            p.bad = "is not a JPEG";
          } else {
            try {
              const Image image = DecodeImage(p.bytes, 3, "");
              p.height = image.height;
              p.width = image.width;
            } catch (const Error& e) {
              p.bad = StrCat("is not a readable JPEG", e.what());
            }
          }
        }
      });
  std::vector<Photo> good;
  std::vector<std::string> bad;
  for (Photo& p : *photos) {
    if (p.bad.empty()) {
      good.push_back(std::move(p));
    } else {
      bad.push_back(StrCat("archive '", archive, "' member '", p.path, "' ",
                           p.bad));
    }
  }
  *photos = std::move(good);
  return bad;
}

void WriteSplit(const std::vector<Photo>& photos, int64_t begin, int64_t end,
                const std::string& split, const std::string& dir) {
  const int64_t n = end - begin;
  const int64_t per_shard = (n + kNumShards - 1) / kNumShards;
  for (int shard = 0; shard < kNumShards; ++shard) {
    TFRecordWriter writer(ShardPath(dir, split, shard));
    const int64_t first = begin + shard * per_shard;
    const int64_t last = std::min(end, first + per_shard);
    for (int64_t i = first; i < last; ++i) {
      const Photo& p = photos[i];
      writer.Write(EncodeImageExample(
          {p.bytes, "jpg", p.label, p.height, p.width}));
    }
    writer.Close();
  }
  LOG(INFO) << "Wrote " << n << " " << split << " photos in " << kNumShards
            << " shards";
}

// True when labels.txt and every shard of both splits are in `dir`.
bool IsComplete(const std::string& dir) {
  bool complete = PathExists(JoinPath(dir, kLabelsFilename));
  for (const char* split : {"train", "validation"}) {
    for (int s = 0; s < kNumShards; ++s) {
      complete = complete && PathExists(ShardPath(dir, split, s));
    }
  }
  return complete;
}

// TF-Slim's order (Python's random.seed(0) shuffle), and each photo's label
// from its class folder, flower_photos/<class>/<photo>.
void ShuffleAndLabel(std::vector<Photo>* photos,
                     const std::map<std::string, int64_t>& ids) {
  PythonRandom(kRandomSeed).Shuffle(photos);
  for (Photo& p : *photos) {
    const size_t start = std::string(kRoot).size() + 1;
    p.label = ids.at(p.path.substr(start, p.path.find('/', start) - start));
  }
}

// Throws unless there are photos beyond the validation split's, and (with
// check_split_sizes) exactly TF-Slim's count in 5 classes.
void CheckPhotoCount(int64_t n, size_t num_classes,
                     const std::string& archive,
                     const ConvertOptions& options) {
  if (options.check_split_sizes) {
    SLIM_CHECK(num_classes == 5 && n == kTrainSize + kValidationSize,
               "archive '", archive, "' holds ", n, " usable photos in ",
               num_classes, " classes; TF-Slim's flowers has ",
               kTrainSize + kValidationSize, " (", kTrainSize, " train + ",
               kValidationSize, " validation) in 5");
  }
  SLIM_CHECK(n > kValidationSize, "archive '", archive, "' holds ", n,
             " usable photos; flowers needs more than the ", kValidationSize,
             " validation photos");
}

void ConvertFlowers(const ConvertOptions& options) {
  const std::string& dir = options.dataset_dir;
  MakeDirs(dir);
  if (IsComplete(dir)) {
    LOG(INFO) << "Dataset files already exist in '" << dir
              << "'. Exiting without re-creating them.";
    return;
  }
  std::vector<std::string> downloaded;
  const std::string archive = internal::FetchSourceFile(
      internal::SourceBaseUrl(options.source_url, kDefaultUrl), kArchive, dir,
      &downloaded);

  std::set<std::string> class_set;
  int64_t hidden = 0;
  std::vector<Photo> photos = ReadFlowerPhotos(archive, &class_set, &hidden);
  SLIM_CHECK(!class_set.empty(), "archive '", archive, "' holds no ",
             "flower_photos/<class>/<photo> files");
  const std::vector<std::string> classes(class_set.begin(), class_set.end());
  std::map<std::string, int64_t> ids;
  for (size_t i = 0; i < classes.size(); ++i) ids[classes[i]] = i;
  // TF-Slim shuffles os.listdir's order; a sorted list makes it the same
  // wherever the listing is sorted. Skipped photos take no part (the split
  // is TF-Slim's for the archive without them).
  std::sort(photos.begin(), photos.end(),
            [](const Photo& a, const Photo& b) { return a.path < b.path; });
  const std::vector<std::string> bad =
      CheckPhotos(&photos, archive, options.num_threads);
  if (!bad.empty()) {
    SLIM_CHECK(options.skip_bad_images, bad.front(),
               bad.size() > 1 ? StrCat(" (and ", bad.size() - 1, " more)")
                              : std::string(),
               "; --skip_bad_images skips bad photos");
  }
  ShuffleAndLabel(&photos, ids);
  const int64_t n = static_cast<int64_t>(photos.size());
  CheckPhotoCount(n, classes.size(), archive, options);
  WriteSplit(photos, kValidationSize, n, "train", dir);
  WriteSplit(photos, 0, kValidationSize, "validation", dir);
  std::map<int64_t, std::string> labels;
  for (size_t i = 0; i < classes.size(); ++i) labels[i] = classes[i];
  WriteLabelsFile(labels, dir);
  if (hidden > 0) LOG(INFO) << "Skipped " << hidden << " hidden file(s)";
  for (const std::string& b : bad) LOG(WARNING) << "Skipped: " << b;
  if (!bad.empty()) LOG(WARNING) << "Skipped " << bad.size() << " bad photo(s)";
  if (!options.keep_downloads) {
    for (const std::string& path : downloaded) std::remove(path.c_str());
  }
  LOG(INFO) << "Finished converting the Flowers dataset!";
}

SLIM_REGISTER_DATASET("flowers", FlowersSpec);
SLIM_REGISTER_DATASET_CONVERTER("flowers", ConvertFlowers);

}  // namespace
}  // namespace slimtorch
