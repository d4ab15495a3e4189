// TensorRT-LLM's in-flight batching scheduler (PyTorch backend), as a batching policy.
//
// One iteration, as tensorrt_llm's capacity and micro-batch schedulers compose it:
//   1. Running requests in order: a decode takes 1 token, a request part way through its prompt
//      (chunked context) its next chunk, within max_num_tokens and max_batch_size requests.
//   2. Waiting requests in FCFS order, stopping at the first that cannot start: the capacity
//      scheduler admits one when the KV blocks it needs are free -- under GUARANTEED_NO_EVICT the
//      blocks of its whole sequence (prompt + every output token), reserved at admission so that
//      no running request is ever evicted; under MAX_UTILIZATION only its prompt's -- and the
//      micro-batch scheduler when its context fits the tokens left (the whole prompt, or, with
//      enable_chunked_prefill, a chunk of it).
//   Under MAX_UTILIZATION a decode that finds no free block preempts the newest running request
//   (recompute), as the engine pauses requests to make room.
//   3. With attention data parallelism and attention_dp_config.enable_balance
//      (py_executor.py, _balance_adp_requests), the contexts picked start only when every rank has
//      one to start, when some rank has no generation request left, or when timeout_iters
//      iterations have gone by since the count last restarted; the count rises in every iteration
//      that does not find every rank with a context, whether or not any waits, so a new prompt
//      waits for the next multiple of timeout_iters decode steps. When every rank has a context
//      and a generation request, the contexts wait batching_wait_iters iterations more. The ranks
//      are not tracked one by one: the instance's contexts and decodes count as spread over them,
//      one per rank first (the request fetcher gives a new request to the rank with the fewest).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "sim/policy_api.h"

namespace servesim::policies {

struct TrtllmSchedulerParams {
  enum class Capacity { kGuaranteedNoEvict, kMaxUtilization };
  int64_t max_num_tokens = 8192;
  int64_t max_batch_size = 2048;
  bool enable_chunked_prefill = false;
  Capacity capacity = Capacity::kGuaranteedNoEvict;
  // Attention data-parallel ranks the instance's requests are spread over (1: none), and
  // attention_dp_config (TensorRT-LLM's defaults).
  int64_t attention_dp_ranks = 1;
  bool adp_enable_balance = false;
  int64_t adp_timeout_iters = 50;
  int64_t adp_batching_wait_iters = 10;

  // Step 3 applies: balancing enabled over more than one rank.
  bool balances_contexts() const { return adp_enable_balance && attention_dp_ranks > 1; }
};

std::unique_ptr<sim::BatchingPolicy> make_trtllm_scheduler(const TrtllmSchedulerParams& params);

}  // namespace servesim::policies
