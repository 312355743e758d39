#include "slimtorch/io/checkpoint.h"

#include <glog/logging.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <utility>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"

namespace slimtorch {
namespace {

namespace fs = std::filesystem;

constexpr const char* kIndexFilename = "checkpoint";

// ------------------------------------------------------------ index file

struct CheckpointIndex {
  std::string latest;            // as written (relative to the directory)
  std::vector<std::string> all;  // oldest first
};

std::string QuoteTextProto(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

// Reads "<dir>/checkpoint"; nullopt when the file does not exist. Unknown
// fields (TF's timestamps) are ignored.
std::optional<CheckpointIndex> ReadIndex(const std::string& dir) {
  const std::string path = JoinPath(dir, kIndexFilename);
  if (!PathExists(path)) return std::nullopt;
  std::istringstream in(ReadFileToString(path));
  CheckpointIndex index;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    const size_t colon = line.find(':', first);
    SLIM_CHECK(colon != std::string::npos, path, ":", line_no,
               ": expected 'key: \"value\"', got '", line, "'");
    const std::string key = line.substr(first, colon - first);
    if (key != "model_checkpoint_path" && key != "all_model_checkpoint_paths") {
      continue;
    }
    const size_t open = line.find('"', colon);
    SLIM_CHECK(open != std::string::npos, path, ":", line_no,
               ": expected a quoted path after '", key, ":'");
    std::string value;
    size_t i = open + 1;
    bool closed = false;
    for (; i < line.size(); ++i) {
      if (line[i] == '\\' && i + 1 < line.size()) {
        value.push_back(line[++i]);
      } else if (line[i] == '"') {
        closed = true;
        break;
      } else {
        value.push_back(line[i]);
      }
    }
    SLIM_CHECK(closed, path, ":", line_no, ": unterminated quoted path");
    if (key == "model_checkpoint_path") {
      index.latest = value;
    } else {
      index.all.push_back(value);
    }
  }
  return index;
}

void WriteIndex(const std::string& dir, const CheckpointIndex& index) {
  std::string text =
      "model_checkpoint_path: " + QuoteTextProto(index.latest) + "\n";
  for (const auto& p : index.all) {
    text += "all_model_checkpoint_paths: " + QuoteTextProto(p) + "\n";
  }
  WriteFileAtomically(JoinPath(dir, kIndexFilename), text);
}

std::string ResolveInDir(const std::string& dir, const std::string& p) {
  return !p.empty() && p.front() == '/' ? p : JoinPath(dir, p);
}

// FindTfCheckpoint's answer for `path`; throws naming what it looked for
// when there is none.
TfCheckpointLocation FoundTfCheckpoint(const std::string& path) {
  std::optional<TfCheckpointLocation> loc = FindTfCheckpoint(path);
  SLIM_CHECK(loc.has_value(), "no TensorFlow checkpoint at '", path,
             "': ", TfCheckpointCandidates(path));
  return *loc;
}

// A safetensors file's tensors as OpenedCheckpoint lists them.
std::vector<TfTensorInfo> ListByName(const CheckpointData& data) {
  std::vector<TfTensorInfo> out;
  for (const NamedTensor& t : data.tensors) {
    TfTensorInfo info;
    info.name = t.name;
    info.tf_dtype = TfDtypeOf(t.tensor.scalar_type(), t.name);
    info.shape = t.tensor.sizes().vec();
    info.supported = true;
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(),
            [](const TfTensorInfo& a, const TfTensorInfo& b) {
              return a.name < b.name;
            });
  return out;
}

// Removes checkpoint `path`'s files (a safetensors file, or a TensorFlow
// bundle: its index first, then it is no checkpoint); gone already is fine.
void RemoveCheckpointFiles(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path + ".index", ec)) {
    fs::remove(path + ".index", ec);
    for (const std::string& f : Glob(path + ".data-*-of-*")) {
      fs::remove(f, ec);
    }
  }
  fs::remove(path, ec);
}

}  // namespace

CheckpointManager::CheckpointManager(std::string dir, int max_to_keep,
                                     CheckpointFormat format)
    : dir_(std::move(dir)), max_to_keep_(max_to_keep), format_(format) {
  std::error_code ec;
  dir_made_ = fs::is_directory(dir_, ec);
}

std::string CheckpointManager::Save(int64_t step, const CheckpointData& data) {
  PrepareDir();
  const bool tf = format_ == CheckpointFormat::kTensorFlow;
  const std::string name =
      "model.ckpt-" + std::to_string(step) + (tf ? "" : ".safetensors");
  const std::string path = JoinPath(dir_, name);
  CheckpointIndex index = ReadIndex(dir_).value_or(CheckpointIndex{});
  const bool listed =
      std::find(index.all.begin(), index.all.end(), name) != index.all.end() ||
      index.latest == name;
  if (tf) {
    SaveTfCheckpoint(path, data.tensors);
  } else {
    SaveCheckpoint(path, data);
  }

  index.all.erase(std::remove(index.all.begin(), index.all.end(), name),
                  index.all.end());
  index.all.push_back(name);
  std::vector<std::string> dropped;
  if (max_to_keep_ > 0 && index.all.size() > size_t(max_to_keep_)) {
    const size_t n_drop = index.all.size() - size_t(max_to_keep_);
    dropped.assign(index.all.begin(), index.all.begin() + n_drop);
    index.all.erase(index.all.begin(), index.all.begin() + n_drop);
  }
  index.latest = name;
  try {
    WriteIndex(dir_, index);
  } catch (...) {
    // The index still names the checkpoints before; a new file it does not
    // list would never be rotated away.
    if (!listed) RemoveCheckpointFiles(path);
    throw;
  }
  for (const auto& p : dropped) RemoveCheckpointFiles(ResolveInDir(dir_, p));
  return path;
}

void CheckpointManager::PrepareDir() {
  if (!dir_made_) {
    MakeDirs(dir_);
    dir_made_ = true;
    return;
  }
  std::error_code ec;
  SLIM_CHECK(fs::is_directory(dir_, ec), "checkpoint directory '", dir_,
             "' no longer exists (removed while training?); not creating it "
             "again for a checkpoint without the ones before");
}

std::optional<std::string> CheckpointManager::Latest() const {
  return LatestCheckpoint(dir_);
}

std::optional<std::string> LatestCheckpoint(const std::string& dir) {
  std::optional<CheckpointIndex> index = ReadIndex(dir);
  if (!index || index->latest.empty()) return std::nullopt;
  const std::string path = ResolveInDir(dir, index->latest);
  // A directory moved or copied elsewhere (TensorFlow's Saver writes
  // absolute paths): its own file of that name, when the path is gone.
  if (index->latest.front() == '/' && !CheckpointExists(path)) {
    const std::string here =
        JoinPath(dir, fs::path(index->latest).filename().string());
    if (CheckpointExists(here)) return here;
  }
  return path;
}

std::vector<std::string> ListedCheckpoints(const std::string& dir) {
  std::optional<CheckpointIndex> index = ReadIndex(dir);
  std::vector<std::string> out;
  if (!index) return out;
  std::vector<std::string> names = index->all;
  names.erase(std::remove(names.begin(), names.end(), index->latest),
              names.end());
  if (!index->latest.empty()) names.push_back(index->latest);
  for (const std::string& name : names) {
    if (name.empty()) continue;
    const std::string path = ResolveInDir(dir, name);
    const std::string here = JoinPath(dir, fs::path(name).filename().string());
    // As LatestCheckpoint: a moved directory's own file of that name.
    out.push_back(name.front() == '/' && !CheckpointExists(path) &&
                          CheckpointExists(here)
                      ? here
                      : path);
  }
  return out;
}

std::optional<std::string> ResumableCheckpoint(const std::string& train_dir) {
  const std::vector<std::string> listed = ListedCheckpoints(train_dir);
  for (auto it = listed.rbegin(); it != listed.rend(); ++it) {
    if (!CheckpointExists(*it)) continue;
    if (it != listed.rbegin()) {
      LOG(WARNING) << "The latest checkpoint in " << train_dir
                   << "/checkpoint, " << listed.back()
                   << ", is gone; resuming from " << *it
                   << ", the newest listed one that is still there";
    }
    return *it;
  }
  SLIM_CHECK(listed.empty(), "checkpoint index '",
             JoinPath(train_dir, "checkpoint"), "' lists ", listed.size(),
             " checkpoint(s), the latest '", listed.back(),
             "', but none of them exists; remove the index to train from the "
             "start in this --train_dir");
  return std::nullopt;
}

std::string ResumeFromEarlierAdvice(const std::string& train_dir,
                                    const std::string& path) {
  const std::string files =
      PathExists(path + ".index")
          ? StrCat("'", path, ".index' and '", path, ".data-*'")
          : StrCat("'", path, "'");
  std::vector<std::string> listed = ListedCheckpoints(train_dir);
  listed.erase(std::remove(listed.begin(), listed.end(), path), listed.end());
  for (auto it = listed.rbegin(); it != listed.rend(); ++it) {
    if (!CheckpointExists(*it)) continue;
    return StrCat("To resume from the checkpoint before it, '", *it,
                  "', remove ", files,
                  " and run again: training then resumes from the newest "
                  "checkpoint the index lists that is still there");
  }
  return StrCat("No earlier checkpoint is listed in '",
                JoinPath(train_dir, "checkpoint"), "': remove ", files,
                " and the index to train from the start");
}

std::string ResolveCheckpointPath(const std::string& path_or_dir) {
  std::error_code ec;
  if (fs::is_directory(path_or_dir, ec)) {
    std::optional<std::string> latest = LatestCheckpoint(path_or_dir);
    SLIM_CHECK(latest.has_value(), "no checkpoint found in ", path_or_dir);
    SLIM_CHECK(fs::is_regular_file(*latest, ec) ||
                   fs::is_regular_file(*latest + ".index", ec),
               "checkpoint index '", JoinPath(path_or_dir, kIndexFilename),
               "' names '", *latest, "', which does not exist");
    return *latest;
  }
  if (fs::is_regular_file(path_or_dir, ec)) return path_or_dir;
  SLIM_CHECK(!PathExists(path_or_dir), "checkpoint '", path_or_dir,
             "' is not a regular file");
  SLIM_FAIL("checkpoint '", path_or_dir, "' does not exist");
}

bool CheckpointExists(const std::string& path) {
  return PathExists(path) || PathExists(path + ".index");
}

std::optional<TfCheckpointLocation> FindTfCheckpoint(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return LocateTfCheckpoint(path);
  std::optional<std::string> latest = LatestCheckpoint(path);
  if (!latest) return std::nullopt;
  return LocateTfCheckpoint(*latest);
}

std::string TfCheckpointCandidates(const std::string& path) {
  return StrCat("looked for '", path, ".index' (V2), '", path, "' (V1), '",
                path, "-NNNNN-of-NNNNN' (sharded V1)",
                " and, for a directory, the checkpoint its 'checkpoint' file "
                "names");
}

TfCheckpointReader::TfCheckpointReader(const std::string& path)
    : TfPrefixReader(FoundTfCheckpoint(path)) {}

const std::vector<TfTensorInfo>& OpenedCheckpoint::tensors() const {
  return tf_ ? tf_->tensors() : listing_;
}

torch::Tensor OpenedCheckpoint::Read(const std::string& name) const {
  if (tf_) return tf_->Read(name);
  const torch::Tensor t = data_.Find(name);
  SLIM_CHECK(t.defined(), "checkpoint '", given_, "' has no tensor '", name,
             "'");
  return t;
}

const CheckpointData& OpenedCheckpoint::data() const {
  SLIM_CHECK(!tf_, "checkpoint '", path_,
             "' is a TensorFlow checkpoint, not a safetensors file");
  return data_;
}

const TfPrefixReader& OpenedCheckpoint::tf() const {
  SLIM_CHECK(tf_ != nullptr, "checkpoint '", path_,
             "' is a safetensors file, not a TensorFlow checkpoint");
  return *tf_;
}

OpenedCheckpoint OpenCheckpoint(const std::string& path) {
  OpenedCheckpoint out;
  out.given_ = path;
  if (std::optional<TfCheckpointLocation> loc = FindTfCheckpoint(path)) {
    out.tf_ = std::make_unique<TfPrefixReader>(*loc);
    out.path_ = out.tf_->prefix();
    return out;
  }
  out.path_ = ResolveCheckpointPath(path);
  out.data_ = LoadCheckpoint(out.path_);
  out.listing_ = ListByName(out.data_);
  return out;
}

}  // namespace slimtorch
