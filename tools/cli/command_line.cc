#include "cli/command_line.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

#include "cli/flag_help.h"
#include "slimtorch/core/environment.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/strings.h"

namespace slimtorch {
namespace {

// gflags' comma-separated lists (--flagfile=a,b, --fromenv, --undefok).
std::vector<std::string> SplitList(const std::string& flag,
                                   const std::string& value) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= value.size()) {
    size_t end = value.find(',', start);
    if (end == std::string::npos) end = value.size();
    SLIM_CHECK(end > start, "--", flag, ": empty entry in '", value, "'");
    items.push_back(value.substr(start, end - start));
    start = end + 1;
  }
  return items;
}

std::string ReadFlagfile(const std::string& path, const std::string& named_in) {
  const std::string where = named_in.empty() ? "" : ", named in " + named_in;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    SLIM_FAIL("--flagfile: cannot read '", path, "' (", std::strerror(errno),
              ")", where);
  }
  std::string data;
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      SLIM_FAIL("--flagfile: cannot read '", path, "' (", std::strerror(err),
                ")", where);
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return data;
}

std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) != nullptr ? std::string(buf) : path;
}

class Arranger {
 public:
  Arranger(const std::vector<KnownFlag>& known, const std::string& program)
      : known_(known), program_(program) {
    for (const KnownFlag& f : known_) {
      by_name_[f.name] = &f;
      names_.push_back(f.name);
    }
    const size_t slash = program_.rfind('/');
    program_base_ =
        slash == std::string::npos ? program_ : program_.substr(slash + 1);
  }

  ArrangedCommandLine Run(const std::vector<std::string>& args) {
    TakeUndefok(args);
    TakeCommandLine(args);
    NoteOverrides();
    return out_;
  }

 private:
  // --undefok from the command line first, so that unknown flags fail as
  // they are met, in order (gflags: after the whole command line).
  void TakeUndefok(const std::vector<std::string>& args) {
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--") break;
      for (const char* prefix : {"--undefok=", "-undefok="}) {
        if (args[i].rfind(prefix, 0) == 0) {
          AddUndefok(args[i].substr(std::strlen(prefix)));
        }
      }
      if ((args[i] == "--undefok" || args[i] == "-undefok") &&
          i + 1 < args.size()) {
        AddUndefok(args[i + 1]);
      }
    }
  }

  // The flags (flagfiles expanded as met) and arguments of the command line.
  void TakeCommandLine(const std::vector<std::string>& args) {
    bool flags_done = false;
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& arg = args[i];
      if (flags_done || arg.size() < 2 || arg[0] != '-') {
        out_.arguments.push_back(arg);
        continue;
      }
      const std::string body = arg.substr(arg[1] == '-' ? 2 : 1);
      if (body.empty()) {  // "--": the rest are arguments
        flags_done = true;
        continue;
      }
      FlagSetting s;
      s.origin = FlagSetting::Origin::kCommandLine;
      bool needs_value = false;
      if (!Split(body, arg, &s, &needs_value)) continue;  // unknown
      if (needs_value) {
        SLIM_CHECK(i + 1 < args.size(), "--", s.name, " needs a value (--",
                   s.name, "=VALUE)");
        s.value = args[++i];
        s.written = arg + "=" + s.value;
      }
      Add(s, /*in_flagfile=*/false);
    }
  }

  // The flagfile values the command line overrides, each flag once, in
  // the order of their last setting on the command line.
  void NoteOverrides() {
    std::map<std::string, const FlagSetting*> from_file;
    for (const FlagSetting& s : out_.from_flagfiles) from_file[s.name] = &s;
    std::vector<const FlagSetting*> last;
    for (const FlagSetting& s : out_.from_command_line) {
      last.erase(std::remove_if(
                     last.begin(), last.end(),
                     [&](const FlagSetting* p) { return p->name == s.name; }),
                 last.end());
      last.push_back(&s);
    }
    for (const FlagSetting* s : last) {
      auto it = from_file.find(s->name);
      if (it == from_file.end() || it->second->value == s->value) continue;
      out_.overrides.push_back(
          StrCat(s->written, " from ",
                 s->origin == FlagSetting::Origin::kEnvironment
                     ? "the environment ($FLAGS_" + s->name + ")"
                     : std::string("the command line"),
                 " overrides ", it->second->value, " from ", it->second->file));
    }
  }

  // Looks up "name[=value]" (`body`, without its dashes) into `s`. Throws
  // for an unknown name; false for one --undefok lets pass. `needs_value`: a
  // non-bool flag written without "=value".
  bool Split(const std::string& body, const std::string& written,
             FlagSetting* s, bool* needs_value) {
    const size_t eq = body.find('=');
    const std::string key = body.substr(0, eq);
    const bool has_value = eq != std::string::npos;
    s->written = written;
    *needs_value = false;
    bool negated = false;
    const KnownFlag* flag = Find(key);
    if (flag == nullptr && key.size() > 2 && key.compare(0, 2, "no") == 0) {
      flag = Find(key.substr(2));
      if (flag != nullptr) {
        SLIM_CHECK(flag->is_bool, "--", key, ": --", flag->name,
                   " is not a true/false flag (write --", flag->name, "=VALUE)",
                   Location(*s));
        SLIM_CHECK(!has_value, "--", key, " takes no value (write --",
                   flag->name, "=VALUE or --", key, ")", Location(*s));
        negated = true;
      }
    }
    if (flag == nullptr) {
      // As written: -h stays -h, --modle --modle.
      Unknown(written.compare(0, 2, "--") == 0 ? "--" : "-", key, Location(*s));
      return false;
    }
    s->name = flag->name;
    if (negated) {
      s->value = "false";
    } else if (has_value) {
      s->value = body.substr(eq + 1);
    } else if (flag->is_bool) {
      s->value = "true";
    } else {
      *needs_value = true;
    }
    return true;
  }

  const KnownFlag* Find(const std::string& key) const {
    auto it = by_name_.find(key);
    if (it != by_name_.end()) return it->second;
    std::string underscored = key;  // gflags: --model-name is --model_name
    std::replace(underscored.begin(), underscored.end(), '-', '_');
    it = by_name_.find(underscored);
    return it != by_name_.end() ? it->second : nullptr;
  }

  static std::string Location(const FlagSetting& s) {
    return s.origin == FlagSetting::Origin::kFlagfile ? " in " + s.Where()
                                                      : std::string();
  }

  // Files the setting `s` leads to: --flagfile's read in place, --fromenv's
  // variables, everything else as it is.
  void Add(const FlagSetting& s, bool in_flagfile) {
    std::vector<FlagSetting>& to =
        in_flagfile ? out_.from_flagfiles : out_.from_command_line;
    if (s.name == "flagfile") {
      if (s.value.empty()) return;  // gflags: --flagfile= reads nothing
      for (const std::string& path : SplitList("flagfile", s.value)) {
        ReadFile(path,
                 s.origin == FlagSetting::Origin::kFlagfile ? s.Where() : "");
      }
      return;
    }
    if (s.name == "fromenv" || s.name == "tryfromenv") {
      to.push_back(s);
      if (s.value.empty()) return;
      for (const std::string& name : SplitList(s.name, s.value)) {
        const KnownFlag* flag = Find(name);
        if (flag == nullptr) {
          Unknown("--", name, " in --" + s.name + Location(s));
          continue;
        }
        const std::string var = "FLAGS_" + name;
        const char* value = EnvironmentVariable(var.c_str());
        if (value == nullptr) {
          SLIM_CHECK(s.name == "tryfromenv", "--fromenv: $", var,
                     " is not set in the environment", Location(s));
          continue;
        }
        FlagSetting e;
        e.name = flag->name;
        e.value = value;
        e.written = "--" + flag->name + "=" + value;
        e.origin = FlagSetting::Origin::kEnvironment;
        e.file = var;
        to.push_back(e);
      }
      return;
    }
    if (s.name == "undefok") AddUndefok(s.value);
    to.push_back(s);
  }

  void ReadFile(const std::string& path, const std::string& named_in) {
    const std::string real = RealPath(path);
    SLIM_CHECK(std::find(open_.begin(), open_.end(), real) == open_.end(),
               "--flagfile: '", path, "' includes itself",
               named_in.empty() ? "" : " (named in " + named_in + ")");
    const std::string data = ReadFlagfile(path, named_in);
    open_.push_back(real);
    bool relevant = true;      // flags apply to this program
    bool in_programs = false;  // the previous line named programs
    size_t start = 0;
    int line_number = 0;
    while (start < data.size()) {
      size_t end = data.find('\n', start);
      if (end == std::string::npos) end = data.size();
      std::string line = data.substr(start, end - start);
      start = end + 1;
      ++line_number;
      // The line holds no '\n', so all of C's whitespace goes.
      line = Trim(line, kAsciiWhitespace);
      if (line.empty()) continue;
      if (line[0] == '#') continue;
      if (line[0] != '-') {
        // Program-name globs: the flags below apply when one matches.
        if (!in_programs) relevant = false;
        in_programs = true;
        size_t w = 0;
        while (!relevant && w < line.size()) {
          size_t space = line.find(' ', w);
          if (space == std::string::npos) space = line.size();
          const std::string glob = line.substr(w, space - w);
          if (!glob.empty() &&
              (::fnmatch(glob.c_str(), program_.c_str(), FNM_PATHNAME) == 0 ||
               ::fnmatch(glob.c_str(), program_base_.c_str(), FNM_PATHNAME) ==
                   0)) {
            relevant = true;
          }
          w = space + 1;
        }
        continue;
      }
      in_programs = false;
      if (!relevant) continue;
      FlagSetting s;
      s.origin = FlagSetting::Origin::kFlagfile;
      s.file = path;
      s.line = line_number;
      const std::string body =
          line.substr(line.size() > 1 && line[1] == '-' ? 2 : 1);
      bool needs_value = false;
      if (!Split(body, line, &s, &needs_value)) continue;
      SLIM_CHECK(!needs_value, "--", s.name, " needs a value (--", s.name,
                 "=VALUE) in ", s.Where());
      Add(s, /*in_flagfile=*/true);
    }
    open_.pop_back();
  }

  void AddUndefok(const std::string& list) {
    if (list.empty()) return;
    for (const std::string& name : SplitList("undefok", list)) {
      undefok_.insert(name);
    }
  }

  // Fails naming the nearest known flags, unless --undefok lists `key` (or,
  // as gflags, `key` without a leading "no").
  void Unknown(const std::string& dashes, const std::string& key,
               const std::string& where) const {
    if (undefok_.count(key) > 0) return;
    if (key.rfind("no", 0) == 0 && undefok_.count(key.substr(2)) > 0) return;
    std::vector<std::string> near;
    if ((key == "h" || key == "?") && by_name_.count("help") > 0) {
      near = {"help"};
    } else {
      near = NearestFlagNames(key, names_);
    }
    SLIM_FAIL("unknown flag ", dashes, key, where, DidYouMean(near));
  }

  const std::vector<KnownFlag>& known_;
  std::string program_;
  std::string program_base_;
  std::unordered_map<std::string, const KnownFlag*> by_name_;
  std::vector<std::string> names_;
  std::set<std::string> undefok_;
  std::vector<std::string> open_;  // the flagfiles being read, outermost first
  ArrangedCommandLine out_;
};

}  // namespace

std::string FlagSetting::Where() const {
  switch (origin) {
    case Origin::kFlagfile:
      return file + ":" + std::to_string(line);
    case Origin::kEnvironment:
      return "$" + file;
    case Origin::kCommandLine:
      break;
  }
  return "the command line";
}

std::vector<FlagSetting> ArrangedCommandLine::Settings() const {
  std::vector<FlagSetting> all = from_flagfiles;
  all.insert(all.end(), from_command_line.begin(), from_command_line.end());
  return all;
}

ArrangedCommandLine ArrangeCommandLine(const std::vector<std::string>& args,
                                       const std::vector<KnownFlag>& known,
                                       const std::string& program) {
  return Arranger(known, program).Run(args);
}

}  // namespace slimtorch
