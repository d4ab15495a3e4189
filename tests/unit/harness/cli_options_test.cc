#include "cli_options.h"

#include <gtest/gtest.h>

namespace servesim::profiling {
namespace {

TEST(CliOptions, ParsesRunOptions) {
  CliOptions o = parse_cli({"--model", "m.json", "--tp", "2", "--ops", "gemm,memcpy", "--quick",
                            "--reps", "7", "--max-seconds", "60", "--out", "dir",
                            "--gemm-dtypes", "fp8_block,bf16"});
  EXPECT_EQ(o.model_path, "m.json");
  EXPECT_EQ(o.tp, 2);
  EXPECT_EQ(o.ops, (std::set<Op>{Op::kGemm, Op::kMemcpy}));
  EXPECT_TRUE(o.quick);
  EXPECT_EQ(o.reps, 7);
  EXPECT_DOUBLE_EQ(o.max_seconds, 60.0);
  EXPECT_EQ(o.out_dir, "dir");
  EXPECT_EQ(o.gemm_dtypes, (std::vector<std::string>{"fp8_block", "bf16"}));
  EXPECT_EQ(parse_cli({"--model", "m.json"}).gemm_dtypes,
            (std::vector<std::string>{"bf16", "fp8_e4m3"}));
  EXPECT_FALSE(o.plan_only);
}

TEST(CliOptions, DefaultOpsIncludeForward) {
  CliOptions o = parse_cli({"--model", "m.json"});
  EXPECT_EQ(o.ops.size(), all_ops().size());
  EXPECT_EQ(o.ops.count(Op::kForward), 1u);
  EXPECT_EQ(parse_cli({"--model", "m.json", "--ops", "forward"}).ops, std::set<Op>{Op::kForward});
}

TEST(CliOptions, PlanWithGenericGrid) {
  CliOptions o = parse_cli({"--grid", "generic", "--plan"});
  EXPECT_TRUE(o.generic);
  EXPECT_TRUE(o.plan_only);
}

TEST(CliOptions, RejectsBadArguments) {
  EXPECT_THROW(parse_cli({}), HarnessError);
  EXPECT_THROW(parse_cli({"--model", "a.json", "--grid", "generic"}), HarnessError);
  EXPECT_THROW(parse_cli({"--grid", "fancy"}), HarnessError);
  EXPECT_THROW(parse_cli({"--model", "a.json", "--tp", "0"}), HarnessError);
  EXPECT_THROW(parse_cli({"--model", "a.json", "--reps", "x"}), HarnessError);
  EXPECT_THROW(parse_cli({"--model", "a.json", "--frobnicate"}), HarnessError);
  EXPECT_THROW(parse_cli({"--model"}), HarnessError);
}

}  // namespace
}  // namespace servesim::profiling
