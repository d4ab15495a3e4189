#include "app/dllm_run.h"

#include <chrono>
#include <ctime>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "app/run_scenario.h"
#include "reports/sqlite_sink.h"
#include "scenarios/cost_models.h"

namespace servesim::app {
namespace {

void write_db(const scenarios::DllmScenario& s, DllmOutcome& o, const std::string& db_path) {
  reports::SqliteSink db(db_path);
  reports::RunInfo info;
  info.scenario = s.name;
  info.policy = dllm::algorithm_name(s.config.algorithm);
  info.router = "none";
  info.workload = o.workload;
  info.code_rev = SERVESIM_VERSION;
  info.started_at = utc_now_iso();
  info.seed = s.seed;
  o.run_id = db.begin_run(info, scenarios::flatten(s.resolved));
  for (const auto& q : o.result.requests) {
    sim::RequestRecord r;
    r.request_id = q.id;
    r.instance_id = q.rejected ? -1 : 0;
    r.arrival_ns = q.arrival_ns;
    r.first_scheduled_ns = q.first_scheduled_ns;
    r.first_token_ns = q.done_ns;
    r.done_ns = q.done_ns;
    r.prompt_tokens = q.prompt_tokens;
    r.output_tokens = q.rejected ? 0 : q.output_tokens;
    db.listener().on_request(r);
  }
  const dllm::DllmMetrics& m = o.metrics;
  const std::vector<std::pair<const char*, double>> scalars = {
      {"throughput_tok_s", m.throughput_tok_s},
      {"mean_latency_s", m.mean_latency_s},
      {"p50_latency_s", m.p50_latency_s},
      {"p90_latency_s", m.p90_latency_s},
      {"p99_latency_s", m.p99_latency_s},
      {"std_latency_s", m.std_latency_s},
      {"span_latency_s", m.span_s()},
      {"finished", static_cast<double>(m.finished)},
      {"rejected", static_cast<double>(o.result.rejected)},
      {"forward_passes", static_cast<double>(o.result.forward_passes)},
      {"mean_batch", m.mean_batch},
      {"lm_head_chunks", static_cast<double>(o.result.lm_head_chunks)}};
  if (o.oom.empty()) {
    for (const auto& [name, v] : scalars) db.add_scalar("run", name, v);
  }
  db.end_run(o.oom.empty() ? "ok" : "oom", o.wall_s, fmt::format("{:016x}", o.result.fingerprint));
}

}  // namespace

DllmOutcome run_dllm(const scenarios::DllmScenario& s, const scenarios::DataRoot& root,
                     const std::string& db_path) {
  const auto start = std::chrono::steady_clock::now();
  DllmOutcome o;
  const Workload w = scenarios::build_dllm_workload(s);
  o.workload = w.description;
  const models::Deployment d = scenarios::dllm_deployment(s, root);
  const auto cost = scenarios::make_cost_model(s.cost_model, d, root);
  o.cost_model = cost->describe();
  try {
    o.result = dllm::simulate(s.config, d, *cost, w);
    o.metrics = dllm::compute_metrics(o.result);
  } catch (const dllm::OutOfMemoryError& e) {
    o.oom = e.what();
  }
  o.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!db_path.empty()) write_db(s, o, db_path);
  return o;
}

std::string format_dllm_summary(const scenarios::DllmScenario& s, const DllmOutcome& o) {
  std::string out;
  out += fmt::format("scenario   {} ({})\n", s.name, s.source);
  out += fmt::format("deployment {} on {}, policy {}\n", s.model, s.gpu,
                     dllm::algorithm_name(s.config.algorithm));
  out += fmt::format("workload   {}\n", o.workload);
  out += fmt::format("cost model {}\n", o.cost_model);
  if (!o.oom.empty()) {
    out += fmt::format("\nOUT OF MEMORY (not run): {}\n", o.oom);
    return out;
  }
  out += fmt::format("memory     {}\n", o.result.memory);
  const dllm::DllmMetrics& m = o.metrics;
  out += fmt::format("\nrequests        {} finished, {} rejected\n", m.finished, o.result.rejected);
  out += fmt::format("throughput      {:.2f} generated tok/s over {:.1f} s\n", m.throughput_tok_s,
                     m.duration_s);
  out += fmt::format("latency (s)     mean {:.2f}  p50 {:.2f}  p90 {:.2f}  p99 {:.2f}\n",
                     m.mean_latency_s, m.p50_latency_s, m.p90_latency_s, m.p99_latency_s);
  out += fmt::format("jitter (s)      sigma {:.2f}  span {:.2f} (min {:.2f}, max {:.2f})\n",
                     m.std_latency_s, m.span_s(), m.min_latency_s, m.max_latency_s);
  out += fmt::format("passes          {} forward passes, mean batch {:.1f}, max {}, {} LM-head "
                     "chunks\n",
                     o.result.forward_passes, m.mean_batch, o.result.max_batch,
                     o.result.lm_head_chunks);
  out += fmt::format("fingerprint     {:016x}\n", o.result.fingerprint);
  return out;
}

}  // namespace servesim::app
