// GPU memory plan of one instance: weights per TP shard + activation reserve + paged KV pool.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "models/cost/cost_model.h"

namespace servesim::models {

// How a serving engine sizes its KV pool (per GPU; `fraction` is MemoryParams'
// gpu_memory_utilization, whose meaning depends on the rule):
//   kUtilizationCap  vLLM (servesim's default): KV = HBM x fraction - weights - activation reserve
//                    - runtime overhead (vLLM profiles a max_num_batched_tokens forward pass).
//   kStaticFraction  SGLang: KV = HBM x fraction (mem_fraction_static) - weights - runtime
//                    overhead; activations live in the remaining 1 - fraction.
//   kFreeFraction    TensorRT-LLM: KV = (HBM - weights - runtime overhead - activation reserve)
//                    x fraction (free_gpu_memory_fraction of what a max_num_tokens dry run
//                    leaves free).
enum class KvPoolRule { kUtilizationCap, kStaticFraction, kFreeFraction };
const char* kv_pool_rule_name(KvPoolRule rule);

struct MemoryParams {
  KvPoolRule rule = KvPoolRule::kUtilizationCap;
  double gpu_memory_utilization = 0.9;   // the rule's fraction (see KvPoolRule)
  int64_t block_size = 16;                // tokens per KV block
  int64_t max_num_batched_tokens = 2048;  // sizes the activation reserve
  int64_t max_num_seqs = 256;             // sizes the logits/sampler reserve
  int64_t runtime_overhead_bytes = 0;     // CUDA context, NCCL buffers...; 0 = default (1 GiB)
  // A speculative decoding drafter (models/cost/speculative.h draft_model()): its weights, split
  // over the TP ranks like the target's, and the KV of its layer for every token join the plan.
  // Null: none.
  std::shared_ptr<const ModelSpec> drafter;
};

struct MemoryPlan {
  // What was planned, e.g. "llama-3.1-8b on 1 x h100_sxm (tp1, bf16 weights, bf16 KV)".
  std::string label;
  KvPoolRule rule = KvPoolRule::kUtilizationCap;
  int64_t gpu_memory_bytes = 0;          // per GPU
  int64_t usable_bytes = 0;              // gpu_memory_bytes * utilization
  int64_t weight_bytes_per_gpu = 0;      // the drafter's included
  int64_t drafter_weight_bytes_per_gpu = 0;  // MemoryParams::drafter's share of it
  int64_t activation_reserve_bytes = 0;  // per GPU
  int64_t runtime_overhead_bytes = 0;    // per GPU
  int64_t kv_bytes_per_token_per_gpu = 0;  // paged KV: full-attention layers (and the drafter's)
  // KV of the sliding-window layers, reserved for max_num_seqs sequences of sliding_window tokens
  // (0 without such layers).
  int64_t window_kv_reserve_bytes = 0;
  // The recurrent state of the linear-attention layers (ModelSpec::recurrent_state_bytes(), split
  // over the TP ranks), reserved for max_num_seqs sequences as SGLang's state pool is sized
  // (0 without such layers).
  int64_t recurrent_state_reserve_bytes = 0;
  int64_t kv_pool_bytes_per_gpu = 0;
  int64_t block_size = 0;
  // KV blocks of the instance (same count on every TP rank; with attention DP, the sum of the
  // ranks' pools; with pipeline stages, the pipeline's, shared by its pp micro-batch slots).
  int64_t num_blocks = 0;

  int64_t max_kv_tokens() const { return num_blocks * block_size; }
};

// Per GPU, the KV pool of params.rule (KvPoolRule); usable = memory_bytes * gpu_memory_utilization
// (rounded to the byte) for the first two rules, memory_bytes for kFreeFraction;
// num_blocks = floor(kv_pool / (block_size * kv_bytes_per_token_per_gpu)).
// Throws CapacityError, naming the model, GPU, TP degree and the bytes needed vs available, when
// the weights and reserves leave no room for a single KV block (with the smallest TP degree that
// would fit, when one exists), CapacityError for an invalid TP degree, and std::invalid_argument
// for out-of-range params.
MemoryPlan plan_memory(const Deployment& deployment, const MemoryParams& params);

// Estimated per-GPU activation workspace of one forward pass over `tokens` query tokens (the widest
// per-token tensors of a layer live together, times a peak factor; see memory_model.cc). Excludes
// logits. REQUIRES: tokens >= 0.
int64_t forward_activation_bytes(const Deployment& deployment, int64_t tokens);

// Estimated per-GPU activation reserve: what vLLM's profiling pass peaks at for a
// max_num_batched_tokens dummy batch plus the sampler's fp32 logits (see memory_model.cc); with
// attention DP, for one rank's share of both limits (the instance's divided by attention_dp).
int64_t activation_reserve_bytes(const Deployment& deployment, const MemoryParams& params);

// Share of the KV budget (the pool plus the activation reserve carved out of it) that the
// activation reserve takes: reserve / (reserve + KV pool), per GPU. 0 under kStaticFraction, where
// activations live outside the KV budget. A large share means raising max_num_batched_tokens
// shrank the KV pool (`servesim run` warns above kActivationReserveWarnShare).
double activation_share_of_kv_budget(const MemoryPlan& plan);
inline constexpr double kActivationReserveWarnShare = 0.25;

// Multi-line human-readable summary (GiB figures, blocks, KV tokens).
std::string describe(const MemoryPlan& plan);

}  // namespace servesim::models
