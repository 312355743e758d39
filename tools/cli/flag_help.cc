#include "cli/flag_help.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>

namespace slimtorch {
namespace {

// Lower case, '-' as '_': the spellings gflags (dashes) and a careless
// hand (case) make of the same name.
std::string Normalized(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    c = c == '-'
            ? '_'
            : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

std::vector<std::string> Words(const std::string& s) {
  std::vector<std::string> words;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find('_', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) words.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return words;
}

// Candidate indices ordered by `score` (lower first), ties in input order.
template <typename Score>
std::vector<size_t> Ranked(std::vector<std::pair<Score, size_t>> scored) {
  std::stable_sort(
      scored.begin(), scored.end(),
      [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<size_t> out;
  for (const auto& s : scored) out.push_back(s.second);
  return out;
}

}  // namespace

std::string ShortestDouble(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  // The shortest round-trip digits, as d.ddde[+-]XX.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), std::fabs(v),
                           std::chars_format::scientific);
  const std::string sci(buf, res.ptr);
  const size_t e = sci.find('e');
  const int exponent = std::atoi(sci.c_str() + e + 1);
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  // Python's repr: positional for 1e-4 <= |v| < 1e16, else scientific.
  if (exponent < -4 || exponent >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    const int a = std::abs(exponent);
    out += std::string("e") + (exponent < 0 ? "-" : "+") + (a < 10 ? "0" : "") +
           std::to_string(a);
  } else if (exponent < 0) {
    out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  } else {
    const size_t int_digits = static_cast<size_t>(exponent) + 1;
    if (digits.size() <= int_digits) {
      out = digits + std::string(int_digits - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_digits) + "." + digits.substr(int_digits);
    }
  }
  return (v < 0 ? "-" : "") + out;
}

std::string DisplayFlagValue(const std::string& type,
                             const std::string& value) {
  if (type == "double") {
    char* end = nullptr;
    const double d = std::strtod(value.c_str(), &end);
    if (end != value.c_str() && *end == '\0') return ShortestDouble(d);
    return value;
  }
  if (type == "string") {
    std::string out = "\"";
    for (char c : value) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    return out + "\"";
  }
  return value;
}

size_t FlagEditDistance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  // d[i][j]: distance between a[0, i) and b[0, j).
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] =
          std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

namespace {

// The indices of `norm` (normalized candidates) that each way of matching
// `n` (the normalized name) picks, best first.

// 1. A small edit distance: the nearest only.
std::vector<size_t> ByEditDistance(const std::string& n,
                                   const std::vector<std::string>& norm) {
  std::vector<size_t> picked;
  const size_t limit = n.size() <= 5 ? 1 : n.size() <= 9 ? 2 : 3;
  size_t best = limit + 1;
  for (size_t i = 0; i < norm.size(); ++i) {
    const size_t d = FlagEditDistance(n, norm[i]);
    if (d < n.size()) best = std::min(best, d);
  }
  for (size_t i = 0; i < norm.size() && best <= limit; ++i) {
    if (FlagEditDistance(n, norm[i]) == best) picked.push_back(i);
  }
  return picked;
}

// 2. One is a prefix of the other.
std::vector<size_t> ByPrefix(const std::string& n,
                             const std::vector<std::string>& norm) {
  std::vector<std::pair<size_t, size_t>> scored;
  for (size_t i = 0; i < norm.size(); ++i) {
    const std::string& c = norm[i];
    const bool prefix = c.compare(0, n.size(), n) == 0 ||
                        (c.size() >= 3 && n.compare(0, c.size(), c) == 0);
    if (prefix) {
      scored.push_back(
          {c.size() > n.size() ? c.size() - n.size() : n.size() - c.size(), i});
    }
  }
  return Ranked(scored);
}

// 3. Contains it.
std::vector<size_t> ByContaining(const std::string& n,
                                 const std::vector<std::string>& norm) {
  std::vector<size_t> picked;
  for (size_t i = 0; i < norm.size(); ++i) {
    if (norm[i].find(n) != std::string::npos) picked.push_back(i);
  }
  return picked;
}

// 4. Shares whole words of 4+ letters.
std::vector<size_t> BySharedWords(const std::string& n,
                                  const std::vector<std::string>& norm) {
  std::set<std::string> words;
  for (const std::string& w : Words(n)) {
    if (w.size() >= 4) words.insert(w);
  }
  std::vector<std::pair<int, size_t>> scored;
  for (size_t i = 0; i < norm.size() && !words.empty(); ++i) {
    int shared = 0;
    for (const std::string& w : Words(norm[i])) shared += words.count(w);
    if (shared > 0) scored.push_back({-shared, i});
  }
  return Ranked(scored);
}

}  // namespace

std::vector<std::string> NearestFlagNames(
    const std::string& name, const std::vector<std::string>& candidates,
    size_t max_count) {
  const std::string n = Normalized(name);
  std::vector<std::string> norm;
  for (const std::string& c : candidates) norm.push_back(Normalized(c));
  std::vector<size_t> picked;
  if (!n.empty()) picked = ByEditDistance(n, norm);
  if (picked.empty() && n.size() >= 3) picked = ByPrefix(n, norm);
  if (picked.empty() && n.size() >= 4) picked = ByContaining(n, norm);
  if (picked.empty()) picked = BySharedWords(n, norm);
  std::vector<std::string> out;
  for (size_t i : picked) {
    if (out.size() == max_count) break;
    if (std::find(out.begin(), out.end(), candidates[i]) == out.end()) {
      out.push_back(candidates[i]);
    }
  }
  return out;
}

std::string DidYouMean(const std::vector<std::string>& names) {
  if (names.empty()) return "";
  std::string out = " (did you mean ";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += "--" + names[i];
  }
  return out + "?)";
}

std::vector<std::string> WrapText(const std::string& text, size_t width) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string paragraph = text.substr(start, end - start);
    std::string line;
    size_t i = 0;
    bool any = false;
    while (i < paragraph.size()) {
      while (i < paragraph.size() && paragraph[i] == ' ') ++i;
      if (i == paragraph.size()) break;
      size_t j = paragraph.find(' ', i);
      if (j == std::string::npos) j = paragraph.size();
      const std::string word = paragraph.substr(i, j - i);
      if (!line.empty() && line.size() + 1 + word.size() > width) {
        lines.push_back(line);
        line.clear();
      }
      line += (line.empty() ? "" : " ") + word;
      any = true;
      i = j;
    }
    if (any || paragraph.empty()) lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

std::string FormatFlagHelp(const std::vector<FlagHelpGroup>& groups,
                           size_t width) {
  constexpr size_t kHelpColumn = 32;
  const size_t help_width = width > kHelpColumn + 20 ? width - kHelpColumn : 20;
  const std::string pad(kHelpColumn, ' ');
  std::string out;
  bool first = true;
  for (const FlagHelpGroup& group : groups) {
    if (group.flags.empty()) continue;
    if (!first) out += "\n";
    first = false;
    out += group.title + ":\n";
    for (const FlagHelpLine& flag : group.flags) {
      std::string left = "  --" + flag.name + "=" + flag.default_value;
      const std::vector<std::string> help =
          flag.help.empty() ? std::vector<std::string>{}
                            : WrapText(flag.help, help_width);
      if (help.empty()) {
        out += left + "\n";
        continue;
      }
      size_t k = 0;
      if (left.size() + 2 <= kHelpColumn) {
        out +=
            left + std::string(kHelpColumn - left.size(), ' ') + help[0] + "\n";
        k = 1;
      } else {
        out += left + "\n";
      }
      for (; k < help.size(); ++k) out += pad + help[k] + "\n";
    }
  }
  return out;
}

}  // namespace slimtorch
