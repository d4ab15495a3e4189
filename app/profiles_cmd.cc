#include "app/profiles_cmd.h"

#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "profiles/compare.h"
#include "profiles/import_aiconfigurator.h"
#include "profiles/import_vidur.h"
#include "profiles/profile_tables.h"

namespace servesim::app {
namespace fs = std::filesystem;

int import_profiles(const std::string& kind, const std::string& source_dir,
                    const std::string& out_root, std::ostream& out) {
  std::vector<profiles::Profile> converted;
  if (kind == "aiconfigurator") {
    converted = profiles::import_aiconfigurator(source_dir);
  } else if (kind == "vidur") {
    converted = profiles::import_vidur(source_dir);
  } else {
    throw std::invalid_argument(
        fmt::format("unknown profile source \"{}\"; valid values are: aiconfigurator, vidur", kind));
  }
  for (const auto& p : converted) {
    const std::string dir = p.dir.empty() ? (fs::path(out_root) / p.meta.gpu / p.meta.source).string()
                                          : (fs::path(out_root) / p.dir).string();
    profiles::write_profile(p, dir);
    out << fmt::format("{:<40} gemm {:>6}  prefill {:>6}  decode {:>6}  collective {:>5}  moe {:>6}  "
                       "elementwise {:>5}\n",
                       dir, p.gemm.size(), p.attention_prefill.size(), p.attention_decode.size(),
                       p.collective.size(), p.moe.size(), p.elementwise.size());
  }
  return static_cast<int>(converted.size());
}

void compare_profile_dirs(const std::string& a, const std::string& b, std::ostream& out) {
  out << profiles::compare_profiles(profiles::load_profile(a), profiles::load_profile(b));
}

}  // namespace servesim::app
