#include "reports/memory_sink.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace servesim::reports {
namespace {

TEST(MemorySinkTest, KeepsRecordsInOrder) {
  MemorySink sink;
  sim::RecordListener& listener = sink;
  sim::RequestRecord r;
  r.request_id = 7;
  r.token_times_ns = {10, 20};
  listener.on_request(r);
  listener.on_sample({.t_ns = 5, .entity = "cluster", .metric = "waiting", .value = 3});
  listener.on_sample({.t_ns = 6, .entity = "instance/0", .metric = "running", .value = 1.5});
  ASSERT_EQ(sink.requests.size(), 1u);
  EXPECT_EQ(sink.requests[0].request_id, 7);
  EXPECT_EQ(sink.requests[0].token_times_ns, (std::vector<int64_t>{10, 20}));
  ASSERT_EQ(sink.samples.size(), 2u);
  EXPECT_EQ(sink.samples[1].entity, "instance/0");
  EXPECT_DOUBLE_EQ(sink.samples[1].value, 1.5);
  sink.clear();
  EXPECT_TRUE(sink.requests.empty());
  EXPECT_TRUE(sink.samples.empty());
}

// A sample keeps at most its size, the same requests for the same seed, a superset when larger,
// in the order offered; below its size it keeps everything.
TEST(RecordSampleTest, BottomKByHashInOfferOrder) {
  const auto sample_of = [](int64_t size, uint64_t seed, int64_t offered) {
    RecordSample sample(size, seed);
    for (int64_t id = offered - 1; id >= 0; --id) {  // offered in descending id order
      sim::RequestRecord r;
      r.request_id = id;
      sample.offer(r);
    }
    std::vector<RequestId> ids;
    for (const sim::RequestRecord& r : sample.take()) ids.push_back(r.request_id);
    return ids;
  };
  const std::vector<RequestId> small = sample_of(100, 7, 10'000);
  ASSERT_EQ(small.size(), 100u);
  EXPECT_TRUE(std::is_sorted(small.rbegin(), small.rend()));  // the order they were offered
  EXPECT_EQ(sample_of(100, 7, 10'000), small);
  EXPECT_NE(sample_of(100, 8, 10'000), small);
  std::vector<RequestId> large = sample_of(1'000, 7, 10'000);
  ASSERT_EQ(large.size(), 1'000u);
  std::sort(large.begin(), large.end());
  for (const RequestId id : small) EXPECT_TRUE(std::binary_search(large.begin(), large.end(), id));
  // Uniform: a tenth of the sample in each tenth of the ids, roughly.
  const auto low =
      std::count_if(large.begin(), large.end(), [](RequestId id) { return id < 1000; });
  EXPECT_GT(low, 60);
  EXPECT_LT(low, 140);
  EXPECT_EQ(sample_of(100, 7, 30).size(), 30u);
}

}  // namespace
}  // namespace servesim::reports
