#include "app/dllm_run.h"

#include <chrono>
#include <ctime>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "app/run_scenario.h"
#include "reports/sqlite_sink.h"
#include "policies/dllm.h"
#include "scenarios/cost_models.h"
#include "core/rng.h"

namespace servesim::app {
namespace {

void write_db(const scenarios::Scenario& s, DllmOutcome& o, const std::string& db_path) {
  reports::SqliteSink db(db_path);
  o.run_id = write_run(db, make_stored_dllm_run(s, o));
}

}  // namespace

std::vector<sim::RequestRecord> dllm_request_records(const dllm::DllmRunResult& result) {
  std::vector<sim::RequestRecord> out;
  out.reserve(result.requests.size());
  for (const auto& q : result.requests) {
    sim::RequestRecord r;
    r.request_id = q.id;
    r.instance_id = q.rejected ? -1 : q.instance;
    r.arrival_ns = q.arrival_ns;
    r.first_scheduled_ns = q.first_scheduled_ns;
    r.first_token_ns = q.done_ns;
    r.done_ns = q.done_ns;
    r.prompt_tokens = q.prompt_tokens;
    r.output_tokens = q.rejected ? 0 : q.output_tokens;
    out.push_back(r);
  }
  return out;
}

StoredRun make_stored_dllm_run(
    const scenarios::Scenario& s, const DllmOutcome& o,
    const std::vector<std::pair<std::string, std::string>>& extra_params) {
  StoredRun run;
  run.info.scenario = s.name;
  run.info.policy = s.policy.type;
  run.info.router = s.router.type;
  run.info.workload = o.workload;
  run.info.code_rev = SERVESIM_VERSION;
  run.info.started_at = utc_now_iso();
  run.info.seed = s.seed;
  run.params = scenarios::flatten(s.resolved);
  run.params.insert(run.params.end(), extra_params.begin(), extra_params.end());
  run.requests = dllm_request_records(o.result);
  const dllm::DllmMetrics& m = o.metrics;
  if (o.oom.empty()) {
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
    for (const auto& [name, v] : scalars) run.scalars.emplace_back("run", name, v);
    if (s.slo.ttft) {
      run.scalars.emplace_back("run", "slo_attainment", summarize_dllm(s, o, s.slo).slo_attainment);
    }
  }
  run.status = o.oom.empty() ? "ok" : "oom";
  run.wall_s = o.wall_s;
  run.fingerprint = fmt::format("{:016x}", o.result.fingerprint);
  return run;
}

std::vector<dllm::RequestPlan> plan_dllm_requests(const scenarios::Scenario& s, size_t n) {
  RngStream rng(s.seed, "denoise");
  std::vector<dllm::RequestPlan> plans;
  plans.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    plans.push_back(dllm::plan_request(s.dllm->config.denoise, s.dllm->config.variation, rng));
  }
  return plans;
}

std::string dllm_memory_shortfall(const scenarios::Scenario& s, const Workload& w,
                                  const scenarios::DataRoot& root) {
  const models::Deployment d = scenarios::dllm_deployment(s, root);
  if (s.dllm->config.algorithm != dllm::Algorithm::kDllmServe) {
    int64_t longest = 0;
    for (const RequestSpec& r : w.requests) longest = std::max(longest, r.prompt_tokens);
    return dllm::memory_shortfall(s.dllm->config, d, longest + s.dllm->config.denoise.gen_length);
  }
  const policies::DllmInstanceSpec spec{s.dllm->config, d, scenarios::make_dllm_cost_model(s, root),
                                        std::make_shared<std::vector<dllm::RequestPlan>>()};
  try {
    policies::make_dllm_instance(spec, std::make_shared<policies::DllmPassStats>());
  } catch (const dllm::OutOfMemoryError& e) {
    return e.what();
  }
  return "";
}

DllmOutcome run_dllm(const scenarios::Scenario& s, const scenarios::DataRoot& root,
                     const std::string& db_path) {
  const auto start = std::chrono::steady_clock::now();
  DllmOutcome o;
  Workload w = scenarios::build_dllm_workload(s, root);
  o.workload = w.description;
  auto plans = std::make_shared<std::vector<dllm::RequestPlan>>(
      plan_dllm_requests(s, w.requests.size()));
  const models::Deployment d = scenarios::dllm_deployment(s, root);
  std::shared_ptr<const models::IterationCostModel> cost = scenarios::make_dllm_cost_model(s, root);
  o.cost_model = cost->describe();
  const policies::DllmInstanceSpec spec{s.dllm->config, d, cost, plans};
  try {
    o.result = policies::run_dllm_cluster(
        spec, s.cluster.instances, sim::routing_policies().get(s.router.type).make(s.router.params),
        std::move(w));
    o.metrics = dllm::compute_metrics(o.result);
  } catch (const dllm::OutOfMemoryError& e) {
    o.oom = e.what();
    o.result.memory = policies::describe_dllm_memory(spec);
  }
  o.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!db_path.empty()) write_db(s, o, db_path);
  return o;
}

reports::RunSummary summarize_dllm(const scenarios::Scenario& s, const DllmOutcome& o,
                                   const sim::SloSpec& objectives) {
  std::vector<sim::RequestRecord> done;
  for (sim::RequestRecord& r : dllm_request_records(o.result)) {
    if (r.instance_id >= 0) done.push_back(std::move(r));
  }
  const int gpus = static_cast<int>(s.cluster.instances) * s.cluster.tp;
  return reports::summarize(done, LogHistogram{}, objectives,
                            {.num_gpus = gpus, .gpu_seconds = o.metrics.duration_s * gpus});
}

std::string format_dllm_summary(const scenarios::Scenario& s, const DllmOutcome& o) {
  std::string out;
  out += fmt::format("scenario   {} ({})\n", s.name, s.source);
  out +=
      fmt::format("deployment {} on {} x {} (tp{}) behind {}, policy {}\n", s.model,
                  s.cluster.instances, s.cluster.gpu, s.cluster.tp, s.router.type, s.policy.type);
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
  if (s.slo.ttft) {
    const double attainment = summarize_dllm(s, o, s.slo).slo_attainment;
    out += fmt::format("slo             {:.2f} % of requests answered within {:.0f} ms (target "
                       "{:.0f} %: {})\n",
                       100 * attainment, to_seconds(*s.slo.ttft) * 1e3,
                       100 * s.slo.attainment_target,
                       attainment >= s.slo.attainment_target ? "met" : "missed");
  }
  out += fmt::format("fingerprint     {:016x}\n", o.result.fingerprint);
  return out;
}

}  // namespace servesim::app
