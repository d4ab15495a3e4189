// The serving-engine models' schedulers on hand-built views (TensorRT-LLM's in-flight batching,
// SGLang's prefill-first scheduler), the version rule and the per-version defaults.
#include <gtest/gtest.h>

#include <deque>
#include <vector>

#include "models/catalog/hardware.h"
#include "policies/builtin.h"
#include "policies/engines/engine_model.h"
#include "policies/engines/sglang.h"
#include "policies/engines/trtllm.h"
#include "policy_test_util.h"
#include "core/error.h"

namespace servesim::policies {
namespace {

using sim::BatchPlan;
using testing::check_plan;
using testing::decode_seq;
using testing::Instance;
using testing::partial_seq;
using testing::Sched;
using testing::scheduled;
using testing::waiting_seq;
using Ids = std::vector<RequestId>;

// One decision of `policy`, checked to be a plan the engine accepts.
BatchPlan decide(sim::BatchingPolicy& policy, const Instance& inst) {
  BatchPlan plan;
  const bool has = policy.next_batch(inst.view(), plan);
  EXPECT_EQ(check_plan(inst, plan), "");
  EXPECT_EQ(has, !plan.empty());
  return plan;
}

// ---- TensorRT-LLM ----

TrtllmSchedulerParams trt(int64_t max_num_tokens, int64_t max_batch = 2048) {
  TrtllmSchedulerParams p;
  p.max_num_tokens = max_num_tokens;
  p.max_batch_size = max_batch;
  return p;
}

TEST(TrtllmScheduler, DecodesFirstThenWholeContextsWhileTheyFitTheTokenBudget) {
  Instance inst;
  inst.running = {decode_seq(1, 100, 5, 20), decode_seq(2, 100, 5, 20)};
  inst.waiting = {waiting_seq(3, 500), waiting_seq(4, 600), waiting_seq(5, 10)};
  auto policy = make_trtllm_scheduler(trt(1000));
  const BatchPlan plan = decide(*policy, inst);
  // 2 + 500 tokens; 600 does not fit, and the scheduler stops there (FCFS, no skipping). Every
  // request keeps its whole sequence reserved (prompt + output tokens).
  EXPECT_EQ(plan.admit, (Ids{3}));
  EXPECT_EQ(scheduled(plan), (std::vector<Sched>{{1, 1, 205}, {2, 1, 205}, {3, 500, 550}}));
}

TEST(TrtllmScheduler, GuaranteedNoEvictAdmitsOnlyWhenTheWholeSequenceFits) {
  Instance inst;
  inst.waiting = {waiting_seq(1, 100)};  // 100 + 50 output tokens: 10 blocks of 16
  inst.free_blocks = 9;
  auto policy = make_trtllm_scheduler(trt(8192));
  EXPECT_TRUE(decide(*policy, inst).empty());
  inst.free_blocks = 10;
  EXPECT_EQ(decide(*policy, inst).admit, (Ids{1}));
}

TEST(TrtllmScheduler, MaxBatchSizeCountsRunningAndNewRequests) {
  Instance inst;
  inst.running = {decode_seq(1, 100, 5, 20), decode_seq(2, 100, 5, 20)};
  inst.waiting = {waiting_seq(3, 50), waiting_seq(4, 50)};
  auto policy = make_trtllm_scheduler(trt(8192, 3));
  EXPECT_EQ(decide(*policy, inst).admit, (Ids{3}));
}

TEST(TrtllmScheduler, WithoutChunkingALongContextWaitsForARoomyIteration) {
  Instance inst;
  inst.running = {decode_seq(1, 100, 5, 20)};
  inst.waiting = {waiting_seq(2, 1000)};
  auto policy = make_trtllm_scheduler(trt(1000));
  const BatchPlan plan = decide(*policy, inst);
  EXPECT_TRUE(plan.admit.empty());  // 1 decode token + 1000 > 1000
  EXPECT_EQ(scheduled(plan), (std::vector<Sched>{{1, 1, 205}}));
}

TEST(TrtllmScheduler, ChunkedContextsTakeTheTokensLeftAndContinueFirst) {
  Instance inst;
  inst.running = {decode_seq(1, 100, 5, 20)};
  inst.waiting = {waiting_seq(2, 1000)};
  TrtllmSchedulerParams p = trt(400);
  p.enable_chunked_prefill = true;
  auto policy = make_trtllm_scheduler(p);
  EXPECT_EQ(scheduled(decide(*policy, inst)),
            (std::vector<Sched>{{1, 1, 205}, {2, 399, 1050}}));
  // Next iteration: the partial context continues in its running order.
  Instance next;
  next.running = {decode_seq(1, 100, 6, 20), partial_seq(2, 1000, 399, 66)};
  next.running[1].output_tokens = 50;
  EXPECT_EQ(scheduled(decide(*policy, next)),
            (std::vector<Sched>{{1, 1, 206}, {2, 399, 1050}}));
}

TEST(TrtllmScheduler, MaxUtilizationPreemptsTheNewestWhenADecodeNeedsABlock) {
  Instance inst;
  inst.running = {decode_seq(1, 32, 1, 2), decode_seq(2, 32, 1, 2)};  // 32 tokens: a new block
  inst.free_blocks = 0;
  TrtllmSchedulerParams p = trt(8192);
  p.capacity = TrtllmSchedulerParams::Capacity::kMaxUtilization;
  auto policy = make_trtllm_scheduler(p);
  const BatchPlan plan = decide(*policy, inst);
  EXPECT_EQ(plan.preempt, (Ids{2}));
  EXPECT_EQ(scheduled(plan), (std::vector<Sched>{{1, 1, 0}}));
}

// attention_dp_config.enable_balance over 4 ranks, timeout_iters 3, batching_wait_iters 1: one
// new context waits until the count, which rises in every iteration without a context on every
// rank (a steady decode step too), reaches 3; four start together after one batching iteration;
// with fewer decodes than ranks (a rank without a generation request) a context starts at once.
TEST(TrtllmScheduler, AttentionDpBalanceHoldsContextsUntilEveryRankHasOneOrTheTimeout) {
  TrtllmSchedulerParams p = trt(8192);
  p.attention_dp_ranks = 4;
  p.adp_enable_balance = true;
  p.adp_timeout_iters = 3;
  p.adp_batching_wait_iters = 1;
  auto policy = make_trtllm_scheduler(p);
  Instance inst;
  for (RequestId id = 1; id <= 4; ++id) inst.running.push_back(decode_seq(id, 100, 5, 20));
  inst.waiting = {waiting_seq(5, 100)};
  const std::vector<Sched> decodes = {{1, 1, 205}, {2, 1, 205}, {3, 1, 205}, {4, 1, 205}};
  Instance steady = inst;
  steady.waiting.clear();
  policy->on_steady_decode_step(steady.view());          // count 1
  EXPECT_EQ(scheduled(decide(*policy, inst)), decodes);  // count 2
  EXPECT_EQ(decide(*policy, inst).admit, (Ids{5}));      // count 3: the timeout
  EXPECT_TRUE(decide(*policy, inst).admit.empty());      // the count restarted

  for (RequestId id = 6; id <= 8; ++id) inst.waiting.push_back(waiting_seq(id, 100));
  EXPECT_TRUE(decide(*policy, inst).admit.empty());  // 4 contexts: one batching iteration
  EXPECT_EQ(decide(*policy, inst).admit, (Ids{5, 6, 7, 8}));

  Instance few;
  few.running = {decode_seq(1, 100, 5, 20)};
  few.waiting = {waiting_seq(2, 100)};
  EXPECT_EQ(decide(*make_trtllm_scheduler(p), few).admit, (Ids{2}));
  p.adp_enable_balance = false;
  EXPECT_EQ(decide(*make_trtllm_scheduler(p), inst).admit, (Ids{5, 6, 7, 8}));
}

// ---- SGLang ----

SglangSchedulerParams sgl(int64_t chunk, int64_t max_prefill = 16384) {
  SglangSchedulerParams p;
  p.chunked_prefill_size = chunk;
  p.max_prefill_tokens = max_prefill;
  return p;
}

// An instance with one-token pages, as SGLang allocates KV.
Instance token_pages(int64_t free_tokens) {
  Instance inst;
  inst.block_size = 1;
  inst.total_blocks = 1'000'000;
  inst.free_blocks = free_tokens;
  return inst;
}

TEST(SglangScheduler, PrefillFirstPausesTheDecodes) {
  Instance inst = token_pages(100'000);
  inst.running = {decode_seq(1, 100, 5, 104)};
  inst.waiting = {waiting_seq(2, 300), waiting_seq(3, 200)};
  auto policy = make_sglang_scheduler(sgl(8192));
  const BatchPlan plan = decide(*policy, inst);
  EXPECT_EQ(plan.admit, (Ids{2, 3}));
  EXPECT_EQ(scheduled(plan), (std::vector<Sched>{{2, 300, 0}, {3, 200, 0}}));
}

TEST(SglangScheduler, MixedChunkRunsTheDecodesInThePrefillBatch) {
  Instance inst = token_pages(100'000);
  inst.running = {decode_seq(1, 100, 5, 104)};
  inst.waiting = {waiting_seq(2, 300)};
  SglangSchedulerParams p = sgl(8192);
  p.enable_mixed_chunk = true;
  auto policy = make_sglang_scheduler(p);
  EXPECT_EQ(scheduled(decide(*policy, inst)), (std::vector<Sched>{{2, 300, 0}, {1, 1, 0}}));
}

TEST(SglangScheduler, APromptLongerThanTheChunkIsCutAndContinuesFirst) {
  Instance inst = token_pages(100'000);
  inst.waiting = {waiting_seq(1, 1000), waiting_seq(2, 100)};
  auto policy = make_sglang_scheduler(sgl(512));
  EXPECT_EQ(scheduled(decide(*policy, inst)), (std::vector<Sched>{{1, 512, 0}}));
  Instance next = token_pages(100'000);
  next.running = {partial_seq(1, 1000, 512, 512)};
  next.waiting = {waiting_seq(2, 100)};
  // The chunked request's last 488 tokens, then request 2 within the remaining 24? No: 100 > 24,
  // so request 2 is cut to the 24 tokens left of the chunk budget.
  EXPECT_EQ(scheduled(decide(*policy, next)), (std::vector<Sched>{{1, 488, 0}, {2, 24, 0}}));
}

TEST(SglangScheduler, MaxPrefillTokensStopsASecondRequestButNeverTheFirst) {
  Instance inst = token_pages(100'000);
  inst.waiting = {waiting_seq(1, 3000), waiting_seq(2, 3000)};
  auto policy = make_sglang_scheduler(sgl(0, 2000));  // no chunking
  EXPECT_EQ(decide(*policy, inst).admit, (Ids{1}));
}

TEST(SglangScheduler, AdmissionKeepsRoomForTheRunningRequestsFutureTokens) {
  // Free 1000 tokens; the running request may still write 1000 x 0.7 = 700 of them. Each waiting
  // request needs 100 prompt + 50 output = 150 < 300 left; after one, 150 are left: not < 150.
  Instance inst = token_pages(1000);
  inst.running = {decode_seq(1, 100, 1, 100)};
  inst.running[0].output_tokens = 1001;
  inst.waiting = {waiting_seq(2, 100), waiting_seq(3, 100)};
  auto policy = make_sglang_scheduler(sgl(8192));
  const BatchPlan first = decide(*policy, inst);
  EXPECT_EQ(first.admit, (Ids{2}));
  // The batch is now full: with request 2 running, the next call decodes instead of prefilling,
  // even though the pool would hold request 3, until a request finishes.
  Instance next = token_pages(750);
  next.running = {decode_seq(1, 100, 2, 101), decode_seq(2, 100, 1, 100)};
  next.running[0].output_tokens = 1001;
  next.waiting = {waiting_seq(3, 100)};
  const BatchPlan second = decide(*policy, next);
  EXPECT_TRUE(second.admit.empty());
  EXPECT_EQ(scheduled(second), (std::vector<Sched>{{1, 1, 0}, {2, 1, 0}}));
}

TEST(SglangScheduler, DecodeWithoutRoomRetractsTheRequestWithFewestTokensFirst) {
  Instance inst = token_pages(1);  // 2 decodes need 2 new tokens
  inst.running = {decode_seq(1, 100, 40, 139), decode_seq(2, 100, 3, 102)};
  auto policy = make_sglang_scheduler(sgl(8192));
  const BatchPlan plan = decide(*policy, inst);
  EXPECT_EQ(plan.preempt, (Ids{2}));
  EXPECT_EQ(scheduled(plan), (std::vector<Sched>{{1, 1, 0}}));
}

// scheduler_recv_interval 3: a request that arrives while the scheduler decodes is taken in at
// the third decode batch after the last take-in; after a prefill batch, at the next call.
TEST(SglangScheduler, ARecvIntervalHoldsNewRequestsForThatManyDecodeBatches) {
  SglangSchedulerParams p = sgl(8192);
  p.scheduler_recv_interval = 3;
  auto policy = make_sglang_scheduler(p);
  Instance inst = token_pages(100'000);
  inst.running = {decode_seq(1, 100, 5, 104)};
  inst.waiting = {waiting_seq(2, 300)};
  for (int call = 1; call <= 2; ++call) {
    const BatchPlan plan = decide(*policy, inst);
    EXPECT_TRUE(plan.admit.empty()) << "call " << call;
    EXPECT_EQ(scheduled(plan), (std::vector<Sched>{{1, 1, 0}})) << "call " << call;
  }
  EXPECT_EQ(decide(*policy, inst).admit, (Ids{2}));
  Instance next = token_pages(100'000);
  next.running = {decode_seq(1, 100, 8, 107), decode_seq(2, 300, 1, 300)};
  next.waiting = {waiting_seq(3, 200)};
  EXPECT_EQ(decide(*policy, next).admit, (Ids{3}));

  // An idle scheduler takes a request in at once; with the default interval, so does a busy one.
  auto idle = make_sglang_scheduler(p);
  Instance empty = token_pages(100'000);
  empty.waiting = {waiting_seq(4, 100)};
  EXPECT_EQ(decide(*idle, empty).admit, (Ids{4}));
  auto every = make_sglang_scheduler(sgl(8192));
  EXPECT_EQ(decide(*every, inst).admit, (Ids{2}));
}

// ---- versions and defaults ----

TEST(EngineVersions, ARequestedVersionTakesTheDefaultsOfTheNewestKnownOneNotNewer) {
  const std::vector<std::string> known = {"0.5.1", "0.5.4"};
  EXPECT_EQ(resolve_engine_version(known, "0.5.6.post2", "engine.version"), "0.5.4");
  EXPECT_EQ(resolve_engine_version(known, "0.5.1.post1", "engine.version"), "0.5.1");
  EXPECT_EQ(resolve_engine_version(known, "0.5.3", "engine.version"), "0.5.1");
  EXPECT_EQ(resolve_engine_version(known, "", "engine.version"), "0.5.4");
  EXPECT_EQ(resolve_engine_version({"1.0.0", "1.1.0"}, "1.0.0rc3", "engine.version"), "1.0.0");
  EXPECT_THROW(resolve_engine_version(known, "0.4.9", "engine.version"), ConfigError);
  EXPECT_THROW(resolve_engine_version(known, "gpt-oss-dev", "engine.version"), ConfigError);
}

// A measured run's release always maps to a known one: as resolve_engine_version() where it
// can; a development build's name to the newest known, a release older than all to the oldest,
// each with a note saying so.
TEST(EngineVersions, AStandInCoversReleasesThatCannotBeResolved) {
  const std::vector<std::string> known = {"0.5.1", "0.5.4"};
  const StandInVersion resolved = stand_in_engine_version(known, "0.5.6.post2");
  EXPECT_EQ(resolved.version, "0.5.4");
  EXPECT_TRUE(resolved.note.empty()) << resolved.note;
  const StandInVersion dev = stand_in_engine_version(known, "gpt-oss-dev");
  EXPECT_EQ(dev.version, "0.5.4");
  EXPECT_EQ(dev.note,
            "engine version \"gpt-oss-dev\" is not a dotted release: the defaults of "
            "0.5.4, the newest servesim knows, stand in");
  const StandInVersion old = stand_in_engine_version(known, "0.4.9");
  EXPECT_EQ(old.version, "0.5.1");
  EXPECT_EQ(old.note,
            "engine version 0.4.9 is older than every release servesim knows: the "
            "defaults of 0.5.1, the oldest, stand in");
}

class EngineDefaults : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { register_builtin_policies(); }
  const models::GpuCatalog gpus = models::GpuCatalog::load("models/catalog/gpus.json");
  const models::ModelCatalog models = models::ModelCatalog::load("models/catalog/models");

  EngineSetup build(const std::string& engine, const std::string& version, const std::string& gpu,
                    int tp) {
    const EngineModelEntry& e = engine_models().get(engine);
    EngineTarget t;
    t.gpu = &gpus.get(gpu);
    t.model = &models.get("llama-3.1-8b");
    t.tp = tp;
    return e.build(version, ParamValues::defaults(engine_schema(e, version)), t);
  }
};

TEST_F(EngineDefaults, VllmBudgetsFollowTheGpuMemory) {
  const EngineSetup h100 = build("vllm", "0.12.0", "h100_sxm", 1);
  EXPECT_EQ(h100.resolved.get_int("max_num_batched_tokens"), 8192);
  EXPECT_EQ(h100.resolved.get_int("max_num_seqs"), 1024);
  EXPECT_EQ(h100.runtime.graphs.max_size(), 512);
  EXPECT_FALSE(h100.runtime.cpu.overlapped);
  const EngineSetup a100 = build("vllm", "0.12.0", "a100_80gb_sxm", 1);
  EXPECT_EQ(a100.resolved.get_int("max_num_batched_tokens"), 2048);
  EXPECT_EQ(a100.resolved.get_int("max_num_seqs"), 256);
}

TEST_F(EngineDefaults, SglangMemFractionFollowsItsVersionsRule) {
  // Up to 0.5.3 a table by TP degree; from 0.5.4 1 - reserved / HBM.
  EXPECT_DOUBLE_EQ(build("sglang", "0.5.1", "h100_sxm", 1).memory.gpu_memory_utilization, 0.88);
  EXPECT_DOUBLE_EQ(build("sglang", "0.5.1", "h100_sxm", 4).memory.gpu_memory_utilization, 0.85);
  // H100 (81559 MiB as the catalog holds 80 GiB: 81920 MiB), TP 1: reserved = 512 + 8192 x 1.5
  // + 256 x 2 + 1024 / 8 = 13440 MiB.
  const EngineSetup s = build("sglang", "0.5.4", "h100_sxm", 1);
  EXPECT_NEAR(s.memory.gpu_memory_utilization, 1 - 13440.0 / 81920.0, 1e-3);
  EXPECT_EQ(s.memory.rule, models::KvPoolRule::kStaticFraction);
  EXPECT_EQ(s.memory.block_size, 1);
  EXPECT_TRUE(s.runtime.cpu.overlapped);
}

TEST_F(EngineDefaults, SglangMixesChunksOnlyWithChunkedPrefill) {
  // scheduler.py: is_mixed_chunk = chunked_prefill_size is not None and enable_mixed_chunk, where
  // -1 (no chunking) became None.
  auto mixed = [&](int64_t chunk) {
    const EngineModelEntry& e = engine_models().get("sglang");
    ParamValues knobs = ParamValues::defaults(e.schema);
    knobs.set("enable_mixed_chunk", true);
    knobs.set("chunked_prefill_size", chunk);
    EngineTarget t;
    t.gpu = &gpus.get("h100_sxm");
    t.model = &models.get("llama-3.1-8b");
    t.tp = 1;
    return e.build("0.5.1", knobs, t).resolved.get_bool("enable_mixed_chunk");
  };
  EXPECT_TRUE(mixed(0));     // the version's default chunk (8192)
  EXPECT_TRUE(mixed(4096));
  EXPECT_FALSE(mixed(-1));
}

TEST_F(EngineDefaults, TrtllmPadsOnlyWhenAskedAndOverlapsTheCpu) {
  const EngineSetup s = build("trtllm", "1.0.0", "h100_sxm", 1);
  EXPECT_EQ(s.memory.rule, models::KvPoolRule::kFreeFraction);
  EXPECT_EQ(s.memory.block_size, 32);
  EXPECT_FALSE(s.runtime.graphs.pad_decode);
  EXPECT_EQ(s.runtime.graphs.max_size(), 128);
  EXPECT_EQ(s.max_prompt_tokens, 8192);  // no chunking: a prompt must fit max_num_tokens
  EXPECT_TRUE(s.runtime.cpu.overlapped);
}

// vLLM 0.14 schedules asynchronously by default: its CPU work overlaps the GPU's; 0.12 serial.
TEST_F(EngineDefaults, VllmSchedulesAsynchronouslyFrom014) {
  EXPECT_FALSE(build("vllm", "0.12.0", "h100_sxm", 1).runtime.cpu.overlapped);
  EXPECT_TRUE(build("vllm", "0.14.0", "h100_sxm", 1).runtime.cpu.overlapped);
  const EngineModelEntry& e = engine_models().get("vllm");
  EXPECT_EQ(resolve_engine_version(e.versions, "0.18.0", "engine.version"), "0.14.0");
  EXPECT_EQ(resolve_engine_version(e.versions, "0.13.0", "engine.version"), "0.12.0");
  // Turned off explicitly, as --no-async-scheduling does.
  ParamValues knobs = ParamValues::defaults(engine_schema(e, "0.14.0"));
  EXPECT_TRUE(knobs.get_bool("async_scheduling"));
  knobs.set("async_scheduling", false);
  EngineTarget t;
  t.gpu = &gpus.get("h100_sxm");
  t.model = &models.get("llama-3.1-8b");
  EXPECT_FALSE(e.build("0.14.0", knobs, t).runtime.cpu.overlapped);
  EXPECT_TRUE(version_at_least("0.15.1", "0.14.0"));
  EXPECT_FALSE(version_at_least("0.12.0", "0.14.0"));
}

TEST_F(EngineDefaults, WithoutACalibrationTheCpuCostIsZeroAndSaidSo) {
  const EngineSetup s = build("vllm", "0.12.0", "h100_sxm", 1);
  EXPECT_EQ(s.runtime.cpu.per_iteration.count(), 0);
  EXPECT_TRUE(s.runtime.gpu_scale.identity());
  EXPECT_NE(s.calibration_note.find("no calibration"), std::string::npos);
}

TEST_F(EngineDefaults, AnExplicitGpuScaleOverridesTheCalibrationAndIsRangeChecked) {
  const EngineModelEntry& e = engine_models().get("sglang");
  EngineTarget t;
  t.gpu = &gpus.get("h100_sxm");
  t.model = &models.get("llama-3.1-8b");
  ParamValues knobs = ParamValues::defaults(e.schema);
  knobs.set("gpu_prefill_scale", 0.5);
  const EngineSetup s = e.build("0.5.4", knobs, t);
  EXPECT_DOUBLE_EQ(s.runtime.gpu_scale.prefill, 0.5);
  EXPECT_DOUBLE_EQ(s.runtime.gpu_scale.decode, 1.0);  // uncalibrated: the tables' time
  EXPECT_NE(s.calibration_note.find("set explicitly"), std::string::npos);
  knobs.set("gpu_prefill_scale", 0.01);
  try {
    e.build("0.5.4", knobs, t);
    FAIL() << "accepted a GPU scale of 0.01";
  } catch (const ConfigError& err) {
    ASSERT_FALSE(err.issues().empty());
    EXPECT_EQ(err.issues().front().path, "engine.gpu_prefill_scale");
  }
}

// A MoE model takes its engine's MoE kernel calibration of the GPU class and expert weight format,
// and says so; another format, a dense model or an explicit knob do not take it.
TEST_F(EngineDefaults, MoeKernelCalibrationAppliesToItsEngineClassAndFormatOnly) {
  models::EngineCalibrations cal;
  models::MoeKernelCalibration k;
  k.scale = 0.6;
  k.fitted_on = "39 aggregated MoE rows of 2 models";
  cal.set_moe("sglang", "hopper", "fp8_block", k);
  const EngineModelEntry& e = engine_models().get("sglang");
  EngineTarget t;
  t.gpu = &gpus.get("h200_sxm");
  t.model = &models.get("deepseek-v3");
  t.weight_dtype = models::Dtype::kFp8Block;
  t.calibrations = &cal;
  ParamValues knobs = ParamValues::defaults(e.schema);
  const EngineSetup s = e.build("0.5.9", knobs, t);
  EXPECT_DOUBLE_EQ(s.moe_kernel_scale, 0.6) << s.calibration_note;
  EXPECT_NE(s.calibration_note.find("MoE kernels x0.6 of the tables (sglang on hopper GPUs, "
                                    "fp8_block experts; fitted on 39 aggregated MoE rows"),
            std::string::npos)
      << s.calibration_note;
  t.weight_dtype = models::Dtype::kFp8;
  EXPECT_DOUBLE_EQ(e.build("0.5.9", knobs, t).moe_kernel_scale, 1.0);
  t.weight_dtype = models::Dtype::kFp8Block;
  t.model = &models.get("llama-3.1-8b");
  EXPECT_DOUBLE_EQ(e.build("0.5.9", knobs, t).moe_kernel_scale, 1.0);
  t.model = &models.get("deepseek-v3");
  knobs.set("moe_kernel_scale", 1.2);
  const EngineSetup by_hand = e.build("0.5.9", knobs, t);
  EXPECT_DOUBLE_EQ(by_hand.moe_kernel_scale, 1.2);
  EXPECT_NE(by_hand.calibration_note.find("MoE kernels x1.2 of the tables, set explicitly"),
            std::string::npos)
      << by_hand.calibration_note;
  EXPECT_EQ(by_hand.calibration_note.find("x0.6"), std::string::npos) << by_hand.calibration_note;
}

// engine.kernel_tables: TensorRT-LLM and SGLang price their layers from their own operator tables
// only when asked; vLLM has no such knob (its tables are the generic ones).
TEST_F(EngineDefaults, OwnKernelTablesOnlyWhenAsked) {
  EngineTarget t;
  t.gpu = &gpus.get("h200_sxm");
  t.model = &models.get("llama-3.1-8b");
  for (const std::string engine : {"trtllm", "sglang"}) {
    SCOPED_TRACE(engine);
    const EngineModelEntry& e = engine_models().get(engine);
    ParamValues knobs = ParamValues::defaults(e.schema);
    EXPECT_EQ(knobs.get_string("kernel_tables"), "generic");
    EXPECT_EQ(e.build(e.versions.back(), knobs, t).kernel_tables, "");
    knobs.set("kernel_tables", std::string("engine"));
    EXPECT_EQ(e.build(e.versions.back(), knobs, t).kernel_tables, engine);
  }
  for (const ParamSpec& knob : engine_models().get("vllm").schema) {
    EXPECT_NE(knob.name, "kernel_tables");
  }
}

// Each engine is told to run speculative decoding in its own spelling.
TEST(SpeculativeFlags, EachEngineSpellsTheDrafterItsOwnWay) {
  models::SpeculativeDecoding mtp;
  mtp.num_speculative_tokens = 3;
  mtp.acceptance = {0.8, 0.6, 0.4};
  EXPECT_EQ(speculative_launch_flags("vllm", mtp),
            R"(--speculative-config '{"method": "mtp", "num_speculative_tokens": 3}')");
  EXPECT_EQ(speculative_launch_flags("sglang", mtp),
            "--speculative-algorithm NEXTN --speculative-num-steps 3 --speculative-eagle-topk 1 "
            "--speculative-num-draft-tokens 4");
  EXPECT_EQ(speculative_launch_flags("trtllm", mtp),
            "speculative_config: {decoding_type: MTP, num_nextn_predict_layers: 3}");
  models::SpeculativeDecoding eagle = mtp;
  eagle.method = models::SpeculativeMethod::kEagle3;
  EXPECT_NE(speculative_launch_flags("vllm", eagle).find(R"("method": "eagle3")"),
            std::string::npos);
  EXPECT_NE(speculative_launch_flags("sglang", eagle).find("--speculative-algorithm EAGLE3"),
            std::string::npos);
  EXPECT_NE(
      speculative_launch_flags("trtllm", eagle).find("decoding_type: Eagle3, max_draft_len: 3"),
      std::string::npos);
  EXPECT_THROW(speculative_launch_flags("tgi", mtp), std::invalid_argument);
}

}  // namespace
}  // namespace servesim::policies
