// `servesim capacity SCENARIO --slo tbt_p99=100ms`: serving capacity, the largest request rate at
// which the SLO holds, found by bisection on the workload's rate. The pieces (SLO criteria, the
// rate knob, the bisection over any probe) are shared with the capacity planner (app/plan.h).
//
// SLO forms (repeatable): `<metric>_p<q>=<duration>` with metric ttft, tpot, tbt, e2e and q in
// 50, 90, 99 bounds that percentile of the run (tbt over every token gap: Sarathi-Serve's and
// DynaServe's capacity); `ttft=`, `tpot=`, `tbt_p99=` also set the scenario's per-request
// objectives, and `--attainment A` additionally requires that share of requests to meet them.
// A rate must also be sustained: the rate of completions while load is offered (RunSummary::
// sustained_rate_per_s) >= min_throughput_ratio x offered rate (an overloaded disaggregated
// deployment queues prompts and keeps its TBT low; this catches it).
// The rate knob is workload.arrival.rate for generated workloads and workload.rate (time-scale to
// a rate) for traces; closed-loop workloads have no rate.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <queue>
#include <string>
#include <vector>

#include "app/run_scenario.h"
#include "reports/capacity_store.h"
#include "reports/summary.h"
#include "scenarios/scenario.h"
#include "sim/records.h"

namespace servesim::app {

struct CapacityOptions {
  std::vector<std::string> slo;           // "tbt_p99=100ms", "ttft_p90=2s", "ttft=1s" ...
  std::optional<double> attainment;       // also require this share of requests meeting the SLO
  double start_rate = 0;                  // 0: the scenario's own rate
  double relative_tolerance = 0.02;       // stop when (hi - lo) / hi is below this
  int max_runs = 24;                      // at most max_runs + 1 probes in all
  // The search never probes below start_rate x min_rate_fraction (a rate that low stretches the
  // workload over 1,000x its span) nor above kMaxCapacityRate.
  double min_rate_fraction = 1.0 / 1024;
  // A rate also counts as sustained only if the run's completion rate while load is offered is at
  // least this share of the offered one; above capacity queues grow and completions fall behind.
  double min_throughput_ratio = 0.9;
  // End a probe as soon as it can no longer meet the SLO (SloCriteria::failure_watch): the
  // search visits the same rates and finds the same capacity; a stopped probe's figures are
  // those of the requests finished when it stopped.
  bool early_stop = true;
  // The bracket's first step: the start rate is multiplied (or divided) by this, and each further
  // step doubles the factor's excess over 1, up to 2 (1.1, 1.2, 1.4, 1.8, 2, 2 ...). 2 is plain
  // doubling; a start rate known to be close (a neighbouring config's capacity) takes a small one.
  double first_step = 2.0;
};

// One criterion evaluated on one run: ok when value <= limit (or >= limit when at_least).
struct SloCheck {
  std::string name;  // "tbt_p99", "attainment", "sustained"
  double value = 0;
  double limit = 0;
  bool at_least = false;
  bool ok = false;
  std::string unit;  // "s", "", "req/s"
};

class SloFailureWatch;

// The objectives of a capacity search, parsed once (forms in the header comment).
class SloCriteria {
 public:
  // Throws ConfigError whose issues are located as "<where> <argument>" (e.g. "--slo ttft=soon").
  static SloCriteria parse(const std::vector<std::string>& slo, std::optional<double> attainment,
                           double min_throughput_ratio, const std::string& source,
                           const std::string& where = "--slo");

  // The "slo.*=..." overrides that give runs their per-request objectives.
  const std::vector<std::string>& scenario_overrides() const { return scenario_overrides_; }
  // The same per-request objectives (ttft, tpot, tbt_p99) as a run's SloSpec, with the
  // attainment target given to parse() (0.9 without one); for runs that take no scenario slo
  // section (dLLM).
  const sim::SloSpec& request_objectives() const { return request_objectives_; }
  // Every criterion on a run offered `rate` req/s: the percentile bounds in the order given, then
  // attainment (when required), then the sustained-rate check. Deterministic.
  std::vector<SloCheck> check(const reports::RunSummary& s, double rate) const;
  static bool all_ok(const std::vector<SloCheck>& checks);

  // A watch that ends a run once check() is certain to fail on it (SloFailureWatch).
  std::unique_ptr<SloFailureWatch> failure_watch() const;

 private:
  struct Bound {
    std::string name;    // as given, e.g. "tbt_p99"
    std::string metric;  // ttft | tpot | tbt | e2e
    std::string q;       // 50 | 90 | 99
    double limit_s = 0;
    int64_t limit_ns = 0;
  };
  friend class SloFailureWatch;
  std::vector<Bound> bounds_;
  std::vector<std::string> scenario_overrides_;
  sim::SloSpec request_objectives_;
  std::optional<double> attainment_;
  double min_throughput_ratio_ = 0.9;
};

// Counts, at a simulated time `now`, the measured requests certain to exceed a TTFT limit before
// they finish: those that arrived more than `limit` before now without a first token within
// the limit, rejected requests excepted. Needs arrival times fixed in advance
// (RunPopulation::arrival_ns) and events in simulated-time order; REQUIRES: enabled() for misses().
class TtftDeadline {
 public:
  explicit TtftDeadline(int64_t limit_ns) : limit_ns_(limit_ns) {}
  void start(const RunPopulation& population);
  bool enabled() const { return arrivals_ != nullptr; }
  void first_token(RequestId id, int64_t first_token_ns);
  void rejected(RequestId id);
  int64_t misses(int64_t now_ns);
  // A lower bound of the TTFT of every request counted by the last misses() (0 when none).
  double least_miss_s() const { return least_miss_s_; }

 private:
  using MinHeap = std::priority_queue<int64_t, std::vector<int64_t>, std::greater<>>;
  int64_t limit_ns_;
  const std::vector<int64_t>* arrivals_ = nullptr;  // by id, sorted
  int64_t warmup_ = 0;
  size_t passed_ = 0;          // ids [warmup, passed) arrived before now - limit
  MinHeap met_, rejected_;     // arrivals of requests that met the limit / were rejected, not yet passed
  int64_t met_passed_ = 0, rejected_passed_ = 0;
  double least_miss_s_ = 0;
};

// A RunWatch that ends a run as soon as SloCriteria::check() is certain to fail on it, whatever
// the requests still in flight do: attainment (when required) below its target even if every
// remaining measured request met its objectives, or a ttft / tpot / e2e percentile bound exceeded
// even if every remaining value were within it (nearest rank over at most the measured requests:
// a request the engine rejects only lowers the count). Misses are known when a request finishes
// and, for TTFT objectives on arrivals fixed in advance, as soon as a request has waited past
// its limit without a first token (TtftDeadline). The sustained and tbt checks need the whole
// run and never stop it. Its reason reads "<criterion>: <counts>", the criterion named as in
// SloCheck::name; verdict() is then that criterion as a failed SloCheck whose value is a bound
// the full run's value could not beat (attainment: at most; a percentile: at least).
class SloFailureWatch : public RunWatch {
 public:
  explicit SloFailureWatch(const SloCriteria& criteria);
  void start(RunPopulation population) override;
  std::string on_request(const sim::RequestRecord& record) override;
  std::string on_first_token(RequestId id, int64_t first_token_ns) override;
  void on_rejected(const sim::RejectedRecord& record) override;
  // REQUIRES: a call returned a reason.
  const SloCheck& verdict() const { return verdict_; }

 private:
  std::string verdict_at(int64_t now_ns);  // checks every criterion's certain misses at now

  const SloCriteria& c_;
  RunPopulation pop_;
  std::optional<TtftDeadline> ttft_;  // the attainment's TTFT objective, when enabled
  int64_t misses_ = 0;          // finished measured requests missing an objective
  int64_t other_misses_ = 0;    // of them, those within the TTFT objective
  // Per percentile bound: how many of its values may exceed it with the percentile still within
  // (n - nearest rank, n = the measured values), set by start().
  std::vector<int64_t> allowed_over_;
  std::vector<int64_t> over_;          // per percentile bound, finished values above it
  std::vector<double> least_over_;     // per percentile bound, the smallest of them (s)
  std::vector<std::optional<TtftDeadline>> deadline_;  // per ttft percentile bound, when enabled
  SloCheck verdict_;
};

// The override key that sets the request rate of `scenario`'s workload. Throws ConfigError for a
// closed-loop workload.
std::string rate_knob(const scenarios::Scenario& scenario);
// The workload's own offered rate (generated: arrival.rate; traces: requests over the span).
double workload_rate(const scenarios::Scenario& scenario, const scenarios::DataRoot& root);

// The largest rate a capacity search probes, and the range --start-rate accepts (req/s).
inline constexpr double kMaxCapacityRate = 1e6;
// Fewest measured requests arriving in the later half of the arrival window for the sustained
// check to mean anything (below it one request more or less moves the ratio by over 5 %).
inline constexpr int64_t kMinSustainedSample = 20;

// Checks the options a user gives (attainment in (0, 1], start rate finite in (0,
// kMaxCapacityRate], max_runs >= 1). Throws ConfigError naming the option.
void validate_capacity_options(const CapacityOptions& options, const std::string& source);

// One line on why `checks` fail, e.g. "ttft_p90 is 512.0 ms, above its 400 ms bound"; empty
// when all hold.
std::string describe_failures(const std::vector<SloCheck>& checks);

struct CapacityProbe {
  double rate = 0;
  bool meets = false;
  reports::RunSummary summary;
  std::string failed;  // describe_failures() of a violating probe (may be empty)
  // Why SloCriteria::failure_watch() ended the probe ("<criterion>: ..."); empty for a full run.
  // A stopped probe fails; its summary covers the requests finished by then.
  std::string stopped_early;
};

struct CapacityResult {
  double capacity_rps = 0;            // largest rate that met the SLO (0 if none did)
  reports::RunSummary at_capacity;    // the run at that rate
  std::vector<CapacityProbe> probes;  // in the order they were run
  // When no rate met the SLO: "no rate meets the SLO: ..." with the lowest rate probed and what
  // failed there. Empty otherwise.
  std::string no_rate_reason;
};

// Bisection on rate over `probe` (one run at a rate). Brackets from `start_rate` (growing while
// the SLO holds, shrinking while it does not, by options.first_step and then up to doubling), then bisects until the bracket is within
// options.relative_tolerance or options.max_runs is spent. When `max_rate` > 0 no rate above it
// is probed (a proven upper bound on what can meet the SLO); reaching it while meeting ends the
// search. The search is bounded: at most options.max_runs + 1 probes, none below start_rate x
// options.min_rate_fraction nor above kMaxCapacityRate. Deterministic given a deterministic probe.
// REQUIRES: start_rate finite and > 0.
CapacityResult search_capacity(const std::function<CapacityProbe(double)>& probe,
                               double start_rate, const CapacityOptions& options,
                               double max_rate = 0);

// Throws ConfigError for malformed SLO arguments or options, a workload without a rate, or one
// too small for the sustained check (fewer than kMinSustainedSample requests in the later half of
// its arrival window).
CapacityResult find_capacity(const std::string& scenario_path,
                             const std::vector<std::string>& overrides,
                             const CapacityOptions& options, const scenarios::DataRoot& root,
                             std::ostream& out);

// What `servesim capacity` stores of a finished search (reports/capacity_store.h): its options,
// verdict and every probe with the criteria judged on it. `binding` and `binding_rate` are the
// criteria failing at the lowest failing rate above capacity and that rate (0: none).
reports::CapacitySearchRecord capacity_record(
    const std::string& scenario, const std::vector<std::string>& overrides,
    const CapacityOptions& options, const SloCriteria& criteria, const CapacityResult& result,
    const std::vector<std::string>& binding, double binding_rate);

}  // namespace servesim::app
