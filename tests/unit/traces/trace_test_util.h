// Helpers shared by the traces unit tests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "core/request_spec.h"

namespace servesim::traces::testing {

// Token totals of a workload, for comparing against figures computed from the files.
struct Totals {
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  int64_t hash_ids = 0;
};

inline Totals totals(const Workload& w) {
  Totals t;
  for (const RequestSpec& r : w.requests) {
    t.prompt_tokens += r.prompt_tokens;
    t.output_tokens += r.output_tokens;
    t.hash_ids += static_cast<int64_t>(r.prefix_hash_ids.size());
  }
  return t;
}

// Returns true if ids are 0..N-1 and arrivals never decrease.
inline bool is_finalised(const Workload& w) {
  for (size_t i = 0; i < w.requests.size(); ++i) {
    if (w.requests[i].id != static_cast<RequestId>(i)) {
      return false;
    }
    if (i > 0 && w.requests[i].arrival < w.requests[i - 1].arrival) {
      return false;
    }
  }
  return true;
}

// A fresh directory per test for small input files.
class TempFiles {
 public:
  TempFiles() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(::testing::TempDir()) /
           (std::string("servesim_traces_") + info->test_suite_name() + "_" + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~TempFiles() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // Writes `content` byte for byte to `name` in the directory and returns its path.
  std::string write(std::string_view name, std::string_view content) const {
    const std::string path = (dir_ / name).string();
    std::ofstream out(path, std::ios::binary);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    return path;
  }

 private:
  std::filesystem::path dir_;
};

}  // namespace servesim::traces::testing
