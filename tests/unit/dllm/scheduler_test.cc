#include "dllm/scheduler.h"

#include <gtest/gtest.h>

namespace servesim::dllm {
namespace {

QueuedRequest refresh(int64_t L, int64_t pages = 1) { return {L, true, 32, pages}; }
QueuedRequest reuse(int64_t L, int64_t pages = 1) { return {L, false, 32, pages}; }

TEST(Scheduler, ReuseRequestsFreeBudgetForAdmissions) {
  const SchedulerKnobs k{4000, 512, true};
  // Three running requests in Reuse cost 32 each; two waiting 1000-token requests both fit.
  const auto d = schedule_pass({reuse(1000), reuse(1000), reuse(1000)},
                               {refresh(1000), refresh(1000)}, 10, k);
  EXPECT_EQ(d.run_prefix, 3);
  EXPECT_EQ(d.admit_prefix, 2);
  EXPECT_EQ(d.query_tokens, 96 + 2000);
  EXPECT_EQ(d.pages, 2);
}

TEST(Scheduler, StrictFcfsStopsAtFirstRunningMisfit) {
  const SchedulerKnobs k{4000, 512, true};
  // 3000 + 1500 > 4000: the second running request is skipped, and so is the third even though
  // it would fit (strict FCFS); the left-over budget still admits a small waiting request.
  const auto d = schedule_pass({refresh(3000), refresh(1500), reuse(600)}, {refresh(900)}, 10, k);
  EXPECT_EQ(d.run_prefix, 1);
  EXPECT_EQ(d.admit_prefix, 1);
  EXPECT_EQ(d.query_tokens, 3900);
}

TEST(Scheduler, AdmissionStopsAtFirstWaitingMisfitOrPageShortage) {
  const SchedulerKnobs k{4000, 512, true};
  auto d = schedule_pass({}, {refresh(3000), refresh(1500), refresh(500)}, 10, k);
  EXPECT_EQ(d.admit_prefix, 1);  // 1500 does not fit; 500 behind it waits
  d = schedule_pass({}, {refresh(500, 2), refresh(500, 2), refresh(500, 1)}, 3, k);
  EXPECT_EQ(d.admit_prefix, 1);  // only 1 page left for the second request
  EXPECT_EQ(d.pages, 2);
}

TEST(Scheduler, MaxNumSeqsBoundsBothStages) {
  const SchedulerKnobs k{100000, 3, true};
  const auto d = schedule_pass({reuse(500), reuse(500)}, {refresh(500), refresh(500)}, 10, k);
  EXPECT_EQ(d.run_prefix, 2);
  EXPECT_EQ(d.admit_prefix, 1);
}

TEST(Scheduler, WithoutPhaseAwarenessReuseCostsTheWholeSequence) {
  const SchedulerKnobs aware{4000, 512, true};
  const SchedulerKnobs peak{4000, 512, false};
  EXPECT_EQ(scheduled_cost(reuse(1000), aware), 32);
  EXPECT_EQ(scheduled_cost(reuse(1000), peak), 1000);
  const auto d = schedule_pass({reuse(1000), reuse(1000), reuse(1000)}, {refresh(1000)}, 10, peak);
  EXPECT_EQ(d.run_prefix, 3);
  EXPECT_EQ(d.admit_prefix, 1);
  EXPECT_EQ(d.query_tokens, 4000);
  const auto e =
      schedule_pass({reuse(1000), reuse(1000), reuse(1000)}, {refresh(1001)}, 10, peak);
  EXPECT_EQ(e.admit_prefix, 0);
}

}  // namespace
}  // namespace servesim::dllm
