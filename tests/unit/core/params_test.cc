#include "core/params.h"

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

namespace servesim {
namespace {

ParamSchema test_schema() {
  return {
      {"budget", ParamType::kInt, int64_t{2048}, "tokens", "token budget", {}, 1.0, {}},
      {"util", ParamType::kDouble, 0.9, "", "memory share", {}, 0.05, 1.0},
      {"chunked", ParamType::kBool, true, "", "chunked prefill", {}, {}, {}},
      {"mode", ParamType::kString, std::string("stall_free"), "", "variant",
       {"stall_free", "unified_v1"}, {}, {}},
      {"timeout", ParamType::kDuration, Duration{2'000'000}, "", "a delay", {}, {}, {}},
  };
}

TEST(ParamValues, DefaultsFillEveryDeclaredParameter) {
  const ParamValues v = ParamValues::defaults(test_schema());
  EXPECT_EQ(v.all().size(), 5u);
  EXPECT_TRUE(v.contains("budget"));
  EXPECT_FALSE(v.contains("nope"));
  EXPECT_EQ(v.get_int("budget"), 2048);
  EXPECT_DOUBLE_EQ(v.get_double("util"), 0.9);
  EXPECT_TRUE(v.get_bool("chunked"));
  EXPECT_EQ(v.get_string("mode"), "stall_free");
  EXPECT_EQ(v.get_duration("timeout").count(), 2'000'000);
}

TEST(ParamValues, SetOverridesADefault) {
  ParamValues v = ParamValues::defaults(test_schema());
  v.set("budget", int64_t{512});
  v.set("mode", std::string("unified_v1"));
  v.set("chunked", false);
  v.set("timeout", Duration{250'000});
  EXPECT_EQ(v.get_int("budget"), 512);
  EXPECT_EQ(v.get_string("mode"), "unified_v1");
  EXPECT_FALSE(v.get_bool("chunked"));
  EXPECT_EQ(v.get_duration("timeout").count(), 250'000);
}

TEST(ParamValues, GetDoubleAcceptsAnInteger) {
  ParamValues v;
  v.set("x", int64_t{3});
  EXPECT_DOUBLE_EQ(v.get_double("x"), 3.0);
}

TEST(ParamValues, UndeclaredNameIsALogicError) {
  const ParamValues v = ParamValues::defaults(test_schema());
  EXPECT_THROW(v.get_int("nope"), std::logic_error);
  EXPECT_THROW(v.get_double("nope"), std::logic_error);
  EXPECT_THROW(v.get_bool("nope"), std::logic_error);
  EXPECT_THROW(v.get_string("nope"), std::logic_error);
  EXPECT_THROW(v.get_duration("nope"), std::logic_error);
  try {
    v.get_int("nope");
  } catch (const std::logic_error& e) {
    EXPECT_STREQ(e.what(), "parameter \"nope\" is not declared");
  }
}

TEST(FormatParamValue, SpellsValuesLikeAScenario) {
  EXPECT_EQ(format_param_value(int64_t{2048}), "2048");
  EXPECT_EQ(format_param_value(0.9), "0.9");
  EXPECT_EQ(format_param_value(true), "true");
  EXPECT_EQ(format_param_value(false), "false");
  EXPECT_EQ(format_param_value(std::string("stall_free")), "stall_free");
}

TEST(FormatParamValue, DurationsUseTheLargestExactUnit) {
  EXPECT_EQ(format_param_value(Duration{2'000'000}), "2ms");
  EXPECT_EQ(format_param_value(Duration{1'000'000'000}), "1s");
  EXPECT_EQ(format_param_value(Duration{250'000}), "250us");
  EXPECT_EQ(format_param_value(Duration{1'500'000}), "1500us");
  EXPECT_EQ(format_param_value(Duration{100}), "100ns");
  EXPECT_EQ(format_param_value(Duration{0}), "0ns");
}

TEST(FormatParamValue, DurationRoundTripsThroughParse) {
  for (const int64_t ns : {int64_t{2'000'000}, int64_t{1'000'000'000}, int64_t{250'000},
                           int64_t{1'500'000}, int64_t{100}, int64_t{60'000'000'000}}) {
    EXPECT_EQ(parse_duration(format_param_value(Duration{ns})).count(), ns);
  }
}

TEST(ParamTypeName, NamesEveryType) {
  EXPECT_STREQ(param_type_name(ParamType::kInt), "integer");
  EXPECT_STREQ(param_type_name(ParamType::kDouble), "number");
  EXPECT_STREQ(param_type_name(ParamType::kBool), "boolean");
  EXPECT_STREQ(param_type_name(ParamType::kString), "string");
  EXPECT_STREQ(param_type_name(ParamType::kDuration), "duration");
}

}  // namespace
}  // namespace servesim
