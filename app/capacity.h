// `servesim capacity SCENARIO --slo tbt_p99=100ms`: serving capacity, the largest request rate at
// which the SLO holds, found by bisection on the workload's rate.
//
// SLO forms (repeatable): `<metric>_p<q>=<duration>` with metric ttft, tpot, tbt, e2e and q in
// 50, 90, 99 bounds that percentile of the run (tbt over every token gap: Sarathi-Serve's and
// DynaServe's capacity); `ttft=`, `tpot=`, `tbt_p99=` also set the scenario's per-request
// objectives, and `--attainment A` additionally requires that share of requests to meet them.
// A rate must also be sustained: achieved rate >= min_throughput_ratio x offered rate (an
// overloaded disaggregated deployment queues prompts and keeps its TBT low; this catches it).
// The rate knob is workload.arrival.rate for generated workloads and workload.rate (time-scale to
// a rate) for traces; closed-loop workloads have no rate.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "reports/summary.h"
#include "scenarios/scenario.h"

namespace servesim::app {

struct CapacityOptions {
  std::vector<std::string> slo;           // "tbt_p99=100ms", "ttft_p90=2s", "ttft=1s" ...
  std::optional<double> attainment;       // also require this share of requests meeting the SLO
  double start_rate = 0;                  // 0: the scenario's own rate
  double relative_tolerance = 0.02;       // stop when (hi - lo) / hi is below this
  int max_runs = 24;
  // A rate also counts as sustained only if the run's achieved request rate is at least this share
  // of the offered one; above capacity queues grow and a finite run hides it in the tail.
  double min_throughput_ratio = 0.9;
};

struct CapacityProbe {
  double rate = 0;
  bool meets = false;
  reports::RunSummary summary;
};

struct CapacityResult {
  double capacity_rps = 0;            // largest rate that met the SLO (0 if none did)
  reports::RunSummary at_capacity;    // the run at that rate
  std::vector<CapacityProbe> probes;  // in the order they were run
};

// Throws ConfigError for malformed SLO arguments or a workload without a rate.
CapacityResult find_capacity(const std::string& scenario_path,
                             const std::vector<std::string>& overrides,
                             const CapacityOptions& options, const scenarios::DataRoot& root,
                             std::ostream& out);

}  // namespace servesim::app
