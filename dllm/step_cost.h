// Time of one dLLM forward pass (a denoising step of every request in the batch), priced by the
// same operator cost model as autoregressive serving.
//
// Contract: the transformer body is one models::IterationCostModel call over one Segment per
// request {query_tokens, context_tokens} with no logit rows. The cost model's prefill attention is
// bidirectional for diffusion models (q x k key positions; the profiled model scales causal rows
// by the ratio of key positions, see models/cost/profiled_cost_model.h). The LM head is priced per
// logit chunk: every chunk is a separate GEMM that re-reads the LM-head weights (the cost model's
// lm_head term for that chunk's rows), followed by the sampler (read the bf16 logits, write and
// read the softmax at `softmax_bytes` per element) at the GPU's achievable bandwidth. Side tokens
// (dLLM-Cache's V-projection) are one extra Segment attending only to itself. Deterministic; the
// LM-head time per row count is memoised (not thread-safe, like the cost models).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "dllm/denoise.h"
#include "models/cost/cost_model.h"

namespace servesim::dllm {

struct StepCostKnobs {
  int64_t max_num_logits = 0;  // logit chunk bound; 0 = one monolithic LM-head GEMM
  int64_t softmax_bytes = 4;   // sampler's softmax element size (dllm::sampler_footprint)
  double memory_efficiency = 0.8;  // achievable share of DRAM bandwidth for the sampler
  Duration step_overhead{0};   // framework time per forward pass on top of the cost model's
  // Framework time per request of a pass (per-sequence host work of the serving stack: input
  // assembly, sampling bookkeeping, block/phase updates), on top of step_overhead.
  Duration request_overhead{0};
};

class StepCost {
 public:
  // `model` must outlive this object.
  StepCost(const models::IterationCostModel& model, const models::Deployment& d,
           StepCostKnobs knobs);
  // Time of one pass over `work` (one entry per request, in batch order).
  // REQUIRES: work non-empty, every query_tokens >= 1.
  Duration step_time(const std::vector<StepWork>& work);
  // Number of LM-head chunks of the last step_time() call.
  int64_t last_chunks() const { return last_chunks_; }

 private:
  Duration lm_head_time(int64_t rows);

  const models::IterationCostModel& model_;
  int64_t vocab_ = 0;
  double bandwidth_ = 0;
  StepCostKnobs knobs_;
  models::BatchShape shape_;
  std::map<int64_t, Duration> lm_memo_;
  int64_t last_chunks_ = 0;
};

}  // namespace servesim::dllm
