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
#include <memory>

#include "models/cost/cost_model.h"
#include "models/cost/expert_load.h"

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
//   experts the same with I = expert_intermediate_size    (MoE MLP); with expert parallelism
//           (Deployment::ep) each rank holds num_experts/ep experts sharded by tp/ep instead:
//           N = (gated ? 2 : 1) * I*ep/t, K = I*ep/t, and runs the rows routed to them (the
//           busiest rank's share, busiest_rank_routed_rows())
//   shared  the same with I = shared_expert_intermediate_size, on every MoE layer, every token
//   dense   the same with I = intermediate_size, on the dense layers of a MoE model
//   LM head N = vocab/t,                  K = hidden
//
// MoE models keep their layer kinds apart: the router, routed-expert and shared-expert terms run
// on moe_layers, the dense MLP terms on dense_layers (= layers - moe_layers; DeepSeek's
// first_k_dense_replace). Attention, norms and all-reduces run on every layer.
//
// MLA (DeepSeek-V3, Kimi-K2), per rank, with r = kv_lora_rank, dn = qk_nope, dr = qk_rope,
// dv = v_head_dim, rq = q_lora_rank, h = H/t:
//   QKV     one GEMM of K = hidden and N = (hidden*rq + rq*h*(dn+dr) + hidden*(r+dr)) / hidden, so
//           2*N*K FLOPs and N*K weights per token are exactly those of q_a (hidden -> rq,
//           replicated), q_b (rq -> h*(dn+dr)) and kv_a (hidden -> r+dr, replicated); without a
//           q LoRA, q_proj (hidden -> h*(dn+dr)) replaces q_a and q_b.
//   O       N = hidden, K = h * dv
//   KV      per token and layer r + dr elements on every rank (no heads to shard)
//   prefill attention in the decompressed form: kv_b (r -> h*(dn+dv)) expands every key token of
//           the segment (cached and new) into per-head K_nope and V, the GEMM `latent` of
//           N = h*(dn+dv), K = r on sum(context_tokens) rows; then attention over h heads:
//           2*h*(dn+dr) FLOPs for QK^T and 2*h*dv for PV per attended key position; bytes:
//           the latent (r+dr) per key token read or written, Q (h*(dn+dr)) and O (h*dv) per
//           query token.
//   decode attention in the absorbed form: W_UK is folded into the query and W_UV into the
//           output, the GEMM `latent` (same weights, N = h*(dn+dv), K = r) on one row per decode
//           token; attention over the latent as multi-query attention with h heads of r+dr for
//           QK^T and r for PV: 2*h*(2r+dr) FLOPs per attended key position; bytes: the latent
//           (r+dr) per key token, the absorbed query h*(r+dr) and latent output h*r per query.
// DSA (DeepSeek-V3.2, GLM-5) on MLA, with Hi = index_heads, di = index_head_dim and
// top-k = index_topk:
//   QKV     adds the indexer's projections, replicated on every rank (the engines do not shard
//           them): wq_b (rq -> Hi*di) and wk + weights_proj (hidden -> di + Hi), so
//           N += (rq*Hi*di + hidden*(di + Hi)) / hidden.
//   indexer per scored key position (every cached key, causal): 2*Hi*di FLOPs for the FP8 scores
//           plus 2*Hi for the ReLU-gated sum over heads, at the FP8 rate; bytes: the index key
//           (DsaSpec::index_key_bytes_per_token) per KV token read or written, plus its fp32
//           logit written and read back by the top-k selection (8); per query token its FP8 query
//           (Hi*di), its fp32 gates (4*Hi) and its top-k indices (4*top-k).
//   attention in the absorbed form (decode's shape above) in prefill too, over at most top-k key
//           positions per query (the windowed sums with window = top-k, every layer); the latent
//           GEMM runs on the query tokens.
// Gated DeltaNet layers (Qwen3-Next, Qwen3.5), per rank, with Hk, Hv key and value heads of dk, dv
// (Hk/t and Hv/t per rank), conv_dim = 2*Hk*dk + Hv*dv, the engines' chunk C = 64:
//   in      N = (2*Hk*dk + 2*Hv*dv + 2*Hv)/t, K = hidden (q, k, v, the output gate z, beta, decay)
//   out     N = hidden, K = Hv*dv/t
//   prefill per token, the chunked delta rule: Hv/t * (6*dk*dv + 2*C*(2*dk + dv)) FLOPs (query
//           and key against the carried state, the state update, the chunk's QK^T, KK^T and
//           attention-times-V) + the convolution's 2*kernel per channel; each prefill segment
//           reads and writes its sequence's state once
//   decode  per token, the recurrent step: Hv/t * 7*dk*dv FLOPs (decay, S^T k, the rank-1
//           update, S^T q) + the convolution; reads and writes the whole state
//   bytes   the state (ModelSpec::recurrent_state_bytes() / layers / t) twice per sequence and
//           pass, and per token the in-projection's outputs read, the convolution's inputs and
//           outputs, and the value-wide output written (16 bit)
// Their q/k/v/o terms run on the full-attention layers only; gated full attention (Qwen3-Next,
// Qwen3.5) widens q by the gate: QKV N = (2*H/t + 2*kvh_rank) * hd.
// GQA: 4*h*hd FLOPs per attended key position, 2*kvh_rank*hd KV elements per key token, Q and O
// (2*h*hd elements) per query token, no latent GEMM.
//
// Sliding-window layers (gpt-oss) use the same per-layer terms over windowed sums: a query
// attends to at most `window` keys (itself included) and reads at most query_tokens + window - 1
// KV tokens. gpt-oss's attention sinks (one learned logit per head) are left out: they add one
// score per head and query, nothing per key.
struct AttentionShape {
  double flops_per_position = 0;  // per attended key position, per layer
  double kv_bytes_per_token = 0;  // per KV token read or written, per layer
  double query_bytes_per_token = 0;
  double latent_n = 0, latent_k = 0;  // MLA's kv_b GEMM; 0 otherwise
};

struct RankShapes {
  double layers = 0;
  double attention_layers = 0;  // layers with q/k/v/o projections: all but linear-attention ones
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
  int ep = 1;                 // expert-parallel degree: each rank holds experts / ep of them
  std::shared_ptr<const ExpertLoadModel> expert_load;  // the busiest rank's load (MoE only)
  double moe_layers = 0, dense_layers = 0;       // MoE models only
  double shared_gate_up_n = 0, shared_down_k = 0;  // shared expert; 0 = none
  double dense_gate_up_n = 0, dense_down_k = 0;    // a MoE model's dense layers
  bool mla = false;
  AttentionShape prefill_attention, decode_attention;
  bool dsa = false;        // DeepSeek Sparse Attention: the indexer below, attention over top-k
  AttentionShape indexer;  // flops per scored position at the FP8 rate; no latent GEMM
  // Gated DeltaNet layers (formulas above); linear_layers = 0 without any.
  double linear_layers = 0;
  double linear_in_n = 0, linear_out_k = 0;
  double linear_prefill_flops_per_token = 0, linear_decode_flops_per_token = 0;
  double linear_state_bytes = 0;          // per sequence and layer, on this rank
  double linear_act_bytes_per_token = 0;  // per layer
  double full_attention_layers = 0;  // = layers without sliding-window layers
  double window_layers = 0;
  int64_t window = 0;  // tokens; 0 = no sliding-window layers
  double weight_bytes = 2;  // per weight element, block scales included
  double kv_bytes = 2;      // per KV element
  // Bytes per token (one layer) moved by the norms and elementwise kernels:
  //   2 * (8 * hidden + (gated ? 3 : 2) * I_active/t + 2 * (H/t + kvh_rank) * hd)
  // (two fused residual-add + RMSNorm kernels each read input and residual and write both; SiLU*mul
  // reads gate and up and writes one; rotary reads and writes Q and K). MoE models: I_active is
  // top_k * expert + shared, averaged with the dense layers' I over the layers; MLA: the rotary
  // and latent norms move h*(dn+dr) + r + dr instead of (H/t + kvh_rank) * hd.
  double elementwise_bytes_per_token = 0;
  // Bytes of one all-reduce per token (hidden * 2); 0 at tp = 1.
  double allreduce_bytes_per_token = 0;
  int tp = 1;
};

// REQUIRES: d.attention_dp == 1 (attention DP composes two plain deployments: attention_dp.h);
// throws std::invalid_argument otherwise.
RankShapes rank_shapes(const Deployment& d);

// The expected largest of `ep` i.i.d. standard normal draws (Blom's approximation of the top order
// statistic, Phi^-1((ep - 0.375) / (ep + 0.25)), within 0.03 of the exact value up to ep = 8 and
// slightly above it); 0 at ep = 1.
double expected_max_normal_score(int ep);
// Routed-expert rows on the busiest rank of an expert-parallel group: each of `rows` tokens is
// routed to `experts_per_token` experts of equal popularity, so a routed row lands on one of the
// `ep` ranks with probability 1/ep; the busiest rank gets the mean rows*k/ep plus `max_score`
// (expected_max_normal_score(ep)) standard deviations of that binomial load, at most rows*k.
// rows * k at ep = 1.
double busiest_rank_routed_rows(double rows, double experts_per_token, int ep, double max_score);
// Experts of a rank holding E/ep of them that its `routed` rows reach at least once. Each token
// picks k = experts_per_token distinct experts of equal popularity, so it misses a given expert
// with probability 1 - k/E; `routed` rows on a rank are as many as routed * ep / k tokens send
// it: (E/ep) * (1 - (1 - k/E)^(routed * ep / k)). Fewer than min(E/ep, routed) when tokens
// collide: 16 tokens of top-8 routing reach about 82 of 128 experts, not 128.
double expected_touched_experts(double routed, double experts, double experts_per_token, int ep);

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
  double fp8_flops_per_s = 0;   // DSA's indexer (the BF16 rate on a GPU without FP8)
  double mem_bytes_per_s = 0;
  double link_bytes_per_s = 0;
  double launch_s = 0;
  double allreduce_latency_s = 0;
  double overhead_s = 0;
};

// One attention kernel family summed over its layers, in seconds: the roofline of its FLOPs per
// attended key position against its bytes per KV and query token, plus MLA's latent GEMM.
struct AttentionTerm {
  double flop_s = 0;   // per attended key position
  double kv_s = 0;     // per KV token read or written
  double query_s = 0;  // per query token (Q read + O write)
  double launch_s = 0;
  GemmTerm latent;     // MLA only; rows: key tokens (prefill) or query tokens (decode)
  bool has_latent = false;
};

// Per-deployment constants, in seconds, for one set of throughputs.
struct Rates {
  // Dense MLP: gate_up / down (a MoE model's dense layers when it has some).
  GemmTerm qkv, o, gate_up, down;
  GemmTerm router, expert_gate_up, expert_down;  // MoE only
  GemmTerm shared_gate_up, shared_down;          // MoE shared expert (zero when none)
  GemmTerm lm_head;                              // once per pass, not per layer
  // Full-attention layers, and sliding-window layers (zero terms when the model has none).
  AttentionTerm attn_prefill, attn_decode, window_prefill, window_decode;
  bool windowed = false;
  // DSA: the indexer over every scored key position; with it, prefill's latent GEMM runs on the
  // query tokens (absorbed form) instead of the key tokens.
  AttentionTerm indexer;
  bool has_indexer = false;
  // Gated DeltaNet layers, summed over them: projections, and the recurrence's seconds per token
  // (FLOPs; activations) and per sequence (state read and written).
  bool has_linear = false;
  GemmTerm linear_in, linear_out;
  double linear_prefill_flop_s = 0, linear_decode_flop_s = 0, linear_act_s = 0;
  double linear_state_s = 0, linear_launch_s = 0;
  double elementwise_s = 0;  // per token
  double elementwise_launch_s = 0;
  double allreduce_s = 0;  // per token
  double allreduce_fixed_s = 0;
  double overhead_s = 0;
  bool moe = false;
  bool has_shared_expert = false, has_dense_layers = false;  // MoE models
  double experts = 0, experts_per_token = 0;
  int ep = 1;
  std::shared_ptr<const ExpertLoadModel> expert_load;  // MoE only
};

Rates make_rates(const RankShapes& s, const Throughputs& x);
// Recomputes the FLOP terms of every attention term of `r` at `flops_per_s` (the profiled model's
// peak runs FP8 attention on FP8 tensor cores).
void set_attention_flops(const RankShapes& s, double flops_per_s, Rates* r);

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
// query_tokens > 1, decode segments query_tokens == 1; a verification segment (is_verification())
// counts as decode, its query_tokens decode queries reading the request's KV once.
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
  double decode_query_tokens = 0;  // one per decode segment, query_tokens per verification
  // Extra prefill moments (profiled model): segment count, sum of k^2, q^2 and q*c.
  double prefill_segments = 0;
  double prefill_k2 = 0, prefill_q2 = 0, prefill_qc = 0;
  // The same positions and KV tokens under a sliding window (sum_segments with window > 0).
  double window_prefill_key_positions = 0, window_prefill_kv_tokens = 0;
  double window_decode_key_positions = 0, window_decode_kv_tokens = 0;
};

// REQUIRES: shape is not empty. Throws std::invalid_argument on an empty batch
// or a malformed segment (need 1 <= query_tokens <= context_tokens <= kMaxSegmentTokens, logit_rows
// >= 0).
// With window > 0 the window_* sums are filled too: a query at position j (1-based) attends to
// min(j, window) keys; a segment reads min(context, query + window - 1) KV tokens.
BatchSums sum_segments(const BatchShape& shape, int64_t window = 0);
// sum_segments() of the decode segments `pass` sums up, with window = 0: the same fields, without
// the segments. Throws std::invalid_argument unless 0 <= logit_rows <= decodes <= context_tokens
// and decodes >= 1.
BatchSums decode_sums(const DecodePass& pass);
// sum_segments() of the decode segments `run` sums up followed by `rest`, with window = 0: the
// same fields (exact: integer sums below 2^53). Throws as decode_sums() and sum_segments() do.
BatchSums mixed_sums(const DecodePass& run, const BatchShape& rest);

// Roofline time of one attention kernel family over the given sums (seconds); latent_rows feed
// MLA's latent GEMM.
double attention_time(const AttentionTerm& a, double positions, double kv_tokens,
                      double query_tokens, double latent_rows);
// Prefill-like / decode attention of a pass: full-attention layers plus sliding-window layers.
double prefill_attention_time(const Rates& r, const BatchSums& s);
double decode_attention_time(const Rates& r, const BatchSums& s);

// The recurrence of the Gated DeltaNet layers over `tokens` tokens of `sequences` sequences, with
// the prefill (chunked) or the decode (recurrent step) FLOPs; 0 without linear layers.
double linear_attention_time(const Rates& r, double tokens, double sequences, bool prefill);
// QKV / O projection time of a pass with `rows` tokens: the attention layers' plus the linear
// layers' in / out projections.
double qkv_time(const Rates& r, double rows);
double o_time(const Rates& r, double rows);

// MLP GEMM time of a pass with `rows` tokens (dense: gate-up + down; MoE: router + routed experts
// on the MoE layers, + the shared expert, + gate-up + down on the dense layers).
double mlp_time(const Rates& r, double rows);

// The whole roofline decomposition of one pass.
OperatorTimes evaluate(const Rates& r, const BatchSums& s);

}  // namespace servesim::models::detail
