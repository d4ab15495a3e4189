// `servesim dllm-report`'s Table 4 under both baseline batching conventions:
// - the baselines' own static batch cap (--baseline-batch) changes only the baselines, and the
//   header says which convention the table uses;
// - one request at a time, the baselines reproduce the paper's measured L40S throughput of
//   Sparse-dLLM and dLLM-Cache within 10 % on every workload (the evidence that the paper's
//   baselines ran unbatched; servesim's default is the largest static batch that fits).
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "app/dllm_run.h"

namespace servesim::app {
namespace {

// (workload, system) -> (tok/s, paper tok/s) from the Table 4 rows.
using Rows = std::map<std::pair<std::string, std::string>, std::pair<double, double>>;

Rows table4(int64_t baseline_batch, std::string* header) {
  std::ostringstream out;
  EXPECT_EQ(run_dllm_report("l40s", scenarios::DataRoot::discover(), out, baseline_batch), 0);
  const std::string text = out.str();
  *header = text.substr(0, text.find('\n'));
  Rows rows;
  const std::regex row(R"((\w+)\s+([\w-]+)\s+[\d.]+\s+([\d.]+)\s+[\d.]+x \|\s+[\d.]+\s+([\d.]+))");
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) {
      rows[{m[1], m[2]}] = {std::stod(m[3]), std::stod(m[4])};
    }
  }
  EXPECT_EQ(rows.size(), 12u) << text;
  return rows;
}

TEST(DllmReport, BaselineBatchCapChangesOnlyTheBaselines) {
  std::string largest_header, one_header;
  const Rows largest = table4(0, &largest_header);
  const Rows one = table4(1, &one_header);
  EXPECT_NE(largest_header.find("largest static batch that fits"), std::string::npos);
  EXPECT_NE(one_header.find("at most 1"), std::string::npos);
  for (const auto& [key, value] : largest) {
    if (key.second == "dllm-serve") {
      EXPECT_DOUBLE_EQ(one.at(key).first, value.first) << key.first;
    } else {
      EXPECT_LT(one.at(key).first, value.first) << key.first << " " << key.second;
    }
  }
}

TEST(DllmReport, UnbatchedBaselinesMatchThePapersMeasuredThroughput) {
  std::string header;
  const Rows one = table4(1, &header);
  for (const char* workload : {"livebench", "burst", "osc"}) {
    for (const char* system : {"sparse-dllm", "dllm-cache"}) {
      const auto [ours, paper] = one.at({workload, system});
      EXPECT_NEAR(ours / paper, 1, 0.10) << workload << " " << system;
    }
  }
}

}  // namespace
}  // namespace servesim::app
