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
    SLIM_CHECK(entries_.emplace(name, std::move(factory)).second,
               family_, " '", name, "' registered twice");
  }

  bool Has(const std::string& name) const { return entries_.count(name) > 0; }

  // Returns the factory for `name`; throws with the list of valid names.
  const Factory& Get(const std::string& name) const {
    auto it = entries_.find(name);
    if (it == entries_.end()) {
      SLIM_FAIL("unknown ", family_, " name '", name, "'; valid names: ",
                JoinedNames());
    }
    return it->second;
  }

  // Registered names in sorted order.
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& kv : entries_) names.push_back(kv.first);
    return names;
  }

  std::string JoinedNames() const {
    std::string out;
    for (const auto& kv : entries_) {
      if (!out.empty()) out += ", ";
      out += kv.first;
    }
    return out;
  }

  const std::string& family() const { return family_; }

 private:
  std::string family_;
  std::map<std::string, Factory> entries_;
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
