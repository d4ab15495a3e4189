#include "models/cost/profile_interpolation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace servesim::models::interp {
namespace {

// A synthetic GEMM "GPU": 10 us latency, 2 TB/s, 500 TFLOP/s saturating with m (m_half 64).
double synthetic_gemm_us(int64_t m, int64_t n, int64_t k) {
  const double md = static_cast<double>(m), nd = static_cast<double>(n),
               kd = static_cast<double>(k);
  const double bytes = nd * kd * 2 + 2 * (md * kd + md * nd);
  const double flops = 2 * md * nd * kd;
  const double rate = 500e12 * md / (md + 64);
  return (10e-6 + std::max(bytes / 2e12, flops / rate)) * 1e6;
}

std::vector<profiles::GemmRow> synthetic_gemm(double noise, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> jitter(1 - noise, 1 + noise);
  std::vector<profiles::GemmRow> rows;
  for (int64_t m = 1; m <= 8192; m *= 2) {
    for (int64_t n : {1024, 2048, 4096, 8192, 16384}) {
      for (int64_t k : {1024, 2048, 4096, 8192}) {
        rows.push_back({"bf16", m, n, k, synthetic_gemm_us(m, n, k) * jitter(rng)});
      }
    }
  }
  return rows;
}

TEST(RooflineFit, RecoversTheParametersOfExactRooflineData) {
  std::vector<FitRow> rows;
  for (double m = 1; m <= 8192; m *= 2) {
    for (double nk : {1e6, 4e6, 16e6, 64e6}) {
      const double flops = 2 * m * nk, bytes = 2 * nk + 4 * m * 4096;
      rows.push_back({flops, bytes, m, nk, 5e-6 + std::max(bytes / 3e12, flops / 700e12)});
    }
  }
  const RooflineFit f = fit_roofline(rows, true);
  EXPECT_NEAR(f.t0_s, 5e-6, 0.05e-6);
  EXPECT_NEAR(f.bandwidth(), 3e12, 0.03e12);
  EXPECT_NEAR(f.flops_per_s(8192, 64e6), 700e12, 14e12);
  EXPECT_LT(f.mape, 0.01);
  // Carried over to a GPU with twice the FLOP/s and half the bandwidth.
  const RooflineFit g = f.scaled(2, 0.5);
  EXPECT_NEAR(g.flops_per_s(8192, 64e6), 2 * f.flops_per_s(8192, 64e6), 1e9);
  EXPECT_NEAR(g.bandwidth(), 0.5 * f.bandwidth(), 1e6);
  EXPECT_EQ(g.t0_s, f.t0_s);
}

TEST(GemmTable, ExactOnMeasuredPoints) {
  const std::vector<profiles::GemmRow> rows = synthetic_gemm(0.15, 1);
  const GemmTable t(rows, 2);
  for (const profiles::GemmRow& r : rows) {
    const Lookup l =
        t.predict(static_cast<double>(r.m), static_cast<double>(r.n), static_cast<double>(r.k));
    EXPECT_NEAR(l.seconds, r.latency_us * 1e-6, r.latency_us * 1e-15) << r.m << " " << r.n;
    EXPECT_FALSE(l.extrapolated);
  }
}

// A small GEMM timed 4x slower than a larger one of the same shape (a cold launch) is left out:
// the smaller one is predicted from its neighbours, at most as slow as the larger one.
TEST(GemmTable, DropsPointsSlowerThanALargerGemmOfTheSameShape) {
  std::vector<profiles::GemmRow> rows = synthetic_gemm(0, 3);
  const GemmTable clean(rows, 2);
  EXPECT_EQ(clean.slower_than_larger_m(), 0u);
  for (profiles::GemmRow& r : rows) {
    if (r.n == 4096 && r.k == 4096 && r.m <= 8) r.latency_us *= 4;  // m = 1, 2, 4, 8
    if (r.n == 16384 && r.k == 4096 && r.m == 2) r.latency_us *= 1.4;  // within the tolerance
  }
  const GemmTable t(rows, 2);
  EXPECT_EQ(t.slower_than_larger_m(), 4u);
  EXPECT_EQ(t.points(), clean.points() - 4);
  const double at_16 = t.predict(16, 4096, 4096).seconds;
  for (double m : {1.0, 2.0, 4.0, 8.0}) {
    EXPECT_LE(t.predict(m, 4096, 4096).seconds, at_16 * (1 + 1e-9)) << m;
  }
  // The point within the tolerance stays measured as it is.
  EXPECT_NEAR(t.predict(2, 16384, 4096).seconds, 1.4 * synthetic_gemm_us(2, 16384, 4096) * 1e-6, 1e-12);
}

TEST(GemmTable, MonotoneBetweenMonotonePoints) {
  const GemmTable t(synthetic_gemm(0, 2), 2);
  for (int64_t n : {1024, 4096, 16384}) {
    double previous = 0;
    for (int64_t m = 1; m <= 8192; ++m) {
      const double s = t.predict(static_cast<double>(m), static_cast<double>(n), 4096).seconds;
      ASSERT_GE(s, previous * (1 - 1e-12)) << "n " << n << " m " << m;
      previous = s;
    }
  }
}

TEST(GemmTable, BilinearAcrossShapesInsideTheGridExtrapolatedOutside) {
  const GemmTable t(synthetic_gemm(0, 3), 2);
  // n = 3000 is between measured 2048 and 4096: interpolated, between the neighbours.
  const Lookup mid = t.predict(64, 3000, 4096);
  EXPECT_FALSE(mid.extrapolated);
  EXPECT_GT(mid.seconds, t.predict(64, 2048, 4096).seconds);
  EXPECT_LT(mid.seconds, t.predict(64, 4096, 4096).seconds);
  EXPECT_NEAR(mid.seconds, synthetic_gemm_us(64, 3000, 4096) * 1e-6,
              0.02 * synthetic_gemm_us(64, 3000, 4096) * 1e-6);
  // Beyond the n hull or the m range: flagged, and following the fitted roofline.
  EXPECT_TRUE(t.predict(64, 65536, 4096).extrapolated);
  const Lookup far = t.predict(32768, 4096, 4096);
  EXPECT_TRUE(far.extrapolated);
  const double edge = t.predict(8192, 4096, 4096).seconds;
  EXPECT_NEAR(far.seconds / edge,
              t.reference_time(32768, 4096, 4096) / t.reference_time(8192, 4096, 4096), 1e-9);
  EXPECT_NEAR(far.seconds / edge, 4, 0.1);  // compute-bound: linear in m
}

TEST(GemmTable, LeaveOneOutOfExactRooflineDataIsNearlyExact) {
  const GemmTable t(synthetic_gemm(0, 4), 2);
  for (size_t p = 0; p < t.points(); ++p) {
    const Lookup l = t.predict_without(p);
    EXPECT_NEAR(l.seconds, t.measured(p), 0.01 * t.measured(p));
  }
}

TEST(Curve, HoldsTheEdgeResidualOutside) {
  // Measured 2x the reference everywhere; outside, still 2x the reference.
  std::vector<CurvePoint> pts;
  for (double x = 0; x <= 4; x += 1) {
    pts.push_back({x, std::log(2.0) + 2 * x, 2 * x});
  }
  const Curve c(pts);
  bool extrapolated = false;
  EXPECT_NEAR(c.residual(2.5, 5, &extrapolated), std::log(2.0), 1e-12);
  EXPECT_FALSE(extrapolated);
  EXPECT_NEAR(c.residual(7, 14, &extrapolated), std::log(2.0), 1e-12);
  EXPECT_TRUE(extrapolated);
  bool loo_extrapolated = false;
  EXPECT_NEAR(c.residual_without(0, &loo_extrapolated), std::log(2.0), 1e-12);
  EXPECT_TRUE(loo_extrapolated);
}

TEST(CurveTable, ExactOnPointsAndFlagsOutsideTheRange) {
  std::vector<CurveTable::Row> rows;
  for (double bytes = 1024; bytes <= 1 << 24; bytes *= 4) {
    rows.push_back(
        {"all_reduce/bf16/2/1", bytes, 8e-6 + bytes / 100e9 * (1 + 0.1 * std::sin(bytes))});
  }
  const CurveTable t(rows);
  for (const CurveTable::Row& r : rows) {
    EXPECT_NEAR(t.predict(r.key, r.size).seconds, r.seconds, r.seconds * 1e-12);
  }
  EXPECT_FALSE(t.predict("all_reduce/bf16/2/1", 5000).extrapolated);
  EXPECT_TRUE(t.predict("all_reduce/bf16/2/1", 1 << 26).extrapolated);
}

std::vector<profiles::AttentionPrefillRow> synthetic_prefill(bool with_prefix) {
  std::vector<profiles::AttentionPrefillRow> rows;
  for (int64_t prefix :
       with_prefix ? std::vector<int64_t>{0, 1024, 4096} : std::vector<int64_t>{0}) {
    for (int64_t b = 1; b <= 16; b *= 2) {
      for (int64_t q = 128; q <= 8192; q *= 2) {
        const double work = static_cast<double>(q) * static_cast<double>(prefix) +
                            static_cast<double>(q) * static_cast<double>(q + 1) / 2;
        const double t = 8e-6 + 4.0 * 128 * 32 * static_cast<double>(b) * work / 400e12;
        rows.push_back({"bf16", "bf16", b, q, prefix, 32, 8, 128, true, t * 1e6});
      }
    }
  }
  return rows;
}

TEST(PrefillTable, AiconfiguratorPrefixRuleWithoutPrefixRows) {
  const PrefillTable t(synthetic_prefill(false), true);
  const HeadConfig h{32, 8, 128};
  EXPECT_FALSE(t.has_prefix_rows(h));
  const double q = 512, c = 1536, k = q + c;
  EXPECT_NEAR(t.predict(h, 2, q, c).seconds,
              t.predict(h, 2, k, 0).seconds * (k * k - c * c) / (k * k), 1e-15);
}

TEST(PrefillTable, InterpolatesOnThePrefixWhenMeasured) {
  const std::vector<profiles::AttentionPrefillRow> rows = synthetic_prefill(true);
  const PrefillTable t(rows, true);
  const HeadConfig h{32, 8, 128};
  ASSERT_TRUE(t.has_prefix_rows(h));
  for (const profiles::AttentionPrefillRow& r : rows) {
    EXPECT_NEAR(t.predict(h, static_cast<double>(r.batch), static_cast<double>(r.q_tokens),
                          static_cast<double>(r.prefix_tokens))
                    .seconds,
                r.latency_us * 1e-6, r.latency_us * 1e-12);
  }
  const double lo = t.predict(h, 4, 1024, 1024).seconds, hi = t.predict(h, 4, 1024, 4096).seconds;
  const Lookup mid = t.predict(h, 4, 1024, 2048);
  EXPECT_FALSE(mid.extrapolated);
  EXPECT_NEAR(mid.seconds, lo + (hi - lo) / 3, 1e-15);
  EXPECT_TRUE(t.predict(h, 4, 1024, 16384).extrapolated);
  // A head configuration that was not measured (other kv heads): transferred, flagged.
  EXPECT_TRUE(t.predict({32, 4, 128}, 4, 1024, 0).extrapolated);
}

// Decode rows: cold ones stream KV at 2 TB/s after 10 us; rows whose KV fits a 48 MiB L2 are timed
// cache-hot at an impossible 20 TB/s.
constexpr int64_t kL2 = int64_t{48} << 20;

std::vector<profiles::AttentionDecodeRow> synthetic_decode() {
  std::vector<profiles::AttentionDecodeRow> rows;
  for (int64_t b = 1; b <= 256; b *= 2) {
    for (int64_t c = 128; c <= 65536; c *= 2) {
      const double kv = 2.0 * static_cast<double>(b * c) * 8 * 128 * 2;
      const double t = kv < static_cast<double>(kL2) ? 2e-6 + kv / 20e12 : 10e-6 + kv / 2e12;
      rows.push_back({"bf16", "bf16", b, c, 32, 8, 128, t * 1e6});
    }
  }
  return rows;
}

TEST(DecodeTable, CacheHotRowsNeverMakeLargeContextsOptimistic) {
  const DecodeTable t(synthetic_decode(), kL2, 3.35e12);
  const HeadConfig h{32, 8, 128};
  EXPECT_GT(t.cache_hot_rows(), 0u);
  EXPECT_NEAR(t.floor_bandwidth(), 2e12, 0.2e12);
  // Every query whose KV exceeds L2 is at least KV bytes / the bandwidth of the large-KV rows.
  for (double b : {1.0, 3.0, 16.0, 100.0}) {
    for (double c = 100; c <= 60000; c *= 1.7) {
      const double kv = t.kv_bytes(h, b, c);
      const Lookup l = t.predict(h, b, c);
      EXPECT_GE(l.seconds, kv / t.floor_bandwidth() * (1 - 1e-12)) << b << " " << c;
      if (kv > 1.2 * static_cast<double>(kL2)) {
        EXPECT_GE(l.seconds, kv / 2e12 * 0.95) << b << " " << c;
      }
    }
  }
  // Without the guard (L2 unknown) the hot rows drag a just-cold query down: 56 MiB of KV lies
  // between a hot grid column (32 MiB) and a cold one (64 MiB).
  const DecodeTable unguarded(synthetic_decode(), 0, 0);
  const double c = static_cast<double>(int64_t{56} << 20) / (2.0 * 8 * 8 * 128 * 2);
  EXPECT_LT(unguarded.predict(h, 8, c).seconds, t.predict(h, 8, c).seconds);
}

TEST(DecodeTable, ExactOnColdMeasuredPoints) {
  const std::vector<profiles::AttentionDecodeRow> rows = synthetic_decode();
  const DecodeTable t(rows, kL2, 0);
  const HeadConfig h{32, 8, 128};
  for (const profiles::AttentionDecodeRow& r : rows) {
    const double b = static_cast<double>(r.batch), c = static_cast<double>(r.context_tokens);
    if (t.kv_bytes(h, b, c) >= static_cast<double>(kL2)) {
      EXPECT_NEAR(t.predict(h, b, c).seconds, r.latency_us * 1e-6, r.latency_us * 1e-12);
    }
  }
}

TEST(Grid, SliceEqualsTheFullGridAtMeasuredCoordinates) {
  std::vector<Grid::Point> pts;
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-0.3, 0.3);
  for (double a = 0; a < 4; ++a) {
    for (double b = 0; b < 5; ++b) {
      for (double c = 0; c < 3; ++c) {
        pts.push_back({{a, b, c}, u(rng), 0});
      }
    }
  }
  const Grid g(
      3, pts, {}, [](const Grid::Coord&) { return 0.0; }, {0, 1, 2}, Grid::Fill::kFirst);
  const Grid s = g.slice(2, 1.0);
  for (double a = 0; a <= 3; a += 0.25) {
    for (double b = 0; b <= 4; b += 0.5) {
      bool e1 = false, e2 = false;
      EXPECT_NEAR(g.ratio({a, b, 1.0}, 0, &e1), s.ratio({a, b, 0}, 0, &e2), 1e-12);
    }
  }
}

}  // namespace
}  // namespace servesim::models::interp
