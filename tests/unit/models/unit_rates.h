// A GPU and throughputs of 1 FLOP/s and 1 B/s, for hand-checked cost terms: a Rates term in
// seconds is then its FLOPs or its bytes.
#pragma once

#include <cstdint>

#include "models/catalog/hardware.h"
#include "models/cost/roofline_terms.h"

namespace servesim::models {

inline GpuSpec unit_gpu() {
  GpuSpec g;
  g.key = "unit";
  g.name = "unit";
  g.memory_bytes = int64_t{1} << 50;
  g.mem_bw_bytes_per_s = 1;
  g.bf16_flops_per_s = 1;
  g.fp8_flops_per_s = 2;
  g.pcie_bytes_per_s_per_direction = 1;
  return g;
}

// Every precision at 1 FLOP/s (DSA's FP8 indexer included).
inline detail::Throughputs unit_throughputs() {
  detail::Throughputs x;
  x.gemm_flops_per_s = 1;
  x.bf16_flops_per_s = 1;
  x.fp8_flops_per_s = 1;
  x.mem_bytes_per_s = 1;
  x.link_bytes_per_s = 1;
  return x;
}

}  // namespace servesim::models
