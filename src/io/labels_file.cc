#include "slimtorch/io/labels_file.h"

#include <sstream>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"

namespace slimtorch {

void WriteLabelsFile(const std::map<int64_t, std::string>& labels,
                     const std::string& dataset_dir,
                     const std::string& filename) {
  std::string text;
  for (const auto& kv : labels) {
    // A '\r' would not read back: ReadLabelsFile drops one at a line's
    // end (files written on Windows).
    SLIM_CHECK(kv.second.find_first_of("\n\r") == std::string::npos,
               "label name for class ", kv.first,
               " contains a newline or carriage return");
    text += std::to_string(kv.first) + ":" + kv.second + "\n";
  }
  WriteFileAtomically(JoinPath(dataset_dir, filename), text);
}

std::map<int64_t, std::string> ReadLabelsFile(const std::string& path) {
  std::istringstream in(ReadFileToString(path));
  std::map<int64_t, std::string> labels;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    size_t colon = line.find(':');
    SLIM_CHECK(colon != std::string::npos, path, ":", line_no,
               ": expected '<id>:<name>', got '", line, "'");
    std::string id = line.substr(0, colon);
    size_t used = 0;
    int64_t value = 0;
    try {
      value = std::stoll(id, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    SLIM_CHECK(!id.empty() && used == id.size(), path, ":", line_no,
               ": class id '", id, "' is not an integer");
    SLIM_CHECK(labels.emplace(value, line.substr(colon + 1)).second, path, ":",
               line_no, ": class id ", value, " appears twice");
  }
  return labels;
}

}  // namespace slimtorch
