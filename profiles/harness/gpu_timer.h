// Latency measurement shared by the CUDA benchmarks: warm-up, CUDA events, median of repetitions,
// L2 flushed before each repetition, and CUDA graphs for launches too short to time alone.
//
// Contract:
//  - An Enqueue callback enqueues exactly one run of the operator on the given stream, using
//    operand set `variant` (0 <= variant < variants); it must not synchronize. Rotating operand
//    sets keeps the captured back-to-back launches of short operators from hitting in L2.
//  - median_us() throws GpuError on a CUDA failure and returns the median in microseconds.
#ifndef SERVESIM_PROFILES_HARNESS_GPU_TIMER_H_
#define SERVESIM_PROFILES_HARNESS_GPU_TIMER_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace servesim::profiling {

class GpuError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

#define SERVESIM_CUDA_CHECK(expr)                                               \
  do {                                                                          \
    cudaError_t servesim_err_ = (expr);                                         \
    if (servesim_err_ != cudaSuccess) {                                         \
      throw ::servesim::profiling::GpuError(std::string(#expr) + ": " +         \
                                            cudaGetErrorString(servesim_err_)); \
    }                                                                           \
  } while (0)

using Enqueue = std::function<void(cudaStream_t stream, int variant)>;

// Operators whose single cold run is shorter than this are timed as a captured graph of
// back-to-back launches divided by the launch count.
inline constexpr double kGraphThresholdUs = 40.0;
// Target duration of one captured graph replay.
inline constexpr double kGraphTargetUs = 400.0;
inline constexpr int kMaxGraphLaunches = 64;

class GpuTimer {
 public:
  // REQUIRES: the current device is the one the operators run on.
  explicit GpuTimer(int64_t l2_bytes);
  ~GpuTimer();
  GpuTimer(const GpuTimer&) = delete;
  GpuTimer& operator=(const GpuTimer&) = delete;

  cudaStream_t stream() const { return stream_; }

  // allow_graph=false forces one launch per timed repetition (operators that cannot be captured).
  double median_us(const Enqueue& op, int variants, int reps, int warmup, bool allow_graph = true);

  // Number of graph-timed points so far (reported in the log).
  int graph_points() const { return graph_points_; }

 private:
  void flush_l2();
  double time_once(const Enqueue& op, int variant);

  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  void* flush_buf_ = nullptr;
  size_t flush_bytes_ = 0;
  int flush_count_ = 0;
  int graph_points_ = 0;
};

// Median of the samples (mean of the middle two for an even count); 0 when empty.
double median(std::vector<double> samples);

// Fills device memory with deterministic pseudo-random values in [-scale, scale].
void fill_random_bf16(void* ptr, int64_t count, uint32_t seed, float scale, cudaStream_t s);
void fill_random_fp8_e4m3(void* ptr, int64_t count, uint32_t seed, float scale, cudaStream_t s);

}  // namespace servesim::profiling

#endif  // SERVESIM_PROFILES_HARNESS_GPU_TIMER_H_
