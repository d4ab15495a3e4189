// Internal helpers shared by the trace loaders: a streaming line reader, CSV splitting, exact
// field parsers and the builder that turns validated rows into a finalised Workload.
//
// Not part of the public traces API; only the loader sources include this header.
//
// Contract: every parser returns std::nullopt instead of guessing, and the loaders turn that into
// an InputError naming the file, the 1-based line, what was expected and what was found.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/request_spec.h"

namespace servesim::traces::detail {

// Reads a text file one line at a time, keeping only the current line in memory.
// Line endings "\n" and "\r\n" are both accepted; a UTF-8 byte-order mark before the first line
// is dropped.
class LineReader {
 public:
  // Throws InputError(path, 0, ...) if the file cannot be opened.
  explicit LineReader(std::string path);

  // Advances to the next line and stores it (without its line ending) in `line`; the view stays
  // valid until the next call. Returns false at end of file. Throws InputError on a read error.
  bool next(std::string_view& line);
  // Like next(), but skips empty lines.
  bool next_non_empty(std::string_view& line);

  const std::string& path() const { return path_; }
  // 1-based number of the line last returned by next(); 0 before the first call.
  long line_number() const { return line_number_; }

  // Throws InputError(path, line_number(), message).
  [[noreturn]] void fail(const std::string& message) const;

 private:
  std::string path_;
  std::ifstream in_;
  std::string line_;
  long line_number_ = 0;
};

// Splits `line` at every comma into `fields` (cleared first) and trims spaces and tabs around
// each field. The trace formats never quote fields, so quotes get no special meaning.
void split_csv(std::string_view line, std::vector<std::string_view>& fields);

// Returns `text` quoted for an error message, shortened to at most 100 characters.
std::string quote_found(std::string_view text);

// Reads the header line (the first non-empty line), splits it into `fields` and returns it (valid
// until the next read). Throws InputError(path, 0, ...) naming `expected` if the file has no
// non-empty line.
std::string_view read_header(LineReader& reader, std::string_view expected,
                             std::vector<std::string_view>& fields);

// Returns true if `fields` equals the comma-separated column names in `header`.
bool header_is(const std::vector<std::string_view>& fields, std::string_view header);

// Throws unless `fields` has exactly `count` entries: "expected N comma-separated columns (HEADER),
// found M".
void expect_columns(const LineReader& reader, const std::vector<std::string_view>& fields,
                    size_t count, std::string_view header);

// Returns `text` as a non-negative (or, for positive_int_field, positive) integer, or throws
// "COLUMN: expected a non-negative integer, found \"TEXT\"".
int64_t non_negative_int_field(const LineReader& reader, std::string_view column,
                               std::string_view text);
int64_t positive_int_field(const LineReader& reader, std::string_view column,
                           std::string_view text);

// Returns the decimal integer in `text` if it is a non-negative int64 (digits only, no sign).
std::optional<int64_t> parse_non_negative_int(std::string_view text);

// Returns the finite number in `text` (decimal or exponent form), as std::from_chars reads it.
std::optional<double> parse_finite_double(std::string_view text);

// Returns a non-negative duration given in `text` in units of 10^-`unit_exponent` seconds
// (0 = seconds, 3 = milliseconds), in nanoseconds. Plain decimals ("37274", "19440110.0",
// "0.30000000000000004") are converted exactly and rounded half up to the nanosecond; exponent
// forms ("1.5e-3") go through `double`. Returns std::nullopt for anything else, negative values and
// values beyond the int64 nanosecond range.
// REQUIRES: 0 <= unit_exponent <= 9.
std::optional<int64_t> parse_time_ns(std::string_view text, int unit_exponent);

// Why parse_time_ns() refused `text`: "too large: at most 9.2e+09 seconds (about 292 years)
// fit the simulated clock" for a non-negative number past the clock's range, else `expected`.
// `unit` names the field's unit.
std::string time_field_problem(std::string_view text, int unit_exponent, std::string_view unit,
                               std::string_view expected);

// Collects validated rows in file order and produces the finalised Workload.
//
// Every row's arrival must be at or after the previous row's (ties allowed); rows with a zero
// prompt or output token count are counted in skipped_rows and not kept. finish() shifts arrivals
// so the first kept request arrives at time 0.
class TimelineBuilder {
 public:
  TimelineBuilder(std::string description, std::string time_column);

  // Adds the row that `reader` is on. `time_text` is the raw timestamp field, used in messages.
  // Throws InputError if `arrival_ns` is before the previous row's arrival.
  void add(const LineReader& reader, std::string_view time_text, int64_t arrival_ns,
           int64_t prompt_tokens, int64_t output_tokens,
           std::vector<uint64_t> prefix_hash_ids = {});

  // Returns the workload. Throws InputError(path, 0, ...) if no request was kept.
  Workload finish(const LineReader& reader);

 private:
  Workload workload_;
  std::string time_column_;
  std::string previous_time_text_;
  int64_t previous_arrival_ns_ = 0;
  bool any_row_ = false;
  long data_rows_ = 0;
};

}  // namespace servesim::traces::detail
