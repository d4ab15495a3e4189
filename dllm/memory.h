// dLLM memory: logits tensors, logit decomposition, logit-aware KV page pool sizing (dLLM-Serve)
// and the largest static batch that fits (baselines) -- policies.md 5.6-5.9 and 6.6-6.7.
//
// Contract: pure functions of value types, per GPU of the deployment (weights and KV heads sharded
// over its d.tp ranks; logits and the sampler's buffers are whole on every rank). Units are bytes
// and tokens. The
// activation workspace of a forward pass comes from models::forward_activation_bytes(), the KV
// bytes per token from the model catalog.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dllm/denoise.h"
#include "models/cost/cost_model.h"

namespace servesim::dllm {

inline constexpr int64_t kPageTokens = 256;  // dLLM-Serve KV page size (tokens)

// rows x vocab x bytes_per_element.
int64_t logits_bytes(int64_t rows, int64_t vocab, int64_t bytes_per_element);

// Logit decomposition: walk `rows_per_request` in batch order, accumulating rows; flush a chunk
// when adding the next request would exceed `max_rows` and the chunk is non-empty. A request with
// more rows than max_rows forms one oversized chunk (it is never split). Returns the chunk sizes.
// max_rows <= 0 means no decomposition (one chunk).
std::vector<int64_t> logit_chunks(const std::vector<int64_t>& rows_per_request, int64_t max_rows);
// The same chunks, each passed to `emit(rows)` in order as it closes, without building a list:
// `rows_of(item)` gives each item's rows (the hot path prices a pass's chunks this way).
template <typename Items, typename RowsOf, typename Emit>
void for_each_logit_chunk(const Items& items, RowsOf rows_of, int64_t max_rows, Emit emit) {
  int64_t current = 0;
  for (const auto& item : items) {
    const int64_t rows = rows_of(item);
    if (rows <= 0) continue;
    if (max_rows > 0 && current > 0 && current + rows > max_rows) {
      emit(current);
      current = 0;
    }
    current += rows;
  }
  if (current > 0) emit(current);
}

// Pages reserved at admission for a request of `seq_len` tokens: ceil(ceil(r * L) / 256).
int64_t pages_for_request(double retention, int64_t seq_len);

struct MemoryKnobs {
  double gpu_memory_utilization = 0.9;
  int64_t runtime_overhead_bytes = int64_t{1} << 30;  // CUDA context, allocator slack
  // Live copies of the logits of one chunk during sampling (logits, softmax output, the
  // preallocated buffer): c_logit in policies.md 5.7.
  double logit_copies = 3;
};

// dLLM-Serve's offline profile and page pool.
struct PagePoolPlan {
  int64_t usable_bytes = 0;
  int64_t weight_bytes = 0;
  int64_t runtime_overhead_bytes = 0;
  int64_t activation_bytes = 0;  // forward workspace at max_num_batched_tokens
  int64_t logit_reserve_bytes = 0;
  int64_t page_bytes = 0;
  int64_t num_pages = 0;  // may be <= 0: nothing fits (the caller reports out-of-memory)
  std::string describe() const;
};

// Profiled rows: min(max_num_logits, max_num_batched_tokens) when `logit_budgeting` (the chunked
// path bounds the tensor), else max_num_batched_tokens rows (the monolithic tensor of a profile
// batch filled with logit rows). logit_reserve = logit_copies x rows x V x 2 B.
PagePoolPlan plan_page_pool(const models::Deployment& d, const MemoryKnobs& m,
                            int64_t max_num_batched_tokens, int64_t max_num_logits,
                            bool logit_budgeting);

// The sampler of each system as its released generate() runs it, after the model's bf16 logits:
//   fast-dllm, vanilla (LLaDA's generate.py lineage): softmax(logits.to(float64)) over all rows;
//     the float64 copy and the float64 softmax coexist: 16 B per element.
//   sparse-dllm (Sparse-dLLM's llada_generate): softmax in bf16 over all rows: 2 B.
//   dllm-cache (dLLM-Cache's generate): logits sliced to the generation region, exp and softmax
//     in bf16 there: 4 B per element over the G generation rows only.
//   dllm-serve: per logit chunk, softmax in fp32: 4 B (its memory is the logit reserve instead).
struct SamplerFootprint {
  int64_t bytes_per_element = 0;      // live sampler buffers on top of the bf16 logits
  bool generation_rows_only = false;  // over the G generation rows instead of every logit row
  int64_t softmax_bytes = 4;          // softmax element size, for the sampler's DRAM traffic
};
SamplerFootprint sampler_footprint(Algorithm a);

// A static (request-level) batch of `batch` requests padded to `seq_len`.
struct StaticBatchMemory {
  int64_t weight_bytes = 0, runtime_overhead_bytes = 0, kv_bytes = 0, activation_bytes = 0,
          logits_bytes = 0;
  int64_t total() const {
    return weight_bytes + runtime_overhead_bytes + kv_bytes + activation_bytes + logits_bytes;
  }
};
// KV: fast-dllm L tokens dense; sparse-dllm L tokens (the transient full copy at k = 1);
// dllm-cache 2 x L tokens (K, V, attention and MLP outputs); vanilla none. Activations: forward
// workspace of batch x L tokens. Logits: batch x L x V x 2 B (bf16) plus the sampler's buffers
// (sampler_footprint) over batch x L rows, or batch x G rows for dllm-cache.
// REQUIRES: a baseline algorithm (not dllm-serve); seq_len >= G.
StaticBatchMemory static_batch_memory(Algorithm a, const models::Deployment& d,
                                      const MemoryKnobs& m, const DenoiseParams& p, int64_t batch,
                                      int64_t seq_len);
int64_t usable_bytes(const models::Deployment& d, const MemoryKnobs& m);

}  // namespace servesim::dllm
