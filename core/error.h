// Typed errors thrown by library code. Library code never exits; app/ maps these to exit codes:
// ConfigError and InputError -> 2 (bad input), everything else -> 1.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace servesim {

// Base of every servesim error.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A value outside a representable or meaningful range (time overflow, negative delay).
class RangeError : public Error {
 public:
  using Error::Error;
};

// One problem found in a configuration document, located by its JSON path ("policy.max_num_seqs").
struct ConfigIssue {
  std::string path;
  std::string message;
};

// A scenario or plan failed validation. Carries every issue found, not just the first.
class ConfigError : public Error {
 public:
  ConfigError(std::string source, std::vector<ConfigIssue> issues);
  const std::string& source() const { return source_; }
  const std::vector<ConfigIssue>& issues() const { return issues_; }

 private:
  std::string source_;
  std::vector<ConfigIssue> issues_;
};

// A malformed input file (trace, catalog, profile), located by file and 1-based line (0 = whole
// file). what() reads "FILE:LINE: MESSAGE".
class InputError : public Error {
 public:
  InputError(std::string file, long line, std::string message);
  const std::string& file() const { return file_; }
  long line() const { return line_; }
  const std::string& message() const { return message_; }

 private:
  std::string file_;
  long line_;
  std::string message_;
};

// A deployment that cannot run: the model does not fit in GPU memory, a TP degree that does not
// divide the heads, and similar. The message says what was needed and what was available.
class CapacityError : public Error {
 public:
  using Error::Error;
};

}  // namespace servesim
