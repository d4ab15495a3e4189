// IterationCounts (sim/engine.h): runs of equal values counted together give the bins of counting
// each value on its own, whenever the bins are read.
#include <cstdint>
#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "core/histogram.h"
#include "sim/engine.h"

namespace servesim::sim {
namespace {

// The bins of `values` counted one by one into LogHistogram buckets, as (lower bound, count).
std::map<int64_t, int64_t> reference_bins(const std::vector<int64_t>& values) {
  std::map<int64_t, int64_t> bins;
  for (const int64_t v : values) bins[LogHistogram::bucket_lower(LogHistogram::bucket_of(v))]++;
  return bins;
}

std::map<int64_t, int64_t> bins_of(const IterationCounts& counts) {
  std::map<int64_t, int64_t> bins;
  for (const LogHistogram::Bin& b : counts.bins()) bins[b.lower] += b.count;
  return bins;
}

TEST(IterationCounts, RunsOfEqualValuesCountAsEachValueAlone) {
  const std::vector<int64_t> values = {121, 121, 121, 122, 121, 5000, 5001, 5001, 0, 0, 7, 121};
  IterationCounts counts;
  std::vector<int64_t> seen;
  for (const int64_t v : values) {
    counts.add(v);
    seen.push_back(v);
    // Read in the middle of a run too: the run so far is in the bins, and reading changes nothing.
    ASSERT_EQ(bins_of(counts), reference_bins(seen)) << "after " << seen.size() << " values";
  }
  EXPECT_EQ(bins_of(counts), reference_bins(values));
  EXPECT_EQ(bins_of(counts)[LogHistogram::bucket_lower(LogHistogram::bucket_of(121))], 5);
}

TEST(IterationCounts, NothingCountedHasNoBins) {
  const IterationCounts counts;
  EXPECT_TRUE(counts.bins().empty());
}

}  // namespace
}  // namespace servesim::sim
