// Comparison of two profiles on small hand-built tables with known ratios.
#include "profiles/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tests/unit/profiles/profile_test_util.h"

namespace servesim::profiles {
namespace {

Profile with_gemm(std::vector<GemmRow> rows) {
  Profile p;
  p.meta.gpu = "h100_sxm";
  p.meta.source = "test";
  p.meta.model = "generic";
  p.gemm = std::move(rows);
  return p;
}

TEST(Compare, DoubledLatenciesGiveRatioTwo) {
  Profile a = with_gemm({{"bf16", 1, 4096, 4096, 10.0},
                         {"bf16", 2, 4096, 4096, 11.0},
                         {"bf16", 4, 4096, 4096, 12.0},
                         {"fp8_e4m3", 4, 4096, 4096, 7.0},
                         {"bf16", 8, 4096, 4096, 13.0}});  // only in a
  Profile b = with_gemm({{"bf16", 1, 4096, 4096, 20.0},
                         {"bfloat16", 2, 4096, 4096, 22.0},  // alias: canonicalised
                         {"bf16", 4, 4096, 4096, 24.0},
                         {"fp8", 4, 4096, 4096, 21.0},
                         {"bf16", 16, 4096, 4096, 50.0}});  // only in b
  ProfileComparison c = compare_profile_tables(a, b);
  const GroupComparison* bf16 = c.find("gemm", "bf16");
  ASSERT_NE(bf16, nullptr);
  EXPECT_EQ(bf16->matched, 3);
  EXPECT_EQ(bf16->only_a, 1);
  EXPECT_EQ(bf16->only_b, 1);
  EXPECT_DOUBLE_EQ(bf16->median_ratio, 2.0);
  EXPECT_DOUBLE_EQ(bf16->p10_ratio, 2.0);
  EXPECT_DOUBLE_EQ(bf16->p90_ratio, 2.0);
  EXPECT_NEAR(bf16->geomean_ratio, 2.0, 1e-12);
  const GroupComparison* fp8 = c.find("gemm", "fp8_e4m3");
  ASSERT_NE(fp8, nullptr);
  EXPECT_EQ(fp8->matched, 1);
  EXPECT_DOUBLE_EQ(fp8->median_ratio, 3.0);
  const GroupComparison* all = c.find("gemm", "*");
  ASSERT_NE(all, nullptr);
  EXPECT_EQ(all->matched, 4);
  EXPECT_DOUBLE_EQ(all->median_ratio, 2.0);
  EXPECT_NEAR(all->geomean_ratio, std::pow(2.0 * 2.0 * 2.0 * 3.0, 0.25), 1e-12);
  // Tables absent from either profile are not reported.
  EXPECT_EQ(c.find("attention_decode", "*"), nullptr);
}

TEST(Compare, PercentilesInterpolateBetweenOrderStatistics) {
  std::vector<GemmRow> a_rows, b_rows;
  for (int i = 1; i <= 11; ++i) {
    a_rows.push_back({"bf16", i, 1024, 1024, 10.0});
    b_rows.push_back({"bf16", i, 1024, 1024, 10.0 * i});  // ratios 1..11
  }
  ProfileComparison c = compare_profile_tables(with_gemm(a_rows), with_gemm(b_rows));
  const GroupComparison* g = c.find("gemm", "bf16");
  ASSERT_NE(g, nullptr);
  EXPECT_DOUBLE_EQ(g->median_ratio, 6.0);
  EXPECT_DOUBLE_EQ(g->p10_ratio, 2.0);
  EXPECT_DOUBLE_EQ(g->p90_ratio, 10.0);
}

TEST(Compare, AttentionJoinsOnTheFullKey) {
  Profile a = testing::sample_profile();
  Profile b = testing::sample_profile();
  for (AttentionDecodeRow& r : b.attention_decode) {
    r.latency_us *= 0.5;
  }
  b.attention_prefill[0].kv_dtype = "bf16";  // a different key: no match
  ProfileComparison c = compare_profile_tables(a, b);
  const GroupComparison* decode = c.find("attention_decode", "bf16");
  ASSERT_NE(decode, nullptr);
  EXPECT_EQ(decode->matched, 1);
  EXPECT_DOUBLE_EQ(decode->median_ratio, 0.5);
  const GroupComparison* prefill = c.find("attention_prefill", "*");
  ASSERT_NE(prefill, nullptr);
  EXPECT_EQ(prefill->matched, 0);
  EXPECT_EQ(prefill->only_a, 1);
  EXPECT_EQ(prefill->only_b, 1);
  EXPECT_TRUE(std::isnan(prefill->median_ratio));
  EXPECT_DOUBLE_EQ(c.find("collective", "all_reduce/bf16")->median_ratio, 1.0);
  EXPECT_DOUBLE_EQ(c.find("forward", "decode/graph")->median_ratio, 1.0);
}

TEST(Compare, GemmFallsBackToLogInterpolationInM) {
  // b has m = 2 and 8 only; a asks for m = 4, halfway in log m: sqrt(20 * 80) = 40.
  Profile a = with_gemm({{"bf16", 4, 2048, 2048, 20.0}, {"bf16", 64, 2048, 2048, 1.0}});
  Profile b = with_gemm({{"bf16", 2, 2048, 2048, 20.0}, {"bf16", 8, 2048, 2048, 80.0}});
  ProfileComparison c = compare_profile_tables(a, b);
  const GroupComparison* g = c.find("gemm", "bf16");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->matched, 1);
  EXPECT_EQ(g->interpolated, 1);
  EXPECT_EQ(g->only_a, 1);  // m = 64 is outside b's range
  EXPECT_NEAR(g->median_ratio, 2.0, 1e-12);
  CompareOptions exact_only;
  exact_only.interpolate_gemm_m = false;
  EXPECT_EQ(compare_profile_tables(a, b, exact_only).find("gemm", "bf16")->matched, 0);
}

TEST(Compare, ReportHasOneLinePerGroup) {
  Profile a = with_gemm({{"bf16", 1, 4096, 4096, 10.0}});
  Profile b = with_gemm({{"bf16", 1, 4096, 4096, 25.0}});
  std::string text = compare_profiles(a, b);
  EXPECT_NE(text.find("a: h100_sxm/test\n"), std::string::npos) << text;
  EXPECT_NE(text.find("ratio = b latency / a latency"), std::string::npos);
  EXPECT_NE(text.find("gemm               bf16                          1       0        0        0"
                      "    2.500    2.500    2.500    2.500\n"),
            std::string::npos)
      << text;
  EXPECT_NE(compare_profiles(Profile{}, b).find("no table has rows in both profiles"),
            std::string::npos);
}

}  // namespace
}  // namespace servesim::profiles
