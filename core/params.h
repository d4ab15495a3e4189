// Typed parameter schemas for plugins (policies, routers).
//
// Contract: a plugin declares its parameters once (name, type, default, unit, help). The schema
// drives JSON validation (scenarios/), `servesim list policies`, and --set overrides: one source of
// truth. ParamValues holds one value per declared parameter after validation, defaults filled in;
// plugins read them with the typed getters, which throw std::logic_error on a name the schema does
// not declare (a programming error, not a user error).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/time.h"

namespace servesim {

enum class ParamType { kInt, kDouble, kBool, kString, kDuration };
const char* param_type_name(ParamType type);

using ParamValue = std::variant<int64_t, double, bool, std::string, Duration>;

struct ParamSpec {
  std::string name;
  ParamType type = ParamType::kInt;
  ParamValue default_value;
  std::string unit;  // "tokens", "" ...
  std::string help;  // one line, also the --help text
  std::vector<std::string> choices;          // kString: the allowed values (empty = any)
  std::optional<double> min_value;           // kInt/kDouble: inclusive lower bound
  std::optional<double> max_value;           // kInt/kDouble: inclusive upper bound
};

using ParamSchema = std::vector<ParamSpec>;

// Every integer parameter has a checked range: [min_value, max_value] where the schema declares
// them, and otherwise [0, kMaxIntParam] (2^24). No knob is meaningful beyond it, and the bound
// keeps products of knobs (tokens x requests, instances x TP) far from int64 overflow.
inline constexpr int64_t kMaxIntParam = int64_t{1} << 24;
// The inclusive range an integer parameter accepts. REQUIRES: spec.type == kInt.
std::pair<int64_t, int64_t> int_param_range(const ParamSpec& spec);

// Formats a value the way a scenario spells it ("2048", "0.9", "true", "stall_free", "2ms").
std::string format_param_value(const ParamValue& value);

class ParamValues {
 public:
  ParamValues() = default;
  // Every parameter of `schema` at its default.
  static ParamValues defaults(const ParamSchema& schema);

  void set(const std::string& name, ParamValue value) { values_[name] = std::move(value); }
  bool contains(const std::string& name) const { return values_.count(name) != 0; }

  int64_t get_int(const std::string& name) const;
  double get_double(const std::string& name) const;
  bool get_bool(const std::string& name) const;
  const std::string& get_string(const std::string& name) const;
  Duration get_duration(const std::string& name) const;

  const std::map<std::string, ParamValue>& all() const { return values_; }

 private:
  const ParamValue& at(const std::string& name) const;
  std::map<std::string, ParamValue> values_;
};

}  // namespace servesim
