// Name -> factory registry for plugins (policies, routers, loaders).
//
// Contract: names are lower_snake strings, unique per registry (a duplicate is a hard error at
// registration). Lookup of an unknown name throws ConfigError-friendly std::invalid_argument whose
// message lists the valid names. Iteration order is sorted by name (deterministic).
// Each registry is a function-local static (see the accessor each family defines), which avoids
// the static-initialisation-order problem.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace servesim {

template <typename Entry>
class Registry {
 public:
  explicit Registry(std::string family) : family_(std::move(family)) {}

  // Throws std::logic_error if `name` is already registered.
  void add(const std::string& name, Entry entry) {
    if (!entries_.emplace(name, std::move(entry)).second) {
      throw std::logic_error(fmt::format("duplicate {} name \"{}\"", family_, name));
    }
  }

  bool contains(const std::string& name) const { return entries_.count(name) != 0; }

  // Throws std::invalid_argument naming the valid values if `name` is unknown.
  const Entry& get(const std::string& name) const {
    auto it = entries_.find(name);
    if (it == entries_.end()) {
      throw std::invalid_argument(
          fmt::format("unknown {} \"{}\"; valid values are: {}", family_, name, valid_names()));
    }
    return it->second;
  }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [name, entry] : entries_) out.push_back(name);
    return out;
  }

  std::string valid_names() const { return fmt::format("{}", fmt::join(names(), ", ")); }
  const std::map<std::string, Entry>& entries() const { return entries_; }
  const std::string& family() const { return family_; }

 private:
  std::string family_;
  std::map<std::string, Entry> entries_;
};

}  // namespace servesim
