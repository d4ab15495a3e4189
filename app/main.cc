// servesim: the command-line front end. The only place that turns errors into exit codes:
// 0 success, 1 failure (a regression, an internal error), 2 bad input (scenario, trace, usage).
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "app/capacity.h"
#include "app/dopd_ratio.h"
#include "app/fidelity.h"
#include "app/parallel.h"
#include "app/dllm_run.h"
#include "scenarios/cost_models.h"
#include "scenarios/dllm_scenario.h"
#include "app/models_cmd.h"
#include "app/plan.h"
#include "app/profiles_cmd.h"
#include "app/regress.h"
#include "app/run_scenario.h"
#include "app/validate.h"
#include "models/memory_model.h"
#include "policies/builtin.h"
#include "reports/query.h"
#include "scenarios/scenario.h"
#include "sim/core/error.h"
#include "traces/trace_catalog.h"

namespace {

using namespace servesim;

scenarios::Scenario load(const std::string& path, const std::vector<std::string>& overrides,
                         const scenarios::DataRoot& root) {
  if (path.empty() || path == "quickstart") return scenarios::load_embedded_quickstart(overrides, root);
  return scenarios::load_scenario(path, overrides, root);
}

// A one-line progress bar on stderr, drawn only when stderr is a terminal.
class ProgressBar {
 public:
  ProgressBar() : enabled_(isatty(STDERR_FILENO) != 0) {}
  std::function<void(double)> callback() {
    if (!enabled_) return {};
    return [this](double f) {
      const int filled = static_cast<int>(f * 30);
      fmt::print(stderr, "\r[{:<30}] {:5.1f}% requests finished", std::string(filled, '#'), f * 100);
      std::fflush(stderr);
      drawn_ = true;
    };
  }
  ~ProgressBar() {
    if (drawn_) fmt::print(stderr, "\r{:<60}\r", "");
  }

 private:
  bool enabled_;
  bool drawn_ = false;
};

void print_deployment(const scenarios::Scenario& s, const scenarios::DataRoot& root) {
  const auto& cat = scenarios::Catalogs::get(root);
  const auto& gpu = cat.gpus.get(s.cluster.gpu);
  fmt::print("scenario   {} ({})\n", s.name, s.source);
  fmt::print("model      {} on {}, weights {}, KV {}\n", s.model, gpu.name,
             models::dtype_name(s.cluster.weight_dtype), models::dtype_name(s.cluster.kv_dtype));
  fmt::print("policy     {} / router {}\n", s.policy.type, s.router.type);
  for (const auto& g : s.groups) {
    fmt::print("instances  {} x {} (tp {}): {} KV blocks of {} tokens each ({} tokens)\n", g.count,
               sim::role_name(g.role), g.tp, g.memory.num_blocks, g.memory.block_size,
               g.memory.max_kv_tokens());
  }
}

// A diffusion-LLM scenario ("kind": "dllm"). An out-of-memory configuration exits with 2.
int cmd_run_dllm(const std::string& path, const std::vector<std::string>& overrides,
                 const scenarios::DataRoot& root, const std::string& db) {
  const scenarios::DllmScenario s = scenarios::load_dllm_scenario(path, overrides, root);
  const app::DllmOutcome o = app::run_dllm(s, root, db);
  fmt::print("{}", app::format_dllm_summary(s, o));
  if (!db.empty()) fmt::print("results    {} (run_id {})\n", db, o.run_id);
  return o.oom.empty() ? 0 : 2;
}

int cmd_run(const std::string& path, const std::vector<std::string>& overrides,
            std::optional<uint64_t> seed, const std::string& db, bool no_db) {
  const auto root = scenarios::DataRoot::discover();
  std::vector<std::string> all = overrides;
  if (seed) all.push_back(fmt::format("seed={}", *seed));
  if (!path.empty() && path != "quickstart" && scenarios::is_dllm_scenario_file(path)) {
    return cmd_run_dllm(path, all, root, no_db ? "" : db);
  }
  const scenarios::Scenario s = load(path, all, root);
  print_deployment(s, root);
  ProgressBar bar;
  app::RunOptions options;
  options.db_path = no_db ? "" : db;
  options.keep_records = false;
  options.progress = bar.callback();
  const app::RunOutcome o = app::run_scenario(s, root, options);
  fmt::print("workload   {}\n", o.workload_description);
  for (const auto& d : o.cost_models) fmt::print("cost model {}\n", d);
  const double table_s = o.lookups.interpolated_s + o.lookups.extrapolated_s;
  if (table_s > 0) {
    fmt::print("calibration {:.1f} % of table-driven iteration time interpolated inside measured "
               "data, {:.1f} % extrapolated\n",
               100 * o.lookups.interpolated_s / table_s, 100 * o.lookups.extrapolated_share());
  }
  fmt::print("fidelity   {}\n", app::error_band(s, root));
  if (o.lookups.extrapolated_share() > 0.05) {
    fmt::print("warning: {:.1f} % of the predicted iteration time was extrapolated outside the "
               "measured profiles (more than 5 %); treat the results with care\n",
               100 * o.lookups.extrapolated_share());
  }
  fmt::print("\n{}", reports::format_summary(o.summary, s.slo));
  if (o.result.requests_rejected_context > 0) {
    fmt::print("warning: {} request(s) rejected: prompt + output exceed {}'s {}-token context "
               "(context.overflow \"truncate\" shortens them instead)\n",
               o.result.requests_rejected_context, s.model, s.max_context_tokens);
  }
  if (const int64_t kv = o.result.requests_rejected - o.result.requests_rejected_context; kv > 0) {
    fmt::print("warning: {} request(s) rejected: they can never run (prompt + output exceeds an "
               "instance's KV pool, or the prompt exceeds the token budget without chunked "
               "prefill)\n",
               kv);
  }
  if (o.result.requests_total > 0 && o.result.requests_rejected == o.result.requests_total) {
    fmt::print(stderr, "servesim: {}: every request ({}) was rejected; nothing was measured\n",
               s.source, o.result.requests_total);
    return 2;
  }
  if (o.result.requests_unfinished > 0) {
    fmt::print("warning: stopped at stop.max_time with {} request(s) unfinished\n",
               o.result.requests_unfinished);
  }
  const double events_per_s = o.wall_s > 0 ? o.result.events / o.wall_s : 0;
  fmt::print("\nsimulated {:.1f} s in {:.3f} s of wall time ({:.0f} events/s), fingerprint {}\n",
             o.summary.duration_s, o.wall_s, events_per_s, app::format_fingerprint(o.result.event_fingerprint));
  if (!options.db_path.empty()) fmt::print("results    {} (run_id {})\n", options.db_path, o.run_id);
  return 0;
}

// `check` of a diffusion-LLM scenario: the same validation and workload build as `run`.
int cmd_check_dllm(const std::string& path, const std::vector<std::string>& overrides,
                   const scenarios::DataRoot& root) {
  const scenarios::DllmScenario s = scenarios::load_dllm_scenario(path, overrides, root);
  const models::Deployment d = scenarios::dllm_deployment(s, root);
  const auto cost = scenarios::make_cost_model(s.cost_model, d, root);
  const Workload w = scenarios::build_dllm_workload(s);
  fmt::print("scenario   {} ({}), diffusion LLM\n", s.name, s.source);
  fmt::print("model      {} on {}\n", s.model, s.gpu);
  fmt::print("policy     {}\n", s.resolved["policy"]["type"].get<std::string>());
  fmt::print("cost model {}\n", cost->describe());
  fmt::print("workload   {} ({} requests)\n", w.description, w.requests.size());
  fmt::print("resolved scenario:\n{}\n", s.resolved.dump(2));
  fmt::print("ok\n");
  return 0;
}

int cmd_check(const std::string& path, const std::vector<std::string>& overrides) {
  const auto root = scenarios::DataRoot::discover();
  if (!path.empty() && path != "quickstart" && scenarios::is_dllm_scenario_file(path)) {
    return cmd_check_dllm(path, overrides, root);
  }
  const scenarios::Scenario s = load(path, overrides, root);
  print_deployment(s, root);
  for (const auto& g : s.groups) fmt::print("\n{}\n", models::describe(g.memory));
  const Workload w = scenarios::build_workload(s, root);
  fmt::print("workload   {} ({} requests", w.description, w.requests.size());
  if (w.skipped_rows > 0) fmt::print(", {} rows skipped", w.skipped_rows);
  fmt::print(")\nresolved scenario:\n{}\n", s.resolved.dump(2));
  if (const int64_t n = scenarios::count_beyond_context(w, s.max_context_tokens); n > 0) {
    fmt::print("warning: {} of {} requests have prompt + output beyond {}'s {}-token context; "
               "they will be {} (context.overflow)\n",
               n, w.requests.size(), s.model, s.max_context_tokens,
               s.truncate_context ? "truncated" : "rejected");
  }
  fmt::print("ok\n");
  return 0;
}

void print_schema(const ParamSchema& schema) {
  for (const auto& p : schema) {
    std::string extra;
    if (!p.choices.empty()) extra = fmt::format(" ({})", fmt::join(p.choices, "|"));
    if (p.type == ParamType::kInt) {
      const auto [lo, hi] = int_param_range(p);
      extra += fmt::format(" [{}, {}]", lo, hi);
    } else if (p.type == ParamType::kDouble && (p.min_value || p.max_value)) {
      extra += fmt::format(" [{}, {}]", p.min_value ? fmt::format("{:g}", *p.min_value) : "-inf",
                           p.max_value ? fmt::format("{:g}", *p.max_value) : "inf");
    }
    fmt::print("      {:<30} {:<8} default {:<10} {}{}\n", p.name, param_type_name(p.type),
               format_param_value(p.default_value), p.help, extra);
  }
}

int cmd_list(const std::string& what) {
  const auto root = scenarios::DataRoot::discover();
  policies::register_builtin_policies();
  if (what == "gpus") {
    const auto& cat = scenarios::Catalogs::get(root);
    fmt::print("{:<16} {:<28} {:>8} {:>10} {:>10} {:>9} {:>8}\n", "key", "name", "HBM GiB",
               "HBM GB/s", "bf16 TF/s", "fp8 TF/s", "$/hour");
    for (const auto& [key, g] : cat.gpus.all()) {
      fmt::print("{:<16} {:<28} {:>8.0f} {:>10.0f} {:>10.0f} {:>9.0f} {:>8.2f}\n", key, g.name,
                 g.memory_bytes / double(1ull << 30), g.mem_bw_bytes_per_s / 1e9,
                 g.bf16_flops_per_s / 1e12, g.fp8_flops_per_s / 1e12, g.price_usd_per_hour);
    }
  } else if (what == "models") {
    const auto& cat = scenarios::Catalogs::get(root);
    fmt::print("{:<28} {:>8} {:>7} {:>6} {:>5} {:>8} {:>10}  {}\n", "key", "params B", "layers",
               "heads", "kv", "hidden", "KV KB/tok", "notes");
    for (const auto& [key, m] : cat.models.all()) {
      std::string notes = m.moe ? fmt::format("MoE {}x top-{}", m.moe->num_experts,
                                              m.moe->experts_per_token)
                                : "";
      if (m.diffusion) notes += "diffusion LLM";
      fmt::print("{:<28} {:>8.2f} {:>7} {:>6} {:>5} {:>8} {:>10.1f}  {}\n", key, m.param_count / 1e9,
                 m.num_layers, m.num_attention_heads, m.num_kv_heads, m.hidden_size,
                 m.kv_bytes_per_token(models::Dtype::kBf16) / 1024.0, notes);
    }
  } else if (what == "policies") {
    fmt::print("batching policies (scenario key \"policy\"):\n");
    for (const auto& [name, e] : sim::batching_policies().entries()) {
      fmt::print("  {:<18} {}\n", name, e.description);
      print_schema(e.schema);
    }
    fmt::print("cluster policies (scenario key \"policy\"; they lay out the instances):\n");
    for (const auto& [name, e] : sim::cluster_policies().entries()) {
      fmt::print("  {:<18} {}\n", name, e.description);
      print_schema(e.schema);
    }
    fmt::print("routers (scenario key \"router\"):\n");
    for (const auto& [name, e] : sim::routing_policies().entries()) {
      fmt::print("  {:<18} {}\n", name, e.description);
      print_schema(e.schema);
    }
  } else if (what == "traces") {
    fmt::print("{:<26} {:<12} {:>7}  {:<14} {}\n", "name", "format", "rows", "license", "path");
    for (const auto& t : traces::shipped_traces()) {
      fmt::print("{:<26} {:<12} {:>7}  {:<14} {}\n", t.name, t.format, t.rows, t.license, t.path);
      fmt::print("{:<26} {}\n", "", t.description);
    }
  }
  return 0;
}

int cmd_query(const std::string& db, const std::string& sql) {
  fmt::print("{}", reports::format_table(reports::run_query(db, sql)));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"servesim: discrete-event simulator and capacity planner for LLM serving"};
  cli.require_subcommand(1);
  cli.set_version_flag("--version", SERVESIM_VERSION);

  std::string scenario_path;
  std::vector<std::string> overrides;
  std::optional<uint64_t> seed;
  std::string db = "results.db";
  bool no_db = false;

  auto* run = cli.add_subcommand("run", "run a scenario (the embedded quickstart when none given)");
  run->add_option("scenario", scenario_path, "scenario JSON file (or \"quickstart\")");
  run->add_option("--set", overrides, "override a scenario value: path=value (repeatable)");
  run->add_option("--seed", seed, "override the scenario's seed");
  run->add_option("--db", db, "results database (SQLite), appended to")->capture_default_str();
  run->add_flag("--no-db", no_db, "do not write a results database");

  auto* check = cli.add_subcommand("check", "validate a scenario and print what it resolves to");
  check->add_option("scenario", scenario_path, "scenario JSON file (or \"quickstart\")");
  check->add_option("--set", overrides, "override a scenario value: path=value (repeatable)");

  std::string what;
  auto* list = cli.add_subcommand("list", "list gpus, models, policies or traces");
  list->add_option("what", what, "gpus | models | policies | traces")
      ->required()
      ->check(CLI::IsMember({"gpus", "models", "policies", "traces"}));

  std::string sql;
  auto* query = cli.add_subcommand("query", "run SQL on a results database and print a table");
  query->add_option("db", db, "results database")->required();
  query->add_option("sql", sql, "SQL statement")->required();

  std::string baseline;
  bool update = false;
  auto* regress = cli.add_subcommand("regress", "goodput regression gate over canonical scenarios");
  regress->add_option("baseline", baseline, "baseline JSON (bench/goodput_baseline.json)")->required();
  regress->add_flag("--update", update, "rewrite the baseline with the measured goodput");

  std::string dllm_table = "all";
  auto* dllm_report = cli.add_subcommand(
      "dllm-report", "dLLM-Serve paper tables (Table 4, RTX 4090 sweep, ablation, sensitivity) "
                     "next to the paper's numbers");
  dllm_report->add_option("--table", dllm_table, "all | l40s | rtx4090 | ablation | sensitivity")
      ->capture_default_str()
      ->check(CLI::IsMember({"all", "l40s", "rtx4090", "ablation", "sensitivity"}));
  int64_t dllm_baseline_batch = 0;
  dllm_report
      ->add_option("--baseline-batch", dllm_baseline_batch,
                   "cap every baseline's static batch (policy max_batch_size); 0 = the largest "
                   "that fits. 1 runs them one request at a time, as Sparse-dLLM's released "
                   "generate() does")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{4096}));

  auto* profiles_cmd = cli.add_subcommand("profiles", "import and compare measured profiles");
  profiles_cmd->require_subcommand(1);
  std::string import_kind, import_dir, out_root = "profiles";
  auto* import = profiles_cmd->add_subcommand(
      "import", "convert a measured dataset (aiconfigurator or vidur) into servesim profiles");
  import->add_option("source", import_kind, "aiconfigurator | vidur")
      ->required()
      ->check(CLI::IsMember({"aiconfigurator", "vidur"}));
  import->add_option("dir", import_dir, "dataset directory")->required()->check(CLI::ExistingDirectory);
  import->add_option("--out", out_root, "profiles root to write into")->capture_default_str();
  std::string compare_a, compare_b;
  auto* compare = profiles_cmd->add_subcommand("compare", "ratio statistics of profile B vs A");
  compare->add_option("a", compare_a, "reference profile directory")->required();
  compare->add_option("b", compare_b, "profile directory to compare")->required();

  auto* models_cmd = cli.add_subcommand("models", "add models to the catalog and list them");
  models_cmd->require_subcommand(1);
  std::string models_config;
  servesim::app::ModelsImportOptions models_options;
  auto* models_import = models_cmd->add_subcommand(
      "import", "add a model to the catalog from a Hugging Face config.json (model_type llama, "
                "mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe)");
  models_import->add_option("config", models_config, "the model's config.json")->required();
  models_import->add_option("--key", models_options.key,
                            "catalog key (default: from the file name or _name_or_path, "
                            "lower-cased, e.g. qwen3-32b)");
  models_import->add_option("--name", models_options.name,
                            "display name (default: the last part of --hf-id, else the key)");
  models_import->add_option("--hf-id", models_options.hf_id,
                            "Hugging Face id, e.g. Qwen/Qwen3-32B (default: _name_or_path)");
  models_import->add_option("--out", models_options.out_dir,
                            "catalog folder to write into (default: models/catalog/models of the "
                            "data root)");
  models_import->add_option("--source", models_options.source,
                            "provenance recorded in the file (default: the hf-id's config.json)");
  models_import->add_option("--license", models_options.license,
                            "license note recorded in the file, e.g. Apache-2.0");
  models_import->add_flag("--force", models_options.force, "replace an existing model of that key");
  models_import->add_flag("--allow-approximate", models_options.allow_approximate,
                          "import MoE shared experts and dense layers between MoE layers, which "
                          "the cost model leaves out of iteration time (weights stay exact)");
  auto* models_list = models_cmd->add_subcommand("list", "list the catalog's models");

  auto* capacity = cli.add_subcommand(
      "capacity", "serving capacity: the largest request rate meeting the SLO (bisection on rate)");
  std::vector<std::string> capacity_slo;
  std::optional<double> capacity_attainment;
  std::optional<double> capacity_start;
  capacity->add_option("scenario", scenario_path, "scenario JSON file")->required();
  capacity->add_option("--slo", capacity_slo,
                       "objective: tbt_p99=100ms, ttft_p90=2s, tpot_p99=50ms, ttft=1s ... "
                       "(repeatable)")
      ->required();
  capacity->add_option("--attainment", capacity_attainment,
                       "also require this share of requests to meet the per-request objectives");
  capacity->add_option("--start-rate", capacity_start, "first rate probed (default: the scenario's)");
  capacity->add_option("--set", overrides, "override a scenario value: path=value (repeatable)");

  auto* validate = cli.add_subcommand("validate", "fidelity report of the calibrated cost model");
  std::vector<std::string> validate_gpus;
  bool skip_loo = false, skip_iterations = false;
  validate->add_option("--gpu", validate_gpus, "only these GPUs (repeatable)");
  validate->add_flag("--no-leave-one-out", skip_loo, "skip the leave-one-out table checks");
  validate->add_flag("--no-iterations", skip_iterations, "skip the iteration-level checks");

  auto* plan = cli.add_subcommand(
      "plan", "capacity planner: cheapest config meeting the SLO, capacity per config, Pareto "
              "frontier (under mpirun, configs are sharded over ranks)");
  std::string plan_path;
  servesim::app::PlanRunOptions plan_options;
  bool plan_no_db = false;
  plan->add_option("plan", plan_path, "plan JSON file")->required();
  plan->add_option("--db", db, "results database (SQLite), appended to")->capture_default_str();
  plan->add_flag("--no-db", plan_no_db, "do not write a results database");
  plan->add_option("--jobs,-j", plan_options.jobs, "simulations in parallel (threads per rank)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  plan->add_option("--explain", plan_options.explain,
                   "config index or label: show why it was pruned or which SLO it fails, by how much");
  plan->add_option("--emit-scenario", plan_options.emit,
                   "config index or label: print its scenario document (for servesim run)");

  auto* fidelity = cli.add_subcommand(
      "fidelity", "end-to-end fidelity: predict measured benchmark runs of vLLM / SGLang / "
                  "TensorRT-LLM (CSV in the shared measured-runs format), error statistics, "
                  "leave-one-model-out calibration fit");
  std::string fidelity_csv;
  servesim::app::FidelityOptions fidelity_options;
  fidelity_options.jobs = servesim::app::default_jobs();
  bool fidelity_no_db = false;
  std::string fidelity_db = "fidelity.db";
  fidelity->add_option("csv", fidelity_csv, "measured runs (e.g. "
                       "profiles/measured_runs/aiconfigurator_silicon_calibration.csv)")
      ->required();
  fidelity->add_option("--db", fidelity_db, "results database (SQLite), appended to")
      ->capture_default_str();
  fidelity->add_flag("--no-db", fidelity_no_db, "do not write a results database");
  fidelity->add_option("--jobs,-j", fidelity_options.jobs, "simulations in parallel")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  fidelity->add_flag("--fit", fidelity_options.fit,
                     "fit the engine calibrations: leave-one-model-out (reported as held-out "
                     "error) and on every model");
  fidelity->add_option("--write-calibration", fidelity_options.write_calibration,
                       "with --fit: write the calibration fitted on every model to this file "
                       "(models/engines/calibration.json is the one servesim reads)");
  fidelity->add_option("--engine", fidelity_options.engines, "only rows of this engine (repeatable)")
      ->check(CLI::IsMember({"vllm", "sglang", "trtllm"}));
  fidelity->add_option("--worst", fidelity_options.worst, "worst rows listed")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  fidelity->add_option("--emit-scenario", fidelity_options.emit_scenario,
                       "a row's id or CSV line: print its scenario document (for servesim run)");
  fidelity->add_option("--requests-per-client", fidelity_options.bench.requests_per_client,
                       "measured requests per benchmark client")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  fidelity->add_option("--warmup-per-client", fidelity_options.bench.warmup_per_client,
                       "warm-up requests per benchmark client")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1000}));
  std::string fidelity_deployment = "aiconfigurator";
  fidelity->add_option("--deployment", fidelity_deployment,
                       "how the measured engines are assumed deployed: aiconfigurator (its "
                       "generator's rules) or defaults (the engines' shipped defaults)")
      ->capture_default_str()
      ->check(CLI::IsMember({"aiconfigurator", "defaults"}));
  fidelity->add_option("--fit-evaluations", fidelity_options.fit_evaluations,
                       "objective evaluations per calibration fit")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  fidelity->add_option("--fit-rows", fidelity_options.fit_max_rows,
                       "rows per calibration fit (an even spread of the group's rows)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));

  auto* dopd_ratio = cli.add_subcommand(
      "dopd-ratio", "DOPD's optimal P/D ratio (eq. 11-14) for a disaggregated scenario, with its inputs");
  servesim::app::DopdRatioOptions ratio_options;
  dopd_ratio->add_option("scenario", scenario_path, "scenario JSON file")->required();
  dopd_ratio->add_option("--isl", ratio_options.isl, "mean input tokens (default: the workload's)");
  dopd_ratio->add_option("--osl", ratio_options.osl, "mean output tokens (default: the workload's)");
  dopd_ratio->add_option("--eta", ratio_options.eta, "decode concurrency derating (C_use = eta C_max)")
      ->capture_default_str();
  dopd_ratio->add_option("--set", overrides, "override a scenario value: path=value (repeatable)");

  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = cli.exit(e);
    return rc == 0 ? 0 : 2;
  }

  try {
    if (*run) return cmd_run(scenario_path, overrides, seed, db, no_db);
    if (*check) return cmd_check(scenario_path, overrides);
    if (*dllm_report) {
      return servesim::app::run_dllm_report(dllm_table, servesim::scenarios::DataRoot::discover(),
                                            std::cout, dllm_baseline_batch);
    }
    if (*list) return cmd_list(what);
    if (*query) return cmd_query(db, sql);
    if (*import) {
      servesim::app::import_profiles(import_kind, import_dir, out_root, std::cout);
      return 0;
    }
    if (*compare) {
      servesim::app::compare_profile_dirs(compare_a, compare_b, std::cout);
      return 0;
    }
    if (*models_import) {
      return servesim::app::run_models_import(models_config, models_options,
                                              servesim::scenarios::DataRoot::discover(), std::cout);
    }
    if (*models_list) return cmd_list("models");
    if (*validate) {
      servesim::app::ValidateOptions vo;
      vo.leave_one_out = !skip_loo;
      vo.iterations = !skip_iterations;
      vo.gpus = validate_gpus;
      const int failed = servesim::app::run_validation(servesim::scenarios::DataRoot::discover(), vo,
                                                       {}, std::cout);
      return failed == 0 ? 0 : 1;
    }
    if (*capacity) {
      servesim::app::CapacityOptions co;
      co.slo = capacity_slo;
      co.attainment = capacity_attainment;
      if (capacity_start) {
        // Given explicitly, 0 is no rate at all (the option's absence means the scenario's own).
        if (!(*capacity_start > 0)) {
          throw servesim::ConfigError(
              "capacity",
              {{"--start-rate", fmt::format("expected a rate in (0, {:g}] req/s, got {}",
                                            servesim::app::kMaxCapacityRate, *capacity_start)}});
        }
        co.start_rate = *capacity_start;
      }
      const auto r = servesim::app::find_capacity(scenario_path, overrides, co,
                                                  servesim::scenarios::DataRoot::discover(), std::cout);
      if (r.capacity_rps <= 0) {
        fmt::print(stderr, "servesim: capacity: {}\n", r.no_rate_reason);
        return 1;
      }
      fmt::print("\nserving capacity {:.3f} req/s; at that rate: goodput {:.1f} tok/s, "
                 "{:.3f} req/s/GPU, SLO attainment {:.2f} %\n",
                 r.capacity_rps, r.at_capacity.goodput_tokens_per_s,
                 r.at_capacity.num_gpus > 0 ? r.at_capacity.request_rate_per_s / r.at_capacity.num_gpus : 0.0,
                 r.at_capacity.slo_attainment * 100);
      return r.capacity_rps > 0 ? 0 : 1;
    }
    if (*plan) {
      plan_options.db_path = plan_no_db ? "" : db;
      plan_options.progress = true;
      servesim::app::install_plan_interrupt_handler();
      return servesim::app::run_plan(plan_path, plan_options,
                                     servesim::scenarios::DataRoot::discover(), std::cout);
    }
    if (*fidelity) {
      fidelity_options.db_path = fidelity_no_db ? "" : fidelity_db;
      fidelity_options.bench.deployment =
          fidelity_deployment == "defaults"
              ? servesim::app::BenchmarkTemplate::Deployment::kEngineDefaults
              : servesim::app::BenchmarkTemplate::Deployment::kAiconfigurator;
      return servesim::app::run_fidelity(fidelity_csv, fidelity_options,
                                         servesim::scenarios::DataRoot::discover(), std::cout);
    }
    if (*dopd_ratio) {
      const auto root = servesim::scenarios::DataRoot::discover();
      servesim::app::print_dopd_ratio(load(scenario_path, overrides, root), root, ratio_options,
                                      std::cout);
      return 0;
    }
    if (*regress) {
      const int failures = servesim::app::run_regression(
          baseline, servesim::scenarios::DataRoot::discover(), {update}, std::cout);
      return failures == 0 ? 0 : 1;
    }
  } catch (const servesim::ConfigError& e) {
    fmt::print(stderr, "servesim: {}\n", e.what());
    return 2;
  } catch (const servesim::InputError& e) {
    fmt::print(stderr, "servesim: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "servesim: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
