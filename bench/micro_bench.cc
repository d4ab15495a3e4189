// Micro-benchmarks (Google Benchmark): the event queue under exponential and trace-shaped
// timestamps (so a change of container is decided by measurement), the roofline cost model per
// call, and one coloc batching decision.
#include <benchmark/benchmark.h>

#include <deque>
#include <vector>

#include "models/cost/cost_model.h"
#include "models/cost/profiled_cost_model.h"
#include "policies/coloc.h"
#include "policies/dynaserve.h"
#include "profiles/profile_tables.h"
#include "core/rng.h"
#include "sim/event_queue.h"
#include "traces/loaders.h"

namespace servesim {
namespace {

// Hold model: keep `size` events in the queue; each step pops one and pushes one later.
void run_hold(benchmark::State& state, const std::vector<int64_t>& increments) {
  sim::EventQueue q;
  const size_t size = static_cast<size_t>(state.range(0));
  int64_t now = 0;
  size_t k = 0;
  for (size_t i = 0; i < size; ++i) {
    q.push({time_from_ns(increments[k++ % increments.size()]), sim::Phase::kComplete,
            sim::EventKind::kBatchDone, static_cast<int32_t>(i % 8), 0, 0});
  }
  for (auto _ : state) {
    const sim::Event e = q.pop();
    now = to_ns(e.time);
    q.push({time_from_ns(now + increments[k++ % increments.size()]),
            static_cast<sim::Phase>(k % 7), sim::EventKind::kBatchDone, e.target, 0, 0});
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_EventQueueExponential(benchmark::State& state) {
  RngStream rng(1, "bench");
  std::vector<int64_t> inc(1 << 16);
  for (auto& x : inc) x = static_cast<int64_t>(rng.exponential(1.0) * 1e7);
  run_hold(state, inc);
}
BENCHMARK(BM_EventQueueExponential)->Arg(16)->Arg(1024)->Arg(65536);

void BM_EventQueueTraceShaped(benchmark::State& state) {
  // Inter-arrival gaps of the real Azure code trace (bursty, many ties).
  const Workload w = traces::load_azure("traces/data/azure_llm_2023/AzureLLMInferenceTrace_code.csv");
  std::vector<int64_t> inc;
  for (size_t i = 1; i < w.requests.size(); ++i) {
    inc.push_back(to_ns(w.requests[i].arrival) - to_ns(w.requests[i - 1].arrival));
  }
  run_hold(state, inc);
}
BENCHMARK(BM_EventQueueTraceShaped)->Arg(16)->Arg(1024)->Arg(65536);

struct Catalog {
  models::GpuCatalog gpus = models::GpuCatalog::load("models/catalog/gpus.json");
  models::ModelCatalog models = models::ModelCatalog::load("models/catalog/models");
};

void BM_RooflineIteration(benchmark::State& state) {
  static const Catalog c;
  const models::Deployment d{&c.models.get("llama-3.1-8b"), &c.gpus.get("h100_sxm"), 1,
                             models::Dtype::kBf16, models::Dtype::kBf16};
  const auto cost = models::make_roofline_cost_model(d, {});
  models::BatchShape shape;
  for (int64_t i = 0; i < state.range(0); ++i) shape.segments.push_back({1, 1000 + i, 1});
  for (auto _ : state) benchmark::DoNotOptimize(cost->iteration_time(shape));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RooflineIteration)->Arg(1)->Arg(32)->Arg(256);

// The calibrated model: every operator looked up in the measured H100 tables (lookups per second
// = items_per_second x 8 operators).
void BM_ProfiledIteration(benchmark::State& state) {
  static const Catalog c;
  static const auto tables = profiles::load_gpu_profiles("profiles", "h100_sxm");
  const models::Deployment d{&c.models.get("llama-3.1-8b"), &c.gpus.get("h100_sxm"), 1,
                             models::Dtype::kBf16, models::Dtype::kBf16};
  const auto cost = models::make_profiled_cost_model(d, tables, {});
  models::BatchShape shape;
  for (int64_t i = 0; i < state.range(0); ++i) shape.segments.push_back({1, 1000 + i, 1});
  if (state.range(1) > 0) shape.segments.push_back({state.range(1), state.range(1) + 300, 1});
  for (auto _ : state) benchmark::DoNotOptimize(cost->iteration_time(shape));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ProfiledIteration)->Args({1, 0})->Args({32, 0})->Args({256, 0})->Args({64, 512});

void BM_ColocDecision(benchmark::State& state) {
  const auto policy = policies::make_coloc({});
  std::vector<sim::SeqView> running(static_cast<size_t>(state.range(0)));
  for (size_t i = 0; i < running.size(); ++i) {
    running[i] = {static_cast<RequestId>(i), {}, 1000, 200, 10, 1009, 64, 0};
  }
  std::deque<sim::SeqView> waiting;
  for (int i = 0; i < 16; ++i) waiting.push_back({1000 + i, {}, 1500, 100, 0, 0, 0, 0});
  const sim::InstanceView view{{}, 0, 16, 100000, 50000, &running, &waiting};
  sim::BatchPlan plan;
  for (auto _ : state) {
    plan.clear();
    benchmark::DoNotOptimize(policy->next_batch(view, plan));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ColocDecision)->Arg(8)->Arg(64)->Arg(256);

// DynaServe's global scheduler: one split decision (output-length prediction, up to k_max = 6
// pairs of virtual-batch replays of both instances' queues) for a new request arriving at a pair
// whose instances each hold `range(0)` requests (α: a quarter still waiting for prefill, the rest
// decoding; β: decoding), Qwen2.5-14B on calibrated A100 tables.
void BM_DynaServeSplitDecision(benchmark::State& state) {
  static const Catalog c;
  static const auto tables = profiles::load_gpu_profiles("profiles", "a100_80gb_sxm");
  const models::Deployment d{&c.models.get("qwen2.5-14b-instruct"), &c.gpus.get("a100_80gb_sxm"),
                             1, models::Dtype::kBf16, models::Dtype::kBf16};
  const std::shared_ptr<const models::IterationCostModel> cost =
      models::make_profiled_cost_model(d, tables, {});
  std::vector<sim::InstanceContext> ctx(2);
  std::vector<std::shared_ptr<policies::LatencyTable>> latency;
  for (int i = 0; i < 2; ++i) {
    ctx[static_cast<size_t>(i)].index = i;
    ctx[static_cast<size_t>(i)].cost_model = cost;
    ctx[static_cast<size_t>(i)].num_blocks = 14000;
    latency.push_back(std::make_shared<policies::LatencyTable>(cost));
  }
  const auto router = policies::make_dynaserve_router({}, ctx, latency);
  const int64_t n = state.range(0);
  std::vector<std::vector<sim::SeqView>> running(2);
  std::vector<std::deque<sim::SeqView>> waiting(2);
  RngStream rng(1, "bench");
  for (int64_t i = 0; i < 2 * n; ++i) {
    sim::SeqView s{i, {}, rng.uniform_int(100, 4000), rng.uniform_int(20, 800), 0, 0, 0, 0};
    const size_t inst = static_cast<size_t>(i % 2);
    if (inst == 0 && i % 8 == 0) {
      s.split_tokens = s.prompt_tokens;
      s.split_target = 1;
      waiting[0].push_back(s);
      continue;
    }
    s.generated_tokens = std::max<int64_t>(1, s.output_tokens / 3);
    s.computed_tokens = s.prompt_tokens + s.generated_tokens - 1;
    running[inst].push_back(s);
  }
  std::vector<sim::InstanceLoad> loads(2);
  std::vector<sim::InstanceQueues> queues = {{&running[0], &waiting[0], {}}, {&running[1], &waiting[1], {}}};
  const sim::ClusterView view{{}, &loads, 16, &queues};
  RequestSpec r;
  r.prompt_tokens = 1500;
  r.output_tokens = 300;
  int64_t id = 2 * n;
  for (auto _ : state) {
    r.id = id++;
    const int32_t target = router->route(view, r);
    benchmark::DoNotOptimize(router->split(view, r, target));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DynaServeSplitDecision)->Arg(8)->Arg(32)->Arg(128);

}  // namespace
}  // namespace servesim

BENCHMARK_MAIN();
