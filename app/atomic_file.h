// Writing a whole file so that a reader sees the old file or the new one, never half of one.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include <fmt/format.h>

#include "core/error.h"

namespace servesim::app {

// Writes `text` to `path` through `path`.tmp beside it, renamed over `path`. Throws Error naming
// the file when either step fails.
inline void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream f(temporary, std::ios::binary | std::ios::trunc);
    f << text;
    f.close();
    if (!f) throw Error(fmt::format("{}: cannot write {}", path, temporary));
  }
  std::error_code ec;
  std::filesystem::rename(temporary, path, ec);
  if (ec) throw Error(fmt::format("{}: cannot replace it: {}", path, ec.message()));
}

}  // namespace servesim::app
