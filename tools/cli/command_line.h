#pragma once
// The tools' command line, read before gflags sets any flag, so that
//  - an unknown flag fails naming the nearest known ones
//    ("unknown flag --model (did you mean --model_name?)"), on the command
//    line and in flagfiles alike (gflags ignores unknown flagfile lines);
//  - a missing or unreadable --flagfile fails with one message;
//  - flags written on the command line win over every --flagfile's,
//    wherever they stand (gflags lets whichever comes last win), and the
//    flagfile values they override are named.
// Flagfiles are read as gflags reads them: one --name=value a line, leading
// (and here also trailing) white space dropped, '#' comments, lines of
// program-name globs restricting the flags below them to matching programs,
// --flagfile lines read in place (comma-separated lists too), paths relative
// to the working directory. --fromenv / --tryfromenv read FLAGS_<name> from
// the environment in place. --undefok=a,b lets unknown --a / --b pass
// silently, as in gflags.
// The result is the settings in the order to apply them: every flagfile's
// (in the order read), then the command line's own (in the order written).

#include <string>
#include <vector>

namespace slimtorch {

// A flag the program defines.
struct KnownFlag {
  std::string name;
  bool is_bool = false;
};

// One value to give one flag.
struct FlagSetting {
  enum class Origin { kCommandLine, kFlagfile, kEnvironment };
  std::string name;     // the flag's registered name (model_name)
  std::string value;    // as gflags parses it; "true"/"false" for --x/--nox
  std::string written;  // as written: --model-name=lenet, --nouse_grayscale
  Origin origin = Origin::kCommandLine;
  std::string file;  // kFlagfile: the flagfile; kEnvironment: the variable
  int line = 0;      // kFlagfile: the line

  // "the command line", "configs/x.flags:3", "$FLAGS_batch_size".
  std::string Where() const;
};

struct ArrangedCommandLine {
  std::vector<FlagSetting> from_flagfiles;     // applied first
  std::vector<FlagSetting> from_command_line;  // applied last: they win
  // Arguments that are not flags (and everything after "--"), in order.
  std::vector<std::string> arguments;
  // One entry per flag given on the command line (or by --fromenv there)
  // with another value in a flagfile:
  // "--learning_rate=0.05 from the command line overrides 0.01 from
  // configs/x.flags".
  std::vector<std::string> overrides;

  // from_flagfiles then from_command_line.
  std::vector<FlagSetting> Settings() const;
};

// Reads `args` (argv without the program) against the `known` flags (listed
// best suggestion first: the tool's own before gflags' and glog's).
// `program` is argv[0], for flagfiles' program-name sections. Throws
// slimtorch::Error for an unknown flag, a flag without its value, an
// unreadable flagfile (message "--flagfile: cannot read 'F' (reason)"), a
// flagfile that includes itself, or a --fromenv variable that is not set.
ArrangedCommandLine ArrangeCommandLine(const std::vector<std::string>& args,
                                       const std::vector<KnownFlag>& known,
                                       const std::string& program);

}  // namespace slimtorch
