// The DOPD bursty-replay acceptance (scenarios/dopd/bursty_*.json, Azure conv 2023 at time scale
// 0.4, 8 H100s, start 1P1D):
// - DOPD with its defaults meets the SLO (P90 TTFT <= 2 s, P90 TPOT <= 50 ms) for >= 97 % of the
//   requests at 0.4 and at the time scales 0.35, 0.45 and 0.5, with fewer GPU-seconds than the
//   cheapest static layout that meets the SLO as well (5P1D; at 0.35 none within the 8 GPUs
//   does); its miss breakdown accounts for every missed request.
// - DOPD in its lean configuration (prefill pool at utilisation 1.0, sized net of what the decode
//   instances prefill locally within a 256-token budget, queue spill at 8) reaches an SLO
//   attainment at least both Dynamo planners' with no more GPU-seconds than either, with the
//   Dynamo planners at DOPD's 20 s adjustment interval and at their 180 s default.
// - With a perfect forecast (forecast=oracle) no setting of DOPD's sizing knobs meets 97 % with
//   fewer GPU-seconds than Dynamo's load-based planner at 20 s.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <string>

#include "golden_util.h"

namespace servesim::golden {
namespace {

struct Outcome {
  double attainment_pct = 0;
  double gpu_seconds = 0;
  double p90_ttft_ms = 0;
  double p90_tpot_ms = 0;
  int64_t requests = 0;
  int64_t missed = 0;  // from --explain-misses
  std::string output;
};

Outcome run_bursty(const std::string& scenario, const std::string& sets) {
  const std::string cmd = std::string(SERVESIM_BIN) + " run " + SERVESIM_SOURCE_DIR +
                          "/scenarios/dopd/" + scenario + " --no-db --explain-misses " + sets;
  const auto [code, out] = run_command(cmd);
  EXPECT_EQ(code, 0) << out;
  std::smatch att, gpus, ttft, tpot, missed;
  EXPECT_TRUE(std::regex_search(out, att, std::regex(R"(SLO attainment\s+([\d.]+) %)"))) << out;
  EXPECT_TRUE(std::regex_search(out, gpus, std::regex(R"(GPU-seconds\s+([\d.]+))"))) << out;
  EXPECT_TRUE(std::regex_search(out, ttft, std::regex(R"(\n  TTFT +[\d.]+ +([\d.]+))"))) << out;
  EXPECT_TRUE(std::regex_search(out, tpot, std::regex(R"(\n  TPOT +[\d.]+ +([\d.]+))"))) << out;
  EXPECT_TRUE(std::regex_search(out, missed, std::regex(R"((\d+) of (\d+) requests missed)")))
      << out;
  if (att.empty() || gpus.empty() || ttft.empty() || tpot.empty() || missed.empty()) return {};
  return {std::stod(att[1]),  std::stod(gpus[1]),    std::stod(ttft[1]), std::stod(tpot[1]),
          std::stoll(missed[2]), std::stoll(missed[1]), out};
}

TEST(DopdBursty, DefaultDopdMeetsTheSloWithFewerGpuSecondsThanTheCheapestStaticLayout) {
  struct Case {
    const char* time_scale;
    bool static_meets_slo;  // 5P1D meets the SLO at this scale
  };
  for (const Case& c : {Case{"0.35", false}, Case{"0.4", true}, Case{"0.45", true},
                        Case{"0.5", true}}) {
    SCOPED_TRACE(c.time_scale);
    const std::string scale = std::string("--set workload.time_scale=") + c.time_scale;
    const Outcome dopd = run_bursty("bursty_dopd.json", scale);
    const Outcome static_5p1d = run_bursty(
        "bursty_static.json", scale + " --set policy.num_prefill=5 --set policy.num_decode=1");
    EXPECT_GE(dopd.attainment_pct, 97.0);
    EXPECT_LE(dopd.p90_ttft_ms, 2000.0);
    EXPECT_LE(dopd.p90_tpot_ms, 50.0);
    if (c.static_meets_slo) {
      EXPECT_GE(static_5p1d.attainment_pct, 97.0);  // the static layout it is compared with
      EXPECT_LT(dopd.gpu_seconds, static_5p1d.gpu_seconds);
    } else {
      EXPECT_LT(static_5p1d.attainment_pct, 50.0);
    }
    // SLO-aware decode instances: spilled prompts almost never slow the decodes past the TPOT
    // objective (the latency table's predictions are not exact; 617 such misses at 0.4 without
    // it).
    std::smatch interference;
    ASSERT_TRUE(std::regex_search(dopd.output, interference,
                                  std::regex(R"(prefill_interference +\d+ +[\d.]+ % +(\d+))")));
    EXPECT_LE(std::stoi(interference[1]), dopd.requests / 500);  // <= 0.2 % of the requests
    // Every request that missed is traced: the breakdown's count is the attainment's complement.
    ASSERT_GT(dopd.requests, 0);
    EXPECT_NEAR(100.0 * static_cast<double>(dopd.requests - dopd.missed) /
                    static_cast<double>(dopd.requests),
                dopd.attainment_pct, 0.006);
  }
}

// The released configurations' local prefill of prompts up to 511 tokens with vLLM's chunked
// prefill in the whole token budget on the decode instances: the breakdown blames prefill
// interference for most TPOT misses.
TEST(DopdBursty, ReleasedLocalPrefillMissesAreMostlyPrefillInterference) {
  const Outcome released = run_bursty("bursty_dopd.json",
                                       "--set policy.max_local_prefill_length=511 "
                                       "--set policy.decode_max_num_batched_tokens=0 "
                                       "--set policy.decode_slo_aware=false");
  std::smatch tpot_missed, interference;
  ASSERT_TRUE(std::regex_search(released.output, tpot_missed, std::regex(R"((\d+) TPOT\))")));
  ASSERT_TRUE(std::regex_search(released.output, interference,
                                std::regex(R"(prefill_interference +\d+ +[\d.]+ % +(\d+))")));
  EXPECT_GT(std::stod(interference[1]), 0.7 * std::stod(tpot_missed[1])) << released.output;
  const Outcome dopd = run_bursty("bursty_dopd.json", "");
  EXPECT_GT(dopd.attainment_pct, released.attainment_pct + 10.0);
}

TEST(DopdBursty, LeanDopdBeatsBothDynamoPlannersOnAttainmentWithFewerGpuSeconds) {
  const Outcome dopd = run_bursty(
      "bursty_dopd.json",
      "--set policy.max_local_prefill_length=0 --set policy.prefill_utilization=1.0 "
      "--set policy.credit_local_prefill=true --set policy.decode_max_num_batched_tokens=256 "
      "--set policy.max_prefill_queue_size=8");
  for (const char* interval : {"20s", "180s"}) {
    const std::string set = std::string("--set policy.adjustment_interval=") + interval;
    const Outcome load = run_bursty("bursty_dyn_load.json", set);
    const Outcome sla = run_bursty("bursty_dyn_sla.json", set);
    SCOPED_TRACE(interval);
    EXPECT_GE(dopd.attainment_pct, std::max(load.attainment_pct, sla.attainment_pct));
    EXPECT_LE(dopd.gpu_seconds, std::min(load.gpu_seconds, sla.gpu_seconds));
  }
  // Not a degenerate win: the lean DOPD still meets most SLOs.
  EXPECT_GE(dopd.attainment_pct, 75.0);
}

// With the true load of every next window (forecast=oracle) DOPD's sizing rule (eq. 16 at target
// utilisations 0.8-1.0, shrinking after one or two adjustments) still spends more GPU-seconds for
// 97 % of the SLO than Dynamo's load-based planner at 20 s (7,460 at 68 %), and the cheaper ones
// miss 97 %: the forecast is not what keeps DOPD above the Dynamo planners' GPU-seconds.
TEST(DopdBursty, APerfectForecastLeavesDopdAboveTheDynamoPlannersGpuSecondsAtNinetySevenPercent) {
  const Outcome load = run_bursty("bursty_dyn_load.json", "--set policy.adjustment_interval=20s");
  EXPECT_LT(load.attainment_pct, 97.0);
  bool some_meets = false;
  for (const char* rho : {"0.8", "0.85", "0.9", "0.95", "1.0"}) {
    for (const char* patience : {"1", "2"}) {
      const Outcome oracle =
          run_bursty("bursty_dopd.json", std::string("--set policy.forecast=oracle ") +
                                             "--set policy.prefill_utilization=" + rho +
                                             " --set policy.scale_down_patience=" + patience);
      SCOPED_TRACE(std::string("rho_P ") + rho + ", patience " + patience);
      if (oracle.attainment_pct >= 97.0) {
        some_meets = true;
        EXPECT_GT(oracle.gpu_seconds, load.gpu_seconds);
      }
    }
  }
  EXPECT_TRUE(some_meets);  // the sweep does reach 97 %, at a GPU-seconds price
}

}  // namespace
}  // namespace servesim::golden
