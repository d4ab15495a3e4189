// Log-bucketed histogram of non-negative integer values (nanosecond gaps), HDR-histogram style,
// and counts of times in bins that coarsen as the run grows (TimeCounts, below).
//
// Contract: bucket boundaries are fixed (no data dependence), so merging and comparing histograms
// is exact. Values below 2^kSubBits are stored exactly; above, each power of two is split into
// 2^kSubBits buckets, so a reported quantile is within 2^-kSubBits (0.8 %) of a true sample value.
// Used for TBT samples: a 100k-request run has tens of millions of token gaps, which this stores
// in a fixed 64 KiB.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace servesim {

class LogHistogram {
 public:
  static constexpr int kSubBits = 7;
  static constexpr int kSub = 1 << kSubBits;
  static constexpr int kBuckets = (64 - kSubBits + 1) * kSub;

  // REQUIRES: value >= 0.
  void add(int64_t value, int64_t count = 1);
  void merge(const LogHistogram& other);

  int64_t count() const { return count_; }
  int64_t max() const { return max_; }
  int64_t min() const { return count_ ? min_ : 0; }
  double mean() const { return count_ ? static_cast<double>(sum_) / count_ : 0.0; }
  // q in [0, 1]; nearest-rank quantile, reported as the bucket's midpoint clamped to [min, max].
  // Returns 0 for an empty histogram.
  int64_t quantile(double q) const;

  struct Bin {
    int64_t lower;  // inclusive
    int64_t upper;  // exclusive
    int64_t count;
  };
  // Non-empty bins in increasing order.
  std::vector<Bin> bins() const;

  static int bucket_of(int64_t value);
  static int64_t bucket_lower(int bucket);
  static int64_t bucket_upper(int bucket);

 private:
  std::vector<int64_t> counts_ = std::vector<int64_t>(kBuckets, 0);
  int64_t count_ = 0;
  __int128 sum_ = 0;
  int64_t min_ = INT64_MAX;
  int64_t max_ = 0;
};

// Counts of times (non-negative integer nanoseconds) in equal-width bins starting at 0, in memory
// that stays fixed however many times are added or however long the run: at most kBins bins,
// whose width doubles (neighbouring bins merge) whenever a time beyond the last bin arrives.
//
// Contract: count_in(lo, hi] is exact for bin-aligned bounds and otherwise interpolates linearly
// inside the two bins the bounds fall in, so it is off by at most the counts of those two bins,
// each of width <= max(1, 2 x largest time / kBins).
class TimeCounts {
 public:
  static constexpr int kBins = 4096;

  // REQUIRES: t >= 0.
  void add(int64_t t);
  // Estimated number of added times in (lo, hi]; 0 when hi <= lo.
  double count_in(int64_t lo, int64_t hi) const;
  int64_t bin_width() const { return width_; }

 private:
  // Estimated number of added times <= t.
  double count_at_or_below(int64_t t) const;

  std::vector<int64_t> bins_ = std::vector<int64_t>(kBins, 0);
  int64_t width_ = 1;
  int64_t total_ = 0;
};

}  // namespace servesim
