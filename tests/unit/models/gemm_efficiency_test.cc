#include "models/cost/gemm_efficiency.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit/models/catalog_fixture.h"

namespace servesim::models {
namespace {

class GemmEfficiencyTest : public CatalogFixture {
 protected:
  // bf16 rows at `bf16_share` of the GPU's bf16 peak plus 5 us, on compute-bound shapes and one
  // small one; each lower-precision dtype at `ratio` x the bf16 time of the same shape.
  static std::vector<profiles::GemmRow> rows(const GpuSpec& gpu, double bf16_share,
                                             const std::vector<std::pair<std::string, double>>&
                                                 lower) {
    std::vector<profiles::GemmRow> out;
    for (int64_t m : {16, 2048, 4096, 8192}) {
      for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{{8192, 8192}, {28672, 8192}}) {
        const double flops = 2.0 * m * n * k;
        const double us = 5 + flops / (bf16_share * gpu.bf16_flops_per_s) * 1e6;
        out.push_back({"bf16", m, n, k, us});
        for (const auto& [dtype, ratio] : lower) out.push_back({dtype, m, n, k, us * ratio});
      }
    }
    return out;
  }
};

TEST_F(GemmEfficiencyTest, EfficiencyIsTheShareOfTheDtypePeakOnComputeBoundShapes) {
  const GpuSpec& b200 = gpus_->get("b200_sxm");
  const auto effs = gemm_efficiency(rows(b200, 0.7, {{"fp8_e4m3", 1.2}}), b200);
  ASSERT_EQ(effs.size(), 2u);
  for (const GemmEfficiency& e : effs) {
    EXPECT_EQ(e.rows, 6u) << e.dtype;  // m = 16 is not compute-bound
    // 5 us of fixed latency over a >= 120 us kernel: within 4 % of the share set above.
    const double expected = e.dtype == "bf16" ? 0.7 : 0.7 / 1.2 * b200.bf16_flops_per_s /
                                                          b200.peak_flops_per_s(Dtype::kFp8);
    EXPECT_NEAR(e.median, expected, 0.04 * expected) << e.dtype;
    EXPECT_GE(e.max, e.median);
  }
}

TEST_F(GemmEfficiencyTest, ALowerPrecisionSlowerThanBf16IsAnInversion) {
  const GpuSpec& b200 = gpus_->get("b200_sxm");
  const auto inverted_rows = rows(b200, 0.7, {{"fp8_e4m3", 1.2}, {"nvfp4", 0.3}});
  const auto v = precision_inversions(inverted_rows, b200);
  ASSERT_EQ(v.size(), 1u);  // nvfp4 at 0.3 x bf16 is sane
  EXPECT_EQ(v[0].low, "fp8_e4m3");
  EXPECT_EQ(v[0].high, "bf16");
  EXPECT_EQ(v[0].ratio.shapes, 6u);
  EXPECT_DOUBLE_EQ(v[0].ratio.median, 1.2);
  EXPECT_DOUBLE_EQ(v[0].expected, b200.bf16_flops_per_s / b200.peak_flops_per_s(Dtype::kFp8));
  EXPECT_TRUE(inverted(inverted_rows, "fp8_e4m3", "bf16"));
  // Half the bf16 time, as servesim's harness measures cuBLASLt's FP8: no inversion.
  EXPECT_TRUE(precision_inversions(rows(b200, 0.7, {{"fp8_e4m3", 0.55}}), b200).empty());
  EXPECT_FALSE(inverted(rows(b200, 0.7, {{"fp8_e4m3", 0.55}}), "fp8_e4m3", "bf16"));
}

TEST_F(GemmEfficiencyTest, OnlyPerTensorFp8OnBlackwellIsRepriced) {
  EXPECT_TRUE(reprices_when_inverted(gpus_->get("b200_sxm"), "fp8_e4m3"));
  EXPECT_TRUE(reprices_when_inverted(gpus_->get("gb300_nvl72"), "fp8_e4m3"));
  EXPECT_FALSE(reprices_when_inverted(gpus_->get("b200_sxm"), "fp8_block"));
  EXPECT_FALSE(reprices_when_inverted(gpus_->get("h100_sxm"), "fp8_e4m3"));
  EXPECT_FALSE(reprices_when_inverted(gpus_->get("h200_sxm"), "fp8_e4m3"));
}

}  // namespace
}  // namespace servesim::models
