// One request's shape without an arrival time: what length distributions and length sources give.
#pragma once

#include <cstdint>

namespace servesim::traces {

struct LengthSample {
  int64_t prompt_tokens = 0;  // > 0
  int64_t output_tokens = 0;  // > 0
};

}  // namespace servesim::traces
