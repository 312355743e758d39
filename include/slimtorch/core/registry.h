#pragma once
// Name → factory registries for datasets, nets, preprocessing, optimizers and
// learning-rate schedules.
//
// Each family owns one Registry<Factory> (a function-local static) and one
// registration macro. Entries register themselves from their .cc at static
// initialisation; the library is a shared library so the linker keeps them.
// Looking up an unknown name throws slimtorch::Error listing the valid names
// in sorted order; registering a name twice throws too.
//
// Thread safety: registration happens during static initialisation; lookups
// afterwards are read-only and safe from any thread.

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "slimtorch/core/error.h"

namespace slimtorch {

template <typename Factory>
class Registry {
 public:
  // `family` names the kind of entry in error messages ("model", "dataset").
  explicit Registry(std::string family) : family_(std::move(family)) {}

  void Register(const std::string& name, Factory factory) {
    SLIM_CHECK(!name.empty(), "empty ", family_, " name registered");
    SLIM_CHECK(aliases_.count(name) == 0 &&
                   entries_.emplace(name, std::move(factory)).second,
               family_, " '", name, "' registered twice");
  }

  // Registers `name` as another name of the entry `target`, which may
  // register before or after it: the alias has an entry while its target
  // does (Has, Get and the names list it then).
  void Alias(const std::string& name, const std::string& target) {
    SLIM_CHECK(!name.empty() && !target.empty() && name != target, family_,
               " alias '", name, "' -> '", target, "' is not a valid alias");
    SLIM_CHECK(
        entries_.count(name) == 0 && aliases_.emplace(name, target).second,
        family_, " '", name, "' registered twice");
  }
  // The entry `name` names: an alias's target, else `name` itself.
  const std::string& Resolve(const std::string& name) const {
    auto it = aliases_.find(name);
    return it == aliases_.end() ? name : it->second;
  }
  bool Has(const std::string& name) const {
    return entries_.count(Resolve(name)) > 0;
  }

  // Returns the factory for `name`; throws with the list of valid names.
  const Factory& Get(const std::string& name) const {
    auto it = entries_.find(Resolve(name));
    if (it == entries_.end()) {
      SLIM_FAIL("unknown ", family_, " name '", name, "'; valid names: ",
                JoinedNames());
    }
    return it->second;
  }

  // Registered names, and the aliases of registered entries, in sorted
  // order.
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& kv : entries_) names.push_back(kv.first);
    for (const auto& kv : aliases_) {
      if (entries_.count(kv.second) > 0 && entries_.count(kv.first) == 0) {
        names.push_back(kv.first);
      }
    }
    std::sort(names.begin(), names.end());
    return names;
  }
  std::string JoinedNames() const {
    std::string out;
    for (const std::string& name : Names()) {
      if (!out.empty()) out += ", ";
      out += name;
    }
    return out;
  }
  const std::string& family() const { return family_; }

 private:
  std::string family_;
  std::map<std::string, Factory> entries_;
  std::map<std::string, std::string> aliases_;
};

// Runs `fn` once at static initialisation; used by the registration macros.
struct StaticRegistration {
  template <typename Fn>
  explicit StaticRegistration(Fn fn) { fn(); }
};

}  // namespace slimtorch

#define SLIM_REGISTRY_CONCAT_INNER(a, b) a##b
#define SLIM_REGISTRY_CONCAT(a, b) SLIM_REGISTRY_CONCAT_INNER(a, b)
// Defines a uniquely named static whose constructor runs `...` (a lambda).
#define SLIM_STATIC_REGISTRATION(...)                                       \
  static ::slimtorch::StaticRegistration SLIM_REGISTRY_CONCAT(              \
      slim_static_registration_, __COUNTER__)(__VA_ARGS__)
