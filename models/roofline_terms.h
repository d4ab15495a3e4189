// The operator decomposition of one forward pass, shared by every iteration cost model.
//
// Contract: pure functions of value types. RankShapes gives the per-TP-rank shape of each operator
// of a deployment; sum_segments() reduces a BatchShape to the sums every model needs (validating
// it); Rates/evaluate() are the roofline arithmetic over those sums. The roofline model is
// make_rates() + evaluate(); the profiled model looks the same operators up in measured tables and
// uses this roofline (with efficiencies fitted to the tables) where no table covers them, and for
// peak_bound_time(). Units: seconds, bytes, FLOPs, tokens.
#pragma once

#include <algorithm>
#include <cstdint>

#include "models/cost_model.h"

namespace servesim::models::detail {

// Activations, the LM head, the MoE router and attention operands are 16-bit.
inline constexpr double kActivationBytes = 2;
// Elementwise kernels per layer: 2 x fused add+RMSNorm, rotary embedding, SiLU*mul.
inline constexpr double kElementwiseKernelsPerLayer = 4;
// All-reduces per layer under TP: after attention (O projection) and after the MLP.
inline constexpr double kAllReducesPerLayer = 2;
// Largest query or context length accepted; keeps every per-pass sum far from int64 overflow.
inline constexpr int64_t kMaxSegmentTokens = int64_t{1} << 24;

// Per-rank operator shapes of a deployment (TP shards N or K of each GEMM).
//   QKV     N = (H/t + 2 * kvh_rank) * hd, K = hidden
//   O       N = hidden,                   K = H/t * hd
//   gate-up N = (gated ? 2 : 1) * I/t,    K = hidden      (dense MLP)
//   down    N = hidden,                   K = I/t
//   experts the same with I = expert_intermediate_size    (MoE MLP)
//   LM head N = vocab/t,                  K = hidden
struct RankShapes {
  double layers = 0;
  double hidden = 0;
  double head_dim = 0;
  double heads = 0;     // query heads per rank
  double kv_heads = 0;  // KV heads per rank (replicated when fewer than ranks)
  double qkv_n = 0, qkv_k = 0, o_n = 0, o_k = 0;
  double gate_up_n = 0, gate_up_k = 0, down_n = 0,
         down_k = 0;  // dense, or one expert
  double lm_head_n = 0, lm_head_k = 0;
  bool moe = false;
  double experts = 0, experts_per_token = 0;
  double weight_bytes = 2;  // per weight element
  double kv_bytes = 2;      // per KV element
  // Bytes per token (one layer) moved by the norms and elementwise kernels:
  //   2 * (8 * hidden + (gated ? 3 : 2) * I_active/t + 2 * (H/t + kvh_rank) * hd)
  // (two fused residual-add + RMSNorm kernels each read input and residual and write both; SiLU*mul
  // reads gate and up and writes one; rotary reads and writes Q and K).
  double elementwise_bytes_per_token = 0;
  // Bytes of one all-reduce per token (hidden * 2); 0 at tp = 1.
  double allreduce_bytes_per_token = 0;
  int tp = 1;

  // Attention bytes of a segment set: KV tokens read or written, and query tokens (Q read, O
  // written), per layer.
  double kv_bytes_per_token() const { return 2 * kv_heads * head_dim * kv_bytes; }
  double query_bytes_per_token() const { return 2 * heads * head_dim * kActivationBytes; }
  // Attention FLOPs per attended key position (QK^T and PV), per layer.
  double attention_flops_per_position() const { return 4 * head_dim * heads; }
};

RankShapes rank_shapes(const Deployment& d);

// One GEMM family (already summed over layers) as an affine roofline in its row count: time(rows) =
// max(flop_s * rows, weight_s + act_s * rows) + launch_s.
struct GemmTerm {
  double flop_s = 0;    // compute seconds per row
  double weight_s = 0;  // seconds to stream the weights once (per expert for MoE experts)
  double act_s = 0;     // seconds per row to read the input row and write the output row
  double launch_s = 0;

  double time(double rows) const {
    return std::max(flop_s * rows, weight_s + act_s * rows) + launch_s;
  }
};

// Achievable (or peak) throughputs a roofline is evaluated at.
struct Throughputs {
  double gemm_flops_per_s = 0;  // GEMMs in the weight dtype
  double bf16_flops_per_s = 0;  // attention, LM head, router
  double mem_bytes_per_s = 0;
  double link_bytes_per_s = 0;
  double launch_s = 0;
  double allreduce_latency_s = 0;
  double overhead_s = 0;
};

// Per-deployment constants, in seconds, for one set of throughputs.
struct Rates {
  // Dense MLP: gate_up / down (unused for MoE models).
  GemmTerm qkv, o, gate_up, down;
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
  bool moe = false;
  double experts = 0, experts_per_token = 0;
};

Rates make_rates(const RankShapes& s, const Throughputs& x);

// Throws std::invalid_argument when an efficiency is outside (0, 1] (compute_efficiency may be 0 =
// derive) or a latency is negative.
void check_roofline_params(const RooflineParams& p);
// Compute efficiency for GEMMs in `dtype`: params.compute_efficiency when set, else measured matmul
// / peak from the catalog, else 0.75.
double derived_compute_efficiency(const GpuSpec& gpu, const RooflineParams& p, Dtype dtype);
// 100 % of peak FLOP/s, DRAM and link bandwidth, no latencies (peak_bound_time()).
Throughputs peak_throughputs(const Deployment& d);
// The roofline model's achievable throughputs and latencies for `p`.
Throughputs achievable_throughputs(const Deployment& d, const RooflineParams& p);

// Sums over the segments of one pass; everything an evaluation needs. Prefill-like segments have
// query_tokens > 1, decode segments query_tokens == 1.
struct BatchSums {
  double tokens = 0;
  double logit_rows = 0;
  bool has_prefill = false;
  bool has_decode = false;
  double prefill_key_positions = 0;  // causal: q*c + q*(q+1)/2 per segment, c = k - q
  double prefill_kv_tokens = 0;      // k read + q written
  double prefill_query_tokens = 0;
  double decode_key_positions = 0;
  double decode_kv_tokens = 0;
  double decode_query_tokens = 0;  // = number of decode segments
  // Extra prefill moments (profiled model): segment count, sum of k^2, q^2 and q*c.
  double prefill_segments = 0;
  double prefill_k2 = 0, prefill_q2 = 0, prefill_qc = 0;
};

// REQUIRES: shape is not empty. Throws std::invalid_argument on an empty batch
// or a malformed segment (need 1 <= query_tokens <= context_tokens <= kMaxSegmentTokens, logit_rows
// >= 0).
BatchSums sum_segments(const BatchShape& shape);

// Roofline time of one attention kernel over the given sums (seconds).
double attention_time(const Rates& r, double positions, double kv_tokens, double query_tokens);

// MLP GEMM time of a pass with `rows` tokens (dense: gate-up + down; MoE:
// router + experts).
double mlp_time(const Rates& r, double rows);

// The whole roofline decomposition of one pass.
OperatorTimes evaluate(const Rates& r, const BatchSums& s);

}  // namespace servesim::models::detail
