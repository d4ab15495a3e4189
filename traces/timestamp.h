// Exact conversion of trace wall-clock timestamps to integer nanoseconds.
//
// Contract: parsing is pure integer arithmetic. Fractional seconds are taken digit by digit (no
// `double` on the way), and dates are converted with the proleptic Gregorian calendar, so a
// timestamp maps to the same nanosecond count on every platform.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace servesim::traces {

// Returns the number of days from 1970-01-01 to the civil date (year, month, day), negative
// before 1970, in the proleptic Gregorian calendar.
// REQUIRES: 1 <= month <= 12, 1 <= day <= 31.
int64_t days_from_civil(int64_t year, int month, int day);

// Returns nanoseconds since 1970-01-01T00:00:00Z for a UTC wall-clock timestamp of the form
//   YYYY-MM-DD{' '|'T'}HH:MM:SS[.f...][Z|{+|-}HH:MM]
// with 1 to 9 fractional digits. This covers the Azure 2023 ("2023-11-16 18:15:46.6805900"),
// 2024 ("2024-05-10 00:00:00.009930+00:00", "2024-05-12 00:00:00+00:00") and 2025
// ("2024-10-15T12:00:00.269Z") traces. Text without a zone is taken as UTC; an offset is
// subtracted to give UTC. Years are limited to 1900..2200 so the result always fits in int64.
// Returns std::nullopt if `text` is not of that form or names an impossible date or time.
std::optional<int64_t> parse_utc_timestamp_ns(std::string_view text);

}  // namespace servesim::traces
