#include "core/rng.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

namespace servesim {
namespace {

struct Moments {
  double mean = 0;
  double variance = 0;
};

template <typename Draw>
Moments moments(int n, Draw draw) {
  // Welford's running mean and variance.
  double mean = 0, m2 = 0;
  for (int i = 1; i <= n; ++i) {
    const double x = draw();
    const double delta = x - mean;
    mean += delta / i;
    m2 += delta * (x - mean);
  }
  return {mean, m2 / (n - 1)};
}

TEST(RngStream, SameSeedAndNameGiveIdenticalSequences) {
  RngStream a(42, "arrivals");
  RngStream b(42, "arrivals");
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(a.next_u64(), b.next_u64()) << "draw " << i;
  }
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(a.uniform(), b.uniform());
    ASSERT_EQ(a.exponential(2.0), b.exponential(2.0));
    ASSERT_EQ(a.gamma(0.5, 3.0), b.gamma(0.5, 3.0));
    ASSERT_EQ(a.normal(), b.normal());
    ASSERT_EQ(a.uniform_int(-5, 5), b.uniform_int(-5, 5));
  }
}

TEST(RngStream, DifferentNamesGiveDifferentSequences) {
  RngStream a(42, "arrivals");
  RngStream b(42, "lengths");
  int equal = 0;
  for (int i = 0; i < 1000; ++i) equal += a.next_u64() == b.next_u64();
  EXPECT_EQ(equal, 0);
}

TEST(RngStream, DifferentSeedsGiveDifferentSequences) {
  RngStream a(1, "arrivals");
  RngStream b(2, "arrivals");
  int equal = 0;
  for (int i = 0; i < 1000; ++i) equal += a.next_u64() == b.next_u64();
  EXPECT_EQ(equal, 0);
}

TEST(DeriveStreamSeed, DependsOnSeedAndEveryCharacterOfTheName) {
  EXPECT_EQ(derive_stream_seed(7, "x"), derive_stream_seed(7, "x"));
  EXPECT_NE(derive_stream_seed(7, "x"), derive_stream_seed(8, "x"));
  EXPECT_NE(derive_stream_seed(7, "ab"), derive_stream_seed(7, "ba"));
  EXPECT_NE(derive_stream_seed(7, ""), derive_stream_seed(7, "a"));
}

TEST(RngStream, UniformIsInUnitIntervalWithMeanOneHalf) {
  RngStream rng(3, "uniform");
  double lo = 1, hi = 0;
  const Moments m = moments(200'000, [&] {
    const double u = rng.uniform();
    lo = std::min(lo, u);
    hi = std::max(hi, u);
    return u;
  });
  EXPECT_GE(lo, 0.0);
  EXPECT_LT(hi, 1.0);
  EXPECT_NEAR(m.mean, 0.5, 0.005);
  EXPECT_NEAR(m.variance, 1.0 / 12.0, 0.002);
}

TEST(RngStream, ExponentialMeanWithinTwoPercent) {
  for (const double rate : {0.5, 4.0}) {
    RngStream rng(11, "exp");
    double lo = 1e300;
    const Moments m = moments(200'000, [&] {
      const double x = rng.exponential(rate);
      lo = std::min(lo, x);
      return x;
    });
    EXPECT_GE(lo, 0.0);
    EXPECT_NEAR(m.mean, 1.0 / rate, 0.02 / rate) << "rate " << rate;
    EXPECT_NEAR(m.variance, 1.0 / (rate * rate), 0.05 / (rate * rate)) << "rate " << rate;
  }
}

TEST(RngStream, GammaMeanAndVarianceWithinThreePercent) {
  for (const double shape : {0.5, 4.0}) {
    const double scale = 2.0;
    RngStream rng(5, "gamma");
    double lo = 1e300;
    const Moments m = moments(200'000, [&] {
      const double x = rng.gamma(shape, scale);
      lo = std::min(lo, x);
      return x;
    });
    const double mean = shape * scale;
    const double variance = shape * scale * scale;
    EXPECT_GT(lo, 0.0) << "shape " << shape;
    EXPECT_NEAR(m.mean, mean, 0.03 * mean) << "shape " << shape;
    EXPECT_NEAR(m.variance, variance, 0.03 * variance) << "shape " << shape;
  }
}

TEST(RngStream, UniformIntStaysInBoundsAndIsRoughlyUniform) {
  RngStream rng(9, "int");
  constexpr int kLo = -3, kHi = 3, kN = 70'000;
  std::array<int, kHi - kLo + 1> counts{};
  for (int i = 0; i < kN; ++i) {
    const int64_t v = rng.uniform_int(kLo, kHi);
    ASSERT_GE(v, kLo);
    ASSERT_LE(v, kHi);
    counts[static_cast<size_t>(v - kLo)]++;
  }
  const double expected = static_cast<double>(kN) / counts.size();
  for (size_t i = 0; i < counts.size(); ++i) {
    EXPECT_NEAR(counts[i], expected, 0.05 * expected) << "value " << kLo + static_cast<int>(i);
  }
}

TEST(RngStream, UniformIntSingleValue) {
  RngStream rng(9, "int");
  for (int i = 0; i < 100; ++i) EXPECT_EQ(rng.uniform_int(17, 17), 17);
}

TEST(RngStream, UniformIntWideRanges) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  RngStream rng(9, "wide");
  // Full range, and ranges wider than INT64_MAX: both halves must be reachable.
  int negative = 0, positive = 0;
  for (int i = 0; i < 1000; ++i) {
    const int64_t v = rng.uniform_int(kMin, kMax);
    (v < 0 ? negative : positive)++;
  }
  EXPECT_GT(negative, 400);
  EXPECT_GT(positive, 400);
  int high = 0;
  for (int i = 0; i < 1000; ++i) {
    const int64_t v = rng.uniform_int(-10, kMax);
    ASSERT_GE(v, -10);
    high += v > kMax / 2;
  }
  EXPECT_GT(high, 400);
  for (int i = 0; i < 1000; ++i) {
    const int64_t v = rng.uniform_int(kMin, 10);
    ASSERT_LE(v, 10);
  }
}

TEST(RngStream, NormalMeanAndStddev) {
  RngStream rng(13, "normal");
  const Moments m = moments(200'000, [&] { return rng.normal(); });
  EXPECT_NEAR(m.mean, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(m.variance), 1.0, 0.01);
}

}  // namespace
}  // namespace servesim
