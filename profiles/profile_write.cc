// Writer of profile directories (FORMAT.md text rules). The text itself comes from to_csv() and
// meta_json() (profile_tables.cc) so that every producer writes byte-identical files.
#include "profiles/profile_tables.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <unordered_set>

#include "core/error.h"

namespace servesim::profiles {
namespace fs = std::filesystem;
namespace {

bool dtypes_known(const GemmRow& r) { return is_canonical_dtype(r.dtype); }
bool dtypes_known(const AttentionPrefillRow& r) {
  return is_canonical_dtype(r.dtype) && (r.kv_dtype.empty() || is_canonical_dtype(r.kv_dtype));
}
bool dtypes_known(const AttentionDecodeRow& r) {
  return is_canonical_dtype(r.dtype) && is_canonical_dtype(r.kv_dtype);
}
bool dtypes_known(const CollectiveRow& r) { return is_canonical_dtype(r.dtype); }
bool dtypes_known(const MoeRow& r) { return is_canonical_dtype(r.dtype); }
bool dtypes_known(const ElementwiseRow&) { return true; }
bool dtypes_known(const MemcpyRow&) { return true; }
bool dtypes_known(const ForwardRow&) { return true; }

// Throws Error unless every row has known dtypes, a finite non-negative latency and a unique key,
// so that whatever is written loads back unchanged.
template <typename Row>
void check_rows(const std::string& table, const std::vector<Row>& rows) {
  std::unordered_set<std::string> keys;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::string key = row_key(r);
    if (!dtypes_known(r)) {
      throw Error(fmt::format("write_profile: {} row {} ({}): a dtype is not a canonical name",
                              table, i, key));
    }
    if (!std::isfinite(r.latency_us) || r.latency_us < 0) {
      throw Error(
          fmt::format("write_profile: {} row {} ({}): expected a finite latency >= 0, "
                      "found {}",
                      table, i, key, r.latency_us));
    }
    if (!keys.insert(key).second) {
      throw Error(fmt::format("write_profile: {} has the key {} twice", table, key));
    }
  }
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    throw Error(fmt::format("cannot write {}", path.string()));
  }
}

}  // namespace

void write_profile(const Profile& profile, const std::string& dir) {
  check_rows("gemm", profile.gemm);
  check_rows("attention_prefill", profile.attention_prefill);
  check_rows("attention_decode", profile.attention_decode);
  check_rows("collective", profile.collective);
  check_rows("moe", profile.moe);
  check_rows("elementwise", profile.elementwise);
  check_rows("memcpy", profile.memcpy);
  check_rows("forward", profile.forward);

  fs::path root(dir);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) {
    throw Error(fmt::format("cannot create {}: {}", dir, ec.message()));
  }
  std::map<std::string, std::string> files = table_files(profile);
  auto emit = [&](const std::string& table, auto text_fn) {
    auto it = files.find(table);
    if (it != files.end()) {
      write_file(root / it->second, text_fn());
    } else {
      // A table file exists iff meta.json lists it: drop a stale one from an earlier write.
      fs::remove(root / (table + ".csv"), ec);
    }
  };
  emit("gemm", [&] { return to_csv(profile.gemm); });
  emit("attention_prefill", [&] { return to_csv(profile.attention_prefill); });
  emit("attention_decode", [&] { return to_csv(profile.attention_decode); });
  emit("collective", [&] { return to_csv(profile.collective); });
  emit("moe", [&] { return to_csv(profile.moe); });
  emit("elementwise", [&] { return to_csv(profile.elementwise); });
  emit("memcpy", [&] { return to_csv(profile.memcpy); });
  emit("forward", [&] { return to_csv(profile.forward); });
  write_file(root / "meta.json", meta_json(profile));
}

}  // namespace servesim::profiles
