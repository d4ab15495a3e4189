#include "core/error.h"

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

namespace servesim {
namespace {

TEST(ConfigError, MessageListsEveryIssueWithItsPath) {
  const ConfigError e("scenario.json", {{"policy.max_num_seqs", "must be >= 1, got 0"},
                                        {"cluster.instances", "must be >= 1"},
                                        {"", "unknown key \"foo\""}});
  EXPECT_STREQ(e.what(),
               "scenario.json: 3 errors\n"
               "  policy.max_num_seqs: must be >= 1, got 0\n"
               "  cluster.instances: must be >= 1\n"
               "  (root): unknown key \"foo\"");
  EXPECT_EQ(e.source(), "scenario.json");
  ASSERT_EQ(e.issues().size(), 3u);
  EXPECT_EQ(e.issues()[0].path, "policy.max_num_seqs");
  EXPECT_EQ(e.issues()[1].message, "must be >= 1");
}

TEST(ConfigError, SingleIssueIsSingular) {
  const ConfigError e("plan.json", {{"model", "unknown model \"x\""}});
  EXPECT_STREQ(e.what(), "plan.json: 1 error\n  model: unknown model \"x\"");
}

TEST(InputError, WhatIsFileLineMessage) {
  const InputError e("file", 12, "msg");
  EXPECT_STREQ(e.what(), "file:12: msg");
  EXPECT_EQ(e.file(), "file");
  EXPECT_EQ(e.line(), 12);
  EXPECT_EQ(e.message(), "msg");
}

TEST(InputError, LineZeroMeansTheWholeFile) {
  const InputError e("trace.csv", 0, "empty file");
  EXPECT_STREQ(e.what(), "trace.csv: empty file");
}

TEST(Errors, AreServesimErrors) {
  EXPECT_THROW(throw ConfigError("s", {}), Error);
  EXPECT_THROW(throw InputError("f", 1, "m"), Error);
  EXPECT_THROW(throw RangeError("r"), Error);
  EXPECT_THROW(throw CapacityError("c"), std::runtime_error);
}

}  // namespace
}  // namespace servesim
