// Device and library provenance for meta.json.
#include <cublasLt.h>
#include <dlfcn.h>

#include <cstdio>

#include "gpu_bench.h"
#include "gpu_timer.h"

#ifdef SERVESIM_HAVE_CUDNN
#include <cudnn.h>
#endif
#ifdef SERVESIM_HAVE_NCCL
#include <nccl.h>
#endif

namespace servesim::profiling {
namespace {

// "major.minor.patch" from a packed version number major*base^2 + minor*base + patch.
std::string unpack_version(long long v, long long base) {
  return std::to_string(v / (base * base)) + "." + std::to_string((v / base) % base) + "." +
         std::to_string(v % base);
}

// The kernel driver's version string through NVML, loaded at run time so that the harness does
// not link against the driver's management library. Empty when NVML is unavailable.
std::string nvml_driver_version() {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    return "";
  }
  using InitFn = int (*)();
  using VersionFn = int (*)(char*, unsigned int);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
  auto version = reinterpret_cast<VersionFn>(dlsym(lib, "nvmlSystemGetDriverVersion"));
  auto shutdown = reinterpret_cast<InitFn>(dlsym(lib, "nvmlShutdown"));
  std::string out;
  if (init && version && init() == 0) {
    char buf[96] = {0};
    if (version(buf, sizeof buf) == 0) {
      out = buf;
    }
    if (shutdown) {
      shutdown();
    }
  }
  dlclose(lib);
  return out;
}

}  // namespace

int visible_gpu_count(std::string* error) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    *error = cudaGetErrorString(e);
    cudaGetLastError();
    return 0;
  }
  if (n == 0) {
    *error = "no devices";
  }
  return n;
}

bool device_supports_fp8(int device) {
  int major = 0, minor = 0;
  SERVESIM_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  SERVESIM_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major * 10 + minor >= 89;
}

DeviceInfo query_device_info(int device) {
  DeviceInfo d;
  cudaDeviceProp prop{};
  SERVESIM_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  d.gpu_name = prop.name;
  d.sm_count = prop.multiProcessorCount;
  d.l2_bytes = prop.l2CacheSize;
  d.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  d.compute_capability = std::to_string(prop.major) + "." + std::to_string(prop.minor);
  int khz = 0;
  SERVESIM_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device));
  d.sm_clock_mhz = khz / 1000;
  SERVESIM_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, device));
  d.mem_clock_mhz = khz / 1000;
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  d.driver = nvml_driver_version();
  if (d.driver.empty()) {
    d.driver = "cuda " + std::to_string(drv / 1000) + "." + std::to_string((drv % 1000) / 10);
  }
  d.cuda_runtime = std::to_string(rt / 1000) + "." + std::to_string((rt % 1000) / 10);
  d.cublas = unpack_version(static_cast<long long>(cublasLtGetVersion()), 100);
#ifdef SERVESIM_HAVE_CUDNN
  d.cudnn = unpack_version(static_cast<long long>(cudnnGetVersion()), 100);
#endif
#ifdef SERVESIM_HAVE_NCCL
  int nccl = 0;
  if (ncclGetVersion(&nccl) == ncclSuccess) {
    d.nccl = unpack_version(nccl, 100);
  }
#endif
  return d;
}

std::string method_text() {
  return "CUDA events around each operator after warm-up; median of the timed repetitions; L2 "
         "flushed before each repetition by writing a buffer of twice the L2 size; operators "
         "whose single cold run is under " +
         std::to_string(static_cast<int>(kGraphThresholdUs)) +
         " us are timed as a CUDA graph of back-to-back launches (rotating operand copies that "
         "together exceed L2) divided by the launch count; random inputs; GEMM via cuBLASLt "
         "(heuristic top algorithm, 32 MiB workspace, bf16 output; fp8_e4m3 with per-tensor "
         "scales and fp8_rowwise with per-channel weight and per-token activation scales, both "
         "with fast accumulation; fp8_block with 128x128 weight and 1x128 activation block "
         "scales); attention via the cuDNN backend flash-attention graph "
         "(bf16, BSHD layout, fp32 softmax); collectives via NCCL, slowest GPU; forward: one "
         "whole model forward pass (every layer's own weights and KV cache) timed with CUDA "
         "events, no L2 flush, median of the repetitions, decode also replayed as one captured "
         "CUDA graph";
}

}  // namespace servesim::profiling
