#include "scenarios/json_reader.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <type_traits>
#include <variant>

#include <fmt/format.h>

namespace servesim::scenarios {

std::string join_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::string describe_json(const Json& value) {
  std::string s = value.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

ObjectReader::ObjectReader(const Json& in, std::string path, Issues& issues, Json& resolved)
    : in_(in), path_(std::move(path)), issues_(issues), resolved_(resolved) {
  if (!in_.is_object()) {
    issues_.add(path_, fmt::format("expected an object, got {}", describe_json(in_)));
    valid_ = false;
  }
  if (!resolved_.is_object()) resolved_ = Json::object();
}

bool ObjectReader::has(const std::string& key) const { return valid_ && in_.contains(key); }

void ObjectReader::missing(const std::string& key) {
  issues_.add(child_path(key), "is required");
}

const Json* ObjectReader::find(const std::string& key, bool required) {
  seen_.push_back(key);
  if (!valid_) return nullptr;
  auto it = in_.find(key);
  if (it == in_.end() || it->is_null()) {
    if (required) missing(key);
    return nullptr;
  }
  return &*it;
}

void ObjectReader::claim(const std::string& key) { seen_.push_back(key); }

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The one choice nearest to `value` within a slip's distance, if there is exactly one.
std::optional<std::string> near_choice(const std::string& value,
                                       const std::vector<std::string>& choices) {
  const size_t slip = value.size() <= 4 ? 1 : value.size() <= 8 ? 2 : 3;
  std::optional<std::string> best;
  size_t best_distance = slip + 1;
  bool tie = false;
  for (const std::string& c : choices) {
    const size_t d = edit_distance(value, c);
    if (d < best_distance) {
      best = c;
      best_distance = d;
      tie = false;
    } else if (d == best_distance) {
      tie = true;
    }
  }
  return tie ? std::nullopt : best;
}

}  // namespace

std::string choice_error(const Json& value, const std::vector<std::string>& choices) {
  const std::optional<std::string> near =
      value.is_string() ? near_choice(value.get<std::string>(), choices) : std::nullopt;
  if (!near) {
    return fmt::format("expected one of {}, got {}", fmt::join(choices, ", "),
                       describe_json(value));
  }
  if (choices.size() > kListedChoices) {
    return fmt::format("got {}; did you mean \"{}\"? (one of {} names)", describe_json(value),
                       *near, choices.size());
  }
  return fmt::format("expected one of {}, got {}; did you mean \"{}\"?", fmt::join(choices, ", "),
                     describe_json(value), *near);
}

std::optional<std::string> ObjectReader::string(const std::string& key,
                                                std::optional<std::string> fallback,
                                                const std::vector<std::string>& choices) {
  const Json* v = find(key, !fallback.has_value());
  std::optional<std::string> out = fallback;
  if (v) {
    if (!v->is_string()) {
      issues_.add(child_path(key), fmt::format("expected a string, got {}", describe_json(*v)));
    } else if (!choices.empty() &&
               std::find(choices.begin(), choices.end(), v->get<std::string>()) == choices.end()) {
      issues_.add(child_path(key), choice_error(*v, choices));
    } else {
      out = v->get<std::string>();
    }
  }
  if (out) resolved_[key] = *out;
  return out;
}

std::optional<int64_t> ObjectReader::integer(const std::string& key,
                                             std::optional<int64_t> fallback,
                                             std::optional<int64_t> min,
                                             std::optional<int64_t> max) {
  const Json* v = find(key, !fallback.has_value());
  std::optional<int64_t> out = fallback;
  if (v) {
    const bool integral = v->is_number_integer() ||
                          (v->is_number_float() && std::isfinite(v->get<double>()) &&
                           std::floor(v->get<double>()) == v->get<double>() &&
                           std::fabs(v->get<double>()) < 9e15);
    std::string expected = "an integer";
    if (min && max) {
      expected = fmt::format("an integer in [{}, {}]", *min, *max);
    } else if (min) {
      expected = *min == 1 ? "a positive integer" : fmt::format("an integer >= {}", *min);
    }
    if (!integral) {
      issues_.add(child_path(key), fmt::format("expected {}, got {}", expected, describe_json(*v)));
    } else {
      const int64_t x = v->is_number_integer() ? v->get<int64_t>()
                                               : static_cast<int64_t>(v->get<double>());
      if ((min && x < *min) || (max && x > *max)) {
        issues_.add(child_path(key), fmt::format("expected {}, got {}", expected, x));
      } else {
        out = x;
      }
    }
  }
  if (out) resolved_[key] = *out;
  return out;
}

std::optional<double> ObjectReader::number(const std::string& key, std::optional<double> fallback,
                                           std::optional<double> min, std::optional<double> max,
                                           bool min_exclusive) {
  const Json* v = find(key, !fallback.has_value());
  std::optional<double> out = fallback;
  if (v) {
    std::string expected = "a number";
    if (min && max) {
      expected = fmt::format("a number in {}{}, {}]", min_exclusive ? "(" : "[", *min, *max);
    } else if (min) {
      expected = fmt::format("a number {} {}", min_exclusive ? ">" : ">=", *min);
    }
    if (!v->is_number() || !std::isfinite(v->get<double>())) {
      issues_.add(child_path(key), fmt::format("expected {}, got {}", expected, describe_json(*v)));
    } else {
      const double x = v->get<double>();
      const bool below = min && (min_exclusive ? x <= *min : x < *min);
      if (below || (max && x > *max)) {
        issues_.add(child_path(key), fmt::format("expected {}, got {}", expected, x));
      } else {
        out = x;
      }
    }
  }
  if (out) resolved_[key] = *out;
  return out;
}

std::optional<bool> ObjectReader::boolean(const std::string& key, std::optional<bool> fallback) {
  const Json* v = find(key, !fallback.has_value());
  std::optional<bool> out = fallback;
  if (v) {
    if (!v->is_boolean()) {
      issues_.add(child_path(key), fmt::format("expected true or false, got {}", describe_json(*v)));
    } else {
      out = v->get<bool>();
    }
  }
  if (out) resolved_[key] = *out;
  return out;
}

std::optional<Duration> ObjectReader::duration(const std::string& key,
                                               std::optional<Duration> fallback, bool allow_zero) {
  const Json* v = find(key, !fallback.has_value());
  std::optional<Duration> out = fallback;
  if (v) {
    if (!v->is_string()) {
      issues_.add(child_path(key),
                  fmt::format("expected a duration string such as \"250us\", \"1.5ms\" or \"2s\", "
                              "got {}",
                              describe_json(*v)));
    } else {
      try {
        const Duration d = parse_duration(v->get<std::string>());
        if (d.count() < 0 || (!allow_zero && d.count() == 0)) {
          issues_.add(child_path(key),
                      fmt::format("expected a {} duration, got {}",
                                  allow_zero ? "non-negative" : "positive", describe_json(*v)));
        } else {
          out = d;
        }
      } catch (const std::invalid_argument& e) {
        issues_.add(child_path(key), e.what());
      }
    }
  }
  if (out) resolved_[key] = format_param_value(*out);
  return out;
}

const Json* ObjectReader::object(const std::string& key, bool required) {
  const Json* v = find(key, required);
  if (v && !v->is_object()) {
    issues_.add(child_path(key), fmt::format("expected an object, got {}", describe_json(*v)));
    return nullptr;
  }
  return v;
}

const Json* ObjectReader::array(const std::string& key, bool required) {
  const Json* v = find(key, required);
  if (v && !v->is_array()) {
    issues_.add(child_path(key), fmt::format("expected an array, got {}", describe_json(*v)));
    return nullptr;
  }
  return v;
}

Json param_json(const ParamValue& value) {
  return std::visit(
      [](const auto& v) -> Json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Duration>) {
          return format_param_value(ParamValue{v});
        } else {
          return Json(v);
        }
      },
      value);
}

ParamValues ObjectReader::params(const ParamSchema& schema) {
  ParamValues values = ParamValues::defaults(schema);
  for (const ParamSpec& spec : schema) {
    switch (spec.type) {
      case ParamType::kInt: {
        const auto [min, max] = int_param_range(spec);
        if (auto v = integer(spec.name, std::get<int64_t>(spec.default_value), min, max)) {
          values.set(spec.name, *v);
        }
        break;
      }
      case ParamType::kDouble:
        if (auto v = number(spec.name, std::get<double>(spec.default_value), spec.min_value,
                            spec.max_value)) {
          values.set(spec.name, *v);
        }
        break;
      case ParamType::kBool:
        if (auto v = boolean(spec.name, std::get<bool>(spec.default_value))) values.set(spec.name, *v);
        break;
      case ParamType::kString:
        if (auto v = string(spec.name, std::get<std::string>(spec.default_value), spec.choices)) {
          values.set(spec.name, *v);
        }
        break;
      case ParamType::kDuration:
        if (auto v = duration(spec.name, std::get<Duration>(spec.default_value))) {
          values.set(spec.name, *v);
        }
        break;
    }
  }
  return values;
}

void ObjectReader::finish() {
  if (!valid_) return;
  for (auto it = in_.begin(); it != in_.end(); ++it) {
    if (std::find(seen_.begin(), seen_.end(), it.key()) == seen_.end()) {
      std::vector<std::string> known = seen_;
      std::sort(known.begin(), known.end());
      known.erase(std::unique(known.begin(), known.end()), known.end());
      issues_.add(child_path(it.key()),
                  fmt::format("unknown key; valid keys here are: {}", fmt::join(known, ", ")));
    }
  }
}

Json read_json_file(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) throw InputError(path, 0, "cannot open " + what);
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  try {
    return Json::parse(text, nullptr, true, /*ignore_comments=*/true);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is the 1-based offset of the error; turn it into a line number.
    long line = 1;
    for (size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) line += text[i] == '\n';
    std::string message = e.what();
    if (auto pos = message.find("syntax error"); pos != std::string::npos) message = message.substr(pos);
    throw InputError(path, line, fmt::format("invalid JSON: {}", message));
  } catch (const nlohmann::json::exception& e) {
    // A number beyond a double's range (1e999): nlohmann names the token but not its place.
    const std::string message = e.what();
    const size_t open = message.find('\'');
    const size_t close = open == std::string::npos ? open : message.find('\'', open + 1);
    if (e.id != 406 || close == std::string::npos) {
      throw InputError(path, 0, "invalid JSON: cannot be read");
    }
    const std::string token = message.substr(open + 1, close - open - 1);
    const size_t at = text.find(token);
    const long line =
        at == std::string::npos
            ? 0
            : 1 + static_cast<long>(std::count(text.begin(), text.begin() + at, '\n'));
    throw InputError(path, line, fmt::format("number {} is out of range (a JSON number must fit "
                                             "a double, up to about 1.8e308)",
                                             token));
  }
}

ObjectReader section_reader(ObjectReader& top, const char* name, Issues& issues, Json& resolved) {
  static const Json kEmpty = Json::object();
  const Json* in = top.object(name, false);
  return ObjectReader(in ? *in : kEmpty, name, issues, resolved[name]);
}

}  // namespace servesim::scenarios
