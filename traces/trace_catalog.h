// The trace files shipped under traces/data/, for `servesim list traces` and for scenarios that
// name a trace instead of a path.
//
// Contract: the catalog is a constant table; paths are relative to the repository root (callers
// resolve them against the data root). `rows` counts the data rows in the file, before any row is
// skipped by the loader (for example BurstGPT's failed requests). Length distributions have
// format "length_distribution" and are read with load_length_distribution(), not load_trace().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace servesim::traces {

struct TraceInfo {
  std::string name;         // unique lower_snake name, e.g. "azure_conv_2023"
  std::string format;       // a load_trace() format, or "length_distribution"
  std::string path;         // relative to the repository root
  std::string description;  // one line
  std::string license;      // SPDX identifier of the data's license
  int64_t rows = 0;         // data rows in the file
};

// Returns every shipped trace, in a fixed order.
const std::vector<TraceInfo>& shipped_traces();

// Returns the shipped trace called `name`.
// Throws std::invalid_argument listing the valid names if there is none.
const TraceInfo& find_shipped_trace(std::string_view name);

}  // namespace servesim::traces
