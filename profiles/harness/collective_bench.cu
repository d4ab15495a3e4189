// NCCL all-reduce / all-gather latency across every visible GPU, single process, one
// communicator per GPU (ncclCommInitAll). The latency of a point is the slowest GPU's
// event-to-event time of one collective, median over repetitions.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "gpu_bench.h"
#include "gpu_timer.h"

#ifdef SERVESIM_HAVE_NCCL
#include <nccl.h>
#endif

namespace servesim::profiling {

#ifdef SERVESIM_HAVE_NCCL

bool collectives_available() { return true; }

std::vector<CollectiveRow> run_collectives(const std::vector<CollectivePoint>& points,
                                           const RunContext& ctx) {
  std::vector<CollectiveRow> rows;
  if (points.empty()) {
    return rows;
  }
  int n = points.front().num_gpus;
  std::vector<ncclComm_t> comms(n);
  std::vector<int> devs(n);
  for (int i = 0; i < n; ++i) {
    devs[i] = i;
  }
  ncclResult_t r = ncclCommInitAll(comms.data(), n, devs.data());
  if (r != ncclSuccess) {
    add_skip_note(ctx.skipped, "collective",
                  std::string("ncclCommInitAll failed: ") + ncclGetErrorString(r));
    return rows;
  }
  int64_t max_bytes = 0;
  for (const CollectivePoint& p : points) {
    max_bytes = std::max(max_bytes, p.message_bytes);
  }
  std::vector<cudaStream_t> streams(n);
  std::vector<void*> send(n), recv(n);
  std::vector<cudaEvent_t> start(n), stop(n);
  for (int i = 0; i < n; ++i) {
    SERVESIM_CUDA_CHECK(cudaSetDevice(i));
    SERVESIM_CUDA_CHECK(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking));
    SERVESIM_CUDA_CHECK(cudaMalloc(&send[i], max_bytes));
    SERVESIM_CUDA_CHECK(cudaMalloc(&recv[i], max_bytes));
    SERVESIM_CUDA_CHECK(cudaMemset(send[i], 0, max_bytes));
    SERVESIM_CUDA_CHECK(cudaEventCreate(&start[i]));
    SERVESIM_CUDA_CHECK(cudaEventCreate(&stop[i]));
  }
  auto launch = [&](const CollectivePoint& p) {
    ncclGroupStart();
    for (int i = 0; i < n; ++i) {
      if (p.op == "all_reduce") {
        ncclAllReduce(send[i], recv[i], p.message_bytes / 2, ncclBfloat16, ncclSum, comms[i],
                      streams[i]);
      } else {
        ncclAllGather(send[i], recv[i], p.message_bytes / 2 / n, ncclBfloat16, comms[i],
                      streams[i]);
      }
    }
    ncclGroupEnd();
  };
  size_t done = 0;
  for (const CollectivePoint& p : points) {
    if (ctx.out_of_time()) {
      add_skip_note(ctx.skipped, "collective",
                    "truncated by --max-seconds: " + std::to_string(points.size() - done) +
                        " points not measured");
      break;
    }
    ++done;
    for (int w = 0; w < ctx.warmup + 1; ++w) {
      launch(p);
    }
    for (int i = 0; i < n; ++i) {
      SERVESIM_CUDA_CHECK(cudaSetDevice(i));
      SERVESIM_CUDA_CHECK(cudaStreamSynchronize(streams[i]));
    }
    std::vector<double> samples;
    for (int rep = 0; rep < ctx.reps; ++rep) {
      for (int i = 0; i < n; ++i) {
        SERVESIM_CUDA_CHECK(cudaSetDevice(i));
        SERVESIM_CUDA_CHECK(cudaEventRecord(start[i], streams[i]));
      }
      launch(p);
      double worst = 0;
      for (int i = 0; i < n; ++i) {
        SERVESIM_CUDA_CHECK(cudaSetDevice(i));
        SERVESIM_CUDA_CHECK(cudaEventRecord(stop[i], streams[i]));
      }
      for (int i = 0; i < n; ++i) {
        SERVESIM_CUDA_CHECK(cudaEventSynchronize(stop[i]));
        float ms = 0;
        SERVESIM_CUDA_CHECK(cudaEventElapsedTime(&ms, start[i], stop[i]));
        worst = std::max(worst, ms * 1000.0);
      }
      samples.push_back(worst);
    }
    std::sort(samples.begin(), samples.end());
    size_t n_s = samples.size();
    double med = n_s % 2 ? samples[n_s / 2] : 0.5 * (samples[n_s / 2 - 1] + samples[n_s / 2]);
    rows.push_back({p, med});
    if (ctx.verbose) {
      std::fprintf(stderr, "collective %-10s %12lld B %10.3f us\n", p.op.c_str(),
                   static_cast<long long>(p.message_bytes), med);
    }
  }
  for (int i = 0; i < n; ++i) {
    cudaSetDevice(i);
    cudaFree(send[i]);
    cudaFree(recv[i]);
    cudaEventDestroy(start[i]);
    cudaEventDestroy(stop[i]);
    cudaStreamDestroy(streams[i]);
    ncclCommDestroy(comms[i]);
  }
  cudaSetDevice(ctx.device);
  return rows;
}

#else  // !SERVESIM_HAVE_NCCL

bool collectives_available() { return false; }

std::vector<CollectiveRow> run_collectives(const std::vector<CollectivePoint>& points,
                                           const RunContext& ctx) {
  if (!points.empty()) {
    add_skip_note(ctx.skipped, "collective", "harness built without NCCL");
  }
  return {};
}

#endif  // SERVESIM_HAVE_NCCL

}  // namespace servesim::profiling
