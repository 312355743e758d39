// Replays files through the fuzz targets of tests/fuzz/ without libFuzzer:
// the CTest tests fuzz_<target> (label `fuzz`) run
//   slimtorch_fuzz_replay <target> tests/fuzz/corpus/<target> \
//       tests/fuzz/regressions/<target>
// Each argument after the target is a file or a folder of files (missing
// folders are skipped; at least one input is required). Exits 1 when a
// target lets an exception other than slimtorch::Error out; a crash names
// the input it died on. `slimtorch_fuzz_replay --list` prints the targets.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_target.h"

namespace {

namespace fs = std::filesystem;

// The input being replayed, for the crash handler (no allocation there).
char g_current[4096];

void OnCrash(int sig) {
  const char* head = "fuzz replay: crashed on input ";
  ssize_t ignored = ::write(2, head, std::strlen(head));
  ignored = ::write(2, g_current, std::strlen(g_current));
  ignored = ::write(2, "\n", 1);
  (void)ignored;
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

std::vector<fs::path> Inputs(int argc, char** argv) {
  std::vector<fs::path> files;
  for (int i = 2; i < argc; ++i) {
    const fs::path p(argv[i]);
    if (fs::is_regular_file(p)) {
      files.push_back(p);
    } else if (fs::is_directory(p)) {
      for (const auto& e : fs::directory_iterator(p)) {
        if (e.is_regular_file() && e.path().filename().string()[0] != '.') {
          files.push_back(e.path());
        }
      }
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  using slimtorch::fuzz::Targets;
  std::sort(Targets().begin(), Targets().end());
  if (argc == 2 && std::string(argv[1]) == "--list") {
    for (const auto& t : Targets()) std::cout << t.first << "\n";
    return 0;
  }
  if (argc < 3) {
    std::cerr << "usage: slimtorch_fuzz_replay TARGET PATH... | --list\n";
    return 2;
  }
  auto target = std::find_if(Targets().begin(), Targets().end(),
                             [&](const auto& t) { return t.first == argv[1]; });
  if (target == Targets().end()) {
    std::cerr << "fuzz replay: unknown target '" << argv[1]
              << "' (--list names them)\n";
    return 2;
  }
  const std::vector<fs::path> files = Inputs(argc, argv);
  if (files.empty()) {
    std::cerr << "fuzz replay: no inputs for " << argv[1] << "\n";
    return 2;
  }
  for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL}) {
    std::signal(sig, OnCrash);
  }
  const auto start = std::chrono::steady_clock::now();
  for (const fs::path& f : files) {
    std::snprintf(g_current, sizeof(g_current), "%s", f.c_str());
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)),
                            std::istreambuf_iterator<char>());
    try {
      target->second(reinterpret_cast<const uint8_t*>(bytes.data()),
                     bytes.size());
    } catch (const std::exception& e) {
      std::cerr << "fuzz replay: " << f.string() << ": finding: " << e.what()
                << "\n";
      return 1;
    }
  }
  const double seconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - start)
                             .count();
  std::cout << "fuzz replay: " << argv[1] << ": " << files.size()
            << " inputs, no finding (" << seconds << " s)\n";
  return 0;
}
