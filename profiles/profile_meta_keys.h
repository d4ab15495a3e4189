// The meta.json keys of FORMAT.md, in its order. Internal to servesim_profiles (loader and
// writer share it so that both agree on which keys are typed and which are required).
#pragma once

#include <string>
#include <vector>

namespace servesim::profiles {

inline constexpr const char* kFormatName = "servesim-profile";

struct MetaKey {
  std::string name;
  bool required = true;  // FORMAT.md marks it with *
  bool integer = false;  // a JSON integer (else a string)
};

// gpu ... license: every provenance key of FORMAT.md between "version" and "tables".
const std::vector<MetaKey>& meta_keys();

// True for "format", "version", "tables", "skipped" and the keys of meta_keys().
bool is_reserved_meta_key(const std::string& key);

}  // namespace servesim::profiles
