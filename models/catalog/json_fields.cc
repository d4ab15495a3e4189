#include "models/catalog/json_fields.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"

namespace servesim::models {

std::string join_path(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

template <typename JsonT>
std::string render(const JsonT& value) {
  std::string text = value.dump();
  if (text.size() > 60) {
    text = text.substr(0, 57) + "...";
  }
  return text;
}

template <typename JsonT>
JsonT parse_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InputError(path, 0, "cannot open file");
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  try {
    return JsonT::parse(text);
  } catch (const typename JsonT::parse_error& e) {
    const size_t end = std::min<size_t>(e.byte, text.size());
    const long line = 1 + static_cast<long>(std::count(
                              text.begin(), text.begin() + static_cast<long>(end), '\n'));
    std::string what = e.what();
    // Drop nlohmann's "[json.exception.parse_error.101] " prefix.
    if (auto pos = what.find("] "); pos != std::string::npos) {
      what = what.substr(pos + 2);
    }
    throw InputError(path, line, "invalid JSON: " + what);
  }
}

template <typename JsonT>
void JsonFieldReader<JsonT>::fail(const std::string& path, const std::string& message) const {
  throw InputError(file_, 0, path.empty() ? message : path + ": " + message);
}

template <typename JsonT>
const JsonT* JsonFieldReader<JsonT>::find_optional(const JsonT& parent, const char* key) {
  auto it = parent.find(key);
  return it == parent.end() || it->is_null() ? nullptr : &*it;
}

template <typename JsonT>
const JsonT& JsonFieldReader<JsonT>::object(const JsonT& parent, const std::string& prefix,
                                            const char* key) const {
  const JsonT& value = require(parent, prefix, key, "an object");
  expect(value.is_object(), value, join_path(prefix, key), "an object");
  return value;
}

template <typename JsonT>
std::string JsonFieldReader<JsonT>::string(const JsonT& parent, const std::string& prefix,
                                           const char* key) const {
  const JsonT& value = require(parent, prefix, key, "a non-empty string");
  expect(value.is_string() && !value.template get<std::string>().empty(), value,
         join_path(prefix, key), "a non-empty string");
  return value.template get<std::string>();
}

template <typename JsonT>
double JsonFieldReader<JsonT>::positive_number(const JsonT& parent, const std::string& prefix,
                                               const char* key) const {
  return positive_number_at(require(parent, prefix, key, "a positive number"),
                            join_path(prefix, key));
}

template <typename JsonT>
int64_t JsonFieldReader<JsonT>::positive_integer(const JsonT& parent, const std::string& prefix,
                                                 const char* key) const {
  const JsonT& value = require(parent, prefix, key, "a positive integer");
  expect(value.is_number_integer() && value.template get<int64_t>() > 0, value,
         join_path(prefix, key), "a positive integer");
  return value.template get<int64_t>();
}

template <typename JsonT>
int JsonFieldReader<JsonT>::positive_int(const JsonT& parent, const std::string& prefix,
                                         const char* key) const {
  const int64_t v = positive_integer(parent, prefix, key);
  if (v > 1'000'000'000) {
    fail(join_path(prefix, key), fmt::format("expected a positive integer below 1e9, got {}", v));
  }
  return static_cast<int>(v);
}

template <typename JsonT>
int64_t JsonFieldReader<JsonT>::non_negative_integer(const JsonT& parent, const std::string& prefix,
                                                     const char* key) const {
  const JsonT& value = require(parent, prefix, key, "a non-negative integer");
  expect(value.is_number_integer() && value.template get<int64_t>() >= 0, value,
         join_path(prefix, key), "a non-negative integer");
  return value.template get<int64_t>();
}

template <typename JsonT>
bool JsonFieldReader<JsonT>::boolean(const JsonT& parent, const std::string& prefix,
                                     const char* key) const {
  const JsonT& value = require(parent, prefix, key, "true or false");
  expect(value.is_boolean(), value, join_path(prefix, key), "true or false");
  return value.template get<bool>();
}

template <typename JsonT>
std::string JsonFieldReader<JsonT>::optional_string(const JsonT& parent, const std::string& prefix,
                                                    const char* key,
                                                    const std::string& fallback) const {
  const JsonT* value = find_optional(parent, key);
  if (value == nullptr) {
    return fallback;
  }
  expect(value->is_string(), *value, join_path(prefix, key), "a string");
  return value->template get<std::string>();
}

template <typename JsonT>
double JsonFieldReader<JsonT>::optional_positive_number(const JsonT& parent,
                                                        const std::string& prefix, const char* key,
                                                        double fallback,
                                                        const char* expected) const {
  const JsonT* value = find_optional(parent, key);
  return value == nullptr ? fallback : positive_number_at(*value, join_path(prefix, key), expected);
}

template <typename JsonT>
double JsonFieldReader<JsonT>::positive_number_at(const JsonT& value, const std::string& path,
                                                  const char* expected) const {
  expect(value.is_number() && value.template get<double>() > 0 &&
             std::isfinite(value.template get<double>()),
         value, path, expected);
  return value.template get<double>();
}

template <typename JsonT>
const JsonT& JsonFieldReader<JsonT>::require(const JsonT& parent, const std::string& prefix,
                                             const char* key, const char* expected) const {
  auto it = parent.find(key);
  if (it == parent.end()) {
    fail(join_path(prefix, key), fmt::format("missing; expected {}", expected));
  }
  return *it;
}

template <typename JsonT>
void JsonFieldReader<JsonT>::expect(bool ok, const JsonT& value, const std::string& path,
                                    const char* expected) const {
  if (!ok) {
    fail(path, fmt::format("expected {}, got {}", expected, render(value)));
  }
}

template std::string render<nlohmann::json>(const nlohmann::json&);
template std::string render<nlohmann::ordered_json>(const nlohmann::ordered_json&);
template nlohmann::json parse_json_file<nlohmann::json>(const std::string&);
template nlohmann::ordered_json parse_json_file<nlohmann::ordered_json>(const std::string&);
template class JsonFieldReader<nlohmann::json>;
template class JsonFieldReader<nlohmann::ordered_json>;

}  // namespace servesim::models
