// Loader of profile directories (FORMAT.md): meta.json first, then every table it lists.
#include "profiles/profile_tables.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "profiles/profile_csv.h"
#include "profiles/profile_meta_keys.h"
#include "core/error.h"
#include "core/rng.h"

namespace servesim::profiles {
namespace fs = std::filesystem;
namespace {

// A hash of a row's key fields (row_key(): every column but latency_us), without formatting it.
uint64_t field_hash(const std::string& s) { return std::hash<std::string_view>{}(s); }
uint64_t field_hash(int64_t v) { return static_cast<uint64_t>(v); }
template <typename... Fields>
uint64_t fields_hash(const Fields&... fields) {
  uint64_t h = 0;
  ((h = mix64(h, field_hash(fields))), ...);
  return h;
}
uint64_t key_hash(const GemmRow& r) { return fields_hash(r.dtype, r.m, r.n, r.k); }
uint64_t key_hash(const AttentionPrefillRow& r) {
  return fields_hash(r.dtype, r.kv_dtype.empty() ? r.dtype : r.kv_dtype, r.batch, r.q_tokens,
                     r.prefix_tokens, r.num_heads, r.num_kv_heads, r.head_dim, int64_t{r.causal});
}
uint64_t key_hash(const AttentionDecodeRow& r) {
  return fields_hash(r.dtype, r.kv_dtype.empty() ? r.dtype : r.kv_dtype, r.batch, r.context_tokens,
                     r.num_heads, r.num_kv_heads, r.head_dim);
}
uint64_t key_hash(const CollectiveRow& r) {
  return fields_hash(r.op, r.dtype, r.num_gpus, r.message_bytes, r.nodes);
}
uint64_t key_hash(const MoeRow& r) {
  return fields_hash(r.dtype, r.num_tokens, r.hidden_size, r.inter_size, r.topk, r.num_experts,
                     r.moe_tp, r.moe_ep, r.distribution);
}
uint64_t key_hash(const ElementwiseRow& r) {
  return fields_hash(r.model, r.op, r.num_tokens, r.tp);
}
uint64_t key_hash(const MemcpyRow& r) { return fields_hash(r.kind, r.bytes); }
uint64_t key_hash(const ForwardRow& r) {
  return fields_hash(r.kind, r.batch, r.q_tokens, r.context_tokens, int64_t{r.graph});
}

// Rejects a second row with the same key (FORMAT.md: a key appears at most once per file). Rows
// are compared by key_hash() as they are read, in an open-addressing table of the rows seen (no
// allocation per row), and by row_key() only where hashes match, so the keys of a file without
// repeats are never formatted.
template <typename Row>
class DuplicateCheck {
 public:
  DuplicateCheck(const CsvReader& csv, const std::vector<Row>& rows) : csv_(csv), rows_(rows) {}
  // Checks rows_.back(), read from the current line, against the rows added before it.
  void add_last() {
    if (2 * (count_ + 1) > slots_.size()) grow();
    const size_t index = rows_.size() - 1;
    const uint64_t h = key_hash(rows_[index]);
    size_t at = slot_of(h);
    for (; slots_[at].line != 0; at = (at + 1) & (slots_.size() - 1)) {
      if (slots_[at].hash != h) continue;
      const std::string key = row_key(rows_[index]);
      if (row_key(rows_[slots_[at].index]) == key) {
        csv_.fail(fmt::format(
            "expected each key (every column but latency_us) at most once, found {} again "
            "(first on line {})",
            key, slots_[at].line));
      }
    }
    slots_[at] = {h, index, csv_.line()};
    count_++;
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    size_t index = 0;  // into rows_
    long line = 0;     // 0: empty (data lines start at 2)
  };
  size_t slot_of(uint64_t h) const { return static_cast<size_t>(h >> 7) & (slots_.size() - 1); }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(std::max<size_t>(1024, 2 * old.size()), Slot{});
    for (const Slot& e : old) {
      if (e.line == 0) continue;
      size_t at = slot_of(e.hash);
      while (slots_[at].line != 0) at = (at + 1) & (slots_.size() - 1);
      slots_[at] = e;
    }
  }
  const CsvReader& csv_;
  const std::vector<Row>& rows_;
  std::vector<Slot> slots_;
  size_t count_ = 0;
};

void load_gemm(const std::string& path, Profile* p) {
  const char* expected = "dtype,m,n,k,latency_us";
  CsvReader csv(path);
  int dtype = csv.require("dtype", expected), m = csv.require("m", expected),
      n = csv.require("n", expected), k = csv.require("k", expected),
      lat = csv.require("latency_us", expected);
  DuplicateCheck dups(csv, p->gemm);
  while (csv.next()) {
    GemmRow r;
    r.dtype = csv.text(dtype);
    if (!is_canonical_dtype(r.dtype)) {
      ++p->unknown_dtype_rows["gemm"];
      continue;
    }
    r.m = csv.integer(m, 1);
    r.n = csv.integer(n, 1);
    r.k = csv.integer(k, 1);
    r.latency_us = csv.non_negative(lat);
    p->gemm.push_back(std::move(r));
    dups.add_last();
  }
}

void load_prefill(const std::string& path, Profile* p) {
  const char* expected =
      "dtype,batch,q_tokens,prefix_tokens,num_heads,num_kv_heads,head_dim,causal,latency_us "
      "(optional kv_dtype)";
  CsvReader csv(path);
  int dtype = csv.require("dtype", expected), batch = csv.require("batch", expected),
      q = csv.require("q_tokens", expected), prefix = csv.require("prefix_tokens", expected),
      heads = csv.require("num_heads", expected), kv_heads = csv.require("num_kv_heads", expected),
      head_dim = csv.require("head_dim", expected), causal = csv.require("causal", expected),
      lat = csv.require("latency_us", expected), kv_dtype = csv.find("kv_dtype");
  DuplicateCheck dups(csv, p->attention_prefill);
  while (csv.next()) {
    AttentionPrefillRow r;
    r.dtype = csv.text(dtype);
    r.kv_dtype = kv_dtype < 0 ? r.dtype : csv.text(kv_dtype);
    if (!is_canonical_dtype(r.dtype) || !is_canonical_dtype(r.kv_dtype)) {
      ++p->unknown_dtype_rows["attention_prefill"];
      continue;
    }
    r.batch = csv.integer(batch, 1);
    r.q_tokens = csv.integer(q, 1);
    r.prefix_tokens = csv.integer(prefix, 0);
    r.num_heads = csv.small_integer(heads, 1);
    r.num_kv_heads = csv.small_integer(kv_heads, 1);
    r.head_dim = csv.small_integer(head_dim, 1);
    r.causal = csv.boolean(causal);
    r.latency_us = csv.non_negative(lat);
    p->attention_prefill.push_back(std::move(r));
    dups.add_last();
  }
}

void load_decode(const std::string& path, Profile* p) {
  const char* expected =
      "dtype,kv_dtype,batch,context_tokens,num_heads,num_kv_heads,head_dim,latency_us";
  CsvReader csv(path);
  int dtype = csv.require("dtype", expected), kv_dtype = csv.require("kv_dtype", expected),
      batch = csv.require("batch", expected), context = csv.require("context_tokens", expected),
      heads = csv.require("num_heads", expected), kv_heads = csv.require("num_kv_heads", expected),
      head_dim = csv.require("head_dim", expected), lat = csv.require("latency_us", expected);
  DuplicateCheck dups(csv, p->attention_decode);
  while (csv.next()) {
    AttentionDecodeRow r;
    r.dtype = csv.text(dtype);
    r.kv_dtype = csv.text(kv_dtype);
    if (!is_canonical_dtype(r.dtype) || !is_canonical_dtype(r.kv_dtype)) {
      ++p->unknown_dtype_rows["attention_decode"];
      continue;
    }
    r.batch = csv.integer(batch, 1);
    r.context_tokens = csv.integer(context, 1);
    r.num_heads = csv.small_integer(heads, 1);
    r.num_kv_heads = csv.small_integer(kv_heads, 1);
    r.head_dim = csv.small_integer(head_dim, 1);
    r.latency_us = csv.non_negative(lat);
    p->attention_decode.push_back(std::move(r));
    dups.add_last();
  }
}

void load_collective(const std::string& path, Profile* p) {
  const char* expected = "op,dtype,num_gpus,message_bytes,latency_us (optional nodes)";
  CsvReader csv(path);
  int op = csv.require("op", expected), dtype = csv.require("dtype", expected),
      gpus = csv.require("num_gpus", expected), bytes = csv.require("message_bytes", expected),
      lat = csv.require("latency_us", expected), nodes = csv.find("nodes");
  DuplicateCheck dups(csv, p->collective);
  while (csv.next()) {
    CollectiveRow r;
    r.dtype = csv.text(dtype);
    if (!is_canonical_dtype(r.dtype)) {
      ++p->unknown_dtype_rows["collective"];
      continue;
    }
    r.op = csv.non_empty(op);
    r.num_gpus = csv.small_integer(gpus, 1);
    r.message_bytes = csv.integer(bytes, 1);
    r.nodes = nodes < 0 ? 1 : csv.small_integer(nodes, 1);
    r.latency_us = csv.non_negative(lat);
    p->collective.push_back(std::move(r));
    dups.add_last();
  }
}

void load_moe(const std::string& path, Profile* p) {
  const char* expected =
      "dtype,num_tokens,hidden_size,inter_size,topk,num_experts,moe_tp,moe_ep,distribution,"
      "latency_us";
  CsvReader csv(path);
  int dtype = csv.require("dtype", expected), tokens = csv.require("num_tokens", expected),
      hidden = csv.require("hidden_size", expected), inter = csv.require("inter_size", expected),
      topk = csv.require("topk", expected), experts = csv.require("num_experts", expected),
      moe_tp = csv.require("moe_tp", expected), moe_ep = csv.require("moe_ep", expected),
      dist = csv.require("distribution", expected), lat = csv.require("latency_us", expected);
  DuplicateCheck dups(csv, p->moe);
  while (csv.next()) {
    MoeRow r;
    r.dtype = csv.text(dtype);
    if (!is_canonical_dtype(r.dtype)) {
      ++p->unknown_dtype_rows["moe"];
      continue;
    }
    r.num_tokens = csv.integer(tokens, 1);
    r.hidden_size = csv.integer(hidden, 1);
    r.inter_size = csv.integer(inter, 1);
    r.topk = csv.small_integer(topk, 1);
    r.num_experts = csv.small_integer(experts, 1);
    r.moe_tp = csv.small_integer(moe_tp, 1);
    r.moe_ep = csv.small_integer(moe_ep, 1);
    r.distribution = csv.non_empty(dist);
    r.latency_us = csv.non_negative(lat);
    p->moe.push_back(std::move(r));
    dups.add_last();
  }
}

void load_elementwise(const std::string& path, Profile* p) {
  const char* expected = "model,op,num_tokens,tp,latency_us";
  CsvReader csv(path);
  int model = csv.require("model", expected), op = csv.require("op", expected),
      tokens = csv.require("num_tokens", expected), tp = csv.require("tp", expected),
      lat = csv.require("latency_us", expected);
  DuplicateCheck dups(csv, p->elementwise);
  while (csv.next()) {
    ElementwiseRow r;
    r.model = csv.non_empty(model);
    r.op = csv.non_empty(op);
    r.num_tokens = csv.integer(tokens, 1);
    r.tp = csv.small_integer(tp, 1);
    r.latency_us = csv.non_negative(lat);
    p->elementwise.push_back(std::move(r));
    dups.add_last();
  }
}

void load_memcpy(const std::string& path, Profile* p) {
  const char* expected = "kind,bytes,latency_us";
  CsvReader csv(path);
  int kind = csv.require("kind", expected), bytes = csv.require("bytes", expected),
      lat = csv.require("latency_us", expected);
  DuplicateCheck dups(csv, p->memcpy);
  while (csv.next()) {
    MemcpyRow r;
    r.kind = csv.non_empty(kind);
    r.bytes = csv.integer(bytes, 1);
    r.latency_us = csv.non_negative(lat);
    p->memcpy.push_back(std::move(r));
    dups.add_last();
  }
}

void load_forward(const std::string& path, Profile* p) {
  const char* expected = "kind,batch,q_tokens,context_tokens,graph,latency_us";
  CsvReader csv(path);
  int kind = csv.require("kind", expected), batch = csv.require("batch", expected),
      q = csv.require("q_tokens", expected), context = csv.require("context_tokens", expected),
      graph = csv.require("graph", expected), lat = csv.require("latency_us", expected);
  DuplicateCheck dups(csv, p->forward);
  while (csv.next()) {
    ForwardRow r;
    r.kind = csv.non_empty(kind);
    r.batch = csv.integer(batch, 1);
    r.q_tokens = csv.integer(q, 1);
    r.context_tokens = csv.integer(context, 0);
    r.graph = csv.boolean(graph);
    r.latency_us = csv.non_negative(lat);
    p->forward.push_back(std::move(r));
    dups.add_last();
  }
}

std::string json_type(const nlohmann::json& value) {
  if (value.is_null()) {
    return "null";
  }
  if (value.is_string()) {
    return "the string " + value.dump();
  }
  if (value.is_number_integer() || value.is_number_unsigned()) {
    return "the integer " + value.dump();
  }
  if (value.is_number()) {
    return "the number " + value.dump();
  }
  return std::string(value.type_name()) + " " + value.dump();
}

// Reads meta.json into p->meta. Returns the "tables" object.
nlohmann::json load_meta(const std::string& path, Profile* p) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InputError(path, 0, "cannot open file (a profile directory must hold a meta.json)");
  }
  std::ostringstream text;
  text << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    // parse_error, or out_of_range.406 for a number beyond a double's range (1e999).
    throw InputError(path, 0,
                     fmt::format("expected a JSON object, found invalid JSON ({})", e.what()));
  }
  if (!j.is_object()) {
    throw InputError(path, 0, fmt::format("expected a JSON object, found {}", json_type(j)));
  }
  auto format = j.find("format");
  if (format == j.end() || !format->is_string() || format->get<std::string>() != kFormatName) {
    throw InputError(path, 0,
                     fmt::format("\"format\": expected \"{}\", found {}", kFormatName,
                                 format == j.end() ? "no such key" : json_type(*format)));
  }
  auto version = j.find("version");
  if (version == j.end() || !version->is_number_integer()) {
    throw InputError(path, 0,
                     fmt::format("\"version\": expected the integer {}, found {}", kFormatVersion,
                                 version == j.end() ? "no such key" : json_type(*version)));
  }
  if (version->get<int64_t>() != kFormatVersion) {
    throw InputError(path, 0,
                     fmt::format("\"version\": expected {}, found {} (this servesim reads profile "
                                 "format version {} only)",
                                 kFormatVersion, version->get<int64_t>(), kFormatVersion));
  }
  std::vector<std::string> issues;
  for (const MetaKey& key : meta_keys()) {
    auto it = j.find(key.name);
    if (it == j.end()) {
      if (key.required) {
        issues.push_back(fmt::format("\"{}\": expected {}, found no such key", key.name,
                                     key.integer ? "an integer" : "a string"));
      }
    } else if (key.integer ? !it->is_number_integer() : !it->is_string()) {
      issues.push_back(fmt::format("\"{}\": expected {}, found {}", key.name,
                                   key.integer ? "an integer" : "a string", json_type(*it)));
    }
  }
  for (const char* name : {"tables", "skipped"}) {
    auto it = j.find(name);
    bool ok = it != j.end() && it->is_object() &&
              std::all_of(it->begin(), it->end(), [](const auto& v) { return v.is_string(); });
    if (!ok) {
      issues.push_back(fmt::format("\"{}\": expected an object of strings, found {}", name,
                                   it == j.end() ? "no such key" : json_type(*it)));
    }
  }
  if (!issues.empty()) {
    std::string message;
    for (const std::string& issue : issues) {
      message += (message.empty() ? "" : "; ") + issue;
    }
    throw InputError(path, 0, message);
  }
  ProfileMeta& m = p->meta;
  for (const auto& [key, value] : j.items()) {
    if (value.is_string()) {
      m.fields[key] = value.get<std::string>();
    } else if (value.is_number() || value.is_boolean()) {
      m.fields[key] = value.dump();
    }
  }
  m.gpu = j["gpu"].get<std::string>();
  m.gpu_name = j["gpu_name"].get<std::string>();
  m.source = j["source"].get<std::string>();
  m.model = j["model"].get<std::string>();
  int64_t tp = j["tp"].get<int64_t>();
  if (tp < 1 || tp > 1 << 20) {
    throw InputError(path, 0, fmt::format("\"tp\": expected a positive integer, found {}", tp));
  }
  m.tp = static_cast<int>(tp);
  m.l2_bytes = j["l2_bytes"].get<int64_t>();
  m.date = j["date"].get<std::string>();
  m.license = j["license"].get<std::string>();
  for (const auto& [name, why] : j["skipped"].items()) {
    m.skipped[name] = why.get<std::string>();
  }
  return j["tables"];
}

// Whether LoadOptions::engine admits the profile of `meta`.
bool engine_admits(const ProfileMeta& meta, const LoadOptions& options) {
  const std::string& engine = kernel_engine(meta);
  return !options.engine || engine.empty() || engine == *options.engine;
}

// load_profile(), or nullopt, its tables unread, where `by_engine` and LoadOptions::engine
// refuse its meta (load_gpu_profiles()).
std::optional<Profile> load_admitted(const std::string& dir, const LoadOptions& options,
                                     bool by_engine) {
  Profile p;
  p.dir = dir;
  fs::path root(dir);
  std::string meta_path = (root / "meta.json").string();
  nlohmann::json tables = load_meta(meta_path, &p);
  if (by_engine && !engine_admits(p.meta, options)) return std::nullopt;
  using Loader = void (*)(const std::string&, Profile*);
  const std::vector<std::pair<std::string, Loader>> loaders = {{"gemm", load_gemm},
                                                               {"attention_prefill", load_prefill},
                                                               {"attention_decode", load_decode},
                                                               {"collective", load_collective},
                                                               {"moe", load_moe},
                                                               {"elementwise", load_elementwise},
                                                               {"memcpy", load_memcpy},
                                                               {"forward", load_forward}};
  for (const auto& [name, loader] : loaders) {
    auto it = tables.find(name);
    if (it == tables.end()) {
      continue;  // absent table; unknown table names are ignored (FORMAT.md versioning)
    }
    if (name == "moe" && !options.moe) continue;
    std::string file = it->get<std::string>();
    fs::path path = root / file;
    if (file.empty() || !fs::is_regular_file(path)) {
      throw InputError(meta_path, 0,
                       fmt::format("\"tables\": expected the file \"{}\" of table {} in {}, found "
                                   "no such file",
                                   file, name, dir));
    }
    loader(path.string(), &p);
  }
  // The tables are kept for the whole run (and cached across a plan's runs): no growth slack.
  p.gemm.shrink_to_fit();
  p.attention_prefill.shrink_to_fit();
  p.attention_decode.shrink_to_fit();
  p.collective.shrink_to_fit();
  p.moe.shrink_to_fit();
  p.elementwise.shrink_to_fit();
  p.memcpy.shrink_to_fit();
  p.forward.shrink_to_fit();
  return p;
}

}  // namespace

Profile load_profile(const std::string& dir, const LoadOptions& options) {
  return *load_admitted(dir, options, false);
}

std::vector<Profile> load_gpu_profiles(const std::string& profiles_root, const std::string& gpu,
                                       const LoadOptions& options) {
  std::vector<std::string> dirs;
  fs::path base = fs::path(profiles_root) / gpu;
  std::error_code ec;
  if (!fs::is_directory(base, ec)) {
    return {};
  }
  for (const fs::directory_entry& entry : fs::directory_iterator(base)) {
    if (entry.is_directory() && fs::is_regular_file(entry.path() / "meta.json")) {
      dirs.push_back(entry.path().string());
    }
  }
  std::sort(dirs.begin(), dirs.end());
  std::vector<Profile> profiles;
  profiles.reserve(dirs.size());
  for (const std::string& d : dirs) {
    if (std::optional<Profile> p = load_admitted(d, options, true)) {
      profiles.push_back(std::move(*p));
    }
  }
  return profiles;
}

std::vector<std::string> profiled_gpus(const std::string& profiles_root) {
  std::vector<std::string> gpus;
  std::error_code ec;
  if (!fs::is_directory(profiles_root, ec)) {
    return gpus;
  }
  for (const fs::directory_entry& gpu_dir : fs::directory_iterator(profiles_root)) {
    if (!gpu_dir.is_directory()) {
      continue;
    }
    for (const fs::directory_entry& entry : fs::directory_iterator(gpu_dir.path())) {
      if (entry.is_directory() && fs::is_regular_file(entry.path() / "meta.json")) {
        gpus.push_back(gpu_dir.path().filename().string());
        break;
      }
    }
  }
  std::sort(gpus.begin(), gpus.end());
  return gpus;
}

}  // namespace servesim::profiles
