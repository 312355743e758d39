#pragma once
// Small string helpers shared by the readers of text files (labels,
// dataset specs, metadata) and by file-name checks.

#include <string>

namespace slimtorch {

// Spaces, tabs and carriage returns: what a hand-edited text line may carry
// around its content (a CRLF file leaves the '\r').
inline constexpr const char* kLineWhitespace = " \t\r";
// What C's isspace() and Python's str.strip() take for whitespace.
inline constexpr const char* kAsciiWhitespace = " \t\n\v\f\r";

// `s` without the leading and trailing characters found in `whitespace`;
// "" when `s` holds nothing else.
std::string Trim(const std::string& s,
                 const char* whitespace = kLineWhitespace);

// `s` with ASCII 'A'..'Z' lowered; every other byte (UTF-8 included) kept,
// whatever the locale.
std::string Lower(std::string s);

}  // namespace slimtorch
