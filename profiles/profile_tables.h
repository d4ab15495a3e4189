// Measured operator profiles: value types of servesim profile format v1 (profiles/FORMAT.md),
// and the loader and writer of profile directories.
//
// Contract:
// - One Profile = one directory: meta.json plus the tables it lists. Latencies are microseconds.
// - Loading validates everything up front: meta.json "format" must be "servesim-profile" and
//   "version" 1 (other versions are rejected); every CSV row must have the header's column count
//   and well-formed numbers. Errors are InputError with file and 1-based line.
// - Rows whose dtype is unknown to this version are skipped (FORMAT.md), never rejected; they are
//   counted in Profile::unknown_dtype_rows. A key repeated within a table is rejected (InputError
//   naming the line of its first occurrence).
// - Writing refuses what would not load back (unknown dtypes, non-finite latencies, repeated
//   keys); every producer of profiles (harness, importers) gets its file text from to_csv() and
//   meta_json() below, so equal rows give byte-identical files.
// - Canonical dtype strings: "bf16", "fp16", "fp8_e4m3", "fp8_rowwise", "fp8_block", "nvfp4",
//   "int8", "int4_wo", "mxfp4".
// - Pure value types: no dependency on the engine or the cost model.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace servesim::profiles {

inline constexpr int kFormatVersion = 1;

// gemm.csv: D[m x n] = X[m x k] * W[n x k]^T, one GPU's shard.
struct GemmRow {
  std::string dtype;
  int64_t m = 0, n = 0, k = 0;
  double latency_us = 0;
};

// attention_prefill.csv: `batch` sequences, each `q_tokens` queries over prefix + q keys.
struct AttentionPrefillRow {
  std::string dtype;
  std::string kv_dtype;  // optional column; equals dtype when absent
  int64_t batch = 0, q_tokens = 0, prefix_tokens = 0;
  int num_heads = 0, num_kv_heads = 0, head_dim = 0;  // per GPU
  bool causal = true;
  double latency_us = 0;
};

// attention_decode.csv: `batch` sequences, one query each over `context_tokens` keys.
struct AttentionDecodeRow {
  std::string dtype;
  std::string kv_dtype;
  int64_t batch = 0, context_tokens = 0;
  int num_heads = 0, num_kv_heads = 0, head_dim = 0;  // per GPU
  double latency_us = 0;
};

// collective.csv: op in {all_reduce, all_gather, reduce_scatter, alltoall, send_recv,
// custom_all_reduce}; message_bytes per FORMAT.md; nodes = how many nodes the group spans
// (optional column, default 1).
struct CollectiveRow {
  std::string op;
  std::string dtype;
  int num_gpus = 0;
  int64_t message_bytes = 0;
  int nodes = 1;
  double latency_us = 0;
};

// moe.csv: one fused MoE layer on one rank (full-model hidden/inter/experts; the rank holds the
// shard implied by moe_tp / moe_ep). distribution: "balanced" or "power_law_<alpha>".
struct MoeRow {
  std::string dtype;
  int64_t num_tokens = 0, hidden_size = 0, inter_size = 0;
  int topk = 0, num_experts = 0, moe_tp = 1, moe_ep = 1;
  std::string distribution;
  double latency_us = 0;
};

// elementwise.csv: memory-bound per-layer operators measured for a model (Vidur): op in
// {input_layernorm, post_attention_layernorm, attn_rope, mlp_act, add, emb}; `model` is the
// catalog key (or the source's model name), `tp` the TP degree.
struct ElementwiseRow {
  std::string model;
  std::string op;
  int64_t num_tokens = 0;
  int tp = 1;
  double latency_us = 0;
};

// memcpy.csv
struct MemcpyRow {
  std::string kind;  // d2d, h2d, d2h, peer
  int64_t bytes = 0;
  double latency_us = 0;
};

// forward.csv: one whole forward pass of meta.model at meta.tp.
struct ForwardRow {
  std::string kind;  // prefill, decode
  int64_t batch = 0, q_tokens = 0, context_tokens = 0;
  bool graph = false;
  double latency_us = 0;
};

struct ProfileMeta {
  std::string gpu;       // catalog key
  std::string gpu_name;
  std::string source;    // "servesim-profile", "aiconfigurator", "vidur"
  std::string model;     // catalog key or "generic"
  int tp = 1;
  int64_t l2_bytes = 0;  // 0 when unknown
  std::string date;
  std::string license;
  // Every top-level string/number key of meta.json as text (provenance for reports).
  std::map<std::string, std::string> fields;
  std::map<std::string, std::string> skipped;
};

struct Profile {
  // Where it was loaded from; for an imported profile, its directory relative to a profiles root
  // (profile_subdir()); empty when built in memory otherwise.
  std::string dir;
  ProfileMeta meta;
  std::vector<GemmRow> gemm;
  std::vector<AttentionPrefillRow> attention_prefill;
  std::vector<AttentionDecodeRow> attention_decode;
  std::vector<CollectiveRow> collective;
  std::vector<MoeRow> moe;
  std::vector<ElementwiseRow> elementwise;
  std::vector<MemcpyRow> memcpy;
  std::vector<ForwardRow> forward;
  // Table name -> rows load_profile() skipped because a dtype is not one this version knows
  // (FORMAT.md: ignored row by row). Empty for profiles built in memory.
  std::map<std::string, int64_t> unknown_dtype_rows;
};

// Which tables load_profile() reads (the others stay empty).
struct LoadOptions {
  bool moe = true;  // false: skip the MoE table (the largest; a dense model never reads it)
  // load_gpu_profiles(): profiles of one serving engine's own kernels (meta.json "engine") are
  // loaded only for that engine ("" : for none); nullopt loads every profile. Profiles without
  // an "engine" are always loaded.
  std::optional<std::string> engine;
};

// Loads one profile directory. Throws InputError (file:line) on malformed content.
Profile load_profile(const std::string& dir, const LoadOptions& options = {});

// Every profile directory under `profiles_root`/`gpu`/ (sorted by name) that LoadOptions::engine
// admits; empty if none.
std::vector<Profile> load_gpu_profiles(const std::string& profiles_root, const std::string& gpu,
                                       const LoadOptions& options = {});

// GPU keys that have at least one profile directory under `profiles_root`.
std::vector<std::string> profiled_gpus(const std::string& profiles_root);

// Writes meta.json and one CSV per non-empty table (FORMAT.md text rules), creating `dir`.
// A `<table>.csv` left in `dir` for a table that is now empty is removed (a file exists iff
// meta.json lists it). Throws Error, before writing anything, for rows that would not load back
// (unknown dtype, latency not finite or negative, repeated key), and on I/O failure.
void write_profile(const Profile& profile, const std::string& dir);

// ---- Shared helpers of the format (used by the loader, the writers, importers and compare).

// Table names of this version, in FORMAT.md order ("gemm", "attention_prefill", ...).
const std::vector<std::string>& table_names();

// Canonical dtype string for `name`, accepting the aliases found in third-party data
// ("bfloat16" -> "bf16", "float16"/"half" -> "fp16", "fp8" -> "fp8_e4m3"); canonical names map to
// themselves. Returns "" for a name this version does not know.
std::string canonical_dtype(const std::string& name);

// True when `dtype` is already a canonical name of this version (not an alias, not unknown).
inline bool is_canonical_dtype(const std::string& dtype) { return canonical_dtype(dtype) == dtype; }

// Maps a CUDA device name to servesim's GPU catalog key (models/catalog/gpus.json), e.g.
// "NVIDIA H100 80GB HBM3" -> "h100_sxm". Unknown names map to the lowercase name with every run of
// characters outside [a-z0-9] replaced by '_' and a leading "nvidia_" removed ("unknown_gpu" if
// nothing is left).
std::string gpu_catalog_key(const std::string& device_name);

// A latency as written to the CSVs: fixed-point with exactly three digits after the point
// (nanosecond resolution). REQUIRES: finite.
std::string format_latency_us(double latency_us);

// The key of a row: every column except latency_us as comma-separated canonical text (optional
// columns with their defaults filled in). Two rows of one table with equal keys are duplicates.
std::string row_key(const GemmRow& row);
std::string row_key(const AttentionPrefillRow& row);
std::string row_key(const AttentionDecodeRow& row);
std::string row_key(const CollectiveRow& row);
std::string row_key(const MoeRow& row);
std::string row_key(const ElementwiseRow& row);
std::string row_key(const MemcpyRow& row);
std::string row_key(const ForwardRow& row);

// CSV text of one table: the header line, then one line per row in the given order, '\n' line
// ends. Optional columns (attention_prefill kv_dtype, collective nodes) are written only when some
// row differs from the column's default, so rows without them print as before they existed.
std::string to_csv(const std::vector<GemmRow>& rows);
std::string to_csv(const std::vector<AttentionPrefillRow>& rows);
std::string to_csv(const std::vector<AttentionDecodeRow>& rows);
std::string to_csv(const std::vector<CollectiveRow>& rows);
std::string to_csv(const std::vector<MoeRow>& rows);
std::string to_csv(const std::vector<ElementwiseRow>& rows);
std::string to_csv(const std::vector<MemcpyRow>& rows);
std::string to_csv(const std::vector<ForwardRow>& rows);

// Table name -> file name ("gemm" -> "gemm.csv") for every non-empty table of `profile`.
std::map<std::string, std::string> table_files(const Profile& profile);

// Text of meta.json: "format" and "version", then the keys of FORMAT.md in its order (values from
// the ProfileMeta members where it has one, else from meta.fields, else "" / 0 for required keys;
// integer keys as JSON numbers), then the other meta.fields keys sorted (as strings), then
// "tables" (table_files) and "skipped". Two-space indent, ends with '\n'.
std::string meta_json(const Profile& profile);

// Conventional directory of a profile relative to the profiles root, "<gpu>/<name>": name is
// "servesim_harness" for source "servesim-profile", else the source with characters outside
// [a-z0-9_] replaced by '_'; then "_<variant>" when meta.fields has a non-empty "variant"; then
// "_<model>" unless the model is "generic"; then "_tp<N>" for shapes of tensor-parallel degree
// N > 1. E.g. "h100_sxm/aiconfigurator_vllm", "h100_sxm/servesim_harness_llama-3.1-8b",
// "h100_sxm/servesim_harness_qwen3-32b_tp4".
std::string profile_subdir(const Profile& profile);

// The serving engine whose own kernels a profile timed (meta.json "engine": LoadOptions::engine,
// models::ProfiledParams::engine_tables), or "" for tables that serve every deployment.
const std::string& kernel_engine(const ProfileMeta& meta);

}  // namespace servesim::profiles
