// Capacity planning (`servesim plan PLAN`): which deployment meets the SLO at the target load, at
// what cost, and how much load each one serves.
//
// A plan file (JSON, validated like scenarios: every problem at once, with its JSON path; unknown
// keys are errors) names a base scenario and a search space. The space expands, in a fixed order
// (GPU type, then candidate, then grid axes with the first axis outermost), into configs; each
// config is the base scenario document plus a list of `path=value` overrides, so
// `servesim run BASE --set ...` (or the document printed by `servesim plan --emit-scenario`)
// reproduces any simulation of the plan exactly.
//
// Contract:
// - Pruning never drops a config that could meet the SLO: a config is pruned only when its
//   deployment does not fit in GPU memory (scenarios::DeploymentError), when it uses more GPUs than
//   the budget, or when the target rate exceeds a proven upper bound on the rate it can sustain
//   (the workload's total work over the peak-rate roofline, iteration_time >= peak_bound_time,
//   split by instance role where the engine enforces roles); see plan_bound().
// - Deterministic: every config is simulated independently from the plan's documents (one seed,
//   the base scenario's), so the results do not depend on --jobs or on the number of MPI ranks.
//   Results are gathered and sorted by config index before anything is printed or stored.
// - Every simulation is stored in the results DB (run, run_param with plan.* keys, scalar, TBT
//   histogram; request rows when output.requests is true), and the plan's configs with their
//   status, reason, cost and capacity in the plan and plan_config tables (reports/plan_store.h).
// - Interruption (SIGINT) stops handing out configs; finished simulations are kept and stored.
// - A dLLM base (PlanSpec::dllm) is planned the same way: pruned when one request cannot fit
//   (dllm::memory_shortfall), no rate bound, a config with rejected requests fails.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <ostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "app/capacity.h"
#include "app/run_scenario.h"
#include "scenarios/scenario.h"

namespace servesim::app {

using scenarios::Json;

// One family of configs: `set` overrides applied to the base document, then the cartesian
// product of the `grid` axes.
struct PlanCandidate {
  std::string name;
  std::vector<std::pair<std::string, Json>> set;
  std::vector<std::pair<std::string, std::vector<Json>>> grid;
};

// The most configs one plan may expand to (GPUs x every candidate's grid); a larger search
// space is refused at parse time with its size.
inline constexpr int64_t kMaxPlanConfigs = 100'000;

struct PlanSpec {
  std::string name;
  std::string description;
  std::string source;      // the plan file
  Json base;               // the base scenario document
  std::string base_source; // where the base came from (file, or "<plan>:base")
  std::string base_dir;    // resolves the base's relative paths
  // The base is a diffusion-LLM scenario ("kind": "dllm"): each config is one GPU running the dLLM
  // simulator, `search.gpus` sets its `gpu`, and every request's tokens come at its last step, so
  // its TTFT is its E2E latency (a ttft objective bounds E2E).
  bool dllm = false;
  std::optional<double> target_rate;  // req/s; nullopt: find each config's maximum rate
  bool capacity = false;   // with a target rate, also bisect for each config's serving capacity
  std::vector<std::string> slo;       // SloCriteria arguments
  double attainment = 0.9;
  CapacityOptions search;  // relative_tolerance, max_runs, min_throughput_ratio, start_rate
  // A config's capacity search starts from its neighbours' capacities (warm_start_rate()) with a first bracket step of 1 + 2 x relative_tolerance, instead of
  // from the base rate (or the rate bound) with doubling; without a start_rate only.
  bool warm_start = true;
  std::vector<std::string> gpus;      // empty: the base's cluster.gpu
  int64_t gpu_budget = 0;             // 0: unlimited
  std::vector<std::pair<std::string, double>> prices;  // USD per GPU-hour, per gpu in `gpus`
  std::vector<PlanCandidate> candidates;
  int top = 10;
  bool store_requests = false;
  Json document;           // the plan file as read (stored with the results)
};

// Reads and validates a plan file. Throws InputError (unreadable, bad JSON with its line) or
// ConfigError (every issue, with its JSON path).
PlanSpec load_plan(const std::string& path, const scenarios::DataRoot& root);

enum class ConfigStatus { kPruned, kMeets, kFails, kError, kNotRun };
const char* status_name(ConfigStatus status);

// One expanded config with its pruning verdict.
struct PlanConfig {
  int64_t index = 0;
  std::string label;      // "h100_sxm coloc tp=4 instances=2"
  std::string candidate;
  std::string gpu;
  std::string policy;
  std::vector<std::string> overrides;  // on the base document, in order (rate not included)
  ConfigStatus status = ConfigStatus::kNotRun;
  std::string reason;     // why pruned / failed / errored
  int64_t num_gpus = 0;
  double price_per_gpu_hour = 0;
  double cost_per_hour = 0;
  double bound_rps = 0;   // proven upper bound on the sustainable rate (0: none known)
  // Warm starts (PlanSpec::warm_start). `chain`: the index of the first config of its chain, the
  // configs of one candidate and GPU that differ only in the values of the candidate's last two
  // grid axes; a chain's capacity searches run in index order. Its neighbours in the chain (-1:
  // none): one step back on the last axis (`warm_last`), on the second-last axis
  // (`warm_second`), and on both (`warm_corner`); see warm_start_rate().
  int64_t chain = 0;
  int64_t warm_last = -1, warm_second = -1, warm_corner = -1;
};

// The rate a config's capacity search starts from, given the capacities found so far in its
// chain (0 or absent: not known): with all three neighbours known, the product model
// second x last / corner (capacity as a product of one factor per axis); else the one neighbour
// known, last-axis first; 0 when none is.
double warm_start_rate(const PlanConfig& c, const std::map<int64_t, double>& capacities);

// The outcome of one simulation of a config.
struct PlanProbe {
  double rate = 0;
  bool meets = false;
  std::vector<SloCheck> checks;
  double output_tokens_per_s = 0;
  double tokens_per_s_per_gpu = 0;  // output tokens per second per GPU
  double tokens_per_s_per_user = 0; // 1 / mean TPOT
  double goodput_tokens_per_s = 0;
  double slo_attainment = 0;
  double ttft_p99_s = 0;
  double tpot_p50_s = 0;
  double tbt_p99_s = 0;
  double gpu_seconds = 0;
  std::string fingerprint;
  StoredRun run;          // what goes into the database
};

struct PlanConfigResult {
  int64_t index = 0;
  bool finished = false;
  std::string error;      // a simulation threw (message)
  std::vector<PlanProbe> probes;  // in the order run
  std::optional<size_t> at_target;  // probe at the target rate (target mode)
  double capacity_rps = 0;          // bisection result (max mode, or target mode with capacity)
};

struct PlanRunOptions {
  std::string db_path;     // empty: no database
  int jobs = 1;            // worker threads (per MPI rank)
  bool progress = false;   // progress bar with ETA on stderr
  std::string explain;     // config index or label: explain it instead of running the plan
  std::string emit;        // config index or label: print its scenario document and stop
  bool json = false;       // also print the summary as one JSON document on std::cout
};

// The proven upper bound on the request rate `scenario` can sustain (req/s), or 0 when none is
// known (elastic clusters). The workload's total prefill and decode work, costed by the
// scenario's own cost model at peak rate in one batch (the loosest sound packing), divided over
// the instances able to do it.
double plan_bound(const scenarios::Scenario& scenario, const scenarios::DataRoot& root);

// Runs a plan (or --explain / --emit). Returns the process exit code: 0 when some config meets the
// SLO (or an explanation / emission was printed), 1 when none does. Throws ConfigError / InputError
// for bad input. Under MPI (built with SERVESIM_HAVE_MPI and started by mpirun) the configs are
// sharded over ranks and rank 0 prints and writes the database.
int run_plan(const std::string& plan_path, const PlanRunOptions& options,
             const scenarios::DataRoot& root, std::ostream& out);

// Set by SIGINT while a plan runs (install_plan_interrupt_handler()); workers stop taking configs.
std::atomic<bool>& plan_interrupted();
void install_plan_interrupt_handler();

}  // namespace servesim::app
