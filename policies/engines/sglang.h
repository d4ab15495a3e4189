// SGLang's scheduler (python/sglang/srt/managers/scheduler.py and schedule_policy.py), as a
// batching policy.
//
// Each iteration is a prefill batch whenever one can be formed, else a decode batch of every
// running request (with enable_mixed_chunk, the decodes ride along in the prefill batch; the
// engine model sets it only with chunked prefill on, as SGLang does):
// - Prefill (PrefillAdder): the request part way through its prompt continues first, then waiting
//   requests in FCFS order while
//     input tokens <= max_prefill_tokens (the first request is always allowed) and the chunk
//     budget chunked_prefill_size lasts (a longer prompt is cut to what is left and continues next
//     prefill batch);
//     prompt + min(output left, 4096) < the tokens left, where the tokens left are the free KV
//     tokens minus every running request's min(output left, 4096) x new_token_ratio and what this
//     batch already admitted (input + min(output, 4096) each);
//     running requests + admitted < max_running_requests.
//   A request refused for lack of tokens marks the batch full: no prefill is tried again until a
//   running request finishes.
// - Decode: when the KV pool cannot hold one more token for every running request, requests are
//   retracted (recompute) -- the one with the fewest generated tokens first, ties the longest
//   prompt -- until the pool holds retract_decode_steps (20) tokens for each remaining one, and
//   new_token_ratio becomes (tokens generated + 20 x remaining requests) / their output lengths;
//   otherwise new_token_ratio decays by (init - min) / 600 per decode step, down to min =
//   init x 0.14; it returns to init (0.7 x schedule_conservativeness) when the instance is idle.
// - Receiving (scheduler_recv_skipper.py): with scheduler_recv_interval n > 1, requests that
//   arrive while the scheduler is busy are taken in only when a counter reaches n; each decode
//   batch adds 1 to it and any other batch 1000, so a request waits for up to n decode batches
//   before a prefill may take it (an idle scheduler takes it in at once).
#pragma once

#include <cstdint>
#include <memory>

#include "sim/policy_api.h"

namespace servesim::policies {

struct SglangSchedulerParams {
  int64_t chunked_prefill_size = 8192;  // 0: prompts are never cut
  int64_t max_prefill_tokens = 16384;
  int64_t max_running_requests = 4096;
  double schedule_conservativeness = 1.0;
  bool enable_mixed_chunk = false;
  int64_t scheduler_recv_interval = 1;
};

std::unique_ptr<sim::BatchingPolicy> make_sglang_scheduler(const SglangSchedulerParams& params);

}  // namespace servesim::policies
