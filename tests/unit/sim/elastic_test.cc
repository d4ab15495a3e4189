// Elastic-cluster tests: start-up delay, graceful drain and retirement, exact GPU-seconds for a
// hand-built timeline, the instance-count time series, decision validation, determinism, batching
// wake-ups and arrivals prefilled on decode instances.
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "models/cost/memory_model.h"
#include "policies/coloc.h"
#include "policies/disagg.h"
#include "sim/engine.h"

namespace servesim::sim {
namespace {

constexpr Duration kSec{1'000'000'000};

struct Catalogs {
  models::GpuCatalog gpus = models::GpuCatalog::load("models/catalog/gpus.json");
  models::ModelCatalog models = models::ModelCatalog::load("models/catalog/models");
};
const Catalogs& catalogs() {
  static const Catalogs c;
  return c;
}

std::shared_ptr<const models::IterationCostModel> cost_model() {
  static const std::shared_ptr<const models::IterationCostModel> cost =
      models::make_roofline_cost_model({&catalogs().models.get("llama-3.1-8b"),
                                        &catalogs().gpus.get("h100_sxm"), 1, models::Dtype::kBf16,
                                        models::Dtype::kBf16},
                                       models::RooflineParams{});
  return cost;
}

InstanceSetup make_instance(InstanceRole role, int tp) {
  InstanceSetup s;
  s.gpu = "h100_sxm";
  s.tp = tp;
  s.role = role;
  s.kv_bytes_per_token = 131072;
  s.cost_model = cost_model();
  s.num_blocks = 4000;
  s.block_size = 16;
  if (role == InstanceRole::kPrefill) {
    s.batching = policies::make_prefill_only_batcher({});
  } else {
    policies::ColocParams p;
    p.mode = policies::ColocParams::Mode::kUnifiedV1;
    s.batching = policies::make_coloc(p);
  }
  return s;
}

// Routes to the accepting instance of `role` with the lowest (or highest) index, and logs each
// decision.
class LoggingRouter : public RoutingPolicy {
 public:
  LoggingRouter(InstanceRole role, bool highest) : role_(role), highest_(highest) {}
  int32_t route(const ClusterView& view, const RequestSpec&) override {
    int32_t pick = -1;
    for (const InstanceLoad& l : *view.instances) {
      if (!l.accepting || l.role != role_) continue;
      if (pick < 0 || highest_) pick = l.instance_id;
    }
    EXPECT_GE(pick, 0);
    log.push_back({view.now, pick});
    return pick;
  }
  std::vector<std::pair<SimTime, int32_t>> log;

 private:
  InstanceRole role_;
  bool highest_;
};

// Applies a fixed decision at given tick times and records what it saw.
class ScriptedController : public ClusterController {
 public:
  std::map<int64_t, ScalingDecision> script;  // tick time (s) -> decision
  int64_t arrivals_seen = 0, finishes_seen = 0;
  void control(const ControlView& view, ScalingDecision& d) override {
    arrivals_seen += static_cast<int64_t>(view.arrivals->size());
    finishes_seen += static_cast<int64_t>(view.finished->size());
    const int64_t s = view.now.time_since_epoch().count() / kSec.count();
    if (auto it = script.find(s); it != script.end()) d = it->second;
  }
};

class Samples : public RecordListener {
 public:
  void on_request(const RequestRecord& r) override { requests.push_back(r); }
  void on_sample(const SampleRecord& s) override {
    if (s.entity == "cluster") cluster.push_back(s);
  }
  std::vector<RequestRecord> requests;
  std::vector<SampleRecord> cluster;
};

Workload steady(int n, Duration gap, int64_t prompt = 256, int64_t output = 16) {
  Workload w;
  for (int i = 0; i < n; ++i) {
    RequestSpec r;
    r.id = i;
    r.arrival = kTimeZero + gap * i;
    r.prompt_tokens = prompt;
    r.output_tokens = output;
    w.requests.push_back(r);
  }
  return w;
}

struct ElasticRun {
  RunResult result;
  std::vector<std::pair<SimTime, int32_t>> routes;
  Samples samples;
};

// 1 prefill (tp 1) + 1 decode (tp 2) at the start, elastic with `controller`.
void run_elastic(ElasticRun& out, std::shared_ptr<ClusterController> controller, Workload w,
                 bool route_highest, Duration startup = 5 * kSec) {
  std::vector<InstanceSetup> inst;
  inst.push_back(make_instance(InstanceRole::kPrefill, 1));
  inst.push_back(make_instance(InstanceRole::kDecode, 2));
  EngineConfig config;
  config.transfer.link = [](int32_t, int32_t) { return LinkSpec{50e9, Duration{5000}}; };
  config.elastic.controller = std::move(controller);
  config.elastic.control_interval = kSec;
  config.elastic.startup_prefill = startup;
  config.elastic.startup_decode = startup;
  config.elastic.make_instance = [](InstanceRole role, int32_t) {
    return make_instance(role, role == InstanceRole::kDecode ? 2 : 1);
  };
  auto router = std::make_unique<LoggingRouter>(InstanceRole::kPrefill, route_highest);
  LoggingRouter* r = router.get();
  auto decode_router = std::make_unique<LoggingRouter>(InstanceRole::kDecode, false);
  Engine engine(config, std::move(inst), std::move(router), std::move(w), &out.samples,
                std::move(decode_router));
  out.result = engine.run();
  out.routes = r->log;
}

TEST(Elastic, AddedInstanceTakesWorkOnlyAfterItsStartupDelay) {
  auto c = std::make_shared<ScriptedController>();
  c->script[1].add_prefill = 1;  // at t = 1 s, ready at 6 s
  ElasticRun run;
  run_elastic(run, c, steady(40, kSec / 4), /*route_highest=*/true);
  EXPECT_EQ(run.result.requests_finished, 40);
  ASSERT_EQ(run.result.instances.size(), 3u);
  EXPECT_EQ(run.result.instances[2].started_ns, kSec.count());
  int to_new = 0;
  for (const auto& [t, i] : run.routes) {
    if (i == 2) {
      EXPECT_GE(t, kTimeZero + 6 * kSec);
      to_new++;
    } else {
      EXPECT_LT(t, kTimeZero + 6 * kSec);  // the highest-index accepting one once it is ready
    }
  }
  EXPECT_GT(to_new, 0);
  EXPECT_GT(run.result.instances[2].prefill_tokens, 0);
  // Arrivals after the last tick before the end are never reported; the rest are, once each.
  EXPECT_LE(c->arrivals_seen, 40);
  EXPECT_GE(c->arrivals_seen, 36);
}

TEST(Elastic, DrainedInstanceGetsNoNewWorkFinishesAndRetires) {
  auto c = std::make_shared<ScriptedController>();
  c->script[1].add_prefill = 1;   // instance 2, ready at 6 s
  c->script[8].drain = {0};       // the original prefill instance
  ElasticRun run;
  // Lowest index first: instance 0 has work up to the drain.
  run_elastic(run, c, steady(60, kSec / 5), /*route_highest=*/false);
  EXPECT_EQ(run.result.requests_finished, 60);
  int64_t last_on_0 = -1;
  for (const auto& [t, i] : run.routes) {
    if (i == 0) {
      EXPECT_LE(t, kTimeZero + 8 * kSec);  // the tick runs after routing at its instant
      last_on_0 = t.time_since_epoch().count();
    }
  }
  ASSERT_GE(last_on_0, 0);
  const InstanceStats& s0 = run.result.instances[0];
  EXPECT_GE(s0.retired_ns, 8 * kSec.count());
  EXPECT_EQ(run.result.instances[2].retired_ns, -1);
  // Its GPU time ends at retirement.
  EXPECT_LT(s0.retired_ns, run.result.end_time.time_since_epoch().count());
}

TEST(Elastic, GpuSecondsFollowAHandBuiltTimelineExactly) {
  auto c = std::make_shared<ScriptedController>();
  c->script[10].add_prefill = 1;  // tp 1 from 10 s, ready at 15 s
  c->script[20].drain = {2};      // never routed to (lowest index first): retires at once
  ElasticRun run;
  run_elastic(run, c, steady(31, kSec), /*route_highest=*/false);
  const double end_s = to_seconds(run.result.end_time);
  EXPECT_GT(end_s, 30.0);
  EXPECT_EQ(run.result.instances[2].started_ns, 10 * kSec.count());
  EXPECT_EQ(run.result.instances[2].active_ns, 15 * kSec.count());
  EXPECT_EQ(run.result.instances[2].draining_ns, 20 * kSec.count());
  EXPECT_EQ(run.result.instances[2].retired_ns, 20 * kSec.count());
  EXPECT_EQ(run.result.instances[0].active_ns, 0);  // the initial instances take work at once
  EXPECT_EQ(run.result.instances[0].draining_ns, -1);
  EXPECT_DOUBLE_EQ(run.result.gpu_seconds, 1 * end_s + 2 * end_s + 1 * 10.0);
  EXPECT_EQ(run.result.num_gpus, 4);  // most held at once
  // The instance-count series records every change.
  std::vector<std::pair<int64_t, double>> prefill_changes;
  double last = -1;
  for (const SampleRecord& s : run.samples.cluster) {
    if (s.metric != "active_prefill") continue;
    if (s.value != last) prefill_changes.push_back({s.t_ns, s.value});
    last = s.value;
  }
  ASSERT_EQ(prefill_changes.size(), 3u);
  EXPECT_EQ(prefill_changes[0], (std::pair<int64_t, double>{0, 1.0}));
  EXPECT_EQ(prefill_changes[1], (std::pair<int64_t, double>{15 * kSec.count(), 2.0}));
  EXPECT_EQ(prefill_changes[2], (std::pair<int64_t, double>{20 * kSec.count(), 1.0}));
}

TEST(Elastic, StaticRunsCountEveryInstanceForTheWholeRun) {
  ElasticRun run;
  run_elastic(run, std::make_shared<ScriptedController>(), steady(10, kSec), false);
  EXPECT_DOUBLE_EQ(run.result.gpu_seconds, 3 * to_seconds(run.result.end_time));
  EXPECT_EQ(run.result.num_gpus, 3);
}

TEST(Elastic, SameInputsGiveTheSameFingerprint) {
  auto make = [] {
    auto c = std::make_shared<ScriptedController>();
    c->script[2].add_prefill = 2;
    c->script[3].add_decode = 1;
    c->script[12].drain = {0, 3};
    return c;
  };
  ElasticRun a, b;
  run_elastic(a, make(), steady(80, kSec / 4), true);
  run_elastic(b, make(), steady(80, kSec / 4), true);
  EXPECT_EQ(a.result.event_fingerprint, b.result.event_fingerprint);
  EXPECT_EQ(a.result.gpu_seconds, b.result.gpu_seconds);
  EXPECT_EQ(a.result.requests_finished, 80);
}

TEST(Elastic, InvalidDecisionsAreControllerBugs) {
  auto last_decode = std::make_shared<ScriptedController>();
  last_decode->script[1].drain = {1};
  ElasticRun run;
  EXPECT_THROW(run_elastic(run, last_decode, steady(10, kSec), false), std::logic_error);
  auto unknown = std::make_shared<ScriptedController>();
  unknown->script[1].drain = {7};
  EXPECT_THROW(run_elastic(run, unknown, steady(10, kSec), false), std::logic_error);
  auto starting = std::make_shared<ScriptedController>();
  starting->script[1].add_prefill = 1;
  starting->script[2].drain = {2};  // still starting
  EXPECT_THROW(run_elastic(run, starting, steady(10, kSec), false), std::logic_error);
}

// Holds every request back until `release`, then runs it as `inner` would.
class HoldUntil : public BatchingPolicy {
 public:
  HoldUntil(SimTime release, std::unique_ptr<BatchingPolicy> inner)
      : release_(release), inner_(std::move(inner)) {}
  bool next_batch(const InstanceView& view, BatchPlan& plan) override {
    if (view.now < release_) return false;
    return inner_->next_batch(view, plan);
  }
  std::optional<SimTime> wake_at(const InstanceView& view) override {
    return view.now < release_ ? std::optional<SimTime>(release_) : std::nullopt;
  }

 private:
  SimTime release_;
  std::unique_ptr<BatchingPolicy> inner_;
};

TEST(Elastic, BatchingPolicyIsWokenAtItsWakeTime) {
  std::vector<InstanceSetup> inst;
  inst.push_back(make_instance(InstanceRole::kUnified, 1));
  inst[0].batching = std::make_unique<HoldUntil>(kTimeZero + kSec / 2, std::move(inst[0].batching));
  EngineConfig config;
  auto router = std::make_unique<LoggingRouter>(InstanceRole::kUnified, false);
  Samples samples;
  Engine engine(config, std::move(inst), std::move(router), steady(1, kSec), &samples);
  const RunResult r = engine.run();
  ASSERT_EQ(samples.requests.size(), 1u);
  EXPECT_EQ(r.requests_finished, 1);
  EXPECT_EQ(samples.requests[0].first_scheduled_ns, kSec.count() / 2);
}

TEST(Elastic, ArrivalsRoutedToADecodeInstancePrefillThereWithoutTransfer) {
  std::vector<InstanceSetup> inst;
  inst.push_back(make_instance(InstanceRole::kPrefill, 1));
  inst.push_back(make_instance(InstanceRole::kDecode, 1));
  EngineConfig config;
  config.arrivals_to_decode = true;
  config.transfer.link = [](int32_t, int32_t) { return LinkSpec{50e9, Duration{5000}}; };
  auto router = std::make_unique<LoggingRouter>(InstanceRole::kDecode, false);
  auto decode_router = std::make_unique<LoggingRouter>(InstanceRole::kDecode, false);
  Samples samples;
  Engine engine(config, std::move(inst), std::move(router), steady(5, kSec / 10), &samples,
                std::move(decode_router));
  const RunResult r = engine.run();
  EXPECT_EQ(r.requests_finished, 5);
  EXPECT_EQ(r.instances[0].iterations, 0);
  EXPECT_EQ(r.instances[0].kv_transfers_out, 0);
  EXPECT_EQ(r.instances[1].prefill_tokens, 5 * 256);
  // Without the flag a decode instance is never offered to the arrival router.
  std::vector<InstanceSetup> inst2;
  inst2.push_back(make_instance(InstanceRole::kPrefill, 1));
  inst2.push_back(make_instance(InstanceRole::kDecode, 1));
  EngineConfig plain;
  plain.transfer.link = config.transfer.link;
  Engine engine2(plain, std::move(inst2), std::make_unique<LoggingRouter>(InstanceRole::kPrefill, false),
                 steady(5, kSec / 10), nullptr, std::make_unique<LoggingRouter>(InstanceRole::kDecode, false));
  EXPECT_EQ(engine2.run().instances[0].kv_transfers_out, 5);
}

}  // namespace
}  // namespace servesim::sim
