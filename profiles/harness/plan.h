// Measurement plan of servesim-profile: which operator shapes are timed, and roughly how long that
// takes. Plain C++ (no CUDA), so the plan is built, printed and unit-tested without a GPU.
//
// Contract:
//  - build_plan() is a pure function of PlanOptions: same options, same points, same order.
//  - Shapes are per GPU: GEMM n/k are the tensor-parallel shard of the model's weights, attention
//    heads are the heads one GPU holds (num_heads / tp, num_kv_heads / tp but at least 1).
//  - Token and byte counts are int64_t; the estimate is in seconds (double).
#ifndef SERVESIM_PROFILES_HARNESS_PLAN_H_
#define SERVESIM_PROFILES_HARNESS_PLAN_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace servesim::profiling {

// Thrown for bad options and unreadable model files; the executable maps it to exit code 2.
class HarnessError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Appends `text` to the skip note of `table` ("; "-separated).
inline void add_skip_note(std::map<std::string, std::string>* skipped, const std::string& table,
                          const std::string& text) {
  std::string& note = (*skipped)[table];
  note += (note.empty() ? "" : "; ") + text;
}

// The transformer dimensions the harness needs, read from a servesim catalog model JSON.
struct ModelShape {
  std::string key;  // catalog key: the file name without ".json", e.g. "llama-3.1-8b"
  std::string name;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
  int64_t vocab_size = 0;
  bool gated_mlp = true;
  // True for diffusion LLMs (catalog key "diffusion_llm" present): prefill attention is
  // bidirectional instead of causal.
  bool bidirectional = false;
};

// Parses the catalog fields listed in ModelShape. REQUIRES: `text` is a JSON object.
// Throws HarnessError naming every missing or non-positive field.
ModelShape parse_model_shape(const std::string& text, const std::string& key);
// Reads and parses a model file; the key is the file's stem.
ModelShape load_model_shape(const std::string& path);

enum class Op { kGemm, kAttentionPrefill, kAttentionDecode, kCollective, kMemcpy, kForward };

// Table name of an op, as used in --ops, the CSV file stem and meta.json "tables".
std::string op_name(Op op);
// Parses a comma-separated --ops list. Throws HarnessError listing the valid names.
std::set<Op> parse_ops(const std::string& list);
std::vector<Op> all_ops();

// GEMM table dtypes the harness can time, one per FP8 scaling recipe (lt_matmul.h): "bf16",
// "fp8_e4m3" (per-tensor), "fp8_rowwise" (per-channel weights, per-token activations),
// "fp8_block" (128 x 128 weight blocks, 1 x 128 activation blocks).
const std::vector<std::string>& gemm_dtype_names();
// Parses a comma-separated --gemm-dtypes list. Throws HarnessError listing the valid names.
std::vector<std::string> parse_gemm_dtypes(const std::string& list);

struct PlanOptions {
  std::optional<ModelShape> model;  // nullopt: the generic grid
  int tp = 1;
  std::set<Op> ops = {Op::kGemm,       Op::kAttentionPrefill, Op::kAttentionDecode,
                      Op::kCollective, Op::kMemcpy,           Op::kForward};
  bool quick = false;
  int reps = 20;                                 // timed repetitions per point (median reported)
  int warmup = 3;                                // untimed runs per point
  double max_seconds = 0.0;                      // whole-run budget; 0 = unlimited
  int num_gpus = 1;                              // GPUs taking part in collectives and peer copies
  bool fp8 = true;                               // the GPU has fp8 tensor cores (sm_89+)
  std::vector<std::string> gemm_dtypes = {"bf16", "fp8_e4m3"};  // GEMM table dtypes
  int64_t gpu_memory_bytes = int64_t{80} << 30;  // bounds the attention working sets
};

struct GemmPoint {
  std::string layer;  // "qkv", "o", "gate_up", "down", "lm_head" or "grid" (not in the CSV)
  std::string dtype;  // one of gemm_dtype_names()
  int64_t m = 0;      // tokens
  int64_t n = 0;
  int64_t k = 0;
};

struct PrefillPoint {
  std::string dtype;  // "bf16"
  int64_t batch = 0;
  int64_t q_tokens = 0;       // query tokens per sequence
  int64_t prefix_tokens = 0;  // cached tokens each query also attends to
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  bool causal = true;
};

struct DecodePoint {
  std::string dtype;     // "bf16"
  std::string kv_dtype;  // "bf16"
  int64_t batch = 0;
  int64_t context_tokens = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
};

struct CollectivePoint {
  std::string op;     // "all_reduce" or "all_gather"
  std::string dtype;  // "bf16"
  int num_gpus = 0;
  int64_t message_bytes = 0;  // all_reduce: buffer size; all_gather: output buffer size
};

struct MemcpyPoint {
  std::string kind;  // "d2d", "h2d", "d2h" (pinned host), "peer"
  int64_t bytes = 0;
};

// One GPU's share of a whole model forward pass (forward.csv): the shapes of every operator.
struct ForwardModel {
  int64_t num_layers = 0;
  int64_t hidden = 0;
  int64_t num_heads = 0;     // query heads on this GPU
  int64_t num_kv_heads = 0;  // KV heads on this GPU (at least 1)
  int64_t head_dim = 0;
  int64_t qkv_n = 0;      // (num_heads + 2 num_kv_heads) head_dim
  int64_t mlp_n = 0;      // gate_up GEMM output width: 2 I / tp (I / tp without a gated MLP)
  int64_t mlp_inner = 0;  // I / tp: down GEMM input width
  int64_t vocab = 0;      // V / tp: LM head output width
  bool gated_mlp = true;
  bool causal = true;  // prefill attention mask (false for diffusion LLMs)
};

// One row of forward.csv. kind "prefill": batch sequences of q_tokens new tokens each, no cached
// prefix (context_tokens == q_tokens). kind "decode": batch sequences of one new token each
// attending context_tokens cached tokens (the new one included; q_tokens == 1). graph: the pass is
// replayed as one captured CUDA graph instead of launched kernel by kernel.
struct ForwardPoint {
  std::string kind;
  int64_t batch = 0;
  int64_t q_tokens = 0;
  int64_t context_tokens = 0;
  bool graph = false;

  int64_t tokens() const { return batch * q_tokens; }  // rows of the layer GEMMs
};

struct Plan {
  std::string model_key;  // ModelShape::key or "generic"
  int tp = 1;
  bool quick = false;
  int reps = 0;
  int warmup = 0;
  std::vector<GemmPoint> gemm;
  std::vector<PrefillPoint> prefill;
  std::vector<DecodePoint> decode;
  std::vector<CollectivePoint> collective;
  std::vector<MemcpyPoint> memcpy;
  ForwardModel forward_model;  // set when `forward` is planned
  std::vector<ForwardPoint> forward;
  // Table name -> why it (or part of it) is not measured, e.g. collective with one GPU.
  std::map<std::string, std::string> skipped;
};

// Token counts (GEMM m) of the full and the --quick grid.
std::vector<int64_t> token_grid(bool quick);

// REQUIRES: options.tp >= 1 and divides the model's heads (throws HarnessError otherwise).
Plan build_plan(const PlanOptions& options);

// Bytes of device memory one prefill / decode point needs (Q, K, V, O; no workspace).
int64_t prefill_working_set_bytes(const PrefillPoint& p);
int64_t decode_working_set_bytes(const DecodePoint& p);

// Per-GPU shapes of `model`'s forward pass at tensor-parallel degree tp.
ForwardModel forward_model(const ModelShape& model, int tp);
// Device memory of a forward point: every layer's weights and the LM head (allocated separately,
// as a real model holds them), the KV cache of all layers for the point's sequences, and the
// activations of one layer.
int64_t forward_weight_bytes(const ForwardModel& m);
int64_t forward_kv_bytes(const ForwardModel& m, const ForwardPoint& p);
int64_t forward_activation_bytes(const ForwardModel& m, const ForwardPoint& p);
int64_t forward_working_set_bytes(const ForwardModel& m, const ForwardPoint& p);
// Fraction of the GPU memory a forward point may use (the rest: CUDA context, library
// workspaces, allocator slack).
inline constexpr double kForwardMemoryFraction = 0.9;

// Estimated kernel time of a point on an H100-class GPU (roofline with fixed efficiencies).
double estimate_point_us(const GemmPoint& p);
double estimate_point_us(const PrefillPoint& p);
double estimate_point_us(const DecodePoint& p);
double estimate_point_us(const ForwardModel& m, const ForwardPoint& p);

// Estimated wall time of the whole plan in seconds (> 0 for a non-empty plan): kernel time over
// warm-up and repetitions, L2 flushes, and per-point setup (cuDNN plan builds dominate).
double estimate_plan_seconds(const Plan& plan);

// Human-readable plan: one line per table with its point count and estimated time, then totals.
std::string format_plan(const Plan& plan);

}  // namespace servesim::profiling

#endif  // SERVESIM_PROFILES_HARNESS_PLAN_H_
