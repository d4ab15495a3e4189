// Running diffusion-LLM scenarios (`servesim run scenarios/dllm/<x>.json`) and reproducing the
// dLLM-Serve paper's tables (`servesim dllm-report`).
//
// Contract: every function taking a Scenario REQUIRES its dllm part (scenarios/dllm_scenario.h).
// run_dllm() builds the workload, each request's denoising plan, the cost model and
// `cluster.instances` dLLM instances (policies/dllm.h) behind the scenario's router, runs them on
// the core engine (sim/engine.h), and (when db_path is set) writes the run, its resolved
// parameters, one request row per request (first_token_ns = done_ns: a dLLM request emits its
// tokens at its last step; output_tokens = generated tokens) and the summary scalars through
// reports::SqliteSink in one transaction. An out-of-memory configuration is returned with `oom`
// set (and stored with status "oom"), never run.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "app/run_scenario.h"
#include "reports/summary.h"
#include "dllm/config.h"
#include "sim/records.h"
#include "scenarios/dllm_scenario.h"

namespace servesim::app {

struct DllmOutcome {
  dllm::DllmRunResult result;
  dllm::DllmMetrics metrics;
  std::string cost_model;  // describe() of the cost model
  std::string workload;    // workload description
  std::string oom;         // non-empty: the configuration does not fit, with why
  int64_t run_id = 0;
  double wall_s = 0;
};

// Why `run_dllm` of `s` over `w` would stop out of memory (dllm-serve: no page or no request fits
// an instance; a baseline: some request of `w` does not fit alone), or "" when it runs.
std::string dllm_memory_shortfall(const scenarios::Scenario& s, const Workload& w,
                                  const scenarios::DataRoot& root);

// Every request's denoising plan (dllm::plan_request), drawn in workload order from the seeded
// stream "denoise" (no draw when no variation is on).
std::vector<dllm::RequestPlan> plan_dllm_requests(const scenarios::Scenario& s, size_t n);

DllmOutcome run_dllm(const scenarios::Scenario& s, const scenarios::DataRoot& root,
                     const std::string& db_path);

// The request rows of a dLLM run: first_token_ns = done_ns (every token comes at the last step);
// a rejected request has instance_id -1 and no output tokens.
std::vector<sim::RequestRecord> dllm_request_records(const dllm::DllmRunResult& result);

// The rows run_dllm() stores for `outcome` (run, parameters with `extra_params` appended, request
// rows, the paper's metrics as scalars, status "ok" or "oom").
StoredRun make_stored_dllm_run(
    const scenarios::Scenario& s, const DllmOutcome& outcome,
    const std::vector<std::pair<std::string, std::string>>& extra_params = {});

// The run's requests summarized like an LLM run's (TTFT = E2E: the answer comes at the last
// denoising pass), on instances x tp GPUs; a rejected request is one not served. REQUIRES: not oom.
reports::RunSummary summarize_dllm(const scenarios::Scenario& s, const DllmOutcome& outcome,
                                   const sim::SloSpec& objectives);

// Human-readable summary of one run (the paper's metrics).
std::string format_dllm_summary(const scenarios::Scenario& s, const DllmOutcome& o);

// `servesim dllm-report`: runs the acceptance experiments and prints each table next to the
// paper's numbers. `table` is one of all, l40s, rtx4090, ablation, sensitivity. Baselines run at
// the largest static batch that fits, or at most `baseline_max_batch` requests when > 0. Returns 0.
int run_dllm_report(const std::string& table, const scenarios::DataRoot& root, std::ostream& out,
                    int64_t baseline_max_batch = 1);

}  // namespace servesim::app
