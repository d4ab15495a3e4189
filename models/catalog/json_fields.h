// Typed, path-aware reads of a parsed JSON document, shared by the GPU and model catalog loaders
// (hardware.cc) and the Hugging Face config importer (hf_import.cc). Internal to servesim_models.
//
// Contract:
// - Every failure throws InputError(file, 0, "<path>: <message>"), or InputError(file, 0,
//   "<message>") when the path is empty. The path of member `key` of an object at `prefix` is
//   join_path(prefix, key); an offending value is shown as render(value). These messages are
//   compared byte for byte by unit tests and error goldens.
// - A required member that is absent fails with "missing; expected <what>"; a JSON null counts as
//   present (and then fails the type check). Optional members treat absent and null alike and
//   yield the caller's fallback.
// - Numbers: "positive number" means finite and > 0; "positive integer" means a JSON integer > 0;
//   positive_int also caps it at 1e9 (no count or size in a catalog or config is larger).
// - Defined for nlohmann::json and nlohmann::ordered_json (json_fields.cc); render() keeps the
//   document's key order.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

namespace servesim::models {

// Returns "prefix.key", or `key` when `prefix` is empty.
std::string join_path(const std::string& prefix, const std::string& key);

// Returns `value` dumped compactly, cut to its first 57 characters and "..." when longer than 60.
template <typename JsonT>
std::string render(const JsonT& value);

// Reads and parses the whole file at `path`. Throws InputError(path, 0, "cannot open file") when it
// cannot be read, and InputError(path, <1-based line>, "invalid JSON: ...") on a syntax error.
template <typename JsonT>
JsonT parse_json_file(const std::string& path);

template <typename JsonT>
class JsonFieldReader {
 public:
  // `file` is named in every error.
  explicit JsonFieldReader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& message) const;

  // Returns member `key` of `parent`, or nullptr when it is absent or null.
  static const JsonT* find_optional(const JsonT& parent, const char* key);

  // Required members of `parent` (an object at `prefix`). string() accepts a non-empty string
  // only.
  const JsonT& object(const JsonT& parent, const std::string& prefix, const char* key) const;
  std::string string(const JsonT& parent, const std::string& prefix, const char* key) const;
  double positive_number(const JsonT& parent, const std::string& prefix, const char* key) const;
  int64_t positive_integer(const JsonT& parent, const std::string& prefix, const char* key) const;
  int positive_int(const JsonT& parent, const std::string& prefix, const char* key) const;
  int64_t non_negative_integer(const JsonT& parent, const std::string& prefix,
                               const char* key) const;
  bool boolean(const JsonT& parent, const std::string& prefix, const char* key) const;

  // Optional members of `parent`: `fallback` when absent or null.
  std::string optional_string(const JsonT& parent, const std::string& prefix, const char* key,
                              const std::string& fallback) const;
  // `expected` completes the message "expected <expected>, got <value>".
  double optional_positive_number(const JsonT& parent, const std::string& prefix, const char* key,
                                  double fallback, const char* expected) const;

  // Returns `value`, found at `path`, when it is a positive number; `expected` as above.
  double positive_number_at(const JsonT& value, const std::string& path,
                            const char* expected = "a positive number") const;

 private:
  // Returns member `key` of `parent`; fails "missing; expected <expected>" when it is absent.
  const JsonT& require(const JsonT& parent, const std::string& prefix, const char* key,
                       const char* expected) const;
  // Fails with "expected <expected>, got <render(value)>" unless `ok`.
  void expect(bool ok, const JsonT& value, const std::string& path, const char* expected) const;

  std::string file_;
};

extern template std::string render<nlohmann::json>(const nlohmann::json&);
extern template std::string render<nlohmann::ordered_json>(const nlohmann::ordered_json&);
extern template nlohmann::json parse_json_file<nlohmann::json>(const std::string&);
extern template nlohmann::ordered_json parse_json_file<nlohmann::ordered_json>(const std::string&);
extern template class JsonFieldReader<nlohmann::json>;
extern template class JsonFieldReader<nlohmann::ordered_json>;

}  // namespace servesim::models
