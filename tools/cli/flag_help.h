#pragma once
// The pure parts of the tools' --help and flag errors: how a flag's default
// is shown, which known flags a misspelt one is nearest to, and the grouped
// help text. No gflags here: tools/tool_common.cc feeds these from gflags'
// registry.

#include <cstddef>
#include <string>
#include <vector>

namespace slimtorch {

// The shortest decimal that reads back as exactly `v`, written as Python's
// repr writes a float (absl's --help shows TF-Slim's defaults so): 0.95 (not
// gflags' 0.94999999999999996), 4e-05, 2.0, 255.0, 1e+16, inf, nan.
std::string ShortestDouble(double v);

// A flag's value as --help shows it, from gflags' type name and value
// string: doubles by ShortestDouble, strings in double quotes (with \ and "
// escaped), everything else as gflags spells it (32, true).
std::string DisplayFlagValue(const std::string& type, const std::string& value);

// Edit distance (optimal string alignment: insertions, deletions,
// substitutions and swaps of two neighbours each cost 1).
size_t FlagEditDistance(const std::string& a, const std::string& b);

// The known flags a mistyped `name` most likely meant, at most `max_count`,
// best first (ties keep the order of `candidates`, so list the tool's own
// flags first). Tried in turn, the first kind that finds any wins:
//   1. names within a small edit distance (1 for up to 5 letters, up to 3
//      for long names), the nearest only: lerning_rate -> learning_rate;
//   2. names that start with `name` or that `name` starts with (3+ letters),
//      shortest difference first: model -> model_name, model_summary;
//   3. names containing `name` (4+ letters): steps -> max_number_of_steps;
//   4. names sharing a whole _-separated word of 4+ letters with `name`,
//      most shared words first: train_steps -> max_number_of_steps, ....
// Case and '-' against '_' do not count as differences.
std::vector<std::string> NearestFlagNames(
    const std::string& name, const std::vector<std::string>& candidates,
    size_t max_count = 3);

// " (did you mean --a?)", " (did you mean --a or --b?)",
// " (did you mean --a, --b or --c?)"; empty for no names.
std::string DidYouMean(const std::vector<std::string>& names);

// One flag of --help: its name, its default as DisplayFlagValue shows it,
// and its help text.
struct FlagHelpLine {
  std::string name;
  std::string default_value;
  std::string help;
};

// A titled group of flags ("Optimizer", "Learning rate", ...).
struct FlagHelpGroup {
  std::string title;
  std::vector<FlagHelpLine> flags;
};

// The groups as --help prints them, `width` columns wide:
//   Title:
//     --name=default            help text, wrapped at word boundaries to
//                               the width in a column of its own
// A flag whose --name=default is too wide for the left column has its help
// on the lines below it. Groups without flags are left out; a blank line
// separates groups.
std::string FormatFlagHelp(const std::vector<FlagHelpGroup>& groups,
                           size_t width = 80);

// `text` as lines of at most `width` characters, broken at spaces (runs of
// spaces between words become one); a word longer than a line stays whole.
// Newlines in `text` start new lines.
std::vector<std::string> WrapText(const std::string& text, size_t width);

}  // namespace slimtorch
