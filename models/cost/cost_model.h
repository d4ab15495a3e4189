// Iteration cost model: the virtual GPU.
//
// Contract: value types in, a Duration out. A cost model never sees the engine: it is given the
// shape of one forward pass (one Segment per request in the batch) and returns how long that pass
// takes on the deployment (model x GPU x TP degree x dtypes). Deterministic. Models that count
// lookups (lookup_stats) are used by one thread at a time; build one per engine. The planner
// calls it analytically, without a simulation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/catalog/expert_routing.h"
#include "models/catalog/hardware.h"
#include "core/time.h"

namespace servesim::models {

// One request's share of a forward pass.
struct Segment {
  int64_t query_tokens = 0;    // tokens computed this pass (prefill chunk length, 1 for decode)
  int64_t context_tokens = 0;  // tokens attended by the last query token, including the query
                               // itself (= tokens already in KV + query_tokens)
  int64_t logit_rows = 0;      // rows sent through the LM head (1 per sampled token; 0 for a
                               // prefill chunk that does not finish the prompt)
};

// A segment that verifies speculative drafts (models/cost/speculative.h): the pending token and
// its drafts, each sampled (logit_rows == query_tokens > 1). Its queries are decode queries over
// the request's KV (the engines run them through their decode attention kernels, several query
// rows per request), not a prompt chunk; a prompt chunk samples at most one row.
inline bool is_verification(const Segment& s) {
  return s.query_tokens > 1 && s.logit_rows == s.query_tokens;
}

// A pass of `decodes` plain decode segments (query_tokens 1 each) whose context_tokens sum to
// `context_tokens`, `logit_rows` of them sampled (1 each; CUDA-graph padding rows sample none):
// all a cost model needs of such a batch. REQUIRES: 0 <= logit_rows <= decodes <= context_tokens.
struct DecodePass {
  int64_t decodes = 0;
  int64_t context_tokens = 0;
  int64_t logit_rows = 0;
};

// The images of one request that a multimodal model's vision encoder reads in a pass (before the
// request's first prompt chunk, whose leading tokens they become; models/cost/vision.h).
struct EncoderInput {
  int64_t images = 0;             // >= 1
  int64_t patches_per_image = 0;  // >= 1
};

// A forward pass. `segments` is reused by callers to avoid per-iteration allocation.
struct BatchShape {
  std::vector<Segment> segments;
  // Images encoded in this pass, one entry per request (empty for text). Only the vision-encoder
  // model (make_vision_cost_model) prices them; every other model reads the segments alone.
  std::vector<EncoderInput> encoder_inputs;

  int64_t total_query_tokens() const;
  int64_t total_logit_rows() const;
  bool empty() const { return segments.empty(); }
  void clear() {
    segments.clear();
    encoder_inputs.clear();
  }
};

// Where a forward pass runs.
struct Deployment {
  const ModelSpec* model = nullptr;
  const GpuSpec* gpu = nullptr;
  int tp = 1;                        // tensor-parallel degree (GPUs per instance)
  Dtype weight_dtype = Dtype::kBf16;
  Dtype kv_dtype = Dtype::kBf16;
  // Expert-parallel degree of a MoE model's routed experts inside the tp GPUs (1: every rank
  // holds every expert, sharded by TP). With ep > 1 each rank holds num_experts / ep whole-width
  // experts sharded by moe_tp = tp / ep; attention stays TP over all tp GPUs, so the tokens are
  // replicated on every rank, each rank runs its experts on the tokens routed to them, and the
  // layer's all-reduce combines them (the TensorRT-LLM / vLLM layout without attention DP).
  int ep = 1;
  // Attention data parallelism of a MoE model (TensorRT-LLM's enable_attention_dp, SGLang's
  // --enable-dp-attention): the instance is attention_dp ranks of `tp` GPUs each (tp x attention_dp
  // GPUs in all). Each rank holds the attention and dense weights (sharded by tp), its own
  // requests and their KV; the routed experts are split over all the instance's GPUs, ep ways
  // (ep divides tp x attention_dp), and see every rank's tokens (gathered before the MoE layer,
  // scattered after it). 1: no attention DP. Built by make_attention_dp_cost_model().
  int attention_dp = 1;
  // Pipeline parallelism: the model's layers split into pp stages of tp GPUs each (tp x pp GPUs).
  // Each GPU holds the weights of its stage's layers; micro-batches flow through the stages, so a
  // pass takes the whole model's time plus the activations' hand-offs between stages, while pp
  // passes are in flight at once (make_pipeline_cost_model(), pipeline.h; the scenario runs each
  // pipeline as pp engine instances, its micro-batch slots). 1: no pipeline parallelism. Not with
  // attention_dp > 1.
  int pp = 1;
  // How a MoE model's tokens spread over its experts (expert_routing.h): sets the busiest
  // expert-parallel rank's rows and the experts a pass reaches. Unset: the model's own default
  // (ModelSpec::expert_routing). Ignored for dense models.
  std::optional<ExpertRouting> expert_routing{};

  int gpus() const { return tp * attention_dp * pp; }
  // expert_routing, else the model's default. REQUIRES: model != nullptr.
  ExpertRouting routing() const { return expert_routing ? *expert_routing : model->expert_routing; }
};

// Per-operator time of one forward pass, summed over layers.
struct OperatorTimes {
  Duration qkv_gemm{}, o_gemm{}, mlp_gemm{}, attention_prefill{}, attention_decode{},
      norms_elementwise{}, allreduce{}, lm_head{}, overhead{};
  Duration total() const;
  OperatorTimes& operator+=(const OperatorTimes& other);  // operator by operator
};

// Where predicted time came from, summed over every iteration_time() call of one model object.
// A measured-profile model splits time by how each operator was looked up; the roofline model
// reports everything as analytic.
struct LookupStats {
  double interpolated_s = 0;  // inside a measured grid (or exactly on a point)
  double extrapolated_s = 0;  // outside every measured grid: fitted roofline or edge extension
  double analytic_s = 0;      // operators no table covers (overhead, roofline-only GPUs)
  int64_t lookups = 0;        // operator lookups made
  LookupStats& operator+=(const LookupStats& other);  // field by field
  // extrapolated / (interpolated + extrapolated); 0 when nothing was looked up in tables.
  double extrapolated_share() const {
    const double t = interpolated_s + extrapolated_s;
    return t > 0 ? extrapolated_s / t : 0.0;
  }
};

class IterationCostModel {
 public:
  // Accumulated since construction. Counting makes iteration_time() not thread-safe: use one
  // model object per engine (they are cheap to build).
  virtual LookupStats lookup_stats() const { return {}; }

  virtual ~IterationCostModel() = default;
  // REQUIRES: !shape.empty(). Returns the wall time of the pass, including per-iteration overhead.
  virtual Duration iteration_time(const BatchShape& shape) const = 0;
  // The time of a decode pass given by its sums, without the segments: exactly iteration_time()
  // of any shape with those sums (and counted in lookup_stats() as it would count it), or nullopt
  // where the model needs the segments themselves (a sliding window); the caller then builds
  // the shape. REQUIRES: pass.decodes >= 1 and each context within the segment bounds. Lets
  // steady decode advance without walking the batch every iteration.
  virtual std::optional<Duration> decode_iteration_time(const DecodePass& /*pass*/) const {
    return std::nullopt;
  }
  // The time of a pass of the plain decode segments `run` sums up, listed first, then the
  // segments of `rest`: exactly iteration_time() of that whole shape (and counted as it would
  // count it), or nullopt, having counted nothing, where the model needs every segment (the
  // caller then builds the whole shape). REQUIRES: as decode_iteration_time() for `run`, and
  // `rest` not empty. Lets a batch of many decode steps and a few prompt chunks be priced without
  // listing the decode steps.
  virtual std::optional<Duration> mixed_iteration_time(const DecodePass& /*run*/,
                                                       const BatchShape& /*rest*/) const {
    return std::nullopt;
  }
  virtual OperatorTimes breakdown(const BatchShape& shape) const = 0;
  // breakdown(), counted in lookup_stats() as iteration_time() counts the same pass. Models whose
  // breakdown sums to iteration_time() price the pass once; this default prices it twice.
  virtual OperatorTimes counted_breakdown(const BatchShape& shape) const {
    iteration_time(shape);
    return breakdown(shape);
  }
  // A lower bound on iteration_time(): peak FLOP/s and peak bandwidth, no overhead. Used by
  // analytic checks (simulated throughput may never beat it) and the planner's rate bound.
  virtual Duration peak_bound_time(const BatchShape& shape) const = 0;
  // peak_bound_time() split by operator class (its total() is peak_bound_time()), for models
  // built from others (attention data parallelism). This default, for models that cannot split
  // their bound, puts all of it in `overhead`.
  virtual OperatorTimes peak_bound_breakdown(const BatchShape& shape) const {
    OperatorTimes t;
    t.overhead = peak_bound_time(shape);
    return t;
  }
  virtual std::string describe() const = 0;
};

// Builds plain cost models (attention_dp 1, pp 1) of a deployment: make_profiled_cost_model or
// make_roofline_cost_model with their other arguments bound. The attention-DP and pipeline
// models (attention_dp.h, pipeline.h) compose the plain models they build with it.
using PlainCostModelFactory =
    std::function<std::unique_ptr<IterationCostModel>(const Deployment& plain)>;

// Key/value heads held by one TP rank: num_kv_heads / tp, or 1 when there are fewer KV heads than
// ranks (each rank then keeps a replica of one KV head, as vLLM does).
int kv_heads_per_rank(const ModelSpec& model, int tp);

// KV bytes one TP rank keeps per token for one attention layer: 2 * kv_heads_per_rank * head_dim *
// dtype_bytes(kv), or for MLA (kv_lora_rank + qk_rope_head_dim) * dtype_bytes(kv) on every rank
// (the latent has no heads to shard, so each rank holds all of it).
int64_t kv_bytes_per_token_per_rank_layer(const ModelSpec& model, int tp, Dtype kv_dtype);

// True when `tp` can shard `model`: tp >= 1, tp divides num_attention_heads, and either tp
// divides num_kv_heads (num_kv_heads >= tp) or num_kv_heads divides tp (replicated KV heads).
bool is_valid_tp(const ModelSpec& model, int tp);
// Why `ep` cannot split `model`'s experts inside the instance's tp x attention_dp GPUs ("" when it
// can): ep >= 1, and with ep > 1 a MoE model whose num_experts ep divides, and ep dividing
// tp x attention_dp; attention_dp >= 1, and above 1 a MoE model.
std::string expert_parallel_error(const ModelSpec& model, int tp, int ep, int attention_dp = 1);
// Why `pp` pipeline stages cannot split `model` ("" when they can): 1 <= pp <= num_layers, and
// not together with attention data parallelism.
std::string pipeline_parallel_error(const ModelSpec& model, int pp, int attention_dp = 1);
// The deployment's parallelism as cost-model descriptions print it: "tp4", "tp4 ep2", with
// attention DP "tp1 dp8 ep8", with pipeline stages "tp8 pp2".
std::string parallelism_label(const Deployment& d);

// Throws std::invalid_argument when the model or GPU pointer is null or kv_dtype is not a KV
// format, CapacityError when the GPU has no tensor cores for the weight dtype (nvfp4 without
// FP4) or (listing the valid degrees) when the TP degree cannot shard the model.
void validate_deployment(const Deployment& deployment);

// Knobs of the roofline model. Efficiencies multiply the GPU's peak numbers.
struct RooflineParams {
  double compute_efficiency = 0;   // 0 = derive from the GPU's measured matmul peak (else 0.75)
  double memory_efficiency = 0.8;  // achievable fraction of DRAM bandwidth
  double link_efficiency = 0.7;    // achievable fraction of NVLink/PCIe bandwidth for all-reduce
  Duration kernel_launch{2000};    // fixed latency per operator kernel (2 us)
  Duration allreduce_latency{8000};  // fixed latency per all-reduce (8 us)
  Duration iteration_overhead{2'000'000};  // scheduler/launch/CPU time per iteration (2 ms)
};

// Throws CapacityError if the deployment is not valid (TP does not divide the heads), and
// std::invalid_argument for a null model/GPU or out-of-range params. The returned model keeps its
// own copies of the model and GPU specs.
std::unique_ptr<IterationCostModel> make_roofline_cost_model(const Deployment& deployment,
                                                             const RooflineParams& params);

}  // namespace servesim::models
