#include "core/histogram.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>

namespace servesim {

int LogHistogram::bucket_of(int64_t value) {
  assert(value >= 0);
  const uint64_t v = static_cast<uint64_t>(value);
  if (v < static_cast<uint64_t>(kSub)) return static_cast<int>(v);
  const int msb = 63 - std::countl_zero(v);   // >= kSubBits
  const int shift = msb - kSubBits;           // >= 0
  const int sub = static_cast<int>((v >> shift) & (kSub - 1));
  return (shift + 1) * kSub + sub;
}

int64_t LogHistogram::bucket_lower(int bucket) {
  if (bucket < kSub) return bucket;
  const int shift = bucket / kSub - 1;
  const int sub = bucket % kSub;
  return static_cast<int64_t>((static_cast<uint64_t>(kSub) | sub) << shift);
}

int64_t LogHistogram::bucket_upper(int bucket) {
  if (bucket < kSub) return bucket + 1;
  const int shift = bucket / kSub - 1;
  const uint64_t upper = (static_cast<uint64_t>(kSub | (bucket % kSub)) + 1) << shift;
  return upper > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(upper);
}

void LogHistogram::add(int64_t value, int64_t count) {
  assert(value >= 0 && count >= 0);
  if (count == 0) return;
  counts_[bucket_of(value)] += count;
  count_ += count;
  sum_ += static_cast<__int128>(value) * count;
  min_ = std::min(min_, value);
  max_ = std::max(max_, value);
}

void LogHistogram::merge(const LogHistogram& other) {
  for (int i = 0; i < kBuckets; ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

int64_t LogHistogram::quantile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  // Nearest rank: the smallest value with at least ceil(q * n) samples at or below it.
  int64_t rank = static_cast<int64_t>(std::ceil(q * static_cast<double>(count_)));
  rank = std::clamp<int64_t>(rank, 1, count_);
  int64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += counts_[b];
    if (seen >= rank) {
      const int64_t lo = bucket_lower(b);
      const int64_t hi = bucket_upper(b);
      const int64_t mid = hi - lo <= 1 ? lo : lo + (hi - lo) / 2;
      return std::clamp(mid, min_, max_);
    }
  }
  return max_;
}

std::vector<LogHistogram::Bin> LogHistogram::bins() const {
  std::vector<Bin> out;
  for (int b = 0; b < kBuckets; ++b) {
    if (counts_[b] != 0) out.push_back({bucket_lower(b), bucket_upper(b), counts_[b]});
  }
  return out;
}

void TimeCounts::add(int64_t t) {
  assert(t >= 0);
  while (t / width_ >= kBins) {
    for (int b = 0; b < kBins / 2; ++b) bins_[b] = bins_[2 * b] + bins_[2 * b + 1];
    std::fill(bins_.begin() + kBins / 2, bins_.end(), 0);
    width_ *= 2;
  }
  bins_[static_cast<size_t>(t / width_)]++;
  total_++;
}

double TimeCounts::count_at_or_below(int64_t t) const {
  if (t < 0) return 0;
  const int64_t bin = t / width_;
  if (bin >= kBins) return static_cast<double>(total_);
  double below = 0;
  for (int64_t b = 0; b < bin; ++b) below += static_cast<double>(bins_[static_cast<size_t>(b)]);
  // Times in bin `bin` spread evenly over [bin x width, (bin + 1) x width).
  const double inside = static_cast<double>(t - bin * width_ + 1) / static_cast<double>(width_);
  return below + inside * static_cast<double>(bins_[static_cast<size_t>(bin)]);
}

double TimeCounts::count_in(int64_t lo, int64_t hi) const {
  if (hi <= lo) return 0;
  return count_at_or_below(hi) - count_at_or_below(lo);
}

}  // namespace servesim
