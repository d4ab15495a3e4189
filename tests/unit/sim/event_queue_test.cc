// One test per ordering rule of the event queue (sim/event_queue.h).
#include "sim/event_queue.h"

#include <gtest/gtest.h>

namespace servesim::sim {
namespace {

Event at(int64_t t_ns, Phase phase, int32_t target = 0) {
  Event e;
  e.time = time_from_ns(t_ns);
  e.phase = phase;
  e.target = target;
  return e;
}

TEST(EventQueue, EarlierTimeFirstWhateverThePhase) {
  EventQueue q;
  q.push(at(200, Phase::kComplete));
  q.push(at(100, Phase::kStop));
  EXPECT_EQ(to_ns(q.pop().time), 100);
  EXPECT_EQ(to_ns(q.pop().time), 200);
}

TEST(EventQueue, AtEqualTimeCompletionsPrecedeArrivalsAndScheduling) {
  EventQueue q;
  q.push(at(50, Phase::kSchedule));
  q.push(at(50, Phase::kArrive));
  q.push(at(50, Phase::kComplete));
  EXPECT_EQ(q.pop().phase, Phase::kComplete);
  EXPECT_EQ(q.pop().phase, Phase::kArrive);
  EXPECT_EQ(q.pop().phase, Phase::kSchedule);
}

TEST(EventQueue, PhaseOrderIsCompleteTransferArriveRouteScheduleSampleStop) {
  EventQueue q;
  const Phase order[] = {Phase::kComplete, Phase::kTransferDone, Phase::kArrive, Phase::kRoute,
                         Phase::kSchedule, Phase::kSample,       Phase::kStop};
  for (int i = 6; i >= 0; --i) q.push(at(7, order[i]));
  for (Phase expected : order) EXPECT_EQ(q.pop().phase, expected) << phase_name(expected);
  EXPECT_TRUE(q.empty());
}

TEST(EventQueue, AtEqualTimeAndPhaseInsertionOrder) {
  EventQueue q;
  for (int32_t target = 0; target < 100; ++target) q.push(at(5, Phase::kSchedule, target));
  for (int32_t target = 0; target < 100; ++target) EXPECT_EQ(q.pop().target, target);
}

TEST(EventQueue, SequenceNumbersArePerQueueNotGlobal) {
  EventQueue a, b;
  a.push(at(1, Phase::kArrive));
  a.push(at(1, Phase::kArrive));
  EXPECT_EQ(b.push(at(1, Phase::kArrive)), 0u);
  EXPECT_EQ(a.pop().seq, 0u);
}

TEST(EventQueue, NegativeTimesFireBeforeLaterOnes) {
  EventQueue q;
  q.push(at(3, Phase::kComplete));
  q.push(at(0, Phase::kStop));
  q.push(at(-5, Phase::kStop));
  EXPECT_EQ(to_ns(q.pop().time), -5);
  EXPECT_EQ(to_ns(q.pop().time), 0);
  EXPECT_EQ(to_ns(q.pop().time), 3);
}

// The order spelled out: time, then phase, then sequence number.
bool fires_before_reference(const Event& a, const Event& b) {
  if (a.time != b.time) return a.time < b.time;
  if (a.phase != b.phase) return a.phase < b.phase;
  return a.seq < b.seq;
}

TEST(EventQueue, ManyRandomEventsComeOutSorted) {
  EventQueue q;
  uint64_t x = 12345;
  for (int i = 0; i < 10000; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    // Times on both sides of zero, many of them equal.
    q.push(at(static_cast<int64_t>(x >> 50) - 8000, static_cast<Phase>((x >> 20) % 7)));
  }
  Event prev = q.pop();
  while (!q.empty()) {
    Event e = q.pop();
    ASSERT_TRUE(fires_before_reference(prev, e));
    EXPECT_TRUE(fires_before(prev, e));
    EXPECT_FALSE(fires_before(e, prev));
    prev = e;
  }
}

}  // namespace
}  // namespace servesim::sim
