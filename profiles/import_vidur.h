// Importer of Microsoft Vidur's profiling data (github.com/microsoft/vidur @ 7d475133,
// data/profiling/, MIT) as copied to shared/data/profiles/vidur (shared/data/README.md section 2)
// into servesim profiles (profiles/FORMAT.md).
//
// Contract:
// - Input: the Vidur root holding compute/<gpu>/<org>/<model>/mlp.csv and
//   network/<topology>/{all_reduce,send_recv}.csv.
// - Output, per Vidur GPU (a100 -> a100_80gb_sxm, h100 -> h100_sxm, a40 -> a40, others keep their
//   name): one profile with the compute tables and the collectives of the GPU's main topology
//   (<gpu>_dgx when there is one, else its only topology), meta field "topology"; and one profile
//   per other topology of that GPU, holding only collective.csv, with meta fields "topology" and
//   "variant" (the topology without the "<gpu>_" prefix, so profile_subdir() is
//   "<gpu>/vidur_pairwise_nvlink"). Profiles are ordered by (gpu, variant). Profile::dir is
//   profile_subdir() ("a100_80gb_sxm/vidur"), relative to a profiles root.
// - All latencies are Vidur's time_stats.<op>.median (ms x 1000). Vidur profiles fp16 (its MLP
//   profiler casts the model to torch.float16), so GEMM rows are dtype fp16.
// - GEMM rows (gemm.csv) from attn_pre_proj, attn_post_proj, mlp_up_proj, mlp_down_proj
//   (vidur_gemm_shapes) with m = num_tokens; a key measured for several models keeps the row of
//   the first model in sorted "<org>/<model>" order; repeated rows of one model (and two layers of
//   one model with the same shape) are merged by their median.
// - The other per-layer ops (input_layernorm, post_attention_layernorm, attn_rope, mlp_act, add,
//   emb) go to elementwise.csv keyed by vidur_model_key(), num_tokens and tp.
// - Collectives: op all_reduce / send_recv, dtype fp16, message_bytes = size (bytes),
//   num_gpus = num_workers, nodes = num_workers / devices_per_node.
// - Deterministic except meta "date" (the time of the import). Throws InputError on malformed
//   input.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiles/profile_tables.h"

namespace servesim::profiles {

inline constexpr const char* kVidurCommit = "7d475133";

// Full-model dimensions of a Vidur mlp.csv row and its tensor-parallel degree.
struct VidurModelShape {
  int64_t num_heads = 0;     // n_head
  int64_t num_kv_heads = 0;  // n_kv_head
  int64_t hidden = 0;        // n_embd
  int64_t intermediate = 0;  // n_expanded_embd
  bool gated_mlp = true;     // use_gated_mlp
  int64_t tp = 1;            // num_tensor_parallel_workers
};

struct VidurGemmShape {
  std::string op;  // Vidur's op name, e.g. "attn_pre_proj"
  int64_t n = 0;
  int64_t k = 0;
};

// One GPU's GEMM shapes (head_dim = hidden / num_heads): attn_pre_proj n = (H + 2 KVH) hd / tp,
// k = hidden; attn_post_proj n = hidden, k = H hd / tp; mlp_up_proj n = (gated ? 2 : 1) I / tp,
// k = hidden; mlp_down_proj n = hidden, k = I / tp. Throws InputError (file, line) when tp does
// not divide the heads or the intermediate size, or head_dim is not an integer.
std::vector<VidurGemmShape> vidur_gemm_shapes(const VidurModelShape& shape,
                                              const std::string& file = "", long line = 0);

// Catalog key of a Vidur "<org>/<model>" where servesim's catalog has it
// ("meta-llama/Llama-2-7b-hf" -> "llama-2-7b"), else the name unchanged.
std::string vidur_model_key(const std::string& org_model);

// Catalog key of a Vidur GPU name ("a100" -> "a100_80gb_sxm").
std::string vidur_gpu_key(const std::string& vidur_gpu);

std::vector<Profile> import_vidur(const std::string& vidur_root);

}  // namespace servesim::profiles
