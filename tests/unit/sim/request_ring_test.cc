#include "sim/request_ring.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace servesim::sim::detail {
namespace {

TEST(RequestRing, HoldsIdsFromTheOldestLiveToTheNewestAdmitted) {
  RequestRing<int64_t> ring;
  ring.admit(0);
  ring.admit(3);  // 1 and 2 get slots too
  EXPECT_TRUE(ring.contains(1));
  EXPECT_EQ(ring[2], 0);  // value-initialised
  for (RequestId id = 0; id <= 3; ++id) ring[id] = 100 + id;
  ring.admit(1);  // already held: unchanged
  EXPECT_EQ(ring[1], 101);
  ring.retire(1);  // 0 still live: nothing freed
  EXPECT_EQ(ring.base(), 0);
  EXPECT_EQ(ring[2], 102);
  ring.retire(0);  // 0 and the retired 1 go
  EXPECT_EQ(ring.base(), 2);
  EXPECT_FALSE(ring.contains(1));
  EXPECT_TRUE(ring.contains(3));
  EXPECT_FALSE(ring.contains(4));
}

TEST(RequestRing, SizeFollowsTheIdsInFlightNotTheRun) {
  RequestRing<int64_t> ring;
  // A million requests, at most 100 in flight: the ring never grows past its first size.
  for (RequestId id = 0; id < 1'000'000; ++id) {
    ring.admit(id);
    ring[id] = id * 7;
    if (id >= 100) {
      EXPECT_EQ(ring[id - 100], (id - 100) * 7) << id;  // reused slots never alias a live id
      ring.retire(id - 100);
    }
  }
  EXPECT_EQ(ring.capacity(), 1024u);
  EXPECT_EQ(ring.base(), 1'000'000 - 100);
}

TEST(RequestRing, GrowingKeepsEveryLiveValue) {
  RequestRing<int64_t> ring;
  ring.admit(500);
  ring.retire(0);  // base 1; ids 1..500 live, then a long-lived request holds id 1
  for (RequestId id = 2; id <= 500; ++id) ring[id] = id;
  for (RequestId id = 2; id <= 200; ++id) ring.retire(id);
  for (RequestId id = 501; id < 5'000; ++id) {
    ring.admit(id);
    ring[id] = id;
    ring.retire(id - 300);  // all but id 1 retire 300 ids after they came
  }
  EXPECT_EQ(ring.base(), 1);  // id 1 still live: every later id is held
  EXPECT_GE(ring.capacity(), 5'000u);
  for (RequestId id = 4'700; id < 5'000; ++id) EXPECT_EQ(ring[id], id);
  ring.retire(1);
  EXPECT_EQ(ring.base(), 4'700);
}

}  // namespace
}  // namespace servesim::sim::detail
