// Roofline iteration cost model.
//
// One forward pass is decomposed into operators per layer and per TP rank; each operator costs
// max(FLOPs / achievable FLOP/s, bytes / achievable B/s) plus a fixed kernel latency, and the pass
// adds a fixed per-iteration overhead. All shapes are per rank (TP shards N or K of each GEMM).
//
//  - GEMMs, M = sum of query tokens, weights in the deployment's weight dtype, activations 16-bit:
//      QKV     N = (H/t + 2 * kvh_rank) * hd, K = hidden
//      O       N = hidden,                   K = H/t * hd
//      gate-up N = (gated ? 2 : 1) * I/t,    K = hidden
//      down    N = hidden,                   K = I/t
//    bytes = N*K*weight_bytes + M*K*2 + M*N*2; FLOPs = 2*M*N*K.
//  - MoE MLP (Mixtral): a 16-bit router GEMM (N = experts) plus expert GEMMs over M*top_k routed
//    rows. The weights read are those of min(experts, M*top_k) experts: every routed row is assumed
//    to hit a different expert until all are touched. That is exact for one token and for large
//    batches and an upper bound in between (uniform routing touches fewer distinct experts).
//  - Attention, prefill-like segments (q > 1) and decode segments (q == 1) costed as two kernels.
//    A chunk of q tokens after c = k - q cached ones attends q*c + q*(q+1)/2 key positions
//    (causal); FLOPs = 4 * hd * H/t per position. Bytes = KV of the k attended tokens read plus the
//    q new tokens written (2 * kvh_rank * hd * kv_bytes per token) plus Q read and O written
//    (16-bit).
//  - Norms and elementwise (two fused residual-add + RMSNorm, rotary, SiLU*mul), memory-bound:
//      bytes/token = 2 * (8 * hidden + (gated ? 3 : 2) * I_active/t + 2 * (H/t + kvh_rank) * hd)
//    i.e. c * hidden * 2 with c = 21 for Llama-3.1-8B at tp=1; charged 4 kernel launches.
//  - Two ring all-reduces per layer when t > 1 over M*hidden*2 bytes:
//      2 * (t-1)/t * bytes / (link * link_efficiency) + allreduce_latency,
//    link = NVLink per direction when the whole TP group is NVLink-connected, else PCIe.
//  - LM head once per pass over the logit rows (N = vocab/t, K = hidden, 16-bit weights: FP8
//    checkpoints keep the LM head in 16-bit); embeddings and the final norm are negligible.
//  - Attention and the LM head run at the BF16 tensor-core rate whatever the weight dtype.
//  - Compute efficiency 0 means measured_matmul / peak of the dtype when the catalog has a
//    measurement, else kDefaultComputeEfficiency.
// peak_bound_time() is the same decomposition at 100 % of peak FLOP/s, DRAM and link bandwidth
// with no kernel, all-reduce or iteration latencies, so it never exceeds iteration_time().
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "models/cost_model.h"
#include "sim/core/error.h"

namespace servesim::models {
namespace {

// Compute efficiency when neither the params nor the catalog give one.
constexpr double kDefaultComputeEfficiency = 0.75;
// Activations, the LM head, the MoE router and attention operands are 16-bit.
constexpr double kActivationBytes = 2;
// Elements moved per hidden element per token by the two fused residual-add + RMSNorm kernels
// (each reads the input and the residual and writes both).
constexpr double kNormResidualElements = 8;
// Elementwise kernels per layer: 2 x fused add+RMSNorm, rotary embedding, SiLU*mul.
constexpr double kElementwiseKernelsPerLayer = 4;
// All-reduces per layer under TP: after attention (O projection) and after the MLP.
constexpr double kAllReducesPerLayer = 2;

// One GEMM family (already summed over layers) as an affine roofline in its row count:
// time(rows) = max(flop_s * rows, weight_s + act_s * rows) + launch_s.
struct GemmTerm {
  double flop_s = 0;    // compute seconds per row
  double weight_s = 0;  // seconds to stream the weights once (per expert for MoE experts)
  double act_s = 0;     // seconds per row to read the input row and write the output row
  double launch_s = 0;

  double time(double rows) const {
    return std::max(flop_s * rows, weight_s + act_s * rows) + launch_s;
  }
};

// Per-deployment constants, in seconds, for one set of efficiencies.
struct Rates {
  GemmTerm qkv, o, gate_up, down;                // dense MLP (gate_up/down unused for MoE models)
  GemmTerm router, expert_gate_up, expert_down;  // MoE only
  GemmTerm lm_head;                              // once per pass, not per layer
  double attn_flop_s = 0;                        // per attended key position
  double attn_kv_s = 0;                          // per KV token read or written
  double attn_query_s = 0;                       // per query token (Q read + O write)
  double attn_launch_s = 0;
  double elementwise_s = 0;  // per token
  double elementwise_launch_s = 0;
  double allreduce_s = 0;  // per token
  double allreduce_fixed_s = 0;
  double overhead_s = 0;
};

// Sums over the segments of one pass; everything an evaluation needs.
struct BatchSums {
  double tokens = 0;
  double logit_rows = 0;
  bool has_prefill = false;
  bool has_decode = false;
  double prefill_key_positions = 0;
  double prefill_kv_tokens = 0;
  double prefill_query_tokens = 0;
  double decode_key_positions = 0;
  double decode_kv_tokens = 0;
  double decode_query_tokens = 0;
};

// Largest query or context length accepted; keeps every per-pass sum far from int64 overflow.
constexpr int64_t kMaxSegmentTokens = int64_t{1} << 24;

struct Throughputs {
  double gemm_flops_per_s = 0;  // GEMMs in the weight dtype
  double bf16_flops_per_s = 0;  // attention, LM head, router
  double mem_bytes_per_s = 0;
  double link_bytes_per_s = 0;
  double launch_s = 0;
  double allreduce_latency_s = 0;
  double overhead_s = 0;
};

GemmTerm make_gemm(double layers, double n, double k, double weight_bytes, double flops_per_s,
                   double bytes_per_s, double launch_s) {
  GemmTerm g;
  g.flop_s = layers * 2 * n * k / flops_per_s;
  g.weight_s = layers * n * k * weight_bytes / bytes_per_s;
  g.act_s = layers * kActivationBytes * (n + k) / bytes_per_s;
  g.launch_s = layers * launch_s;
  return g;
}

Rates make_rates(const Deployment& d, const Throughputs& x) {
  const ModelSpec& m = *d.model;
  const double t = d.tp;
  const double layers = m.num_layers;
  const double hidden = static_cast<double>(m.hidden_size);
  const double hd = static_cast<double>(m.head_dim);
  const double heads_rank = static_cast<double>(m.num_attention_heads) / t;
  const double kv_rank = kv_heads_per_rank(m, d.tp);
  const double wbytes = static_cast<double>(dtype_bytes(d.weight_dtype));
  const double kvbytes = static_cast<double>(dtype_bytes(d.kv_dtype));
  const double mlp_factor = m.gated_mlp ? 2 : 1;
  const double bw = x.mem_bytes_per_s;

  Rates r;
  r.qkv = make_gemm(layers, (heads_rank + 2 * kv_rank) * hd, hidden, wbytes, x.gemm_flops_per_s, bw,
                    x.launch_s);
  r.o = make_gemm(layers, hidden, heads_rank * hd, wbytes, x.gemm_flops_per_s, bw, x.launch_s);
  double active_intermediate_rank = static_cast<double>(m.intermediate_size) / t;
  if (m.moe) {
    const double expert_i = static_cast<double>(m.moe->expert_intermediate_size) / t;
    r.router = make_gemm(layers, m.moe->num_experts, hidden, kActivationBytes, x.bf16_flops_per_s,
                         bw, x.launch_s);
    r.expert_gate_up = make_gemm(layers, mlp_factor * expert_i, hidden, wbytes, x.gemm_flops_per_s,
                                 bw, x.launch_s);
    r.expert_down = make_gemm(layers, hidden, expert_i, wbytes, x.gemm_flops_per_s, bw, x.launch_s);
    active_intermediate_rank = m.moe->experts_per_token * expert_i;
  } else {
    r.gate_up = make_gemm(layers, mlp_factor * active_intermediate_rank, hidden, wbytes,
                          x.gemm_flops_per_s, bw, x.launch_s);
    r.down = make_gemm(layers, hidden, active_intermediate_rank, wbytes, x.gemm_flops_per_s, bw,
                       x.launch_s);
  }
  r.lm_head = make_gemm(1, static_cast<double>(m.vocab_size) / t, hidden, kActivationBytes,
                        x.bf16_flops_per_s, bw, x.launch_s);

  r.attn_flop_s = layers * 4 * hd * heads_rank / x.bf16_flops_per_s;
  r.attn_kv_s = layers * 2 * kv_rank * hd * kvbytes / bw;
  r.attn_query_s = layers * 2 * heads_rank * hd * kActivationBytes / bw;
  r.attn_launch_s = layers * x.launch_s;

  const double elementwise_elements = kNormResidualElements * hidden +
                                      (mlp_factor + 1) * active_intermediate_rank +
                                      2 * (heads_rank + kv_rank) * hd;
  r.elementwise_s = layers * kActivationBytes * elementwise_elements / bw;
  r.elementwise_launch_s = layers * kElementwiseKernelsPerLayer * x.launch_s;

  if (d.tp > 1) {
    const double ring = 2 * (t - 1) / t;
    r.allreduce_s =
        layers * kAllReducesPerLayer * ring * hidden * kActivationBytes / x.link_bytes_per_s;
    r.allreduce_fixed_s = layers * kAllReducesPerLayer * x.allreduce_latency_s;
  }
  r.overhead_s = x.overhead_s;
  return r;
}

[[noreturn]] void throw_malformed(const BatchShape& shape) {
  for (const Segment& seg : shape.segments) {
    if (seg.query_tokens < 1 || seg.context_tokens < seg.query_tokens || seg.logit_rows < 0 ||
        seg.context_tokens > kMaxSegmentTokens) {
      throw std::invalid_argument(fmt::format(
          "malformed batch segment (query_tokens {}, context_tokens {}, logit_rows {}): need "
          "1 <= query_tokens <= context_tokens <= {} and logit_rows >= 0",
          seg.query_tokens, seg.context_tokens, seg.logit_rows, kMaxSegmentTokens));
    }
  }
  throw std::logic_error("throw_malformed called on a well-formed batch");
}

// REQUIRES: shape is not empty. Throws std::invalid_argument on a malformed segment.
// One branch-free pass: totals over all segments plus masked totals over decode segments
// (query_tokens == 1); the prefill-like sums are the differences.
BatchSums sum_segments(const BatchShape& shape) {
  if (shape.segments.empty()) {
    throw std::invalid_argument("iteration cost requested for an empty batch");
  }
  // Unsigned arithmetic: wraps (defined) on garbage input, which the sign check then rejects.
  uint64_t tokens = 0, rows = 0, positions2 = 0, kv_tokens = 0;
  uint64_t decodes = 0, decode_positions2 = 0, decode_kv_tokens = 0;
  bool malformed = false;
  for (const Segment& seg : shape.segments) {
    const auto q = static_cast<uint64_t>(seg.query_tokens);
    const auto k = static_cast<uint64_t>(seg.context_tokens);
    // k <= kMaxSegmentTokens (also rejects k < 0), then 1 <= q <= k (q <= 0 wraps to huge).
    malformed |=
        (k > static_cast<uint64_t>(kMaxSegmentTokens)) | (q - 1 >= k) | (seg.logit_rows < 0);
    // Causal: q new tokens after k - q cached ones see q*(k-q) + q*(q+1)/2 key positions
    // (accumulated doubled, to stay in integers).
    const uint64_t pos2 = 2 * q * (k - q) + q * (q + 1);
    const uint64_t kv = k + q;  // k attended tokens read, q new tokens written
    const uint64_t decode_mask = 0 - static_cast<uint64_t>(q == 1);
    tokens += q;
    rows += static_cast<uint64_t>(seg.logit_rows);
    positions2 += pos2;
    kv_tokens += kv;
    decodes += decode_mask & 1;
    decode_positions2 += pos2 & decode_mask;
    decode_kv_tokens += kv & decode_mask;
  }
  if (malformed) {
    throw_malformed(shape);
  }
  const uint64_t positions = positions2 / 2;
  const uint64_t decode_positions = decode_positions2 / 2;
  BatchSums s;
  s.tokens = static_cast<double>(tokens);
  s.logit_rows = static_cast<double>(rows);
  s.has_decode = decodes > 0;
  s.has_prefill = decodes < shape.segments.size();
  s.decode_key_positions = static_cast<double>(decode_positions);
  s.decode_kv_tokens = static_cast<double>(decode_kv_tokens);
  s.decode_query_tokens = static_cast<double>(decodes);
  s.prefill_key_positions = static_cast<double>(positions - decode_positions);
  s.prefill_kv_tokens = static_cast<double>(kv_tokens - decode_kv_tokens);
  s.prefill_query_tokens = static_cast<double>(tokens - decodes);
  return s;
}

double attention_time(const Rates& r, double positions, double kv_tokens, double query_tokens) {
  return std::max(r.attn_flop_s * positions,
                  r.attn_kv_s * kv_tokens + r.attn_query_s * query_tokens) +
         r.attn_launch_s;
}

OperatorTimes evaluate(const Rates& r, const BatchSums& s, const ModelSpec& m) {
  const double rows = s.tokens;
  double mlp_s = 0;
  if (m.moe) {
    const double routed = rows * m.moe->experts_per_token;
    const double experts = std::min(static_cast<double>(m.moe->num_experts), routed);
    const GemmTerm& gu = r.expert_gate_up;
    const GemmTerm& dn = r.expert_down;
    mlp_s = r.router.time(rows) +
            std::max(gu.flop_s * routed, gu.weight_s * experts + gu.act_s * routed) + gu.launch_s +
            std::max(dn.flop_s * routed, dn.weight_s * experts + dn.act_s * routed) + dn.launch_s;
  } else {
    mlp_s = r.gate_up.time(rows) + r.down.time(rows);
  }
  OperatorTimes out;
  out.qkv_gemm = duration_from_seconds(r.qkv.time(rows));
  out.o_gemm = duration_from_seconds(r.o.time(rows));
  out.mlp_gemm = duration_from_seconds(mlp_s);
  if (s.has_prefill) {
    out.attention_prefill = duration_from_seconds(
        attention_time(r, s.prefill_key_positions, s.prefill_kv_tokens, s.prefill_query_tokens));
  }
  if (s.has_decode) {
    out.attention_decode = duration_from_seconds(
        attention_time(r, s.decode_key_positions, s.decode_kv_tokens, s.decode_query_tokens));
  }
  out.norms_elementwise = duration_from_seconds(r.elementwise_s * rows + r.elementwise_launch_s);
  if (r.allreduce_s > 0) {
    out.allreduce = duration_from_seconds(r.allreduce_s * rows + r.allreduce_fixed_s);
  }
  if (s.logit_rows > 0) {
    out.lm_head = duration_from_seconds(r.lm_head.time(s.logit_rows));
  }
  out.overhead = duration_from_seconds(r.overhead_s);
  return out;
}

void check_efficiency(double value, const char* name, bool zero_allowed) {
  if (!(value <= 1) || (zero_allowed ? value < 0 : value <= 0)) {
    throw std::invalid_argument(fmt::format("roofline {} must be in {}0, 1], got {}", name,
                                            zero_allowed ? "[" : "(", value));
  }
}

double derived_efficiency(const GpuSpec& gpu, const RooflineParams& p, Dtype dtype) {
  if (p.compute_efficiency > 0) {
    return p.compute_efficiency;
  }
  const double measured = gpu.measured_matmul_flops_per_s(dtype);
  return measured > 0 ? std::min(1.0, measured / gpu.peak_flops_per_s(dtype))
                      : kDefaultComputeEfficiency;
}

const Deployment& validated(const Deployment& d) {
  validate_deployment(d);
  return d;
}

// Holds its own copies of the model and GPU specs, so it does not depend on the catalogs' lifetime.
class RooflineCostModel final : public IterationCostModel {
 public:
  RooflineCostModel(const Deployment& d, const RooflineParams& p)
      : model_(*validated(d).model), gpu_(*d.gpu), deployment_(d), params_(p) {
    deployment_.model = &model_;
    deployment_.gpu = &gpu_;
    check_efficiency(p.compute_efficiency, "compute_efficiency", true);
    check_efficiency(p.memory_efficiency, "memory_efficiency", false);
    check_efficiency(p.link_efficiency, "link_efficiency", false);
    if (p.kernel_launch.count() < 0 || p.allreduce_latency.count() < 0 ||
        p.iteration_overhead.count() < 0) {
      throw std::invalid_argument("roofline latencies and overhead must be non-negative");
    }
    const GpuSpec& gpu = gpu_;

    Throughputs peak;
    peak.gemm_flops_per_s = gpu.peak_flops_per_s(d.weight_dtype);
    peak.bf16_flops_per_s = gpu.bf16_flops_per_s;
    peak.mem_bytes_per_s = gpu.mem_bw_bytes_per_s;
    peak.link_bytes_per_s = gpu.tp_link_bytes_per_s(d.tp);
    peak_ = make_rates(deployment_, peak);

    achievable_ = peak;
    achievable_.gemm_flops_per_s *= derived_efficiency(gpu, p, d.weight_dtype);
    achievable_.bf16_flops_per_s *= derived_efficiency(gpu, p, Dtype::kBf16);
    achievable_.mem_bytes_per_s *= p.memory_efficiency;
    achievable_.link_bytes_per_s *= p.link_efficiency;
    achievable_.launch_s = to_seconds(p.kernel_launch);
    achievable_.allreduce_latency_s = to_seconds(p.allreduce_latency);
    achievable_.overhead_s = to_seconds(p.iteration_overhead);
    rates_ = make_rates(deployment_, achievable_);
  }

  Duration iteration_time(const BatchShape& shape) const override {
    return breakdown(shape).total();
  }

  OperatorTimes breakdown(const BatchShape& shape) const override {
    return evaluate(rates_, sum_segments(shape), model_);
  }

  Duration peak_bound_time(const BatchShape& shape) const override {
    return evaluate(peak_, sum_segments(shape), model_).total();
  }

  std::string describe() const override {
    std::string dtypes = dtype_name(deployment_.weight_dtype);
    if (deployment_.kv_dtype != deployment_.weight_dtype) {
      dtypes += fmt::format(" (kv {})", dtype_name(deployment_.kv_dtype));
    }
    return fmt::format(
        "roofline {} on {} tp{} {}: {:.0f} TFLOP/s, {:.2f} TB/s achievable, "
        "overhead {:g} ms",
        model_.key, gpu_.key, deployment_.tp, dtypes, achievable_.gemm_flops_per_s / 1e12,
        achievable_.mem_bytes_per_s / 1e12, to_ms(params_.iteration_overhead));
  }

 private:
  ModelSpec model_;
  GpuSpec gpu_;
  Deployment deployment_;  // points at model_ and gpu_
  RooflineParams params_;
  Throughputs achievable_;
  Rates rates_;
  Rates peak_;
};

}  // namespace

std::unique_ptr<IterationCostModel> make_roofline_cost_model(const Deployment& deployment,
                                                             const RooflineParams& params) {
  return std::make_unique<RooflineCostModel>(deployment, params);
}

}  // namespace servesim::models
