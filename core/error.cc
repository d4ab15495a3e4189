#include "core/error.h"

#include <fmt/format.h>

namespace servesim {
namespace {

std::string describe(const std::string& source, const std::vector<ConfigIssue>& issues) {
  std::string out = fmt::format("{}: {} error{}", source, issues.size(), issues.size() == 1 ? "" : "s");
  for (const auto& issue : issues) {
    out += fmt::format("\n  {}: {}", issue.path.empty() ? "(root)" : issue.path, issue.message);
  }
  return out;
}

}  // namespace

ConfigError::ConfigError(std::string source, std::vector<ConfigIssue> issues)
    : Error(describe(source, issues)), source_(std::move(source)), issues_(std::move(issues)) {}

InputError::InputError(std::string file, long line, std::string message)
    : Error(line > 0 ? fmt::format("{}:{}: {}", file, line, message)
                     : fmt::format("{}: {}", file, message)),
      file_(std::move(file)),
      line_(line),
      message_(std::move(message)) {}

}  // namespace servesim
