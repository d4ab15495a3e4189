// Importer of NVIDIA AIConfigurator's operator performance database (github.com/ai-dynamo/
// aiconfigurator @ 095f58a5, Apache-2.0) as converted to CSV in shared/data/profiles/aiconfigurator
// (shared/data/README.md section 1) into servesim profiles (profiles/FORMAT.md).
//
// Contract:
// - Input: a system directory (e.g. .../aiconfigurator/h100_sxm) holding exactly one framework
//   sub-directory, vllm_<version>/, trtllm_<version>/ or sglang_<version>/ (the upstream Parquet
//   tables as CSV, profiles/README.md), and at most one nccl_<version>/, or a directory of such
//   system directories (one profile each, sorted by name).
// - Output: one Profile per GPU, meta source "aiconfigurator", model "generic", tp 1, meta field
//   "variant" the framework ("vllm", so profile_subdir() is "<gpu>/aiconfigurator_vllm"), gpu
//   from the CSVs' device name (gpu_catalog_key). TensorRT-LLM's and SGLang's tables also get meta
//   "engine" (their engine's own kernels: models::ProfiledParams::engine_tables); vLLM's are the
//   generic tables. Profile::dir is that relative directory (not a path that exists yet): where a
//   caller writing under a profiles root puts the profile.
// - Units: upstream ms -> us; collective message_size (elements) -> message_bytes (x2 for
//   half/bf16, x1 for int8). dtypes canonical (bfloat16 -> bf16, fp8 -> fp8_e4m3, half -> fp16).
// - Rows: context attention -> attention_prefill (q_tokens = isl, prefix 0, causal, kv_dtype from
//   kv_cache_dtype); generation attention -> attention_decode (context_tokens = isl + step);
//   sliding-window rows (window_size != 0), eager custom all-reduce rows, GEMMs with m = 0, MoE
//   rows of non-gated kernels or of a backend other than the framework's default where that timed
//   the dtype, and rows of dtypes with no servesim name are dropped; repeated measurements of one
//   key are merged by their median. Every drop and merge is counted in meta "skipped".
// - Deterministic except meta "date" (the time of the import).
// - Throws InputError (file:line) on malformed input.
#pragma once

#include <string>
#include <vector>

#include "profiles/profile_tables.h"

namespace servesim::profiles {

inline constexpr const char* kAiconfiguratorCommit = "095f58a5";

struct AiconfiguratorImportOptions {
  // true (what profiles/ commits): keep the MoE rows of every routing distribution ("balanced",
  // "power_law_1.01", "power_law_1.2"; a deployment's expert routing picks its own); false: only
  // "balanced" where the GPU has any, else "power_law_1.01".
  bool all_moe_distributions = true;
};

std::vector<Profile> import_aiconfigurator(const std::string& system_dir);
std::vector<Profile> import_aiconfigurator(const std::string& system_dir,
                                           const AiconfiguratorImportOptions& options);

}  // namespace servesim::profiles
