#include "slimtorch/core/strings.h"

namespace slimtorch {

std::string Trim(const std::string& s, const char* whitespace) {
  const size_t b = s.find_first_not_of(whitespace);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(whitespace) - b + 1);
}

std::string Lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

}  // namespace slimtorch
