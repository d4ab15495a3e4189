#include "dllm/simulator.h"

#include <gtest/gtest.h>

#include "models/hardware.h"

namespace servesim::dllm {
namespace {

class DllmSim : public ::testing::Test {
 protected:
  void SetUp() override {
    static const auto models = models::ModelCatalog::load(models::kDefaultModelCatalogDir);
    static const auto gpus = models::GpuCatalog::load(models::kDefaultGpuCatalogPath);
    dep_.model = &models.get("llada-8b-instruct");
    dep_.gpu = &gpus.get("l40s");
    cost_ = models::make_roofline_cost_model(dep_, models::RooflineParams{});
  }
  // n requests of `prompt` tokens, one every `gap_ms`.
  static Workload workload(int n, int64_t prompt, double gap_ms) {
    Workload w;
    for (int i = 0; i < n; ++i) {
      RequestSpec r;
      r.id = i;
      r.arrival = SimTime{duration_from_ms(gap_ms * i)};
      r.prompt_tokens = prompt + (i % 3) * 40;
      r.output_tokens = 256;
      w.requests.push_back(r);
    }
    return w;
  }
  models::Deployment dep_;
  std::unique_ptr<models::IterationCostModel> cost_;
};

TEST_F(DllmSim, EveryRequestFinishesAfterItsSteps) {
  DllmConfig c;
  const Workload w = workload(40, 300, 200);
  for (const Algorithm a : {Algorithm::kDllmServe, Algorithm::kFastDllm, Algorithm::kSparseDllm,
                            Algorithm::kDllmCache}) {
    c.algorithm = a;
    const DllmRunResult r = simulate(c, dep_, *cost_, w);
    const DllmMetrics m = compute_metrics(r);
    EXPECT_EQ(m.finished, 40) << algorithm_name(a);
    EXPECT_EQ(m.generated_tokens, 40 * 256);
    for (const auto& q : r.requests) {
      EXPECT_GE(q.first_scheduled_ns, q.arrival_ns);
      EXPECT_GT(q.done_ns, q.first_scheduled_ns);
    }
    if (a == Algorithm::kDllmServe) {
      // Every request runs exactly `steps` passes: total slots = 40 x 256.
      EXPECT_EQ(r.batch_slots, 40 * 256);
    } else {
      EXPECT_EQ(r.forward_passes % 256, 0);  // whole static batches
    }
  }
}

TEST_F(DllmSim, UnloadedSingleRequestMatchesItsSteps) {
  DllmConfig c;
  const Workload w = workload(1, 300, 0);
  const DllmRunResult r = simulate(c, dep_, *cost_, w);
  EXPECT_EQ(r.forward_passes, 256);
  EXPECT_EQ(r.max_batch, 1);
  // Time = sum of its 256 step times.
  StepCostKnobs k;
  k.max_num_logits = c.max_num_logits;
  StepCost sc(*cost_, dep_, k);
  int64_t total = 0;
  for (int64_t s = 0; s < 256; ++s) {
    total += sc.step_time({step_work(Algorithm::kDllmServe, c.denoise, 300, 556, s)}).count();
  }
  EXPECT_EQ(r.requests[0].done_ns, total);
}

TEST_F(DllmSim, Deterministic) {
  DllmConfig c;
  const Workload w = workload(30, 400, 50);
  const DllmRunResult a = simulate(c, dep_, *cost_, w);
  const DllmRunResult b = simulate(c, dep_, *cost_, w);
  EXPECT_EQ(a.fingerprint, b.fingerprint);
  EXPECT_EQ(a.end_ns, b.end_ns);
}

TEST_F(DllmSim, StaticBatchFinishesTogether) {
  DllmConfig c;
  c.algorithm = Algorithm::kFastDllm;
  const Workload w = workload(6, 300, 0);  // all at t = 0: one batch
  const DllmRunResult r = simulate(c, dep_, *cost_, w);
  EXPECT_EQ(r.forward_passes, 256);
  EXPECT_EQ(r.max_batch, 6);
  for (const auto& q : r.requests) EXPECT_EQ(q.done_ns, r.requests[0].done_ns);
  c.max_batch_size = 2;
  EXPECT_EQ(simulate(c, dep_, *cost_, w).forward_passes, 3 * 256);
}

TEST_F(DllmSim, OutOfMemoryIsReportedNotRun) {
  DllmConfig c;
  c.memory.gpu_memory_utilization = 0.3;  // 14 GB of 48: the weights alone do not fit
  const Workload w = workload(2, 300, 0);
  EXPECT_THROW(simulate(c, dep_, *cost_, w), OutOfMemoryError);
  c.algorithm = Algorithm::kFastDllm;
  EXPECT_THROW(simulate(c, dep_, *cost_, w), OutOfMemoryError);
}

TEST_F(DllmSim, OverBudgetRequestIsRejected) {
  DllmConfig c;
  c.max_num_batched_tokens = 500;  // L = 556 can never run its Refresh step
  const Workload w = workload(1, 300, 0);
  const DllmRunResult r = simulate(c, dep_, *cost_, w);
  EXPECT_EQ(r.rejected, 1);
  EXPECT_TRUE(r.requests[0].rejected);
}

TEST_F(DllmSim, LogitChunksCostTime) {
  StepCostKnobs one, chunked;
  chunked.max_num_logits = 64;
  StepCost a(*cost_, dep_, one), b(*cost_, dep_, chunked);
  const DenoiseParams p;
  const std::vector<StepWork> work(8, step_work(Algorithm::kDllmServe, p, 300, 556, 5));
  const Duration ta = a.step_time(work);
  const Duration tb = b.step_time(work);
  EXPECT_EQ(a.last_chunks(), 1);
  EXPECT_EQ(b.last_chunks(), 4);
  EXPECT_GT(tb, ta);  // each chunk re-reads the LM-head weights
}

}  // namespace
}  // namespace servesim::dllm
