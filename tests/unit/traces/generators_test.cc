#include "traces/generators.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/time.h"
#include "trace_test_util.h"

namespace servesim::traces {
namespace {

using testing::is_finalised;

struct GapStats {
  double mean_s = 0;
  double cv = 0;
};

GapStats gap_stats(const Workload& w) {
  std::vector<double> gaps;
  for (size_t i = 1; i < w.requests.size(); ++i) {
    gaps.push_back(to_seconds(w.requests[i].arrival - w.requests[i - 1].arrival));
  }
  double sum = 0;
  for (double g : gaps) {
    sum += g;
  }
  const double mean = sum / static_cast<double>(gaps.size());
  double squares = 0;
  for (double g : gaps) {
    squares += (g - mean) * (g - mean);
  }
  const double stddev = std::sqrt(squares / static_cast<double>(gaps.size() - 1));
  return {mean, stddev / mean};
}

double mean_rate(const Workload& w) {
  return static_cast<double>(w.requests.size() - 1) / to_seconds(w.requests.back().arrival);
}

TEST(Generate, PoissonMeanRateWithinThreePercent) {
  auto lengths = make_fixed_lengths(128, 16);
  const Workload w = generate({ArrivalKind::kPoisson, 10.0}, *lengths, 20000, Duration{}, 1);
  ASSERT_EQ(w.requests.size(), 20000u);
  EXPECT_TRUE(is_finalised(w));
  EXPECT_EQ(to_ns(w.requests.front().arrival), 0);
  EXPECT_NEAR(mean_rate(w), 10.0, 0.3);
  // Exponential gaps have CV 1.
  EXPECT_NEAR(gap_stats(w).cv, 1.0, 0.05);
  EXPECT_EQ(w.requests[123].prompt_tokens, 128);
  EXPECT_EQ(w.requests[123].output_tokens, 16);
}

TEST(Generate, GammaHitsRateAndCv) {
  auto lengths = make_fixed_lengths(64, 8);
  for (const double cv : {0.5, 2.0, 4.0}) {
    SCOPED_TRACE(cv);
    const Workload w = generate({ArrivalKind::kGamma, 5.0, cv}, *lengths, 100000, Duration{}, 2);
    ASSERT_EQ(w.requests.size(), 100000u);
    const GapStats stats = gap_stats(w);
    EXPECT_NEAR(stats.cv, cv, 0.05 * cv);
    EXPECT_NEAR(stats.mean_s, 0.2, 0.03 * 0.2);
  }
}

TEST(Generate, UniformIsExactlyPeriodic) {
  auto lengths = make_fixed_lengths(1, 1);
  const Workload w = generate({ArrivalKind::kUniform, 4.0}, *lengths, 9, Duration{}, 3);
  ASSERT_EQ(w.requests.size(), 9u);
  for (size_t i = 0; i < w.requests.size(); ++i) {
    EXPECT_EQ(to_ns(w.requests[i].arrival), static_cast<int64_t>(i) * 250'000'000);
  }
}

TEST(Generate, DurationBoundsTheArrivals) {
  auto lengths = make_fixed_lengths(1, 1);
  const Duration ten_s = parse_duration("10s");
  const Workload uniform = generate({ArrivalKind::kUniform, 4.0}, *lengths, 0, ten_s, 4);
  // 0, 0.25, ..., 9.75 s.
  EXPECT_EQ(uniform.requests.size(), 40u);
  const Workload poisson = generate({ArrivalKind::kPoisson, 100.0}, *lengths, 0, ten_s, 4);
  EXPECT_GT(poisson.requests.size(), 900u);
  EXPECT_LT(poisson.requests.size(), 1100u);
  EXPECT_LT(poisson.requests.back().arrival, SimTime{ten_s});
  // With both limits, the first one reached wins.
  EXPECT_EQ(generate({ArrivalKind::kUniform, 4.0}, *lengths, 5, ten_s, 4).requests.size(), 5u);
}

TEST(Generate, SameSeedIsIdenticalAndDifferentSeedDiffers) {
  auto lengths = make_empirical_lengths({{10, 1}, {20, 2}, {30, 3}, {40, 4}}, "four");
  const ArrivalSpec spec{ArrivalKind::kGamma, 3.0, 1.5};
  const Workload a = generate(spec, *lengths, 500, Duration{}, 42);
  const Workload b = generate(spec, *lengths, 500, Duration{}, 42);
  const Workload c = generate(spec, *lengths, 500, Duration{}, 43);
  ASSERT_EQ(a.requests.size(), b.requests.size());
  int arrival_differences = 0;
  int length_differences = 0;
  for (size_t i = 0; i < a.requests.size(); ++i) {
    EXPECT_EQ(a.requests[i].arrival, b.requests[i].arrival);
    EXPECT_EQ(a.requests[i].prompt_tokens, b.requests[i].prompt_tokens);
    EXPECT_EQ(a.requests[i].output_tokens, b.requests[i].output_tokens);
    arrival_differences += a.requests[i].arrival != c.requests[i].arrival;
    length_differences += a.requests[i].prompt_tokens != c.requests[i].prompt_tokens;
  }
  EXPECT_GT(arrival_differences, 490);
  EXPECT_GT(length_differences, 300);
  EXPECT_EQ(a.description, "gamma 3/s cv 1.5, empirical:four (4 samples), 500 requests, seed 42");
}

TEST(Generate, LengthSourceDoesNotPerturbArrivals) {
  auto fixed = make_fixed_lengths(5, 5);
  auto empirical = make_empirical_lengths({{1, 1}, {2, 2}}, "two");
  const Workload a = generate({ArrivalKind::kPoisson, 2.0}, *fixed, 200, Duration{}, 9);
  const Workload b = generate({ArrivalKind::kPoisson, 2.0}, *empirical, 200, Duration{}, 9);
  for (size_t i = 0; i < a.requests.size(); ++i) {
    ASSERT_EQ(a.requests[i].arrival, b.requests[i].arrival) << i;
  }
}

TEST(Generate, RejectsInvalidArguments) {
  auto lengths = make_fixed_lengths(1, 1);
  EXPECT_THROW(generate({ArrivalKind::kPoisson, 0.0}, *lengths, 10, Duration{}, 1),
               std::invalid_argument);
  EXPECT_THROW(generate({ArrivalKind::kPoisson, NAN}, *lengths, 10, Duration{}, 1),
               std::invalid_argument);
  EXPECT_THROW(generate({ArrivalKind::kGamma, 1.0, 0.0}, *lengths, 10, Duration{}, 1),
               std::invalid_argument);
  EXPECT_THROW(generate({ArrivalKind::kPoisson, 1.0}, *lengths, 0, Duration{}, 1),
               std::invalid_argument);
  EXPECT_THROW(generate({ArrivalKind::kPoisson, 1.0}, *lengths, -1, Duration{}, 1),
               std::invalid_argument);
}

TEST(LengthSources, FixedAndValidation) {
  RngStream rng(1, "test");
  auto fixed = make_fixed_lengths(8192, 32);
  EXPECT_EQ(fixed->describe(), "fixed P8192/D32");
  EXPECT_EQ(fixed->next(rng).prompt_tokens, 8192);
  EXPECT_THROW(make_fixed_lengths(0, 1), std::invalid_argument);
  EXPECT_THROW(make_empirical_lengths({}, "none"), std::invalid_argument);
  EXPECT_THROW(make_empirical_lengths({{1, 0}}, "zero"), std::invalid_argument);
  EXPECT_THROW(make_lengths_from_workload(Workload{}, "empty"), std::invalid_argument);
}

TEST(LengthSources, EmpiricalDrawsUniformlyWithReplacement) {
  RngStream rng(5, "test");
  auto source = make_empirical_lengths({{1, 10}, {2, 20}, {3, 30}}, "three");
  std::map<int64_t, int> counts;
  for (int i = 0; i < 30000; ++i) {
    const LengthSample s = source->next(rng);
    ASSERT_EQ(s.output_tokens, s.prompt_tokens * 10);
    ++counts[s.prompt_tokens];
  }
  ASSERT_EQ(counts.size(), 3u);
  for (const auto& [prompt, count] : counts) {
    EXPECT_NEAR(count / 30000.0, 1.0 / 3.0, 0.015) << prompt;
  }
}

// benchmark_serving.py's random dataset at --random-range-ratio 0.8: ISL 1024 draws the integers
// 819..1024 (floor(0.8 x 1024) = 819) uniformly, OSL 10 draws 8..10; each end is reached and
// the mean is the range's midpoint.
TEST(LengthSources, RangedDrawsUniformlyFromTheRatioToTheLength) {
  RngStream rng(3, "test");
  auto source = make_ranged_lengths(1024, 10, 0.8);
  std::map<int64_t, int> outputs;
  int64_t least = 1024, most = 0;
  double sum = 0;
  const int n = 40000;
  for (int i = 0; i < n; ++i) {
    const LengthSample s = source->next(rng);
    least = std::min(least, s.prompt_tokens);
    most = std::max(most, s.prompt_tokens);
    sum += static_cast<double>(s.prompt_tokens);
    ++outputs[s.output_tokens];
  }
  EXPECT_EQ(least, 819);
  EXPECT_EQ(most, 1024);
  EXPECT_NEAR(sum / n, (819 + 1024) / 2.0, 1.5);
  ASSERT_EQ(outputs.size(), 3u);
  EXPECT_EQ(outputs.begin()->first, 8);
  for (const auto& [osl, count] : outputs) EXPECT_NEAR(count / double(n), 1.0 / 3.0, 0.015) << osl;
  // Ratio 1 is fixed lengths; ratio 0 keeps counts >= 1.
  EXPECT_EQ(make_ranged_lengths(64, 8, 1.0)->next(rng).prompt_tokens, 64);
  auto zero = make_ranged_lengths(1, 1, 0.0);
  for (int i = 0; i < 100; ++i) EXPECT_GE(zero->next(rng).prompt_tokens, 1);
  EXPECT_THROW(make_ranged_lengths(0, 8, 0.8), std::invalid_argument);
  EXPECT_THROW(make_ranged_lengths(64, 8, 1.5), std::invalid_argument);
  EXPECT_THROW(make_ranged_lengths(64, 8, -0.1), std::invalid_argument);
}

TEST(LengthSources, FromWorkloadDrawsItsPairs) {
  Workload w;
  for (int64_t i = 1; i <= 4; ++i) {
    RequestSpec& r = w.requests.emplace_back();
    r.prompt_tokens = 100 * i;
    r.output_tokens = i;
  }
  auto source = make_lengths_from_workload(w, "tiny");
  EXPECT_EQ(source->describe(), "trace:tiny (4 requests)");
  RngStream rng(6, "test");
  std::map<int64_t, int> counts;
  for (int i = 0; i < 4000; ++i) {
    const LengthSample s = source->next(rng);
    ASSERT_EQ(s.prompt_tokens, 100 * s.output_tokens);
    ++counts[s.output_tokens];
  }
  EXPECT_EQ(counts.size(), 4u);
}

TEST(LengthSources, MixtureFollowsWeights) {
  std::vector<std::unique_ptr<LengthSource>> parts;
  parts.push_back(make_fixed_lengths(100, 1));
  parts.push_back(make_fixed_lengths(200, 2));
  parts.push_back(make_fixed_lengths(300, 3));
  auto mixture = make_mixture_lengths(std::move(parts), {3.0, 1.0, 0.0});
  EXPECT_EQ(mixture->describe(),
            "mixture(0.75*fixed P100/D1 + 0.25*fixed P200/D2 + 0*fixed "
            "P300/D3)");
  RngStream rng(7, "test");
  int first = 0;
  for (int i = 0; i < 20000; ++i) {
    const LengthSample s = mixture->next(rng);
    ASSERT_NE(s.prompt_tokens, 300);  // weight 0 is never chosen
    first += s.prompt_tokens == 100;
  }
  EXPECT_NEAR(first / 20000.0, 0.75, 0.015);
}

TEST(LengthSources, MixtureValidation) {
  std::vector<std::unique_ptr<LengthSource>> one;
  one.push_back(make_fixed_lengths(1, 1));
  EXPECT_THROW(make_mixture_lengths(std::move(one), {1.0, 2.0}), std::invalid_argument);
  std::vector<std::unique_ptr<LengthSource>> zero;
  zero.push_back(make_fixed_lengths(1, 1));
  EXPECT_THROW(make_mixture_lengths(std::move(zero), {0.0}), std::invalid_argument);
  std::vector<std::unique_ptr<LengthSource>> negative;
  negative.push_back(make_fixed_lengths(1, 1));
  EXPECT_THROW(make_mixture_lengths(std::move(negative), {-1.0}), std::invalid_argument);
  EXPECT_THROW(make_mixture_lengths({}, {}), std::invalid_argument);
}

TEST(ArrivalKinds, NamesRoundTrip) {
  for (ArrivalKind kind : {ArrivalKind::kPoisson, ArrivalKind::kGamma, ArrivalKind::kUniform}) {
    EXPECT_EQ(parse_arrival_kind(arrival_kind_name(kind)), kind);
  }
  try {
    parse_arrival_kind("mmpp");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "unknown arrival process \"mmpp\"; valid values are: poisson, gamma, uniform");
  }
}

}  // namespace
}  // namespace servesim::traces

namespace servesim::traces {
namespace {

Workload sessions_workload(int64_t sessions, int64_t min_turns, int64_t max_turns,
                           int64_t max_context = 0, uint64_t seed = 7) {
  SessionSpec s;
  s.starts = {ArrivalKind::kPoisson, 2.0, 1.0};
  s.sessions = sessions;
  s.min_turns = min_turns;
  s.max_turns = max_turns;
  s.think_time = std::chrono::seconds(3);
  s.max_context_tokens = max_context;
  const auto first = make_fixed_lengths(1000, 100);
  const auto later = make_normal_lengths(200, 50, 100, 0);
  return generate_sessions(s, *first, *later, seed);
}

TEST(Sessions, EachTurnsPromptIsItsHistoryPlusNewTokens) {
  const Workload w = sessions_workload(20, 1, 6);
  ASSERT_TRUE(is_finalised(w));
  int64_t sessions = 0;
  for (size_t i = 0; i < w.requests.size(); ++i) {
    const RequestSpec& r = w.requests[i];
    EXPECT_EQ(r.output_tokens, 100);
    if (r.after < 0) {
      ++sessions;
      EXPECT_EQ(r.prompt_tokens, 1000);  // a first turn
      continue;
    }
    const RequestSpec& prev = w.requests[i - 1];
    EXPECT_EQ(r.after, prev.id);
    EXPECT_EQ(r.think_time, std::chrono::seconds(3));
    EXPECT_EQ(r.arrival, prev.arrival);  // the session's start, a lower bound
    const int64_t added = r.prompt_tokens - prev.prompt_tokens - prev.output_tokens;
    EXPECT_GE(added, 1);
    // The history's 512-token spans keep their ids; the new spans are the session's own.
    const size_t shared = static_cast<size_t>(prev.prompt_tokens / 512);
    ASSERT_GE(r.prefix_hash_ids.size(), prev.prefix_hash_ids.size());
    for (size_t k = 0; k < prev.prefix_hash_ids.size(); ++k) {
      EXPECT_EQ(r.prefix_hash_ids[k], prev.prefix_hash_ids[k]) << "span " << k;
    }
    EXPECT_GE(prev.prefix_hash_ids.size(), shared);
    // Ids cover the prompt and the answer, which the next turn resends.
    EXPECT_TRUE(r.hash_ids_cover_output);
    EXPECT_EQ(r.prefix_hash_ids.size(),
              static_cast<size_t>((r.prompt_tokens + r.output_tokens + 511) / 512));
  }
  EXPECT_EQ(sessions, 20);
  // Sessions share nothing: first spans differ between first turns.
  std::map<uint64_t, int> first_span;
  for (const RequestSpec& r : w.requests) {
    if (r.after < 0) first_span[r.prefix_hash_ids[0]]++;
  }
  EXPECT_EQ(first_span.size(), 20u);
}

TEST(Sessions, TurnCountsStayInRangeAndTheSeedDecides) {
  const Workload a = sessions_workload(200, 2, 4);
  std::map<int64_t, int> turns;
  int64_t current = 0;
  for (const RequestSpec& r : a.requests) {
    if (r.after < 0 && current > 0) turns[current]++, current = 0;
    ++current;
  }
  turns[current]++;
  ASSERT_EQ(turns.size(), 3u);  // 2, 3 and 4 turns all occur, nothing else
  EXPECT_EQ(turns.begin()->first, 2);
  EXPECT_EQ(turns.rbegin()->first, 4);
  const Workload b = sessions_workload(200, 2, 4);
  ASSERT_EQ(a.requests.size(), b.requests.size());
  for (size_t i = 0; i < a.requests.size(); ++i) {
    EXPECT_EQ(a.requests[i].prompt_tokens, b.requests[i].prompt_tokens);
    EXPECT_EQ(a.requests[i].prefix_hash_ids, b.requests[i].prefix_hash_ids);
  }
  // Another seed draws other turn counts.
  const Workload c = sessions_workload(200, 2, 4, 0, 8);
  bool differs = c.requests.size() != a.requests.size();
  for (size_t i = 0; !differs && i < a.requests.size(); ++i) {
    differs = a.requests[i].prompt_tokens != c.requests[i].prompt_tokens;
  }
  EXPECT_TRUE(differs);
}

TEST(Sessions, ASessionEndsBeforeATurnBeyondTheContext) {
  const Workload w = sessions_workload(30, 10, 10, /*max_context=*/2000);
  for (const RequestSpec& r : w.requests) {
    EXPECT_LE(r.prompt_tokens + r.output_tokens, 2000);
  }
  EXPECT_LT(w.requests.size(), 300u);
  EXPECT_GE(w.requests.size(), 30u);  // every first turn is kept
}

TEST(Sessions, InvalidSpecsAreRefused) {
  const auto first = make_fixed_lengths(10, 10);
  SessionSpec s;
  s.min_turns = 3;
  s.max_turns = 2;
  EXPECT_THROW(generate_sessions(s, *first, *first, 1), std::invalid_argument);
  s = {};
  s.sessions = 0;
  EXPECT_THROW(generate_sessions(s, *first, *first, 1), std::invalid_argument);
}

}  // namespace
}  // namespace servesim::traces
