#include "app/run_scenario.h"

#include <chrono>
#include <ctime>

#include <fmt/format.h>

#include "reports/memory_sink.h"
#include "reports/sqlite_sink.h"

namespace servesim::app {
namespace {

// Sends every record to the in-memory sink and, when present, to the database.
class FanOut : public sim::RecordListener {
 public:
  FanOut(sim::RecordListener* a, sim::RecordListener* b) : a_(a), b_(b) {}
  void on_request(const sim::RequestRecord& r) override {
    if (b_) b_->on_request(r);
    if (a_) a_->on_request(r);
  }
  void on_sample(const sim::SampleRecord& s) override {
    if (b_) b_->on_sample(s);
    if (a_) a_->on_sample(s);
  }

 private:
  sim::RecordListener* a_;
  sim::RecordListener* b_;
};

std::string utc_now_iso() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

std::string format_fingerprint(uint64_t fingerprint) { return fmt::format("{:016x}", fingerprint); }

RunOutcome run_scenario(const scenarios::Scenario& scenario, const scenarios::DataRoot& root,
                        const RunOptions& options) {
  const auto wall_start = std::chrono::steady_clock::now();
  scenarios::EngineInputs inputs = scenarios::build_engine_inputs(scenario, root);
  inputs.config.progress = options.progress;
  RunOutcome out;
  out.workload_description = inputs.workload.description;
  std::vector<std::shared_ptr<const models::IterationCostModel>> cost_models = inputs.cost_models;
  for (const auto& m : cost_models) out.cost_models.push_back(m->describe());

  std::unique_ptr<reports::SqliteSink> db;
  if (!options.db_path.empty()) {
    db = std::make_unique<reports::SqliteSink>(options.db_path);
    reports::RunInfo info;
    info.scenario = scenario.name;
    info.policy = scenario.policy.type;
    info.router = scenario.router.type;
    info.workload = inputs.workload.description;
    info.code_rev = SERVESIM_VERSION;
    info.started_at = utc_now_iso();
    info.seed = scenario.seed;
    out.run_id = db->begin_run(info, scenarios::flatten(scenario.resolved));
  }
  reports::MemorySink memory;
  FanOut fan(&memory, db ? &db->listener() : nullptr);

  sim::Engine engine(std::move(inputs.config), std::move(inputs.instances), std::move(inputs.router),
                     std::move(inputs.workload), &fan, std::move(inputs.decode_router));
  out.result = engine.run();
  out.summary = reports::summarize(memory.requests, out.result.tbt_ns, scenario.slo,
                                   {out.result.num_gpus, out.result.gpu_seconds});
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  for (const auto& m : cost_models) {
    const models::LookupStats st = m->lookup_stats();
    out.lookups.interpolated_s += st.interpolated_s;
    out.lookups.extrapolated_s += st.extrapolated_s;
    out.lookups.analytic_s += st.analytic_s;
    out.lookups.lookups += st.lookups;
  }

  if (db) {
    for (const auto& [name, value] : reports::summary_scalars(out.summary)) {
      db->add_scalar("run", name, value);
    }
    db->add_scalar("run", "requests_rejected", static_cast<double>(out.result.requests_rejected));
    db->add_scalar("run", "requests_unfinished", static_cast<double>(out.result.requests_unfinished));
    db->add_scalar("run", "mean_in_system", out.result.mean_in_system);
    db->add_scalar("run", "events", static_cast<double>(out.result.events));
    db->add_scalar("run", "cost_interpolated_s", out.lookups.interpolated_s);
    db->add_scalar("run", "cost_extrapolated_s", out.lookups.extrapolated_s);
    db->add_scalar("run", "cost_analytic_s", out.lookups.analytic_s);
    db->add_scalar("run", "cost_extrapolated_share", out.lookups.extrapolated_share());
    for (size_t i = 0; i < out.result.instances.size(); ++i) {
      const auto& st = out.result.instances[i];
      const std::string entity = fmt::format("instance/{}", i);
      db->add_scalar(entity, "iterations", static_cast<double>(st.iterations));
      db->add_scalar(entity, "busy_s", static_cast<double>(st.busy_ns) * 1e-9);
      db->add_scalar(entity, "prefill_tokens", static_cast<double>(st.prefill_tokens));
      db->add_scalar(entity, "decode_tokens", static_cast<double>(st.decode_tokens));
      db->add_scalar(entity, "preemptions", static_cast<double>(st.preemptions));
      db->add_scalar(entity, "peak_used_blocks", static_cast<double>(st.peak_used_blocks));
    }
    db->add_tbt_histogram(out.result.tbt_ns);
    db->end_run(out.result.requests_unfinished > 0 ? "stopped" : "ok", out.wall_s,
                format_fingerprint(out.result.event_fingerprint));
  }
  if (options.keep_records) {
    out.requests = std::move(memory.requests);
    out.samples = std::move(memory.samples);
  }
  return out;
}

}  // namespace servesim::app
