#include "traces/trace_catalog.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <stdexcept>

#include <gtest/gtest.h>

#include "traces/loaders.h"

namespace servesim::traces {
namespace {

TEST(TraceCatalog, EveryEntryLoadsWithItsRowCount) {
  const std::vector<std::string> formats = trace_formats();
  std::set<std::string> names;
  for (const TraceInfo& info : shipped_traces()) {
    SCOPED_TRACE(info.name);
    EXPECT_TRUE(names.insert(info.name).second) << "duplicate name";
    EXPECT_TRUE(std::filesystem::is_regular_file(info.path)) << info.path;
    EXPECT_FALSE(info.description.empty());
    EXPECT_TRUE(info.license == "CC-BY-4.0" || info.license == "Apache-2.0" ||
                info.license == "MIT")
        << info.license;
    if (info.format == "length_distribution") {
      EXPECT_EQ(static_cast<int64_t>(load_length_distribution(info.path).size()), info.rows);
    } else {
      ASSERT_NE(std::find(formats.begin(), formats.end(), info.format), formats.end());
      const Workload w = load_trace(info.format, info.path);
      EXPECT_EQ(static_cast<int64_t>(w.requests.size()) + w.skipped_rows, info.rows);
    }
  }
  EXPECT_EQ(names.size(), 12u);
}

TEST(TraceCatalog, FindByName) {
  EXPECT_EQ(find_shipped_trace("azure_conv_2023").path,
            "traces/data/azure_llm_2023/AzureLLMInferenceTrace_conv.csv");
  EXPECT_EQ(find_shipped_trace("azure_conv_2023").rows, 19366);
  try {
    find_shipped_trace("nope");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("unknown trace \"nope\"; valid values are: azure_code_2023, ", 0), 0u)
        << what;
    EXPECT_NE(what.find("mooncake_conversation"), std::string::npos);
  }
}

}  // namespace
}  // namespace servesim::traces
