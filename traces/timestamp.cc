#include "traces/timestamp.h"

namespace servesim::traces {
namespace {

constexpr int64_t kNsPerSecond = 1'000'000'000;
constexpr int kMinYear = 1900;
constexpr int kMaxYear = 2200;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Reads exactly `count` decimal digits at `pos` into `out` and advances `pos`.
// Returns false (leaving `pos` unspecified) if fewer than `count` digits are there.
bool take_digits(std::string_view text, size_t& pos, int count, int& out) {
  if (pos + static_cast<size_t>(count) > text.size()) {
    return false;
  }
  int value = 0;
  for (int i = 0; i < count; ++i) {
    const char c = text[pos + static_cast<size_t>(i)];
    if (!is_digit(c)) {
      return false;
    }
    value = value * 10 + (c - '0');
  }
  pos += static_cast<size_t>(count);
  out = value;
  return true;
}

bool take_char(std::string_view text, size_t& pos, char expected) {
  if (pos < text.size() && text[pos] == expected) {
    ++pos;
    return true;
  }
  return false;
}

bool is_leap_year(int year) { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0; }

int days_in_month(int year, int month) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && is_leap_year(year) ? 29 : kDays[month - 1];
}

}  // namespace

int64_t days_from_civil(int64_t year, int month, int day) {
  // Count in 400-year eras starting on 0000-03-01, so the leap day is the last day of a year.
  const int64_t y = month <= 2 ? year - 1 : year;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t year_of_era = y - era * 400;                               // [0, 399]
  const int64_t month_from_march = month > 2 ? month - 3 : month + 9;      // [0, 11]
  const int64_t day_of_year = (153 * month_from_march + 2) / 5 + day - 1;  // [0, 365]
  const int64_t day_of_era =
      year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;  // [0, 146096]
  // 719468 days separate 0000-03-01 from 1970-01-01.
  return era * 146097 + day_of_era - 719468;
}

std::optional<int64_t> parse_utc_timestamp_ns(std::string_view text) {
  size_t pos = 0;
  int year = 0;
  int month = 0;
  int day = 0;
  int hour = 0;
  int minute = 0;
  int second = 0;
  if (!take_digits(text, pos, 4, year) || !take_char(text, pos, '-') ||
      !take_digits(text, pos, 2, month) || !take_char(text, pos, '-') ||
      !take_digits(text, pos, 2, day)) {
    return std::nullopt;
  }
  if (!take_char(text, pos, ' ') && !take_char(text, pos, 'T')) {
    return std::nullopt;
  }
  if (!take_digits(text, pos, 2, hour) || !take_char(text, pos, ':') ||
      !take_digits(text, pos, 2, minute) || !take_char(text, pos, ':') ||
      !take_digits(text, pos, 2, second)) {
    return std::nullopt;
  }
  if (year < kMinYear || year > kMaxYear || month < 1 || month > 12 || day < 1 ||
      day > days_in_month(year, month) || hour > 23 || minute > 59 || second > 59) {
    return std::nullopt;
  }

  int64_t fraction_ns = 0;
  if (take_char(text, pos, '.')) {
    int digits = 0;
    int64_t scale = kNsPerSecond;
    while (pos < text.size() && is_digit(text[pos])) {
      if (++digits > 9) {
        return std::nullopt;
      }
      scale /= 10;
      fraction_ns += (text[pos] - '0') * scale;
      ++pos;
    }
    if (digits == 0) {
      return std::nullopt;
    }
  }

  int64_t offset_s = 0;
  if (pos < text.size()) {
    if (text[pos] == 'Z') {
      ++pos;
    } else if (text[pos] == '+' || text[pos] == '-') {
      const int sign = text[pos] == '+' ? 1 : -1;
      ++pos;
      int offset_hours = 0;
      int offset_minutes = 0;
      if (!take_digits(text, pos, 2, offset_hours) || !take_char(text, pos, ':') ||
          !take_digits(text, pos, 2, offset_minutes) || offset_hours > 23 || offset_minutes > 59) {
        return std::nullopt;
      }
      offset_s = sign * (offset_hours * 3600 + offset_minutes * 60);
    }
  }
  if (pos != text.size()) {
    return std::nullopt;
  }

  const int64_t seconds =
      days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset_s;
  return seconds * kNsPerSecond + fraction_ns;
}

}  // namespace servesim::traces
