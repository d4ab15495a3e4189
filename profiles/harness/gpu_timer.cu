#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "gpu_timer.h"

namespace servesim::profiling {
namespace {

__device__ float hash_to_unit(uint64_t i, uint32_t seed) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull + seed;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return static_cast<float>(x & 0xffffff) / static_cast<float>(0xffffff) * 2.0f - 1.0f;
}

__global__ void fill_bf16_kernel(__nv_bfloat16* p, int64_t n, uint32_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    p[i] = __float2bfloat16(hash_to_unit(i, seed) * scale);
  }
}

__global__ void fill_fp8_kernel(__nv_fp8_e4m3* p, int64_t n, uint32_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    p[i] = __nv_fp8_e4m3(hash_to_unit(i, seed) * scale);
  }
}

}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) {
    return 0.0;
  }
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void fill_random_bf16(void* ptr, int64_t count, uint32_t seed, float scale, cudaStream_t s) {
  fill_bf16_kernel<<<1024, 256, 0, s>>>(static_cast<__nv_bfloat16*>(ptr), count, seed, scale);
  SERVESIM_CUDA_CHECK(cudaGetLastError());
}

void fill_random_fp8_e4m3(void* ptr, int64_t count, uint32_t seed, float scale, cudaStream_t s) {
  fill_fp8_kernel<<<1024, 256, 0, s>>>(static_cast<__nv_fp8_e4m3*>(ptr), count, seed, scale);
  SERVESIM_CUDA_CHECK(cudaGetLastError());
}

GpuTimer::GpuTimer(int64_t l2_bytes) {
  SERVESIM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  SERVESIM_CUDA_CHECK(cudaEventCreate(&start_));
  SERVESIM_CUDA_CHECK(cudaEventCreate(&stop_));
  // Writing twice the L2 size evicts every line an operator left behind.
  flush_bytes_ = static_cast<size_t>(std::max<int64_t>(2 * l2_bytes, int64_t{64} << 20));
  SERVESIM_CUDA_CHECK(cudaMalloc(&flush_buf_, flush_bytes_));
}

GpuTimer::~GpuTimer() {
  cudaStreamSynchronize(stream_);
  cudaFree(flush_buf_);
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
  cudaStreamDestroy(stream_);
}

void GpuTimer::flush_l2() {
  SERVESIM_CUDA_CHECK(cudaMemsetAsync(flush_buf_, ++flush_count_ & 0xff, flush_bytes_, stream_));
}

double GpuTimer::time_once(const Enqueue& op, int variant) {
  flush_l2();
  SERVESIM_CUDA_CHECK(cudaEventRecord(start_, stream_));
  op(stream_, variant);
  SERVESIM_CUDA_CHECK(cudaEventRecord(stop_, stream_));
  SERVESIM_CUDA_CHECK(cudaEventSynchronize(stop_));
  SERVESIM_CUDA_CHECK(cudaGetLastError());
  float ms = 0;
  SERVESIM_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
  return ms * 1000.0;
}

double GpuTimer::median_us(const Enqueue& op, int variants, int reps, int warmup,
                           bool allow_graph) {
  variants = std::max(variants, 1);
  for (int i = 0; i < warmup; ++i) {
    op(stream_, i % variants);
  }
  SERVESIM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  SERVESIM_CUDA_CHECK(cudaGetLastError());
  double first = time_once(op, 0);
  std::vector<double> samples;
  if (allow_graph && first < kGraphThresholdUs) {
    int n = static_cast<int>(std::ceil(kGraphTargetUs / std::max(first, 1.0)));
    n = std::clamp(n, 4, kMaxGraphLaunches);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    bool captured = false;
    if (cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
      try {
        for (int i = 0; i < n; ++i) {
          op(stream_, i % variants);
        }
      } catch (...) {
        cudaStreamEndCapture(stream_, &graph);
        if (graph) {
          cudaGraphDestroy(graph);
        }
        graph = nullptr;
      }
      if (cudaStreamEndCapture(stream_, &graph) == cudaSuccess && graph != nullptr &&
          cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess) {
        captured = true;
      }
    }
    cudaGetLastError();  // a refused capture leaves a sticky-free error; clear it
    if (captured) {
      ++graph_points_;
      SERVESIM_CUDA_CHECK(cudaGraphLaunch(exec, stream_));  // upload and warm the graph
      SERVESIM_CUDA_CHECK(cudaStreamSynchronize(stream_));
      for (int r = 0; r < reps; ++r) {
        flush_l2();
        SERVESIM_CUDA_CHECK(cudaEventRecord(start_, stream_));
        SERVESIM_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
        SERVESIM_CUDA_CHECK(cudaEventRecord(stop_, stream_));
        SERVESIM_CUDA_CHECK(cudaEventSynchronize(stop_));
        float ms = 0;
        SERVESIM_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
        samples.push_back(ms * 1000.0 / n);
      }
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
      return median(samples);
    }
    if (graph) {
      cudaGraphDestroy(graph);
    }
  }
  samples.push_back(first);
  for (int r = 1; r < reps; ++r) {
    samples.push_back(time_once(op, r % variants));
  }
  return median(samples);
}

}  // namespace servesim::profiling
