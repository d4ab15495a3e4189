// Profile-driven iteration cost model: the roofline decomposition (roofline_terms.h) with every
// operator looked up in the measured tables of the deployment's GPU (profiles/FORMAT.md), through
// the interpolators of profile_interpolation.h.
//
// Contract:
// - Value types in, Duration out; never sees the engine. Deterministic.
// - Operators and their sources. Per operator, the first profile in the source order that has
//   rows for it; the source order puts profiles measured for the deployment's model first, then
//   the rest by table size; ProfiledParams::prefer_source moves matching profiles to the front,
//   and a serving engine's own tables (ProfiledParams::engine_tables) go ahead of all of them,
//   used by that engine's deployments only.
//   - QKV / O / gate-up / down GEMMs (M = sum of query tokens, per-rank N, K) and the LM head
//     (M = logit rows, N = vocab/tp, 16-bit): gemm rows of the weight dtype (bf16 -> "bf16",
//     else "fp16"; fp8 -> "fp8_e4m3"); a profile with the exact (n, k) first, else the one with
//     the richest (n, k) grid.
//   - MoE MLP: moe rows for (hidden, expert inter, top-k, experts, moe_tp = tp, moe_ep = 1,
//     dtype; distribution "balanced", else the mildest power law) plus the router GEMM; without
//     them, min(E, M k) experts' GEMMs at M k / E_touched rows each from the gemm rows.
//   - Prefill attention: attention_prefill rows (per-rank heads, kv heads, head_dim, kv dtype;
//     causal, or bidirectional for a diffusion LLM). A mixed batch of B prefill-like segments
//     (q > 1, c = k - q cached tokens): with prefix rows, T(B, q_eq, c_eq) with
//     q_eq = sqrt(mean q^2) and c_eq = sum(q c) / (B q_eq) (the causal work
//     B (q_eq c_eq + q_eq^2 / 2) matches sum(q c + q^2 / 2)); without, AIConfigurator's rule on
//     the batch, T(B, K) * sum(k^2 - c^2) / sum(k^2) with K = sqrt(mean k^2). Both are exact for
//     one chunk and for a uniform batch.
//   - Decode attention: attention_decode rows at (B = #decodes, mean context). B x mean context
//     = total KV tokens, which preserves the KV bytes the kernel streams (it is memory bound); a
//     skewed batch is modelled as its average. Cache-hot guard of DecodeTable.
//   - TP all-reduce (2 per layer): custom_all_reduce rows for tp GPUs when the message
//     (M * hidden * 2 bytes) is within their range (vLLM's CUDA-graph path), else NCCL
//     all_reduce rows, else the link roofline of RooflineParams; profiles that measured the custom
//     kernel (aiconfigurator's) are searched first. A tp without rows (3, 6) takes the NCCL curve
//     between the nearest measured GPU counts, geometric in the count.
//   - Norms/elementwise: Vidur elementwise rows for this model and tp (per layer:
//     input_layernorm + post_attention_layernorm + attn_rope + mlp_act + 2 x add), else the
//     roofline byte count at the bandwidth fitted to this GPU's GEMM table plus
//     RooflineParams::kernel_launch per kernel.
//   - Per-iteration overhead: RooflineParams::iteration_overhead (a knob, as in the roofline).
// - No tables for the GPU: pass a donor's profiles (same architecture, pick_donor_gpu()) with
//   ProfiledParams::tables_gpu set to the donor's spec. The model is then the roofline with the
//   efficiency curves fitted on the donor's tables (FLOP/s and bandwidth scaled by the peak
//   ratios); calibration_note() says so.
// - Every operator time is at least its roofline peak bound; table rows faster than that bound
//   are clamped to it when loaded (counted in diagnostics()). peak_bound_time() is the roofline
//   model's decomposition at peak FLOP/s and bandwidth, with one change: attention runs at the
//   peak FLOP/s of the KV dtype (FP8 attention kernels use FP8 tensor cores: L40S fp8-KV prefill
//   rows reach ~600 TFLOP/s, above its BF16 peak). So iteration_time() >= peak_bound_time().
// - Lookup accounting (lookup_stats()): each operator's time goes to interpolated_s (inside a
//   grid), extrapolated_s (outside, or a head configuration transferred from another), or
//   analytic_s (no table: roofline fallbacks, overhead). An operator no table covers that runs
//   beside a measured kernel family of the same pass (the Gated DeltaNet recurrence beside the
//   full-attention layers' table, or their fit of the GPU's measured attention rows) is priced at
//   that kernel's efficiency against its peak roofline and counted as extrapolated.
// - Speed: per-token-count operators (GEMMs, MoE, elementwise, all-reduce, LM head) are memoised
//   in dense arrays indexed by the token count (filled on first use); attention is two small
//   grid lookups per call (tables bound to the deployment's heads). Not thread-safe (memo and
//   statistics): one model per engine.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/cost/cost_model.h"
#include "models/catalog/hardware.h"
#include "profiles/profile_tables.h"

namespace servesim::models {

struct ProfiledParams {
  // Fallbacks and knobs shared with the roofline: iteration_overhead (added per pass),
  // kernel_launch (per elementwise kernel when no elementwise table), link_efficiency and
  // allreduce_latency (all-reduce when no collective table), memory_efficiency (bandwidth when no
  // table gives one), compute_efficiency (GEMMs without a table and no donor).
  RooflineParams roofline;
  // When not empty, profiles whose meta.source or directory contains this string come first.
  std::string prefer_source;
  // The serving engine whose own kernel tables this deployment runs ("trtllm", "sglang"; empty:
  // none). A profile whose meta.json names an "engine" holds that engine's kernels: it is used
  // only when that engine is this one, and then ahead of every other profile (a table it lacks,
  // e.g. attention, still comes from the others). Profiles without "engine" serve every
  // deployment.
  std::string engine_tables;
  // The GPU the tables were measured on when it is not the deployment's GPU (donor mode). Required
  // then; ignored otherwise.
  const GpuSpec* tables_gpu = nullptr;
  // Token counts up to this are memoised (dense arrays); larger ones are computed per call.
  int64_t memo_tokens = int64_t{1} << 16;
  // TP all-reduce through vLLM's custom all-reduce (CUDA-graph path) where its rows cover the
  // message; false: NCCL all-reduce rows only (engines without the custom kernel, e.g. DistServe).
  bool custom_allreduce = true;
  // A MoE model's routed experts (fused-MoE rows or the grouped-GEMM estimate) take this times
  // the tables' time: the serving engine's own MoE kernels against the measured ones, where no
  // table of the engine's kernels exists (an engine calibration,
  // models/calibration/engine_calibration.h). 1: the tables as measured. Dense models, the router
  // and shared experts ignore it, and so do experts priced from the engine's own MoE rows
  // (engine_tables).
  double moe_kernel_scale = 1.0;
  // A quantized GEMM table whose rows timed their activation quantization as unfused PyTorch
  // (gemm_efficiency.h, activation_quantization) is priced with one fused pass instead: the
  // serving engine compiles the very layers the table timed eagerly. Off: tables as measured
  // (engines whose own kernels the tables do not time; their measured runs are matched by the
  // tables as they are, docs/calibration.md).
  bool fused_activation_quantization = false;
};

// Counts that describe how a model was calibrated.
struct ProfiledDiagnostics {
  // Table rows faster than the roofline peak bound, per table, clamped to the bound when loaded:
  // "gemm", "attention_prefill", "attention_decode" (data errors), and the expected ones timed
  // with their operands in L2: "gemm_l2_resident" (memory-bound rows whose operands fit in L2),
  // "attention_decode_cache_hot" (KV < L2).
  std::map<std::string, int64_t> rows_clamped_to_peak;
  // GEMM points left out as slower than a larger-m point of the same shape, by dtype.
  std::map<std::string, int64_t> gemm_rows_slower_than_larger_m;
  // GEMM families whose table is inverted against its bf16 table and that are priced from the bf16
  // kernel too (gemm_efficiency.h, reprices_when_inverted), by table dtype.
  std::map<std::string, int64_t> gemms_priced_from_bf16;
  // GEMM table dtypes whose rows timed an unfused activation quantization, priced with a fused
  // pass instead (gemm_efficiency.h, activation_quantization).
  std::set<std::string> gemm_tables_with_fused_quantization;
  int64_t decode_rows_cache_hot = 0;        // decode rows with KV < L2 (timed cache-hot)
  int64_t predictions_clamped_to_peak = 0;  // operator predictions raised to the peak bound
  std::vector<std::string> sources;         // per operator: where its time comes from
};

class ProfiledCostModel final : public IterationCostModel {
 public:
  // See make_profiled_cost_model().
  ProfiledCostModel(const Deployment& d, const std::vector<profiles::Profile>& gpu_profiles,
                    const ProfiledParams& p);
  ~ProfiledCostModel() override;

  Duration iteration_time(const BatchShape& shape) const override;
  std::optional<Duration> decode_iteration_time(const DecodePass& pass) const override;
  std::optional<Duration> mixed_iteration_time(const DecodePass& run,
                                               const BatchShape& rest) const override;
  OperatorTimes breakdown(const BatchShape& shape) const override;
  OperatorTimes counted_breakdown(const BatchShape& shape) const override;
  Duration peak_bound_time(const BatchShape& shape) const override;
  OperatorTimes peak_bound_breakdown(const BatchShape& shape) const override;
  std::string describe() const override;  // includes calibration_note()
  LookupStats lookup_stats() const override;

  // One line: which tables (or donor) calibrate the model, e.g.
  //   "rtx4090: no measured tables; roofline with efficiencies fitted on l40s (same
  //   architecture, Ada Lovelace)".
  std::string calibration_note() const;
  const ProfiledDiagnostics& diagnostics() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Builds the profiled model. `gpu_profiles`: the profiles of d.gpu (load_gpu_profiles()), or of a
// donor GPU (then p.tables_gpu must be the donor's spec). Empty: exactly the roofline model with
// RooflineParams (noted as uncalibrated).
// Throws CapacityError / std::invalid_argument as make_roofline_cost_model(), and
// std::invalid_argument when the profiles are for another GPU and p.tables_gpu does not match it.
std::unique_ptr<IterationCostModel> make_profiled_cost_model(
    const Deployment& d, const std::vector<profiles::Profile>& gpu_profiles,
    const ProfiledParams& p);

// Architecture family of a GPU: its arch string up to " (", e.g. "Ada Lovelace".
std::string gpu_architecture(const GpuSpec& gpu);

// The GPU among `with_tables` (keys in `catalog`) whose tables best stand in for `target`: same
// architecture family; among those the same sm_ version, then the closest DRAM bandwidth.
// nullopt when no GPU of the family has tables. `target` itself is never returned.
std::optional<std::string> pick_donor_gpu(const GpuSpec& target, const GpuCatalog& catalog,
                                          const std::vector<std::string>& with_tables);

// Convenience: the profiles of d.gpu under `profiles_root` (load_gpu_profiles()), or, when it has
// none, those of pick_donor_gpu() (setting tables_gpu). Same throws as load_profile().
std::unique_ptr<IterationCostModel> load_profiled_cost_model(const Deployment& d,
                                                             const GpuCatalog& catalog,
                                                             const std::string& profiles_root,
                                                             ProfiledParams p = {});

}  // namespace servesim::models
