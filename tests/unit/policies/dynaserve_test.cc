// DynaServe: the latency table, the output-length predictor, the execution predictor against the
// engine on the same queue, the split search, and every micro-request edge case end to end.
#include "policies/dynaserve.h"

#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <map>

#include "models/cost/cost_model.h"
#include "models/catalog/hardware.h"
#include "policies/builtin.h"
#include "policies/coloc.h"
#include "core/rng.h"
#include "sim/engine.h"

namespace servesim::policies {
namespace {

using namespace std::chrono_literals;

const models::Deployment& qwen14b_a100() {
  static const models::GpuCatalog gpus = models::GpuCatalog::load("models/catalog/gpus.json");
  static const models::ModelCatalog models = models::ModelCatalog::load("models/catalog/models");
  static const models::Deployment d{&models.get("qwen2.5-14b-instruct"), &gpus.get("a100_80gb_sxm"),
                                    1, models::Dtype::kBf16, models::Dtype::kBf16};
  return d;
}

std::shared_ptr<const models::IterationCostModel> cost() {
  static const std::shared_ptr<const models::IterationCostModel> c =
      models::make_roofline_cost_model(qwen14b_a100(), models::RooflineParams{});
  return c;
}

Duration shape_time(std::vector<models::Segment> segments) {
  models::BatchShape s;
  s.segments = std::move(segments);
  return cost()->iteration_time(s);
}

// ---- latency table ----

TEST(LatencyTable, FirstValueIsTheOfflineProfileAtTheBucketCorner) {
  LatencyTable t(cost(), {64, 128, 1024, 0.5});
  std::vector<models::Segment> corner = {{128, 128, 1}};
  for (int i = 0; i < 8; ++i) corner.push_back({1, 1024, 1});
  EXPECT_EQ(t.predict(100, 1000, 8), shape_time(corner));
  EXPECT_EQ(t.predict(128, 1024, 8), shape_time(corner));  // same bucket
  EXPECT_EQ(t.predict(64, 0, 0), shape_time({{64, 64, 1}}));
  // A chunk over a cached prefix costs what the profile says for that prefix's bucket.
  EXPECT_EQ(t.predict(64, 0, 0, 3000), shape_time({{64, 3072 + 64, 1}}));
  EXPECT_GT(t.predict(64, 0, 0, 3000), t.predict(64, 0, 0));
  EXPECT_THROW(t.predict(0, 0, 0), std::invalid_argument);
}

TEST(LatencyTable, MeasuredIterationsRefineTheirBucket) {
  LatencyTable t(cost(), {64, 128, 1024, 0.5});
  const Duration profiled = t.predict(256, 512, 4);
  t.observe(250, 500, 4, 0, profiled * 3);
  EXPECT_EQ(t.predict(256, 512, 4).count(), profiled.count() * 2);  // halfway to 3x
  t.observe(250, 500, 4, 0, profiled * 3);
  EXPECT_EQ(t.predict(256, 512, 4).count(), profiled.count() * 5 / 2);
  EXPECT_EQ(t.observations(), 2);
  EXPECT_EQ(t.predict(256, 512, 5), LatencyTable(cost(), {64, 128, 1024, 0.5}).predict(256, 512, 5));
}

TEST(LatencyTable, PrefillBudgetIsTheLargestBucketWithinTheTarget) {
  LatencyTable t(cost(), {64, 128, 1024, 1.0});
  const Duration target = 60ms;
  const int64_t b = t.prefill_budget(target, 2048, 32, 8192);
  ASSERT_GT(b, 0);
  EXPECT_EQ(b % 64, 0);
  EXPECT_LE(t.predict(b, 2048, 32), target);
  EXPECT_GT(t.predict(b + 64, 2048, 32), target);
  // Nothing waits on an iteration without decodes: the whole cap.
  EXPECT_EQ(t.prefill_budget(target, 0, 0, 4096), 4096);
  // Decodes alone already past the target: no prefill at all.
  EXPECT_EQ(t.prefill_budget(1ms, 2048, 32, 8192), 0);
}

// ---- output-length predictor ----

RequestSpec request(RequestId id, int64_t prompt, int64_t output) {
  RequestSpec r;
  r.id = id;
  r.prompt_tokens = prompt;
  r.output_tokens = output;
  return r;
}

TEST(OutputLengthPredictor, ExactPlusMarginWithoutError) {
  OutputLengthPredictor p(0, 20, 7);
  EXPECT_EQ(p.predict(request(3, 100, 500)), 520);
}

TEST(OutputLengthPredictor, GaussianErrorHasTheConfiguredSpreadAndIsOrderIndependent) {
  OutputLengthPredictor p(100, 0, 7);
  const int n = 4000;
  double sum = 0, sq = 0;
  for (int i = 0; i < n; ++i) {
    const double e = static_cast<double>(p.predict(request(i, 10, 1467))) - 1467.0;
    sum += e;
    sq += e * e;
  }
  const double mean = sum / n;
  EXPECT_NEAR(mean, 0, 4 * 100 / std::sqrt(n));
  EXPECT_NEAR(std::sqrt(sq / n - mean * mean), 100, 5);
  EXPECT_EQ(p.predict(request(17, 10, 1467)), OutputLengthPredictor(100, 0, 7).predict(request(17, 10, 1467)));
  EXPECT_NE(p.predict(request(17, 10, 1467)), OutputLengthPredictor(100, 0, 8).predict(request(17, 10, 1467)));
}

// ---- execution predictor ----

PredictorLimits limits() {
  PredictorLimits l;
  l.max_num_batched_tokens = 8192;
  l.max_num_seqs = 256;
  l.iteration_target = 90ms;
  return l;
}

TEST(ExecutionPredictor, EmptyQueueDrainsAtOnceAndLateWorkStartsWhenItsKvArrives) {
  LatencyTable t(cost());
  ExecutionPredictor p(&t, limits());
  const SimTime start = time_from_ns(5'000'000);
  EXPECT_EQ(p.drain({}, start), start);
  VirtualWork w;
  w.prefill_tokens = 0;
  w.decode_passes = 10;
  w.context = 1000;
  w.available = time_from_ns(1'000'000'000);
  std::vector<SimTime> finish;
  const SimTime end = p.drain({w}, start, &finish);
  EXPECT_EQ(end, finish[0]);
  // Ten single-decode passes after the KV arrived.
  EXPECT_EQ(end, w.available + t.predict(0, 1004, 1) * 10);
}

TEST(ExecutionPredictor, PrefillOnlyWorkFinishesWithItsPrompt) {
  LatencyTable t(cost());
  ExecutionPredictor p(&t, limits());
  VirtualWork w;
  w.prefill_tokens = 1024;  // an α that stops at the end of the prompt
  EXPECT_EQ(p.drain({w}, kTimeZero), kTimeZero + t.predict(1024, 0, 0));
}

// Runs `reqs` (all arriving at 0) on one instance under the SLO-aware local scheduler.
sim::RunResult run_one_instance(const std::vector<std::pair<int64_t, int64_t>>& reqs,
                                std::shared_ptr<LatencyTable> table) {
  ColocParams cp;
  cp.mode = ColocParams::Mode::kStallFree;
  cp.kv_allocation = ColocParams::KvAllocation::kWholePrompt;
  cp.max_num_batched_tokens = 8192;
  cp.latency_table = std::move(table);
  cp.iteration_target = 90ms;
  std::vector<sim::InstanceSetup> inst(1);
  inst[0].cost_model = cost();
  inst[0].num_blocks = 100000;
  inst[0].batching = make_coloc(cp);
  Workload w;
  for (size_t i = 0; i < reqs.size(); ++i) {
    w.requests.push_back(request(static_cast<RequestId>(i), reqs[i].first, reqs[i].second));
  }
  register_builtin_policies();
  sim::EngineConfig config;
  config.sample_interval = Duration{0};
  sim::Engine engine(config, std::move(inst), sim::routing_policies().get("round_robin").make({}),
                     std::move(w), nullptr);
  return engine.run();
}

TEST(ExecutionPredictor, PredictsTheEngineDrainTimeOfTheSameQueue) {
  const std::vector<std::pair<int64_t, int64_t>> reqs = {
      {2048, 64}, {219, 300}, {1024, 128}, {4096, 16}, {512, 200}, {128, 256},
      {8192, 32}, {300, 90},  {700, 150},  {1500, 40}, {256, 400}, {3000, 100}};
  const sim::RunResult real = run_one_instance(reqs, std::make_shared<LatencyTable>(cost()));
  ASSERT_EQ(real.requests_finished, static_cast<int64_t>(reqs.size()));
  LatencyTable t(cost());
  ExecutionPredictor p(&t, limits());
  std::vector<VirtualWork> work;
  for (const auto& [prompt, output] : reqs) {
    VirtualWork w;
    w.prefill_tokens = prompt;
    w.decode_passes = output - 1;
    work.push_back(w);
  }
  const double predicted = to_seconds(p.drain(work, kTimeZero));
  const double measured = to_seconds(real.end_time);
  EXPECT_NEAR(predicted / measured, 1.0, 0.05) << predicted << " s vs " << measured << " s";
  // Runs of identical passes are advanced together: far fewer runs than engine iterations.
  EXPECT_LT(p.virtual_passes(), real.instances[0].iterations / 4);
}

// Resuming from the base's checkpoint gives what replaying the whole queue gives: the same drain
// time and the same load, for random queues (decodes, partial prefills, β parts with context)
// and every kind of tail, under tight and loose sequence and KV limits.
TEST(ExecutionPredictor, ResumingFromTheBaseMatchesTheFullReplay) {
  RngStream rng(3, "predictor-checkpoint");
  LatencyTable t(cost());
  for (int trial = 0; trial < 300; ++trial) {
    PredictorLimits lim = limits();
    lim.fill_tokens = trial % 2 ? 4096 : 0;
    lim.max_num_seqs = trial % 3 == 0 ? rng.uniform_int(2, 12) : 256;
    lim.kv_capacity_tokens = trial % 5 == 0 ? rng.uniform_int(4000, 40000) : 0;
    const SimTime start = time_from_ns(rng.uniform_int(0, 1'000'000'000));
    std::vector<VirtualWork> base;
    const int64_t items = rng.uniform_int(0, 40);
    for (int64_t i = 0; i < items; ++i) {
      VirtualWork w;
      switch (rng.uniform_int(0, 2)) {
        case 0:  // decoding
          w.decode_passes = rng.uniform_int(1, 600);
          w.context = rng.uniform_int(10, 4000);
          break;
        case 1:  // waiting or partly prefilled
          w.prefill_tokens = rng.uniform_int(1, 6000);
          w.decode_passes = rng.uniform_int(0, 300);
          w.context = rng.uniform_int(0, 1) ? 0 : rng.uniform_int(1, 3000);
          break;
        default:  // an α part: prefill only
          w.prefill_tokens = rng.uniform_int(1, 6000);
          break;
      }
      w.available = start;
      base.push_back(w);
    }
    VirtualWork tail;
    tail.prefill_tokens = rng.uniform_int(0, 3) == 0 ? 0 : rng.uniform_int(1, 8000);
    tail.decode_passes = rng.uniform_int(tail.prefill_tokens == 0 ? 1 : 0, 500);
    tail.context = rng.uniform_int(0, 2000);
    tail.available = start;

    ExecutionPredictor full(&t, lim);
    std::vector<VirtualWork> all = base;
    all.push_back(tail);
    const SimTime expected = full.drain(all, start);
    const Duration expected_load = full.last_load();
    const SimTime expected_base = full.drain(base, start);
    const Duration expected_base_load = full.last_load();

    ExecutionPredictor resumed(&t, lim);
    resumed.set_base(base, start);
    EXPECT_EQ(resumed.drain_with(&tail), expected) << "trial " << trial;
    EXPECT_EQ(resumed.last_load(), expected_load) << "trial " << trial;
    EXPECT_EQ(resumed.drain_with(nullptr), expected_base) << "trial " << trial;
    EXPECT_EQ(resumed.last_load(), expected_base_load) << "trial " << trial;
    EXPECT_EQ(resumed.drain_with(&tail), expected) << "trial " << trial << " (again)";
  }
}

// ---- global scheduler ----

struct Cluster {
  std::vector<std::vector<sim::SeqView>> running{2};
  std::vector<std::deque<sim::SeqView>> waiting{2};
  std::vector<sim::InstanceLoad> loads{2};
  std::vector<sim::InstanceQueues> queues{2};
  sim::ClusterView view() {
    for (size_t i = 0; i < 2; ++i) {
      loads[i].instance_id = static_cast<int32_t>(i);
      queues[i] = {&running[i], &waiting[i], kTimeZero};
    }
    return {kTimeZero, &loads, 16, &queues};
  }
};

std::unique_ptr<sim::RoutingPolicy> router(DynaServeParams p) {
  std::vector<sim::InstanceContext> ctx(2);
  std::vector<std::shared_ptr<LatencyTable>> tables;
  for (int i = 0; i < 2; ++i) {
    ctx[static_cast<size_t>(i)].index = i;
    ctx[static_cast<size_t>(i)].cost_model = cost();
    ctx[static_cast<size_t>(i)].num_blocks = 100000;
    tables.push_back(std::make_shared<LatencyTable>(cost()));
  }
  return make_dynaserve_router(p, ctx, tables);
}

struct Placement {
  int32_t instance;
  sim::SplitDecision split;
};

Placement place(sim::RoutingPolicy& r, Cluster& c, const RequestSpec& req) {
  const sim::ClusterView v = c.view();
  const int32_t i = r.route(v, req);
  return {i, r.split(v, req, i)};
}

TEST(DynaServeRouter, FixedRatioEdgeCases) {
  Cluster c;
  DynaServeParams p;
  p.length_margin = 20;
  const RequestSpec req = request(0, 1000, 500);  // N = 1000 + 520
  p.split_ratio = 0;  // s = 0: the whole request on the β-instance
  Placement pl = place(*router(p), c, req);
  EXPECT_EQ(pl.instance, 1);
  EXPECT_EQ(pl.split.split_tokens, 0);
  p.split_ratio = 1;  // s = N: the whole request on the α-instance
  pl = place(*router(p), c, req);
  EXPECT_EQ(pl.instance, 0);
  EXPECT_EQ(pl.split.split_tokens, 0);
  p.split_ratio = 1000.0 / 1520;  // s = P: classic disaggregation
  pl = place(*router(p), c, req);
  EXPECT_EQ(pl.instance, 0);
  EXPECT_EQ(pl.split.split_tokens, 1000);
  EXPECT_EQ(pl.split.target, 1);
  p.split_ratio = 0.25;  // s < P: part of the prefill offloaded
  pl = place(*router(p), c, req);
  EXPECT_EQ(pl.split.split_tokens, 380);
  // s > P with an over-predicted output: the request ends on α before the split point.
  p.split_ratio = 0.99;  // s = 1505 >= P + D = 1500
  pl = place(*router(p), c, req);
  EXPECT_EQ(pl.instance, 0);
  EXPECT_EQ(pl.split.split_tokens, 0);
  p.split_ratio = 0.9;  // s = 1368 > P, inside the real request: early decode merged on α
  pl = place(*router(p), c, req);
  EXPECT_EQ(pl.split.split_tokens, 1368);
}

TEST(DynaServeRouter, SearchGivesLessWorkToTheBusierInstance) {
  DynaServeParams p;
  const RequestSpec req = request(5, 1024, 1024);
  Cluster idle;
  const int64_t s_idle = place(*router(p), idle, req).split.split_tokens;
  // Both idle: lone decode passes hardly load a GPU, so the balance point shares the prompt
  // between the two instances (part of the prefill offloaded to β).
  EXPECT_GT(s_idle, 0);
  EXPECT_LT(s_idle, 1024);
  Cluster busy_b;  // β has 64 long decodes queued: α takes (nearly) everything
  for (int i = 0; i < 64; ++i) {
    sim::SeqView s;
    s.id = 100 + i;
    s.prompt_tokens = 2000;
    s.output_tokens = 2000;
    s.generated_tokens = 10;
    s.computed_tokens = 2009;
    busy_b.running[1].push_back(s);
  }
  const Placement pb = place(*router(p), busy_b, request(6, 1024, 1024));
  const int64_t s_busy_b = pb.split.split_tokens == 0 ? 1024 + 1044 : pb.split.split_tokens;
  EXPECT_GT(s_busy_b, s_idle);
  Cluster busy_a = busy_b;
  std::swap(busy_a.running[0], busy_a.running[1]);
  const Placement pa = place(*router(p), busy_a, request(6, 1024, 1024));
  const int64_t s_busy_a = pa.instance == 1 ? 0 : pa.split.split_tokens;
  EXPECT_LT(s_busy_a, s_idle);
}

TEST(DynaServeRouter, SearchedSplitAtThePromptEndLeavesTheFirstTokenToBeta) {
  DynaServeParams p;
  p.k_max = 1;  // the search stops at its first point, s = P
  const RequestSpec req = request(7, 1000, 500);
  Cluster c;
  Placement pl = place(*router(p), c, req);
  EXPECT_EQ(pl.instance, 0);
  EXPECT_EQ(pl.split.target, 1);
  EXPECT_EQ(pl.split.split_tokens, 999);  // β computes token 1000 and emits the first token
  p.handoff_in_prefill = false;
  pl = place(*router(p), c, req);
  EXPECT_EQ(pl.split.split_tokens, 1000);  // classic disaggregation: α emits the first token
  // A fixed ratio is taken as it is.
  p.handoff_in_prefill = true;
  p.split_ratio = 1000.0 / 1520;
  EXPECT_EQ(place(*router(p), c, req).split.split_tokens, 1000);
}

// ---- end to end through the engine ----

sim::RunResult run_dynaserve(const DynaServeParams& p, Workload w, sim::RecordListener* listener) {
  const sim::ClusterLayout layout = make_dynaserve_layout(p);
  std::vector<sim::InstanceSetup> inst;
  std::vector<sim::InstanceContext> contexts;
  for (int i = 0; i < 2; ++i) {
    sim::InstanceContext ctx;
    ctx.index = i;
    ctx.cost_model = cost();
    ctx.num_blocks = 20000;
    ctx.kv_bytes_per_token = qwen14b_a100().model->kv_bytes_per_token(models::Dtype::kBf16);
    sim::InstanceSetup s;
    s.cost_model = cost();
    s.num_blocks = ctx.num_blocks;
    s.kv_bytes_per_token = ctx.kv_bytes_per_token;
    s.batching = layout.groups[0].make_batching(ctx);
    inst.push_back(std::move(s));
    contexts.push_back(ctx);
  }
  sim::EngineConfig config;
  config.sample_interval = Duration{0};
  config.record_token_times = true;
  config.transfer.mode = layout.transfer;
  config.transfer.link = [](int32_t, int32_t) { return sim::LinkSpec{300e9, 5us}; };
  sim::Engine engine(config, std::move(inst), layout.make_router(contexts), std::move(w), listener);
  return engine.run();
}

class Collect : public sim::RecordListener {
 public:
  void on_request(const sim::RequestRecord& r) override { requests[r.request_id] = r; }
  void on_sample(const sim::SampleRecord&) override {}
  std::map<RequestId, sim::RequestRecord> requests;
};

Workload poisson(int n, double rate, uint64_t seed) {
  Workload w;
  RngStream rng(seed, "dynaserve-test");
  double t = 0;
  for (int i = 0; i < n; ++i) {
    RequestSpec r = request(i, rng.uniform_int(100, 3000), rng.uniform_int(10, 600));
    r.arrival = kTimeZero + duration_from_seconds(t);
    t += rng.exponential(rate);
    w.requests.push_back(r);
  }
  return w;
}

TEST(DynaServeEndToEnd, EveryEdgeCaseFinishesWithEveryToken) {
  // Fixed ratios cover s = 0, s < P, s = P, s > P and s >= P + D; under-predicted outputs (β keeps
  // decoding past D̂) come from a large prediction error.
  for (double ratio : {0.0, 0.3, 0.6, 0.9, 1.0, -1.0}) {
    for (double sigma : {0.0, 300.0}) {
      DynaServeParams p;
      p.split_ratio = ratio;
      p.length_sigma = sigma;
      Collect rec;
      const Workload w = poisson(60, 4, 3);
      const sim::RunResult res = run_dynaserve(p, w, &rec);
      ASSERT_EQ(res.requests_finished, 60) << ratio << " " << sigma;
      for (const RequestSpec& r : w.requests) {
        ASSERT_EQ(static_cast<int64_t>(rec.requests.at(r.id).token_times_ns.size()), r.output_tokens);
      }
      const int64_t moved = res.instances[0].kv_transfers_out + res.instances[1].kv_transfers_out;
      if (ratio == 0.0 || ratio == 1.0) {
        EXPECT_EQ(moved, 0);
      }
      if (ratio == 0.3 || ratio == 0.6) {
        EXPECT_GT(moved, 0);
      }
    }
  }
}

TEST(DynaServeEndToEnd, SameInputsGiveTheSameEvents) {
  DynaServeParams p;
  const sim::RunResult a = run_dynaserve(p, poisson(80, 5, 9), nullptr);
  const sim::RunResult b = run_dynaserve(p, poisson(80, 5, 9), nullptr);
  EXPECT_EQ(a.event_fingerprint, b.event_fingerprint);
  EXPECT_EQ(a.requests_finished, 80);
}

}  // namespace
}  // namespace servesim::policies
