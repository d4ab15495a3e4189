// End-of-run summary of a simulation: latency percentiles, throughput, SLO attainment and the
// goodput definitions of policies.md §0.2, computed from the records the simulator emitted.
//
// Contract: summarize() is a pure function of its arguments (deterministic, no I/O). Latencies are
// in seconds, rates per simulated second. Request percentiles are exact nearest-rank quantiles over
// per-request values; TBT percentiles come from the log histogram of every token gap, so they are
// within LogHistogram's bucket precision (0.8 %) of a true gap.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/histogram.h"
#include "sim/records.h"

namespace servesim::reports {

// Distribution of one latency, in seconds. All zero when there are no samples.
struct Percentiles {
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double mean = 0;
  double max = 0;
};

struct RunSummary {
  int64_t requests = 0;         // measured requests (warm-up requests are excluded everywhere)
  int64_t warmup_requests = 0;  // benchmark warm-up requests (RequestRecord::warmup)
  int64_t preempted_requests = 0;  // requests preempted at least once
  int64_t total_preemptions = 0;
  int64_t cached_prompt_tokens = 0;  // prompt tokens reused from prefix caches (measured requests)
  int64_t dram_prompt_tokens = 0;    // of the rest, loaded from CPU DRAM tiers (measured requests)
  int64_t remote_prompt_tokens = 0;  // loaded from the remote KV store (measured requests)
  int64_t prompt_tokens = 0;         // prompt tokens of the measured requests
  double duration_s = 0;  // first arrival .. last completion; 0 without requests
  // Rates over duration_s; 0 when duration_s is 0.
  double request_rate_per_s = 0;
  double input_tokens_per_s = 0;
  double output_tokens_per_s = 0;
  // The rate the cluster keeps up with while load is offered: requests completed in the later half
  // of the arrival window (first .. last arrival) / that half's length. Neither diluted by
  // draining the last requests' long tails nor lowered by long latencies at a rate the cluster
  // sustains. Equals request_rate_per_s when all requests arrive at once.
  double sustained_rate_per_s = 0;
  // The requests that arrived in that same later half, and their rate: what was actually offered
  // there. A small workload's realized arrivals stray from its nominal rate (100 Poisson arrivals
  // put 50 +- 5 in the later half), so the sustained check compares completions with these.
  int64_t window_arrivals = 0;
  double window_offered_rate_per_s = 0;

  Percentiles ttft_s;
  Percentiles tbt_s;   // every token gap of every request (the TBT histogram)
  Percentiles tpot_s;  // requests with at least two output tokens (TPOT is undefined below)
  Percentiles e2e_s;
  Percentiles queueing_s;  // arrival .. first time scheduled

  // Share of requests meeting every set objective of the SloSpec; 1.0 when none is set. A request
  // meets ttft when ttft_ns() <= ttft, tpot when tpot_ns() <= tpot, and tbt_p99 when
  // tbt_slo_violations <= floor(0.01 * (output_tokens - 1)). NaN when objectives are set but
  // there are no requests.
  double slo_attainment = 1.0;
  // Per-objective shares; NaN when that objective is unset (or there are no requests).
  double attainment_ttft = 0;
  double attainment_tpot = 0;
  double attainment_tbt = 0;
  // Share of all token gaps at or below tbt_p99 (DynaServe reports TBT attainment per token);
  // NaN when tbt_p99 is unset.
  double tbt_token_attainment = 0;

  double goodput_tokens_per_s = 0;    // DynaServe: output tokens of SLO-meeting requests / duration
  double goodput_requests_per_s = 0;  // DOPD: SLO-meeting requests / duration
  // DistServe at this rate: request_rate_per_s / num_gpus when slo_attainment reaches
  // SloSpec::attainment_target, else 0. The maximum over rates is the capacity search's job.
  double distserve_goodput_per_gpu = 0;

  int num_gpus = 0;
  double gpu_seconds = 0;            // from SummaryContext
  double tokens_per_gpu_second = 0;  // output tokens / gpu_seconds; 0 when gpu_seconds is 0
};

// What summarize() cannot derive from records. gpu_seconds is computed by the engine
// (instances x GPUs per instance x time alive).
struct SummaryContext {
  int num_gpus = 1;
  double gpu_seconds = 0;
};

// Which of `slo`'s per-request objectives the finished request `r` meets (an unset objective is
// met): ttft when ttft_ns() <= ttft, tpot when tpot_ns() <= tpot, tbt_p99 when at most
// floor(0.01 x (output_tokens - 1)) of its token gaps exceed it. The one definition summarize()
// counts attainment with.
struct ObjectivesMet {
  bool ttft = true;
  bool tpot = true;
  bool tbt = true;
  bool all() const { return ttft && tpot && tbt; }
};
ObjectivesMet objectives_met(const sim::RequestRecord& r, const sim::SloSpec& slo);

// The 1-based rank of the nearest-rank percentile `percent` (an integer in 1..100) among n >= 1
// values: ceil(n x percent / 100), at least 1. The percentiles of RunSummary are the values at
// this rank of the sorted per-request values.
int64_t nearest_rank_index(int64_t n, int64_t percent);

// REQUIRES: every record is finished: output_tokens >= 1 and
//   arrival_ns <= first_scheduled_ns <= first_token_ns <= done_ns;
//   ctx.num_gpus >= 1; ctx.gpu_seconds >= 0.
// Throws servesim::Error naming the offending request or field otherwise.
RunSummary summarize(const std::vector<sim::RequestRecord>& requests, const LogHistogram& tbt_ns,
                     const sim::SloSpec& slo, const SummaryContext& ctx);

namespace detail {

// What summarize() and SummaryAccumulator count alike, exactly, over the measured requests.
struct RequestTotals {
  int64_t requests = 0, warmup_requests = 0;
  int64_t preempted_requests = 0, total_preemptions = 0;
  int64_t prompt_tokens = 0, output_tokens = 0;
  int64_t cached_tokens = 0, dram_tokens = 0, remote_tokens = 0;
  int64_t first_arrival = std::numeric_limits<int64_t>::max();
  int64_t last_arrival = std::numeric_limits<int64_t>::min();
  int64_t last_done = std::numeric_limits<int64_t>::min();
  int64_t met_ttft = 0, met_tpot = 0, met_tbt = 0, met_all = 0;
  int64_t tbt_gaps = 0, tbt_violations = 0;
  int64_t good_output_tokens = 0;

  // Counts `r` (checked as summarize() requires); returns false for a warm-up request, which
  // only counts as one.
  bool add(const sim::RequestRecord& r, const sim::SloSpec& slo);
  // Sets every field of `s` but the percentiles and the window rates.
  void fill(const sim::SloSpec& slo, const SummaryContext& ctx, RunSummary& s) const;
};

}  // namespace detail

// summarize() one record at a time, in memory that does not grow with the request count (a run
// that keeps no per-request records: output.requests "none" or "sample"). Everything but the
// distributions is counted exactly, as summarize() counts it. The distributions are histograms:
// - the p50 / p90 / p99 of TTFT, TPOT, E2E and queueing are within LogHistogram's bucket
//   precision (0.8 %) of the exact nearest-rank value; their mean and max are exact;
// - the window rates (sustained_rate_per_s, window_arrivals, window_offered_rate_per_s) count
//   completions and arrivals in TimeCounts bins: off by at most the requests of the two bins
//   around each bound of the window, each bin 1 / 2048 of the run's length or less.
class SummaryAccumulator {
 public:
  explicit SummaryAccumulator(sim::SloSpec slo);
  // REQUIRES: `r` is finished, as summarize() requires of its records.
  void add(const sim::RequestRecord& r);
  // REQUIRES: as summarize().
  RunSummary summary(const LogHistogram& tbt_ns, const SummaryContext& ctx) const;

 private:
  sim::SloSpec slo_;
  detail::RequestTotals totals_;
  LogHistogram ttft_, tpot_, e2e_, queueing_;
  TimeCounts arrivals_, completions_;
};

// A readable fixed-width multi-line table (latencies in ms), ending in a newline. The SLO section
// lists the objectives that were set.
std::string format_summary(const RunSummary& s, const sim::SloSpec& slo);

// Every field of `s` as (name, value), in declaration order, for the scalar table and golden
// files. Percentile fields read "<metric>_<p50|p90|p99|mean|max>_s", e.g. "ttft_p99_s"; the
// remaining names equal the field names ("goodput_tokens_per_s", "slo_attainment").
std::vector<std::pair<std::string, double>> summary_scalars(const RunSummary& s);

}  // namespace servesim::reports
