#include "core/params.h"

#include <stdexcept>

#include <fmt/format.h>

namespace servesim {

const char* param_type_name(ParamType type) {
  switch (type) {
    case ParamType::kInt:
      return "integer";
    case ParamType::kDouble:
      return "number";
    case ParamType::kBool:
      return "boolean";
    case ParamType::kString:
      return "string";
    case ParamType::kDuration:
      return "duration";
  }
  return "?";
}

std::pair<int64_t, int64_t> int_param_range(const ParamSpec& spec) {
  const int64_t lo = spec.min_value ? static_cast<int64_t>(*spec.min_value) : 0;
  const int64_t hi = spec.max_value ? static_cast<int64_t>(*spec.max_value) : kMaxIntParam;
  return {lo, hi};
}

std::string format_param_value(const ParamValue& value) {
  struct Visitor {
    std::string operator()(int64_t v) const { return fmt::format("{}", v); }
    std::string operator()(double v) const { return fmt::format("{}", v); }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(const std::string& v) const { return v; }
    std::string operator()(Duration v) const {
      const int64_t ns = v.count();
      if (ns != 0 && ns % 1'000'000'000 == 0) return fmt::format("{}s", ns / 1'000'000'000);
      if (ns != 0 && ns % 1'000'000 == 0) return fmt::format("{}ms", ns / 1'000'000);
      if (ns != 0 && ns % 1'000 == 0) return fmt::format("{}us", ns / 1'000);
      return fmt::format("{}ns", ns);
    }
  };
  return std::visit(Visitor{}, value);
}

ParamValues ParamValues::defaults(const ParamSchema& schema) {
  ParamValues out;
  for (const auto& spec : schema) out.set(spec.name, spec.default_value);
  return out;
}

const ParamValue& ParamValues::at(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw std::logic_error(fmt::format("parameter \"{}\" is not declared", name));
  return it->second;
}

int64_t ParamValues::get_int(const std::string& name) const { return std::get<int64_t>(at(name)); }
double ParamValues::get_double(const std::string& name) const {
  const auto& v = at(name);
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return std::get<double>(v);
}
bool ParamValues::get_bool(const std::string& name) const { return std::get<bool>(at(name)); }
const std::string& ParamValues::get_string(const std::string& name) const {
  return std::get<std::string>(at(name));
}
Duration ParamValues::get_duration(const std::string& name) const {
  return std::get<Duration>(at(name));
}

}  // namespace servesim
