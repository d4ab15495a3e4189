#include "traces/transforms.h"

#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/time.h"
#include "traces/loaders.h"
#include "trace_test_util.h"

namespace servesim::traces {
namespace {

using testing::is_finalised;

constexpr int64_t kNs = 1'000'000'000;

// Requests arriving at the given nanosecond times; prompt_tokens = 1, 2, ... in input order.
Workload at_ns(const std::vector<int64_t>& arrivals, std::string description = "test") {
  Workload w;
  for (size_t i = 0; i < arrivals.size(); ++i) {
    RequestSpec& r = w.requests.emplace_back();
    r.id = static_cast<RequestId>(i);
    r.arrival = time_from_ns(arrivals[i]);
    r.prompt_tokens = static_cast<int64_t>(i) + 1;
    r.output_tokens = 1;
  }
  w.description = std::move(description);
  return w;
}

std::vector<int64_t> arrivals_of(const Workload& w) {
  std::vector<int64_t> out;
  for (const RequestSpec& r : w.requests) {
    out.push_back(to_ns(r.arrival));
  }
  return out;
}

std::vector<int64_t> prompts_of(const Workload& w) {
  std::vector<int64_t> out;
  for (const RequestSpec& r : w.requests) {
    out.push_back(r.prompt_tokens);
  }
  return out;
}

TEST(Finalize, StableSortsAndRenumbers) {
  Workload w = at_ns({5, 1, 5, 0, 1});
  finalize(w);
  EXPECT_EQ(arrivals_of(w), (std::vector<int64_t>{0, 1, 1, 5, 5}));
  EXPECT_EQ(prompts_of(w), (std::vector<int64_t>{4, 2, 5, 1, 3}));
  EXPECT_TRUE(is_finalised(w));
}

TEST(Window, KeepsHalfOpenRangeAndShiftsToZero) {
  Workload w = at_ns({0, 1 * kNs, 2 * kNs, 3 * kNs, 4 * kNs, 5 * kNs, 6 * kNs, 7 * kNs});
  window(w, Duration{2 * kNs}, Duration{3 * kNs});
  EXPECT_EQ(arrivals_of(w), (std::vector<int64_t>{0, 1 * kNs, 2 * kNs}));
  EXPECT_EQ(prompts_of(w), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_TRUE(is_finalised(w));
  EXPECT_EQ(w.description, "test window 2.000 s+3.000 s");
}

TEST(Window, OnAzureConvFirstFiveMinutes) {
  Workload w = load_azure("traces/data/azure_llm_2023/AzureLLMInferenceTrace_conv.csv");
  size_t expected = 0;
  for (const RequestSpec& r : w.requests) {
    expected += r.arrival < SimTime{parse_duration("300s")};
  }
  window(w, Duration{}, parse_duration("300s"));
  EXPECT_EQ(w.requests.size(), expected);
  EXPECT_GT(expected, 1000u);
  EXPECT_LT(w.requests.back().arrival, SimTime{parse_duration("300s")});
}

TEST(Window, RejectsBadArguments) {
  Workload w = at_ns({0, 1});
  EXPECT_THROW(window(w, Duration{-1}, Duration{5}), std::invalid_argument);
  EXPECT_THROW(window(w, Duration{0}, Duration{0}), std::invalid_argument);
  EXPECT_EQ(w.requests.size(), 2u);
}

TEST(FirstN, Truncates) {
  Workload w = at_ns({0, 10, 20, 30});
  first_n(w, 2);
  EXPECT_EQ(arrivals_of(w), (std::vector<int64_t>{0, 10}));
  first_n(w, 5);
  EXPECT_EQ(w.requests.size(), 2u);
  first_n(w, 0);
  EXPECT_TRUE(w.requests.empty());
  EXPECT_THROW(first_n(w, -1), std::invalid_argument);
}

TEST(Filter, KeepsMatchingRequestsAndRenumbers) {
  Workload w = at_ns({0, 10, 20, 30});
  filter(
      w, [](const RequestSpec& r) { return r.prompt_tokens % 2 == 0; }, "even prompts");
  EXPECT_EQ(prompts_of(w), (std::vector<int64_t>{2, 4}));
  EXPECT_TRUE(is_finalised(w));
  EXPECT_EQ(w.description, "test filter even prompts");
}

TEST(ScaleToRate, SmallWorkloadExactNanoseconds) {
  Workload w = at_ns({0, 1 * kNs, 3 * kNs});
  scale_to_rate(w, 1.0);  // span must become 2 s
  EXPECT_EQ(arrivals_of(w), (std::vector<int64_t>{0, 666666667, 2 * kNs}));
}

TEST(ScaleToRate, AzureConvHitsTheRateExactly) {
  Workload w = load_azure("traces/data/azure_llm_2023/AzureLLMInferenceTrace_conv.csv");
  const std::vector<int64_t> before = arrivals_of(w);
  scale_to_rate(w, 20.0);
  ASSERT_TRUE(is_finalised(w));
  EXPECT_EQ(to_ns(w.requests.front().arrival), 0);
  // (19366 - 1) / 20 = 968.25 s.
  EXPECT_EQ(to_ns(w.requests.back().arrival), 968'250'000'000);
  EXPECT_DOUBLE_EQ(19365 / to_seconds(w.requests.back().arrival), 20.0);
  // Shape preserved: each arrival is the old one scaled by the same factor (to within rounding).
  const double factor = 968.25 / (static_cast<double>(before.back()) * 1e-9);
  for (size_t i = 0; i < before.size(); ++i) {
    ASSERT_NEAR(static_cast<double>(to_ns(w.requests[i].arrival)),
                static_cast<double>(before[i]) * factor, 1.0)
        << i;
  }
}

TEST(ScaleToRate, RejectsDegenerateWorkloads) {
  Workload one = at_ns({5});
  EXPECT_THROW(scale_to_rate(one, 1.0), std::invalid_argument);
  Workload same = at_ns({5, 5, 5});
  EXPECT_THROW(scale_to_rate(same, 1.0), std::invalid_argument);
  Workload ok = at_ns({0, 5});
  EXPECT_THROW(scale_to_rate(ok, 0.0), std::invalid_argument);
  EXPECT_THROW(scale_to_rate(ok, -2.0), std::invalid_argument);
  EXPECT_EQ(arrivals_of(ok), (std::vector<int64_t>{0, 5}));
}

TEST(TimeScale, MultipliesArrivals) {
  Workload w = at_ns({0, 3, 10 * kNs});
  time_scale(w, 0.5);
  EXPECT_EQ(arrivals_of(w), (std::vector<int64_t>{0, 2, 5 * kNs}));  // 1.5 rounds away from 0
  time_scale(w, 3.0);
  EXPECT_EQ(arrivals_of(w), (std::vector<int64_t>{0, 6, 15 * kNs}));
  EXPECT_EQ(w.description, "test time x0.5 time x3");
  EXPECT_THROW(time_scale(w, 0.0), std::invalid_argument);
  Workload big = at_ns({0, int64_t{1} << 62});
  EXPECT_THROW(time_scale(big, 4.0), RangeError);
  EXPECT_EQ(to_ns(big.requests.back().arrival), int64_t{1} << 62);
}

TEST(Merge, InterleavesWithFirstWorkloadWinningTies) {
  Workload a = at_ns({0, 2 * kNs}, "a");
  a.requests[1].prefix_hash_ids = {7, 8};
  a.skipped_rows = 2;
  Workload b = at_ns({0, 1 * kNs, 2 * kNs}, "b");
  for (RequestSpec& r : b.requests) {
    r.prompt_tokens += 100;
  }
  b.skipped_rows = 3;
  const Workload m = merge(std::move(a), std::move(b));
  EXPECT_EQ(arrivals_of(m), (std::vector<int64_t>{0, 0, 1 * kNs, 2 * kNs, 2 * kNs}));
  EXPECT_EQ(prompts_of(m), (std::vector<int64_t>{1, 101, 102, 2, 103}));
  EXPECT_TRUE(is_finalised(m));
  EXPECT_EQ(m.requests[3].prefix_hash_ids, (std::vector<uint64_t>{7, 8}));
  EXPECT_EQ(m.skipped_rows, 5);
  EXPECT_EQ(m.description, "merge(a; b)");
}

TEST(Merge, TwoShippedTraces) {
  Workload conv = load_azure("traces/data/azure_llm_2023/AzureLLMInferenceTrace_conv.csv");
  Workload code = load_azure("traces/data/azure_llm_2023/AzureLLMInferenceTrace_code.csv");
  const Workload m = merge(std::move(conv), std::move(code));
  EXPECT_EQ(m.requests.size(), 19366u + 8819u);
  EXPECT_TRUE(is_finalised(m));
}

}  // namespace
}  // namespace servesim::traces
