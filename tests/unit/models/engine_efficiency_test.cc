// EngineEfficiency: scaling a cost model's breakdown per operator class, and fitting the factors
// back from reference times.
#include "models/cost/engine_efficiency.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

namespace servesim::models {
namespace {

// A cost model whose classes grow with the shape in different ways, so that every factor is
// identifiable from a handful of shapes: GEMMs 10 + 0.01 m^1.2 ms for m query tokens, prefill
// attention 1e-5 q^2 per prefill segment, decode attention 0.02 ms per decode segment, all-reduce
// sqrt(m) x 0.5 ms, elementwise 0.004 m ms, overhead 3 ms.
class SyntheticBreakdown : public IterationCostModel {
 public:
  Duration iteration_time(const BatchShape& s) const override { return breakdown(s).total(); }
  OperatorTimes breakdown(const BatchShape& s) const override {
    const double m = static_cast<double>(s.total_query_tokens());
    OperatorTimes t;
    t.mlp_gemm = duration_from_ms(6 + 0.01 * std::pow(m, 1.2));
    t.qkv_gemm = duration_from_ms(3);
    t.o_gemm = duration_from_ms(1);
    double prefill = 0, decode = 0;
    for (const Segment& g : s.segments) {
      if (g.query_tokens > 1) {
        prefill += 1e-5 * static_cast<double>(g.query_tokens * g.query_tokens);
      } else {
        decode += 0.02;
      }
    }
    t.attention_prefill = duration_from_ms(prefill);
    t.attention_decode = duration_from_ms(decode);
    t.allreduce = duration_from_ms(0.5 * std::sqrt(m));
    t.norms_elementwise = duration_from_ms(0.004 * m);
    t.overhead = duration_from_ms(3);
    return t;
  }
  Duration peak_bound_time(const BatchShape& s) const override { return breakdown(s).total(); }
  std::string describe() const override { return "synthetic"; }
};

BatchShape tokens(int64_t m) {
  BatchShape s;
  s.segments = {{m, m, 1}};
  return s;
}

TEST(EngineEfficiency, ScalesEachClassAndBlendsGemmByTokenCount) {
  EngineEfficiency e{.gemm = 0.5, .gemm_compute = 1.5, .gemm_ridge_tokens = 100,
                     .attention_prefill = 2};
  const auto inner = std::make_shared<SyntheticBreakdown>();
  const auto scaled = scale_by_engine(inner, e);
  // m = 100: half the GEMM time at each factor (x1.0); prefill attention x2, the rest x1.
  const OperatorTimes base = inner->breakdown(tokens(100));
  EXPECT_NEAR(to_ms(scaled->iteration_time(tokens(100))),
              to_ms(base.total()) + to_ms(base.attention_prefill), 1e-5);
  // m = 300: share 0.75 -> GEMM factor 1.25.
  EXPECT_NEAR(to_ms(scaled->breakdown(tokens(300)).mlp_gemm),
              to_ms(inner->breakdown(tokens(300)).mlp_gemm) * 1.25, 1e-5);
  // Without a ridge, `gemm` applies at every m.
  e.gemm_ridge_tokens = 0;
  const auto flat = scale_by_engine(inner, e);
  EXPECT_NEAR(to_ms(flat->breakdown(tokens(300)).mlp_gemm),
              to_ms(inner->breakdown(tokens(300)).mlp_gemm) * 0.5, 1e-5);
}

TEST(EngineEfficiency, FitRecoversKnownFactors) {
  const EngineEfficiency truth{.gemm = 0.9,
                               .gemm_compute = 1.3,
                               .gemm_ridge_tokens = 150,
                               .attention_prefill = 1.1,
                               .attention_decode = 1.2,
                               .allreduce = 1.4,
                               .elementwise = 1.0,
                               .overhead = 0.8};
  const auto inner = std::make_shared<SyntheticBreakdown>();
  const auto scaled = scale_by_engine(inner, truth);
  std::vector<EngineSample> samples;
  for (int64_t m : {1, 2, 8, 32, 64, 128, 256, 512, 1024, 4096}) {
    // Decode steps (m sequences of one token) and prefills (one m-token prompt) differ in which
    // classes are present, which makes every factor identifiable.
    BatchShape decode;
    decode.segments.assign(static_cast<size_t>(m), {1, 512, 1});
    samples.push_back({inner->breakdown(decode), m, to_ms(scaled->iteration_time(decode))});
    if (m > 1) {
      samples.push_back({inner->breakdown(tokens(m)), m, to_ms(scaled->iteration_time(tokens(m)))});
    }
  }
  // A vanishing ridge: the exact factors are the least-squares optimum.
  const EngineEfficiency fit = fit_engine_efficiency(samples, "test", {.gemm_ridge_tokens = 150, .ridge = 1e-9});
  EXPECT_NEAR(fit.gemm, truth.gemm, 1e-3);
  EXPECT_NEAR(fit.gemm_compute, truth.gemm_compute, 1e-3);
  EXPECT_NEAR(fit.attention_prefill, truth.attention_prefill, 1e-3);
  EXPECT_NEAR(fit.attention_decode, truth.attention_decode, 1e-3);
  EXPECT_NEAR(fit.allreduce, truth.allreduce, 1e-3);
  EXPECT_NEAR(fit.elementwise, truth.elementwise, 1e-3);
  EXPECT_NEAR(fit.overhead, truth.overhead, 1e-3);
  EXPECT_EQ(fit.gemm_ridge_tokens, 150);
  // Without a ridge the fit has one GEMM factor, reported for both regimes.
  const EngineEfficiency single = fit_engine_efficiency(samples, "test");
  EXPECT_EQ(single.gemm_compute, single.gemm);
  EXPECT_EQ(single.gemm_ridge_tokens, 0);
}

TEST(EngineEfficiency, MinimaxRoundsLowerTheLargestError) {
  const auto inner = std::make_shared<SyntheticBreakdown>();
  std::vector<BatchShape> shapes;
  std::vector<EngineSample> samples;
  for (int64_t m : {1, 4, 16, 64, 128, 256, 512, 1024, 2048, 4096}) {
    shapes.push_back(tokens(m));
    shapes.push_back(BatchShape{std::vector<Segment>(static_cast<size_t>(m), {1, 512, 1}), {}});
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    // References a few percent off the unscaled model, alternating in sign, one far off.
    const double off = i == 7 ? 1.25 : (i % 2 == 0 ? 1.04 : 0.97);
    samples.push_back({inner->breakdown(shapes[i]), shapes[i].total_query_tokens(),
                       to_ms(inner->iteration_time(shapes[i])) * off});
  }
  const auto largest_error = [&](const EngineEfficiency& e) {
    const auto scaled = scale_by_engine(inner, e);
    double worst = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
      worst = std::max(worst,
                       std::fabs(to_ms(scaled->iteration_time(shapes[i])) / samples[i].reference_ms - 1));
    }
    return worst;
  };
  const EngineEfficiency least_squares =
      fit_engine_efficiency(samples, "ls", {.gemm_ridge_tokens = 150});
  const EngineEfficiency minimax =
      fit_engine_efficiency(samples, "mm", {.gemm_ridge_tokens = 150, .minimax_rounds = 20});
  EXPECT_LT(largest_error(minimax), largest_error(least_squares) - 0.01);
}

TEST(EngineEfficiency, RejectsTooFewSamplesAndBadFactors) {
  EXPECT_THROW(fit_engine_efficiency({}, "x"), std::invalid_argument);
  EngineEfficiency e;
  e.gemm_compute = 0;
  EXPECT_THROW(scale_by_engine(std::make_shared<SyntheticBreakdown>(), e), std::invalid_argument);
}

}  // namespace
}  // namespace servesim::models
