#pragma once
// Errors thrown by the slimtorch library.
//
// The library reports bad input and broken invariants by throwing
// slimtorch::Error with a message that names what was wrong (the file, the
// record, the flag or the value) and what was expected. Tools catch it in
// main(), log one line and exit non-zero. CHECK/LOG(FATAL) are for tools and
// tests only.

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace slimtorch {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
inline void StreamAll(std::ostringstream&) {}
template <typename T, typename... Rest>
void StreamAll(std::ostringstream& os, const T& first, const Rest&... rest) {
  os << first;
  StreamAll(os, rest...);
}
}  // namespace detail

// Concatenates all arguments with operator<< into one string.
template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream os;
  detail::StreamAll(os, args...);
  return os.str();
}

// A shape as error messages spell it: "[3, 3, 64, 128]", "[]" for a scalar.
inline std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace slimtorch

// Throws slimtorch::Error with the streamed message when `cond` is false.
//   SLIM_CHECK(n == 28, path, ": expected 28 rows, got ", n);
#define SLIM_CHECK(cond, ...)                                         \
  do {                                                                \
    if (!(cond)) {                                                    \
      throw ::slimtorch::Error(::slimtorch::StrCat(__VA_ARGS__));     \
    }                                                                 \
  } while (0)

// Throws slimtorch::Error unconditionally.
#define SLIM_FAIL(...) throw ::slimtorch::Error(::slimtorch::StrCat(__VA_ARGS__))
