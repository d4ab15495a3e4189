// Shared plumbing of the libFuzzer targets (docs/fuzzing.md).
//
// Contract: a target feeds its input to one parsing entry point, through a scratch file when the
// entry point reads files. Bad input must end in the project's bad-input errors (ConfigError,
// InputError: exit code 2); run_guarded() swallows those and lets every other exception escape,
// so libFuzzer reports it (uncaught exception -> abort) together with the input.
//
// Known findings: exceptions of bugs already reported and being fixed (docs/fuzzing.md) are
// swallowed too, so that `make fuzz-smoke` stays green while they are open; set
// SERVESIM_FUZZ_STRICT=1 to report them. Remove an entry from is_known_finding() with its fix.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/error.h"

namespace servesim::fuzz {

// A directory private to this process (under /dev/shm when it exists), created on first use and
// removed at normal exit.
inline const std::filesystem::path& scratch_dir() {
  struct Scratch {
    std::filesystem::path path;
    Scratch() {
      const std::filesystem::path base = std::filesystem::is_directory("/dev/shm")
                                             ? std::filesystem::path("/dev/shm")
                                             : std::filesystem::temp_directory_path();
      path = base / ("servesim_fuzz_" + std::to_string(::getpid()));
      std::filesystem::create_directories(path);
    }
    ~Scratch() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Scratch scratch;
  return scratch.path;
}

// Writes `data` to `relative` under scratch_dir() (creating parent directories) and returns the
// full path.
inline std::string write_scratch(std::string_view relative, std::string_view data) {
  const std::filesystem::path p = scratch_dir() / relative;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  return p.string();
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

inline bool strict() {
  static const bool on = std::getenv("SERVESIM_FUZZ_STRICT") != nullptr;
  return on;
}

// Returns true for the exception of an open known finding (see the file comment).
inline bool is_known_finding(const std::exception&) {
  // None at present: the two findings listed here before ("seed": 1e999 escaping as nlohmann's
  // out_of_range.406, a path longer than NAME_MAX escaping as filesystem_error) are fixed and
  // have regression tests (tests/golden/reliability_test.cc).
  return false;
}

// Runs `f`; returns normally when it succeeds, throws a bad-input error or a known finding.
template <typename F>
void run_guarded(F&& f) {
  try {
    f();
  } catch (const ConfigError&) {
  } catch (const InputError&) {
  } catch (const std::exception& e) {
    if (!is_known_finding(e)) throw;
  }
}

}  // namespace servesim::fuzz
