// Fuzz target: --flagfile (tools/cli/command_line.h), the bytes as a flagfile
// given on a command line with flags of its own, against a few known flags
// of each kind (bool, string, number) and gflags' own.
#include "cli/command_line.h"
#include "fuzz_target.h"
#include "slimtorch/core/error.h"

SLIM_FUZZ_TARGET(flagfile) {
  using namespace slimtorch;  // NOLINT
  const std::string path = fuzz::FreshDir("flagfile") + "/recipe.flags";
  fuzz::WriteFile(path, std::string(reinterpret_cast<const char*>(data), size));
  static const std::vector<KnownFlag> known = {{"model_name", false},
                                               {"learning_rate", false},
                                               {"train_dir", false},
                                               {"use_grayscale", true},
                                               {"max_number_of_steps", false},
                                               {"flagfile", false},
                                               {"fromenv", false},
                                               {"tryfromenv", false},
                                               {"undefok", false},
                                               {"v", false}};
  try {
    ArrangeCommandLine({"--flagfile=" + path, "--learning_rate=0.1", "arg"},
                       known, "train_image_classifier");
  } catch (const Error&) {
  }
  return 0;
}
