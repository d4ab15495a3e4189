#include "core/histogram.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "core/rng.h"

namespace servesim {
namespace {

// Exact nearest-rank quantile of `sorted`: the smallest value with at least ceil(q*n) samples
// at or below it.
int64_t exact_quantile(const std::vector<int64_t>& sorted, double q) {
  const auto n = static_cast<int64_t>(sorted.size());
  int64_t rank = static_cast<int64_t>(std::ceil(q * static_cast<double>(n)));
  rank = std::clamp<int64_t>(rank, 1, n);
  return sorted[static_cast<size_t>(rank - 1)];
}

TEST(LogHistogram, EmptyHistogramReportsZero) {
  const LogHistogram h;
  EXPECT_EQ(h.count(), 0);
  EXPECT_EQ(h.min(), 0);
  EXPECT_EQ(h.max(), 0);
  EXPECT_EQ(h.mean(), 0.0);
  EXPECT_EQ(h.quantile(0.0), 0);
  EXPECT_EQ(h.quantile(0.5), 0);
  EXPECT_EQ(h.quantile(1.0), 0);
  EXPECT_TRUE(h.bins().empty());
}

TEST(LogHistogram, ExactBelow128) {
  LogHistogram h;
  std::vector<int64_t> values;
  for (int64_t v = 0; v < 128; ++v) {
    for (int64_t c = 0; c <= v % 3; ++c) {
      h.add(v);
      values.push_back(v);
    }
  }
  std::sort(values.begin(), values.end());
  for (double q : {0.0, 0.01, 0.1, 0.25, 0.5, 0.77, 0.9, 0.99, 1.0}) {
    EXPECT_EQ(h.quantile(q), exact_quantile(values, q)) << "q " << q;
  }
  const auto bins = h.bins();
  ASSERT_EQ(bins.size(), 128u);
  for (int64_t v = 0; v < 128; ++v) {
    EXPECT_EQ(bins[static_cast<size_t>(v)].lower, v);
    EXPECT_EQ(bins[static_cast<size_t>(v)].upper, v + 1);
    EXPECT_EQ(bins[static_cast<size_t>(v)].count, v % 3 + 1);
  }
  EXPECT_EQ(h.min(), 0);
  EXPECT_EQ(h.max(), 127);
}

TEST(LogHistogram, CountsMinMaxMean) {
  LogHistogram h;
  h.add(10);
  h.add(1'000'000, 3);
  h.add(7, 0);  // a zero count is ignored
  EXPECT_EQ(h.count(), 4);
  EXPECT_EQ(h.min(), 10);
  EXPECT_EQ(h.max(), 1'000'000);
  EXPECT_DOUBLE_EQ(h.mean(), (10.0 + 3'000'000.0) / 4.0);
  // Quantiles are clamped to [min, max].
  EXPECT_EQ(h.quantile(0.0), 10);
  EXPECT_EQ(h.quantile(1.0), 1'000'000);
}

TEST(LogHistogram, QuantileWithinOnePercentOnWideRange) {
  RngStream rng(2024, "histogram");
  LogHistogram h;
  std::vector<int64_t> values;
  values.reserve(100'000);
  for (int i = 0; i < 100'000; ++i) {
    // Log-uniform over [1e3, 1e9].
    const auto v = static_cast<int64_t>(std::exp(std::log(1e3) + rng.uniform() * std::log(1e6)));
    h.add(v);
    values.push_back(v);
  }
  std::sort(values.begin(), values.end());
  EXPECT_EQ(h.count(), 100'000);
  EXPECT_EQ(h.min(), values.front());
  EXPECT_EQ(h.max(), values.back());
  double worst = 0;
  for (int i = 0; i <= 1000; ++i) {
    const double q = i / 1000.0;
    const double exact = static_cast<double>(exact_quantile(values, q));
    const double got = static_cast<double>(h.quantile(q));
    const double rel = std::fabs(got - exact) / exact;
    worst = std::max(worst, rel);
    ASSERT_LE(rel, 0.01) << "q " << q << " exact " << exact << " got " << got;
  }
  for (double q : {0.5, 0.9, 0.99, 0.999}) {
    const double exact = static_cast<double>(exact_quantile(values, q));
    EXPECT_LE(std::fabs(static_cast<double>(h.quantile(q)) - exact) / exact, 0.01) << "q " << q;
  }
  // The midpoint of a bucket of relative width 2^-7 is within 2^-8 of any value in it.
  EXPECT_LE(worst, 1.0 / 256.0 + 1e-12);
}

TEST(LogHistogram, MergeEqualsAddingBoth) {
  RngStream rng(1, "merge");
  LogHistogram a, b, both;
  for (int i = 0; i < 5'000; ++i) {
    const int64_t x = rng.uniform_int(0, 1'000'000);
    const int64_t y = rng.uniform_int(500, 5'000'000'000);
    a.add(x);
    b.add(y, 2);
    both.add(x);
    both.add(y, 2);
  }
  LogHistogram merged = a;
  merged.merge(b);
  EXPECT_EQ(merged.count(), both.count());
  EXPECT_EQ(merged.min(), both.min());
  EXPECT_EQ(merged.max(), both.max());
  EXPECT_DOUBLE_EQ(merged.mean(), both.mean());
  const auto mb = merged.bins();
  const auto bb = both.bins();
  ASSERT_EQ(mb.size(), bb.size());
  for (size_t i = 0; i < mb.size(); ++i) {
    EXPECT_EQ(mb[i].lower, bb[i].lower);
    EXPECT_EQ(mb[i].upper, bb[i].upper);
    EXPECT_EQ(mb[i].count, bb[i].count);
  }
  for (double q : {0.0, 0.1, 0.5, 0.9, 0.99, 1.0}) EXPECT_EQ(merged.quantile(q), both.quantile(q));
}

TEST(LogHistogram, MergeWithEmptyKeepsMinAndMax) {
  LogHistogram a, empty;
  a.add(300);
  a.add(70);
  a.merge(empty);
  EXPECT_EQ(a.count(), 2);
  EXPECT_EQ(a.min(), 70);
  EXPECT_EQ(a.max(), 300);
  LogHistogram c;
  c.merge(a);
  EXPECT_EQ(c.count(), 2);
  EXPECT_EQ(c.min(), 70);
  EXPECT_EQ(c.max(), 300);
  EXPECT_EQ(c.quantile(0.5), 70);
}

TEST(LogHistogram, BucketBoundariesAreContiguous) {
  // Every bucket a non-negative int64 can land in: values below 2^63.
  const int last = LogHistogram::bucket_of(std::numeric_limits<int64_t>::max());
  EXPECT_EQ(LogHistogram::bucket_lower(0), 0);
  for (int b = 0; b < last; ++b) {
    ASSERT_LT(LogHistogram::bucket_lower(b), LogHistogram::bucket_upper(b)) << "bucket " << b;
    ASSERT_EQ(LogHistogram::bucket_upper(b), LogHistogram::bucket_lower(b + 1)) << "bucket " << b;
  }
  EXPECT_EQ(LogHistogram::bucket_upper(last), std::numeric_limits<int64_t>::max());
  EXPECT_LT(last, LogHistogram::kBuckets);
}

TEST(LogHistogram, EveryValueLiesInItsBucket) {
  RngStream rng(77, "buckets");
  for (int i = 0; i < 100'000; ++i) {
    const int shift = static_cast<int>(rng.uniform_int(0, 62));
    const int64_t v = static_cast<int64_t>(rng.next_u64() >> (1 + shift));
    const int b = LogHistogram::bucket_of(v);
    ASSERT_LE(LogHistogram::bucket_lower(b), v) << v;
    // bucket_upper clamps to INT64_MAX in the top bucket, where v == INT64_MAX is possible.
    if (LogHistogram::bucket_upper(b) != std::numeric_limits<int64_t>::max()) {
      ASSERT_LT(v, LogHistogram::bucket_upper(b)) << v;
    }
  }
  EXPECT_EQ(LogHistogram::bucket_of(127), 127);
  EXPECT_EQ(LogHistogram::bucket_of(128), 128);
  EXPECT_EQ(LogHistogram::bucket_of(256), 256);
  EXPECT_EQ(LogHistogram::bucket_of(257), 256);
  EXPECT_EQ(LogHistogram::bucket_lower(257), 258);
  EXPECT_EQ(LogHistogram::bucket_upper(257), 260);
}

TEST(LogHistogram, BinsAreContiguousWhenEveryBucketIsFilled) {
  LogHistogram h;
  // Every bucket from 0 up to 2^20 receives its lower bound.
  for (int b = 0; LogHistogram::bucket_lower(b) < (int64_t{1} << 20); ++b) {
    h.add(LogHistogram::bucket_lower(b));
  }
  const auto bins = h.bins();
  ASSERT_FALSE(bins.empty());
  EXPECT_EQ(bins.front().lower, 0);
  EXPECT_EQ(bins.back().upper, (int64_t{1} << 20));
  for (size_t i = 0; i + 1 < bins.size(); ++i) {
    ASSERT_EQ(bins[i].upper, bins[i + 1].lower) << "bin " << i;
    ASSERT_EQ(bins[i].count, 1);
  }
}

TEST(LogHistogram, BinsSkipEmptyBucketsInOrder) {
  LogHistogram h;
  h.add(1'000'000);
  h.add(5);
  h.add(5);
  const auto bins = h.bins();
  ASSERT_EQ(bins.size(), 2u);
  EXPECT_EQ(bins[0].lower, 5);
  EXPECT_EQ(bins[0].upper, 6);
  EXPECT_EQ(bins[0].count, 2);
  // 1e6 has msb 19: buckets of width 2^12 = 4096; 1e6 / 4096 = 244.14 -> [999424, 1003520).
  EXPECT_EQ(bins[1].lower, 999'424);
  EXPECT_EQ(bins[1].upper, 1'003'520);
  EXPECT_EQ(bins[1].count, 1);
}

TEST(TimeCounts, ExactOnBinBoundsWhileTheBinsAreFine) {
  TimeCounts c;
  for (int64_t t = 0; t < 1000; ++t) c.add(t);  // width 1: every time in its own bin
  EXPECT_EQ(c.bin_width(), 1);
  EXPECT_DOUBLE_EQ(c.count_in(-1, 999), 1000);
  EXPECT_DOUBLE_EQ(c.count_in(499, 999), 500);  // (499, 999]
  EXPECT_DOUBLE_EQ(c.count_in(10, 10), 0);
  EXPECT_DOUBLE_EQ(c.count_in(20, 10), 0);
}

TEST(TimeCounts, CoarsensAndStaysWithinTwoBinsOfTheTrueCount) {
  TimeCounts c;
  std::vector<int64_t> times;
  RngStream rng(5, "time-counts");
  int64_t t = 0;
  for (int i = 0; i < 200'000; ++i) {
    t += static_cast<int64_t>(rng.uniform() * 2e6);  // ~1 ms apart: a 200 s run
    times.push_back(t);
    c.add(t);
  }
  // The width doubled until 4096 bins cover the run: at most 2 x run / 4096.
  EXPECT_LE(c.bin_width(), 2 * t / TimeCounts::kBins + 1);
  EXPECT_GT(c.bin_width(), t / TimeCounts::kBins / 2);
  for (const auto& [lo, hi] : std::vector<std::pair<int64_t, int64_t>>{
           {t / 2, t}, {t / 3, 2 * t / 3}, {12'345'678, 98'765'432}, {-1, t}}) {
    const auto truth =
        std::count_if(times.begin(), times.end(), [&](int64_t x) { return x > lo && x <= hi; });
    // The stated bound: the counts of the two bins holding the bounds.
    const int64_t w = c.bin_width();
    const auto in_bin_of = [&](int64_t bound) {
      const int64_t from = std::max<int64_t>(0, bound) / w * w;
      return std::count_if(times.begin(), times.end(),
                           [&](int64_t x) { return x >= from && x < from + w; });
    };
    const auto two_bins = static_cast<double>(in_bin_of(lo) + in_bin_of(hi));
    EXPECT_NEAR(c.count_in(lo, hi), static_cast<double>(truth), two_bins) << lo << ".." << hi;
    EXPECT_GT(two_bins, 0);
  }
}

}  // namespace
}  // namespace servesim
