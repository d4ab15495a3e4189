// The serving-engine runtime on top of a GPU cost model (CUDA-graph padding, per-iteration CPU
// cost, overlap), the engines' KV-pool rules, and the calibration file.
#include "models/cost/serving_engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "models/calibration/engine_calibration.h"
#include "models/cost/memory_model.h"
#include "core/error.h"

namespace servesim::models {
namespace {

const GpuCatalog& gpus() {
  static const GpuCatalog c = GpuCatalog::load("models/catalog/gpus.json");
  return c;
}
const ModelCatalog& catalog() {
  static const ModelCatalog c = ModelCatalog::load("models/catalog/models");
  return c;
}

Deployment llama8b_h100() {
  return {&catalog().get("llama-3.1-8b"), &gpus().get("h100_sxm"), 1, Dtype::kBf16, Dtype::kBf16};
}

std::shared_ptr<const IterationCostModel> gpu_model() {
  RooflineParams p;
  p.iteration_overhead = Duration{0};
  return make_roofline_cost_model(llama8b_h100(), p);
}

BatchShape decodes(int n, int64_t context) {
  BatchShape s;
  for (int i = 0; i < n; ++i) s.segments.push_back({1, context, 1});
  return s;
}

TEST(CudaGraphSpec, PadsToTheSmallestCapturedSizeUpToTheLargest) {
  CudaGraphSpec g;
  g.capture_sizes = {1, 2, 4, 8};
  EXPECT_EQ(g.padded(3, true), 4);
  EXPECT_EQ(g.padded(8, true), 8);
  EXPECT_EQ(g.padded(9, true), 9);   // above the largest: eager, unpadded
  EXPECT_EQ(g.padded(3, false), 3);  // mixed batches only with pad_mixed
  g.pad_mixed = true;
  EXPECT_EQ(g.padded(5, false), 8);
}

// Graphs captured at 1, 2, 4 and 8; CPU 500 us + 10 us per request + 1 us per token.
EngineRuntime padded_runtime() {
  EngineRuntime rt;
  rt.name = "test";
  rt.graphs.capture_sizes = {1, 2, 4, 8};
  rt.cpu.per_iteration = std::chrono::microseconds(500);
  rt.cpu.per_request_ns = 10'000;
  rt.cpu.per_token_ns = 1'000;
  return rt;
}

TEST(EngineCostModel, APaddedDecodeBatchCostsItsCapturedSizeAndTheCpuIsAdded) {
  const EngineRuntime rt = padded_runtime();
  const auto inner = gpu_model();
  const auto engine = make_engine_cost_model(inner, rt);
  BatchShape five = decodes(5, 1000);
  BatchShape padded = five;
  for (int i = 0; i < 3; ++i) padded.segments.push_back({1, 1, 0});
  const Duration cpu = std::chrono::microseconds(500 + 5 * 10 + 5 * 1);
  EXPECT_EQ(engine->iteration_time(five), inner->iteration_time(padded) + cpu);
  EXPECT_EQ(engine->breakdown(five).overhead, cpu);
  // Unpadded above the largest captured size.
  const BatchShape nine = decodes(9, 1000);
  EXPECT_EQ(engine->iteration_time(nine),
            inner->iteration_time(nine) + std::chrono::microseconds(500 + 90 + 9));
}

TEST(EngineCostModel, AnOverlapSchedulerHidesTheCpuBehindTheGpu) {
  EngineRuntime rt;
  rt.cpu.overlapped = true;
  rt.cpu.per_iteration = std::chrono::milliseconds(1);
  const auto inner = gpu_model();
  const auto engine = make_engine_cost_model(inner, rt);
  BatchShape big;
  big.segments = {{4096, 4096, 1}};
  EXPECT_EQ(engine->iteration_time(big), inner->iteration_time(big));  // GPU-bound
  rt.cpu.per_iteration = std::chrono::seconds(1);
  EXPECT_EQ(make_engine_cost_model(inner, rt)->iteration_time(big), std::chrono::seconds(1));
}

// With attention-DP ranks each rank's scheduler handles its own requests in parallel with the
// others: the pass's CPU cost is the busiest rank's, ceil(9 / 4) = 3 requests and tokens.
TEST(EngineCostModel, AttentionDpRanksScheduleTheirOwnRequests) {
  EngineRuntime rt = padded_runtime();
  rt.scheduler_ranks = 4;
  const auto inner = gpu_model();
  const auto engine = make_engine_cost_model(inner, rt);
  const BatchShape nine = decodes(9, 1000);
  const Duration cpu = std::chrono::microseconds(500 + 3 * 10 + 3 * 1);
  EXPECT_EQ(engine->iteration_time(nine), inner->iteration_time(nine) + cpu);
  EXPECT_EQ(engine->breakdown(nine).overhead, cpu);
  const std::optional<Duration> from_sums = engine->decode_iteration_time({9, 9 * 1000, 9});
  ASSERT_TRUE(from_sums.has_value());
  EXPECT_EQ(*from_sums, engine->iteration_time(nine));
  EXPECT_NE(engine->describe().find("(each of 4 rank schedulers)"), std::string::npos)
      << engine->describe();
  rt.scheduler_ranks = 0;
  EXPECT_THROW(make_engine_cost_model(inner, rt), std::invalid_argument);
}

// A pass that is not one captured graph takes at least the launch of its layers (32 x 400 us =
// 12.8 ms here), alongside its GPU work; a captured decode batch does not. A decode batch above
// the largest graph, or of an uncaptured size without padding, is launched layer by layer too.
TEST(EngineCostModel, APassOutsideACudaGraphLastsAtLeastTheLaunchOfItsLayers) {
  EngineRuntime rt;
  rt.graphs.capture_sizes = {1, 2, 4, 8};
  rt.cpu.launch_per_layer_ns = 400'000;
  rt.layers = 32;
  const Duration launch = std::chrono::microseconds(12'800);
  const auto inner = gpu_model();
  const auto engine = make_engine_cost_model(inner, rt);
  BatchShape prompt;
  prompt.segments = {{16, 16, 1}};
  ASSERT_LT(inner->iteration_time(prompt), launch);
  EXPECT_EQ(engine->iteration_time(prompt), launch);
  EXPECT_EQ(engine->breakdown(prompt).overhead, launch - inner->iteration_time(prompt));
  BatchShape big;
  big.segments = {{4096, 4096, 1}};
  ASSERT_GT(inner->iteration_time(big), launch);
  EXPECT_EQ(engine->iteration_time(big), inner->iteration_time(big));  // GPU-bound
  const BatchShape four = decodes(4, 1000);
  EXPECT_EQ(engine->iteration_time(four), inner->iteration_time(four));  // a captured graph
  EXPECT_EQ(engine->iteration_time(decodes(9, 1000)), launch);           // above the largest
  rt.graphs.pad_decode = false;
  const auto unpadded = make_engine_cost_model(inner, rt);
  EXPECT_EQ(unpadded->iteration_time(four), inner->iteration_time(four));  // captured size
  EXPECT_EQ(unpadded->iteration_time(decodes(3, 1000)), launch);           // no graph of 3
  const std::optional<Duration> three = unpadded->decode_iteration_time({3, 3 * 1000, 3});
  ASSERT_TRUE(three.has_value());
  EXPECT_EQ(*three, launch);
  EXPECT_NE(engine->describe().find("launched in 400 us x 32 layers"), std::string::npos)
      << engine->describe();
  rt.layers = -1;
  EXPECT_THROW(make_engine_cost_model(inner, rt), std::invalid_argument);
}

TEST(EngineCostModel, RejectsUnsortedCaptureSizesAndNegativeCosts) {
  EngineRuntime rt;
  rt.graphs.capture_sizes = {4, 2};
  EXPECT_THROW(make_engine_cost_model(gpu_model(), rt), std::invalid_argument);
  rt.graphs.capture_sizes = {};
  rt.cpu.per_token_ns = -1;
  EXPECT_THROW(make_engine_cost_model(gpu_model(), rt), std::invalid_argument);
}

// A decode pass priced from its sums (steady decode) pads, scales and adds the CPU exactly as the
// pass priced from its segments, in both CPU modes, padded or not.
TEST(EngineCostModel, ADecodePassFromItsSumsCostsWhatItsShapeCosts) {
  for (const bool overlapped : {false, true}) {
    EngineRuntime rt = padded_runtime();
    rt.cpu.overlapped = overlapped;
    rt.gpu_scale.decode = 0.8;
    const auto engine = make_engine_cost_model(gpu_model(), rt);
    for (const int n : {1, 5, 8, 9}) {
      BatchShape shape;
      int64_t context = 0;
      for (int i = 0; i < n; ++i) {
        shape.segments.push_back({1, 700 + 37 * i, 1});
        context += 700 + 37 * i;
      }
      const std::optional<Duration> from_sums = engine->decode_iteration_time({n, context, n});
      ASSERT_TRUE(from_sums.has_value());
      EXPECT_EQ(*from_sums, engine->iteration_time(shape)) << n << " overlapped " << overlapped;
    }
  }
}

// A pass of decode steps given by their sums and listed segments (a prompt chunk, or decode steps
// that do not sample) costs what the whole shape costs: padded (mixed batches too, where the
// engine pads them), scaled by its prompt tokens, with the CPU of every request.
TEST(EngineCostModel, AMixedPassFromItsSumsCostsWhatItsShapeCosts) {
  for (const bool overlapped : {false, true}) {
    for (const bool pad_mixed : {false, true}) {
      EngineRuntime rt = padded_runtime();
      rt.cpu.overlapped = overlapped;
      rt.graphs.pad_mixed = pad_mixed;
      rt.gpu_scale.decode = 0.8;
      rt.gpu_scale.prefill = 0.6;
      const auto engine = make_engine_cost_model(gpu_model(), rt);
      for (const int n : {1, 2, 5}) {
        for (const BatchShape& rest : {decodes(1, 90), BatchShape{{{3, 40, 1}}, {}}}) {
          BatchShape whole;
          int64_t context = 0;
          for (int i = 0; i < n; ++i) {
            whole.segments.push_back({1, 700 + 37 * i, 1});
            context += 700 + 37 * i;
          }
          whole.segments.insert(whole.segments.end(), rest.segments.begin(), rest.segments.end());
          const std::optional<Duration> from_sums =
              engine->mixed_iteration_time({n, context, n}, rest);
          ASSERT_TRUE(from_sums.has_value());
          EXPECT_EQ(*from_sums, engine->iteration_time(whole))
              << n << " overlapped " << overlapped << " pad_mixed " << pad_mixed;
        }
      }
    }
  }
}

TEST(GpuTimeScale, DecodePassesTakeTheDecodeFactorAndPrefillBlendsTowardThePrefillFactor) {
  GpuTimeScale scale;
  scale.decode = 0.8;
  scale.prefill = 0.5;
  EXPECT_DOUBLE_EQ(scale.factor(0), 0.8);
  EXPECT_DOUBLE_EQ(scale.factor(512), 0.65);  // halfway at kBlendTokens prefill tokens
  EXPECT_NEAR(scale.factor(1'000'000), 0.5, 1e-3);

  EngineRuntime rt;
  rt.gpu_scale = scale;
  const auto inner = gpu_model();
  const auto engine = make_engine_cost_model(inner, rt);
  const BatchShape decode = decodes(8, 1000);
  EXPECT_EQ(engine->iteration_time(decode),
            Duration{std::llround(0.8 * static_cast<double>(inner->iteration_time(decode).count()))});
  BatchShape mixed = decodes(8, 1000);
  mixed.segments.push_back({512, 512, 1});  // 512 prefill tokens: factor 0.65
  EXPECT_EQ(engine->iteration_time(mixed),
            Duration{std::llround(0.65 * static_cast<double>(inner->iteration_time(mixed).count()))});
  // The breakdown scales every class alike, so it still sums to the iteration time (within the
  // rounding of each class).
  EXPECT_NEAR(static_cast<double>(engine->breakdown(mixed).total().count()),
              static_cast<double>(engine->iteration_time(mixed).count()), 10);

  rt.gpu_scale.prefill = 0;
  EXPECT_THROW(make_engine_cost_model(inner, rt), std::invalid_argument);
  rt.gpu_scale.prefill = 25;
  EXPECT_THROW(make_engine_cost_model(inner, rt), std::invalid_argument);
}

TEST(GpuClass, FromTheArchitecture) {
  EXPECT_EQ(gpu_class(gpus().get("h100_sxm")), "hopper");
  EXPECT_EQ(gpu_class(gpus().get("h200_sxm")), "hopper");
  EXPECT_EQ(gpu_class(gpus().get("a100_80gb_sxm")), "ampere");
  EXPECT_EQ(gpu_class(gpus().get("b200_sxm")), "blackwell");
}

TEST(KvPoolRule, EachEngineSizesItsPoolAsItDoesItself) {
  MemoryParams p;
  p.gpu_memory_utilization = 0.9;
  const MemoryPlan vllm = plan_memory(llama8b_h100(), p);
  EXPECT_EQ(vllm.kv_pool_bytes_per_gpu, vllm.usable_bytes - vllm.weight_bytes_per_gpu -
                                            vllm.activation_reserve_bytes -
                                            vllm.runtime_overhead_bytes);
  p.rule = KvPoolRule::kStaticFraction;
  const MemoryPlan sglang = plan_memory(llama8b_h100(), p);
  EXPECT_EQ(sglang.kv_pool_bytes_per_gpu,
            sglang.usable_bytes - sglang.weight_bytes_per_gpu - sglang.runtime_overhead_bytes);
  p.rule = KvPoolRule::kFreeFraction;
  const MemoryPlan trt = plan_memory(llama8b_h100(), p);
  const int64_t free = trt.gpu_memory_bytes - trt.weight_bytes_per_gpu -
                       trt.runtime_overhead_bytes - trt.activation_reserve_bytes;
  EXPECT_EQ(trt.kv_pool_bytes_per_gpu, std::llround(0.9 * static_cast<double>(free)));
  // SGLang's activations live outside its fraction: at the same fraction it holds the most KV.
  EXPECT_GT(sglang.num_blocks, vllm.num_blocks);
}

TEST(EngineCalibrations, WriteThenLoadRoundTripsAndBadFieldsNameTheirPath) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "servesim_calibration_test.json").string();
  EngineCalibrations c;
  EngineCalibration e;
  e.cpu.per_iteration = std::chrono::microseconds(1500);
  e.cpu.per_request_ns = 12'500;
  e.cpu.per_token_ns = 250;
  e.frontend_request_us = 800;
  e.frontend_token_us = 0.4;
  e.gpu_scale.prefill = 0.6;
  e.gpu_scale.decode = 1.1;
  e.fitted_on = "test rows";
  e.held_out = HeldOutError{100, 2, 0.12, 0.4, 0.05, 0.2, 0.8};
  c.set("vllm", "hopper", e);
  c.write(path);
  const EngineCalibrations back = EngineCalibrations::load(path);
  const EngineCalibration* r = back.find("vllm", "hopper");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->cpu.per_iteration, std::chrono::microseconds(1500));
  EXPECT_DOUBLE_EQ(r->cpu.per_request_ns, 12'500);
  EXPECT_DOUBLE_EQ(r->frontend_token_us, 0.4);
  EXPECT_DOUBLE_EQ(r->gpu_scale.prefill, 0.6);
  EXPECT_DOUBLE_EQ(r->gpu_scale.decode, 1.1);
  ASSERT_TRUE(r->held_out.has_value());
  EXPECT_DOUBLE_EQ(r->held_out->ttft_mdape, 0.12);
  EXPECT_EQ(back.find("vllm", "ampere"), nullptr);

  std::ofstream(path) << R"({"format": "servesim-engine-calibration", "engines": {"vllm":
      {"hopper": {"cpu_iteration_us": -1, "cpu_request_us": 1, "cpu_token_us": 1,
                  "frontend_request_us": 1, "frontend_token_us": 1}}}})";
  try {
    EngineCalibrations::load(path);
    FAIL() << "expected an InputError";
  } catch (const InputError& err) {
    EXPECT_NE(err.message().find("engines.vllm.hopper.cpu_iteration_us"), std::string::npos)
        << err.what();
  }
  std::ofstream(path) << R"({"format": "servesim-engine-calibration", "engines": {"vllm":
      {"hopper": {"cpu_iteration_us": 1, "cpu_request_us": 1, "cpu_token_us": 1,
                  "frontend_request_us": 1, "frontend_token_us": 1, "gpu_prefill_scale": 40}}}})";
  try {
    EngineCalibrations::load(path);
    FAIL() << "expected an InputError for a scale out of range";
  } catch (const InputError& err) {
    EXPECT_NE(err.message().find("engines.vllm.hopper.gpu_prefill_scale"), std::string::npos)
        << err.what();
  }
  EXPECT_TRUE(EngineCalibrations::load(path + ".missing").all().empty());
  std::remove(path.c_str());
}

TEST(EngineCalibrations, MoeKernelScalesRoundTripApartFromTheClassCalibrations) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "servesim_moe_calibration_test.json").string();
  EngineCalibrations c;
  MoeKernelCalibration k;
  k.scale = 0.62;
  k.fitted_on = "39 rows";
  k.held_out = HeldOutError{39, 2, 0.3, 0.9, 0.1, 0.2, 0.4};
  c.set_moe("sglang", "hopper", "fp8_block", k);
  c.write(path);
  const EngineCalibrations back = EngineCalibrations::load(path);
  const MoeKernelCalibration* r = back.find_moe("sglang", "hopper", "fp8_block");
  ASSERT_NE(r, nullptr);
  EXPECT_DOUBLE_EQ(r->scale, 0.62);
  EXPECT_EQ(r->fitted_on, "39 rows");
  ASSERT_TRUE(r->held_out.has_value());
  EXPECT_DOUBLE_EQ(r->held_out->tpot_mdape, 0.1);
  // A MoE kernel scale is no calibration of the class's CPU costs, nor of another format.
  EXPECT_EQ(back.find("sglang", "hopper"), nullptr);
  EXPECT_EQ(back.find_moe("sglang", "hopper", "fp8"), nullptr);

  std::ofstream(path) << R"({"format": "servesim-engine-calibration", "engines": {},
      "moe_kernels": {"sglang": {"hopper": {"fp8_block": {"fitted_on": "x"}}}}})";
  try {
    EngineCalibrations::load(path);
    FAIL() << "expected an InputError for a missing scale";
  } catch (const InputError& err) {
    EXPECT_NE(err.message().find("moe_kernels.sglang.hopper.fp8_block.scale: missing"),
              std::string::npos)
        << err.what();
  }
  std::ofstream(path) << R"({"format": "servesim-engine-calibration", "engines": {},
      "moe_kernels": {"sglang": {"hopper": {"fp8_block": {"scale": 0.01}}}}})";
  EXPECT_THROW(EngineCalibrations::load(path), InputError);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace servesim::models
