#include "reports/miss_breakdown.h"

#include <gtest/gtest.h>

namespace servesim::reports {
namespace {

constexpr int64_t kMs = 1'000'000;
using sim::InstanceRole;

// A request of `output` tokens arriving at `arrival_ms`, first scheduled `wait_ms` later, its first
// token `prefill_ms` after that and then one token every `tpot_ms`, all on instance `instance`.
sim::RequestRecord request(RequestId id, int32_t instance, int64_t arrival_ms, int64_t wait_ms,
                           int64_t prefill_ms, int64_t output, int64_t tpot_ms) {
  sim::RequestRecord r;
  r.request_id = id;
  r.instance_id = instance;
  r.prefill_instance_id = instance;
  r.arrival_ns = arrival_ms * kMs;
  r.first_scheduled_ns = r.arrival_ns + wait_ms * kMs;
  r.first_token_ns = r.first_scheduled_ns + prefill_ms * kMs;
  r.done_ns = r.first_token_ns + (output - 1) * tpot_ms * kMs;
  r.prompt_tokens = 1000;
  r.output_tokens = output;
  return r;
}

sim::SloSpec slo() {
  sim::SloSpec s;
  s.ttft = Duration{2000 * kMs};
  s.tpot = Duration{50 * kMs};
  return s;
}

// Instance 0: prefill (TP 1) from the start; 1: decode (TP 2) from the start; 2: prefill added at
// 10 s, active at 40 s; 3: decode added at 100 s, active at 160 s, retired at 300 s.
std::vector<InstanceLife> elastic_cluster() {
  return {{InstanceRole::kPrefill, 1, 0, 0, -1, -1},
          {InstanceRole::kDecode, 2, 0, 0, -1, -1},
          {InstanceRole::kPrefill, 1, 10'000 * kMs, 40'000 * kMs, -1, -1},
          {InstanceRole::kDecode, 2, 100'000 * kMs, 160'000 * kMs, 250'000 * kMs, 300'000 * kMs}};
}

MissCause only_cause(const MissBreakdown& b) {
  EXPECT_EQ(b.misses.size(), 1u);
  return b.misses.empty() ? MissCause::kUndersizedPool : b.misses.front().cause;
}

TEST(ExplainMisses, RequestsWithinTheSloAreNotMisses) {
  const MissBreakdown b =
      explain_misses({request(0, 0, 0, 100, 200, 10, 40)}, elastic_cluster(), slo(), 8);
  EXPECT_EQ(b.requests, 1);
  EXPECT_EQ(b.missed, 0);
  EXPECT_TRUE(b.misses.empty());
}

TEST(ExplainMisses, TtftCausesInRuleOrder) {
  const auto cluster = elastic_cluster();
  // Prefilled on the decode instance.
  EXPECT_EQ(only_cause(explain_misses({request(0, 1, 0, 2500, 100, 1, 0)}, cluster, slo(), 8)),
            MissCause::kLocalPrefill);
  // Preempted.
  sim::RequestRecord preempted = request(0, 0, 0, 2500, 100, 1, 0);
  preempted.preemptions = 1;
  EXPECT_EQ(only_cause(explain_misses({preempted}, cluster, slo(), 8)), MissCause::kKvPressure);
  // Its prefill alone takes longer than the objective.
  EXPECT_EQ(only_cause(explain_misses({request(0, 0, 0, 10, 2100, 1, 0)}, cluster, slo(), 8)),
            MissCause::kSlowPrefill);
  // Waited from 5 s to 12 s, while instance 2 was starting (10 s .. 40 s).
  EXPECT_EQ(only_cause(explain_misses({request(0, 0, 5'000, 7'000, 100, 1, 0)}, cluster, slo(), 8)),
            MissCause::kScaleUpLag);
  // Waited from 50 s: nothing starting; instances 0..2 hold 4 GPUs, one more prefill GPU fits a
  // budget of 5 but not of 4.
  const sim::RequestRecord late = request(0, 0, 50'000, 3'000, 100, 1, 0);
  EXPECT_EQ(only_cause(explain_misses({late}, cluster, slo(), 5)), MissCause::kUndersizedPool);
  EXPECT_EQ(only_cause(explain_misses({late}, cluster, slo(), 4)), MissCause::kGpuBudget);
  EXPECT_EQ(only_cause(explain_misses({late}, cluster, slo(), std::nullopt)),
            MissCause::kUndersizedPool);
}

TEST(ExplainMisses, TpotCausesFromTheExcessTime) {
  const auto cluster = elastic_cluster();
  // 101 tokens at 60 ms: 6000 ms of decode against 5000 ms allowed, an excess of 1000 ms.
  sim::RequestRecord r = request(0, 1, 50'000, 10, 100, 101, 60);
  r.prefill_instance_id = 0;
  EXPECT_EQ(only_cause(explain_misses({r}, cluster, slo(), 8)), MissCause::kUndersizedPool);
  // Interference of 600 ms and a hand-off of 500 ms: together they cover the excess; the
  // interference is the larger.
  r.interference_ns = 600 * kMs;
  r.kv_arrived_ns = r.first_token_ns + 500 * kMs;
  EXPECT_EQ(only_cause(explain_misses({r}, cluster, slo(), 8)), MissCause::kPrefillInterference);
  r.interference_ns = 400 * kMs;
  r.kv_arrived_ns = r.first_token_ns + 700 * kMs;
  EXPECT_EQ(only_cause(explain_misses({r}, cluster, slo(), 8)), MissCause::kKvPressure);
  // Together short of the excess: the decode pool over [kv arrival, done] decides.
  r.interference_ns = 100 * kMs;
  r.kv_arrived_ns = r.first_token_ns + 100 * kMs;
  EXPECT_EQ(only_cause(explain_misses({r}, cluster, slo(), 8)), MissCause::kUndersizedPool);
  // The same decode span while decode instance 3 was starting (100 s .. 160 s).
  sim::RequestRecord starting = request(0, 1, 120'000, 10, 100, 101, 60);
  EXPECT_EQ(only_cause(explain_misses({starting}, cluster, slo(), 8)), MissCause::kScaleUpLag);
  // Other requests' recomputation in its decode steps counts with the hand-off.
  r.recompute_ns = 500 * kMs;
  r.interference_ns = 600 * kMs;
  EXPECT_EQ(only_cause(explain_misses({r}, cluster, slo(), 8)), MissCause::kKvPressure);
  // Preempted: KV pressure whatever the rest.
  r.preemptions = 2;
  EXPECT_EQ(only_cause(explain_misses({r}, cluster, slo(), 8)), MissCause::kKvPressure);
}

TEST(ExplainMisses, BothObjectivesCountedOnceAsARequestAndWarmupLeftOut) {
  const auto cluster = elastic_cluster();
  sim::RequestRecord both = request(0, 0, 50'000, 3'000, 100, 101, 60);
  sim::RequestRecord warm = request(1, 0, 50'000, 3'000, 100, 101, 60);
  warm.warmup = true;
  const MissBreakdown b = explain_misses({both, warm}, cluster, slo(), 8);
  EXPECT_EQ(b.requests, 1);
  EXPECT_EQ(b.missed, 1);
  EXPECT_EQ(b.ttft_missed, 1);
  EXPECT_EQ(b.tpot_missed, 1);
  ASSERT_EQ(b.misses.size(), 2u);
  EXPECT_EQ(b.misses[0].objective, Objective::kTtft);
  EXPECT_EQ(b.misses[1].objective, Objective::kTpot);
  EXPECT_EQ(b.ttft_by_cause[static_cast<int>(MissCause::kUndersizedPool)], 1);
  EXPECT_EQ(b.tpot_by_cause[static_cast<int>(MissCause::kUndersizedPool)], 1);
  const std::string table = format_miss_breakdown(b);
  EXPECT_NE(table.find("1 of 1 requests missed: 1 TTFT, 1 TPOT"), std::string::npos) << table;
  EXPECT_NE(table.find("undersized_pool            1  100.0 %      1  100.0 %"),
            std::string::npos)
      << table;
}

// A request with more than 1 % of its gaps above the TBT p99 objective misses it (objectives_met's
// rule), traced on what makes long gaps; its table gets a TBT column.
TEST(ExplainMisses, TbtP99MissesAreTracedOnTheirStalls) {
  const auto cluster = elastic_cluster();
  sim::SloSpec s;
  s.tbt_p99 = Duration{100 * kMs};
  sim::RequestRecord r = request(0, 0, 50'000, 0, 100, 201, 40);  // 200 gaps
  r.tbt_slo_violations = 2;  // 1 % of 200: still met
  MissBreakdown b = explain_misses({r}, cluster, s, 8);
  EXPECT_EQ(b.tbt_missed, 0);
  EXPECT_TRUE(b.misses.empty());
  r.tbt_slo_violations = 3;  // over 1 %, no stall recorded: its decode steps were too slow
  EXPECT_EQ(only_cause(explain_misses({r}, cluster, s, 8)), MissCause::kUndersizedPool);
  r.interference_ns = 300 * kMs;  // prompt chunks in its decode steps
  b = explain_misses({r}, cluster, s, 8);
  EXPECT_EQ(only_cause(b), MissCause::kPrefillInterference);
  EXPECT_EQ(b.misses.front().objective, Objective::kTbt);
  EXPECT_EQ(b.tbt_missed, 1);
  EXPECT_EQ(b.missed, 1);
  EXPECT_EQ(b.tbt_by_cause[static_cast<int>(MissCause::kPrefillInterference)], 1);
  const std::string table = format_miss_breakdown(b);
  EXPECT_NE(table.find("1 of 1 requests missed: 0 TTFT, 0 TPOT, 1 TBT p99"), std::string::npos)
      << table;
  EXPECT_NE(table.find("prefill_interference       0    0.0 %      0    0.0 %      1  100.0 %"),
            std::string::npos)
      << table;
  r.recompute_ns = 400 * kMs;  // others' recomputation took longer
  EXPECT_EQ(only_cause(explain_misses({r}, cluster, s, 8)), MissCause::kKvPressure);
  // Without a TBT objective, no TBT column.
  EXPECT_EQ(format_miss_breakdown(explain_misses({r}, cluster, slo(), 8)).find("TBT"),
            std::string::npos);
  EXPECT_EQ(std::string(objective_name(Objective::kTbt)), "tbt");
}

TEST(ExplainMisses, AnInstanceOutsideTheClusterIsAnError) {
  EXPECT_THROW(explain_misses({request(0, 7, 0, 2500, 100, 1, 0)}, elastic_cluster(), slo(), 8),
               std::invalid_argument);
}

}  // namespace
}  // namespace servesim::reports
