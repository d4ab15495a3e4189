// Mooncake FAST'25 JSON Lines traces (contract in loaders.h).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "traces/loaders.h"
#include "traces/trace_parsing.h"

namespace servesim::traces {
namespace {

using nlohmann::json;

constexpr uint64_t kInt64Max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
constexpr int64_t kNsPerMs = 1'000'000;

// Returns the JSON text of `value` quoted and shortened for an error message.
std::string found(const json& value) { return detail::quote_found(value.dump()); }

const json& require_field(const detail::LineReader& reader, const json& row, const char* key,
                          std::string_view expected) {
  const auto it = row.find(key);
  if (it == row.end()) {
    reader.fail(fmt::format("expected field \"{}\" ({}), found none", key, expected));
  }
  return *it;
}

int64_t token_count(const detail::LineReader& reader, const json& row, const char* key) {
  const json& value = require_field(reader, row, key, "a non-negative integer");
  if (!value.is_number_unsigned() || value.get<uint64_t>() > kInt64Max) {
    reader.fail(fmt::format("{}: expected a non-negative integer, found {}", key, found(value)));
  }
  return static_cast<int64_t>(value.get<uint64_t>());
}

// Milliseconds, integer or not, to nanoseconds.
int64_t arrival_ns(const detail::LineReader& reader, const json& row) {
  const json& value = require_field(reader, row, "timestamp", "non-negative milliseconds");
  if (value.is_number_unsigned() && value.get<uint64_t>() <= kInt64Max / kNsPerMs) {
    return static_cast<int64_t>(value.get<uint64_t>()) * kNsPerMs;
  }
  if (value.is_number_float()) {
    const double ns = std::nearbyint(value.get<double>() * static_cast<double>(kNsPerMs));
    if (ns >= 0 && ns < 9223372036854775808.0) {
      return static_cast<int64_t>(ns);
    }
  }
  reader.fail(fmt::format("timestamp: expected non-negative milliseconds, found {}", found(value)));
}

std::vector<uint64_t> hash_ids(const detail::LineReader& reader, const json& row) {
  std::vector<uint64_t> ids;
  const auto it = row.find("hash_ids");
  if (it == row.end()) {
    return ids;
  }
  if (!it->is_array()) {
    reader.fail(
        fmt::format("hash_ids: expected a list of non-negative integers, found {}", found(*it)));
  }
  ids.reserve(it->size());
  for (const json& id : *it) {
    if (!id.is_number_unsigned()) {
      reader.fail(fmt::format(
          "hash_ids: expected a list of non-negative integers, found element {}", found(id)));
    }
    ids.push_back(id.get<uint64_t>());
  }
  return ids;
}

// Fast path for the common row shape, read without building a DOM: one flat object whose keys are
// exactly "timestamp", "input_length", "output_length" and optionally "hash_ids", the first three
// non-negative integers and the last a list of them. Anything else (other keys, floats, strings,
// escapes, malformed JSON) makes read() return false; the row is then re-read by the checked DOM
// path, which either accepts it or reports exactly what is wrong. Both paths give the same values
// for every row the fast path accepts.
class FlatRowReader {
 public:
  // Returns true if `line` had the common shape; the accessors are then valid.
  bool read(std::string_view line) {
    text_ = line;
    pos_ = 0;
    hash_ids_.clear();
    timestamp_ms_ = 0;
    input_length_ = 0;
    output_length_ = 0;
    unsigned seen = 0;
    skip_space();
    if (!take('{')) {
      return false;
    }
    skip_space();
    if (!take('}')) {
      for (;;) {
        std::string_view key;
        if (!take_key(key)) {
          return false;
        }
        skip_space();
        if (!take(':')) {
          return false;
        }
        skip_space();
        unsigned bit = 0;
        if (key == "timestamp") {
          bit = 1;
        } else if (key == "input_length") {
          bit = 2;
        } else if (key == "output_length") {
          bit = 4;
        } else if (key == "hash_ids") {
          bit = 8;
        }
        if (bit == 0 || (seen & bit) != 0) {
          return false;
        }
        seen |= bit;
        const bool ok = bit == 1   ? take_uint(timestamp_ms_)
                        : bit == 2 ? take_uint(input_length_)
                        : bit == 4 ? take_uint(output_length_)
                                   : take_hash_id_list();
        if (!ok) {
          return false;
        }
        skip_space();
        if (take('}')) {
          break;
        }
        if (!take(',')) {
          return false;
        }
        skip_space();
      }
    }
    skip_space();
    return pos_ == text_.size() && (seen & 7) == 7 && timestamp_ms_ <= kInt64Max / kNsPerMs &&
           input_length_ <= kInt64Max && output_length_ <= kInt64Max;
  }

  uint64_t timestamp_ms() const { return timestamp_ms_; }
  int64_t input_length() const { return static_cast<int64_t>(input_length_); }
  int64_t output_length() const { return static_cast<int64_t>(output_length_); }
  std::vector<uint64_t> release_hash_ids() { return std::move(hash_ids_); }

 private:
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\n')) {
      ++pos_;
    }
  }

  bool take(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  // A key without escapes.
  bool take_key(std::string_view& key) {
    if (!take('"')) {
      return false;
    }
    const size_t end = text_.find_first_of("\"\\", pos_);
    if (end == std::string_view::npos || text_[end] != '"') {
      return false;
    }
    key = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return true;
  }

  // A JSON integer without sign, fraction or exponent that fits in uint64.
  bool take_uint(uint64_t& value) {
    const char* begin = text_.data() + pos_;
    const char* end = text_.data() + text_.size();
    if (begin == end || *begin < '0' || *begin > '9' ||
        (*begin == '0' && begin + 1 < end && begin[1] >= '0' && begin[1] <= '9')) {
      return false;
    }
    const auto [next, ec] = std::from_chars(begin, end, value);
    if (ec != std::errc() || (next < end && (*next == '.' || *next == 'e' || *next == 'E'))) {
      return false;
    }
    pos_ += static_cast<size_t>(next - begin);
    return true;
  }

  bool take_hash_id_list() {
    if (!take('[')) {
      return false;
    }
    // One id per 512-token block when input_length came first; capped, since it is not yet checked.
    hash_ids_.reserve(static_cast<size_t>(std::min<uint64_t>(input_length_ / 512 + 1, 4096)));
    skip_space();
    if (take(']')) {
      return true;
    }
    for (;;) {
      uint64_t id = 0;
      if (!take_uint(id)) {
        return false;
      }
      hash_ids_.push_back(id);
      skip_space();
      if (take(']')) {
        return true;
      }
      if (!take(',')) {
        return false;
      }
      skip_space();
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
  uint64_t timestamp_ms_ = 0;
  uint64_t input_length_ = 0;
  uint64_t output_length_ = 0;
  std::vector<uint64_t> hash_ids_;
};

}  // namespace

Workload load_mooncake(const std::string& path) {
  detail::LineReader reader(path);
  detail::TimelineBuilder builder(fmt::format("mooncake:{}", path), "timestamp");
  std::string_view line;
  FlatRowReader flat;
  json row;
  while (reader.next_non_empty(line)) {
    if (flat.read(line)) {
      const fmt::format_int timestamp_text(flat.timestamp_ms());
      builder.add(reader, std::string_view(timestamp_text.data(), timestamp_text.size()),
                  static_cast<int64_t>(flat.timestamp_ms()) * kNsPerMs, flat.input_length(),
                  flat.output_length(), flat.release_hash_ids());
      continue;
    }
    try {
      row = json::parse(line);
    } catch (const json::parse_error& e) {
      reader.fail(fmt::format("expected a JSON object, found invalid JSON (error at byte {}): {}",
                              e.byte, detail::quote_found(line)));
    } catch (const json::out_of_range&) {
      // nlohmann's out_of_range.406: a number beyond a double's range, such as 1e999.
      reader.fail(fmt::format("expected a JSON object, found a number out of range (a JSON number "
                              "must fit a double, up to about 1.8e308): {}",
                              detail::quote_found(line)));
    }
    if (!row.is_object()) {
      reader.fail(fmt::format("expected a JSON object, found {}", found(row)));
    }
    const int64_t arrival = arrival_ns(reader, row);
    const int64_t prompt = token_count(reader, row, "input_length");
    const int64_t output = token_count(reader, row, "output_length");
    builder.add(reader, row["timestamp"].dump(), arrival, prompt, output, hash_ids(reader, row));
  }
  return builder.finish(reader);
}

}  // namespace servesim::traces
