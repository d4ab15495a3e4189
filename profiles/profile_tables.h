// Measured operator profiles: value types of servesim profile format v1 (profiles/FORMAT.md),
// and the loader and writer of profile directories.
//
// Contract:
// - One Profile = one directory: meta.json plus the tables it lists. Latencies are microseconds.
// - Loading validates everything up front: meta.json "format" must be "servesim-profile" and
//   "version" 1 (other versions are rejected); every CSV row must have the header's column count
//   and well-formed numbers. Errors are InputError with file and 1-based line.
// - Rows whose dtype is unknown to this version are skipped (FORMAT.md), never rejected.
// - Canonical dtype strings: "bf16", "fp16", "fp8_e4m3", "fp8_block", "nvfp4", "int8".
// - Pure value types: no dependency on the engine or the cost model.
#pragma once

#include <cstdint>
#include <map>
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
  std::string dir;  // where it was loaded from (empty when built in memory)
  ProfileMeta meta;
  std::vector<GemmRow> gemm;
  std::vector<AttentionPrefillRow> attention_prefill;
  std::vector<AttentionDecodeRow> attention_decode;
  std::vector<CollectiveRow> collective;
  std::vector<MoeRow> moe;
  std::vector<ElementwiseRow> elementwise;
  std::vector<MemcpyRow> memcpy;
  std::vector<ForwardRow> forward;
};

// Loads one profile directory. Throws InputError (file:line) on malformed content.
Profile load_profile(const std::string& dir);

// Every profile directory under `profiles_root`/`gpu`/ (sorted by name); empty if none.
std::vector<Profile> load_gpu_profiles(const std::string& profiles_root, const std::string& gpu);

// GPU keys that have at least one profile directory under `profiles_root`.
std::vector<std::string> profiled_gpus(const std::string& profiles_root);

// Writes meta.json and one CSV per non-empty table (FORMAT.md text rules), creating `dir`.
void write_profile(const Profile& profile, const std::string& dir);

}  // namespace servesim::profiles
