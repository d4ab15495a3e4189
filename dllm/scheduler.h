// dLLM-Serve's phase-multiplexed greedy FCFS scheduler (policies.md 5.5), as a pure decision over
// the running and waiting queues.
//
// Contract: deterministic; never mutates its inputs. Running requests are taken in order while
// their query tokens fit max_num_batched_tokens, stopping at the first misfit (strict FCFS); then
// waiting requests are admitted in order while the left-over budget holds their full sequence
// (they start in Refresh) and the free KV pages hold their reservation, stopping at the first that
// does not fit. Both stages together take at most max_num_seqs requests. The caller runs the
// chosen running prefix plus the admitted prefix as one pass and puts them back, in that order, at
// the front of the running queue.
#pragma once

#include <cstdint>
#include <vector>

namespace servesim::dllm {

// What the scheduler sees of one request.
struct QueuedRequest {
  int64_t seq_len = 0;      // L = P + G
  bool in_refresh = true;   // its next step has the whole sequence as queries
  int64_t block = 32;       // query tokens of a Reuse step
  int64_t pages = 0;        // KV pages it reserves at admission
};

struct SchedulerKnobs {
  int64_t max_num_batched_tokens = 16384;
  int64_t max_num_seqs = 512;
  // true: a running request costs L in Refresh and block in Reuse (dLLM-Serve); false: it costs
  // L at every step (request-level provisioning for its peak), the ablation without the scheduler.
  bool phase_aware = true;
};

struct ScheduleDecision {
  int64_t run_prefix = 0;   // running[0, run_prefix) run this pass
  int64_t admit_prefix = 0; // waiting[0, admit_prefix) are admitted and run this pass
  int64_t query_tokens = 0; // budget used
  int64_t pages = 0;        // pages the admitted requests reserve
};

// Query tokens `r` costs this pass.
int64_t scheduled_cost(const QueuedRequest& r, const SchedulerKnobs& k);

ScheduleDecision schedule_pass(const std::vector<QueuedRequest>& running,
                               const std::vector<QueuedRequest>& waiting, int64_t free_pages,
                               const SchedulerKnobs& knobs);

}  // namespace servesim::dllm
