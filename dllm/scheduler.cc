#include "dllm/scheduler.h"

namespace servesim::dllm {

int64_t scheduled_cost(const QueuedRequest& r, const SchedulerKnobs& k) {
  return (!k.phase_aware || r.in_refresh) ? r.seq_len : r.block;
}

ScheduleDecision schedule_pass(const std::vector<QueuedRequest>& running,
                               const std::vector<QueuedRequest>& waiting, int64_t free_pages,
                               const SchedulerKnobs& knobs) {
  ScheduleDecision d;
  const auto n_running = static_cast<int64_t>(running.size());
  while (d.run_prefix < n_running && d.run_prefix < knobs.max_num_seqs) {
    const int64_t c = scheduled_cost(running[d.run_prefix], knobs);
    if (d.query_tokens + c > knobs.max_num_batched_tokens) break;
    d.query_tokens += c;
    ++d.run_prefix;
  }
  const auto n_waiting = static_cast<int64_t>(waiting.size());
  while (d.admit_prefix < n_waiting && d.run_prefix + d.admit_prefix < knobs.max_num_seqs) {
    const QueuedRequest& r = waiting[d.admit_prefix];
    if (d.query_tokens + r.seq_len > knobs.max_num_batched_tokens ||
        free_pages - d.pages < r.pages) {
      break;
    }
    d.query_tokens += r.seq_len;
    d.pages += r.pages;
    ++d.admit_prefix;
  }
  return d;
}

}  // namespace servesim::dllm
