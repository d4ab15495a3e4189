// Interface between the plain C++ driver (main.cc) and the CUDA measurement code (*.cu).
// No CUDA types appear here, so main.cc and the core library compile with g++ alone.
//
// Contract:
//  - Each run_* function measures the points it is given, in order, on `ctx.device`, and returns
//    one row per point it measured. A point that fails (library error, unsupported shape) is left
//    out and counted in ctx.skipped under its table name; the run continues.
//  - When ctx's time budget is spent, the remaining points are left out and the table is marked
//    in ctx.skipped as truncated.
//  - Latencies are medians in microseconds of ctx.reps timed repetitions after ctx.warmup
//    untimed ones (see profiles/FORMAT.md "method").
#ifndef SERVESIM_PROFILES_HARNESS_GPU_BENCH_H_
#define SERVESIM_PROFILES_HARNESS_GPU_BENCH_H_

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "profile_writer.h"

namespace servesim::profiling {

struct RunContext {
  int device = 0;
  int reps = 20;
  int warmup = 3;
  double max_seconds = 0;  // 0 = no budget
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::map<std::string, std::string>* skipped = nullptr;
  bool verbose = true;

  double elapsed_seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  bool out_of_time() const { return max_seconds > 0 && elapsed_seconds() > max_seconds; }
};

// Number of CUDA devices; on failure returns 0 and sets *error to the CUDA error text.
int visible_gpu_count(std::string* error);

DeviceInfo query_device_info(int device);

// True when the device has fp8 tensor cores usable by cuBLASLt (compute capability >= 8.9).
bool device_supports_fp8(int device);
bool attention_available();    // built with cuDNN
bool collectives_available();  // built with NCCL

// Short description of how latencies are taken, stored in meta.json "method".
std::string method_text();

std::vector<GemmRow> run_gemm(const std::vector<GemmPoint>& points, const RunContext& ctx);
std::vector<PrefillRow> run_attention_prefill(const std::vector<PrefillPoint>& points,
                                              const RunContext& ctx);
std::vector<DecodeRow> run_attention_decode(const std::vector<DecodePoint>& points,
                                            const RunContext& ctx);
std::vector<CollectiveRow> run_collectives(const std::vector<CollectivePoint>& points,
                                           const RunContext& ctx);
std::vector<MemcpyRow> run_memcpy(const std::vector<MemcpyPoint>& points, const RunContext& ctx);
// Whole forward passes of `model` (one GPU's shard), one row per point (see forward_bench.cu).
std::vector<ForwardRow> run_forward(const ForwardModel& model,
                                    const std::vector<ForwardPoint>& points, const RunContext& ctx);

}  // namespace servesim::profiling

#endif  // SERVESIM_PROFILES_HARNESS_GPU_BENCH_H_
