// dLLM policies on the core engine (policies/dllm.h): request semantics, static batches, memory,
// several instances behind a router, TP, early stop at EOS and threshold decoding.
#include <gtest/gtest.h>

#include "dllm/config.h"
#include "dllm/step_cost.h"
#include "models/catalog/hardware.h"
#include "policies/builtin.h"
#include "policies/dllm.h"
#include "policies/routers.h"

namespace servesim::dllm {
namespace {

class DllmEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    static const auto models = models::ModelCatalog::load(models::kDefaultModelCatalogDir);
    static const auto gpus = models::GpuCatalog::load(models::kDefaultGpuCatalogPath);
    dep_.model = &models.get("llada-8b-instruct");
    dep_.gpu = &gpus.get("l40s");
    cost_ = models::make_roofline_cost_model(dep_, models::RooflineParams{});
  }
  // n requests of `prompt` (+ 0, 40 or 80) tokens, one every `gap_ms`.
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
  static std::vector<RequestPlan> plans(const DllmConfig& c, size_t n, uint64_t seed = 1) {
    RngStream rng(seed, "denoise");
    std::vector<RequestPlan> out;
    for (size_t i = 0; i < n; ++i) out.push_back(plan_request(c.denoise, c.variation, rng));
    return out;
  }
  DllmRunResult simulate(const DllmConfig& c, const Workload& w, int64_t instances = 1,
                         const models::Deployment* dep = nullptr,
                         std::shared_ptr<const models::IterationCostModel> cost = nullptr) {
    const policies::DllmInstanceSpec spec{
        c, dep ? *dep : dep_, cost ? cost : cost_,
        std::make_shared<std::vector<RequestPlan>>(plans(c, w.requests.size()))};
    return policies::run_dllm_cluster(spec, instances, policies::make_round_robin(), w);
  }
  // Sum of the step times of one request run alone (`prompt` tokens, in-block index from `plan`).
  Duration alone(const DllmConfig& c, int64_t prompt, const RequestPlan& plan,
                 const models::Deployment& dep, const models::IterationCostModel& cost) {
    StepCost sc(cost, dep, cost_knobs(c));
    Duration total{0};
    for (int64_t s = 0; s < plan.steps; ++s) {
      total += sc.step_time({step_work_at(c.algorithm, c.denoise, prompt,
                                          prompt + c.denoise.gen_length,
                                          plan.in_block_step(s, c.denoise), s)});
    }
    return total;
  }
  models::Deployment dep_;
  std::shared_ptr<const models::IterationCostModel> cost_;
};

TEST_F(DllmEngine, EveryRequestFinishesAfterItsSteps) {
  DllmConfig c;
  const Workload w = workload(40, 300, 200);
  for (const Algorithm a : {Algorithm::kDllmServe, Algorithm::kFastDllm, Algorithm::kSparseDllm,
                            Algorithm::kDllmCache}) {
    c.algorithm = a;
    const DllmRunResult r = simulate(c, w);
    const DllmMetrics m = compute_metrics(r);
    EXPECT_EQ(m.finished, 40) << algorithm_name(a);
    EXPECT_EQ(m.generated_tokens, 40 * 256);
    for (const auto& q : r.requests) {
      EXPECT_GE(q.first_scheduled_ns, q.arrival_ns);
      EXPECT_GT(q.done_ns, q.first_scheduled_ns);
      EXPECT_EQ(q.instance, 0);
    }
    if (a == Algorithm::kDllmServe) {
      // Every request runs exactly `steps` passes: total slots = 40 x 256.
      EXPECT_EQ(r.batch_slots, 40 * 256);
    } else {
      EXPECT_EQ(r.forward_passes % 256, 0);  // whole static batches
    }
  }
}

TEST_F(DllmEngine, UnloadedSingleRequestMatchesItsSteps) {
  DllmConfig c;
  const Workload w = workload(1, 300, 0);
  const DllmRunResult r = simulate(c, w);
  EXPECT_EQ(r.forward_passes, 256);
  EXPECT_EQ(r.max_batch, 1);
  EXPECT_EQ(r.requests[0].done_ns, alone(c, 300, plans(c, 1)[0], dep_, *cost_).count());
}

TEST_F(DllmEngine, Deterministic) {
  DllmConfig c;
  const Workload w = workload(30, 400, 50);
  const DllmRunResult a = simulate(c, w);
  const DllmRunResult b = simulate(c, w);
  EXPECT_EQ(a.fingerprint, b.fingerprint);
  EXPECT_EQ(a.end_ns, b.end_ns);
}

TEST_F(DllmEngine, StaticBatchFinishesTogether) {
  DllmConfig c;
  c.algorithm = Algorithm::kFastDllm;
  const Workload w = workload(6, 300, 0);  // all at t = 0: one batch
  const DllmRunResult r = simulate(c, w);
  EXPECT_EQ(r.forward_passes, 256);
  EXPECT_EQ(r.max_batch, 6);
  for (const auto& q : r.requests) EXPECT_EQ(q.done_ns, r.requests[0].done_ns);
  c.max_batch_size = 2;
  EXPECT_EQ(simulate(c, w).forward_passes, 3 * 256);
}

TEST_F(DllmEngine, OutOfMemoryIsReportedNotRun) {
  DllmConfig c;
  c.memory.gpu_memory_utilization = 0.3;  // 14 GB of 48: the weights alone do not fit
  const Workload w = workload(2, 300, 0);
  EXPECT_THROW(simulate(c, w), OutOfMemoryError);
  c.algorithm = Algorithm::kFastDllm;
  EXPECT_THROW(simulate(c, w), OutOfMemoryError);
}

TEST_F(DllmEngine, OverBudgetRequestIsRejected) {
  DllmConfig c;
  c.max_num_batched_tokens = 500;  // L = 556 can never run its Refresh step
  Workload w = workload(2, 300, 0);
  w.requests[1].prompt_tokens = 200;  // L = 456 fits
  const DllmRunResult r = simulate(c, w);
  EXPECT_EQ(r.rejected, 1);
  EXPECT_TRUE(r.requests[0].rejected);
  EXPECT_FALSE(r.requests[1].rejected);
  EXPECT_GT(r.requests[1].done_ns, 0);
}

TEST_F(DllmEngine, LogitChunksCostTime) {
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

// Round robin sends request i to instance i mod 2, and instances share nothing: each instance's
// requests see exactly the latencies of a 1-instance run of that half of the workload.
TEST_F(DllmEngine, TwoInstancesBehindRoundRobinRunTheirHalvesIndependently) {
  for (const Algorithm a : {Algorithm::kDllmServe, Algorithm::kFastDllm}) {
    DllmConfig c;
    c.algorithm = a;
    const Workload w = workload(40, 300, 300);
    const DllmRunResult both = simulate(c, w, 2);
    for (int half = 0; half < 2; ++half) {
      Workload part;
      for (size_t i = static_cast<size_t>(half); i < w.requests.size(); i += 2) {
        RequestSpec r = w.requests[i];
        r.id = static_cast<RequestId>(part.requests.size());
        part.requests.push_back(r);
      }
      const DllmRunResult one = simulate(c, part);
      for (size_t j = 0; j < part.requests.size(); ++j) {
        const DllmRequestResult& q = both.requests[2 * j + static_cast<size_t>(half)];
        EXPECT_EQ(q.instance, half);
        EXPECT_EQ(q.done_ns - q.arrival_ns, one.requests[j].done_ns - one.requests[j].arrival_ns)
            << algorithm_name(a) << " half " << half << " request " << j;
      }
    }
  }
}

// A TP-2 pass costs more than half the TP-1 pass: the compute halves, the two all-reduces per
// layer are added (the cost model's collective term).
TEST_F(DllmEngine, TensorParallelPassPaysTheAllReduce) {
  models::Deployment tp2 = dep_;
  tp2.tp = 2;
  std::shared_ptr<const models::IterationCostModel> cost2 =
      models::make_roofline_cost_model(tp2, models::RooflineParams{});
  const DenoiseParams p;
  models::BatchShape shape;
  shape.segments.push_back({556, 556, 0});
  EXPECT_EQ(cost_->breakdown(shape).allreduce.count(), 0);
  const Duration allreduce = cost2->breakdown(shape).allreduce;
  EXPECT_GT(allreduce.count(), 0);
  StepCost one(*cost_, dep_, {}), two(*cost2, tp2, {});
  const std::vector<StepWork> work(4, step_work(Algorithm::kDllmServe, p, 300, 556, 0));
  const Duration t1 = one.step_time(work), t2 = two.step_time(work);
  EXPECT_GT(t2, t1 / 2 + allreduce);
  EXPECT_LT(t2, t1);
  // A request alone on a TP-2 instance takes the sum of its TP-2 passes.
  DllmConfig c;
  const DllmRunResult r = simulate(c, workload(1, 300, 0), 1, &tp2, cost2);
  EXPECT_EQ(r.requests[0].done_ns, alone(c, 300, plans(c, 1)[0], tp2, *cost2).count());
  EXPECT_LT(r.requests[0].done_ns, simulate(c, workload(1, 300, 0)).requests[0].done_ns);
}

// Early stop at EOS: a request whose EOS lies in block 2 of 8 runs 2 blocks' steps (2 x 32) and
// denoises 64 tokens.
TEST_F(DllmEngine, EarlyStopAtEosEndsAfterTheBlockHoldingIt) {
  DllmConfig c;  // gen 256, steps 256, block 32: 8 blocks of 32 steps
  c.variation.eos_min = c.variation.eos_max = 40;
  const RequestPlan plan = plans(c, 1)[0];
  EXPECT_EQ(plan.steps, 64);
  EXPECT_EQ(plan.tokens, 64);
  const DllmRunResult r = simulate(c, workload(1, 300, 0));
  EXPECT_EQ(r.forward_passes, 64);
  EXPECT_EQ(r.requests[0].output_tokens, 64);
  EXPECT_EQ(r.requests[0].done_ns, alone(c, 300, plan, dep_, *cost_).count());
  // Its 64 passes are the first 64 of the full schedule.
  StepCost sc(*cost_, dep_, cost_knobs(c));
  Duration first64{0};
  for (int64_t s = 0; s < 64; ++s) first64 += sc.step_time({step_work(c.algorithm, c.denoise, 300, 556, s)});
  EXPECT_EQ(r.requests[0].done_ns, first64.count());
}

// Threshold decoding: the steps of a block are the draws it takes to accept its 32 tokens; the
// same seed gives the same plans, another seed other plans.
TEST_F(DllmEngine, TokensPerStepDistributionIsSeeded) {
  DllmConfig c;
  c.variation.accept_min = 1;
  c.variation.accept_max = 4;
  const std::vector<RequestPlan> a = plans(c, 50, 7), b = plans(c, 50, 7), d = plans(c, 50, 8);
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].block_steps, b[i].block_steps);
    differs |= a[i].block_steps != d[i].block_steps;
    ASSERT_EQ(a[i].block_steps.size(), 8u);
    int64_t sum = 0;
    for (const int32_t n : a[i].block_steps) {
      EXPECT_GE(n, 8);   // at most 4 tokens a step
      EXPECT_LE(n, 32);  // at least 1
      sum += n;
    }
    EXPECT_EQ(a[i].steps, sum);
    EXPECT_EQ(a[i].in_block_step(a[i].block_steps[0], c.denoise), 0);  // first step of block 2
    EXPECT_EQ(a[i].in_block_step(a[i].block_steps[0] - 1, c.denoise), a[i].block_steps[0] - 1);
  }
  EXPECT_TRUE(differs);
  // Fixed accepted tokens: 4 a step takes 8 steps per block.
  c.variation.accept_min = 4;
  const RequestPlan fixed = plans(c, 1)[0];
  EXPECT_EQ(fixed.steps, 64);
  // A run schedules exactly the planned passes.
  c.variation.accept_min = 1;
  const Workload w = workload(20, 300, 100);
  const std::vector<RequestPlan> p = plans(c, w.requests.size());
  int64_t planned = 0;
  for (const RequestPlan& q : p) planned += q.steps;
  EXPECT_EQ(simulate(c, w).batch_slots, planned);
}

TEST_F(DllmEngine, DefaultPlansDrawNothing) {
  DllmConfig c;
  RngStream used(3, "denoise"), fresh(3, "denoise");
  const RequestPlan p = plan_request(c.denoise, c.variation, used);
  EXPECT_EQ(p.steps, 256);
  EXPECT_EQ(p.tokens, 256);
  EXPECT_TRUE(p.block_steps.empty());
  EXPECT_EQ(used.next_u64(), fresh.next_u64());
}

}  // namespace
}  // namespace servesim::dllm
