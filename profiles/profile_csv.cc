#include "profiles/profile_csv.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/error.h"

namespace servesim::profiles {
namespace {

void split(std::string_view line, std::vector<std::string_view>* out) {
  out->clear();
  size_t start = 0;
  while (true) {
    size_t comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      out->push_back(line.substr(start));
      return;
    }
    out->push_back(line.substr(start, comma - start));
    start = comma + 1;
  }
}

std::string_view strip_cr(std::string_view line) {
  if (!line.empty() && line.back() == '\r') {
    line.remove_suffix(1);
  }
  return line;
}

}  // namespace

CsvReader::CsvReader(std::string path) : path_(std::move(path)) {
  std::ifstream in(path_, std::ios::binary);
  if (!in) {
    throw InputError(path_, 0, "cannot open file");
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  data_ = buffer.str();
  if (data_.empty()) {
    throw InputError(path_, 1, "expected a header line, found an empty file");
  }
  size_t end = data_.find('\n');
  std::string_view first = strip_cr(std::string_view(data_).substr(0, end));
  pos_ = end == std::string::npos ? data_.size() : end + 1;
  std::vector<std::string_view> names;
  split(first, &names);
  for (std::string_view name : names) {
    header_.emplace_back(name);
  }
  for (size_t i = 0; i < header_.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (!header_[i].empty() && header_[i] == header_[j]) {
        throw InputError(path_, 1,
                         fmt::format("expected distinct column names, found \"{}\" twice in {}",
                                     header_[i], std::string(first)));
      }
    }
  }
}

std::string CsvReader::header_text() const {
  std::string out;
  for (size_t i = 0; i < header_.size(); ++i) {
    out += (i ? "," : "") + header_[i];
  }
  return out;
}

int CsvReader::find(std::string_view name) const {
  for (size_t i = 0; i < header_.size(); ++i) {
    if (header_[i] == name) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

int CsvReader::require(std::string_view name, std::string_view expected) const {
  int index = find(name);
  if (index < 0) {
    throw InputError(path_, 1,
                     fmt::format("missing column \"{}\": expected columns {}, found {}", name,
                                 expected, header_text()));
  }
  return index;
}

bool CsvReader::next() {
  if (pos_ >= data_.size()) {
    return false;
  }
  size_t end = data_.find('\n', pos_);
  if (end == std::string::npos) {
    end = data_.size();
  }
  std::string_view line = strip_cr(std::string_view(data_).substr(pos_, end - pos_));
  pos_ = end + 1;
  ++line_;
  if (line.empty()) {
    fail(fmt::format("expected {} comma-separated fields, found an empty line", header_.size()));
  }
  split(line, &fields_);
  if (fields_.size() != header_.size()) {
    fail(fmt::format("expected {} comma-separated fields (as in the header), found {}",
                     header_.size(), fields_.size()));
  }
  return true;
}

std::string CsvReader::column_name(int column) const {
  const std::string& name = header_[static_cast<size_t>(column)];
  return name.empty() ? fmt::format("{}", column + 1) : name;
}

int64_t CsvReader::integer(int column, int64_t min) const {
  std::string_view text = field(column);
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < min) {
    fail(fmt::format("column {}: expected an integer >= {}, found \"{}\"", column_name(column), min,
                     text));
  }
  return value;
}

int CsvReader::small_integer(int column, int min) const {
  int64_t value = integer(column, min);
  if (value > std::numeric_limits<int>::max()) {
    fail(fmt::format("column {}: expected an integer <= {}, found \"{}\"", column_name(column),
                     std::numeric_limits<int>::max(), field(column)));
  }
  return static_cast<int>(value);
}

double CsvReader::non_negative(int column) const {
  std::string_view text = field(column);
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
      !std::isfinite(value) || value < 0) {
    fail(fmt::format("column {}: expected a non-negative decimal number, found \"{}\"",
                     column_name(column), text));
  }
  return value;
}

bool CsvReader::boolean(int column) const {
  std::string_view text = field(column);
  if (text == "0" || text == "1") {
    return text == "1";
  }
  fail(fmt::format("column {}: expected 0 or 1, found \"{}\"", column_name(column), text));
}

std::string CsvReader::non_empty(int column) const {
  if (field(column).empty()) {
    fail(fmt::format("column {}: expected a non-empty value, found an empty field",
                     column_name(column)));
  }
  return text(column);
}

void CsvReader::fail(const std::string& message) const { throw InputError(path_, line_, message); }

}  // namespace servesim::profiles
