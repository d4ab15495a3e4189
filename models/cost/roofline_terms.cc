#include "models/cost/roofline_terms.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include <boost/math/distributions/normal.hpp>

#include <fmt/format.h>

namespace servesim::models::detail {
namespace {

// Elements moved per hidden element per token by the two fused residual-add + RMSNorm kernels (each
// reads the input and the residual and writes both).
constexpr double kNormResidualElements = 8;

GemmTerm make_gemm(double layers, double n, double k, double weight_bytes, double flops_per_s,
                   double bytes_per_s, double launch_s) {
  GemmTerm g;
  g.flop_s = layers * 2 * n * k / flops_per_s;
  g.weight_s = layers * n * k * weight_bytes / bytes_per_s;
  g.act_s = layers * kActivationBytes * (n + k) / bytes_per_s;
  g.launch_s = layers * launch_s;
  return g;
}

// Compute efficiency when neither the params nor the catalog give one.
constexpr double kDefaultComputeEfficiency = 0.75;

void check_efficiency(double value, const char* name, bool zero_allowed) {
  if (!(value <= 1) || (zero_allowed ? value < 0 : value <= 0)) {
    throw std::invalid_argument(fmt::format("roofline {} must be in {}0, 1], got {}", name,
                                            zero_allowed ? "[" : "(", value));
  }
}

[[noreturn]] void throw_malformed(const BatchShape& shape) {
  for (const Segment& seg : shape.segments) {
    if (seg.query_tokens < 1 || seg.context_tokens < seg.query_tokens || seg.logit_rows < 0 ||
        seg.context_tokens > kMaxSegmentTokens) {
      throw std::invalid_argument(
          fmt::format("malformed batch segment (query_tokens {}, context_tokens {}, "
                      "logit_rows {}): need "
                      "1 <= query_tokens <= context_tokens <= {} and logit_rows >= 0",
                      seg.query_tokens, seg.context_tokens, seg.logit_rows, kMaxSegmentTokens));
    }
  }
  throw std::logic_error("throw_malformed called on a well-formed batch");
}

}  // namespace

namespace {

// The attention shapes of an MLA model (formulas in roofline_terms.h).
void set_mla_shapes(const MlaSpec& a, RankShapes* s) {
  const double h = s->heads;
  const double r = static_cast<double>(a.kv_lora_rank);
  const double dn = static_cast<double>(a.qk_nope_head_dim);
  const double dr = static_cast<double>(a.qk_rope_head_dim);
  const double dv = static_cast<double>(a.v_head_dim);
  const double rq = static_cast<double>(a.q_lora_rank);
  const double q_weights = a.q_lora_rank > 0 ? s->hidden * rq + rq * h * (dn + dr)
                                             : s->hidden * h * (dn + dr);
  s->mla = true;
  s->qkv_n = (q_weights + s->hidden * (r + dr)) / s->hidden;
  s->o_k = h * dv;
  AttentionShape& p = s->prefill_attention;
  p.flops_per_position = 2 * h * (dn + dr) + 2 * h * dv;
  p.kv_bytes_per_token = (r + dr) * s->kv_bytes;
  p.query_bytes_per_token = h * (dn + dr + dv) * kActivationBytes;
  p.latent_n = h * (dn + dv);
  p.latent_k = r;
  AttentionShape& dec = s->decode_attention;
  dec = p;
  dec.flops_per_position = 2 * h * (2 * r + dr);
  dec.query_bytes_per_token = h * (2 * r + dr) * kActivationBytes;
}

// DeepSeek Sparse Attention on top of set_mla_shapes (formulas in roofline_terms.h): every layer
// attends over a window of top-k keys in the absorbed form, and the indexer's shapes.
void set_dsa_shapes(const ModelSpec& m, RankShapes* s) {
  const DsaSpec& dsa = *m.dsa;
  const double hi = static_cast<double>(dsa.index_heads);
  const double di = static_cast<double>(dsa.index_head_dim);
  const double rq = static_cast<double>(m.mla->q_lora_rank);
  s->dsa = true;
  s->qkv_n += (rq * hi * di + s->hidden * (di + hi)) / s->hidden;
  s->prefill_attention = s->decode_attention;
  s->window = dsa.index_topk;
  s->window_layers = s->layers;
  s->full_attention_layers = 0;
  AttentionShape& ix = s->indexer;
  ix.flops_per_position = 2 * hi * di + 2 * hi;
  ix.kv_bytes_per_token = static_cast<double>(dsa.index_key_bytes_per_token()) + 8;
  ix.query_bytes_per_token = hi * di + 4 * hi + 4 * static_cast<double>(dsa.index_topk);
}

// The engines' chunk length of the chunked gated delta rule (fla's chunk_gated_delta_rule).
constexpr double kDeltaRuleChunk = 64;

// Gated DeltaNet layers of a hybrid model (formulas in roofline_terms.h).
void set_linear_shapes(const ModelSpec& m, double t, RankShapes* s) {
  const LinearAttentionSpec& la = *m.linear_attention;
  const double hv = static_cast<double>(la.value_heads) / t;
  const double dk = static_cast<double>(la.key_head_dim);
  const double dv = static_cast<double>(la.value_head_dim);
  const double conv = static_cast<double>(la.conv_dim()) / t;
  const double kernel = static_cast<double>(la.conv_kernel);
  s->linear_layers = la.num_linear_layers;
  s->attention_layers = s->layers - s->linear_layers;
  s->linear_in_n =
      static_cast<double>(2 * la.key_dim() + 2 * la.value_dim() + 2 * la.value_heads) / t;
  s->linear_out_k = static_cast<double>(la.value_dim()) / t;
  const double conv_flops = 2 * kernel * conv;
  s->linear_prefill_flops_per_token =
      hv * (6 * dk * dv + 2 * kDeltaRuleChunk * (2 * dk + dv)) + conv_flops;
  s->linear_decode_flops_per_token = hv * 7 * dk * dv + conv_flops;
  s->linear_state_bytes = static_cast<double>(la.state_bytes_per_layer()) / t;
  s->linear_act_bytes_per_token = kActivationBytes * (s->linear_in_n + 2 * conv + s->linear_out_k);
}

AttentionTerm make_attention(const AttentionShape& a, double layers, double weight_bytes,
                             const Throughputs& x) {
  const double bw = x.mem_bytes_per_s;
  AttentionTerm t;
  t.flop_s = layers * a.flops_per_position / x.bf16_flops_per_s;
  t.kv_s = layers * a.kv_bytes_per_token / bw;
  t.query_s = layers * a.query_bytes_per_token / bw;
  t.launch_s = layers * x.launch_s;
  if (a.latent_n > 0) {
    t.has_latent = true;
    t.latent =
        make_gemm(layers, a.latent_n, a.latent_k, weight_bytes, x.gemm_flops_per_s, bw, x.launch_s);
  }
  return t;
}

// Key positions a causal segment of q queries after c cached tokens attends to under a window of
// w keys: sum over j = c+1 .. c+q of min(j, w).
uint64_t windowed_positions(uint64_t q, uint64_t k, uint64_t w) {
  const uint64_t c = k - q;
  if (k <= w) {
    return q * c + q * (q + 1) / 2;
  }
  if (c >= w) {
    return q * w;
  }
  return (w * (w + 1) - c * (c + 1)) / 2 + (k - w) * w;
}

}  // namespace

double expected_max_normal_score(int ep) {
  if (ep <= 1) return 0;
  const double n = ep;
  return boost::math::quantile(boost::math::normal(), (n - 0.375) / (n + 0.25));
}

double busiest_rank_routed_rows(double rows, double experts_per_token, int ep, double max_score) {
  const double routed = rows * experts_per_token;
  if (ep <= 1) return routed;
  const double p = 1.0 / ep;
  return std::min(routed, routed * p + max_score * std::sqrt(routed * p * (1 - p)));
}

double expected_touched_experts(double routed, double experts, double experts_per_token, int ep) {
  const double local = experts / ep;
  if (experts_per_token >= experts) return local;  // every token reaches every expert
  const double tokens = routed * ep / experts_per_token;
  return local * -std::expm1(tokens * std::log1p(-experts_per_token / experts));
}

RankShapes rank_shapes(const Deployment& d) {
  if (d.attention_dp != 1) {
    throw std::invalid_argument(fmt::format(
        "rank shapes of a plain deployment asked for attention_dp={}", d.attention_dp));
  }
  const ModelSpec& m = *d.model;
  const double t = d.tp;
  RankShapes s;
  s.tp = d.tp;
  s.layers = m.num_layers;
  s.attention_layers = s.layers;
  s.hidden = static_cast<double>(m.hidden_size);
  s.head_dim = static_cast<double>(m.head_dim);
  s.heads = static_cast<double>(m.num_attention_heads) / t;
  s.kv_heads = kv_heads_per_rank(m, d.tp);
  s.weight_bytes = weight_bytes_per_element(d.weight_dtype).value();
  s.kv_bytes = static_cast<double>(dtype_bytes(d.kv_dtype));
  const double mlp_factor = m.gated_mlp ? 2 : 1;
  s.qkv_n = ((m.attention_output_gate ? 2 : 1) * s.heads + 2 * s.kv_heads) * s.head_dim;
  s.qkv_k = s.hidden;
  s.o_n = s.hidden;
  s.o_k = s.heads * s.head_dim;
  const double dense_intermediate = static_cast<double>(m.intermediate_size) / t;
  double active_intermediate = dense_intermediate;
  double intermediate = active_intermediate;
  if (m.moe) {
    s.moe = true;
    s.experts = m.moe->num_experts;
    s.experts_per_token = m.moe->experts_per_token;
    s.ep = d.ep;
    s.expert_load = std::make_shared<const ExpertLoadModel>(
        d.routing(), m.moe->num_experts, m.moe->experts_per_token, d.ep);
    // Per rank, routed rows * I/t in total whatever ep: ep splits the experts, not their work.
    intermediate = static_cast<double>(m.moe->expert_intermediate_size) * d.ep / t;
    active_intermediate = m.moe->experts_per_token * intermediate / d.ep;
    s.moe_layers = m.moe->num_moe_layers;
    s.dense_layers = s.layers - s.moe_layers;
    const double shared = static_cast<double>(m.moe->shared_expert_intermediate_size) / t;
    s.shared_gate_up_n = mlp_factor * shared;
    s.shared_down_k = shared;
    if (s.dense_layers > 0) {
      s.dense_gate_up_n = mlp_factor * dense_intermediate;
      s.dense_down_k = dense_intermediate;
    }
    if (shared > 0 || s.dense_layers > 0) {
      active_intermediate = ((active_intermediate + shared) * s.moe_layers +
                             dense_intermediate * s.dense_layers) /
                            s.layers;
    }
  }
  s.gate_up_n = mlp_factor * intermediate;
  s.gate_up_k = s.hidden;
  s.down_n = s.hidden;
  s.down_k = intermediate;
  s.lm_head_n = static_cast<double>(m.vocab_size) / t;
  s.lm_head_k = s.hidden;

  double rotary_elements = (s.heads + s.kv_heads) * s.head_dim;
  if (m.mla) {
    set_mla_shapes(*m.mla, &s);
    rotary_elements = s.heads * static_cast<double>(m.mla->qk_head_dim()) +
                      static_cast<double>(m.mla->kv_elements_per_token());
  } else {
    AttentionShape& a = s.prefill_attention;
    a.flops_per_position = 4 * s.head_dim * s.heads;
    a.kv_bytes_per_token = 2 * s.kv_heads * s.head_dim * s.kv_bytes;
    a.query_bytes_per_token = 2 * s.heads * s.head_dim * kActivationBytes;
    s.decode_attention = a;
  }
  s.window = m.sliding_window;
  s.window_layers = m.num_sliding_layers;
  s.full_attention_layers = m.num_full_attention_layers();
  if (m.dsa) set_dsa_shapes(m, &s);
  if (m.linear_attention) set_linear_shapes(m, t, &s);

  const double elementwise_elements = kNormResidualElements * s.hidden +
                                      (mlp_factor + 1) * active_intermediate +
                                      2 * rotary_elements;
  s.elementwise_bytes_per_token = kActivationBytes * elementwise_elements;
  s.allreduce_bytes_per_token = d.tp > 1 ? s.hidden * kActivationBytes : 0;
  return s;
}

Rates make_rates(const RankShapes& s, const Throughputs& x) {
  const double layers = s.layers;
  const double bw = x.mem_bytes_per_s;
  const auto gemm = [&](double on_layers, double n, double k) {
    return make_gemm(on_layers, n, k, s.weight_bytes, x.gemm_flops_per_s, bw, x.launch_s);
  };
  Rates r;
  r.qkv = gemm(s.attention_layers, s.qkv_n, s.qkv_k);
  r.o = gemm(s.attention_layers, s.o_n, s.o_k);
  if (s.linear_layers > 0) {
    const double ll = s.linear_layers;
    r.has_linear = true;
    r.linear_in = gemm(ll, s.linear_in_n, s.hidden);
    r.linear_out = gemm(ll, s.hidden, s.linear_out_k);
    r.linear_prefill_flop_s = ll * s.linear_prefill_flops_per_token / x.bf16_flops_per_s;
    r.linear_decode_flop_s = ll * s.linear_decode_flops_per_token / x.bf16_flops_per_s;
    r.linear_act_s = ll * s.linear_act_bytes_per_token / bw;
    r.linear_state_s = ll * 2 * s.linear_state_bytes / bw;
    r.linear_launch_s = ll * x.launch_s;
  }
  if (s.moe) {
    r.moe = true;
    r.experts = s.experts;
    r.experts_per_token = s.experts_per_token;
    r.ep = s.ep;
    r.expert_load = s.expert_load;
    r.router = make_gemm(s.moe_layers, s.experts, s.hidden, kActivationBytes, x.bf16_flops_per_s,
                         bw, x.launch_s);
    r.expert_gate_up = gemm(s.moe_layers, s.gate_up_n, s.gate_up_k);
    r.expert_down = gemm(s.moe_layers, s.down_n, s.down_k);
    if (s.shared_down_k > 0) {
      r.has_shared_expert = true;
      r.shared_gate_up = gemm(s.moe_layers, s.shared_gate_up_n, s.hidden);
      r.shared_down = gemm(s.moe_layers, s.hidden, s.shared_down_k);
    }
    if (s.dense_layers > 0) {
      r.has_dense_layers = true;
      r.gate_up = gemm(s.dense_layers, s.dense_gate_up_n, s.hidden);
      r.down = gemm(s.dense_layers, s.hidden, s.dense_down_k);
    }
  } else {
    r.gate_up = gemm(layers, s.gate_up_n, s.gate_up_k);
    r.down = gemm(layers, s.down_n, s.down_k);
  }
  r.lm_head =
      make_gemm(1, s.lm_head_n, s.lm_head_k, kActivationBytes, x.bf16_flops_per_s, bw, x.launch_s);

  r.attn_prefill = make_attention(s.prefill_attention, s.full_attention_layers, s.weight_bytes, x);
  r.attn_decode = make_attention(s.decode_attention, s.full_attention_layers, s.weight_bytes, x);
  if (s.window_layers > 0) {
    r.windowed = true;
    r.window_prefill = make_attention(s.prefill_attention, s.window_layers, s.weight_bytes, x);
    r.window_decode = make_attention(s.decode_attention, s.window_layers, s.weight_bytes, x);
  }
  if (s.dsa) {
    r.has_indexer = true;
    r.indexer = make_attention(s.indexer, layers, s.weight_bytes, x);
    r.indexer.flop_s = layers * s.indexer.flops_per_position / x.fp8_flops_per_s;
  }

  r.elementwise_s = layers * s.elementwise_bytes_per_token / bw;
  r.elementwise_launch_s = layers * kElementwiseKernelsPerLayer * x.launch_s;

  if (s.tp > 1) {
    const double t = s.tp;
    const double ring = 2 * (t - 1) / t;
    r.allreduce_s =
        layers * kAllReducesPerLayer * ring * s.allreduce_bytes_per_token / x.link_bytes_per_s;
    r.allreduce_fixed_s = layers * kAllReducesPerLayer * x.allreduce_latency_s;
  }
  r.overhead_s = x.overhead_s;
  return r;
}

void set_attention_flops(const RankShapes& s, double flops_per_s, Rates* r) {
  r->attn_prefill.flop_s = s.full_attention_layers * s.prefill_attention.flops_per_position /
                           flops_per_s;
  r->attn_decode.flop_s = s.full_attention_layers * s.decode_attention.flops_per_position /
                          flops_per_s;
  r->window_prefill.flop_s = s.window_layers * s.prefill_attention.flops_per_position /
                             flops_per_s;
  r->window_decode.flop_s = s.window_layers * s.decode_attention.flops_per_position / flops_per_s;
}

void check_roofline_params(const RooflineParams& p) {
  check_efficiency(p.compute_efficiency, "compute_efficiency", true);
  check_efficiency(p.memory_efficiency, "memory_efficiency", false);
  check_efficiency(p.link_efficiency, "link_efficiency", false);
  if (p.kernel_launch.count() < 0 || p.allreduce_latency.count() < 0 ||
      p.iteration_overhead.count() < 0) {
    throw std::invalid_argument("roofline latencies and overhead must be non-negative");
  }
}

double derived_compute_efficiency(const GpuSpec& gpu, const RooflineParams& p, Dtype dtype) {
  if (p.compute_efficiency > 0) {
    return p.compute_efficiency;
  }
  const double measured = gpu.measured_matmul_flops_per_s(dtype);
  return measured > 0 ? std::min(1.0, measured / gpu.peak_flops_per_s(dtype))
                      : kDefaultComputeEfficiency;
}

Throughputs peak_throughputs(const Deployment& d) {
  const GpuSpec& gpu = *d.gpu;
  Throughputs peak;
  peak.gemm_flops_per_s = gpu.peak_flops_per_s(d.weight_dtype);
  peak.bf16_flops_per_s = gpu.bf16_flops_per_s;
  peak.fp8_flops_per_s = gpu.peak_flops_per_s(Dtype::kFp8);
  peak.mem_bytes_per_s = gpu.mem_bw_bytes_per_s;
  peak.link_bytes_per_s = gpu.tp_link_bytes_per_s(d.tp);
  return peak;
}

Throughputs achievable_throughputs(const Deployment& d, const RooflineParams& p) {
  const GpuSpec& gpu = *d.gpu;
  Throughputs x = peak_throughputs(d);
  x.gemm_flops_per_s *= derived_compute_efficiency(gpu, p, d.weight_dtype);
  x.bf16_flops_per_s *= derived_compute_efficiency(gpu, p, Dtype::kBf16);
  x.fp8_flops_per_s *= derived_compute_efficiency(gpu, p, Dtype::kFp8);
  x.mem_bytes_per_s *= p.memory_efficiency;
  x.link_bytes_per_s *= p.link_efficiency;
  x.launch_s = to_seconds(p.kernel_launch);
  x.allreduce_latency_s = to_seconds(p.allreduce_latency);
  x.overhead_s = to_seconds(p.iteration_overhead);
  return x;
}

// One branch-free pass: totals over all segments plus masked totals over decode segments
// (query_tokens == 1, or a verification's query_tokens decode queries); the prefill-like sums are
// the differences.
BatchSums sum_segments(const BatchShape& shape, int64_t window) {
  if (shape.segments.empty()) {
    throw std::invalid_argument("iteration cost requested for an empty batch");
  }
  // Unsigned arithmetic: wraps (defined) on garbage input, which the sign check then rejects.
  uint64_t tokens = 0, rows = 0, positions2 = 0, kv_tokens = 0;
  uint64_t decodes = 0, decode_segments = 0, decode_positions2 = 0, decode_kv_tokens = 0;
  double k2 = 0, q2 = 0, qc = 0;
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
    const bool decode_like = (q == 1) | is_verification(seg);
    const uint64_t decode_mask = 0 - static_cast<uint64_t>(decode_like);
    tokens += q;
    rows += static_cast<uint64_t>(seg.logit_rows);
    positions2 += pos2;
    kv_tokens += kv;
    decodes += q & decode_mask;
    decode_segments += decode_mask & 1;
    decode_positions2 += pos2 & decode_mask;
    decode_kv_tokens += kv & decode_mask;
    if (!decode_like) {  // prefill-like segments are few; decode-only batches skip this
      const double qd = static_cast<double>(q), kd = static_cast<double>(k);
      k2 += kd * kd;
      q2 += qd * qd;
      qc += qd * (kd - qd);
    }
  }
  if (malformed) {
    throw_malformed(shape);
  }
  uint64_t window_positions = 0, window_kv = 0, window_decode_positions = 0, window_decode_kv = 0;
  if (window > 0) {
    const auto w = static_cast<uint64_t>(window);
    for (const Segment& seg : shape.segments) {
      const auto q = static_cast<uint64_t>(seg.query_tokens);
      const auto k = static_cast<uint64_t>(seg.context_tokens);
      const uint64_t positions = windowed_positions(q, k, w);
      const uint64_t kv = std::min(k, q + w - 1) + q;
      window_positions += positions;
      window_kv += kv;
      if (q == 1 || is_verification(seg)) {
        window_decode_positions += positions;
        window_decode_kv += kv;
      }
    }
  }
  const uint64_t positions = positions2 / 2;
  const uint64_t decode_positions = decode_positions2 / 2;
  BatchSums s;
  s.tokens = static_cast<double>(tokens);
  s.logit_rows = static_cast<double>(rows);
  s.has_decode = decodes > 0;
  s.has_prefill = decode_segments < shape.segments.size();
  s.decode_key_positions = static_cast<double>(decode_positions);
  s.decode_kv_tokens = static_cast<double>(decode_kv_tokens);
  s.decode_query_tokens = static_cast<double>(decodes);
  s.prefill_key_positions = static_cast<double>(positions - decode_positions);
  s.prefill_kv_tokens = static_cast<double>(kv_tokens - decode_kv_tokens);
  s.prefill_query_tokens = static_cast<double>(tokens - decodes);
  s.prefill_segments = static_cast<double>(shape.segments.size() - decode_segments);
  s.prefill_k2 = k2;
  s.prefill_q2 = q2;
  s.prefill_qc = qc;
  s.window_decode_key_positions = static_cast<double>(window_decode_positions);
  s.window_decode_kv_tokens = static_cast<double>(window_decode_kv);
  s.window_prefill_key_positions = static_cast<double>(window_positions - window_decode_positions);
  s.window_prefill_kv_tokens = static_cast<double>(window_kv - window_decode_kv);
  return s;
}

BatchSums decode_sums(const DecodePass& pass) {
  if (pass.decodes < 1 || pass.context_tokens < pass.decodes || pass.logit_rows < 0 ||
      pass.logit_rows > pass.decodes) {
    throw std::invalid_argument(
        fmt::format("decode pass of {} requests with {} context tokens in all and {} logit rows",
                    pass.decodes, pass.context_tokens, pass.logit_rows));
  }
  // Per segment (q = 1, k its context): k key positions, k + 1 KV tokens (k read, 1 written).
  BatchSums s;
  s.tokens = static_cast<double>(pass.decodes);
  s.logit_rows = static_cast<double>(pass.logit_rows);
  s.has_decode = true;
  s.decode_key_positions = static_cast<double>(pass.context_tokens);
  s.decode_kv_tokens = static_cast<double>(pass.context_tokens + pass.decodes);
  s.decode_query_tokens = static_cast<double>(pass.decodes);
  return s;
}

BatchSums mixed_sums(const DecodePass& run, const BatchShape& rest) {
  BatchSums s = sum_segments(rest);
  const BatchSums d = decode_sums(run);
  // Only the fields a decode segment adds to; its key positions and KV tokens are integers, so
  // adding them here gives what one pass over every segment would.
  s.tokens += d.tokens;
  s.logit_rows += d.logit_rows;
  s.has_decode = true;
  s.decode_key_positions += d.decode_key_positions;
  s.decode_kv_tokens += d.decode_kv_tokens;
  s.decode_query_tokens += d.decode_query_tokens;
  return s;
}

double attention_time(const AttentionTerm& a, double positions, double kv_tokens,
                      double query_tokens, double latent_rows) {
  double t = std::max(a.flop_s * positions, a.kv_s * kv_tokens + a.query_s * query_tokens) +
             a.launch_s;
  if (a.has_latent) {
    t += a.latent.time(latent_rows);
  }
  return t;
}

double prefill_attention_time(const Rates& r, const BatchSums& s) {
  // MLA decompresses every key token of a prefill segment: sum(context_tokens) latent rows; DSA's
  // absorbed form projects the queries instead.
  const double latent_rows =
      r.has_indexer ? s.prefill_query_tokens : s.prefill_kv_tokens - s.prefill_query_tokens;
  double t = attention_time(r.attn_prefill, s.prefill_key_positions, s.prefill_kv_tokens,
                            s.prefill_query_tokens, latent_rows);
  if (r.windowed) {
    t += attention_time(r.window_prefill, s.window_prefill_key_positions,
                        s.window_prefill_kv_tokens, s.prefill_query_tokens, latent_rows);
  }
  if (r.has_indexer) {
    t += attention_time(r.indexer, s.prefill_key_positions, s.prefill_kv_tokens,
                        s.prefill_query_tokens, 0);
  }
  return t + linear_attention_time(r, s.prefill_query_tokens, s.prefill_segments, true);
}

double decode_attention_time(const Rates& r, const BatchSums& s) {
  double t = attention_time(r.attn_decode, s.decode_key_positions, s.decode_kv_tokens,
                            s.decode_query_tokens, s.decode_query_tokens);
  if (r.windowed) {
    t += attention_time(r.window_decode, s.window_decode_key_positions, s.window_decode_kv_tokens,
                        s.decode_query_tokens, s.decode_query_tokens);
  }
  if (r.has_indexer) {
    t += attention_time(r.indexer, s.decode_key_positions, s.decode_kv_tokens,
                        s.decode_query_tokens, 0);
  }
  return t + linear_attention_time(r, s.decode_query_tokens, s.decode_query_tokens, false);
}

double linear_attention_time(const Rates& r, double tokens, double sequences, bool prefill) {
  if (!r.has_linear) return 0;
  const double flop_s = prefill ? r.linear_prefill_flop_s : r.linear_decode_flop_s;
  return std::max(flop_s * tokens, r.linear_state_s * sequences + r.linear_act_s * tokens) +
         r.linear_launch_s;
}

double qkv_time(const Rates& r, double rows) {
  return r.qkv.time(rows) + (r.has_linear ? r.linear_in.time(rows) : 0);
}

double o_time(const Rates& r, double rows) {
  return r.o.time(rows) + (r.has_linear ? r.linear_out.time(rows) : 0);
}

double mlp_time(const Rates& r, double rows) {
  if (!r.moe) {
    return r.gate_up.time(rows) + r.down.time(rows);
  }
  // The busiest rank of the expert-parallel group sets the time (every rank at ep = 1).
  const RankLoad load = r.expert_load->busiest(rows);
  const double routed = load.routed_rows;
  const double experts = load.touched_experts;
  const GemmTerm& gu = r.expert_gate_up;
  const GemmTerm& dn = r.expert_down;
  double t = r.router.time(rows) +
             std::max(gu.flop_s * routed, gu.weight_s * experts + gu.act_s * routed) +
             gu.launch_s +
             std::max(dn.flop_s * routed, dn.weight_s * experts + dn.act_s * routed) + dn.launch_s;
  if (r.has_shared_expert) {  // the shared expert runs on every token
    t += r.shared_gate_up.time(rows) + r.shared_down.time(rows);
  }
  if (r.has_dense_layers) {  // dense layers before the MoE layers
    t += r.gate_up.time(rows) + r.down.time(rows);
  }
  return t;
}

OperatorTimes evaluate(const Rates& r, const BatchSums& s) {
  const double rows = s.tokens;
  OperatorTimes out;
  out.qkv_gemm = duration_from_seconds(qkv_time(r, rows));
  out.o_gemm = duration_from_seconds(o_time(r, rows));
  out.mlp_gemm = duration_from_seconds(mlp_time(r, rows));
  if (s.has_prefill) {
    out.attention_prefill = duration_from_seconds(prefill_attention_time(r, s));
  }
  if (s.has_decode) {
    out.attention_decode = duration_from_seconds(decode_attention_time(r, s));
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

}  // namespace servesim::models::detail
