#include "core/time.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"

namespace servesim {
namespace {

// Returns the message of the std::invalid_argument that parse_duration(text) throws.
std::string parse_error(const std::string& text) {
  try {
    parse_duration(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  ADD_FAILURE() << "parse_duration(\"" << text << "\") did not throw";
  return "";
}

TEST(ParseDuration, AcceptsEveryUnit) {
  EXPECT_EQ(parse_duration("100ns").count(), 100);
  EXPECT_EQ(parse_duration("250us").count(), 250'000);
  EXPECT_EQ(parse_duration("1.5ms").count(), 1'500'000);
  EXPECT_EQ(parse_duration("2s").count(), 2'000'000'000);
  EXPECT_EQ(parse_duration("3min").count(), 180'000'000'000);
  EXPECT_EQ(parse_duration("1h").count(), 3'600'000'000'000);
}

TEST(ParseDuration, AllowsSpacesBeforeTheUnit) {
  EXPECT_EQ(parse_duration("20 ms").count(), 20'000'000);
}

TEST(ParseDuration, MissingUnitNamesTheUnits) {
  EXPECT_EQ(parse_error("12"),
            "expected a duration unit ns, us, ms, s, min or h after the number, got \"12\"");
}

TEST(ParseDuration, NonNumberNamesTheExpectedForm) {
  EXPECT_EQ(parse_error("abc"),
            "expected a duration such as \"250us\", \"1.5ms\" or \"2s\", got \"abc\"");
  EXPECT_EQ(parse_error(""), "expected a duration such as \"250us\", \"1.5ms\" or \"2s\", got \"\"");
}

TEST(ParseDuration, UnknownUnitNamesTheUnits) {
  EXPECT_EQ(parse_error("5 parsecs"),
            "expected a duration unit ns, us, ms, s, min or h after the number, got \"5 parsecs\"");
}

TEST(ParseDuration, OverflowIsInvalidArgument) {
  const std::string msg = parse_error("1e12s");
  EXPECT_NE(msg.find("outside the simulated time range"), std::string::npos) << msg;
}

TEST(DurationFromSeconds, RoundsToNearestNanosecond) {
  EXPECT_EQ(duration_from_seconds(0.0).count(), 0);
  EXPECT_EQ(duration_from_seconds(1.4e-9).count(), 1);
  EXPECT_EQ(duration_from_seconds(1.6e-9).count(), 2);
  EXPECT_EQ(duration_from_seconds(-1.6e-9).count(), -2);
  EXPECT_EQ(duration_from_seconds(0.1234567894).count(), 123'456'789);
  EXPECT_EQ(duration_from_seconds(0.1234567896).count(), 123'456'790);
  EXPECT_EQ(duration_from_seconds(2.5).count(), 2'500'000'000);
  EXPECT_EQ(duration_from_ms(1.25).count(), 1'250'000);
}

// Exact halves round to even, as std::nearbyint() does, on both sides of 2^51 ns (where the
// conversion stops taking its shortcut) and for negative values.
TEST(DurationFromSeconds, TiesRoundToEvenAsNearbyint) {
  for (const double ns : {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1e6 + 0.5, 0x1p51 - 1.5, 0x1p51 - 0.5,
                          0x1p51 + 1.0, 0x1p52 + 2.0, -(0x1p51 - 0.5)}) {
    EXPECT_EQ(duration_from_seconds(ns / 1e9).count(),
              static_cast<int64_t>(std::nearbyint((ns / 1e9) * 1e9)))
        << ns;
  }
  EXPECT_EQ(duration_from_seconds(2.5e-9).count(), 2);
  EXPECT_EQ(duration_from_seconds(3.5e-9).count(), 4);
  EXPECT_EQ(duration_from_seconds(-2.5e-9).count(), -2);
}

// The same nanoseconds as std::nearbyint() over many magnitudes and fractions.
TEST(DurationFromSeconds, MatchesNearbyintAcrossMagnitudes) {
  for (double s = 1e-10; s < 9e9; s *= 1.37) {
    for (const double x : {s, -s, s * 1.000000001, s + 0.5e-9}) {
      ASSERT_EQ(duration_from_seconds(x).count(), static_cast<int64_t>(std::nearbyint(x * 1e9)))
          << x;
    }
  }
}

TEST(DurationFromSeconds, LargestValuesInRange) {
  // 9.2e9 s = 9.2e18 ns < 2^63.
  EXPECT_EQ(duration_from_seconds(9.2e9).count(), 9'200'000'000'000'000'000);
  EXPECT_EQ(duration_from_seconds(-9.2e9).count(), -9'200'000'000'000'000'000);
}

TEST(DurationFromSeconds, ThrowsRangeErrorOutsideRange) {
  EXPECT_THROW(duration_from_seconds(std::numeric_limits<double>::quiet_NaN()), RangeError);
  EXPECT_THROW(duration_from_seconds(std::numeric_limits<double>::infinity()), RangeError);
  EXPECT_THROW(duration_from_seconds(-std::numeric_limits<double>::infinity()), RangeError);
  EXPECT_THROW(duration_from_seconds(1e12), RangeError);
  EXPECT_THROW(duration_from_seconds(-1e12), RangeError);
  // 2^63 ns exactly does not fit.
  EXPECT_THROW(duration_from_seconds(9223372036.854775808), RangeError);
}

TEST(DurationFromSeconds, RangeErrorIsAServesimError) {
  try {
    duration_from_seconds(1e12);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside the simulated time range"), std::string::npos);
  }
}

TEST(TimeConversions, RoundTrip) {
  const SimTime t = time_from_ns(1'500'000'000);
  EXPECT_EQ(to_ns(t), 1'500'000'000);
  EXPECT_DOUBLE_EQ(to_seconds(t), 1.5);
  EXPECT_DOUBLE_EQ(to_ms(Duration{2'500'000}), 2.5);
}

TEST(FormatDuration, PicksAUnit) {
  EXPECT_EQ(format_duration(Duration{999}), "999 ns");
  EXPECT_EQ(format_duration(Duration{1'250}), "1.25 us");
  EXPECT_EQ(format_duration(Duration{1'250'000}), "1.25 ms");
  EXPECT_EQ(format_duration(Duration{3'000'000'000}), "3.000 s");
}

}  // namespace
}  // namespace servesim
