#include "policies/routers.h"

#include <algorithm>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

namespace servesim::policies {
namespace {

using sim::InstanceLoad;

InstanceLoad load(int32_t id) {
  InstanceLoad l;
  l.instance_id = id;
  l.total_blocks = 100;
  return l;
}

std::vector<InstanceLoad> loads(int n) {
  std::vector<InstanceLoad> out;
  for (int i = 0; i < n; ++i) out.push_back(load(i));
  return out;
}

int32_t route(sim::RoutingPolicy& router, const std::vector<InstanceLoad>& instances) {
  const sim::ClusterView view{time_from_ns(0), &instances, 16};
  return router.route(view, RequestSpec{});
}

TEST(RoundRobin, CyclesOverInstancesInIndexOrder) {
  auto router = make_round_robin();
  const auto inst = loads(3);
  std::vector<int32_t> picks;
  for (int i = 0; i < 7; ++i) picks.push_back(route(*router, inst));
  EXPECT_EQ(picks, (std::vector<int32_t>{0, 1, 2, 0, 1, 2, 0}));
}

TEST(RoundRobin, SkipsInstancesThatAreNotAccepting) {
  auto router = make_round_robin();
  auto inst = loads(3);
  inst[1].accepting = false;
  std::vector<int32_t> picks;
  for (int i = 0; i < 5; ++i) picks.push_back(route(*router, inst));
  EXPECT_EQ(picks, (std::vector<int32_t>{0, 2, 0, 2, 0}));
}

TEST(RoundRobin, IgnoresLoad) {
  auto router = make_round_robin();
  auto inst = loads(2);
  inst[0].outstanding = 1000;
  inst[0].used_blocks = 100;
  EXPECT_EQ(route(*router, inst), 0);
  EXPECT_EQ(route(*router, inst), 1);
  EXPECT_EQ(route(*router, inst), 0);
}

TEST(RoundRobin, ThrowsWithoutAnAcceptingInstance) {
  auto router = make_round_robin();
  auto inst = loads(2);
  inst[0].accepting = inst[1].accepting = false;
  EXPECT_THROW(route(*router, inst), std::logic_error);
}

TEST(LeastOutstanding, PicksTheFewestOutstanding) {
  auto router = make_least_outstanding();
  auto inst = loads(4);
  inst[0].outstanding = 3;
  inst[1].outstanding = 2;
  inst[2].outstanding = 0;
  inst[3].outstanding = 1;
  // Waiting, running and KV use play no part.
  inst[2].waiting = 50;
  inst[2].used_blocks = 99;
  EXPECT_EQ(route(*router, inst), 2);
}

TEST(LeastOutstanding, TiesGoToTheLowestIndex) {
  auto router = make_least_outstanding();
  auto inst = loads(4);
  inst[0].outstanding = 3;
  inst[1].outstanding = 1;
  inst[2].outstanding = 1;
  inst[3].outstanding = 1;
  EXPECT_EQ(route(*router, inst), 1);
  EXPECT_EQ(route(*router, inst), 1);  // the same choice again
}

TEST(LeastOutstanding, SkipsInstancesThatAreNotAccepting) {
  auto router = make_least_outstanding();
  auto inst = loads(4);
  inst[0].outstanding = 3;
  inst[1].outstanding = 1;
  inst[1].accepting = false;
  inst[2].outstanding = 2;
  inst[3].outstanding = 2;
  EXPECT_EQ(route(*router, inst), 2);
  for (auto& l : inst) l.accepting = false;
  EXPECT_THROW(route(*router, inst), std::logic_error);
}

// The rule the router implements, as a plain scan: the accepting instance with the fewest
// outstanding requests, the lowest index among ties.
int32_t least_outstanding_by_scan(const std::vector<InstanceLoad>& instances) {
  int32_t best = -1;
  for (size_t i = 0; i < instances.size(); ++i) {
    if (!instances[i].accepting) continue;
    if (best < 0 || instances[i].outstanding < instances[static_cast<size_t>(best)].outstanding) {
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

// The engine names the instances it rewrote since the previous route (ClusterView::changed); the
// router then updates only those. Over a random walk of loads on 37 instances (one change at a
// time, a burst of many, instances leaving and coming back, the fleet growing), every choice is
// the scan's, and the one a fresh router makes from the whole list.
TEST(LeastOutstanding, UpdatingTheChangedInstancesChoosesAsAFullScan) {
  auto incremental = make_least_outstanding();
  auto inst = loads(37);
  std::mt19937 rng(7);
  std::vector<int32_t> changed;
  for (int step = 0; step < 3000; ++step) {
    changed.clear();
    const int edits = step % 97 == 0 ? 20 : 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const int32_t i = static_cast<int32_t>(rng() % inst.size());
      inst[static_cast<size_t>(i)].outstanding = static_cast<int64_t>(rng() % 6);
      inst[static_cast<size_t>(i)].accepting = rng() % 10 != 0;
      if (std::find(changed.begin(), changed.end(), i) == changed.end()) changed.push_back(i);
    }
    if (step == 2000) {
      inst.push_back(load(static_cast<int32_t>(inst.size())));  // every entry is new
      changed.clear();
    }
    inst[static_cast<size_t>(step % 5)].accepting = true;  // never none accepting
    if (std::find(changed.begin(), changed.end(), step % 5) == changed.end()) {
      changed.push_back(step % 5);
    }
    const sim::ClusterView view{time_from_ns(0), &inst, 16, nullptr, nullptr, &changed};
    const int32_t expected = least_outstanding_by_scan(inst);
    ASSERT_EQ(incremental->route(view, RequestSpec{}), expected) << "step " << step;
    auto fresh = make_least_outstanding();
    ASSERT_EQ(route(*fresh, inst), expected) << "step " << step;
  }
}

TEST(LeastKvLoad, UsesUsedPlusQueuedOverTotal) {
  auto router = make_least_kv_load();
  auto inst = loads(3);
  inst[0].used_blocks = 50;  // 0.50
  inst[1].used_blocks = 10;  // (10 + 50) / 100 = 0.60: fewest used, but queued prompts count
  inst[1].queued_prompt_blocks = 50;
  inst[2].total_blocks = 200;  // (60 + 0) / 200 = 0.30: most used, but the largest pool
  inst[2].used_blocks = 60;
  EXPECT_EQ(route(*router, inst), 2);
  inst[2].queued_prompt_blocks = 50;  // (60 + 50) / 200 = 0.55
  EXPECT_EQ(route(*router, inst), 0);
}

TEST(LeastKvLoad, TiesGoToTheLowestIndexAndNonAcceptingAreSkipped) {
  auto router = make_least_kv_load();
  auto inst = loads(3);
  inst[0].used_blocks = 40;
  inst[1].used_blocks = 20;  // 0.2
  inst[2].total_blocks = 50;
  inst[2].queued_prompt_blocks = 10;  // 0.2
  EXPECT_EQ(route(*router, inst), 1);
  inst[1].accepting = false;
  EXPECT_EQ(route(*router, inst), 2);
}

}  // namespace
}  // namespace servesim::policies
