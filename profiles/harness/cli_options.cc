#include "cli_options.h"

#include <cstdlib>

namespace servesim::profiling {
namespace {

long long to_int(const std::string& flag, const std::string& v, long long lo) {
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < lo) {
    throw HarnessError(flag + ": expected an integer >= " + std::to_string(lo) + ", got '" + v +
                       "'");
  }
  return x;
}

double to_double(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || x < 0) {
    throw HarnessError(flag + ": expected a non-negative number, got '" + v + "'");
  }
  return x;
}

}  // namespace

std::string usage_text() {
  return "usage: servesim-profile (--model MODEL.json | --grid generic) [options]\n"
         "  --model PATH       catalog model JSON (models/catalog/models/*.json)\n"
         "  --grid generic     model-independent shape grid instead of a model\n"
         "  --tp N             tensor-parallel degree of the per-GPU shapes (default 1)\n"
         "  --ops LIST         comma list of gemm,attention_prefill,attention_decode,collective,"
         "memcpy,\n"
         "                     forward (default: all)\n"
         "  --gemm-dtypes LIST comma list of bf16,fp8_e4m3,fp8_rowwise,fp8_block: the GEMM\n"
         "                     table's dtypes, one per FP8 scaling recipe (default bf16,fp8_e4m3)\n"
         "  --quick            coarser grid\n"
         "  --reps N           timed repetitions per point, median reported (default 20)\n"
         "  --warmup N         untimed runs per point (default 3)\n"
         "  --max-seconds S    stop measuring after S seconds and write what was measured\n"
         "  --out DIR          output directory (default profiles/<gpu>/servesim_harness_<model>,\n"
         "                     with _tp<N> appended for --tp N > 1)\n"
         "  --device N         CUDA device for single-GPU tables (default 0)\n"
         "  --plan             print the measurement plan and exit; needs no GPU\n"
         "  --plan-gpus N      GPUs --plan assumes for collectives and peer copies (default 1)\n"
         "  --help             this text\n";
}

CliOptions parse_cli(const std::vector<std::string>& args) {
  CliOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) {
        throw HarnessError(a + ": missing value");
      }
      return args[++i];
    };
    if (a == "--help" || a == "-h") {
      o.help = true;
    } else if (a == "--plan") {
      o.plan_only = true;
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--model") {
      o.model_path = value();
    } else if (a == "--grid") {
      std::string g = value();
      if (g != "generic") {
        throw HarnessError("--grid: the only grid is 'generic', got '" + g + "'");
      }
      o.generic = true;
    } else if (a == "--tp") {
      o.tp = static_cast<int>(to_int(a, value(), 1));
    } else if (a == "--ops") {
      o.ops = parse_ops(value());
    } else if (a == "--gemm-dtypes") {
      o.gemm_dtypes = parse_gemm_dtypes(value());
    } else if (a == "--reps") {
      o.reps = static_cast<int>(to_int(a, value(), 1));
    } else if (a == "--warmup") {
      o.warmup = static_cast<int>(to_int(a, value(), 0));
    } else if (a == "--max-seconds") {
      o.max_seconds = to_double(a, value());
    } else if (a == "--out") {
      o.out_dir = value();
    } else if (a == "--device") {
      o.device = static_cast<int>(to_int(a, value(), 0));
    } else if (a == "--plan-gpus") {
      o.plan_gpus = static_cast<int>(to_int(a, value(), 1));
    } else {
      throw HarnessError("unknown option '" + a + "'\n" + usage_text());
    }
  }
  if (!o.help && o.model_path.empty() == !o.generic) {
    throw HarnessError("give exactly one of --model PATH and --grid generic\n" + usage_text());
  }
  return o;
}

}  // namespace servesim::profiling
