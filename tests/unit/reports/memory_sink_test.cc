#include "reports/memory_sink.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace servesim::reports
