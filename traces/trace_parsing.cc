#include "traces/trace_parsing.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"

namespace servesim::traces::detail {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";
constexpr size_t kMaxQuoted = 100;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

int64_t pow10(int exponent) {
  int64_t value = 1;
  for (int i = 0; i < exponent; ++i) {
    value *= 10;
  }
  return value;
}

std::string_view trim(std::string_view text) {
  size_t begin = 0;
  size_t end = text.size();
  while (begin < end && (text[begin] == ' ' || text[begin] == '\t')) {
    ++begin;
  }
  while (end > begin && (text[end - 1] == ' ' || text[end - 1] == '\t')) {
    --end;
  }
  return text.substr(begin, end - begin);
}

// Exponent-form numbers: converted through double, rounded to the nearest nanosecond.
std::optional<int64_t> parse_time_ns_via_double(std::string_view text, int64_t unit_ns) {
  const std::optional<double> value = parse_finite_double(text);
  if (!value || *value < 0) {
    return std::nullopt;
  }
  const double ns = std::nearbyint(*value * static_cast<double>(unit_ns));
  // 2^63 is exactly representable as a double; anything at or above it does not fit.
  if (!(ns < 9223372036854775808.0)) {
    return std::nullopt;
  }
  return static_cast<int64_t>(ns);
}

}  // namespace

LineReader::LineReader(std::string path) : path_(std::move(path)) {
  in_.open(path_, std::ios::in | std::ios::binary);
  if (!in_.is_open()) {
    throw InputError(path_, 0, fmt::format("cannot open file: {}", std::strerror(errno)));
  }
}

bool LineReader::next(std::string_view& line) {
  if (!std::getline(in_, line_)) {
    if (in_.bad()) {
      throw InputError(path_, line_number_ + 1, "read error");
    }
    return false;
  }
  ++line_number_;
  std::string_view view = line_;
  if (!view.empty() && view.back() == '\r') {
    view.remove_suffix(1);
  }
  if (line_number_ == 1 && view.substr(0, kUtf8Bom.size()) == kUtf8Bom) {
    view.remove_prefix(kUtf8Bom.size());
  }
  line = view;
  return true;
}

bool LineReader::next_non_empty(std::string_view& line) {
  while (next(line)) {
    if (!line.empty()) {
      return true;
    }
  }
  return false;
}

void LineReader::fail(const std::string& message) const {
  throw InputError(path_, line_number_, message);
}

void split_csv(std::string_view line, std::vector<std::string_view>& fields) {
  fields.clear();
  size_t start = 0;
  for (;;) {
    const size_t comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      fields.push_back(trim(line.substr(start)));
      return;
    }
    fields.push_back(trim(line.substr(start, comma - start)));
    start = comma + 1;
  }
}

std::string quote_found(std::string_view text) {
  if (text.size() > kMaxQuoted) {
    return fmt::format("\"{}...\"", text.substr(0, kMaxQuoted - 3));
  }
  return fmt::format("\"{}\"", text);
}

std::string_view read_header(LineReader& reader, std::string_view expected,
                             std::vector<std::string_view>& fields) {
  std::string_view line;
  if (!reader.next_non_empty(line)) {
    throw InputError(reader.path(), 0,
                     fmt::format("expected a header line {}, found an empty file", expected));
  }
  split_csv(line, fields);
  return line;
}

bool header_is(const std::vector<std::string_view>& fields, std::string_view header) {
  size_t start = 0;
  for (size_t i = 0; i < fields.size(); ++i) {
    const size_t comma = header.find(',', start);
    const bool last = comma == std::string_view::npos;
    if (last != (i + 1 == fields.size())) {
      return false;
    }
    const std::string_view name = header.substr(start, last ? header.npos : comma - start);
    if (fields[i] != name) {
      return false;
    }
    start = comma + 1;
  }
  return !fields.empty();
}

void expect_columns(const LineReader& reader, const std::vector<std::string_view>& fields,
                    size_t count, std::string_view header) {
  if (fields.size() != count) {
    reader.fail(fmt::format("expected {} comma-separated columns ({}), found {}", count, header,
                            fields.size()));
  }
}

int64_t non_negative_int_field(const LineReader& reader, std::string_view column,
                               std::string_view text) {
  const std::optional<int64_t> value = parse_non_negative_int(text);
  if (!value) {
    reader.fail(
        fmt::format("{}: expected a non-negative integer, found {}", column, quote_found(text)));
  }
  return *value;
}

int64_t positive_int_field(const LineReader& reader, std::string_view column,
                           std::string_view text) {
  const std::optional<int64_t> value = parse_non_negative_int(text);
  if (!value || *value == 0) {
    reader.fail(
        fmt::format("{}: expected a positive integer, found {}", column, quote_found(text)));
  }
  return *value;
}

std::optional<int64_t> parse_non_negative_int(std::string_view text) {
  if (text.empty() || !is_digit(text.front())) {
    return std::nullopt;
  }
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

std::optional<double> parse_finite_double(std::string_view text) {
  if (text.empty()) {
    return std::nullopt;
  }
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

std::string time_field_problem(std::string_view text, int unit_exponent, std::string_view unit,
                               std::string_view expected) {
  const std::optional<double> v = parse_finite_double(text);
  const double limit = 9.223372036854775807e18 / std::pow(10.0, 9 - unit_exponent);
  if (v && *v >= limit) {
    return fmt::format("too large: at most {:.2g} {} (about 292 years) fit the simulated clock",
                       limit, unit);
  }
  return std::string(expected);
}

std::optional<int64_t> parse_time_ns(std::string_view text, int unit_exponent) {
  const int exact_digits = 9 - unit_exponent;  // fractional digits that are whole nanoseconds
  const int64_t unit_ns = pow10(exact_digits);
  if (text.find_first_of("eE") != std::string_view::npos) {
    return parse_time_ns_via_double(text, unit_ns);
  }

  size_t pos = 0;
  int64_t whole = 0;
  bool any_digit = false;
  for (; pos < text.size() && is_digit(text[pos]); ++pos) {
    const int digit = text[pos] - '0';
    if (whole > (kInt64Max - digit) / 10) {
      return std::nullopt;
    }
    whole = whole * 10 + digit;
    any_digit = true;
  }
  int64_t fraction_ns = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    int64_t scale = unit_ns;
    int taken = 0;
    for (; pos < text.size() && is_digit(text[pos]); ++pos) {
      const int digit = text[pos] - '0';
      any_digit = true;
      if (taken < exact_digits) {
        scale /= 10;
        fraction_ns += digit * scale;
      } else if (taken == exact_digits && digit >= 5) {
        fraction_ns += 1;  // round half up on the first digit below a nanosecond
      }
      ++taken;
    }
  }
  if (!any_digit || pos != text.size() || whole > (kInt64Max - fraction_ns) / unit_ns) {
    return std::nullopt;
  }
  return whole * unit_ns + fraction_ns;
}

TimelineBuilder::TimelineBuilder(std::string description, std::string time_column)
    : time_column_(std::move(time_column)) {
  workload_.description = std::move(description);
}

void TimelineBuilder::add(const LineReader& reader, std::string_view time_text, int64_t arrival_ns,
                          int64_t prompt_tokens, int64_t output_tokens,
                          std::vector<uint64_t> prefix_hash_ids) {
  if (any_row_ && arrival_ns < previous_arrival_ns_) {
    reader.fail(fmt::format(
        "{}: expected a time at or after the previous row's {} (rows must be sorted by arrival; "
        "ties are allowed), found {}",
        time_column_, quote_found(previous_time_text_), quote_found(time_text)));
  }
  any_row_ = true;
  ++data_rows_;
  previous_arrival_ns_ = arrival_ns;
  previous_time_text_.assign(time_text);
  if (prompt_tokens == 0 || output_tokens == 0) {
    ++workload_.skipped_rows;
    return;
  }
  RequestSpec& request = workload_.requests.emplace_back();
  request.arrival = time_from_ns(arrival_ns);
  request.prompt_tokens = prompt_tokens;
  request.output_tokens = output_tokens;
  request.prefix_hash_ids = std::move(prefix_hash_ids);
}

Workload TimelineBuilder::finish(const LineReader& reader) {
  if (workload_.requests.empty()) {
    if (data_rows_ == 0) {
      throw InputError(reader.path(), 0, "expected at least one data row, found none");
    }
    throw InputError(reader.path(), 0,
                     fmt::format("expected at least one row with positive prompt and output token "
                                 "counts, found none ({} rows skipped)",
                                 workload_.skipped_rows));
  }
  // Rows arrive sorted, so the first kept request is the earliest.
  const Duration origin = workload_.requests.front().arrival.time_since_epoch();
  RequestId id = 0;
  for (RequestSpec& request : workload_.requests) {
    request.arrival -= origin;
    request.id = id++;
  }
  return std::move(workload_);
}

}  // namespace servesim::traces::detail
