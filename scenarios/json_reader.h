// Validating reader over a JSON document: typed getters that record every problem with its JSON
// path instead of stopping at the first, and write the value actually used (defaults included)
// into a resolved copy of the document.
//
// Contract: a getter never throws on bad input; it appends a ConfigIssue and returns the default
// (or an empty value). ObjectReader::finish() reports every key that no getter asked for
// ("unknown key"). Call sites check issues().empty() before trusting the values.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/params.h"
#include "core/time.h"

namespace servesim::scenarios {

using Json = nlohmann::ordered_json;

class Issues {
 public:
  void add(const std::string& path, std::string message) { list_.push_back({path, std::move(message)}); }
  bool empty() const { return list_.empty(); }
  const std::vector<ConfigIssue>& list() const { return list_; }

 private:
  std::vector<ConfigIssue> list_;
};

// Joins a parent path and a key: ("cluster", "tp") -> "cluster.tp"; ("", "seed") -> "seed".
std::string join_path(const std::string& parent, const std::string& key);
// Short rendering of a JSON value for messages (strings quoted, long values elided).
std::string describe_json(const Json& value);

// The message for `value`, which is none of `choices`: "expected one of a, b, c, got "x"". When
// one choice is nearer to a string value than any other and near enough to be a slip (edit
// distance at most 1 for names of up to 4 characters, 2 up to 8, else 3), it adds "; did you mean
// "y"?", and a long list (more than kListedChoices) is then only counted.
inline constexpr size_t kListedChoices = 8;
std::string choice_error(const Json& value, const std::vector<std::string>& choices);

class ObjectReader {
 public:
  // `in` must outlive the reader. If `in` is not an object, an issue is recorded and every getter
  // returns its default.
  ObjectReader(const Json& in, std::string path, Issues& issues, Json& resolved);

  bool valid() const { return valid_; }
  bool has(const std::string& key) const;
  const std::string& path() const { return path_; }
  std::string child_path(const std::string& key) const { return join_path(path_, key); }

  std::optional<std::string> string(const std::string& key, std::optional<std::string> fallback,
                                    const std::vector<std::string>& choices = {});
  std::optional<int64_t> integer(const std::string& key, std::optional<int64_t> fallback,
                                 std::optional<int64_t> min = {}, std::optional<int64_t> max = {});
  std::optional<double> number(const std::string& key, std::optional<double> fallback,
                               std::optional<double> min = {}, std::optional<double> max = {},
                               bool min_exclusive = false);
  std::optional<bool> boolean(const std::string& key, std::optional<bool> fallback);
  std::optional<Duration> duration(const std::string& key, std::optional<Duration> fallback,
                                   bool allow_zero = true);
  // A nested object (nullptr, with an issue, if present but not an object; nullptr if absent).
  const Json* object(const std::string& key, bool required);
  // An array (nullptr if absent or not an array; an issue in the latter case or if required).
  const Json* array(const std::string& key, bool required);
  // Marks a key as known without reading it (the caller reads it another way).
  void claim(const std::string& key);
  // Reads every parameter of `schema` from this object.
  ParamValues params(const ParamSchema& schema);

  // Records an "unknown key" issue for every key no getter asked for.
  void finish();

  Json& resolved() { return resolved_; }
  Issues& issues() { return issues_; }

 private:
  const Json* find(const std::string& key, bool required);
  void missing(const std::string& key);

  const Json& in_;
  std::string path_;
  Issues& issues_;
  Json& resolved_;
  bool valid_ = true;
  std::vector<std::string> seen_;
};

// A parameter value as a scenario spells it: numbers and booleans as JSON numbers and booleans,
// strings as strings, durations as strings with a unit ("2ms").
Json param_json(const ParamValue& value);

// Reads a JSON document (comments allowed). Throws InputError "cannot open <what>" when the file
// cannot be read, and InputError with the line of the first syntax error for invalid JSON.
Json read_json_file(const std::string& path, const std::string& what = "file");

// A reader of the optional top-level section `name` of `top` (an empty object when it is absent)
// that writes what it resolves to resolved[name].
ObjectReader section_reader(ObjectReader& top, const char* name, Issues& issues, Json& resolved);

}  // namespace servesim::scenarios
