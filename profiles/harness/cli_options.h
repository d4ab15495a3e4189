// Command line of servesim-profile, parsed without CUDA so that it is unit-tested.
//
// Contract: parse_cli() never exits; bad arguments throw HarnessError with the offending option.
#ifndef SERVESIM_PROFILES_HARNESS_CLI_OPTIONS_H_
#define SERVESIM_PROFILES_HARNESS_CLI_OPTIONS_H_

#include <set>
#include <string>
#include <vector>

#include "plan.h"

namespace servesim::profiling {

struct CliOptions {
  bool help = false;
  bool plan_only = false;  // --plan: print the plan, touch no GPU
  std::string model_path;  // --model; empty with --grid generic
  bool generic = false;    // --grid generic
  int tp = 1;              // --tp
  std::set<Op> ops = {Op::kGemm,       Op::kAttentionPrefill, Op::kAttentionDecode,
                      Op::kCollective, Op::kMemcpy,           Op::kForward};
  std::vector<std::string> gemm_dtypes = {"bf16", "fp8_e4m3"};  // --gemm-dtypes
  bool quick = false;                                           // --quick
  int reps = 20;             // --reps
  int warmup = 3;            // --warmup
  double max_seconds = 0.0;  // --max-seconds (0 = no budget)
  std::string out_dir;       // --out; default profiles/<gpu>/servesim_harness_<model>
  int plan_gpus = 1;         // --plan-gpus: GPUs assumed by --plan
  int device = 0;            // --device: GPU timed for single-GPU tables
};

// REQUIRES: args excludes the program name.
CliOptions parse_cli(const std::vector<std::string>& args);

std::string usage_text();

}  // namespace servesim::profiling

#endif  // SERVESIM_PROFILES_HARNESS_CLI_OPTIONS_H_
