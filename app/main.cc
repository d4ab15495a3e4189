// servesim: the command-line front end. The only place that turns errors into exit codes:
// 0 success, 1 failure (a regression, an internal error), 2 bad input (scenario, trace, usage).
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "app/atomic_file.h"
#include "app/capacity.h"
#include "app/dllm_run.h"
#include "app/dopd_ratio.h"
#include "app/fidelity.h"
#include "scenarios/cost_models.h"
#include "scenarios/dllm_scenario.h"
#include "app/models_cmd.h"
#include "app/parallel.h"
#include "app/plan.h"
#include "app/profiles_cmd.h"
#include "app/regress.h"
#include "app/run_scenario.h"
#include "app/validate.h"
#include "dllm/denoise.h"
#include "models/catalog/hf_import.h"
#include "models/cost/memory_model.h"
#include "policies/builtin.h"
#include "policies/engines/engine_model.h"
#include "policies/dllm.h"
#include "reports/html_report.h"
#include "reports/query.h"
#include "scenarios/scenario.h"
#include "core/error.h"
#include "traces/trace_catalog.h"

namespace {

using namespace servesim;
using Json = scenarios::Json;

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

// The scenario's speculative decoding, and how its engine is told to run it.
void print_speculative(std::FILE* out, const scenarios::Scenario& s) {
  const models::SpeculativeDecoding& spec = *s.speculative;
  fmt::print(out,
             "speculative {} drafter, {} draft{} per step, acceptance per position {:.2f}: "
             "{:.2f} tokens per step on average\n",
             models::speculative_method_name(spec.method), spec.num_speculative_tokens,
             spec.num_speculative_tokens == 1 ? "" : "s", fmt::join(spec.acceptance, " / "),
             spec.mean_accepted_length());
  if (s.engine) {
    fmt::print(out, "            {} flags: {}\n", s.engine->type,
               policies::speculative_launch_flags(s.engine->type, spec));
  }
}

void print_deployment(std::FILE* out, const scenarios::Scenario& s,
                      const scenarios::DataRoot& root) {
  const auto& cat = scenarios::Catalogs::get(root);
  const auto& gpu = cat.gpus.get(s.cluster.gpu);
  fmt::print(out, "scenario   {} ({})\n", s.name, s.source);
  fmt::print(out, "model      {} on {}, weights {}, KV {}\n", s.model, gpu.name,
             models::dtype_name(s.cluster.weight_dtype), models::dtype_name(s.cluster.kv_dtype));
  fmt::print(out, "policy     {} / router {}\n", s.policy.type, s.router.type);
  for (const auto& g : s.groups) {
    fmt::print(out, "instances  {} x {} (tp {}{}{}{}): {} KV blocks of {} tokens each ({} tokens)\n",
               g.count, sim::role_name(g.role), g.tp,
               g.attention_dp > 1
                   ? fmt::format(", attention DP {}: {} GPUs", g.attention_dp, g.gpus_per_instance())
                   : "",
               g.ep > 1 ? fmt::format(", ep {}", g.ep) : "",
               g.pp > 1 ? fmt::format(", {} pipeline stages: {} GPUs, run as {} engine instances "
                                      "sharing the KV",
                                      g.pp, g.gpus_per_instance(), g.pp)
                        : "",
               g.memory.num_blocks, g.memory.block_size, g.memory.max_kv_tokens());
  }
  if (s.speculative) print_speculative(out, s);
}

// A diffusion-LLM scenario (its dllm part set). An out-of-memory configuration exits with 2.
int cmd_run_dllm(const scenarios::Scenario& s, const scenarios::DataRoot& root,
                 const std::string& db, bool json) {
  std::FILE* out = json ? stderr : stdout;
  const app::DllmOutcome o = app::run_dllm(s, root, db);
  fmt::print(out, "{}", app::format_dllm_summary(s, o));
  if (!db.empty()) fmt::print(out, "results    {} (run_id {})\n", db, o.run_id);
  if (json) {
    Json doc = Json::object();
    doc["command"] = "run";
    doc["kind"] = "dllm";
    doc["scenario"] = s.name;
    doc["workload"] = o.workload;
    doc["oom"] = o.oom.empty() ? Json(nullptr) : Json(o.oom);
    Json metrics = Json::object();
    for (const auto& [entity, name, value] : app::make_stored_dllm_run(s, o).scalars) {
      if (entity == "run") metrics[name] = value;
    }
    doc["summary"] = metrics;
    doc["wall_s"] = o.wall_s;
    doc["db"] = db.empty() ? Json(nullptr) : Json(db);
    doc["run_id"] = db.empty() ? Json(nullptr) : Json(o.run_id);
    fmt::print("{}\n", doc.dump(2));
  }
  return o.oom.empty() ? 0 : 2;
}

// One warning per instance group whose activation reserve takes more than
// kActivationReserveWarnShare of its KV budget (raising max_num_batched_tokens shrinks the pool).
std::vector<std::string> memory_warnings(const scenarios::Scenario& s) {
  std::vector<std::string> out;
  for (const auto& g : s.groups) {
    const double share = models::activation_share_of_kv_budget(g.memory);
    if (share <= models::kActivationReserveWarnShare) continue;
    const double per_token = static_cast<double>(g.memory.kv_bytes_per_token_per_gpu);
    const int64_t without =
        per_token > 0
            ? static_cast<int64_t>(
                  (g.memory.kv_pool_bytes_per_gpu + g.memory.activation_reserve_bytes) / per_token)
            : 0;
    out.push_back(fmt::format(
        "the activation reserve of the {} instances takes {:.0f} % of their KV budget ({:.2f} of "
        "{:.2f} GiB per GPU, more than {:.0f} %): the KV pool holds {} tokens, of about {} the "
        "budget holds without the reserve. The reserve grows with max_num_batched_tokens (an "
        "engine's max_num_tokens); lower it, or raise gpu_memory_utilization, for a larger pool",
        sim::role_name(g.role), share * 100, g.memory.activation_reserve_bytes / double(1ull << 30),
        (g.memory.activation_reserve_bytes + g.memory.kv_pool_bytes_per_gpu) / double(1ull << 30),
        models::kActivationReserveWarnShare * 100, g.memory.max_kv_tokens(), without));
  }
  return out;
}

// Durations in seconds; NaN (an unset objective, no requests) becomes null.
Json slo_json(const sim::SloSpec& slo) {
  auto sec = [](const std::optional<Duration>& d) {
    return d ? Json(to_seconds(*d)) : Json(nullptr);
  };
  return Json{{"ttft_s", sec(slo.ttft)},
              {"tpot_s", sec(slo.tpot)},
              {"tbt_p99_s", sec(slo.tbt_p99)},
              {"attainment_target", slo.attainment_target}};
}

Json summary_json(const reports::RunSummary& summary) {
  Json out = Json::object();
  for (const auto& [name, value] : reports::summary_scalars(summary)) {
    out[name] = std::isfinite(value) ? Json(value) : Json(nullptr);
  }
  return out;
}

// `run --slo KEY=DURATION` as the scenario override slo.KEY=DURATION. Throws ConfigError for a key
// the scenario's slo section has not (capacity's percentile criteria such as ttft_p90 included).
std::string slo_override(const std::string& objective) {
  const size_t eq = objective.find('=');
  const std::string key = objective.substr(0, eq);
  if (eq == std::string::npos || (key != "ttft" && key != "tpot" && key != "tbt_p99")) {
    throw servesim::ConfigError(
        "run", {{"--slo", fmt::format("expected ttft=, tpot= or tbt_p99= and a duration, got "
                                      "\"{}\" (percentile criteria are capacity's)",
                                      objective)}});
  }
  return "slo." + objective;
}

// The miss breakdown of `run --explain-misses --json`: counts per objective and cause.
Json misses_json(const reports::MissBreakdown& b) {
  Json ttft = Json::object(), tpot = Json::object(), tbt = Json::object();
  for (int c = 0; c < reports::kNumMissCauses; ++c) {
    const char* name = reports::miss_cause_name(static_cast<reports::MissCause>(c));
    ttft[name] = b.ttft_by_cause[c];
    tpot[name] = b.tpot_by_cause[c];
    tbt[name] = b.tbt_by_cause[c];
  }
  Json doc = {{"requests", b.requests}, {"missed", b.missed},     {"ttft_missed", b.ttft_missed},
              {"tpot_missed", b.tpot_missed}, {"ttft", ttft}, {"tpot", tpot}};
  if (b.tbt_objective) {
    doc["tbt_missed"] = b.tbt_missed;
    doc["tbt"] = tbt;
  }
  return doc;
}

// The `run --json` document (schema in docs/results.md).
Json run_json(const scenarios::Scenario& s, const app::RunOutcome& o, const std::string& db,
              const std::vector<std::string>& warnings) {
  Json doc = Json::object();
  doc["command"] = "run";
  doc["kind"] = "llm";
  doc["scenario"] = s.name;
  doc["source"] = s.source;
  doc["model"] = s.model;
  doc["gpu"] = s.cluster.gpu;
  doc["policy"] = s.policy.type;
  doc["router"] = s.router.type;
  doc["workload"] = o.workload_description;
  Json groups = Json::array();
  for (const auto& g : s.groups) {
    groups.push_back(
        {{"count", g.count},
         {"role", sim::role_name(g.role)},
         {"tp", g.tp},
         {"kv_blocks", g.memory.num_blocks},
         {"kv_block_tokens", g.memory.block_size},
         {"kv_tokens", g.memory.max_kv_tokens()},
         {"activation_share_of_kv_budget", models::activation_share_of_kv_budget(g.memory)}});
  }
  doc["instances"] = groups;
  doc["slo"] = slo_json(s.slo);
  doc["summary"] = summary_json(o.summary);
  // False with output.requests "none" / "sample": percentiles from histograms (within 0.8 %).
  doc["summary_exact"] = o.all_records;
  doc["requests_rejected"] = o.result.requests_rejected;
  doc["requests_unfinished"] = o.result.requests_unfinished;
  doc["extrapolated_share"] = o.lookups.extrapolated_share();
  doc["events"] = o.result.events;
  doc["fast_forwarded_iterations"] = o.result.fast_forwarded_iterations;
  doc["decode_run_iterations"] = o.result.decode_run_iterations;
  doc["wall_s"] = o.wall_s;
  doc["fingerprint"] = app::format_fingerprint(o.result.event_fingerprint);
  doc["warnings"] = warnings;
  doc["db"] = db.empty() ? Json(nullptr) : Json(db);
  doc["run_id"] = db.empty() ? Json(nullptr) : Json(o.run_id);
  return doc;
}

int cmd_run(const std::string& path, const std::vector<std::string>& overrides,
            std::optional<uint64_t> seed, const std::string& db, bool no_db, bool json,
            bool explain_misses) {
  std::FILE* out = json ? stderr : stdout;
  const auto root = scenarios::DataRoot::discover();
  std::vector<std::string> all = overrides;
  if (seed) all.push_back(fmt::format("seed={}", *seed));
  const scenarios::Scenario s = load(path, all, root);
  if (s.dllm) return cmd_run_dllm(s, root, no_db ? "" : db, json);
  print_deployment(out, s, root);
  std::vector<std::string> warnings;
  auto warn = [&](std::string text) {
    fmt::print(out, "warning: {}\n", text);
    warnings.push_back(std::move(text));
  };
  for (std::string& w : memory_warnings(s)) warn(std::move(w));
  ProgressBar bar;
  app::RunOptions options;
  options.db_path = no_db ? "" : db;
  options.keep_records = false;
  options.progress = bar.callback();
  const app::RunOutcome o = app::run_scenario(s, root, options);
  fmt::print(out, "workload   {}\n", o.workload_description);
  for (const auto& d : o.cost_models) fmt::print(out, "cost model {}\n", d);
  const double table_s = o.lookups.interpolated_s + o.lookups.extrapolated_s;
  if (table_s > 0) {
    fmt::print(out,
               "calibration {:.1f} % of table-driven iteration time interpolated inside measured "
               "data, {:.1f} % extrapolated\n",
               100 * o.lookups.interpolated_s / table_s, 100 * o.lookups.extrapolated_share());
  }
  fmt::print(out, "fidelity   {}\n", app::error_band(s, root));
  if (o.lookups.extrapolated_share() > 0.05) {
    warn(
        fmt::format("{:.1f} % of the predicted iteration time was extrapolated outside the "
                    "measured profiles (more than 5 %); treat the results with care",
                    100 * o.lookups.extrapolated_share()));
  }
  fmt::print(out, "\n{}", reports::format_summary(o.summary, s.slo));
  if (!o.all_records) {
    fmt::print(out,
               "  (output.requests \"{}\": {} measured request records kept; percentiles from "
               "histograms, within 0.8 %)\n",
               s.output.requests == scenarios::RequestsOutput::kNone ? "none" : "sample",
               o.misses.requests);
  }
  if (explain_misses) {
    fmt::print(out, "\n{}", reports::format_miss_breakdown(o.misses));
    if (!o.all_records) {
      warn(
          "--explain-misses: the breakdown covers only the request records kept (output.requests "
          "\"all\" keeps every one)");
    }
  }
  if (o.result.requests_rejected_context > 0) {
    warn(fmt::format("{} request(s) rejected: prompt + output exceed {}'s {}-token context "
                     "(context.overflow \"truncate\" shortens them instead)",
                     o.result.requests_rejected_context, s.model, s.max_context_tokens));
  }
  if (const int64_t kv = o.result.requests_rejected - o.result.requests_rejected_context; kv > 0) {
    warn(fmt::format("{} request(s) rejected: they can never run (prompt + output exceeds an "
                     "instance's KV pool, or the prompt exceeds the token budget without chunked "
                     "prefill)",
                     kv));
  }
  if (o.result.requests_total > 0 && o.result.requests_rejected == o.result.requests_total) {
    fmt::print(stderr, "servesim: {}: every request ({}) was rejected; nothing was measured\n",
               s.source, o.result.requests_total);
    return 2;
  }
  if (o.result.requests_unfinished > 0) {
    warn(fmt::format("stopped at stop.max_time with {} request(s) unfinished",
                     o.result.requests_unfinished));
  }
  const double events_per_s = o.wall_s > 0 ? o.result.events / o.wall_s : 0;
  int64_t iterations = 0;
  for (const sim::InstanceStats& inst : o.result.instances) iterations += inst.iterations;
  const auto share = [&](int64_t part) {
    return iterations > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(iterations)
                          : 0.0;
  };
  fmt::print(out,
             "\nsimulated {:.1f} s in {:.3f} s of wall time ({:.0f} events/s, {:.0f} % of "
             "iterations fast-forwarded, {:.0f} % with a decode run), fingerprint {}\n",
             o.summary.duration_s, o.wall_s, events_per_s,
             share(o.result.fast_forwarded_iterations), share(o.result.decode_run_iterations),
             app::format_fingerprint(o.result.event_fingerprint));
  if (!options.db_path.empty()) {
    fmt::print(out, "results    {} (run_id {})\n", options.db_path, o.run_id);
  }
  if (json) {
    Json doc = run_json(s, o, options.db_path, warnings);
    if (explain_misses) doc["misses"] = misses_json(o.misses);
    fmt::print("{}\n", doc.dump(2));
  }
  return 0;
}

// `check` of a diffusion-LLM scenario: the same validation and workload build as `run`.
int cmd_check_dllm(const scenarios::Scenario& s, const scenarios::DataRoot& root) {
  const auto cost = scenarios::make_dllm_cost_model(s, root);
  const Workload w = scenarios::build_dllm_workload(s, root);
  fmt::print("scenario   {} ({}), diffusion LLM\n", s.name, s.source);
  fmt::print("model      {} on {} x {} (tp{}) behind {}\n", s.model, s.cluster.instances,
             s.cluster.gpu, s.cluster.tp, s.router.type);
  fmt::print("policy     {}\n", s.policy.type);
  fmt::print("cost model {}\n", cost->describe());
  fmt::print("workload   {} ({} requests)\n", w.description, w.requests.size());
  fmt::print("resolved scenario:\n{}\n", s.resolved.dump(2));
  if (const std::string oom = app::dllm_memory_shortfall(s, w, root); !oom.empty()) {
    fmt::print(stderr, "servesim: {}: out of memory: {}\n", s.source, oom);
    return 2;
  }
  fmt::print("ok\n");
  return 0;
}

int cmd_check(const std::string& path, const std::vector<std::string>& overrides) {
  const auto root = scenarios::DataRoot::discover();
  const scenarios::Scenario s = load(path, overrides, root);
  if (s.dllm) return cmd_check_dllm(s, root);
  print_deployment(stdout, s, root);
  for (const auto& g : s.groups) fmt::print("\n{}\n", models::describe(g.memory));
  for (const std::string& w : memory_warnings(s)) fmt::print("warning: {}\n", w);
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

// Every batching policy serving `kind` of model, with its knobs.
void print_batching_policies(sim::ServedModel kind) {
  for (const std::string& name : sim::batching_policy_names(kind)) {
    const sim::BatchingPolicyEntry& e = sim::batching_policies().get(name);
    fmt::print("  {:<18} {}\n", name, e.description);
    print_schema(e.schema);
  }
}

int cmd_list(const std::string& what) {
  const auto root = scenarios::DataRoot::discover();
  policies::register_builtin_policies();
  if (what == "gpus") {
    const auto& cat = scenarios::Catalogs::get(root);
    fmt::print("{:<16} {:<28} {:>8} {:>10} {:>10} {:>9} {:>9} {:>7} {:>8}\n", "key", "name",
               "HBM GiB", "HBM GB/s", "bf16 TF/s", "fp8 TF/s", "fp4 TF/s", "NVLink", "$/hour");
    for (const auto& [key, g] : cat.gpus.all()) {
      fmt::print("{:<16} {:<28} {:>8.0f} {:>10.0f} {:>10.0f} {:>9.0f} {:>9.0f} {:>7} {:>8.2f}\n",
                 key, g.name, g.memory_bytes / double(1ull << 30), g.mem_bw_bytes_per_s / 1e9,
                 g.bf16_flops_per_s / 1e12, g.fp8_flops_per_s / 1e12, g.fp4_flops_per_s / 1e12,
                 g.nvlink_max_tp, g.price_usd_per_hour);
    }
  } else if (what == "models") {
    const auto& cat = scenarios::Catalogs::get(root);
    fmt::print("{:<28} {:>8} {:>7} {:>6} {:>5} {:>8} {:>10}  {}\n", "key", "params B", "layers",
               "heads", "kv", "hidden", "KV KB/tok", "notes");
    for (const auto& [key, m] : cat.models.all()) {
      std::string notes = m.moe ? fmt::format("MoE {}x top-{}", m.moe->num_experts,
                                              m.moe->experts_per_token)
                                : "";
      if (m.moe && m.moe->shared_expert_intermediate_size > 0) notes += " + shared";
      if (m.moe && m.moe->num_moe_layers < m.num_layers) {
        notes += fmt::format(", {} dense layers", m.num_layers - m.moe->num_moe_layers);
      }
      if (m.mla) notes += ", MLA";
      if (m.dsa) notes += fmt::format(" + sparse attention (top {})", m.dsa->index_topk);
      if (m.linear_attention) {
        notes += fmt::format("{}{} of {} layers linear attention", notes.empty() ? "" : ", ",
                             m.num_linear_layers(), m.num_layers);
      }
      if (m.num_sliding_layers > 0) {
        notes += fmt::format(", {} sliding-window layers ({})", m.num_sliding_layers,
                             m.sliding_window);
      }
      if (m.diffusion) notes += "diffusion LLM";
      if (m.vision) notes += fmt::format("{}vision encoder", notes.empty() ? "" : ", ");
      fmt::print("{:<28} {:>8.2f} {:>7} {:>6} {:>5} {:>8} {:>10.1f}  {}\n", key, m.param_count / 1e9,
                 m.num_layers, m.num_attention_heads, m.num_kv_heads, m.hidden_size,
                 m.kv_bytes_per_token(models::Dtype::kBf16) / 1024.0, notes);
    }
  } else if (what == "policies") {
    fmt::print("batching policies (scenario key \"policy\"):\n");
    print_batching_policies(sim::ServedModel::kAutoregressive);
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
    fmt::print(
        "diffusion-LLM policies (scenario key \"policy\"; a scenario naming one, or a diffusion "
        "model, serves dLLM requests; denoising knobs under \"denoise\", memory under "
        "\"memory\"):\n");
    print_batching_policies(sim::ServedModel::kDiffusion);
    fmt::print("  every dLLM policy also takes (same scenario):\n");
    const std::vector<std::array<const char*, 4>> shared_knobs = {
        {"denoise.gen_length", "int", "256", "masked tokens per request (G)"},
        {"denoise.steps", "int", "256", "denoising passes per request"},
        {"denoise.block", "int", "32", "block length (semi-autoregressive blocks)"},
        {"denoise.eos_length", "{min,max}", "off",
         "early stop at EOS: answer length uniform in [min, max] tokens"},
        {"denoise.tokens_per_step", "{min,max}", "off",
         "threshold decoding: tokens accepted per step uniform in [min, max]"},
        {"cluster.instances", "int", "1", "dLLM instances behind the router"},
        {"cluster.tp", "int", "1", "GPUs per instance (tensor parallel)"},
        {"router.type", "string", "round_robin", "a router listed above (or cluster.router)"}};
    for (const auto& [key, type, def, what] : shared_knobs) {
      fmt::print("      {:<30} {:<9} default {:<11} {}\n", key, type, def, what);
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

// Writes the HTML report of `runs` (and `plan`) in `db` to `out_path` (through a temporary file, so
// a reader never sees half a report) and prints one line saying what it holds. `capacity`: a
// capacity search's section; 0 is the database's last search.
int cmd_report(const std::string& db, const std::vector<int64_t>& runs, std::optional<int64_t> plan,
               const std::string& out_path, std::optional<int64_t> capacity = std::nullopt) {
  if (!std::filesystem::exists(db)) {
    throw servesim::InputError(db, 0, "no such results database");
  }
  const auto t0 = std::chrono::steady_clock::now();
  reports::ReportOptions options;
  options.run_ids = runs;
  options.plan_id = plan;
  options.capacity_id = capacity;
  reports::ReportStats stats;
  const std::string html = reports::render_report(db, options, &stats);
  app::write_file_atomically(out_path, html);
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print(
      "report     {}: {} run(s){}{}, {} charts, {:.0f} KB in {:.2f} s\n", out_path, stats.runs,
      plan ? fmt::format(", plan {}", *plan) : std::string(),
      stats.capacity_id ? fmt::format(", capacity search {}", stats.capacity_id) : std::string(),
      stats.charts, static_cast<double>(stats.bytes) / 1024.0, wall_s);
  return 0;
}

struct IterationArgs {
  std::string model, gpu;
  int tp = 0;
  int64_t prefill = 0;         // prompt tokens computed in this pass
  int64_t prefill_cached = 0;  // tokens of that prompt already in KV (a later chunk)
  int64_t decode_batch = 0;    // decode requests
  int64_t context = 0;         // context of each decode request
  bool json = false;
};

// One iteration's predicted time and per-operator breakdown, for the deployment of a scenario
// (model, GPU, TP, dtypes, cost model and engine options), optionally changed by
// --model/--gpu/--tp.
int cmd_iteration(const std::string& path, std::vector<std::string> overrides,
                  const IterationArgs& a) {
  if (a.prefill <= 0 && a.decode_batch <= 0) {
    fmt::print(stderr, "servesim: iteration needs --prefill N and/or --decode-batch B\n");
    return 2;
  }
  if (a.decode_batch > 0 && a.context <= 0) {
    fmt::print(stderr,
               "servesim: --decode-batch needs --context C (tokens attended per request)\n");
    return 2;
  }
  if (!a.model.empty()) overrides.push_back("model=" + a.model);
  if (!a.gpu.empty()) overrides.push_back("cluster.gpu=" + a.gpu);
  if (a.tp > 0) overrides.push_back(fmt::format("cluster.tp={}", a.tp));
  const auto root = scenarios::DataRoot::discover();
  const scenarios::Scenario s = load(path, overrides, root);
  const scenarios::EngineInputs in = scenarios::build_engine_inputs(s, root);
  const models::IterationCostModel& m = *in.cost_model;
  models::BatchShape shape;
  if (a.prefill > 0) shape.segments.push_back({a.prefill, a.prefill_cached + a.prefill, 1});
  // A prompt's first chunk of a multimodal workload also encodes its images (workload.images).
  const bool encodes = s.images && a.prefill > 0 && a.prefill_cached == 0;
  if (encodes) shape.encoder_inputs.push_back({s.images->per_request, s.images->patches_per_image});
  for (int64_t i = 0; i < a.decode_batch; ++i) shape.segments.push_back({1, a.context, 1});
  const models::OperatorTimes t = m.breakdown(shape);
  const Duration total = m.iteration_time(shape);
  const Duration bound = m.peak_bound_time(shape);
  const std::pair<const char*, Duration> ops[] = {{"qkv_gemm", t.qkv_gemm},
                                                  {"o_gemm", t.o_gemm},
                                                  {"mlp_gemm", t.mlp_gemm},
                                                  {"attention_prefill", t.attention_prefill},
                                                  {"attention_decode", t.attention_decode},
                                                  {"norms_elementwise", t.norms_elementwise},
                                                  {"allreduce", t.allreduce},
                                                  {"lm_head", t.lm_head},
                                                  {"overhead", t.overhead}};
  const double sum_ms = to_seconds(t.total()) * 1e3;
  if (a.json) {
    Json opj = Json::object();
    for (const auto& [name, d] : ops) opj[name + std::string("_ms")] = to_seconds(d) * 1e3;
    Json doc = {{"command", "iteration"},
                {"model", s.model},
                {"gpu", s.cluster.gpu},
                {"tp", s.groups.front().tp},
                {"cost_model", m.describe()},
                {"prefill_tokens", a.prefill},
                {"prefill_cached_tokens", a.prefill_cached},
                {"decode_batch", a.decode_batch},
                {"decode_context_tokens", a.context},
                {"encoded_images", encodes ? s.images->per_request : 0},
                {"query_tokens", shape.total_query_tokens()},
                {"operators", opj},
                {"operators_total_ms", sum_ms},
                {"iteration_ms", to_seconds(total) * 1e3},
                {"peak_bound_ms", to_seconds(bound) * 1e3}};
    fmt::print("{}\n", doc.dump(2));
    return 0;
  }
  fmt::print("deployment {} on {} (tp {}), weights {}, KV {}\n", s.model, s.cluster.gpu,
             s.groups.front().tp, models::dtype_name(s.cluster.weight_dtype),
             models::dtype_name(s.cluster.kv_dtype));
  fmt::print("cost model {}\n", m.describe());
  fmt::print("batch      ");
  if (a.prefill > 0) {
    fmt::print("prefill {} tokens{}", a.prefill,
               a.prefill_cached > 0 ? fmt::format(" after {} cached", a.prefill_cached) : "");
  }
  if (a.decode_batch > 0) {
    fmt::print("{}decode {} requests at context {}", a.prefill > 0 ? " + " : "", a.decode_batch,
               a.context);
  }
  fmt::print(" ({} query tokens)\n", shape.total_query_tokens());
  if (encodes) {
    fmt::print("images     {} of {}x{} through the vision encoder ({} patches each)\n",
               s.images->per_request, s.images->width, s.images->height,
               s.images->patches_per_image);
  }
  fmt::print("\n");
  fmt::print("{:<20} {:>10} {:>7}\n", "operator", "ms", "share");
  for (const auto& [name, d] : ops) {
    const double ms = to_seconds(d) * 1e3;
    fmt::print("{:<20} {:>10.3f} {:>6.1f}%\n", name, ms, sum_ms > 0 ? 100 * ms / sum_ms : 0.0);
  }
  fmt::print("{:<20} {:>10.3f}\n", "sum of operators", sum_ms);
  fmt::print(
      "\niteration  {:.3f} ms predicted (with the engine's per-iteration costs), peak-rate "
      "bound {:.3f} ms\n",
      to_seconds(total) * 1e3, to_seconds(bound) * 1e3);
  return 0;
}

int cmd_query(const std::string& db, const std::string& sql) {
  fmt::print("{}", reports::format_table(reports::run_query(db, sql)));
  return 0;
}

// ---- the subcommands: each declares its own options and what it runs

// A subcommand of the CLI: its CLI11 node and what runs when it is the one given (the exit
// status). Options are stored in the run function's own arguments, shared with its parser.
struct Command {
  CLI::App* app;
  std::function<int()> run;
};

// The --set option every scenario command takes.
void add_overrides(CLI::App* sub, std::vector<std::string>& overrides,
                   const char* help = "override a scenario value: path=value (repeatable)") {
  sub->add_option("--set", overrides, help);
}

// The --db and --no-db options of a command that writes a results database.
void add_db_options(CLI::App* sub, std::string& db, bool& no_db) {
  sub->add_option("--db", db, "results database (SQLite), appended to")->capture_default_str();
  sub->add_flag("--no-db", no_db, "do not write a results database");
}

Command add_run(CLI::App& cli) {
  struct Args {
    std::string scenario;
    std::vector<std::string> overrides, slo;
    std::optional<uint64_t> seed;
    std::string db = "results.db";
    bool no_db = false, json = false, explain_misses = false;
  };
  auto a = std::make_shared<Args>();
  auto* run = cli.add_subcommand("run", "run a scenario (the embedded quickstart when none given)");
  run->add_option("scenario", a->scenario, "scenario JSON file (or \"quickstart\")");
  add_overrides(run, a->overrides);
  run->add_option("--seed", a->seed, "override the scenario's seed");
  add_db_options(run, a->db, a->no_db);
  run->add_flag("--json", a->json,
                "print the summary as one JSON document on stdout (the text goes to stderr)");
  run->add_option("--slo", a->slo,
                  "an SLO objective of the scenario: ttft=DURATION, tpot=DURATION or "
                  "tbt_p99=DURATION (repeatable; the same as --set slo.<key>=DURATION)");
  run->add_flag("--explain-misses", a->explain_misses,
                "trace each request that missed the SLO to its cause and print the breakdown "
                "(always stored in the request_miss table)");
  return {run, [a] {
            std::vector<std::string> overrides = a->overrides;
            for (const std::string& objective : a->slo) overrides.push_back(slo_override(objective));
            return cmd_run(a->scenario, overrides, a->seed, a->db, a->no_db, a->json,
                           a->explain_misses);
          }};
}

Command add_check(CLI::App& cli) {
  struct Args {
    std::string scenario;
    std::vector<std::string> overrides;
  };
  auto a = std::make_shared<Args>();
  auto* check = cli.add_subcommand("check", "validate a scenario and print what it resolves to");
  check->add_option("scenario", a->scenario, "scenario JSON file (or \"quickstart\")");
  add_overrides(check, a->overrides);
  return {check, [a] { return cmd_check(a->scenario, a->overrides); }};
}

Command add_list(CLI::App& cli) {
  auto what = std::make_shared<std::string>();
  auto* list = cli.add_subcommand("list", "list gpus, models, policies or traces");
  list->add_option("what", *what, "gpus | models | policies | traces")
      ->required()
      ->check(CLI::IsMember({"gpus", "models", "policies", "traces"}));
  return {list, [what] { return cmd_list(*what); }};
}

Command add_query(CLI::App& cli) {
  auto a = std::make_shared<std::pair<std::string, std::string>>();  // database, SQL
  auto* query = cli.add_subcommand("query", "run SQL on a results database and print a table");
  query->add_option("db", a->first, "results database")->required();
  query->add_option("sql", a->second, "SQL statement")->required();
  return {query, [a] { return cmd_query(a->first, a->second); }};
}

Command add_regress(CLI::App& cli) {
  struct Args {
    std::string baseline;
    bool update = false, json = false;
  };
  auto a = std::make_shared<Args>();
  auto* regress = cli.add_subcommand(
      "regress",
      "goodput regression gate over canonical scenarios: an entry fails when its goodput leaves "
      "baseline x (1 +- tolerance); file format in app/regress.h and the README");
  regress->add_option("baseline", a->baseline, "baseline JSON (bench/goodput_baseline.json)")
      ->required();
  regress->add_flag("--update", a->update,
                    "rewrite the baseline with the measured goodput (entries without one get it)");
  regress->add_flag("--json", a->json, "print one JSON document instead of the table");
  return {regress, [a] {
            const int failures = app::run_regression(
                a->baseline, scenarios::DataRoot::discover(), {a->update, a->json}, std::cout);
            return failures == 0 ? 0 : 1;
          }};
}

Command add_dllm_report(CLI::App& cli) {
  struct Args {
    std::string table = "all";
    int64_t baseline_batch = 1;
  };
  auto a = std::make_shared<Args>();
  auto* dllm_report = cli.add_subcommand(
      "dllm-report", "dLLM-Serve paper tables (Table 4, RTX 4090 sweep, ablation, sensitivity) "
                     "next to the paper's numbers");
  dllm_report->add_option("--table", a->table, "all | l40s | rtx4090 | ablation | sensitivity")
      ->capture_default_str()
      ->check(CLI::IsMember({"all", "l40s", "rtx4090", "ablation", "sensitivity"}));
  dllm_report
      ->add_option("--baseline-batch", a->baseline_batch,
                   "cap every baseline's static batch (policy max_batch_size): 1 (the paper's "
                   "convention) runs them one request at a time, as their released generate() "
                   "does; 0 = the largest that fits")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{4096}));
  return {dllm_report, [a] {
            return app::run_dllm_report(a->table, scenarios::DataRoot::discover(), std::cout,
                                        a->baseline_batch);
          }};
}

// `profiles import` and `profiles compare`.
std::vector<Command> add_profiles(CLI::App& cli) {
  struct Args {
    std::string import_kind, import_dir, out_root = "profiles";
    std::string compare_a, compare_b;
  };
  auto a = std::make_shared<Args>();
  auto* profiles_cmd = cli.add_subcommand("profiles", "import and compare measured profiles");
  profiles_cmd->require_subcommand(1);
  auto* import = profiles_cmd->add_subcommand(
      "import", "convert a measured dataset (aiconfigurator or vidur) into servesim profiles");
  import->add_option("source", a->import_kind, "aiconfigurator | vidur")
      ->required()
      ->check(CLI::IsMember({"aiconfigurator", "vidur"}));
  import->add_option("dir", a->import_dir, "dataset directory")
      ->required()
      ->check(CLI::ExistingDirectory);
  import->add_option("--out", a->out_root, "profiles root to write into")->capture_default_str();
  auto* compare = profiles_cmd->add_subcommand("compare", "ratio statistics of profile B vs A");
  compare->add_option("a", a->compare_a, "reference profile directory")->required();
  compare->add_option("b", a->compare_b, "profile directory to compare")->required();
  return {{import,
           [a] {
             app::import_profiles(a->import_kind, a->import_dir, a->out_root, std::cout);
             return 0;
           }},
          {compare, [a] {
             app::compare_profile_dirs(a->compare_a, a->compare_b, std::cout);
             return 0;
           }}};
}

// `models import` and `models list`.
std::vector<Command> add_models(CLI::App& cli) {
  struct Args {
    std::string config;
    app::ModelsImportOptions options;
  };
  auto a = std::make_shared<Args>();
  auto* models_cmd = cli.add_subcommand("models", "add models to the catalog and list them");
  models_cmd->require_subcommand(1);
  auto* import = models_cmd->add_subcommand(
      "import", fmt::format("add a model to the catalog from a Hugging Face config.json "
                            "(model_type {})",
                            fmt::join(models::supported_hf_model_types(), ", ")));
  app::ModelsImportOptions& o = a->options;
  import->add_option("config", a->config, "the model's config.json")->required();
  import->add_option("--key", o.key,
                     "catalog key (default: from the file name or _name_or_path, "
                     "lower-cased, e.g. qwen3-32b)");
  import->add_option("--name", o.name,
                     "display name (default: the last part of --hf-id, else the key)");
  import->add_option("--hf-id", o.hf_id,
                     "Hugging Face id, e.g. Qwen/Qwen3-32B (default: _name_or_path)");
  import->add_option("--out", o.out_dir,
                     "catalog folder to write into, made if missing (default: "
                     "models/catalog/models of the data root); servesim finds its models "
                     "with SERVESIM_MODELS=DIR in the environment");
  import->add_option("--source", o.source,
                     "provenance recorded in the file (default: the hf-id's config.json)");
  import->add_option("--license", o.license, "license note recorded in the file, e.g. Apache-2.0");
  import->add_flag("--force", o.force, "replace an existing model of that key");
  import->add_option("--expert-routing", o.expert_routing,
                     "a MoE model's default expert routing: random, balanced or "
                     "power_law_<alpha> (e.g. power_law_1.2)");
  import->add_option("--expert-routing-note", o.expert_routing_note,
                     "where that routing estimate comes from, recorded in the file");
  import->add_flag("--allow-approximate", o.allow_approximate,
                   "import MoE shared experts and dense layers between MoE layers, which "
                   "the cost model leaves out of iteration time (weights stay exact)");
  auto* list = models_cmd->add_subcommand("list", "list the catalog's models");
  return {{import,
           [a] {
             return app::run_models_import(a->config, a->options, scenarios::DataRoot::discover(),
                                           std::cout);
           }},
          {list, [] { return cmd_list("models"); }}};
}

Command add_report(CLI::App& cli) {
  struct Args {
    std::string db, out = "report.html", capacity;
    std::vector<int64_t> runs;
    std::optional<int64_t> plan;
  };
  auto a = std::make_shared<Args>();
  auto* report = cli.add_subcommand(
      "report",
      "one self-contained HTML file (inline SVG, no network) of runs, a plan or a capacity search "
      "in a results database: configuration, SLO attainment, goodput, latency CDFs, time series, "
      "latency vs load; several runs are overlaid");
  report->add_option("db", a->db, "results database")->required();
  report->add_option("--run", a->runs,
                     "run id (repeatable; several are compared; default: the last run unless "
                     "--plan is given)");
  report->add_option("--plan", a->plan, "plan id: Pareto frontier, pruning, capacity search");
  CLI::Option* capacity =
      report
          ->add_option("--capacity", a->capacity,
                       "capacity search id (servesim capacity): latency and SLO attainment vs "
                       "offered rate; without an id, the last search")
          ->expected(0, 1);
  report->add_option("-o,--output", a->out, "HTML file to write")->capture_default_str();
  return {report, [a, capacity] {
            std::optional<int64_t> capacity_id;
            if (capacity->count() > 0) {
              capacity_id = 0;
              if (!a->capacity.empty()) {
                int64_t id = 0;
                try {
                  size_t used = 0;
                  id = std::stoll(a->capacity, &used);
                  if (used != a->capacity.size()) id = 0;
                } catch (const std::exception&) {
                }
                if (id <= 0) {
                  fmt::print(stderr,
                             "servesim: report --capacity: expected a capacity id, got {}\n",
                             a->capacity);
                  return 2;
                }
                capacity_id = id;
              }
            }
            return cmd_report(a->db, a->runs, a->plan, a->out, capacity_id);
          }};
}

Command add_compare(CLI::App& cli) {
  struct Args {
    std::string db, out = "compare.html";
    std::vector<int64_t> runs;
  };
  auto a = std::make_shared<Args>();
  auto* compare =
      cli.add_subcommand("compare",
                         "HTML comparison of runs in a results database: overlaid plots and a "
                         "side-by-side table with deltas (the report renderer)");
  compare->add_option("db", a->db, "results database")->required();
  compare->add_option("--run", a->runs, "run id (repeatable, two or more)")
      ->required()
      ->expected(1, -1);
  compare->add_option("-o,--output", a->out, "HTML file to write")->capture_default_str();
  return {compare, [a] {
            if (a->runs.size() < 2) {
              fmt::print(stderr, "servesim: compare needs two or more --run ids\n");
              return 2;
            }
            return cmd_report(a->db, a->runs, std::nullopt, a->out);
          }};
}

Command add_iteration(CLI::App& cli) {
  struct Args {
    std::string scenario;
    std::vector<std::string> overrides;
    IterationArgs shape;
  };
  auto a = std::make_shared<Args>();
  IterationArgs& i = a->shape;
  auto* iteration =
      cli.add_subcommand("iteration",
                         "one iteration's predicted time for a batch shape, with its per-operator "
                         "breakdown (the deployment of a scenario, the quickstart by default)");
  iteration->add_option("scenario", a->scenario, "scenario JSON file (or \"quickstart\")");
  iteration->add_option("--model", i.model, "model key (servesim list models)");
  iteration->add_option("--gpu", i.gpu, "GPU key (servesim list gpus)");
  iteration->add_option("--tp", i.tp, "tensor-parallel degree")->check(CLI::Range(1, 64));
  iteration->add_option("--prefill", i.prefill, "prompt tokens computed in the pass")
      ->check(CLI::Range(int64_t{0}, int64_t{10000000}));
  iteration
      ->add_option("--prefill-cached", i.prefill_cached,
                   "tokens of that prompt already in the KV cache (a later chunk)")
      ->check(CLI::Range(int64_t{0}, int64_t{10000000}));
  iteration->add_option("--decode-batch", i.decode_batch, "decode requests in the pass")
      ->check(CLI::Range(int64_t{0}, int64_t{100000}));
  iteration
      ->add_option("--context", i.context,
                   "tokens each decode request attends (its context length)")
      ->check(CLI::Range(int64_t{0}, int64_t{10000000}));
  add_overrides(iteration, a->overrides,
                "override a scenario value: path=value (repeatable), e.g. engine options");
  iteration->add_flag("--json", i.json, "print the result as one JSON document");
  return {iteration, [a] { return cmd_iteration(a->scenario, a->overrides, a->shape); }};
}

// The capacity result as one JSON document: the criteria, the capacity, what binds above it and
// every probe with its checks.
Json capacity_json(const std::string& scenario, const app::CapacityOptions& co,
                   const app::SloCriteria& criteria, const app::CapacityResult& r,
                   const std::vector<std::string>& binding, double above) {
  Json probes = Json::array();
  for (const auto& p : r.probes) {
    Json checks = Json::array();
    for (const auto& c : criteria.check(p.summary, p.rate)) {
      checks.push_back({{"name", c.name},
                        {"value", c.value},
                        {"limit", c.limit},
                        {"at_least", c.at_least},
                        {"ok", c.ok},
                        {"unit", c.unit}});
    }
    probes.push_back({{"rate_per_s", p.rate},
                      {"meets", p.meets},
                      {"checks", checks},
                      {"slo_attainment", std::isfinite(p.summary.slo_attainment)
                                             ? Json(p.summary.slo_attainment)
                                             : Json(nullptr)},
                      {"sustained_rate_per_s", p.summary.sustained_rate_per_s},
                      {"goodput_tokens_per_s", p.summary.goodput_tokens_per_s},
                      {"stopped_early",
                       p.stopped_early.empty() ? Json(nullptr) : Json(p.stopped_early)}});
  }
  return {{"command", "capacity"},
          {"scenario", scenario},
          {"objectives", co.slo},
          {"attainment_required", co.attainment ? Json(*co.attainment) : Json(nullptr)},
          {"min_throughput_ratio", co.min_throughput_ratio},
          {"capacity_rps", r.capacity_rps},
          {"binding", binding},
          {"binding_rate_per_s", above > 0 ? Json(above) : Json(nullptr)},
          {"at_capacity", summary_json(r.at_capacity)},
          {"probes", probes}};
}

// What ends the search: the criteria failing at the lowest failing rate above capacity (returned
// in `above`; 0 when no probe failed above it).
std::vector<std::string> binding_criteria(const app::SloCriteria& criteria,
                                          const app::CapacityResult& r, double& above) {
  std::vector<std::string> binding;
  above = 0;
  for (const auto& p : r.probes) {
    if (!p.meets && p.rate > r.capacity_rps && (above == 0 || p.rate < above)) above = p.rate;
  }
  for (const auto& p : r.probes) {
    if (p.rate != above) continue;
    if (!p.stopped_early.empty()) {
      binding.push_back(p.stopped_early.substr(0, p.stopped_early.find(':')));
      continue;
    }
    for (const auto& c : criteria.check(p.summary, p.rate)) {
      if (!c.ok) binding.push_back(c.name);
    }
  }
  return binding;
}

struct CapacityArgs {
  std::string scenario;
  std::vector<std::string> overrides, slo;
  std::optional<double> attainment, start;
  std::string db = "results.db";
  bool full_probes = false, json = false, no_db = false;
};

int cmd_capacity(const CapacityArgs& a) {
  app::CapacityOptions co;
  co.slo = a.slo;
  co.attainment = a.attainment;
  co.early_stop = !a.full_probes;
  if (a.start) {
    // Given explicitly, 0 is no rate at all (the option's absence means the scenario's own).
    if (!(*a.start > 0)) {
      throw ConfigError("capacity",
                        {{"--start-rate", fmt::format("expected a rate in (0, {:g}] req/s, got {}",
                                                      app::kMaxCapacityRate, *a.start)}});
    }
    co.start_rate = *a.start;
  }
  std::ostream& text = a.json ? std::cerr : std::cout;
  const std::string started_at = app::utc_now_iso();
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = app::find_capacity(a.scenario, a.overrides, co, scenarios::DataRoot::discover(),
                                    text);
  const auto criteria =
      app::SloCriteria::parse(co.slo, co.attainment, co.min_throughput_ratio, "capacity");
  double above = 0;
  const std::vector<std::string> binding = binding_criteria(criteria, r, above);
  std::optional<int64_t> capacity_id;
  if (!a.no_db) {
    reports::CapacitySearchRecord record =
        app::capacity_record(a.scenario, a.overrides, co, criteria, r, binding, above);
    record.started_at = started_at;
    record.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    capacity_id = reports::write_capacity(a.db, record);
  }
  const std::string stored =
      capacity_id
          ? fmt::format(
                "results    {} (capacity_id {}; tables capacity, capacity_probe, capacity_check)\n",
                a.db, *capacity_id)
          : std::string();
  if (r.capacity_rps <= 0) {
    fmt::print(stderr, "servesim: capacity: {}\n", r.no_rate_reason);
    if (!a.json) {
      text << stored;
      return 1;
    }
  }
  text << fmt::format(
      "\nserving capacity {:.3f} req/s; at that rate: goodput {:.1f} tok/s, {:.3f} req/s/GPU, "
      "SLO attainment {:.2f} % ({})\n",
      r.capacity_rps, r.at_capacity.goodput_tokens_per_s,
      r.at_capacity.num_gpus > 0 ? r.at_capacity.request_rate_per_s / r.at_capacity.num_gpus
                                 : 0.0,
      r.at_capacity.slo_attainment * 100,
      co.attainment ? "a criterion" : "the scenario's per-request objectives, not a criterion");
  if (!binding.empty()) {
    text << fmt::format("binding    {} (fails at {:.3f} req/s, the lowest failing rate probed)\n",
                        fmt::join(binding, ", "), above);
  }
  text << stored;
  if (a.json) {
    Json doc = capacity_json(a.scenario, co, criteria, r, binding, above);
    doc["db"] = capacity_id ? Json(a.db) : Json(nullptr);
    doc["capacity_id"] = capacity_id ? Json(*capacity_id) : Json(nullptr);
    fmt::print("{}\n", doc.dump(2));
  }
  return r.capacity_rps > 0 ? 0 : 1;
}

Command add_capacity(CLI::App& cli) {
  auto a = std::make_shared<CapacityArgs>();
  auto* capacity = cli.add_subcommand(
      "capacity", "serving capacity: the largest request rate meeting the SLO (bisection on rate)");
  capacity->add_option("scenario", a->scenario, "scenario JSON file")->required();
  capacity->add_option("--slo", a->slo,
                       "objective: tbt_p99=100ms, ttft_p90=2s, tpot_p99=50ms, ttft=1s ... "
                       "(repeatable)")
      ->required();
  capacity->add_option("--attainment", a->attainment,
                       "also require this share of requests to meet the per-request objectives");
  capacity->add_option("--start-rate", a->start, "first rate probed (default: the scenario's)");
  add_overrides(capacity, a->overrides);
  add_db_options(capacity, a->db, a->no_db);
  capacity->add_flag("--full-probes", a->full_probes,
                     "run every probe to the end (by default a probe stops once it can no longer "
                     "meet the SLO; the capacity found is the same)");
  capacity->add_flag("--json", a->json,
                     "print the result as one JSON document on stdout (the text goes to stderr)");
  return {capacity, [a] { return cmd_capacity(*a); }};
}

Command add_validate(CLI::App& cli) {
  struct Args {
    std::vector<std::string> gpus;
    bool skip_loo = false, skip_iterations = false, skip_efficiency = false, json = false;
  };
  auto a = std::make_shared<Args>();
  auto* validate = cli.add_subcommand("validate", "fidelity report of the calibrated cost model");
  validate->add_option("--gpu", a->gpus, "only these GPUs (repeatable)");
  validate->add_flag("--no-leave-one-out", a->skip_loo, "skip the leave-one-out table checks");
  validate->add_flag("--no-iterations", a->skip_iterations, "skip the iteration-level checks");
  validate->add_flag("--no-efficiency", a->skip_efficiency,
                     "skip the GEMM efficiency report and its inversion check");
  validate->add_flag("--json", a->json,
                     "print the report as one JSON document on stdout (the text goes to stderr)");
  return {validate, [a] {
            app::ValidateOptions vo;
            vo.leave_one_out = !a->skip_loo;
            vo.iterations = !a->skip_iterations;
            vo.efficiency = !a->skip_efficiency;
            vo.gpus = a->gpus;
            Json doc;
            if (a->json) vo.json = &doc;
            const int failed = app::run_validation(scenarios::DataRoot::discover(), vo, {},
                                                   a->json ? std::cerr : std::cout);
            if (a->json) fmt::print("{}\n", doc.dump(2));
            return failed == 0 ? 0 : 1;
          }};
}

Command add_plan(CLI::App& cli) {
  struct Args {
    std::string path, db = "results.db";
    app::PlanRunOptions options;
    bool no_db = false;
  };
  auto a = std::make_shared<Args>();
  auto* plan = cli.add_subcommand(
      "plan", "capacity planner: cheapest config meeting the SLO, capacity per config, Pareto "
              "frontier (under mpirun, configs are sharded over ranks)");
  plan->add_option("plan", a->path, "plan JSON file")->required();
  add_db_options(plan, a->db, a->no_db);
  plan->add_option("--jobs,-j", a->options.jobs, "simulations in parallel (threads per rank)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  plan->add_option("--explain", a->options.explain,
                   "config index or label: show why it was pruned or which SLO it fails, by how much");
  plan->add_flag("--json", a->options.json,
                 "print the summary as one JSON document on stdout (the text goes to stderr)");
  plan->add_option("--emit-scenario", a->options.emit,
                   "config index or label: print its scenario document (for servesim run)");
  return {plan, [a] {
            a->options.db_path = a->no_db ? "" : a->db;
            a->options.progress = true;
            app::install_plan_interrupt_handler();
            return app::run_plan(a->path, a->options, scenarios::DataRoot::discover(),
                                 a->options.json ? std::cerr : std::cout);
          }};
}

// The benchmark client's options of `fidelity` (the aiperf-style closed loop of each row).
void add_benchmark_options(CLI::App* sub, app::BenchmarkTemplate& bench) {
  sub->add_option("--requests-per-client", bench.requests_per_client,
                  "measured requests per benchmark client")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  sub->add_option("--max-requests", bench.max_measured_requests,
                  "at most this many measured requests per row, in whole rounds of its "
                  "clients and at least 4 rounds (0: requests-per-client x clients always)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{100'000'000}));
  sub->add_option("--warmup-per-client", bench.warmup_per_client,
                  "warm-up requests per benchmark client")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1000}));
  sub->add_option("--dataset-entries", bench.dataset_entries,
                  "prompts drawn from this many dataset entries, as aiperf's "
                  "--num-dataset-entries (repeats hit the engines' prefix caches); 0 = every "
                  "prompt unique")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{100000000}));
  sub->add_option("--client-jitter", bench.client_jitter,
                  "each benchmark client's send is delayed by a uniform draw below this "
                  "duration, so that clients drift apart as real ones do (0s: they send "
                  "the instant a response ends and stay in lock step)")
      ->capture_default_str();  // checked by run_fidelity (ConfigError naming the option)
  sub->add_option("--kernel-tables", bench.kernel_tables,
                  "operator tables of every row whose engine has its own (engine.kernel_tables): "
                  "generic (vLLM's, which the engine calibration was fitted with) or engine")
      ->capture_default_str()
      ->check(CLI::IsMember({"generic", "engine"}));
}

Command add_fidelity(CLI::App& cli) {
  struct Args {
    std::string csv, db = "fidelity.db", deployment = "campaign", client = "auto";
    app::FidelityOptions options;
    bool no_db = false;
  };
  auto a = std::make_shared<Args>();
  app::FidelityOptions& o = a->options;
  o.jobs = app::default_jobs();
  auto* fidelity = cli.add_subcommand(
      "fidelity", "end-to-end fidelity: predict measured benchmark runs of vLLM / SGLang / "
                  "TensorRT-LLM (CSV in the shared measured-runs format), error statistics, "
                  "leave-one-model-out calibration fit");
  fidelity->add_option("csv", a->csv, "measured runs (e.g. "
                       "profiles/measured_runs/aiconfigurator_silicon_calibration.csv)")
      ->required();
  add_db_options(fidelity, a->db, a->no_db);
  fidelity->add_option("--jobs,-j", o.jobs, "simulations in parallel")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  fidelity->add_flag("--fit", o.fit,
                     "fit the engine calibrations: leave-one-model-out (reported as held-out "
                     "error) and on every model");
  fidelity->add_option("--write-calibration", o.write_calibration,
                       "with --fit: write the calibration fitted on every model to this file "
                       "(models/engines/calibration.json is the one servesim reads)");
  policies::register_builtin_policies();
  fidelity->add_option("--engine", o.engines, "only rows of this engine (repeatable)")
      ->check(CLI::IsMember(policies::engine_models().names()));
  fidelity->add_option("--worst", o.worst, "worst rows listed")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  fidelity->add_option("--emit-scenario", o.emit_scenario,
                       "a row's id or CSV line: print its scenario document (for servesim run)");
  add_benchmark_options(fidelity, o.bench);
  fidelity
      ->add_option("--deployment", a->deployment,
                   "how the measured engines are assumed deployed: campaign (as each row's "
                   "campaign launched them: aiconfigurator's generator rules for aiperf "
                   "rows, InferenceMAX's recipes for benchmark_serving.py rows) or defaults "
                   "(the engines' shipped defaults)")
      ->capture_default_str()
      ->check(CLI::IsMember({"campaign", "defaults"}));
  fidelity
      ->add_option("--client", a->client,
                   "the benchmark client rows are replayed with: auto (each row's, by its "
                   "silicon_data_source), aiperf or bench_serving")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "aiperf", "bench_serving"}));
  fidelity->add_option("--fit-evaluations", o.fit_evaluations,
                       "objective evaluations per calibration fit")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  fidelity->add_option("--fit-rows", o.fit_max_rows,
                       "rows per calibration fit (an even spread of the group's rows)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  return {fidelity, [a] {
            a->options.db_path = a->no_db ? "" : a->db;
            a->options.bench.deployment = a->deployment == "defaults"
                                              ? app::BenchmarkTemplate::Deployment::kEngineDefaults
                                              : app::BenchmarkTemplate::Deployment::kCampaign;
            if (a->client != "auto") {
              a->options.bench.client = a->client == "aiperf" ? app::BenchmarkClient::kAiperf
                                                              : app::BenchmarkClient::kBenchServing;
            }
            return app::run_fidelity(a->csv, a->options, scenarios::DataRoot::discover(),
                                     std::cout);
          }};
}

Command add_dopd_ratio(CLI::App& cli) {
  struct Args {
    std::string scenario;
    std::vector<std::string> overrides;
    app::DopdRatioOptions options;
  };
  auto a = std::make_shared<Args>();
  auto* dopd_ratio = cli.add_subcommand(
      "dopd-ratio", "DOPD's optimal P/D ratio (eq. 11-14) for a disaggregated scenario, with its inputs");
  dopd_ratio->add_option("scenario", a->scenario, "scenario JSON file")->required();
  dopd_ratio->add_option("--isl", a->options.isl, "mean input tokens (default: the workload's)");
  dopd_ratio->add_option("--osl", a->options.osl, "mean output tokens (default: the workload's)");
  dopd_ratio
      ->add_option("--eta", a->options.eta, "decode concurrency derating (C_use = eta C_max)")
      ->capture_default_str();
  add_overrides(dopd_ratio, a->overrides);
  return {dopd_ratio, [a] {
            const auto root = scenarios::DataRoot::discover();
            app::print_dopd_ratio(load(a->scenario, a->overrides, root), root, a->options,
                                  std::cout);
            return 0;
          }};
}

// Every subcommand, in the order `servesim --help` lists them.
std::vector<Command> add_commands(CLI::App& cli) {
  std::vector<Command> commands = {add_run(cli),   add_check(cli),   add_list(cli),
                                   add_query(cli), add_regress(cli), add_dllm_report(cli)};
  for (Command& c : add_profiles(cli)) commands.push_back(std::move(c));
  for (Command& c : add_models(cli)) commands.push_back(std::move(c));
  for (Command c : {add_report(cli), add_compare(cli), add_iteration(cli), add_capacity(cli),
                    add_validate(cli), add_plan(cli), add_fidelity(cli), add_dopd_ratio(cli)}) {
    commands.push_back(std::move(c));
  }
  return commands;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"servesim: discrete-event simulator and capacity planner for LLM serving"};
  cli.require_subcommand(1);
  cli.set_version_flag("--version", SERVESIM_VERSION);
  const std::vector<Command> commands = add_commands(cli);
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = cli.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    for (const Command& c : commands) {
      if (*c.app) return c.run();
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
