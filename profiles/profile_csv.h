// Reader of the comma-separated tables of profiles/ (servesim's own and the third-party files the
// importers convert). Internal to servesim_profiles.
//
// Contract:
// - The whole file is read at construction; the first line is the header. Lines end in '\n' (a
//   '\r' before it is dropped); fields are separated by ',' and never quoted.
// - Columns are found by name. Every data line must have the header's field count.
// - Every error is an InputError naming the file and the 1-based line (1 = the header) and saying
//   what was expected and what was found.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace servesim::profiles {

class CsvReader {
 public:
  // Reads `path`. Throws InputError if it cannot be read or has no header line.
  explicit CsvReader(std::string path);

  const std::string& path() const { return path_; }
  const std::vector<std::string>& header() const { return header_; }
  // The header as written ("a,b,c").
  std::string header_text() const;

  // Index of column `name`, or -1 when absent.
  int find(std::string_view name) const;
  // Index of column `name`. Throws InputError (line 1) naming the missing column, the expected
  // columns `expected` and the header found.
  int require(std::string_view name, std::string_view expected) const;

  // Moves to the next data line; false at the end of the file. Throws InputError when the line's
  // field count differs from the header's (an empty line included).
  bool next();
  // 1-based line number of the current data line.
  long line() const { return line_; }

  std::string_view field(int column) const { return fields_[static_cast<size_t>(column)]; }
  std::string text(int column) const { return std::string(field(column)); }
  // The field as a base-10 integer >= `min`. Throws InputError otherwise.
  int64_t integer(int column, int64_t min) const;
  // The field as an integer >= `min` that fits in int.
  int small_integer(int column, int min) const;
  // The field as a finite decimal number >= 0 (fixed or exponent notation).
  double non_negative(int column) const;
  // "0" or "1".
  bool boolean(int column) const;
  // A non-empty field.
  std::string non_empty(int column) const;

  // Throws InputError at the current line.
  [[noreturn]] void fail(const std::string& message) const;

 private:
  std::string column_name(int column) const;

  std::string path_;
  std::string data_;
  std::vector<std::string> header_;
  size_t pos_ = 0;  // start of the next unread line in data_
  long line_ = 1;
  std::vector<std::string_view> fields_;
};

}  // namespace servesim::profiles
