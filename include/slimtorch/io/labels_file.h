#pragma once
// labels.txt in TF-Slim's format (dataset_utils.write_label_file): one line
// per class, "<id>:<name>\n". Persisted format: do not change.

#include <cstdint>
#include <map>
#include <string>

namespace slimtorch {

inline constexpr const char* kLabelsFilename = "labels.txt";

// Writes <dataset_dir>/labels.txt atomically. A name with '\n' or '\r' is
// refused: it would not read back.
void WriteLabelsFile(const std::map<int64_t, std::string>& labels,
                     const std::string& dataset_dir,
                     const std::string& filename = kLabelsFilename);

// Parses a labels file like TF-Slim's read_label_file: empty lines are
// skipped, each line splits at its first ':'. A line without ':' or with a
// non-integer id throws naming the file and line number.
std::map<int64_t, std::string> ReadLabelsFile(const std::string& path);

}  // namespace slimtorch
