// DOPD and Dynamo-planner policy tests on hand-built inputs (no engine): the ARIMA forecaster, the
// P/D ratio (eq. 11-14) against a hand computation, target clamping, the length-aware prefill
// batcher, the DOPD router, and the dyn-load / dyn-sla scaling decisions.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <stdexcept>
#include <optional>

#include "policies/dopd/arima_forecaster.h"
#include "policies/dopd/dopd.h"
#include "policies/dopd/dopd_pool.h"
#include "policies/dopd/length_aware_batcher.h"
#include "policies/dopd/pd_ratio.h"
#include "policy_test_util.h"
#include "core/rng.h"

namespace servesim::policies::dopd {
namespace {

using testing::waiting_seq;

// ---- forecaster ----

TEST(Arima, RecoversAnAr1CoefficientFrom2000Points) {
  RngStream rng(7, "ar1");
  std::vector<double> y{10.0};
  for (int t = 1; t < 2000; ++t) y.push_back(4.0 + 0.6 * y.back() + rng.normal());
  const ArimaFit fit = fit_arima(y, 1, 0, 0);
  ASSERT_TRUE(fit.valid);
  EXPECT_NEAR(fit.ar[0], 0.6, 0.05);
  EXPECT_NEAR(fit.constant / (1 - fit.ar[0]), 10.0, 0.3);  // the process mean
  const ArimaFit chosen = select_arima(y, {.window = 2000});
  EXPECT_EQ(chosen.d, 0);
  ArimaForecaster f({.window = 2000});
  for (double v : y) f.add(v);
  // The one-step forecast is the conditional mean c + phi * y_last.
  EXPECT_NEAR(f.predict_next(), 4.0 + 0.6 * y.back(), 0.5);
}

TEST(Arima, ExtrapolatesALinearTrend) {
  ArimaForecaster exact;
  for (int t = 0; t < 30; ++t) exact.add(10.0 + 2.0 * t);
  EXPECT_NEAR(exact.predict_next(), 70.0, 1e-6);
  EXPECT_EQ(exact.model().d, 1);
  RngStream rng(3, "trend");
  ArimaForecaster noisy;
  for (int t = 0; t < 50; ++t) noisy.add(5.0 + 3.0 * t + 0.5 * rng.normal());
  EXPECT_NEAR(noisy.predict_next(), 5.0 + 3.0 * 50, 2.0);
}

TEST(Arima, FewerThanFivePointsGiveTheLastValue) {
  ArimaForecaster f;
  EXPECT_THROW(f.predict_next(), std::logic_error);
  f.add(3);
  f.add(9);
  f.add(4);
  f.add(12);
  EXPECT_EQ(f.predict_next(), 12);
  EXPECT_FALSE(f.model().valid);
  f.add(13);
  EXPECT_TRUE(f.model().valid);
}

TEST(Arima, ConstantSeriesForecastsTheConstant) {
  ArimaForecaster f;
  for (int t = 0; t < 20; ++t) f.add(42.5);
  EXPECT_EQ(f.predict_next(), 42.5);
  ArimaForecaster zeros;
  for (int t = 0; t < 20; ++t) zeros.add(0);
  EXPECT_EQ(zeros.predict_next(), 0);
}

TEST(Arima, BoundedForecastStaysNearTheWindow) {
  ArimaForecaster f;
  for (double v : {10.0, 12.0, 11.0, 13.0, 12.0, 14.0}) f.add(v);
  EXPECT_GE(f.predict_bounded(), 10.0 - 4.0);
  EXPECT_LE(f.predict_bounded(), 14.0 + 4.0);
  ArimaForecaster c;
  for (int t = 0; t < 8; ++t) c.add(3.0);
  EXPECT_EQ(c.predict_bounded(), 3.0);
}

// The bounded forecast is kept until the next observation: asking again costs no refit, and after
// each new observation the forecast is that of a forecaster never asked before.
TEST(Arima, BoundedForecastIsReusedUntilTheNextObservation) {
  ArimaForecaster asked;
  for (int i = 0; i < 30; ++i) {
    asked.add(100 + 10 * std::sin(0.7 * i) + i);
    const double first = asked.predict_bounded();
    EXPECT_EQ(asked.predict_bounded(), first);
  }
  asked.add(500);
  ArimaForecaster fresh;
  for (int i = 0; i < 30; ++i) fresh.add(100 + 10 * std::sin(0.7 * i) + i);
  fresh.add(500);
  EXPECT_EQ(asked.predict_bounded(), fresh.predict_bounded());
}

TEST(Arima, OnlyStationaryInvertibleFitsForecast) {
  // Requests per 20 s window at the start of the bursty Azure replay: an unconstrained fit of
  // these nine points is explosive and forecast 6 requests (after 217 observed).
  ArimaForecaster f;
  for (double v : {147.0, 224.0, 242.0, 288.0, 281.0, 263.0, 231.0, 223.0, 217.0}) f.add(v);
  const ArimaFit m = f.model();
  ASSERT_TRUE(m.valid);
  for (double a : m.ar) EXPECT_LT(std::abs(a), 1.0);
  for (double b : m.ma) EXPECT_LT(std::abs(b), 1.0);
  EXPECT_GT(f.predict_next(), 147.0);
  EXPECT_LT(f.predict_next(), 288.0);
}

TEST(Arima, KeepsOnlyTheWindow) {
  ArimaForecaster f({.window = 10});
  for (int t = 0; t < 100; ++t) f.add(t < 90 ? 1000.0 * (t % 7) : 5.0);
  EXPECT_EQ(f.size(), 10u);
  EXPECT_EQ(f.predict_next(), 5.0);
}

// The clairvoyant forecast: each window's true count and mean lengths from the workload's arrivals.
TEST(LoadForecast, OracleReadsEachWindowsArrivals) {
  Workload w;
  const std::vector<std::array<int64_t, 3>> rows = {
      {0, 100, 10}, {5, 200, 20}, {12, 300, 30}, {25, 400, 40}};  // arrival s, prompt, output
  for (const auto& [t, prompt, output] : rows) {
    RequestSpec r;
    r.id = static_cast<RequestId>(w.requests.size());
    r.arrival = SimTime{Duration{t * 1'000'000'000}};
    r.prompt_tokens = prompt;
    r.output_tokens = output;
    w.requests.push_back(r);
  }
  LoadForecaster f(50, 1000, 200, ForecastSource::kOracle);
  f.preview(&w);
  const Duration ten_s{10'000'000'000};
  const WindowStats observed;                              // the oracle ignores what was observed
  LoadForecast next = f.next(observed, kTimeZero, ten_s);  // [0, 10): the first two
  EXPECT_EQ(next.requests, 2);
  EXPECT_EQ(next.isl, 150);
  EXPECT_EQ(next.osl, 15);
  next = f.next(observed, kTimeZero + ten_s, ten_s);  // [10, 20): the one at 12 s
  EXPECT_EQ(next.requests, 1);
  EXPECT_EQ(next.isl, 300);
  next = f.next(observed, kTimeZero + Duration{25'000'000'000}, ten_s);  // [25, 35): from 25 s
  EXPECT_EQ(next.requests, 1);
  EXPECT_EQ(next.osl, 40);
  next = f.next(observed, kTimeZero + 4 * ten_s, ten_s);  // empty: the last window's lengths
  EXPECT_EQ(next.requests, 0);
  EXPECT_EQ(next.isl, 400);
  EXPECT_EQ(next.osl, 40);
}

TEST(LoadForecast, OracleRefusesSendTimesThatDependOnTheRun) {
  LoadForecaster oracle(50, 1000, 200, ForecastSource::kOracle);
  EXPECT_THROW(oracle.preview(nullptr), std::invalid_argument);
  LoadForecaster arima(50, 1000, 200);
  EXPECT_NO_THROW(arima.preview(nullptr));
  // Before any observation ARIMA forecasts no requests at the initial lengths.
  const LoadForecast f = arima.next(WindowStats{}, kTimeZero, Duration{10'000'000'000});
  EXPECT_EQ(f.requests, 0);
  EXPECT_EQ(f.isl, 1000);
  EXPECT_EQ(f.osl, 200);
}

// ---- ratio ----

// Prefill: 10 ms + 0.16 ms per token; decode step: 20 ms + 0.1 ms per request.
class LinearCost : public models::IterationCostModel {
 public:
  Duration iteration_time(const models::BatchShape& s) const override {
    if (s.segments.size() == 1 && s.segments[0].query_tokens > 1) {
      return duration_from_seconds(0.010 + 0.00016 * static_cast<double>(s.segments[0].query_tokens));
    }
    return duration_from_seconds(0.020 + 0.0001 * static_cast<double>(s.segments.size()));
  }
  models::OperatorTimes breakdown(const models::BatchShape&) const override { return {}; }
  Duration peak_bound_time(const models::BatchShape&) const override { return {}; }
  std::string describe() const override { return "linear"; }
};

TEST(PdRatio, MatchesAHandComputation) {
  LinearCost cost;
  RatioInputs in;
  in.prefill_cost = &cost;
  in.decode_cost = &cost;
  in.decode_num_blocks = 2040;
  in.block_size = 128;
  in.l_in = 1000;
  in.l_out = 200;
  in.tpot_slo = Duration{50'000'000};
  const RatioResult r = compute_pd_ratio(in);
  EXPECT_EQ(r.ctx_tokens, 1100);
  EXPECT_EQ(r.c_kv, 2040 / 9);  // ceil(1100 / 128) = 9 blocks per request -> 226
  EXPECT_EQ(r.c_bw, 300);       // 20 ms + 0.1 ms * 300 = 50 ms
  EXPECT_EQ(r.c_max, 226);
  EXPECT_NEAR(r.t_p_s, 0.170, 1e-9);
  EXPECT_NEAR(r.t_d_s, 0.0426, 1e-9);
  EXPECT_NEAR(r.ratio, 226 * 0.170 / (200 * 0.0426), 1e-6);  // 4.509

  // A tight SLO makes the decode instance bandwidth-bound.
  in.tpot_slo = Duration{30'000'000};
  const RatioResult tight = compute_pd_ratio(in);
  EXPECT_EQ(tight.c_bw, 100);
  EXPECT_EQ(tight.c_max, 100);
  EXPECT_NEAR(tight.ratio, 100 * 0.170 / (200 * 0.030), 1e-6);

  // eta derates, c_d scales T_d.
  in.tpot_slo.reset();
  in.eta = 0.5;
  in.decode_correction = 2.0;
  const RatioResult derated = compute_pd_ratio(in);
  EXPECT_EQ(derated.c_max, 113);
  EXPECT_NEAR(derated.t_d_s, 2 * (0.020 + 0.0113), 1e-9);
}

TEST(PdRatio, InstanceCountsFollowLittlesLaw) {
  RatioResult r;
  r.c_max = 200;
  r.t_p_s = 0.2;
  r.t_d_s = 0.05;
  r.ratio = 200 * 0.2 / (200 * 0.05);  // 4
  // 10 req/s: decode concurrency 10 * 200 * 0.05 = 100 -> half a decode instance, 2 prefills.
  InstanceCounts c = instance_counts(r, 10, 200);
  EXPECT_EQ(c.decode, 1);
  EXPECT_EQ(c.prefill, 2);
  c = instance_counts(r, 10, 200, 0.8);  // 2 / 0.8 = 2.5
  EXPECT_EQ(c.prefill, 3);
  c = instance_counts(r, 50, 200);  // concurrency 500 -> 3 decode, ceil(4 * 2.5) = 10 prefill
  EXPECT_EQ(c.decode, 3);
  EXPECT_EQ(c.prefill, 10);
  c = instance_counts(r, 0, 200);
  EXPECT_EQ(c.decode, 1);
  EXPECT_EQ(c.prefill, 1);
  c = released_instance_counts(r, 450);
  EXPECT_EQ(c.prefill, 4);
  EXPECT_EQ(c.decode, 3);
}

// ---- pools ----

std::vector<sim::InstanceLoad> pools(int prefill, int decode, int tp_decode = 2) {
  std::vector<sim::InstanceLoad> v;
  for (int i = 0; i < prefill + decode; ++i) {
    sim::InstanceLoad l;
    l.instance_id = i;
    l.role = i < prefill ? sim::InstanceRole::kPrefill : sim::InstanceRole::kDecode;
    l.tp = i < prefill ? 1 : tp_decode;
    l.total_blocks = 1000;
    v.push_back(l);
  }
  return v;
}

struct View {
  std::vector<sim::InstanceLoad> loads;
  std::vector<sim::ObservedArrival> arrivals;
  std::vector<sim::ObservedFinish> finished;
  sim::ControlView at(double t_s) const {
    return {kTimeZero + duration_from_seconds(t_s), &loads, &arrivals, &finished, 0};
  }
};

// The (prefill, decode) targets a budget rule makes of the requested ones.
using Targets = std::pair<int64_t, int64_t>;
template <typename Rule>
Targets clamped(Rule rule, const PoolState& pool, const ScalingLimits& lim, int64_t p, int64_t d) {
  rule(pool, lim, p, d);
  return {p, d};
}

ScalingLimits eight_gpus_two_per_decision() {
  ScalingLimits lim;
  lim.gpu_budget = 8;
  lim.max_change = 2;
  return lim;
}

TEST(Pools, ClampToChangeLimitAndBudget) {
  View v{pools(2, 1), {}, {}};
  const PoolState pool = pool_state(v.at(0));
  EXPECT_EQ(pool.prefill(), 2);
  EXPECT_EQ(pool.tp_decode, 2);
  const ScalingLimits lim = eight_gpus_two_per_decision();
  EXPECT_EQ(clamped(clamp_targets, pool, lim, 9, 1), Targets(4, 1));  // +2 at most
  // 4 + 6 = 10 GPUs > 8. Kept 2 P + 1 D = 4 GPUs, 4 free, one instance at a time to the pool
  // furthest below its target: D (2 missing of 1), P, P; a third D no longer fits: 8 GPUs.
  EXPECT_EQ(clamped(clamp_targets, pool, lim, 4, 3), Targets(4, 2));
  EXPECT_EQ(clamped(clamp_targets, pool, lim, 0, 0), Targets(1, 1));
}

TEST(Ratio, BurstBypassServesTheRateAndDrainsTheQueueWithinTheStartup) {
  // 10 req/s of 0.2 s prefills keep 2 instances busy; 150 queued prompts are 30 s of work, drained
  // in 30 s by one more: 3 busy instances, at rho 0.8 -> ceil(3.75) = 4.
  EXPECT_EQ(burst_prefill_instances(10, 0.2, 150, 30, 0.8), 4);
  EXPECT_EQ(burst_prefill_instances(10, 0.2, 150, 30, 1.0), 3);
  // No queue: the rate alone; nothing at all: none (the caller keeps at least the current pool).
  EXPECT_EQ(burst_prefill_instances(10, 0.2, 0, 30, 1.0), 2);
  EXPECT_EQ(burst_prefill_instances(0, 0.2, 0, 30, 0.8), 0);
  // A shorter drain time asks for more.
  EXPECT_EQ(burst_prefill_instances(10, 0.2, 150, 10, 1.0), 5);
}

TEST(Ratio, DecodeInstancesPrefillWhatTheirTokenBudgetLeavesWithinTheTpotSlo) {
  LinearCost cost;  // a mixed iteration of n segments: 20 ms + 0.1 ms * n
  const std::optional<Duration> slo = Duration{50'000'000};
  // 100 decodes leave 156 of 256 tokens for a 1000-token prompt's chunk: 101 segments, 30.1 ms.
  EXPECT_NEAR(local_prefill_tokens_per_s(cost, 256, 100, 1100, 1000, slo), 156 / 0.0301, 1e-6);
  // Fewer decodes leave a larger chunk.
  EXPECT_GT(local_prefill_tokens_per_s(cost, 256, 50, 1100, 1000, slo),
            local_prefill_tokens_per_s(cost, 256, 100, 1100, 1000, slo));
  // The chunk is at most the prompt: with no decodes a 100-token prompt runs whole (26 ms).
  EXPECT_NEAR(local_prefill_tokens_per_s(cost, 256, 0, 1100, 100, slo), 100 / 0.026, 1e-6);
  // Decodes filling the budget leave nothing; nor does a mixed iteration over the SLO.
  EXPECT_EQ(local_prefill_tokens_per_s(cost, 256, 256, 1100, 1000, slo), 0);
  EXPECT_EQ(local_prefill_tokens_per_s(cost, 256, 100, 1100, 1000, Duration{30'000'000}), 0);
  // Without a TPOT SLO only the budget limits it.
  EXPECT_GT(local_prefill_tokens_per_s(cost, 256, 100, 1100, 1000, std::nullopt), 0);
}

TEST(Pools, DynamoSlaPlannerScalesBothPoolsProportionallyOverBudget) {
  View v{pools(2, 1), {}, {}};
  const PoolState pool = pool_state(v.at(0));
  const ScalingLimits lim = eight_gpus_two_per_decision();
  // 4 + 6 = 10 GPUs > 8: scaled by 0.8 -> 3 P, 2 D = 7 GPUs
  EXPECT_EQ(clamped(clamp_targets_proportionally, pool, lim, 4, 3), Targets(3, 2));
  // At the budget (4 P + 2 D), a third decode instance is paid for by the prefill pool: 10 GPUs
  // asked, scaled by 0.8 -> 3 P, 2 D.
  View full{pools(4, 2), {}, {}};
  EXPECT_EQ(clamped(clamp_targets_proportionally, pool_state(full.at(0)), lim, 4, 3),
            Targets(3, 2));
}

TEST(Pools, OnePoolNeverShrinksToFundTheOthersGrowth) {
  // 4 P + 2 D = 8 GPUs, the whole budget. A burst asks for a third decode instance: nothing is
  // free, so the decode pool stays and the prefill pool is not drained to pay for it.
  View v{pools(4, 2), {}, {}};
  const PoolState pool = pool_state(v.at(0));
  const ScalingLimits lim = eight_gpus_two_per_decision();
  EXPECT_EQ(clamped(clamp_targets, pool, lim, 4, 3), Targets(4, 2));
  // Its own lower target still shrinks a pool, and the GPUs it frees fund the other's growth.
  EXPECT_EQ(clamped(clamp_targets, pool, lim, 2, 3), Targets(2, 3));
  // Draining GPUs count against the budget until they are gone.
  v.loads[0].state = sim::Lifecycle::kDraining;
  v.loads[1].state = sim::Lifecycle::kDraining;
  const PoolState draining = pool_state(v.at(0));
  EXPECT_EQ(clamped(clamp_targets, draining, lim, 2, 3), Targets(2, 2));
}

TEST(Monitor, SplitsOffThePromptsThePrefillPoolServes) {
  View v{pools(2, 1), {}, {}};
  for (const int64_t tokens : {100, 400, 512, 1500}) v.arrivals.push_back({kTimeZero, tokens});
  ResourceMonitor local(511);  // prompts up to 511 tokens are prefilled on decode instances
  local.observe(v.at(10));
  const WindowStats w = local.take(kTimeZero + duration_from_seconds(20));
  EXPECT_EQ(w.arrivals, 4);
  EXPECT_DOUBLE_EQ(w.mean_isl, 628);
  EXPECT_EQ(w.prefill_pool_arrivals, 2);
  EXPECT_DOUBLE_EQ(w.prefill_pool_mean_isl, 1006);
  EXPECT_DOUBLE_EQ(local.arrival_rate(kTimeZero + duration_from_seconds(20)), 0);  // window closed
  ResourceMonitor all;  // no local prefill: the prefill pool serves every prompt
  all.observe(v.at(10));
  EXPECT_DOUBLE_EQ(all.arrival_rate(kTimeZero + duration_from_seconds(20)), 0.2);
  const WindowStats a = all.take(kTimeZero + duration_from_seconds(20));
  EXPECT_EQ(a.prefill_pool_arrivals, 4);
  EXPECT_DOUBLE_EQ(a.prefill_pool_mean_isl, 628);
}

TEST(Pools, ScaleDownDrainsTheLeastLoadedAndKeepsOneActive) {
  View v{pools(3, 1), {}, {}};
  v.loads[0].outstanding = 5;
  v.loads[1].outstanding = 1;
  v.loads[2].outstanding = 1;
  sim::ScalingDecision d;
  move_to_targets(v.at(0), pool_state(v.at(0)), 1, 2, d);
  EXPECT_EQ(d.add_decode, 1);
  EXPECT_EQ(d.add_prefill, 0);
  EXPECT_EQ(d.drain, (std::vector<int32_t>{2, 1}));
}

// ---- length-aware batcher ----

sim::InstanceContext prefill_context(std::optional<Duration> ttft = std::nullopt) {
  static const auto cost = std::make_shared<LinearCost>();
  sim::InstanceContext ctx;
  ctx.role = sim::InstanceRole::kPrefill;
  ctx.cost_model = cost;
  ctx.slo.ttft = ttft;
  return ctx;
}

sim::SeqView at(sim::SeqView s, double arrival_s) {
  s.arrival = kTimeZero + duration_from_seconds(arrival_s);
  return s;
}

struct Batcher {
  std::shared_ptr<LengthForecast> forecast = std::make_shared<LengthForecast>();
  std::unique_ptr<sim::BatchingPolicy> policy;
  explicit Batcher(LengthAwareParams p = {}, double mean_isl = 1000) {
    forecast->mean_isl = mean_isl;
    if (!p.timeout) p.timeout = Duration{100'000'000};  // 100 ms
    policy = make_length_aware_batcher(p, prefill_context(), forecast);
  }
};

sim::InstanceView view_at(testing::Instance& inst, double now_s) {
  sim::InstanceView v = inst.view();
  v.now = kTimeZero + duration_from_seconds(now_s);
  return v;
}

TEST(LengthAware, LongPromptRunsAloneWhileShortOnesAccumulate) {
  testing::Instance inst;
  inst.waiting = {at(waiting_seq(1, 300), 1.0), at(waiting_seq(2, 1500), 1.0),
                  at(waiting_seq(3, 200), 1.0), at(waiting_seq(4, 2000), 1.0)};
  Batcher b;
  sim::BatchPlan plan;
  ASSERT_TRUE(b.policy->next_batch(view_at(inst, 1.01), plan));
  EXPECT_EQ(plan.admit, (std::vector<RequestId>{2}));
  ASSERT_EQ(plan.scheduled.size(), 1u);
  EXPECT_EQ(plan.scheduled[0].tokens, 1500);
}

TEST(LengthAware, ShortPromptsRunAsAKnapsackOnceTheyReachTheBudget) {
  testing::Instance inst;
  inst.waiting = {at(waiting_seq(1, 400), 1.0), at(waiting_seq(2, 300), 1.0),
                  at(waiting_seq(3, 500), 1.0), at(waiting_seq(4, 100), 1.0),
                  at(waiting_seq(5, 3000), 1.0)};
  Batcher b;
  sim::BatchPlan plan;
  // 1300 short tokens >= 1000: shortest first within 1000 tokens: 100 + 300 + 400 (500 does not fit).
  ASSERT_TRUE(b.policy->next_batch(view_at(inst, 1.01), plan));
  EXPECT_EQ(plan.admit, (std::vector<RequestId>{4, 2, 1}));
}

TEST(LengthAware, TimedOutShortPromptsGoFirstFcfs) {
  testing::Instance inst;
  inst.waiting = {at(waiting_seq(1, 600), 0.0), at(waiting_seq(2, 50), 0.95),
                  at(waiting_seq(3, 300), 0.95)};
  Batcher b;
  sim::BatchPlan plan;
  // At t = 1.0 s only request 1 has waited 100 ms: it is forced in, then the shortest that fit.
  ASSERT_TRUE(b.policy->next_batch(view_at(inst, 1.0), plan));
  EXPECT_EQ(plan.admit, (std::vector<RequestId>{1, 2, 3}));
}

TEST(LengthAware, WaitsAndAsksToBeWokenAtTheTimeout) {
  testing::Instance inst;
  inst.waiting = {at(waiting_seq(1, 200), 2.0), at(waiting_seq(2, 300), 2.02)};
  Batcher b;
  sim::BatchPlan plan;
  const sim::InstanceView v = view_at(inst, 2.05);
  EXPECT_FALSE(b.policy->next_batch(v, plan));
  EXPECT_TRUE(plan.empty());
  const auto wake = b.policy->wake_at(v);
  ASSERT_TRUE(wake.has_value());
  EXPECT_EQ(*wake, kTimeZero + duration_from_seconds(2.1));
  // The forecast threshold moves with the forecast mean ISL.
  b.forecast->mean_isl = 250;
  ASSERT_TRUE(b.policy->next_batch(v, plan));
  EXPECT_EQ(plan.admit, (std::vector<RequestId>{2}));
}

TEST(LengthAware, RespectsFreeKvBlocks) {
  testing::Instance inst;
  inst.free_blocks = 50;  // 800 tokens of 16-token blocks
  inst.waiting = {at(waiting_seq(1, 1200), 0.0), at(waiting_seq(2, 400), 0.0)};
  Batcher b;
  sim::BatchPlan plan;
  EXPECT_FALSE(b.policy->next_batch(view_at(inst, 0.01), plan));
  EXPECT_TRUE(plan.empty());
}

TEST(LengthAware, Eq17TimeoutShrinksWithLoad) {
  // rho = 0: T_max = beta * SLO - E[S]
  EXPECT_NEAR(length_aware_timeout_s(0.5, 2.0, 0.0, 0.2, 1, 1), 0.8, 1e-12);
  // rho = 0.5: W_q = 1 * 1 * 0.2
  EXPECT_NEAR(length_aware_timeout_s(0.5, 2.0, 2.5, 0.2, 1, 1), 0.6, 1e-12);
  EXPECT_EQ(length_aware_timeout_s(0.5, 2.0, 4.9, 0.2, 1, 1), 0.0);
}

// ---- router ----

TEST(DopdRouter, ShortPromptsGoToTheLeastLoadedDecodeInstance) {
  auto loads = pools(2, 2);
  for (auto& l : loads) l.accepting = true;
  loads[2].used_blocks = 600;
  loads[3].used_blocks = 100;
  loads[0].queued_prompt_blocks = 80;
  loads[1].queued_prompt_blocks = 10;
  sim::ClusterView view{kTimeZero, &loads, 16, nullptr};
  auto router = make_dopd_router(511, 4);
  RequestSpec r;
  r.prompt_tokens = 300;
  EXPECT_EQ(router->route(view, r), 3);
  r.prompt_tokens = 2000;
  EXPECT_EQ(router->route(view, r), 1);
  loads[0].waiting = 2;
  loads[1].waiting = 2;  // the prefill queue is full: prefill locally
  EXPECT_EQ(router->route(view, r), 3);
}

// A prefix lookup where instance `holder` caches the first `tokens` tokens of every prompt.
class FixedPrefixes : public sim::PrefixLookup {
 public:
  FixedPrefixes(int32_t holder, int64_t tokens) : holder_(holder), tokens_(tokens) {}
  int64_t cached_tokens(int32_t instance, const RequestSpec&) const override {
    return instance == holder_ ? tokens_ : 0;
  }

 private:
  int32_t holder_;
  int64_t tokens_;
};

TEST(DopdRouter, LongPromptsGoWhereTheLeastPrefillWorkIsAheadCountingCachedBlocks) {
  auto loads = pools(2, 1);
  for (auto& l : loads) l.accepting = true;
  loads[0].queued_prompt_blocks = 40;
  loads[1].queued_prompt_blocks = 10;
  auto router = make_dopd_router(0, 16);
  RequestSpec r;
  r.prompt_tokens = 2000;  // 125 blocks of 16
  sim::ClusterView uncached{kTimeZero, &loads, 16, nullptr, nullptr};
  EXPECT_EQ(router->route(uncached, r), 1);
  // Instance 0 holds 1,600 of its tokens (100 blocks): 40 + 25 blocks ahead there, 10 + 125 on 1.
  const FixedPrefixes prefixes(0, 1600);
  sim::ClusterView cached{kTimeZero, &loads, 16, nullptr, &prefixes};
  EXPECT_EQ(router->route(cached, r), 0);
  // A smaller hit does not outweigh the longer queue: 40 + 105 against 10 + 125.
  const FixedPrefixes small(0, 320);
  sim::ClusterView little{kTimeZero, &loads, 16, nullptr, &small};
  EXPECT_EQ(router->route(little, r), 1);
}

// ---- Dynamo planners ----

TEST(DynLoad, ScalesPrefillOnAGrowingQueueAndDecodeOnFullKv) {
  DynLoadParams p;
  p.adjust_every = 3;
  p.limits.gpu_budget = 8;
  auto c = make_dyn_load_controller(p);
  View v{pools(1, 1), {}, {}};
  sim::ScalingDecision d;
  const int64_t queue[3] = {4, 8, 12};
  for (int k = 0; k < 3; ++k) {
    v.loads[0].waiting = queue[k];
    v.loads[1].used_blocks = 950;
    d = {};
    c->control(v.at(10.0 * (k + 1)), d);
    if (k < 2) {
      EXPECT_TRUE(d.empty());
    }
  }
  // mean queue 8 > 5 and 12 + 3 * (12 - 4) > 5: +1 prefill; KV 0.95 > 0.9: +1 decode.
  EXPECT_EQ(d.add_prefill, 1);
  EXPECT_EQ(d.add_decode, 1);
}

TEST(DynLoad, ScalesDownWhenIdleButNotBelowOneNorDuringGrace) {
  DynLoadParams p;
  p.adjust_every = 1;
  auto c = make_dyn_load_controller(p);
  View v{pools(2, 2), {}, {}};
  sim::ScalingDecision d;
  c->control(v.at(10), d);
  EXPECT_EQ(d.drain.size(), 2u);  // queue 0 < 0.2 and KV 0 < 0.5: one of each
  View single{pools(1, 1), {}, {}};
  d = {};
  c->control(single.at(20), d);
  EXPECT_TRUE(d.empty());
  // A decode scale-up starts a three-interval grace period for decode scale-downs.
  View full{pools(1, 1), {}, {}};
  full.loads[1].used_blocks = 1000;
  d = {};
  c->control(full.at(30), d);
  EXPECT_EQ(d.add_decode, 1);
  View after{pools(2, 2), {}, {}};
  d = {};
  c->control(after.at(40), d);
  EXPECT_EQ(d.drain.size(), 1u);  // prefill only
  EXPECT_EQ(after.loads[static_cast<size_t>(d.drain[0])].role, sim::InstanceRole::kPrefill);
}

TEST(DynSla, SizesPoolsFromForecastLoadAndProfiledThroughput) {
  DynSlaParams p;
  p.adjust_every = 1;
  p.interval = Duration{10'000'000'000};
  p.limits.gpu_budget = 64;
  sim::InstanceContext pc = prefill_context();
  sim::InstanceContext dc = pc;
  dc.role = sim::InstanceRole::kDecode;
  dc.tp = 2;
  dc.num_blocks = 2040;
  dc.block_size = 128;
  dc.slo.tpot = Duration{50'000'000};
  auto c = make_dyn_sla_controller(p, pc, dc);
  View v{pools(1, 1), {}, {}};
  for (int i = 0; i < 100; ++i) v.arrivals.push_back({kTimeZero, 1000});
  sim::ScalingDecision d;
  c->control(v.at(10), d);
  // 100 requests x 1000 tokens / 10 s = 10k prefill tokens/s; 1000 / 0.17 s = 5882 tok/s per GPU
  // -> 2 prefill. Decode: 100 x 150 (initial OSL) / 10 s = 1500 tok/s; the best power-of-two
  // batch within 50 ms and the KV pool (226 requests at context 1075) is 128 (32.8 ms):
  // 128 / 0.0328 / 2 GPUs = 1951 tok/s per GPU -> 1 decode.
  EXPECT_EQ(d.add_prefill, 1);
  EXPECT_EQ(d.add_decode, 0);
  EXPECT_TRUE(d.drain.empty());
}

}  // namespace
}  // namespace servesim::policies::dopd
