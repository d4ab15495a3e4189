// Log-bucketed histogram of non-negative integer values (nanosecond gaps), HDR-histogram style.
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

}  // namespace servesim
