// Copy latency by size: device-to-device, pinned host <-> device, and device-to-peer-device.
#include <cstdio>

#include "gpu_bench.h"
#include "gpu_timer.h"

namespace servesim::profiling {

std::vector<MemcpyRow> run_memcpy(const std::vector<MemcpyPoint>& points, const RunContext& ctx) {
  std::vector<MemcpyRow> rows;
  if (points.empty()) {
    return rows;
  }
  SERVESIM_CUDA_CHECK(cudaSetDevice(ctx.device));
  int l2 = 0;
  SERVESIM_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, ctx.device));
  int64_t max_bytes = 0;
  bool peer = false;
  for (const MemcpyPoint& p : points) {
    max_bytes = std::max(max_bytes, p.bytes);
    peer = peer || p.kind == "peer";
  }
  GpuTimer timer(l2);
  void* src = nullptr;
  void* dst = nullptr;
  void* host = nullptr;
  void* peer_dst = nullptr;
  int peer_device = ctx.device == 0 ? 1 : 0;
  SERVESIM_CUDA_CHECK(cudaMalloc(&src, max_bytes));
  SERVESIM_CUDA_CHECK(cudaMalloc(&dst, max_bytes));
  SERVESIM_CUDA_CHECK(cudaMallocHost(&host, max_bytes));
  SERVESIM_CUDA_CHECK(cudaMemset(src, 0x3c, max_bytes));
  if (peer) {
    int can = 0;
    SERVESIM_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, ctx.device, peer_device));
    if (can) {
      cudaDeviceEnablePeerAccess(peer_device, 0);
      cudaGetLastError();  // already enabled is fine
    }
    SERVESIM_CUDA_CHECK(cudaSetDevice(peer_device));
    SERVESIM_CUDA_CHECK(cudaMalloc(&peer_dst, max_bytes));
    SERVESIM_CUDA_CHECK(cudaSetDevice(ctx.device));
  }
  size_t done = 0;
  for (const MemcpyPoint& p : points) {
    if (ctx.out_of_time()) {
      add_skip_note(ctx.skipped, "memcpy",
                    "truncated by --max-seconds: " + std::to_string(points.size() - done) +
                        " points not measured");
      break;
    }
    ++done;
    Enqueue op;
    size_t n = static_cast<size_t>(p.bytes);
    if (p.kind == "d2d") {
      op = [&](cudaStream_t s, int) {
        SERVESIM_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s));
      };
    } else if (p.kind == "h2d") {
      op = [&](cudaStream_t s, int) {
        SERVESIM_CUDA_CHECK(cudaMemcpyAsync(dst, host, n, cudaMemcpyHostToDevice, s));
      };
    } else if (p.kind == "d2h") {
      op = [&](cudaStream_t s, int) {
        SERVESIM_CUDA_CHECK(cudaMemcpyAsync(host, src, n, cudaMemcpyDeviceToHost, s));
      };
    } else {
      op = [&](cudaStream_t s, int) {
        SERVESIM_CUDA_CHECK(cudaMemcpyPeerAsync(peer_dst, peer_device, src, ctx.device, n, s));
      };
    }
    double us = timer.median_us(op, 1, ctx.reps, ctx.warmup);
    rows.push_back({p, us});
    if (ctx.verbose) {
      std::fprintf(stderr, "memcpy %-4s %12lld B %10.3f us %8.1f GB/s\n", p.kind.c_str(),
                   static_cast<long long>(p.bytes), us, p.bytes / (us * 1e-6) / 1e9);
    }
  }
  cudaFree(src);
  cudaFree(dst);
  cudaFreeHost(host);
  if (peer_dst) {
    cudaSetDevice(peer_device);
    cudaFree(peer_dst);
    cudaSetDevice(ctx.device);
  }
  return rows;
}

}  // namespace servesim::profiling
