// What a dLLM serving run is configured with and what it yields: the per-instance configuration
// of a dLLM policy (policies/dllm.h runs it on the core engine), the stack efficiency of
// dLLM-Serve, the per-request results in workload order and the paper's metrics over them.
//
// Contract: value types and pure functions. A configuration that cannot hold even one request is
// an OutOfMemoryError (dllm-serve: no KV page left after weights and the activation/logit
// reserve; baselines: a single request does not fit), never a silent run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dllm/denoise.h"
#include "dllm/memory.h"
#include "dllm/step_cost.h"
#include "models/cost/cost_model.h"
#include "core/error.h"
#include "core/request_spec.h"

namespace servesim::dllm {

// The configuration does not fit in GPU memory.
class OutOfMemoryError : public CapacityError {
 public:
  using CapacityError::CapacityError;
};

// Host time dLLM-Serve's engine spends per scheduled request in every forward pass (per-sequence
// input assembly, phase and block bookkeeping, sampling of its eager PyTorch implementation): the
// gap between kernel-table time and the paper's measured throughput. Fitted on ONE cell, the
// paper's L40S LiveBench throughput (90.17 tok/s), by `servesim dllm-report`, which prints the fit
// and the held-out errors on the other cells. The baselines' released generate() loops run one
// request per pass and default to 0.
inline constexpr Duration kDllmServeRequestOverhead{4'000'000};

struct DllmConfig {
  Algorithm algorithm = Algorithm::kDllmServe;
  DenoiseParams denoise;
  DecodeVariation variation;  // early stop at EOS, threshold decoding (off by default)
  MemoryKnobs memory;
  // dllm-serve.
  int64_t max_num_batched_tokens = 16384;
  int64_t max_num_seqs = 512;
  int64_t max_num_logits = 2048;
  bool phase_aware = true;      // phase-multiplexed token accounting (else peak cost L)
  bool logit_budgeting = true;  // chunked LM head + logit-aware profiling (else monolithic)
  // Baselines: upper bound on the static batch (0 = the largest that fits).
  int64_t max_batch_size = 0;
  Duration step_overhead{0};  // framework time per forward pass on top of the cost model's
  // Framework time per request of a pass (StepCostKnobs::request_overhead); a scenario's
  // dllm-serve policy defaults to kDllmServeRequestOverhead.
  Duration request_overhead{0};
};

struct DllmRequestResult {
  RequestId id = 0;
  int64_t arrival_ns = 0;
  int64_t first_scheduled_ns = -1;
  int64_t done_ns = -1;  // -1 when rejected
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;  // tokens denoised (G, or fewer with early stop at EOS)
  int32_t instance = -1;      // instance that served it
  bool rejected = false;      // can never run (sequence over the token budget or the page pool)
};

struct DllmRunResult {
  std::vector<DllmRequestResult> requests;  // in workload order
  int64_t forward_passes = 0;
  int64_t lm_head_chunks = 0;
  int64_t batch_slots = 0;     // sum over passes of requests in the pass
  int64_t max_batch = 0;       // largest pass (requests)
  int64_t rejected = 0;
  int64_t end_ns = 0;          // when the last request finished
  std::string memory;          // the memory plan, one line
  uint64_t fingerprint = 0;    // the engine's event fingerprint
};

// The step-cost knobs of `config`: chunked LM head for dllm-serve with logit budgeting, the
// algorithm's sampler, the framework overheads.
StepCostKnobs cost_knobs(const DllmConfig& config);
// std::invalid_argument when the knobs are inconsistent (denoise params, non-positive budgets).
void check_config(const DllmConfig& config);

// Why `config` cannot hold even one request of `seq_len` tokens (prompt + generation) on `d`, or
// "" when it can.
std::string memory_shortfall(const DllmConfig& config, const models::Deployment& d, int64_t seq_len);

// The paper's metrics over the finished requests.
struct DllmMetrics {
  int64_t finished = 0;
  int64_t generated_tokens = 0;
  double duration_s = 0;       // first arrival to last finish
  double throughput_tok_s = 0; // generated tokens / duration
  double mean_latency_s = 0, p50_latency_s = 0, p90_latency_s = 0, p99_latency_s = 0;
  double std_latency_s = 0;    // population standard deviation
  double min_latency_s = 0, max_latency_s = 0;
  double span_s() const { return max_latency_s - min_latency_s; }
  double mean_batch = 0;
};
DllmMetrics compute_metrics(const DllmRunResult& r);

}  // namespace servesim::dllm
