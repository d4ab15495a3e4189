#include "traces/timestamp.h"

#include <chrono>
#include <optional>

#include <gtest/gtest.h>

namespace servesim::traces {
namespace {

constexpr int64_t kNs = 1'000'000'000;

TEST(DaysFromCivil, MatchesKnownDates) {
  EXPECT_EQ(days_from_civil(1970, 1, 1), 0);
  EXPECT_EQ(days_from_civil(1969, 12, 31), -1);
  EXPECT_EQ(days_from_civil(2000, 2, 29), 951782400 / 86400);
  EXPECT_EQ(days_from_civil(2000, 3, 1), 951782400 / 86400 + 1);
  EXPECT_EQ(days_from_civil(2100, 3, 1), 4107542400 / 86400);
}

TEST(DaysFromCivil, AgreesWithChronoCalendarFrom1900To2200) {
  using namespace std::chrono;
  for (sys_days day = sys_days{year{1900} / January / 1};
       day <= sys_days{year{2200} / December / 31}; day += days{1}) {
    const year_month_day ymd{day};
    ASSERT_EQ(days_from_civil(static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()),
                              static_cast<unsigned>(ymd.day())),
              day.time_since_epoch().count())
        << static_cast<int>(ymd.year()) << "-" << static_cast<unsigned>(ymd.month()) << "-"
        << static_cast<unsigned>(ymd.day());
  }
}

TEST(ParseUtcTimestamp, Azure2023SevenFractionalDigitsAreExact) {
  // 2023-11-16 18:15:46 UTC is 1700158546 s after the epoch.
  EXPECT_EQ(parse_utc_timestamp_ns("2023-11-16 18:15:46.6805900"), 1700158546 * kNs + 680590000);
  EXPECT_EQ(parse_utc_timestamp_ns("2023-11-16 18:15:46.0000001"), 1700158546 * kNs + 100);
}

TEST(ParseUtcTimestamp, Azure2024WithAndWithoutFraction) {
  // 2024-05-10 00:00:00 UTC is 1715299200 s after the epoch.
  EXPECT_EQ(parse_utc_timestamp_ns("2024-05-10 00:00:00.009930+00:00"), 1715299200 * kNs + 9930000);
  EXPECT_EQ(parse_utc_timestamp_ns("2024-05-12 00:00:00+00:00"), (1715299200 + 2 * 86400) * kNs);
}

TEST(ParseUtcTimestamp, Azure2025IsoWithZ) {
  EXPECT_EQ(parse_utc_timestamp_ns("2024-10-15T12:00:00.269Z"),
            (days_from_civil(2024, 10, 15) * 86400 + 12 * 3600) * kNs + 269000000);
}

TEST(ParseUtcTimestamp, OffsetsAreSubtracted) {
  EXPECT_EQ(parse_utc_timestamp_ns("2024-05-10 02:30:00+02:30"), 1715299200 * kNs);
  EXPECT_EQ(parse_utc_timestamp_ns("2024-05-09 22:00:00-02:00"), 1715299200 * kNs);
  EXPECT_EQ(parse_utc_timestamp_ns("2024-05-10T00:00:00.123456789"), 1715299200 * kNs + 123456789);
}

TEST(ParseUtcTimestamp, RejectsMalformedText) {
  for (const char* text :
       {"", "2023-11-16", "2023-11-16 18:15", "2023-11-16 18:15:46.", "2023-13-16 18:15:46",
        "2023-02-29 00:00:00", "2023-11-16 24:00:00", "2023-11-16 18:60:00", "2023-11-16 18:15:60",
        "2023-11-16 18:15:46.1234567890", "2023-11-16 18:15:46Zx", "2023-11-16 18:15:46+0000",
        "2023-11-16_18:15:46", " 2023-11-16 18:15:46", "1899-12-31 00:00:00",
        "2023-11-16 18:15:46.68 ", "23-11-16 18:15:46"}) {
    EXPECT_EQ(parse_utc_timestamp_ns(text), std::nullopt) << text;
  }
  EXPECT_NE(parse_utc_timestamp_ns("2024-02-29 00:00:00"), std::nullopt);
}

}  // namespace
}  // namespace servesim::traces
