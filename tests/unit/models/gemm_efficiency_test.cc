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

// FP8 rows of a GEMM at 4 us plus 2 m n k / 1 PFLOP/s, plus an activation quantization of
// `ps_per_element` per element of the m x k input beyond the smallest m (16).
std::vector<profiles::GemmRow> quantized_rows(double ps_per_element) {
  std::vector<profiles::GemmRow> out;
  for (int64_t m : {16, 256, 2048, 8192}) {
    for (int64_t n : {32, 4096, 28672}) {
      for (int64_t k : {4096, 14336}) {
        const double gemm_us = 4 + 2.0 * m * n * k / 1e15 * 1e6;
        const double quant_us = ps_per_element * 1e-12 * (m - 16) * k * 1e6;
        out.push_back({"fp8_e4m3", m, n, k, gemm_us + quant_us});
      }
    }
  }
  out.push_back({"bf16", 8192, 32, 4096, 20});  // other dtypes are left alone
  return out;
}

TEST_F(GemmEfficiencyTest, AnUnfusedActivationQuantizationIsMeasuredFromTheNarrowestRows) {
  const GpuSpec& h200 = gpus_->get("h200_sxm");
  // 8.8 ps per element: eager PyTorch's chain of elementwise kernels on an H200 (about 33 bytes
  // per element at 3.75 TB/s).
  const auto q = activation_quantization(quantized_rows(8.8), "fp8_e4m3", h200);
  ASSERT_TRUE(q.has_value());
  // The narrowest rows (n = 32) add their own GEMM's 2 m 32 k / 1e15 = 0.064 ps per element.
  EXPECT_NEAR(q->seconds_per_element * 1e12, 8.8 + 0.064, 0.01);
  EXPECT_NEAR(q->fused_seconds_per_element, kFusedQuantBytes / h200.mem_bw_bytes_per_s, 1e-18);
  EXPECT_TRUE(q->unfused());
  EXPECT_EQ(q->points, 4u);  // m = 2048 and 8192 at both k
  EXPECT_FALSE(activation_quantization(quantized_rows(8.8), "bf16", h200).has_value());
  // A fused pass (4 bytes per element at the H200's bandwidth) is not flagged.
  const double fused_ps = kFusedQuantBytes / h200.mem_bw_bytes_per_s * 1e12;
  EXPECT_FALSE(activation_quantization(quantized_rows(fused_ps), "fp8_e4m3", h200)->unfused());
}

TEST_F(GemmEfficiencyTest, RepricingLeavesOneFusedPassPerElement) {
  const GpuSpec& h200 = gpus_->get("h200_sxm");
  const std::vector<profiles::GemmRow> measured = quantized_rows(8.8);
  const auto q = activation_quantization(measured, "fp8_e4m3", h200);
  const std::vector<profiles::GemmRow> fused = with_fused_activation_quantization(measured, *q);
  ASSERT_EQ(fused.size(), measured.size());
  // The measured rate counts the narrow rows' own GEMM (0.064 ps per element), which the
  // repricing takes off every row with the quantization.
  const double keep_ps = q->fused_seconds_per_element * 1e12 - 0.064;
  for (size_t i = 0; i < fused.size(); ++i) {
    const profiles::GemmRow& r = measured[i];
    if (r.dtype != "fp8_e4m3") {
      EXPECT_EQ(fused[i].latency_us, r.latency_us);
      continue;
    }
    // The GEMM's own time plus a fused pass.
    const double expected =
        4 + 2.0 * r.m * r.n * r.k / 1e15 * 1e6 + keep_ps * 1e-12 * (r.m - 16) * r.k * 1e6;
    EXPECT_NEAR(fused[i].latency_us, expected, 0.1) << r.m << " x " << r.n << " x " << r.k;
  }
  // Decode-sized rows barely move: m = 16 is the reference.
  EXPECT_EQ(fused[0].latency_us, measured[0].latency_us);
}

}  // namespace
}  // namespace servesim::models
