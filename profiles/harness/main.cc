// servesim-profile: measures operator latency tables on the local GPU and writes servesim profile
// format v1 (profiles/FORMAT.md). Exit codes: 0 ok, 1 GPU or library failure, 2 bad usage or
// no GPU visible.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli_options.h"
#include "gpu_bench.h"
#include "plan.h"
#include "profile_writer.h"

namespace sp = servesim::profiling;

namespace {

int run(const sp::CliOptions& cli) {
  sp::PlanOptions po;
  if (!cli.model_path.empty()) {
    po.model = sp::load_model_shape(cli.model_path);
  }
  po.tp = cli.tp;
  po.ops = cli.ops;
  po.gemm_dtypes = cli.gemm_dtypes;
  po.quick = cli.quick;
  po.reps = cli.reps;
  po.warmup = cli.warmup;
  po.max_seconds = cli.max_seconds;

  if (cli.plan_only) {
    po.num_gpus = cli.plan_gpus;
    std::fputs(sp::format_plan(sp::build_plan(po)).c_str(), stdout);
    return 0;
  }

  std::string error;
  int gpus = sp::visible_gpu_count(&error);
  if (gpus == 0) {
    std::fprintf(stderr,
                 "servesim-profile: no CUDA GPU is visible (cudaGetDeviceCount: %s); use --plan "
                 "to print the measurement plan without a GPU\n",
                 error.c_str());
    return 2;
  }
  if (cli.device >= gpus) {
    std::fprintf(stderr, "servesim-profile: --device %d but only %d GPU(s) are visible\n",
                 cli.device, gpus);
    return 2;
  }
  sp::DeviceInfo device = sp::query_device_info(cli.device);
  po.num_gpus = gpus;
  po.fp8 = sp::device_supports_fp8(cli.device);
  po.gpu_memory_bytes = device.memory_bytes;
  sp::Plan plan = sp::build_plan(po);
  std::fprintf(stderr, "%s on %s (%s), %d SMs, driver %s, cuBLASLt %s, cuDNN %s, NCCL %s\n",
               plan.model_key.c_str(), device.gpu_name.c_str(),
               sp::gpu_catalog_key(device.gpu_name).c_str(), device.sm_count, device.driver.c_str(),
               device.cublas.c_str(), device.cudnn.empty() ? "none" : device.cudnn.c_str(),
               device.nccl.empty() ? "none" : device.nccl.c_str());
  std::fputs(sp::format_plan(plan).c_str(), stderr);

  sp::ProfileResults results;
  results.model_key = plan.model_key;
  results.tp = plan.tp;
  results.date = sp::utc_now_iso8601();
  results.method = sp::method_text();
  results.skipped = plan.skipped;
  sp::RunContext ctx;
  ctx.device = cli.device;
  ctx.reps = cli.reps;
  ctx.warmup = cli.warmup;
  ctx.max_seconds = cli.max_seconds;
  ctx.skipped = &results.skipped;

  std::string out_dir = cli.out_dir;
  if (out_dir.empty()) {
    out_dir = sp::default_profile_dir(device, results);
  }
  // Each table is written as soon as it is measured, so an interrupted run keeps what it has.
  auto save = [&] { sp::write_profile_dir(out_dir, device, results); };
  auto table_failed = [&](const char* table, const std::exception& e) {
    std::fprintf(stderr, "%s: FAILED: %s\n", table, e.what());
    sp::add_skip_note(&results.skipped, table, std::string("failed: ") + e.what());
  };
  try {
    results.gemm = sp::run_gemm(plan.gemm, ctx);
  } catch (const std::exception& e) {
    table_failed("gemm", e);
  }
  save();
  try {
    results.prefill = sp::run_attention_prefill(plan.prefill, ctx);
  } catch (const std::exception& e) {
    table_failed("attention_prefill", e);
  }
  save();
  try {
    results.decode = sp::run_attention_decode(plan.decode, ctx);
  } catch (const std::exception& e) {
    table_failed("attention_decode", e);
  }
  save();
  try {
    results.collective = sp::run_collectives(plan.collective, ctx);
  } catch (const std::exception& e) {
    table_failed("collective", e);
  }
  try {
    results.memcpy = sp::run_memcpy(plan.memcpy, ctx);
  } catch (const std::exception& e) {
    table_failed("memcpy", e);
  }
  save();
  try {
    results.forward = sp::run_forward(plan.forward_model, plan.forward, ctx);
  } catch (const std::exception& e) {
    table_failed("forward", e);
  }
  save();
  std::fprintf(stderr,
               "wrote %s (gemm %zu, prefill %zu, decode %zu, collective %zu, memcpy %zu, "
               "forward %zu rows) in %.1f s\n",
               out_dir.c_str(), results.gemm.size(), results.prefill.size(), results.decode.size(),
               results.collective.size(), results.memcpy.size(), results.forward.size(),
               ctx.elapsed_seconds());
  for (const auto& [table, why] : results.skipped) {
    std::fprintf(stderr, "  skipped (%s): %s\n", table.c_str(), why.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    sp::CliOptions cli = sp::parse_cli(std::vector<std::string>(argv + 1, argv + argc));
    if (cli.help) {
      std::fputs(sp::usage_text().c_str(), stdout);
      return 0;
    }
    return run(cli);
  } catch (const sp::HarnessError& e) {
    std::fprintf(stderr, "servesim-profile: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "servesim-profile: %s\n", e.what());
    return 1;
  }
}
