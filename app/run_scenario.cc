#include "app/run_scenario.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <optional>

#include <fmt/format.h>

#include "reports/memory_sink.h"
#include "reports/sqlite_sink.h"

namespace servesim::app {
reports::MissBreakdown explain_misses(const scenarios::Scenario& scenario,
                                      const RunOutcome& outcome) {
  std::vector<reports::InstanceLife> lives;
  lives.reserve(outcome.result.instances.size());
  for (const sim::InstanceStats& st : outcome.result.instances) {
    lives.push_back({st.role, st.tp, st.started_ns, st.active_ns, st.draining_ns, st.retired_ns});
  }
  std::optional<int64_t> budget;
  if (scenario.policy.params.contains("gpu_budget")) {
    budget = scenario.policy.params.get_int("gpu_budget");
  }
  return reports::explain_misses(outcome.requests, lives, scenario.slo, budget);
}

std::string utc_now_iso() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string format_fingerprint(uint64_t fingerprint) { return fmt::format("{:016x}", fingerprint); }

namespace {

// Keeps the run's records as output.requests asks: every one (a MemorySink), or a uniform sample
// or none, with the summary accumulated as they come (memory bounded by the sample, not the run).
// Keeps time-series samples only when `keep_samples` (a database or the caller reads them: nothing
// else does), and asks the run's watch, when there is one, whether to stop.
class WatchedSink : public reports::MemorySink {
 public:
  WatchedSink(RunWatch* watch, bool keep_samples, const scenarios::Scenario& scenario)
      : watch_(watch), keep_samples_(keep_samples) {
    const scenarios::RequestsOutput mode = scenario.output.requests;
    if (mode != scenarios::RequestsOutput::kAll) accumulator_.emplace(scenario.slo);
    if (mode == scenarios::RequestsOutput::kSample) {
      sample_.emplace(scenario.output.request_sample, scenario.seed);
    }
  }
  void on_sample(const sim::SampleRecord& sample) override {
    if (keep_samples_) MemorySink::on_sample(sample);
  }
  void on_request(const sim::RequestRecord& record) override {
    if (watch_ && stop_reason_.empty()) stop_reason_ = watch_->on_request(record);
    if (!accumulator_) {
      MemorySink::on_request(record);
      return;
    }
    accumulator_->add(record);
    if (sample_) sample_->offer(record);
  }
  void on_rejected(const sim::RejectedRecord& record) override {
    MemorySink::on_rejected(record);
    if (watch_) watch_->on_rejected(record);
  }
  void on_first_token(RequestId id, int64_t first_token_ns) override {
    if (watch_ && stop_reason_.empty()) stop_reason_ = watch_->on_first_token(id, first_token_ns);
  }
  bool stop_requested() const override { return !stop_reason_.empty(); }
  const std::string& stop_reason() const { return stop_reason_; }

  bool keeps_every_record() const { return !accumulator_; }
  // The run's summary: exact from every record, or accumulated.
  reports::RunSummary summary(const sim::RunResult& result, const sim::SloSpec& slo) const {
    const reports::SummaryContext ctx{result.num_gpus, result.gpu_seconds};
    return accumulator_ ? accumulator_->summary(result.tbt_ns, ctx)
                        : reports::summarize(requests, result.tbt_ns, slo, ctx);
  }
  // The records kept: every one, the sample, or none.
  std::vector<sim::RequestRecord> take_records() {
    return sample_ ? sample_->take() : std::move(requests);
  }

 private:
  RunWatch* watch_;
  bool keep_samples_;
  std::optional<reports::SummaryAccumulator> accumulator_;
  std::optional<reports::RecordSample> sample_;
  std::string stop_reason_;
};

RunPopulation population_of(const Workload& workload, const sim::EngineConfig& config,
                            const sim::SloSpec& slo) {
  const int64_t warmup_requests = config.closed_loop.warmup_requests;
  RunPopulation p;
  p.slo = slo;
  p.warmup = std::min<int64_t>(std::max<int64_t>(0, warmup_requests),
                               static_cast<int64_t>(workload.requests.size()));
  // Closed-loop clients send on completions; a drained warm-up shifts the measured arrivals.
  // A session's later turn is sent on its predecessor's completion.
  const bool fixed = config.closed_loop.clients == 0 &&
                     !(p.warmup > 0 && config.closed_loop.drain_after_warmup) &&
                     std::none_of(workload.requests.begin(), workload.requests.end(),
                                  [](const RequestSpec& r) { return r.after >= 0; });
  if (fixed) {
    p.arrival_ns.reserve(workload.requests.size());
    for (const RequestSpec& r : workload.requests) {
      p.arrival_ns.push_back(r.arrival.time_since_epoch().count());
    }
  }
  const auto& specs = workload.requests;
  for (size_t i = static_cast<size_t>(std::max<int64_t>(0, warmup_requests)); i < specs.size(); ++i) {
    ++p.measured;
    p.measured_multi_token += specs[i].output_tokens > 1;
  }
  return p;
}

}  // namespace

RunOutcome run_scenario(const scenarios::Scenario& scenario, const scenarios::DataRoot& root,
                        const RunOptions& options) {
  const auto wall_start = std::chrono::steady_clock::now();
  // The results database is opened (and a foreign or newer one refused) before simulating.
  std::optional<reports::SqliteSink> db;
  if (!options.db_path.empty()) db.emplace(options.db_path);
  RunOutcome out;
  out.started_at = utc_now_iso();
  scenarios::EngineInputs inputs = scenarios::build_engine_inputs(scenario, root);
  inputs.config.progress = options.progress;
  out.workload_description = inputs.workload.description;
  std::vector<std::shared_ptr<const models::IterationCostModel>> cost_models = inputs.cost_models;
  for (const auto& m : cost_models) out.cost_models.push_back(m->describe());

  WatchedSink memory(options.watch, /*keep_samples=*/db.has_value() || options.keep_records,
                     scenario);
  if (options.watch) {
    options.watch->start(population_of(inputs.workload, inputs.config, scenario.slo));
  }
  // One record per request at most: no reallocation (and no transient second copy) while running.
  if (memory.keeps_every_record()) memory.requests.reserve(inputs.workload.requests.size());
  {
    // Gone before the summary: its per-request state is no longer needed.
    sim::Engine engine(std::move(inputs.config), std::move(inputs.instances),
                       std::move(inputs.router), std::move(inputs.workload), &memory,
                       std::move(inputs.decode_router));
    out.result = engine.run();
  }
  out.stopped_early = memory.stop_reason();
  out.summary = memory.summary(out.result, scenario.slo);
  out.all_records = memory.keeps_every_record();
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  for (const auto& m : cost_models) out.lookups += m->lookup_stats();
  out.requests = memory.take_records();
  out.samples = std::move(memory.samples);
  out.rejected = std::move(memory.rejected);
  out.misses = explain_misses(scenario, out);
  if (db) {
    // Records the caller does not keep move into the stored run rather than being copied: the
    // run's largest vectors are never held twice.
    StoredRun stored = make_stored_run(scenario, out, /*with_records=*/options.keep_records);
    if (!options.keep_records) {
      stored.requests = std::move(out.requests);
      stored.samples = std::move(out.samples);
      stored.misses = std::move(out.misses.misses);
    }
    out.run_id = write_run(*db, stored);
  }
  if (!options.keep_records) {
    out.requests = {};
    out.samples = {};
  }
  return out;
}

StoredRun make_stored_run(const scenarios::Scenario& scenario, const RunOutcome& out,
                          bool with_records,
                          const std::vector<std::pair<std::string, std::string>>& extra_params) {
  StoredRun run;
  run.info.scenario = scenario.name;
  run.info.policy = scenario.policy.type;
  run.info.router = scenario.router.type;
  run.info.workload = out.workload_description;
  run.info.code_rev = SERVESIM_VERSION;
  run.info.started_at = out.started_at;
  run.info.seed = scenario.seed;
  run.params = scenarios::flatten(scenario.resolved);
  run.params.insert(run.params.end(), extra_params.begin(), extra_params.end());
  for (const auto& [name, value] : reports::summary_scalars(out.summary)) {
    run.scalars.emplace_back("run", name, value);
  }
  run.scalars.emplace_back("run", "requests_rejected", static_cast<double>(out.result.requests_rejected));
  run.scalars.emplace_back("run", "requests_rejected_context",
                           static_cast<double>(out.result.requests_rejected_context));
  run.scalars.emplace_back("run", "requests_unfinished",
                           static_cast<double>(out.result.requests_unfinished));
  run.scalars.emplace_back("run", "mean_in_system", out.result.mean_in_system);
  run.scalars.emplace_back("run", "events", static_cast<double>(out.result.events));
  run.scalars.emplace_back("run", "cost_interpolated_s", out.lookups.interpolated_s);
  run.scalars.emplace_back("run", "cost_extrapolated_s", out.lookups.extrapolated_s);
  run.scalars.emplace_back("run", "cost_analytic_s", out.lookups.analytic_s);
  run.scalars.emplace_back("run", "cost_extrapolated_share", out.lookups.extrapolated_share());
  for (size_t i = 0; i < out.result.instances.size(); ++i) {
    const auto& st = out.result.instances[i];
    const std::string entity = fmt::format("instance/{}", i);
    run.scalars.emplace_back(entity, "iterations", static_cast<double>(st.iterations));
    run.scalars.emplace_back(entity, "busy_s", static_cast<double>(st.busy_ns) * 1e-9);
    run.scalars.emplace_back(entity, "prefill_tokens", static_cast<double>(st.prefill_tokens));
    run.scalars.emplace_back(entity, "decode_tokens", static_cast<double>(st.decode_tokens));
    run.scalars.emplace_back(entity, "preemptions", static_cast<double>(st.preemptions));
    run.scalars.emplace_back(entity, "peak_used_blocks", static_cast<double>(st.peak_used_blocks));
    run.scalars.emplace_back(entity, "prefix_hit_tokens", static_cast<double>(st.prefix_hit_tokens));
    if (st.offloaded_blocks > 0) {  // instances with KV tiers that offloaded
      run.scalars.emplace_back(entity, "offloaded_blocks", static_cast<double>(st.offloaded_blocks));
      run.scalars.emplace_back(entity, "dram_hit_tokens", static_cast<double>(st.dram_hit_tokens));
      run.scalars.emplace_back(entity, "remote_hit_tokens", static_cast<double>(st.remote_hit_tokens));
      run.scalars.emplace_back(entity, "kv_load_s", static_cast<double>(st.kv_load_ns) * 1e-9);
    }
  }
  run.tbt_bins = out.result.tbt_ns.bins();
  for (size_t i = 0; i < out.result.instances.size(); ++i) {
    const auto& st = out.result.instances[i];
    if (st.iterations == 0) continue;
    run.iteration_bins.emplace_back(static_cast<int32_t>(i), "batch_requests",
                                    st.batch_requests.bins());
    run.iteration_bins.emplace_back(static_cast<int32_t>(i), "batch_tokens",
                                    st.batch_tokens.bins());
  }
  if (with_records) {
    run.requests = out.requests;
    run.samples = out.samples;
  }
  run.rejected = out.rejected;
  // Per-request rows: only with the requests they refer to (the counts by cause are scalars).
  if (with_records) run.misses = out.misses.misses;
  // Counts by cause, over every request only (over a sample they would read as the run's).
  for (int c = 0; c < reports::kNumMissCauses && out.all_records; ++c) {
    const char* cause = reports::miss_cause_name(static_cast<reports::MissCause>(c));
    run.scalars.emplace_back("misses", fmt::format("ttft_{}", cause),
                             static_cast<double>(out.misses.ttft_by_cause[c]));
    run.scalars.emplace_back("misses", fmt::format("tpot_{}", cause),
                             static_cast<double>(out.misses.tpot_by_cause[c]));
    if (out.misses.tbt_objective) {
      run.scalars.emplace_back("misses", fmt::format("tbt_{}", cause),
                               static_cast<double>(out.misses.tbt_by_cause[c]));
    }
  }
  run.status = out.result.requests_unfinished > 0 ? "stopped" : "ok";
  run.wall_s = out.wall_s;
  run.fingerprint = format_fingerprint(out.result.event_fingerprint);
  return run;
}

int64_t write_run(reports::SqliteSink& db, const StoredRun& run) {
  const int64_t run_id = db.begin_run(run.info, run.params);
  try {
    for (const sim::RequestRecord& r : run.requests) db.listener().on_request(r);
    for (const sim::SampleRecord& s : run.samples) db.listener().on_sample(s);
    for (const sim::RejectedRecord& r : run.rejected) db.listener().on_rejected(r);
    db.add_misses(run.misses);
    for (const auto& [entity, name, value] : run.scalars) db.add_scalar(entity, name, value);
    LogHistogram tbt;
    for (const LogHistogram::Bin& b : run.tbt_bins) tbt.add(b.lower, b.count);
    db.add_tbt_histogram(tbt);
    for (const auto& [instance, metric, bins] : run.iteration_bins) {
      db.add_iteration_histogram(instance, metric, bins);
    }
    db.end_run(run.status, run.wall_s, run.fingerprint);
  } catch (...) {
    db.abort_run();
    throw;
  }
  return run_id;
}

}  // namespace servesim::app
