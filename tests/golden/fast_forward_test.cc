// Exact fast-forward of steady decode and decode runs (sim::EngineConfig::fast_forward, scenario
// key output.fast_forward) change no result: every golden scenario and a set of shipped ones, run
// with it on and off, give the same event fingerprint and count, the same summary scalars to the
// last bit, the same request, rejection and sample records field by field, the same per-instance
// statistics, cost-model lookups and miss breakdown; what a results database stores is made of
// exactly these. Each run with it on must fast-forward some iterations where its policy allows,
// so that the comparison is not vacuous.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/run_scenario.h"
#include "scenarios/scenario.h"

namespace servesim {
namespace {
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// Every field of what a run produces that a results database stores, or a summary prints.
Json everything(const app::RunOutcome& o) {
  Json j;
  j["fingerprint"] = o.result.event_fingerprint;
  j["events"] = o.result.events;
  j["finished"] = o.result.requests_finished;
  j["rejected"] = o.result.requests_rejected;
  j["unfinished"] = o.result.requests_unfinished;
  j["end_ns"] = to_ns(o.result.end_time);
  j["gpu_seconds"] = o.result.gpu_seconds;
  j["mean_in_system"] = o.result.mean_in_system;
  j["tbt"] = {o.result.tbt_ns.count(), o.result.tbt_ns.min(), o.result.tbt_ns.max(),
              o.result.tbt_ns.mean(), o.result.tbt_ns.quantile(0.5), o.result.tbt_ns.quantile(0.99)};
  Json scalars = Json::object();
  for (const auto& [name, value] : reports::summary_scalars(o.summary)) {
    scalars[name] = std::isfinite(value) ? Json(value) : Json(nullptr);
  }
  j["scalars"] = scalars;
  for (const sim::InstanceStats& s : o.result.instances) {
    j["instances"].push_back({s.iterations, s.busy_ns, s.prefill_tokens, s.decode_tokens,
                              s.preemptions, s.peak_used_blocks, s.kv_transfers_out,
                              s.kv_bytes_out, s.transfer_wait_ns, s.prefix_hit_tokens,
                              s.dram_hit_tokens, s.remote_hit_tokens, s.kv_load_ns,
                              s.offloaded_blocks, s.started_ns, s.active_ns, s.draining_ns,
                              s.retired_ns});
  }
  for (const sim::RequestRecord& r : o.requests) {
    j["requests"].push_back({r.request_id, r.instance_id, r.arrival_ns, r.first_scheduled_ns,
                             r.first_token_ns, r.done_ns, r.prompt_tokens, r.output_tokens,
                             r.preemptions, r.max_tbt_ns, r.tbt_slo_violations, r.token_times_ns,
                             r.warmup, r.cached_tokens, r.split_tokens, r.prefill_instance_id,
                             r.kv_arrived_ns, r.interference_ns, r.recompute_ns});
  }
  for (const sim::RejectedRecord& r : o.rejected) {
    j["rejected_records"].push_back({r.request_id, r.arrival_ns, r.reason});
  }
  for (const sim::SampleRecord& s : o.samples) {
    j["samples"].push_back({s.t_ns, s.entity, s.metric, s.value});
  }
  j["lookups"] = {o.lookups.interpolated_s, o.lookups.extrapolated_s, o.lookups.analytic_s,
                  o.lookups.lookups};
  return j;
}

struct Case {
  std::string path;
  std::vector<std::string> overrides;
  bool expect_fast_forward = true;  // its policy allows it (colocated or decode instances)
};

TEST(FastForward, ChangesNoStoredMetricOnGoldenAndShippedScenarios) {
  const auto root = scenarios::DataRoot::discover();
  std::vector<Case> runs;
  for (const auto& e : fs::directory_iterator("tests/golden/scenarios")) {
    runs.push_back({(e.path() / "scenario.json").string(), {}});
  }
  // Token times and a TBT objective take the per-token paths; warm-up requests stay out of the
  // TBT histogram; KV pressure makes the policy preempt where fast-forward must stop.
  runs.push_back({"scenarios/quickstart.json",
                  {"output.record_token_times=true", "slo.tbt_p99=30ms"}});
  runs.push_back({"scenarios/quickstart.json",
                  {"policy.mode=stall_free", "policy.gpu_memory_utilization=0.23",
                   "slo.tbt_p99=20ms"}});
  runs.push_back({"scenarios/quickstart.json", {"policy.gpu_memory_utilization=0.23"}});
  runs.push_back({"scenarios/quickstart.json", {"policy.mode=prefill_priority"}});
  // Pipelines of 2 stages: each runs as 2 micro-batch slots priced with the hand-offs.
  runs.push_back({"scenarios/quickstart.json", {"cluster.pp=2"}});
  runs.push_back({"scenarios/dopd/bursty_static.json", {}});
  // An elastic cluster: instances added and drained on the controller's ticks.
  runs.push_back({"scenarios/dopd/bursty_dyn_load.json", {}});
  runs.push_back({"scenarios/dynaserve/hybrid_coloc.json", {}});
  runs.push_back({"scenarios/dynaserve/hybrid_dynaserve.json", {}, /*expect_fast_forward=*/false});
  // Answers keyed for the prefix cache (multi-turn sessions): those instances step.
  runs.push_back({"scenarios/prefix_sessions.json", {}, /*expect_fast_forward=*/false});
  // The vLLM engine model with prefix caching, shared prompts, evictions and preemptions.
  runs.push_back({"tests/golden/fast_forward/vllm_shared_prompts.json", {}});
  runs.push_back({"tests/golden/fast_forward/vllm_shared_prompts.json", {"workload.concurrency=6"}});
  // The TensorRT-LLM engine model: KV reserved for the whole sequence at admission, and under
  // MAX_UTILIZATION with a KV pool that makes it preempt.
  runs.push_back({"tests/golden/fast_forward/trtllm_benchmark.json", {}});
  runs.push_back({"tests/golden/fast_forward/trtllm_benchmark.json",
                  {"engine.capacity_scheduler_policy=MAX_UTILIZATION",
                   "engine.free_gpu_memory_fraction=0.07"}});
  // The SGLang engine model: its new-token ratio, which decays at every decode step, decides
  // admissions and retractions with this KV pool (stepping over the decay changes the results).
  runs.push_back({"tests/golden/fast_forward/sglang_benchmark.json", {}});
  std::sort(runs.begin(), runs.end(), [](const Case& a, const Case& b) { return a.path < b.path; });
  int64_t fast_forwarded_runs = 0, mixed_run_runs = 0;
  for (const Case& c : runs) {
    SCOPED_TRACE(c.path);
    scenarios::Scenario s = scenarios::load_scenario(c.path, c.overrides, root);
    ASSERT_TRUE(s.output.fast_forward) << "on by default";
    const app::RunOutcome on = app::run_scenario(s, root, {});
    s.output.fast_forward = false;
    const app::RunOutcome off = app::run_scenario(s, root, {});
    EXPECT_EQ(off.result.fast_forwarded_iterations, 0);
    EXPECT_EQ(off.result.decode_run_iterations, 0);
    if (on.result.fast_forwarded_iterations > 0) fast_forwarded_runs++;
    // Decode runs beyond the fast-forwarded iterations: batches that mixed them with prompts.
    if (on.result.decode_run_iterations > on.result.fast_forwarded_iterations) mixed_run_runs++;
    if (c.expect_fast_forward) {
      EXPECT_GT(on.result.fast_forwarded_iterations, 0);
    }
    const Json a = everything(on), b = everything(off);
    for (auto it = b.begin(); it != b.end(); ++it) {
      EXPECT_EQ(a[it.key()], it.value()) << it.key();
    }
  }
  EXPECT_GE(fast_forwarded_runs, 14);
  EXPECT_GE(mixed_run_runs, 14);
}

}  // namespace
}  // namespace servesim
