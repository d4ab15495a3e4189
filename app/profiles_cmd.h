// `servesim profiles import aiconfigurator|vidur DIR [--out ROOT]` and
// `servesim profiles compare A B`: converting measured datasets into servesim's profile format
// and comparing two profiles (for example a harness run against the shipped tables).
#pragma once

#include <ostream>
#include <string>

namespace servesim::app {

// Converts the dataset at `source_dir` and writes one profile directory per GPU under
// `out_root`/<gpu>/<source>/ (replacing what is there). Returns the number of profiles written.
int import_profiles(const std::string& kind, const std::string& source_dir,
                    const std::string& out_root, std::ostream& out);

// Prints per-table ratio statistics of profile `b` against profile `a`.
void compare_profile_dirs(const std::string& a, const std::string& b, std::ostream& out);

}  // namespace servesim::app
