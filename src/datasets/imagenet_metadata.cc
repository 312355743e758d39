// ImageNet's text inputs (synsets, metadata, validation labels, box CSV),
// its record order (Python 2's shuffle) and its shard ranges (numpy's
// linspace). See imagenet.h for the contracts.

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "slimtorch/core/error.h"
#include "slimtorch/core/python_random.h"
#include "slimtorch/core/strings.h"
#include "slimtorch/datasets/imagenet.h"

namespace slimtorch {
namespace {

// Python's str.strip() (of ASCII text).
std::string Strip(const std::string& s) { return Trim(s, kAsciiWhitespace); }

// Python's readlines(): lines without their '\n'; no empty last line for
// data ending in '\n'.
std::vector<std::string> Lines(const std::string& data) {
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < data.size()) {
    size_t end = data.find('\n', pos);
    if (end == std::string::npos) end = data.size();
    lines.push_back(data.substr(pos, end - pos));
    pos = end + 1;
  }
  return lines;
}

// Python's float(text) for the decimal numbers of the box CSV.
double ParseFloat(const std::string& text, const std::string& where) {
  const std::string s = Strip(text);
  char* end = nullptr;
  double v = s.empty() ? 0 : std::strtod(s.c_str(), &end);
  SLIM_CHECK(!s.empty() && end == s.c_str() + s.size(), where,
             ": expected a number, got '", text, "'");
  return v;
}

}  // namespace

std::vector<std::string> ParseImageNetSynsets(const std::string& data,
                                              const std::string& name) {
  std::vector<std::string> synsets;
  std::set<std::string> seen;
  const std::vector<std::string> lines = Lines(data);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string s = Strip(lines[i]);
    SLIM_CHECK(!s.empty(), "'", name, "' line ", i + 1,
               " is empty; expected one synset per line (n01440764)");
    SLIM_CHECK(seen.insert(s).second, "'", name, "' line ", i + 1,
               " repeats the synset '", s, "'");
    synsets.push_back(std::move(s));
  }
  SLIM_CHECK(!synsets.empty(), "'", name, "' holds no synsets");
  return synsets;
}

std::map<std::string, std::string> ParseImageNetMetadata(
    const std::string& data, const std::string& name) {
  std::map<std::string, std::string> out;
  const std::vector<std::string> lines = Lines(data);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string line = Strip(lines[i]);
    const size_t tab = line.find('\t');
    SLIM_CHECK(tab != std::string::npos &&
                   line.find('\t', tab + 1) == std::string::npos,
               "'", name, "' line ", i + 1,
               ": expected '<synset>\\t<name>', got '", line, "'");
    out[line.substr(0, tab)] = line.substr(tab + 1);
  }
  return out;
}

std::vector<std::string> ParseImageNetValidationLabels(
    const std::string& data, const std::string& name) {
  std::vector<std::string> labels;
  const std::vector<std::string> lines = Lines(data);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string s = Strip(lines[i]);
    SLIM_CHECK(!s.empty(), "'", name, "' line ", i + 1,
               " is empty; expected the synset of ",
               ImageNetValidationFilename(static_cast<int64_t>(i)));
    labels.push_back(std::move(s));
  }
  return labels;
}

std::string ImageNetValidationFilename(int64_t index) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "ILSVRC2012_val_%08lld.JPEG",
                static_cast<long long>(index + 1));
  return buf;
}

std::map<int64_t, std::string> ImageNetLabelNames(
    const std::vector<std::string>& synsets,
    const std::map<std::string, std::string>& metadata) {
  std::map<int64_t, std::string> names{{0, "background"}};
  for (size_t i = 0; i < synsets.size(); ++i) {
    auto it = metadata.find(synsets[i]);
    SLIM_CHECK(it != metadata.end(),
               "the ImageNet metadata file has no name "
               "for the synset '",
               synsets[i], "' (label ", i + 1, ")");
    names[static_cast<int64_t>(i) + 1] = it->second;
  }
  return names;
}

ImageNetBoxes ParseImageNetBoxesCsv(const std::string& data,
                                    const std::string& name) {
  ImageNetBoxes boxes;
  const std::vector<std::string> lines = Lines(data);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string where = StrCat("'", name, "' line ", i + 1);
    std::vector<std::string> parts;
    size_t pos = 0;
    for (;;) {
      size_t comma = lines[i].find(',', pos);
      parts.push_back(lines[i].substr(pos, comma - pos));
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
    SLIM_CHECK(parts.size() == 5, where,
               ": expected '<file>,<xmin>,<ymin>,<xmax>,<ymax>', got '",
               lines[i], "'");
    BoundingBox b;
    b.xmin = static_cast<float>(ParseFloat(parts[1], where));
    b.ymin = static_cast<float>(ParseFloat(parts[2], where));
    b.xmax = static_cast<float>(ParseFloat(parts[3], where));
    b.ymax = static_cast<float>(ParseFloat(parts[4], where));
    boxes[parts[0]].push_back(b);
  }
  return boxes;
}

std::vector<int64_t> Python2ShuffledRange(int64_t n, uint32_t seed) {
  std::vector<int64_t> x(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) x[i] = i;
  PythonRandom(seed).ShufflePython2(&x);
  return x;
}

std::vector<int64_t> LinspaceInt(int64_t start, int64_t stop, int num) {
  SLIM_CHECK(num >= 1, "LinspaceInt: num must be >= 1, got ", num);
  std::vector<int64_t> out(num);
  const double begin = static_cast<double>(start);
  const double step =
      num > 1 ? static_cast<double>(stop - start) / (num - 1) : 0.0;
  for (int i = 0; i < num; ++i) {
    out[i] = static_cast<int64_t>(static_cast<double>(i) * step + begin);
  }
  if (num > 1) out[num - 1] = stop;
  return out;
}

std::vector<std::pair<int64_t, int64_t>> ImageNetShardRanges(int64_t n,
                                                             int num_threads,
                                                             int num_shards) {
  SLIM_CHECK(
      num_threads >= 1 && num_shards >= 1 && num_shards % num_threads == 0,
      "the number of shards (", num_shards,
      ") must be a multiple of --num_threads (", num_threads,
      "), as build_imagenet_data.py requires");
  const int per_thread = num_shards / num_threads;
  const std::vector<int64_t> spacing = LinspaceInt(0, n, num_threads + 1);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int t = 0; t < num_threads; ++t) {
    const std::vector<int64_t> cuts =
        LinspaceInt(spacing[t], spacing[t + 1], per_thread + 1);
    for (int s = 0; s < per_thread; ++s) {
      ranges.emplace_back(cuts[s], cuts[s + 1]);
    }
  }
  return ranges;
}

std::string ImageNetShardName(const std::string& split, int shard,
                              int num_shards) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "-%05d-of-%05d", shard, num_shards);
  return split + buf;
}

}  // namespace slimtorch
