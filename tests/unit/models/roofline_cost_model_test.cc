#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "models/cost/cost_model.h"
#include "models/catalog/hardware.h"
#include "core/error.h"
#include "tests/unit/models/catalog_fixture.h"

namespace servesim::models {
namespace {

// H100 SXM achievable rates with default params: measured matmul peak and 80 % of DRAM bandwidth.
constexpr double kH100Flops = 794.5e12;
constexpr double kH100Bytes = 3.35e12 * 0.8;
constexpr double kLaunchS = 2e-6;
constexpr double kOverheadS = 2e-3;

class RooflineTest : public CatalogFixture {
 protected:
  static std::unique_ptr<IterationCostModel> make(const std::string& model, const std::string& gpu,
                                                  int tp, Dtype weights = Dtype::kBf16,
                                                  Dtype kv = Dtype::kBf16,
                                                  const RooflineParams& params = {}) {
    Deployment d;
    d.model = &models_->get(model);
    d.gpu = &gpus_->get(gpu);
    d.tp = tp;
    d.weight_dtype = weights;
    d.kv_dtype = kv;
    return make_roofline_cost_model(d, params);
  }

  static BatchShape decodes(int64_t batch, int64_t context) {
    BatchShape shape;
    for (int64_t i = 0; i < batch; ++i) {
      shape.segments.push_back({1, context, 1});
    }
    return shape;
  }

  static BatchShape prefill(int64_t tokens) {
    BatchShape shape;
    shape.segments.push_back({tokens, tokens, 1});
    return shape;
  }

  static double seconds(Duration d) { return to_seconds(d); }
};

TEST_F(RooflineTest, SingleDecodeIsWeightStreamingPlusOverhead) {
  const auto cm = make("llama-3.1-8b", "h100_sxm", 1);
  const ModelSpec& m = models_->get("llama-3.1-8b");
  const double expected = static_cast<double>(m.weights_bytes_16bit) / kH100Bytes + kOverheadS;
  const double got = seconds(cm->iteration_time(decodes(1, 1000)));
  EXPECT_NEAR(got / expected, 1.0, 0.10) << got << " vs " << expected;
}

TEST_F(RooflineTest, DecodeAttentionAndLmHeadHandComputed) {
  const auto cm = make("llama-3.1-8b", "h100_sxm", 1);
  const OperatorTimes t = cm->breakdown(decodes(1, 1000));
  // KV of 1000 attended tokens read + 1 written, Q read + O written; memory-bound.
  const double kv_bytes = 1001.0 * 2 * 8 * 128 * 2;
  const double q_o_bytes = 2.0 * 32 * 128 * 2;
  const double attention = 32 * ((kv_bytes + q_o_bytes) / kH100Bytes + kLaunchS);
  EXPECT_NEAR(static_cast<double>(t.attention_decode.count()), attention * 1e9, 2);
  EXPECT_EQ(t.attention_prefill.count(), 0);
  EXPECT_EQ(t.allreduce.count(), 0);
  // LM head over one row: streams the 128256 x 4096 16-bit matrix once.
  const double lm = (128256.0 * 4096 * 2 + 4096 * 2 + 128256 * 2) / kH100Bytes + kLaunchS;
  EXPECT_NEAR(static_cast<double>(t.lm_head.count()), lm * 1e9, 2);
  EXPECT_EQ(t.overhead, Duration{2'000'000});
  EXPECT_EQ(t.total(), cm->iteration_time(decodes(1, 1000)));
}

TEST_F(RooflineTest, PrefillGemmsAreComputeBoundHandComputed) {
  const auto cm = make("llama-3.1-8b", "h100_sxm", 1);
  const OperatorTimes t = cm->breakdown(prefill(1024));
  const double m = 1024, h = 4096, i = 14336, layers = 32;
  const double mlp =
      layers * (2 * m * (2 * i) * h / kH100Flops + 2 * m * h * i / kH100Flops + 2 * kLaunchS);
  EXPECT_NEAR(static_cast<double>(t.mlp_gemm.count()), mlp * 1e9, 2);
  const double qkv = layers * (2 * m * (48 * 128) * h / kH100Flops + kLaunchS);
  EXPECT_NEAR(static_cast<double>(t.qkv_gemm.count()), qkv * 1e9, 2);
  // Causal attention over 1024 * 1025 / 2 key positions, compute-bound at this length.
  const double positions = 1024.0 * 1025 / 2;
  const double attention = layers * (4 * 128 * 32 * positions / kH100Flops + kLaunchS);
  EXPECT_NEAR(static_cast<double>(t.attention_prefill.count()), attention * 1e9, 2);
  EXPECT_EQ(t.attention_decode.count(), 0);
}

TEST_F(RooflineTest, PrefillMatchesTwoFlopsPerParameterPerToken) {
  const auto cm = make("llama-3.1-8b", "h100_sxm", 1);
  const ModelSpec& m = models_->get("llama-3.1-8b");
  const double expected = 2.0 * static_cast<double>(m.param_count) * 1024 / kH100Flops;
  const double got = seconds(cm->iteration_time(prefill(1024))) - kOverheadS;
  EXPECT_NEAR(got / expected, 1.0, 0.15) << got << " vs " << expected;
}

TEST_F(RooflineTest, MonotonicInTokensAndContext) {
  const auto cm = make("llama-3.1-8b", "h100_sxm", 1);
  Duration previous{0};
  for (int64_t q = 2; q <= 16384; q = q * 3 / 2 + 1) {
    const Duration t = cm->iteration_time(prefill(q));
    EXPECT_GT(t, previous) << "prefill " << q;
    previous = t;
  }
  previous = Duration{0};
  for (int64_t k = 1; k <= 200000; k = k * 2 + 7) {
    const Duration t = cm->iteration_time(decodes(8, k));
    EXPECT_GE(t, previous) << "context " << k;
    previous = t;
  }
  previous = Duration{0};
  for (int64_t b = 1; b <= 1024; b *= 2) {
    const Duration t = cm->iteration_time(decodes(b, 1024));
    EXPECT_GT(t, previous) << "batch " << b;
    previous = t;
  }
  // A chunk with a cached prefix costs more than the same chunk without one.
  BatchShape chunk;
  chunk.segments.push_back({512, 512 + 4096, 0});
  EXPECT_GT(cm->iteration_time(chunk), cm->iteration_time(prefill(512)));
}

TEST_F(RooflineTest, TensorParallelSpeedsUpBigPrefill) {
  const auto tp1 = make("llama-3.1-8b", "h100_sxm", 1);
  const auto tp2 = make("llama-3.1-8b", "h100_sxm", 2);
  const BatchShape shape = prefill(8192);
  EXPECT_LT(tp2->iteration_time(shape), tp1->iteration_time(shape));
  // Two ring all-reduces per layer of 8192 x 4096 16-bit elements over NVLink (450 GB/s x 0.7).
  const double bytes = 8192.0 * 4096 * 2;
  const double allreduce = 32 * 2 * (bytes * (2.0 * 1 / 2) / (450e9 * 0.7) + 8e-6);
  EXPECT_NEAR(static_cast<double>(tp2->breakdown(shape).allreduce.count()), allreduce * 1e9, 2);
}

TEST_F(RooflineTest, PcieCardsAllReduceOverPcieBeyondBridgedPairs) {
  const auto tp2 = make("llama-3.1-8b", "h100_pcie", 2);
  const auto tp4 = make("llama-3.1-8b", "h100_pcie", 4);
  const BatchShape shape = prefill(1024);
  const double bytes = 1024.0 * 4096 * 2;
  EXPECT_NEAR(static_cast<double>(tp2->breakdown(shape).allreduce.count()),
              32 * 2 * (bytes * 1.0 / (300e9 * 0.7) + 8e-6) * 1e9, 2);
  EXPECT_NEAR(static_cast<double>(tp4->breakdown(shape).allreduce.count()),
              32 * 2 * (bytes * 1.5 / (64e9 * 0.7) + 8e-6) * 1e9, 2);
}

TEST_F(RooflineTest, Fp8WeightsSpeedUpDecode) {
  const auto bf16 = make("llama-3.1-8b", "h100_sxm", 1);
  const auto fp8 = make("llama-3.1-8b", "h100_sxm", 1, Dtype::kFp8);
  const BatchShape shape = decodes(16, 2048);
  const Duration gemm_bf16 = bf16->breakdown(shape).mlp_gemm;
  const Duration gemm_fp8 = fp8->breakdown(shape).mlp_gemm;
  EXPECT_LT(fp8->iteration_time(shape), bf16->iteration_time(shape));
  EXPECT_NEAR(to_seconds(gemm_fp8) / to_seconds(gemm_bf16), 0.5, 0.05);
  // FP8 KV halves the KV bytes of long-context decode attention.
  const auto kv8 = make("llama-3.1-8b", "h100_sxm", 1, Dtype::kBf16, Dtype::kFp8);
  const BatchShape long_ctx = decodes(64, 32000);
  EXPECT_LT(kv8->iteration_time(long_ctx), bf16->iteration_time(long_ctx));
  EXPECT_NEAR(to_seconds(kv8->breakdown(long_ctx).attention_decode) /
                  to_seconds(bf16->breakdown(long_ctx).attention_decode),
              0.5, 0.05);
}

TEST_F(RooflineTest, MoeReadsOnlyTheRoutedExperts) {
  const auto cm = make("mixtral-8x7b", "h100_sxm", 2);
  // One token reads 2 of 8 experts; four tokens of top-2 routing reach 8 (1 - (3/4)^4) = 5.47 of
  // them on average, 64 tokens all 8 (the weights dominate; activations add a little).
  const double one = to_seconds(cm->breakdown(decodes(1, 100)).mlp_gemm);
  const double four = to_seconds(cm->breakdown(decodes(4, 100)).mlp_gemm);
  const double many = to_seconds(cm->breakdown(decodes(64, 100)).mlp_gemm);
  EXPECT_GT(four / one, 5.47 / 2 * 0.95);
  EXPECT_LT(four / one, 5.47 / 2 * 1.02);
  EXPECT_GT(many / four, 8 / 5.47 * 0.98);
  EXPECT_LT(many / four, 8 / 5.47 * 1.1);
}

TEST_F(RooflineTest, PeakBoundNeverExceedsIterationTime) {
  struct Case {
    const char* model;
    const char* gpu;
    int tp;
    Dtype weights;
    Dtype kv;
  };
  const std::vector<Case> cases = {
      {"llama-3.1-8b", "h100_sxm", 1, Dtype::kBf16, Dtype::kBf16},
      {"llama-3.1-70b", "h100_sxm", 4, Dtype::kFp8, Dtype::kFp8},
      {"mixtral-8x7b", "a100_80gb_sxm", 2, Dtype::kBf16, Dtype::kBf16},
      {"qwen2.5-1.5b", "rtx4090", 1, Dtype::kBf16, Dtype::kBf16},
      {"llama-3.1-8b", "a100_40gb_sxm", 16, Dtype::kFp8, Dtype::kBf16},
      {"opt-30b", "l40s", 8, Dtype::kBf16, Dtype::kBf16},
      {"llada-8b-instruct", "b200_sxm", 1, Dtype::kBf16, Dtype::kBf16},
  };
  std::mt19937_64 rng(20240601);
  std::uniform_int_distribution<int> batch_size(1, 64);
  std::uniform_int_distribution<int64_t> chunk(2, 4096);
  std::uniform_int_distribution<int64_t> cached(0, 16000);
  std::bernoulli_distribution is_decode(0.7);
  std::bernoulli_distribution last_chunk(0.5);
  for (const Case& c : cases) {
    const auto cm = make(c.model, c.gpu, c.tp, c.weights, c.kv);
    BatchShape shape;
    for (int trial = 0; trial < 500; ++trial) {
      shape.clear();
      const int n = batch_size(rng);
      for (int i = 0; i < n; ++i) {
        const int64_t q = is_decode(rng) ? 1 : chunk(rng);
        const int64_t logits = q == 1 || last_chunk(rng) ? 1 : 0;
        shape.segments.push_back({q, q + cached(rng), logits});
      }
      const Duration real = cm->iteration_time(shape);
      const Duration bound = cm->peak_bound_time(shape);
      ASSERT_LE(bound, real) << c.model << " on " << c.gpu << " trial " << trial;
      ASSERT_GT(bound.count(), 0);
      ASSERT_EQ(cm->breakdown(shape).total(), real);
    }
  }
}

TEST_F(RooflineTest, Describe) {
  EXPECT_EQ(make("llama-3.1-8b", "h100_sxm", 1)->describe(),
            "roofline llama-3.1-8b on h100_sxm tp1 bf16: 794 TFLOP/s, 2.68 TB/s achievable, "
            "overhead 2 ms");
  EXPECT_EQ(make("llama-3.1-70b", "a100_80gb_sxm", 4, Dtype::kFp8, Dtype::kBf16)->describe(),
            "roofline llama-3.1-70b on a100_80gb_sxm tp4 fp8 (kv bf16): 271 TFLOP/s, 1.63 TB/s "
            "achievable, overhead 2 ms");
  // No measured matmul rate for the RTX 4090: 75 % of its 165.2 TFLOPS.
  EXPECT_EQ(make("qwen2.5-1.5b", "rtx4090", 1)->describe(),
            "roofline qwen2.5-1.5b on rtx4090 tp1 bf16: 124 TFLOP/s, 0.81 TB/s achievable, "
            "overhead 2 ms");
}

TEST_F(RooflineTest, InvalidTensorParallelDegree) {
  try {
    make("llama-3.1-8b", "h100_sxm", 3);
    FAIL() << "expected CapacityError";
  } catch (const CapacityError& e) {
    EXPECT_STREQ(e.what(),
                 "llama-3.1-8b: tensor-parallel degree tp=3 does not divide num_attention_heads "
                 "(32); valid tp degrees: 1, 2, 4, 8, 16, 32");
  }
  try {
    make("qwen2.5-14b-instruct", "h100_sxm", 5);
    FAIL() << "expected CapacityError";
  } catch (const CapacityError& e) {
    EXPECT_STREQ(e.what(),
                 "qwen2.5-14b-instruct: tensor-parallel degree tp=5 does not divide "
                 "num_key_value_heads (8); valid tp degrees: 1, 2, 4, 8, 40");
  }
  EXPECT_THROW(make("llama-3.1-8b", "h100_sxm", 0), CapacityError);
  // More ranks than KV heads: KV heads are replicated, which is valid.
  EXPECT_NO_THROW(make("llama-3.1-8b", "h100_sxm", 16));
}

TEST_F(RooflineTest, RejectsBadInputs) {
  Deployment d;
  EXPECT_THROW(make_roofline_cost_model(d, {}), std::invalid_argument);
  RooflineParams bad;
  bad.memory_efficiency = 1.5;
  EXPECT_THROW(make("llama-3.1-8b", "h100_sxm", 1, Dtype::kBf16, Dtype::kBf16, bad),
               std::invalid_argument);
  const auto cm = make("llama-3.1-8b", "h100_sxm", 1);
  EXPECT_THROW(cm->iteration_time(BatchShape{}), std::invalid_argument);
  const std::vector<Segment> broken = {
      {10, 5, 1},                     // context shorter than the query
      {0, 5, 0},                      // no query token
      {-3, 5, 0},                     // negative query
      {1, -1, 1},                     // negative context
      {1, 100, -1},                   // negative logit rows
      {1, (int64_t{1} << 24) + 1, 1}  // context beyond the supported range
  };
  for (const Segment& seg : broken) {
    BatchShape shape = decodes(3, 100);
    shape.segments.push_back(seg);
    EXPECT_THROW(cm->iteration_time(shape), std::invalid_argument)
        << seg.query_tokens << " " << seg.context_tokens << " " << seg.logit_rows;
  }
  try {
    BatchShape shape;
    shape.segments.push_back({10, 5, 1});
    cm->iteration_time(shape);
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "malformed batch segment (query_tokens 10, context_tokens 5, logit_rows 1): need "
                 "1 <= query_tokens <= context_tokens <= 16777216 and logit_rows >= 0");
  }
}

TEST_F(RooflineTest, OutlivesTheCatalogs) {
  std::unique_ptr<IterationCostModel> cm;
  Duration expected{};
  {
    const GpuCatalog gpus = GpuCatalog::load(kDefaultGpuCatalogPath);
    const ModelCatalog models = ModelCatalog::load(kDefaultModelCatalogDir);
    Deployment d{&models.get("llama-3.1-8b"), &gpus.get("h100_sxm"), 1};
    cm = make_roofline_cost_model(d, {});
    expected = cm->iteration_time(decodes(4, 512));
  }
  EXPECT_EQ(cm->iteration_time(decodes(4, 512)), expected);
}

}  // namespace
}  // namespace servesim::models
