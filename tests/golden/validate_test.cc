// `servesim validate`'s iteration-level checks:
// 1. DistServe's fitting procedure (fit_distserve_model) recovers a known latency model from a
//    sweep it generated, and the model picks its decode piece by the batch threshold.
// 2. On the shipped data: DOPD Table I within 15 % at every point; each DistServe model in the
//    published sweep within 15 % at every point and 10 % MAPE after the engine-efficiency
//    scaling, with a leave-one-model-out row per case; OPT-66B tp 8, absent from the sweep,
//    reported without a verdict.
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "app/distserve_check.h"
#include "app/validate.h"

namespace servesim::app {
namespace {

TEST(DistServeModel, FitRecoversAModelFromItsOwnSweep) {
  DistServeLatencyModel truth;
  truth.prefill = {18.0, 0.1, 7e-6};
  truth.decode_small = {20.0, 6e-4, 0.04};
  truth.decode_large = {7.0, 5.5e-4, 0.16};
  std::vector<DistServeSweepPoint> sweep;
  for (int64_t batch : {1, 2, 8, 32, 64, 96, 128, 192}) {
    for (int64_t len : {16, 128, 512, 1024}) {
      sweep.push_back({batch, len, truth.prefill_ms(batch, len), truth.decode_ms(batch, len)});
    }
  }
  const DistServeLatencyModel fit = fit_distserve_model(sweep, truth.threshold);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(fit.prefill[i] / truth.prefill[i], 1, 1e-6) << i;
    EXPECT_NEAR(fit.decode_small[i] / truth.decode_small[i], 1, 1e-6) << i;
    EXPECT_NEAR(fit.decode_large[i] / truth.decode_large[i], 1, 1e-6) << i;
  }
}

TEST(DistServeModel, DecodePieceFollowsTheThreshold) {
  DistServeLatencyModel m;
  m.decode_small = {1, 0, 0};
  m.decode_large = {2, 0, 0};
  m.threshold = 95;
  EXPECT_EQ(m.decode_ms(94, 100), 1);
  EXPECT_EQ(m.decode_ms(95, 100), 2);
  // A sweep without large batches gives the large-batch piece the small-batch coefficients.
  const DistServeLatencyModel fit =
      fit_distserve_model({{1, 10, 5, 3}, {2, 10, 6, 4}, {4, 20, 9, 6}, {8, 20, 14, 9}});
  EXPECT_EQ(fit.decode_large, fit.decode_small);
  EXPECT_THROW(fit_distserve_model({{1, 10, 5, 3}}), std::invalid_argument);
}

TEST(Validate, IterationChecksOnTheShippedData) {
  ValidateOptions options;
  options.leave_one_out = false;
  std::ostringstream out;
  run_validation(scenarios::DataRoot::discover(), options, ValidateBounds{}, out);
  const std::string report = out.str();

  const std::regex dopd(R"(DOPD Table I[^\n]*\n(?:[^\n]*\n)*?  5 points, MAPE [0-9.]+ %, 0 beyond 15 %)");
  EXPECT_TRUE(std::regex_search(report, dopd)) << report;

  // Engine-scaled cases: "DistServe latency model: <model> tp <n>, x DistServe engine ..." then
  // their summary line "<k> points: servesim MAPE <x> %, <j> beyond 15 %".
  const std::regex scaled(
      R"(DistServe latency model: (opt-\d+b tp \d), x DistServe engine efficiency \(([^)]+)\)\n(?:[^\n]*\n)*?  (\d+) points: servesim MAPE ([0-9.]+) %, (\d+) beyond 15 %)");
  int cases = 0;
  for (auto it = std::sregex_iterator(report.begin(), report.end(), scaled);
       it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    const std::string name = m[1].str();
    ++cases;
    if (name == "opt-66b tp 8") {
      EXPECT_EQ(m[2].str(), "held out; reported: not in the published sweep");
      continue;
    }
    EXPECT_EQ(m[2].str(), "fitted") << name;
    EXPECT_GE(std::stoi(m[3].str()), 10) << name;
    EXPECT_LE(std::stod(m[4].str()), 10.0) << name;
    EXPECT_EQ(m[5].str(), "0") << name;
    // The same case predicted with the efficiency fitted on the other cases is reported.
    EXPECT_TRUE(std::regex_search(report, std::regex("\n  " + name + R"( +\d+ +[0-9.]+ +[0-9.]+ +\d+\n)")))
        << name;
  }
  EXPECT_EQ(cases, 7) << report;
}

}  // namespace
}  // namespace servesim::app
