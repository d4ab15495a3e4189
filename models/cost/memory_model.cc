// GPU memory plan of one serving instance.
//
// Approximations (per GPU of the TP group):
//  - Weights: weights_bytes_16bit * dtype_bytes(weight) / 2 / tp. Every tensor is assumed to shard
//    evenly; replicated pieces (norms, replicated KV heads, the MoE router), vocabulary padding and
//    the 16-bit embeddings/LM head that FP8 checkpoints usually keep are ignored, so FP8 weight
//    memory is underestimated by about half the embedding + LM head bytes.
//  - Activation reserve: an estimate of the peak vLLM records while profiling a dummy forward pass
//    of max_num_batched_tokens tokens. The widest per-token tensors of a layer (hidden state, QKV
//    output, gate-up output) are assumed live together, times kActivationPeakFactor for the
//    residual stream, temporaries and allocator slack:
//      kActivationPeakFactor * tokens * (hidden + (H/t + 2*kvh_rank)*hd + mlp_up_width/t) * 2 B
//    plus the sampler's fp32 logits for max_num_seqs rows: max_num_seqs * vocab * 4 B.
//    For Llama-3.1-8B at tp=1 and 2048 tokens this gives 0.42 GiB.
//  - KV per token per GPU: full_attention_layers * kv_bytes_per_token_per_rank_layer (cost_model.h;
//    linear-attention layers are not full-attention layers):
//    2 * kvh_rank * head_dim * dtype_bytes(kv) with kvh_rank = max(kv_heads / tp, 1) (heads are
//    replicated when kv_heads < tp), or for MLA (kv_lora_rank + qk_rope_head_dim) * dtype_bytes(kv)
//    on every rank.
//  - Sliding-window layers keep at most sliding_window tokens of each sequence: their KV is
//    reserved up front for max_num_seqs sequences (window_kv_reserve_bytes) rather than paged.
//  - Linear-attention (Gated DeltaNet) layers keep a fixed-size state per sequence instead of KV,
//    also reserved up front for max_num_seqs sequences (recurrent_state_reserve_bytes), as
//    SGLang sizes its state pool by its running-request limit; vLLM's hybrid allocator, which
//    pages the states with the KV, gives the same pool when every sequence slot is used.
//  - Weights: quantised dtypes include their block scales (weight_bytes_per_element, hardware.h).
//  - Pipeline parallelism (Deployment::pp = P): a stage of tp GPUs holds ceil(L / P) of the L
//    layers (the heaviest stage sets the plan): that share of the weights (embeddings and LM head
//    spread with the layers, an approximation) and the KV of those layers only, so one GPU's pool
//    holds P times the tokens of a whole-model GPU with the same free memory; num_blocks is the
//    pipeline's, its micro-batch slots share it.
//  - Attention data parallelism (Deployment::attention_dp = D): every rank of tp GPUs holds the
//    weights other than the routed experts (sharded by tp); the routed experts, per MoE layer
//    num_experts x (gated ? 3 : 2) x hidden x expert_intermediate parameters, are spread over
//    all tp x D GPUs. Each rank keeps its own KV pool: the instance has D times the blocks of one
//    GPU's pool.
#include "models/cost/memory_model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "core/error.h"
#include "core/units.h"

namespace servesim::models {
namespace {

constexpr double kMib = 1024.0 * 1024.0;
constexpr int64_t kDefaultRuntimeOverheadBytes = int64_t{1} << 30;  // 1 GiB
constexpr double kActivationPeakFactor = 2.0;
constexpr int64_t kActivationBytes = 2;  // 16-bit activations
constexpr int64_t kLogitBytes = 4;       // the sampler works on fp32 logits

void check_params(const MemoryParams& p) {
  if (!(p.gpu_memory_utilization > 0 && p.gpu_memory_utilization <= 1)) {
    throw std::invalid_argument(
        fmt::format("gpu_memory_utilization must be in (0, 1], got {}", p.gpu_memory_utilization));
  }
  if (p.block_size < 1 || p.max_num_batched_tokens < 1 || p.max_num_seqs < 1) {
    throw std::invalid_argument(fmt::format(
        "block_size, max_num_batched_tokens and max_num_seqs must be positive, got {}, {}, {}",
        p.block_size, p.max_num_batched_tokens, p.max_num_seqs));
  }
  if (p.runtime_overhead_bytes < 0) {
    throw std::invalid_argument(
        fmt::format("runtime_overhead_bytes must be >= 0, got {}", p.runtime_overhead_bytes));
  }
}


// Routed-expert parameters of a MoE model (0 for a dense one), at most param_count.
int64_t routed_expert_params(const ModelSpec& m) {
  if (!m.moe) return 0;
  const int64_t per_expert =
      (m.gated_mlp ? 3 : 2) * m.hidden_size * m.moe->expert_intermediate_size;
  return std::min(m.param_count,
                  per_expert * m.moe->num_experts * static_cast<int64_t>(m.moe->num_moe_layers));
}

// Computes the plan without checking that it leaves room for a KV block.
MemoryPlan compute_plan(const Deployment& d, const MemoryParams& p) {
  const ModelSpec& m = *d.model;
  MemoryPlan plan;
  plan.label = fmt::format("{} on {} x {} ({}, {} weights, {} KV)", m.key, d.gpus(), d.gpu->key,
                           parallelism_label(d), dtype_name(d.weight_dtype), dtype_name(d.kv_dtype));
  plan.gpu_memory_bytes = d.gpu->memory_bytes;
  plan.usable_bytes =
      std::llround(static_cast<double>(d.gpu->memory_bytes) * p.gpu_memory_utilization);
  // Layers of `layers` on the pipeline stage that holds the most of them: ceil(layers / pp).
  const auto stage_share = [&](int64_t layers) -> int64_t { return (layers + d.pp - 1) / d.pp; };
  if (d.attention_dp > 1) {
    const int64_t experts = routed_expert_params(m);
    plan.weight_bytes_per_gpu = weight_bytes(m.param_count - experts, d.weight_dtype, d.tp) +
                                weight_bytes(experts, d.weight_dtype, d.gpus());
  } else if (d.pp > 1) {
    // The stage with the most layers holds that share of every weight.
    plan.weight_bytes_per_gpu = weight_bytes(m.param_count, d.weight_dtype, d.tp) *
                                stage_share(m.num_layers) / m.num_layers;
  } else {
    plan.weight_bytes_per_gpu = weight_bytes(m.param_count, d.weight_dtype, d.tp);
  }
  if (p.drafter) {
    plan.drafter_weight_bytes_per_gpu = weight_bytes(p.drafter->param_count, d.weight_dtype, d.tp);
    plan.weight_bytes_per_gpu += plan.drafter_weight_bytes_per_gpu;
  }
  plan.activation_reserve_bytes = activation_reserve_bytes(d, p);
  plan.runtime_overhead_bytes =
      p.runtime_overhead_bytes > 0 ? p.runtime_overhead_bytes : kDefaultRuntimeOverheadBytes;
  const int64_t layer_kv = kv_bytes_per_token_per_rank_layer(m, d.tp, d.kv_dtype);
  // A pipeline stage keeps the KV of its own layers only.
  plan.kv_bytes_per_token_per_gpu = stage_share(m.num_full_attention_layers()) * layer_kv;
  if (p.drafter) {
    plan.kv_bytes_per_token_per_gpu +=
        p.drafter->num_full_attention_layers() *
        kv_bytes_per_token_per_rank_layer(*p.drafter, d.tp, d.kv_dtype);
  }
  plan.window_kv_reserve_bytes =
      stage_share(m.num_sliding_layers) * layer_kv * m.sliding_window * p.max_num_seqs;
  if (m.linear_attention) {
    const int64_t state_per_gpu = (m.linear_attention->state_bytes_per_layer() + d.tp - 1) / d.tp;
    plan.recurrent_state_reserve_bytes =
        stage_share(m.num_linear_layers()) * state_per_gpu * p.max_num_seqs;
  }
  plan.rule = p.rule;
  const int64_t reserves = plan.window_kv_reserve_bytes + plan.recurrent_state_reserve_bytes;
  const int64_t after_weights =
      plan.usable_bytes - plan.weight_bytes_per_gpu - plan.runtime_overhead_bytes - reserves;
  switch (p.rule) {
    case KvPoolRule::kUtilizationCap:
      plan.kv_pool_bytes_per_gpu = after_weights - plan.activation_reserve_bytes;
      break;
    case KvPoolRule::kStaticFraction:
      plan.kv_pool_bytes_per_gpu = after_weights;
      break;
    case KvPoolRule::kFreeFraction: {
      plan.usable_bytes = plan.gpu_memory_bytes;
      const int64_t free_bytes = plan.gpu_memory_bytes - plan.weight_bytes_per_gpu -
                                 plan.runtime_overhead_bytes - plan.activation_reserve_bytes -
                                 reserves;
      plan.kv_pool_bytes_per_gpu =
          free_bytes > 0 ? std::llround(static_cast<double>(free_bytes) * p.gpu_memory_utilization)
                         : free_bytes;
      break;
    }
  }
  plan.block_size = p.block_size;
  const int64_t block_bytes = p.block_size * plan.kv_bytes_per_token_per_gpu;
  plan.num_blocks = plan.kv_pool_bytes_per_gpu > 0 ? plan.kv_pool_bytes_per_gpu / block_bytes : 0;
  plan.num_blocks *= d.attention_dp;  // one pool per attention-DP rank
  // Every stage holds every token of the pipeline (for its own layers): num_blocks is the
  // pipeline's, shared by its pp micro-batch slots (pipeline.h).
  return plan;
}

bool fits(const MemoryPlan& plan) { return plan.num_blocks >= 1; }

// Smallest valid TP degree above `d.tp` whose plan fits, or 0.
int smallest_fitting_tp(const Deployment& d, const MemoryParams& p) {
  for (int tp = d.tp + 1; tp <= d.model->num_attention_heads; ++tp) {
    if (!is_valid_tp(*d.model, tp)) {
      continue;
    }
    Deployment other = d;
    other.tp = tp;
    if (fits(compute_plan(other, p))) {
      return tp;
    }
  }
  return 0;
}

// "tp=4", or with pipeline stages "tp=4 pp=2" (the error texts' parallelism).
std::string degrees(const Deployment& d) {
  return d.pp > 1 ? fmt::format("tp={} pp={}", d.tp, d.pp) : fmt::format("tp={}", d.tp);
}

[[noreturn]] void throw_does_not_fit(const Deployment& d, const MemoryParams& p,
                                     const MemoryPlan& plan) {
  const ModelSpec& m = *d.model;
  const double total_weights_gb =
      static_cast<double>(weight_bytes(m.param_count, d.weight_dtype, 1)) / 1e9;
  std::string what = fmt::format(
      "{} ({:.1f} GB of {} weights) does not fit on {} x {} ({:.1f} GiB, {:.0f} % usable): ", m.key,
      total_weights_gb, dtype_name(d.weight_dtype), d.gpus(), d.gpu->key,
      static_cast<double>(plan.gpu_memory_bytes) / kBytesPerGiB, p.gpu_memory_utilization * 100);
  if (plan.weight_bytes_per_gpu > plan.usable_bytes) {
    what += fmt::format("needs {:.1f} GiB per GPU for weights alone at {}",
                        static_cast<double>(plan.weight_bytes_per_gpu) / kBytesPerGiB, degrees(d));
  } else {
    // The per-sequence reserves, where the model has them (max_num_seqs sequences each).
    std::string reserves;
    if (plan.window_kv_reserve_bytes > 0) {
      reserves += fmt::format(" + {:.2f} GiB sliding-window KV",
                              static_cast<double>(plan.window_kv_reserve_bytes) / kBytesPerGiB);
    }
    if (plan.recurrent_state_reserve_bytes > 0) {
      reserves += fmt::format(
          " + {:.2f} GiB recurrent state for {} sequences (max_num_seqs)",
          static_cast<double>(plan.recurrent_state_reserve_bytes) / kBytesPerGiB, p.max_num_seqs);
    }
    what += fmt::format(
        "needs {:.1f} GiB weights + {:.2f} GiB activation reserve + {:.2f} GiB runtime overhead{} "
        "+ {:.1f} MiB for one KV block per GPU at {}, but only {:.1f} GiB is usable",
        static_cast<double>(plan.weight_bytes_per_gpu) / kBytesPerGiB,
        static_cast<double>(plan.activation_reserve_bytes) / kBytesPerGiB,
        static_cast<double>(plan.runtime_overhead_bytes) / kBytesPerGiB, reserves,
        static_cast<double>(plan.block_size * plan.kv_bytes_per_token_per_gpu) / kMib, degrees(d),
        static_cast<double>(plan.usable_bytes) / kBytesPerGiB);
  }
  const int better_tp = smallest_fitting_tp(d, p);
  if (better_tp > 0) {
    what += fmt::format("; try tp>={} or a larger GPU", better_tp);
  } else {
    what += fmt::format("; no tensor-parallel degree up to {} fits, use a larger GPU",
                        m.num_attention_heads);
  }
  throw CapacityError(what);
}

std::string gib(int64_t bytes) {
  return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / kBytesPerGiB);
}

}  // namespace

const char* kv_pool_rule_name(KvPoolRule rule) {
  switch (rule) {
    case KvPoolRule::kUtilizationCap:
      return "utilization cap (vLLM)";
    case KvPoolRule::kStaticFraction:
      return "static fraction (SGLang)";
    case KvPoolRule::kFreeFraction:
      return "fraction of free memory (TensorRT-LLM)";
  }
  return "?";
}

int64_t forward_activation_bytes(const Deployment& d, int64_t tokens) {
  const ModelSpec& m = *d.model;
  const double t = d.tp;
  const double mlp_factor = m.gated_mlp ? 2 : 1;
  double intermediate = static_cast<double>(m.intermediate_size);
  if (m.moe) {
    // The widest MLP of a layer: routed experts plus the shared expert, or a dense layer's MLP.
    intermediate = static_cast<double>(m.moe->experts_per_token * m.moe->expert_intermediate_size +
                                       m.moe->shared_expert_intermediate_size);
    if (m.moe->num_moe_layers < m.num_layers) {
      intermediate = std::max(intermediate, static_cast<double>(m.intermediate_size));
    }
  }
  // Q, K and V outputs; MLA: the queries plus the compressed KV latent and rotary key.
  const double attention_width =
      m.mla ? m.num_attention_heads / t * static_cast<double>(m.mla->qk_head_dim()) +
                  static_cast<double>(m.mla->kv_elements_per_token())
            : (m.num_attention_heads / t + 2.0 * kv_heads_per_rank(m, d.tp)) *
                  static_cast<double>(m.head_dim);
  const double width =
      static_cast<double>(m.hidden_size) + attention_width + mlp_factor * intermediate / t;
  return std::llround(kActivationPeakFactor * static_cast<double>(tokens) * width *
                      kActivationBytes);
}

int64_t activation_reserve_bytes(const Deployment& d, const MemoryParams& p) {
  // With attention DP the instance's token budget and sequence limit are the ranks' together, and
  // each GPU runs one rank's share.
  const int64_t ranks = d.attention_dp;
  return forward_activation_bytes(d, (p.max_num_batched_tokens + ranks - 1) / ranks) +
         (p.max_num_seqs + ranks - 1) / ranks * d.model->vocab_size * kLogitBytes;
}

MemoryPlan plan_memory(const Deployment& deployment, const MemoryParams& params) {
  validate_deployment(deployment);
  check_params(params);
  MemoryPlan plan = compute_plan(deployment, params);
  if (!fits(plan)) {
    throw_does_not_fit(deployment, params, plan);
  }
  return plan;
}

std::string describe(const MemoryPlan& plan) {
  std::string out = plan.label.empty() ? "memory plan" : plan.label;
  out += fmt::format("\n  GPU memory          {} per GPU, {} usable ({:.0f} %)",
                     gib(plan.gpu_memory_bytes), gib(plan.usable_bytes),
                     plan.gpu_memory_bytes > 0 ? 100.0 * static_cast<double>(plan.usable_bytes) /
                                                     static_cast<double>(plan.gpu_memory_bytes)
                                               : 0.0);
  if (plan.rule != KvPoolRule::kUtilizationCap) {
    out += fmt::format("\n  KV pool rule        {}", kv_pool_rule_name(plan.rule));
  }
  out += fmt::format("\n  weights             {}", gib(plan.weight_bytes_per_gpu));
  if (plan.drafter_weight_bytes_per_gpu > 0) {
    out += fmt::format(" (speculative drafter {})", gib(plan.drafter_weight_bytes_per_gpu));
  }
  out += fmt::format("\n  activation reserve  {}", gib(plan.activation_reserve_bytes));
  out += fmt::format("\n  runtime overhead    {}", gib(plan.runtime_overhead_bytes));
  if (plan.window_kv_reserve_bytes > 0) {
    out += fmt::format("\n  sliding-window KV   {}", gib(plan.window_kv_reserve_bytes));
  }
  if (plan.recurrent_state_reserve_bytes > 0) {
    out += fmt::format("\n  recurrent state     {}", gib(plan.recurrent_state_reserve_bytes));
  }
  out += fmt::format(
      "\n  KV pool             {}: {} blocks x {} tokens = {} tokens ({:.1f} KiB per token per "
      "GPU)",
      gib(plan.kv_pool_bytes_per_gpu), plan.num_blocks, plan.block_size, plan.max_kv_tokens(),
      static_cast<double>(plan.kv_bytes_per_token_per_gpu) / 1024.0);
  return out;
}

double activation_share_of_kv_budget(const MemoryPlan& plan) {
  if (plan.rule == KvPoolRule::kStaticFraction) return 0;
  const double budget = static_cast<double>(plan.activation_reserve_bytes) +
                        static_cast<double>(plan.kv_pool_bytes_per_gpu);
  return budget > 0 ? static_cast<double>(plan.activation_reserve_bytes) / budget : 0;
}

}  // namespace servesim::models
