#include "models/cost/profiled_cost_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <boost/algorithm/string/case_conv.hpp>
#include <fmt/format.h>

#include "models/cost/attention_dp.h"
#include "models/cost/gemm_efficiency.h"
#include "models/cost/pipeline.h"
#include "models/cost/profile_interpolation.h"
#include "models/cost/roofline_terms.h"
#include "profiles/import_common.h"
#include "core/error.h"

namespace servesim::models {
// The state ProfiledCostModel::Impl keeps (memos, the MoE efficiency curve): in a named namespace,
// as a type of the Impl's fields must have linkage.
namespace detail {

// Per token count (M = sum of query tokens): the operators that depend on M only.
struct TokenEntry {
  std::array<double, 5> s{};      // qkv, o, mlp, elementwise, allreduce (whole pass)
  std::array<double, 3> split{};  // their seconds by Kind
  bool ready = false;
};

struct RowsEntry {
  double s = 0;
  uint8_t kind = 0;
  bool ready = false;
};

// Decode-attention lookups by (decode segments b, KV tokens they read and write): the table is
// asked for (b, mean context), a function of that pair, so a repeated pair gets the same Lookup.
// Steady decoding repeats pairs (a running set one token longer sums to a pair an earlier batch of
// that size had). A direct-mapped cache of kSlots pairs (a colliding pair replaces the one there):
// small enough to stay in the CPU caches, which a table of every pair seen would not.
//
// Many instances sharing one cost model (a fleet) rarely repeat a pair: each lookup then misses
// the table and pays a cache miss of the CPU's for nothing. The memo therefore counts its hits
// over windows of kWindow lookups and, after a window with fewer than one hit in kMinHitShare
// (but the first, which fills the table), stands aside for kPauseWindows windows (find() answers
// false without reading the table, insert() keeps nothing) before it tries again. A lookup's
// value is the table's either way, so this changes no result, only which lookups are computed
// afresh. (512 instances of the Azure conv workload: 39 % of lookups hit, and skipping the memo
// is faster than reading it; Vidur's single instance: 92 % hit, and it saves a tenth of the run.)
class DecodeMemo {
 public:
  // The pair's key, or 0 when it is out of the key's range (never cached).
  static uint64_t key(double segments, double kv_tokens) {
    const auto b = static_cast<uint64_t>(segments);
    const auto kv = static_cast<uint64_t>(kv_tokens);
    if (b == 0 || b >= (uint64_t{1} << kBatchBits) || kv >= (uint64_t{1} << kKvBits)) return 0;
    return (b << kKvBits) | kv;
  }
  // REQUIRES: key != 0.
  bool find(uint64_t key, interp::Lookup* out) {
    if (!in_use()) return false;
    window_lookups_++;
    if (slots_.empty()) return false;
    const Slot& e = slots_[slot(key)];
    if ((e.tagged & ~kExtrapolated) != key) return false;
    *out = {e.seconds, (e.tagged & kExtrapolated) != 0};
    window_hits_++;
    return true;
  }
  // REQUIRES: key != 0, and find(key) was the memo's last call.
  void insert(uint64_t key, const interp::Lookup& value) {
    if (paused_lookups_ > 0) return;
    if (slots_.empty()) slots_.resize(kSlots);
    slots_[slot(key)] = {key | (value.extrapolated ? kExtrapolated : 0), value.seconds};
  }

 private:
  static constexpr int kKvBits = 44;
  static constexpr int kBatchBits = 63 - kKvBits;  // the top bit tags extrapolated lookups
  static constexpr uint64_t kExtrapolated = uint64_t{1} << 63;
  static constexpr int kSlotBits = 17;
  static constexpr size_t kSlots = size_t{1} << kSlotBits;
  static constexpr int64_t kWindow = 4096;
  static constexpr int64_t kMinHitShare = 8;
  static constexpr int64_t kPauseWindows = 15;
  struct Slot {
    uint64_t tagged = 0;  // key | kExtrapolated; 0 = empty
    double seconds = 0;
  };
  // Scatters batch sizes; a batch size's KV counts take consecutive slots, so steady decoding
  // (KV count + b each step) walks the table with a fixed stride the CPU prefetches.
  static size_t slot(uint64_t key) {
    const uint64_t b = key >> kKvBits;
    const uint64_t kv = key & ((uint64_t{1} << kKvBits) - 1);
    return static_cast<size_t>(((b * 0x9e3779b97f4a7c15ULL) >> (64 - kSlotBits)) + kv) &
           (kSlots - 1);
  }
  // Whether the memo answers the next lookup: false while paused. Closes a full window first,
  // pausing after one that mostly missed.
  bool in_use() {
    if (paused_lookups_ == 0 && window_lookups_ == kWindow) {
      if (filled_ && window_hits_ * kMinHitShare < kWindow) {
        paused_lookups_ = kPauseWindows * kWindow;
      }
      filled_ = true;
      window_lookups_ = 0;
      window_hits_ = 0;
    }
    if (paused_lookups_ == 0) return true;
    paused_lookups_--;
    return false;
  }
  std::vector<Slot> slots_;
  int64_t window_lookups_ = 0, window_hits_ = 0;
  int64_t paused_lookups_ = 0;  // lookups still to answer without the table
  bool filled_ = false;         // the first window is over
};

// A curve of values over ln x, x ascending: linear in ln x between its points, held at the ends
// (interp::bracket). Empty: at() is 1.
struct LogCurve {
  std::vector<double> log_x, y;
  // From (x, y) points with x > 0 (sorted here).
  static LogCurve of(std::vector<std::pair<double, double>> points) {
    std::sort(points.begin(), points.end());
    LogCurve c;
    for (const auto& [x, v] : points) {
      c.log_x.push_back(std::log(x));
      c.y.push_back(v);
    }
    return c;
  }
  double at(double x) const {
    if (y.empty()) return 1.0;
    const interp::Bracket b = interp::bracket(log_x, std::log(x));
    return y.size() == 1 ? y[0] : y[b.i] + b.w * (y[b.i + 1] - y[b.i]);
  }
};

}  // namespace detail

namespace {

using detail::DecodeMemo;
using detail::LogCurve;
using detail::RowsEntry;
using detail::TokenEntry;

using interp::Lookup;
using interp::RooflineFit;

// Where an operator's time came from (LookupStats buckets).
enum Kind : uint8_t { kInterpolated = 0, kExtrapolated = 1, kAnalytic = 2 };

Kind kind_of(const Lookup& l) { return l.extrapolated ? kExtrapolated : kInterpolated; }

// Operators of OperatorTimes, in order.
enum Op : size_t {
  kQkv,
  kO,
  kMlp,
  kPrefill,
  kDecode,
  kElementwise,
  kAllreduce,
  kLmHead,
  kOverhead,
  kOps
};

struct Parts {
  std::array<double, kOps> s{};
  std::array<double, 3> split{};  // seconds by Kind
  int64_t lookups = 0;
};

// The GEMM / MoE table dtype of weights in `d` (profiles/README.md names them).
const char* gemm_dtype(Dtype d) {
  switch (d) {
    case Dtype::kFp8:
      return "fp8_e4m3";
    case Dtype::kFp8Block:
      return "fp8_block";
    case Dtype::kNvfp4:
      return "nvfp4";
    case Dtype::kInt4Wo:
      return "int4_wo";
    case Dtype::kMxfp4:
      return "mxfp4";
    case Dtype::kBf16:
      break;
  }
  return "bf16";
}

// Where a profile's rows come from, for the diagnostics: its directory, else its source.
std::string describe_profile(const profiles::Profile* prof) {
  return prof->dir.empty() ? prof->meta.source : prof->dir;
}

// A kernel time whose part above the fixed latency `fixed_s` (capped at the time itself) is
// multiplied by `factor`: more work in one launch, or the same work at another rate.
double scaled_above_fixed_latency(double seconds, double fixed_s, double factor) {
  const double t0 = std::min(fixed_s, seconds);
  return t0 + factor * (seconds - t0);
}

// Table dtypes whose GEMM rows serve weights in `d`, preferred first.
std::vector<std::string> weight_table_dtypes(Dtype d) {
  if (d == Dtype::kBf16) {
    return {"bf16", "fp16"};
  }
  return {gemm_dtype(d)};
}
const char* kv_dtype_name(Dtype d) { return d == Dtype::kFp8 ? "fp8_e4m3" : "bf16"; }

// A table built from one profile's rows, with the counts of rows clamped to the peak bound while
// building it (ProfiledDiagnostics::rows_clamped_to_peak) and of cache-hot decode rows.
template <typename Table>
struct BuiltTable {
  std::shared_ptr<const Table> table;  // null: the profile has no rows for the key
  std::map<std::string, int64_t> clamped;
  int64_t cache_hot = 0;
  // GEMM tables: the activation quantization the rows timed, when it was unfused and replaced by
  // a fused pass (gemm_efficiency.h).
  std::optional<models::ActivationQuantization> refused_quantization;
};

// Building a table fits a roofline over all its rows. Profiles loaded from disk live for the
// process (scenarios::gpu_profiles), so their tables are built once per (directory, key) and
// shared, read-only, by every cost model; `key` names everything else the rows depend on (dtype,
// the GPU whose peaks clamp them). Profiles built in memory (no directory) are not shared.
template <typename Table, typename Build>
BuiltTable<Table> shared_table(const profiles::Profile& prof, const std::string& key, Build build) {
  if (prof.dir.empty()) return build();
  static std::mutex mutex;
  static std::map<std::pair<std::string, std::string>, BuiltTable<Table>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  // The date and the table sizes guard against a directory rewritten with other measurements.
  const std::string full =
      fmt::format("{}|{}|{}|{}|{}", key, prof.meta.date, prof.gemm.size(),
                  prof.attention_prefill.size(), prof.attention_decode.size());
  auto it = cache.find({prof.dir, full});
  if (it == cache.end()) it = cache.emplace(std::make_pair(prof.dir, full), build()).first;
  return it->second;
}

// A roofline fit equivalent to the roofline model's GemmTerm / attention terms at throughputs x.
RooflineFit fit_from_throughputs(double flops_per_s, double bytes_per_s, double launch_s) {
  RooflineFit f;
  f.t0_s = launch_s;
  f.mem_s_per_byte = 1 / bytes_per_s;
  f.compute = true;
  f.f_max = flops_per_s;
  f.u_half = 0;
  f.v_half = 0;
  return f;
}

// Power-law alpha of a distribution string ("power_law_1.2" -> 1.2); +inf for others.
double power_law_alpha(const std::string& d) {
  const std::string prefix = "power_law_";
  if (d.rfind(prefix, 0) != 0) {
    return std::numeric_limits<double>::infinity();
  }
  try {
    return std::stod(d.substr(prefix.size()));
  } catch (const std::exception&) {
    return std::numeric_limits<double>::infinity();
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------

struct ProfiledCostModel::Impl {
  // A GEMM family's source: a table, or an analytic fit (weight bytes of the deployment).
  struct GemmSource {
    const interp::GemmTable* table = nullptr;
    RooflineFit fit;
    double n = 0, k = 0, weight_bytes = 2;
    // A lower-precision table slower per unit of work than the same profile's 16-bit table
    // (gemm_efficiency.h): each lookup is also priced as that 16-bit kernel's time above its
    // fixed latency, times peak(16-bit) / peak(dtype), and the faster of the two is taken.
    const interp::GemmTable* sixteen_bit = nullptr;
    double work_ratio = 1;
    Lookup at(double m) const {
      if (table != nullptr) {
        Lookup l = table->predict(m, n, k);
        if (sixteen_bit != nullptr) {
          const Lookup b = sixteen_bit->predict(m, n, k);
          const double scaled =
              scaled_above_fixed_latency(b.seconds, sixteen_bit->fit().t0_s, work_ratio);
          if (scaled < l.seconds) l = {scaled, b.extrapolated};
        }
        return l;
      }
      return {interp::gemm_reference(fit, m, n, k, weight_bytes), false};
    }
    // A weight dtype no measured table has (fp8_block, nvfp4, int4_wo, mxfp4 without rows): the fit is
    // a roofline transferred to that dtype's rate, reported as extrapolated.
    bool dtype_extrapolated = false;
    Kind kind(const Lookup& l) const {
      if (table != nullptr) {
        return kind_of(l);
      }
      return dtype_extrapolated ? kExtrapolated : kAnalytic;
    }
  };

  ModelSpec model;
  GpuSpec gpu;
  Deployment d;
  ProfiledParams params;
  detail::RankShapes shapes;
  detail::Rates peak;        // peak_bound_time() and per-operator clamps
  detail::Rates achievable;  // roofline fallbacks (all-reduce, overhead)
  ProfiledDiagnostics diag;
  std::string note;

  // Tables built from the profiles (owned; the sources point into them).
  std::vector<std::shared_ptr<const interp::GemmTable>> gemm_tables;
  std::vector<std::shared_ptr<const interp::PrefillTable>> prefill_tables;
  std::vector<std::shared_ptr<const interp::DecodeTable>> decode_tables;
  std::vector<std::unique_ptr<interp::CurveTable>> curve_tables;

  GemmSource qkv, o, gate_up, down, router, lm_head;
  GemmSource linear_in, linear_out;  // Gated DeltaNet layers' projections (hybrid models)
  // MoE models: the shared expert, and the dense MLP of the dense layers.
  GemmSource shared_gate_up, shared_down, dense_gate_up, dense_down;
  // MoE layer table (key into moe_table), or experts through gate_up/down GEMMs.
  const interp::CurveTable* moe_table = nullptr;
  bool moe_table_balanced = false;  // its rows spread tokens evenly over the experts
  // Its rows measure the deployment's own power-law routing at the busiest rank (num_tokens =
  // the pass's tokens, the skew included).
  bool moe_table_own_routing = false;
  // The routed experts' time x this: ProfiledParams::moe_kernel_scale, the serving engine's MoE
  // kernels against generic tables; 1 where the table is the engine's own.
  double moe_scale = 1.0;
  std::string moe_key;
  // No MoE rows of the model's shape: the fused MoE kernels' time over the grouped expert-GEMM
  // estimate (grouped_gemm_s) on the dtype's measured shapes, by the tokens of a pass
  // (moe_efficiency.at(tokens)); empty: the estimate as it is.
  LogCurve moe_efficiency;
  // Attention.
  interp::HeadConfig heads;
  const interp::PrefillTable* prefill = nullptr;
  interp::PrefillTable::Bound prefill_bound;  // prefill bound to `heads`
  bool prefill_bidirectional_from_causal = false;
  RooflineFit prefill_fit;  // analytic prefill (no table)
  const interp::DecodeTable* decode = nullptr;
  interp::DecodeTable::Bound decode_bound;  // decode bound to `heads`
  RooflineFit decode_fit;                   // analytic decode (no table)
  double decode_floor_bw = 0;
  bool causal = true;
  // All-reduce.
  const interp::CurveTable* custom_ar = nullptr;
  std::string custom_ar_key;
  double custom_ar_max_bytes = 0, custom_ar_min_bytes = 0;
  const interp::CurveTable* nccl_ar = nullptr;
  std::string nccl_ar_key;
  // Elementwise.
  const interp::CurveTable* elementwise = nullptr;
  std::vector<std::pair<std::string, double>> elementwise_keys;  // key, count per layer
  double elementwise_bw = 0;                                     // analytic

  bool uncalibrated = false;  // no tables and no donor: exactly the roofline model

  mutable std::vector<TokenEntry> token_memo;
  mutable std::vector<RowsEntry> lm_memo;
  mutable DecodeMemo decode_memo;  // decode_bound lookups
  mutable LookupStats stats;
  mutable int64_t clamped_predictions = 0;

  Impl(const Deployment& dep, const std::vector<profiles::Profile>& profiles,
       const ProfiledParams& p);

  // Construction helpers.
  std::vector<const profiles::Profile*> ordered(const std::vector<profiles::Profile>& all) const;
  // `source`'s `dtype` rows, each raised to the peak-rate bound of `table_gpu` (counted in
  // `clamped`).
  static std::vector<profiles::GemmRow> gemm_rows(const std::vector<profiles::GemmRow>& source,
                                                  const std::string& dtype,
                                                  const GpuSpec& table_gpu,
                                                  std::map<std::string, int64_t>* clamped);
  const interp::GemmTable* gemm_table(
      const profiles::Profile& prof, const std::string& dtype, const GpuSpec& table_gpu,
      std::map<std::pair<const profiles::Profile*, std::string>, const interp::GemmTable*>* cache);
  void resolve_direct(const std::vector<const profiles::Profile*>& order);
  // Profiles searched in two tiers (engine_kernels_first): `profiles` lists the first tier, then
  // the second, from index `second`.
  struct ProfileTiers {
    std::vector<const profiles::Profile*> profiles;
    size_t second = 0;
  };
  static ProfileTiers engine_kernels_first(const std::vector<const profiles::Profile*>& order,
                                           const char* kind);
  using GemmTableCache =
      std::map<std::pair<const profiles::Profile*, std::string>, const interp::GemmTable*>;
  // Where pick_gemm() looks: every profile in order (fallback fits), the tiers of 16-bit and of
  // quantized tables, and the GEMM tables built so far.
  struct GemmSearch {
    const std::vector<const profiles::Profile*>& order;
    ProfileTiers sixteen_bit, quantized;
    GemmTableCache cache;
  };
  void pick_gemm(GemmSearch& where, const char* name, double n, double k, double wb,
                 const std::vector<std::string>& dtypes, GemmSource* src);
  void resolve_gemms(GemmSearch& search);
  void resolve_moe_table(const std::vector<const profiles::Profile*>& order);
  bool pick_prefill_table(const ProfileTiers& tiers, bool want_causal);
  void resolve_attention(const ProfileTiers& tiers);
  void resolve_decode_attention(const ProfileTiers& tiers);
  void resolve_allreduce(const std::vector<const profiles::Profile*>& order);
  void resolve_elementwise(const std::vector<const profiles::Profile*>& order);
  // Sets src->sixteen_bit when `prof`'s `dtype` rows are slower per unit of work than its 16-bit
  // rows on their shared compute-bound shapes (a precision inversion, gemm_efficiency.h).
  void price_inverted_by_sixteen_bit(
      const profiles::Profile& prof, const std::string& dtype, const char* name,
      std::map<std::pair<const profiles::Profile*, std::string>, const interp::GemmTable*>* cache,
      GemmSource* src);
  void resolve_moe_efficiency(const std::vector<const profiles::Profile*>& order);
  // One MoE layer's `touched` experts of `l`'s rows each, run as one grouped kernel: the GEMM's
  // fixed latency (its table's fitted roofline's, or the roofline's) paid once, not per expert.
  static double grouped_gemm_s(const GemmSource& g, const Lookup& l, double touched) {
    return scaled_above_fixed_latency(
        l.seconds, g.table != nullptr ? g.table->fit().t0_s : g.fit.t0_s, touched);
  }
  void resolve_donor(const std::vector<const profiles::Profile*>& order, const GpuSpec& donor);
  void resolve_uncalibrated();
  // Every GEMM (weights, LM head, MoE router) priced by a fitted roofline instead of a table:
  // `weights` for the model's weight dtype, `sixteen_bit` for the 16-bit LM head and router.
  void use_gemm_fits(const RooflineFit& weights, const RooflineFit& sixteen_bit);

  // Evaluation.
  const TokenEntry& tokens_entry(int64_t m) const;
  TokenEntry compute_tokens(double m) const;
  RowsEntry compute_lm_head(double rows) const;
  double clamp(double predicted, double bound) const {
    if (predicted < bound) {
      ++clamped_predictions;
      return bound;
    }
    return predicted;
  }
  Parts evaluate(const detail::BatchSums& s) const;
  // evaluate(), counted in `stats` as iteration_time() counts it.
  OperatorTimes counted(const detail::BatchSums& s) const;
  void attention(const detail::BatchSums& s, Parts* out) const;
  // MLA models: the roofline at the achievable rates, clamped to the peak (no MLA tables).
  void mla_attention(const detail::BatchSums& s, Parts* out) const;
};

std::vector<const profiles::Profile*> ProfiledCostModel::Impl::ordered(
    const std::vector<profiles::Profile>& all) const {
  std::vector<const profiles::Profile*> out;
  for (const profiles::Profile& p : all) {
    const std::string& engine = profiles::kernel_engine(p.meta);
    if (engine.empty() || engine == params.engine_tables) out.push_back(&p);
  }
  const auto rows = [](const profiles::Profile* p) {
    return p->gemm.size() + p->attention_prefill.size() + p->attention_decode.size() +
           p->collective.size() + p->moe.size() + p->elementwise.size();
  };
  const std::string model_key = boost::algorithm::to_lower_copy(model.key);
  const auto rank = [&](const profiles::Profile* p) {
    int r = 2;
    if (!profiles::kernel_engine(p->meta).empty()) {
      r = -1;
    } else if (!params.prefer_source.empty() &&
        (p->meta.source.find(params.prefer_source) != std::string::npos ||
         p->dir.find(params.prefer_source) != std::string::npos)) {
      r = 0;
    } else if (boost::algorithm::to_lower_copy(p->meta.model) == model_key) {
      r = 1;
    }
    return r;
  };
  std::stable_sort(out.begin(), out.end(),
                   [&](const profiles::Profile* a, const profiles::Profile* b) {
                     const int ra = rank(a), rb = rank(b);
                     if (ra != rb) {
                       return ra < rb;
                     }
                     if (rows(a) != rows(b)) {
                       return rows(a) > rows(b);
                     }
                     return a->dir < b->dir;
                   });
  return out;
}

std::vector<profiles::GemmRow> ProfiledCostModel::Impl::gemm_rows(
    const std::vector<profiles::GemmRow>& source, const std::string& dtype,
    const GpuSpec& table_gpu, std::map<std::string, int64_t>* clamped) {
  std::vector<profiles::GemmRow> rows;
  const double peak_flops = gemm_table_peak(table_gpu, dtype);
  const double wb = interp::table_dtype_bytes(dtype);
  for (const profiles::GemmRow& r : source) {
    if (r.dtype != dtype) {
      continue;
    }
    profiles::GemmRow c = r;
    const double m = static_cast<double>(r.m), n = static_cast<double>(r.n),
                 k = static_cast<double>(r.k);
    const double operand_bytes = n * k * wb + 2 * (m * k + m * n);
    const double memory_bound = operand_bytes / table_gpu.mem_bw_bytes_per_s;
    const double compute_bound = peak_flops > 0 ? 2 * m * n * k / peak_flops : 0;
    const double bound = std::max(memory_bound, compute_bound);
    if (c.latency_us * 1e-6 < bound) {
      c.latency_us = bound * 1e6;
      // Operands that fit in L2 were timed L2-resident (repeated launches without a flush): faster
      // than DRAM, as no layer of a real pass is.
      const bool l2_resident = memory_bound >= compute_bound && table_gpu.l2_bytes > 0 &&
                               operand_bytes < static_cast<double>(table_gpu.l2_bytes);
      ++(*clamped)[l2_resident ? "gemm_l2_resident" : "gemm"];
    }
    rows.push_back(c);
  }
  return rows;
}

namespace {
// Whether a profile's `dtype` GEMM rows are slower than its bf16 rows per unit of work, computed
// once per profile loaded from disk (the rows scanned are the whole GEMM table).
bool inverted_against_bf16(const profiles::Profile& prof, const std::string& dtype) {
  if (prof.dir.empty()) return inverted(prof.gemm, dtype, "bf16");
  static std::mutex mutex;
  static std::map<std::pair<std::string, std::string>, bool> cache;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(fmt::format("{}|{}|{}", prof.dir, prof.meta.date, prof.gemm.size()), dtype);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, inverted(prof.gemm, dtype, "bf16")).first;
  return it->second;
}
}  // namespace

void ProfiledCostModel::Impl::price_inverted_by_sixteen_bit(
    const profiles::Profile& prof, const std::string& dtype, const char* name,
    std::map<std::pair<const profiles::Profile*, std::string>, const interp::GemmTable*>* cache,
    GemmSource* src) {
  if (!reprices_when_inverted(gpu, dtype) || !inverted_against_bf16(prof, dtype)) return;
  const interp::GemmTable* bf16 = gemm_table(prof, "bf16", gpu, cache);
  if (bf16 == nullptr) return;
  src->sixteen_bit = bf16;
  src->work_ratio = gpu.bf16_flops_per_s / gemm_table_peak(gpu, dtype);
  ++diag.gemms_priced_from_bf16[dtype];
  diag.sources.push_back(fmt::format(
      "{}: {} rows of {} slower than its bf16 rows per unit of work: also priced as its bf16 "
      "kernel x {:.2f} above the fixed latency, the faster taken",
      name, dtype, describe_profile(&prof), src->work_ratio));
}

const interp::GemmTable* ProfiledCostModel::Impl::gemm_table(
    const profiles::Profile& prof, const std::string& dtype, const GpuSpec& table_gpu,
    std::map<std::pair<const profiles::Profile*, std::string>, const interp::GemmTable*>* cache) {
  const auto key = std::make_pair(&prof, dtype);
  const auto it = cache->find(key);
  if (it != cache->end()) {
    return it->second;
  }
  const BuiltTable<interp::GemmTable> built = shared_table<interp::GemmTable>(
      prof,
      fmt::format("gemm|{}|{}|{}", dtype, table_gpu.key, params.fused_activation_quantization),
      [&] {
        BuiltTable<interp::GemmTable> b;
        const std::optional<models::ActivationQuantization> quant =
            params.fused_activation_quantization
                ? models::activation_quantization(prof.gemm, dtype, table_gpu)
                : std::nullopt;
        std::vector<profiles::GemmRow> rows;
        if (quant && quant->unfused()) {
          b.refused_quantization = quant;
          rows = gemm_rows(models::with_fused_activation_quantization(prof.gemm, *quant), dtype,
                           table_gpu, &b.clamped);
        } else {
          rows = gemm_rows(prof.gemm, dtype, table_gpu, &b.clamped);
        }
        if (!rows.empty()) {
          b.table = std::make_shared<interp::GemmTable>(
              rows, interp::table_dtype_bytes(dtype),
              prof.meta.l2_bytes > 0 ? prof.meta.l2_bytes : table_gpu.l2_bytes);
        }
        return b;
      });
  for (const auto& [name, count] : built.clamped) diag.rows_clamped_to_peak[name] += count;
  if (built.refused_quantization) {
    const models::ActivationQuantization& q = *built.refused_quantization;
    diag.sources.push_back(fmt::format(
        "gemm {} of {}: its rows timed an unfused activation quantization ({:.1f} ps per "
        "element, {:.0f}x a fused pass): priced with a fused pass instead",
        dtype, describe_profile(&prof), q.seconds_per_element * 1e12,
        q.seconds_per_element / q.fused_seconds_per_element));
    diag.gemm_tables_with_fused_quantization.insert(dtype);
  }
  const interp::GemmTable* table = built.table.get();
  if (table) {
    gemm_tables.push_back(built.table);
    if (table->slower_than_larger_m() > 0) {
      diag.gemm_rows_slower_than_larger_m[dtype] += static_cast<int64_t>(table->slower_than_larger_m());
    }
  }
  (*cache)[key] = table;
  return table;
}

ProfiledCostModel::Impl::Impl(const Deployment& dep, const std::vector<profiles::Profile>& profiles,
                              const ProfiledParams& p)
    : model((validate_deployment(dep), *dep.model)), gpu(*dep.gpu), d(dep), params(p) {
  d.model = &model;
  d.gpu = &gpu;
  detail::check_roofline_params(p.roofline);
  if (p.memo_tokens < 0) {
    throw std::invalid_argument("memo_tokens must be non-negative");
  }
  if (!(p.moe_kernel_scale > 0)) {
    throw std::invalid_argument("moe_kernel_scale must be positive");
  }
  shapes = detail::rank_shapes(d);
  {
    detail::Throughputs x = detail::peak_throughputs(d);
    peak = detail::make_rates(shapes, x);
    // Attention at the peak of the KV dtype (FP8 attention runs on FP8 tensor cores).
    detail::set_attention_flops(shapes, gpu.peak_flops_per_s(d.kv_dtype), &peak);
  }
  achievable = detail::make_rates(shapes, detail::achievable_throughputs(d, p.roofline));
  heads = {static_cast<int>(std::lround(shapes.heads)), static_cast<int>(shapes.kv_heads),
           static_cast<int>(model.head_dim)};
  causal = !model.diffusion;

  bool own = false;  // some profile is of this GPU
  std::string other_gpu;
  for (const profiles::Profile& prof : profiles) {
    if (prof.meta.gpu == gpu.key) {
      own = true;
    } else if (other_gpu.empty()) {
      other_gpu = prof.meta.gpu;
    } else if (prof.meta.gpu != other_gpu) {
      throw std::invalid_argument(
          fmt::format("profiled cost model for {}: profiles of several other "
                      "GPUs ({}, {}) were passed",
                      gpu.key, other_gpu, prof.meta.gpu));
    }
  }
  if (own) {
    resolve_direct(ordered(profiles));
  } else if (!other_gpu.empty()) {
    if (p.tables_gpu == nullptr || p.tables_gpu->key != other_gpu) {
      throw std::invalid_argument(
          fmt::format("profiled cost model for {}: the profiles are for {}; "
                      "set ProfiledParams::tables_gpu "
                      "to the {} spec to use them as a donor",
                      gpu.key, other_gpu, other_gpu));
    }
    resolve_donor(ordered(profiles), *p.tables_gpu);
  } else {
    resolve_uncalibrated();
  }
}

// The fused MoE kernels measured for other shapes of the weight dtype (the same dtype, or the other
// weight-only 4-bit format: both run as W4A16 kernels) on one GPU (moe_tp = moe_ep = 1) with
// balanced routing: per shape and token count t, the measured time over the grouped expert-GEMM
// estimate of that shape (t x k rows over min(E, t x k) experts, this deployment's GEMM sources);
// the median over the shapes at each token count of any of them (each shape's ratio interpolated
// in log t, held at its ends). The first profile in `order` with such rows is used.
void ProfiledCostModel::Impl::resolve_moe_efficiency(
    const std::vector<const profiles::Profile*>& order) {
  std::vector<std::string> dtypes = {gemm_dtype(d.weight_dtype)};
  if (d.weight_dtype == Dtype::kMxfp4) dtypes.push_back("int4_wo");
  if (d.weight_dtype == Dtype::kInt4Wo) dtypes.push_back("mxfp4");
  for (const std::string& dtype : dtypes) {
    for (const profiles::Profile* prof : order) {
      std::map<std::array<int64_t, 4>, std::vector<std::pair<double, double>>> by_shape;
      for (const profiles::MoeRow& r : prof->moe) {
        if (r.dtype != dtype || r.moe_tp != 1 || r.moe_ep != 1 || r.distribution != "balanced" ||
            r.num_tokens <= 0 || r.latency_us <= 0 || r.topk <= 0 || r.num_experts <= 0) {
          continue;
        }
        GemmSource up = gate_up, dn = down;
        up.n = 2.0 * static_cast<double>(r.inter_size);
        up.k = static_cast<double>(r.hidden_size);
        dn.n = static_cast<double>(r.hidden_size);
        dn.k = static_cast<double>(r.inter_size);
        const double routed = static_cast<double>(r.num_tokens) * r.topk;
        const double touched = std::min<double>(r.num_experts, routed);
        const double estimate = grouped_gemm_s(up, up.at(routed / touched), touched) +
                                grouped_gemm_s(dn, dn.at(routed / touched), touched);
        if (estimate <= 0) continue;
        by_shape[{r.hidden_size, r.inter_size, r.topk, r.num_experts}].push_back(
            {static_cast<double>(r.num_tokens), r.latency_us * 1e-6 / estimate});
      }
      if (by_shape.empty()) continue;
      std::vector<double> grid;
      std::vector<LogCurve> curves;
      for (const auto& [shape, points] : by_shape) {
        for (const auto& [t, ratio] : points) grid.push_back(t);
        curves.push_back(LogCurve::of(points));
      }
      std::sort(grid.begin(), grid.end());
      grid.erase(std::unique(grid.begin(), grid.end()), grid.end());
      std::vector<std::pair<double, double>> medians;
      for (double t : grid) {
        std::vector<double> ratios;
        for (const LogCurve& c : curves) ratios.push_back(c.at(t));
        medians.push_back({t, profiles::median_of(std::move(ratios))});
      }
      moe_efficiency = LogCurve::of(std::move(medians));
      diag.sources.push_back(fmt::format(
          "moe_mlp: expert GEMMs from the gemm table (no moe rows of the shape), scaled by the "
          "fused MoE kernels' time over that estimate on {} measured {} shapes from {}: x{:.2f} "
          "at 1 token, x{:.2f} at 64",
          by_shape.size(), dtype, describe_profile(prof), moe_efficiency.at(1),
          moe_efficiency.at(64)));
      return;
    }
  }
  diag.sources.push_back("moe_mlp: expert GEMMs from the gemm table (no moe rows)");
}

// Kernels a serving engine runs come before stand-ins for them: a profile whose meta lists a
// table kind in "standalone_kernels" timed a library kernel the engines do not run for it
// (servesim-profile: quantized GEMMs on operands quantized beforehand, cuDNN attention). For
// quantized GEMMs and attention, such profiles form a second tier, searched only when no profile
// of the first (timed through an engine's operators) has the table.
ProfiledCostModel::Impl::ProfileTiers ProfiledCostModel::Impl::engine_kernels_first(
    const std::vector<const profiles::Profile*>& order, const char* kind) {
  ProfileTiers t;
  std::vector<const profiles::Profile*> standalone;
  for (const profiles::Profile* prof : order) {
    const auto it = prof->meta.fields.find("standalone_kernels");
    const bool stands_in =
        it != prof->meta.fields.end() &&
        ("," + it->second + ",").find(std::string(",") + kind + ",") != std::string::npos;
    (stands_in ? standalone : t.profiles).push_back(prof);
  }
  t.second = t.profiles.size();
  t.profiles.insert(t.profiles.end(), standalone.begin(), standalone.end());
  return t;
}

// A GEMM family's source, tier by tier (GemmSearch): a profile with the exact shape first, else
// the one with the richest (n, k) grid.
void ProfiledCostModel::Impl::pick_gemm(GemmSearch& where, const char* name, double n, double k,
                                        double wb, const std::vector<std::string>& dtypes,
                                        GemmSource* src) {
  src->n = n;
  src->k = k;
  src->weight_bytes = wb;
  for (const std::string& dtype : dtypes) {
    const ProfileTiers& tiers =
        dtype == "bf16" || dtype == "fp16" ? where.sixteen_bit : where.quantized;
    const interp::GemmTable* best = nullptr;
    const profiles::Profile* best_prof = nullptr;
    const auto search = [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        const interp::GemmTable* t = gemm_table(*tiers.profiles[i], dtype, gpu, &where.cache);
        if (t != nullptr && t->has_shape(n, k)) {
          best = t;
          best_prof = tiers.profiles[i];
          return;
        }
      }
      size_t most = 0;
      for (size_t i = begin; i < end; ++i) {
        const interp::GemmTable* t = gemm_table(*tiers.profiles[i], dtype, gpu, &where.cache);
        if (t != nullptr && t->points() > most) {
          most = t->points();
          best = t;
          best_prof = tiers.profiles[i];
        }
      }
    };
    search(0, tiers.second);
    if (best == nullptr) {
      search(tiers.second, tiers.profiles.size());
    }
    if (best != nullptr) {
      src->table = best;
      diag.sources.push_back(fmt::format("{}: gemm {} n={} k={} from {}{}", name, dtype, n, k,
                                         describe_profile(best_prof),
                                         best->has_shape(n, k) ? " (measured shape)" : ""));
      price_inverted_by_sixteen_bit(*best_prof, dtype, name, &where.cache, src);
      return;
    }
  }
  // No rows of the dtype: the fitted roofline of any 16-bit GEMM table, scaled to the dtype's
  // peak, else the roofline's achievable throughputs.
  src->dtype_extrapolated = wb < 2 && d.weight_dtype != Dtype::kFp8;
  const double dtype_peak = gpu.peak_flops_per_s(d.weight_dtype);
  for (const profiles::Profile* prof : where.order) {
    for (const char* dt : {"bf16", "fp16"}) {
      const interp::GemmTable* t = gemm_table(*prof, dt, gpu, &where.cache);
      if (t != nullptr) {
        const double ratio =
            wb < 2 && gpu.bf16_flops_per_s > 0 ? dtype_peak / gpu.bf16_flops_per_s : 1;
        src->fit = t->fit().scaled(ratio, 1);
        diag.sources.push_back(fmt::format("{}: fitted roofline of gemm {} from {} (no {} rows)",
                                           name, dt, describe_profile(prof), dtypes.front()));
        return;
      }
    }
  }
  src->fit = fit_from_throughputs(
      wb < 2 ? gpu.peak_flops_per_s(d.weight_dtype) *
                   detail::derived_compute_efficiency(gpu, params.roofline, d.weight_dtype)
             : gpu.bf16_flops_per_s *
                   detail::derived_compute_efficiency(gpu, params.roofline, Dtype::kBf16),
      gpu.mem_bw_bytes_per_s * params.roofline.memory_efficiency,
      to_seconds(params.roofline.kernel_launch));
  diag.sources.push_back(fmt::format("{}: roofline (no gemm table)", name));
}

// Every GEMM family of the deployment: the weights' linear layers, the LM head, a MoE model's
// shared experts, dense layers and router.
void ProfiledCostModel::Impl::resolve_gemms(GemmSearch& search) {
  const std::vector<std::string> wdtypes = weight_table_dtypes(d.weight_dtype);
  const std::vector<std::string> act16 = {"bf16", "fp16"};
  const double wb = shapes.weight_bytes;
  pick_gemm(search, "qkv_gemm", shapes.qkv_n, shapes.qkv_k, wb, wdtypes, &qkv);
  pick_gemm(search, "o_gemm", shapes.o_n, shapes.o_k, wb, wdtypes, &o);
  pick_gemm(search, shapes.moe ? "expert_gate_up" : "gate_up_gemm", shapes.gate_up_n, shapes.gate_up_k, wb,
            wdtypes, &gate_up);
  pick_gemm(search, shapes.moe ? "expert_down" : "down_gemm", shapes.down_n, shapes.down_k, wb, wdtypes,
            &down);
  pick_gemm(search, "lm_head", shapes.lm_head_n, shapes.lm_head_k, 2, act16, &lm_head);
  if (shapes.shared_down_k > 0) {
    pick_gemm(search, "shared_expert_gate_up", shapes.shared_gate_up_n, shapes.hidden, wb, wdtypes,
              &shared_gate_up);
    pick_gemm(search, "shared_expert_down", shapes.hidden, shapes.shared_down_k, wb, wdtypes,
              &shared_down);
  }
  if (shapes.dense_layers > 0) {
    pick_gemm(search, "gate_up_gemm", shapes.dense_gate_up_n, shapes.hidden, wb, wdtypes, &dense_gate_up);
    pick_gemm(search, "down_gemm", shapes.hidden, shapes.dense_down_k, wb, wdtypes, &dense_down);
  }
  if (shapes.moe) pick_gemm(search, "moe_router", shapes.experts, shapes.hidden, 2, act16, &router);
  if (shapes.linear_layers > 0) {
    pick_gemm(search, "linear_attention_in", shapes.linear_in_n, shapes.hidden, wb, wdtypes,
              &linear_in);
    pick_gemm(search, "linear_attention_out", shapes.hidden, shapes.linear_out_k, wb, wdtypes,
              &linear_out);
  }
}

// A MoE model's routed experts: its fused-MoE table rows where a profile measured its shape,
// else the grouped-GEMM estimate scaled by the measured kernels' efficiency.
void ProfiledCostModel::Impl::resolve_moe_table(const std::vector<const profiles::Profile*>& order) {
  if (!shapes.moe) return;
  // The fused MoE layer table: rows measured under the deployment's own power-law routing,
  // else balanced routing, else the mildest power law.
  const bool power_law = d.routing().kind == ExpertRouting::Kind::kPowerLaw;
  const std::string own_routing = d.routing().name();
  const std::string dtype = gemm_dtype(d.weight_dtype);
  bool engine_moe_table = false;  // the rows come from the serving engine's own tables
  for (const profiles::Profile* prof : order) {
    std::vector<interp::CurveTable::Row> rows;
    std::string best_dist;
    double best_alpha = std::numeric_limits<double>::infinity();
    for (const profiles::MoeRow& r : prof->moe) {
      if (r.dtype != dtype || r.hidden_size != model.hidden_size ||
          r.inter_size != model.moe->expert_intermediate_size ||
          r.topk != model.moe->experts_per_token || r.num_experts != model.moe->num_experts ||
          r.moe_tp != d.tp / d.ep || r.moe_ep != d.ep) {
        continue;
      }
      const double alpha = power_law && r.distribution == own_routing ? -1
                           : r.distribution == "balanced"              ? 0
                                                                       : power_law_alpha(r.distribution);
      if (alpha < best_alpha) {
        best_alpha = alpha;
        best_dist = r.distribution;
      }
    }
    if (best_dist.empty()) {
      continue;
    }
    for (const profiles::MoeRow& r : prof->moe) {
      if (r.dtype == dtype && r.hidden_size == model.hidden_size &&
          r.inter_size == model.moe->expert_intermediate_size &&
          r.topk == model.moe->experts_per_token && r.num_experts == model.moe->num_experts &&
          r.moe_tp == d.tp / d.ep && r.moe_ep == d.ep && r.distribution == best_dist) {
        if (moe_key.empty()) {
          moe_key = interp::moe_key(r);
        }
        rows.push_back(
            {interp::moe_key(r), static_cast<double>(r.num_tokens), r.latency_us * 1e-6});
      }
    }
    curve_tables.push_back(std::make_unique<interp::CurveTable>(rows));
    moe_table = curve_tables.back().get();
    moe_table_balanced = best_dist == "balanced";
    moe_table_own_routing = power_law && best_dist == own_routing;
    engine_moe_table = !profiles::kernel_engine(prof->meta).empty();
    diag.sources.push_back(
        fmt::format("moe_mlp: moe {} from {}", moe_key, describe_profile(prof)));
    break;
  }
  if (moe_table == nullptr) {
    resolve_moe_efficiency(order);
  }
  if (engine_moe_table && params.moe_kernel_scale != 1.0) {
    diag.sources.push_back(
        "moe_mlp: the serving engine's own MoE kernels: no MoE kernel scale applies");
  } else if (params.moe_kernel_scale != 1.0) {
    moe_scale = params.moe_kernel_scale;
    diag.sources.push_back(fmt::format(
        "moe_mlp: routed experts x{:.3g} for the serving engine's MoE kernels (engine "
        "calibration)",
        params.moe_kernel_scale));
  }
}

// The prefill attention table of the deployment's KV dtype and masking (causal or not) from
// `tiers`, bound to the model's heads; false when no profile has one.
bool ProfiledCostModel::Impl::pick_prefill_table(const ProfileTiers& tiers, bool want_causal) {
  const std::string kv = kv_dtype_name(d.kv_dtype);
  const double peak_bw = gpu.mem_bw_bytes_per_s;
  const interp::PrefillTable* exact = nullptr;
  const interp::PrefillTable* any = nullptr;
  const profiles::Profile* exact_prof = nullptr;
  const profiles::Profile* any_prof = nullptr;
  for (size_t i = 0; i < tiers.profiles.size(); ++i) {
    if (i == tiers.second && any != nullptr) {
      break;  // a table of the first tier covers the heads
    }
    const profiles::Profile* prof = tiers.profiles[i];
    const BuiltTable<interp::PrefillTable> built = shared_table<interp::PrefillTable>(
        *prof, fmt::format("prefill|{}|{}|{}|{}", kv, want_causal, gpu.key, dtype_name(d.kv_dtype)),
        [&] {
          BuiltTable<interp::PrefillTable> b;
          std::vector<profiles::AttentionPrefillRow> rows;
          for (const profiles::AttentionPrefillRow& r : prof->attention_prefill) {
            const std::string rkv = r.kv_dtype.empty() ? r.dtype : r.kv_dtype;
            if (r.dtype != "bf16" || rkv != kv || r.causal != want_causal) {
              continue;
            }
            profiles::AttentionPrefillRow c = r;
            const double attn_peak = gpu.peak_flops_per_s(d.kv_dtype);
            const double bound = std::max(
                interp::prefill_reference(
                    fit_from_throughputs(attn_peak, peak_bw, 0), r.num_heads, r.num_kv_heads,
                    r.head_dim, static_cast<double>(r.batch), static_cast<double>(r.q_tokens),
                    static_cast<double>(r.prefix_tokens), interp::table_dtype_bytes(rkv),
                    r.causal),
                0.0);
            if (c.latency_us * 1e-6 < bound) {
              c.latency_us = bound * 1e6;
              ++b.clamped["attention_prefill"];
            }
            rows.push_back(c);
          }
          if (!rows.empty()) b.table = std::make_shared<interp::PrefillTable>(rows, want_causal);
          return b;
        });
    for (const auto& [name, count] : built.clamped) diag.rows_clamped_to_peak[name] += count;
    if (!built.table) {
      continue;
    }
    prefill_tables.push_back(built.table);
    const interp::PrefillTable* t = built.table.get();
    if (!t->covers(heads)) {
      continue;
    }
    if (any == nullptr) {
      any = t;
      any_prof = prof;
    }
    if (t->has_family(heads)) {
      exact = t;
      exact_prof = prof;
      break;
    }
  }
  prefill = exact != nullptr ? exact : any;
  if (prefill != nullptr) {
    prefill_bound = prefill->bind(heads);
    diag.sources.push_back(fmt::format(
        "attention_prefill: {} kv {} from {}{}", want_causal ? "causal" : "bidirectional", kv,
        describe_profile(exact != nullptr ? exact_prof : any_prof),
        exact != nullptr ? "" : " (head configuration transferred)"));
  }
  return prefill != nullptr;
}

// Attention tables: prefill (a bidirectional model may borrow the causal kernel's), then decode.
void ProfiledCostModel::Impl::resolve_attention(const ProfileTiers& tiers) {
  // MLA has no attention tables (their rows are GQA head configurations): roofline only.
  if (!shapes.mla && !pick_prefill_table(tiers, causal) && !causal && pick_prefill_table(tiers, true)) {
    prefill_bidirectional_from_causal = true;
  }
  resolve_decode_attention(tiers);
}

void ProfiledCostModel::Impl::resolve_decode_attention(const ProfileTiers& tiers) {
  const std::string kv = kv_dtype_name(d.kv_dtype);
  const double peak_bw = gpu.mem_bw_bytes_per_s;
  if (!shapes.mla) {
    const interp::DecodeTable* exact = nullptr;
    const interp::DecodeTable* any = nullptr;
    const profiles::Profile* exact_prof = nullptr;
    const profiles::Profile* any_prof = nullptr;
    const int64_t l2 = gpu.l2_bytes;
    for (size_t i = 0; i < tiers.profiles.size(); ++i) {
      if (i == tiers.second && any != nullptr) {
        break;  // a table of the first tier covers the heads
      }
      const profiles::Profile* prof = tiers.profiles[i];
      const BuiltTable<interp::DecodeTable> built = shared_table<interp::DecodeTable>(
          *prof, fmt::format("decode|{}|{}", kv, gpu.key), [&] {
            BuiltTable<interp::DecodeTable> b;
            std::vector<profiles::AttentionDecodeRow> rows;
            const int64_t table_l2 = prof->meta.l2_bytes > 0 ? prof->meta.l2_bytes : l2;
            for (const profiles::AttentionDecodeRow& r : prof->attention_decode) {
              const std::string rkv = r.kv_dtype.empty() ? r.dtype : r.kv_dtype;
              if (r.dtype != "bf16" || rkv != kv) {
                continue;
              }
              profiles::AttentionDecodeRow c = r;
              const double kv_bytes = 2.0 * static_cast<double>(r.batch) *
                                      static_cast<double>(r.context_tokens) * r.num_kv_heads *
                                      r.head_dim * interp::table_dtype_bytes(rkv);
              const bool hot = table_l2 > 0 && kv_bytes < static_cast<double>(table_l2);
              b.cache_hot += hot ? 1 : 0;
              const double bound = kv_bytes / peak_bw;
              if (c.latency_us * 1e-6 < bound) {
                c.latency_us = bound * 1e6;
                ++b.clamped[hot ? "attention_decode_cache_hot" : "attention_decode"];
              }
              rows.push_back(c);
            }
            if (!rows.empty()) {
              b.table = std::make_shared<interp::DecodeTable>(rows, table_l2, peak_bw);
            }
            return b;
          });
      for (const auto& [name, count] : built.clamped) diag.rows_clamped_to_peak[name] += count;
      if (!built.table) {
        continue;
      }
      const int64_t cache_hot = built.cache_hot;
      decode_tables.push_back(built.table);
      const interp::DecodeTable* t = built.table.get();
      if (!t->covers(heads)) {
        continue;
      }
      if (any == nullptr) {
        any = t;
        any_prof = prof;
        diag.decode_rows_cache_hot = cache_hot;
      }
      if (t->has_family(heads)) {
        exact = t;
        exact_prof = prof;
        diag.decode_rows_cache_hot = cache_hot;
        break;
      }
    }
    decode = exact != nullptr ? exact : any;
    if (decode != nullptr) {
      decode_bound = decode->bind(heads);
      diag.sources.push_back(
          fmt::format("attention_decode: kv {} from {}{}; floor at {:.0f} GB/s", kv,
                      describe_profile(exact != nullptr ? exact_prof : any_prof),
                      exact != nullptr ? "" : " (head configuration transferred)",
                      decode->floor_bandwidth() / 1e9));
    }
  }
  if (prefill == nullptr) {
    prefill_fit =
        fit_from_throughputs(gpu.bf16_flops_per_s * detail::derived_compute_efficiency(
                                                        gpu, params.roofline, Dtype::kBf16),
                             gpu.mem_bw_bytes_per_s * params.roofline.memory_efficiency,
                             to_seconds(params.roofline.kernel_launch));
    diag.sources.push_back("attention_prefill: roofline (no table)");
  }
  if (decode == nullptr) {
    decode_fit = fit_from_throughputs(gpu.bf16_flops_per_s,
                                      gpu.mem_bw_bytes_per_s * params.roofline.memory_efficiency,
                                      to_seconds(params.roofline.kernel_launch));
    diag.sources.push_back("attention_decode: roofline (no table)");
  }
}

void ProfiledCostModel::Impl::resolve_allreduce(const std::vector<const profiles::Profile*>& order) {
  // All-reduce: vLLM's custom all-reduce where it covers the message, else NCCL. Profiles that
  // measured vLLM's custom kernel come first (their harness measured NCCL beside it, so the two
  // curves meet consistently), then the rest in the source order.
  if (d.tp > 1) {
    std::vector<const profiles::Profile*> collective_order = order;
    std::stable_partition(collective_order.begin(), collective_order.end(),
                          [](const profiles::Profile* prof) {
                            return std::any_of(prof->collective.begin(), prof->collective.end(),
                                               [](const profiles::CollectiveRow& r) {
                                                 return r.op == "custom_all_reduce";
                                               });
                          });
    for (const profiles::Profile* prof : collective_order) {
      std::vector<interp::CurveTable::Row> custom, nccl;
      for (const profiles::CollectiveRow& r : prof->collective) {
        if (r.num_gpus != d.tp || r.nodes != 1) {
          continue;
        }
        const bool sixteen = r.dtype == "bf16" || r.dtype == "fp16";
        if (r.op == "custom_all_reduce" && sixteen && custom_ar == nullptr &&
            params.custom_allreduce) {
          custom.push_back({interp::collective_key(r.op, "16bit", r.num_gpus, r.nodes),
                            static_cast<double>(r.message_bytes), r.latency_us * 1e-6});
        } else if (r.op == "all_reduce" && sixteen && nccl_ar == nullptr) {
          nccl.push_back({interp::collective_key(r.op, "16bit", r.num_gpus, r.nodes),
                          static_cast<double>(r.message_bytes), r.latency_us * 1e-6});
        }
      }
      if (!custom.empty()) {
        curve_tables.push_back(std::make_unique<interp::CurveTable>(custom));
        custom_ar = curve_tables.back().get();
        custom_ar_key = custom.front().key;
        custom_ar_min_bytes = custom_ar->min_size(custom_ar_key);
        custom_ar_max_bytes = custom_ar->max_size(custom_ar_key);
        diag.sources.push_back(
            fmt::format("allreduce: custom_all_reduce tp{} from {} ({:.0f} to {:.0f} B)", d.tp,
                        describe_profile(prof), custom_ar_min_bytes, custom_ar_max_bytes));
      }
      if (!nccl.empty()) {
        curve_tables.push_back(std::make_unique<interp::CurveTable>(nccl));
        nccl_ar = curve_tables.back().get();
        nccl_ar_key = nccl.front().key;
        diag.sources.push_back(
            fmt::format("allreduce: nccl all_reduce tp{} from {}", d.tp, describe_profile(prof)));
      }
      if (custom_ar != nullptr && nccl_ar != nullptr) {
        break;
      }
    }
    if (custom_ar == nullptr && nccl_ar == nullptr) {
      // No rows at this TP: a profile that measured NCCL on fewer and on more GPUs of one node
      // gives the curve between them, geometric in the GPU count, at the sizes both measured.
      for (const profiles::Profile* prof : collective_order) {
        std::map<int, std::map<int64_t, double>> by_gpus;  // GPU count -> bytes -> seconds
        for (const profiles::CollectiveRow& r : prof->collective) {
          if (r.op == "all_reduce" && r.nodes == 1 && (r.dtype == "bf16" || r.dtype == "fp16")) {
            by_gpus[r.num_gpus][r.message_bytes] = r.latency_us * 1e-6;
          }
        }
        const auto above = by_gpus.upper_bound(d.tp);
        if (above == by_gpus.end() || above == by_gpus.begin()) continue;
        const auto below = std::prev(above);
        const double w = std::log(static_cast<double>(d.tp) / below->first) /
                         std::log(static_cast<double>(above->first) / below->first);
        std::vector<interp::CurveTable::Row> rows;
        const std::string key = interp::collective_key("all_reduce", "16bit", d.tp, 1);
        for (const auto& [bytes, lo] : below->second) {
          const auto hi = above->second.find(bytes);
          if (hi == above->second.end()) continue;
          rows.push_back({key, static_cast<double>(bytes),
                          std::exp((1 - w) * std::log(lo) + w * std::log(hi->second))});
        }
        if (rows.size() < 2) continue;
        curve_tables.push_back(std::make_unique<interp::CurveTable>(rows));
        nccl_ar = curve_tables.back().get();
        nccl_ar_key = key;
        diag.sources.push_back(fmt::format(
            "allreduce: nccl all_reduce tp{} between the {}- and {}-GPU rows of {}", d.tp,
            below->first, above->first, describe_profile(prof)));
        break;
      }
    }
    if (custom_ar == nullptr && nccl_ar == nullptr) {
      diag.sources.push_back("allreduce: link roofline (no collective table)");
    }
  }
}

// Elementwise: Vidur rows for this model and tp, all five operators present.
void ProfiledCostModel::Impl::resolve_elementwise(const std::vector<const profiles::Profile*>& order) {
  const std::string name = interp::normalized_model_name(model.key);
  static const std::array<std::pair<const char*, double>, 5> kOps = {
      {{"input_layernorm", 1},
       {"post_attention_layernorm", 1},
       {"attn_rope", 1},
       {"mlp_act", 1},
       {"add", 2}}};
  for (const profiles::Profile* prof : order) {
    std::vector<interp::CurveTable::Row> rows;
    std::map<std::string, int> seen;
    for (const profiles::ElementwiseRow& r : prof->elementwise) {
      if (r.tp != d.tp || interp::normalized_model_name(r.model) != name) {
        continue;
      }
      rows.push_back({interp::elementwise_key(r.model, r.op, r.tp),
                      static_cast<double>(r.num_tokens), r.latency_us * 1e-6});
      seen[r.op] += 1;
    }
    bool complete = true;
    for (const auto& [op, count] : kOps) {
      complete &= seen.count(op) > 0;
    }
    if (!complete) {
      continue;
    }
    curve_tables.push_back(std::make_unique<interp::CurveTable>(rows));
    elementwise = curve_tables.back().get();
    for (const auto& [op, count] : kOps) {
      elementwise_keys.emplace_back(interp::elementwise_key(model.key, op, d.tp), count);
    }
    diag.sources.push_back(
        fmt::format("norms_elementwise: vidur elementwise from {}", describe_profile(prof)));
    break;
  }
  if (elementwise == nullptr) {
    // Roofline bytes at the bandwidth fitted to the GEMM table of the dense GEMMs.
    const interp::GemmTable* t = qkv.table != nullptr ? qkv.table : lm_head.table;
    elementwise_bw = t != nullptr && t->fit().bandwidth() > 0
                         ? std::min(t->fit().bandwidth(), gpu.mem_bw_bytes_per_s)
                         : gpu.mem_bw_bytes_per_s * params.roofline.memory_efficiency;
    diag.sources.push_back(
        fmt::format("norms_elementwise: roofline bytes at {:.0f} GB/s (fitted to the "
                    "gemm table) + {} "
                    "launches",
                    elementwise_bw / 1e9, detail::kElementwiseKernelsPerLayer));
  }
}

void ProfiledCostModel::Impl::resolve_direct(const std::vector<const profiles::Profile*>& order) {
  GemmSearch search{order, {order, order.size()}, engine_kernels_first(order, "quantized_gemm"), {}};
  resolve_gemms(search);
  resolve_moe_table(order);
  resolve_attention(engine_kernels_first(order, "attention"));
  resolve_allreduce(order);
  resolve_elementwise(order);
  note = fmt::format("{}: measured tables of {}", gpu.key, gpu.key);
  for (const profiles::Profile* p : order) {
    if (!profiles::kernel_engine(p->meta).empty()) {
      note += fmt::format("; the serving engine's own operator tables first ({})",
                          describe_profile(p));
    }
  }
  for (const auto& [table, count] : diag.rows_clamped_to_peak) {
    note += fmt::format("; {} {} rows faster than the peak bound clamped", count, table);
  }
  for (const auto& [dtype, count] : diag.gemm_rows_slower_than_larger_m) {
    note += fmt::format("; {} {} gemm rows slower than a larger batch of the same shape dropped",
                        count, dtype);
  }
  for (const std::string& dtype : diag.gemm_tables_with_fused_quantization) {
    note += fmt::format(
        "; {} gemm rows timed an unfused activation quantization: priced with a fused pass", dtype);
  }
  for (const auto& [dtype, count] : diag.gemms_priced_from_bf16) {
    note += fmt::format(
        "; {} {} gemm(s) whose table is slower than its bf16 one priced from the bf16 kernel too "
        "(validate: inversions)",
        count, dtype);
  }
}

void ProfiledCostModel::Impl::resolve_donor(const std::vector<const profiles::Profile*>& order,
                                            const GpuSpec& donor) {
  // Efficiency curves fitted on the donor's tables, scaled by the peak ratios.
  std::map<std::pair<const profiles::Profile*, std::string>, const interp::GemmTable*> cache;
  const double bw_ratio = gpu.mem_bw_bytes_per_s / donor.mem_bw_bytes_per_s;
  const auto flops_ratio = [&](Dtype dt) {
    const double dp = donor.peak_flops_per_s(dt);
    return dp > 0 ? gpu.peak_flops_per_s(dt) / dp : 1.0;
  };
  const auto fit_for = [&](const std::vector<std::string>& dtypes, Dtype dt, RooflineFit* out) {
    for (const std::string& dtype : dtypes) {
      for (const profiles::Profile* prof : order) {
        const interp::GemmTable* t = gemm_table(*prof, dtype, donor, &cache);
        if (t != nullptr) {
          *out = t->fit().scaled(flops_ratio(dt), bw_ratio);
          return true;
        }
      }
    }
    return false;
  };
  RooflineFit wfit, afit;
  const std::vector<std::string> wdtypes = weight_table_dtypes(d.weight_dtype);
  const bool have16 = fit_for({"bf16", "fp16"}, Dtype::kBf16, &afit);
  if (!fit_for(wdtypes, d.weight_dtype, &wfit)) {
    wfit = have16 ? afit.scaled(gpu.bf16_flops_per_s > 0
                                    ? gpu.peak_flops_per_s(d.weight_dtype) / gpu.bf16_flops_per_s
                                    : 1.0,
                                1)
                  : fit_from_throughputs(gpu.peak_flops_per_s(d.weight_dtype) * 0.75,
                                         gpu.mem_bw_bytes_per_s * 0.8, 2e-6);
  }
  if (!have16) {
    afit = fit_from_throughputs(gpu.bf16_flops_per_s * 0.75, gpu.mem_bw_bytes_per_s * 0.8, 2e-6);
  }
  use_gemm_fits(wfit, afit);
  elementwise_bw = afit.bandwidth();

  const std::string kv = kv_dtype_name(d.kv_dtype);
  bool have_prefill = false, have_decode = false;
  for (const profiles::Profile* prof : order) {
    if (!have_prefill) {
      std::vector<profiles::AttentionPrefillRow> rows;
      for (const profiles::AttentionPrefillRow& r : prof->attention_prefill) {
        if (r.dtype == "bf16" && (r.kv_dtype.empty() ? r.dtype : r.kv_dtype) == kv && r.causal) {
          rows.push_back(r);
        }
      }
      if (!rows.empty()) {
        prefill_fit =
            interp::PrefillTable(rows, true).fit().scaled(flops_ratio(Dtype::kBf16), bw_ratio);
        have_prefill = true;
      }
    }
    if (!have_decode) {
      std::vector<profiles::AttentionDecodeRow> rows;
      for (const profiles::AttentionDecodeRow& r : prof->attention_decode) {
        if (r.dtype == "bf16" && (r.kv_dtype.empty() ? r.dtype : r.kv_dtype) == kv) {
          rows.push_back(r);
        }
      }
      if (!rows.empty()) {
        const interp::DecodeTable t(rows,
                                    prof->meta.l2_bytes > 0 ? prof->meta.l2_bytes : donor.l2_bytes,
                                    donor.mem_bw_bytes_per_s);
        decode_fit = t.fit().scaled(1, bw_ratio);
        decode_floor_bw = t.floor_bandwidth() * bw_ratio;
        have_decode = true;
      }
    }
  }
  if (!have_prefill) {
    prefill_fit =
        fit_from_throughputs(gpu.bf16_flops_per_s * 0.75, gpu.mem_bw_bytes_per_s * 0.8, 2e-6);
  }
  if (!have_decode) {
    decode_fit = fit_from_throughputs(gpu.bf16_flops_per_s, gpu.mem_bw_bytes_per_s * 0.8, 2e-6);
  }
  note = fmt::format(
      "{}: no measured tables; roofline with efficiencies "
      "fitted on {} (same architecture, {})",
      gpu.key, donor.key, gpu_architecture(gpu));
  diag.sources.push_back(
      fmt::format("gemm: roofline fitted on {} ({:.0f} TFLOP/s saturated, {:.0f} GB/s), "
                  "scaled to {}",
                  donor.key, wfit.f_max / 1e12, wfit.bandwidth() / 1e9, gpu.key));
  diag.sources.push_back(fmt::format("attention: rooflines fitted on {} attention tables{}",
                                     donor.key,
                                     have_prefill && have_decode ? "" : " (partly defaults)"));
  diag.sources.push_back("allreduce: link roofline");
}

void ProfiledCostModel::Impl::use_gemm_fits(const RooflineFit& weights,
                                             const RooflineFit& sixteen_bit) {
  const auto set = [](GemmSource* s, double n, double k, double wb, const RooflineFit& f) {
    s->table = nullptr;
    s->fit = f;
    s->n = n;
    s->k = k;
    s->weight_bytes = wb;
  };
  set(&qkv, shapes.qkv_n, shapes.qkv_k, shapes.weight_bytes, weights);
  set(&o, shapes.o_n, shapes.o_k, shapes.weight_bytes, weights);
  set(&gate_up, shapes.gate_up_n, shapes.gate_up_k, shapes.weight_bytes, weights);
  set(&down, shapes.down_n, shapes.down_k, shapes.weight_bytes, weights);
  set(&lm_head, shapes.lm_head_n, shapes.lm_head_k, 2, sixteen_bit);
  set(&router, shapes.experts, shapes.hidden, 2, sixteen_bit);
  set(&shared_gate_up, shapes.shared_gate_up_n, shapes.hidden, shapes.weight_bytes, weights);
  set(&shared_down, shapes.hidden, shapes.shared_down_k, shapes.weight_bytes, weights);
  set(&dense_gate_up, shapes.dense_gate_up_n, shapes.hidden, shapes.weight_bytes, weights);
  set(&dense_down, shapes.hidden, shapes.dense_down_k, shapes.weight_bytes, weights);
  set(&linear_in, shapes.linear_in_n, shapes.hidden, shapes.weight_bytes, weights);
  set(&linear_out, shapes.hidden, shapes.linear_out_k, shapes.weight_bytes, weights);
}

void ProfiledCostModel::Impl::resolve_uncalibrated() {
  uncalibrated = true;
  const detail::Throughputs x = detail::achievable_throughputs(d, params.roofline);
  const RooflineFit wfit = fit_from_throughputs(x.gemm_flops_per_s, x.mem_bytes_per_s, x.launch_s);
  const RooflineFit afit = fit_from_throughputs(x.bf16_flops_per_s, x.mem_bytes_per_s, x.launch_s);
  use_gemm_fits(wfit, afit);
  prefill_fit = afit;
  decode_fit = afit;
  elementwise_bw = x.mem_bytes_per_s;
  note = fmt::format("{}: no measured tables and no donor; roofline with default efficiencies",
                     gpu.key);
  diag.sources.push_back("all operators: roofline (RooflineParams efficiencies)");
}

const TokenEntry& ProfiledCostModel::Impl::tokens_entry(int64_t m) const {
  if (m > params.memo_tokens) {
    static thread_local TokenEntry scratch;
    scratch = compute_tokens(static_cast<double>(m));
    return scratch;
  }
  const auto index = static_cast<size_t>(m);
  if (index >= token_memo.size()) {
    token_memo.resize(std::min(static_cast<size_t>(params.memo_tokens) + 1,
                               std::max(index + 1, 2 * token_memo.size())));
  }
  TokenEntry& e = token_memo[index];
  if (!e.ready) {
    e = compute_tokens(static_cast<double>(m));
    e.ready = true;
  }
  return e;
}

// Accumulates a part of an operator into its time and the LookupStats buckets of `e`.
struct Split {
  double s = 0;
  std::array<double, 3> by_kind{};
  void add(double seconds, Kind k) {
    s += seconds;
    by_kind[k] += seconds;
  }
  // Raises the total to `bound` (scaling the parts) and returns the total.
  double clamp_to(double bound, int64_t* clamped) {
    if (s < bound) {
      ++*clamped;
      const double f = s > 0 ? bound / s : 0;
      for (double& b : by_kind) {
        b *= f;
      }
      if (s <= 0) {
        by_kind[kAnalytic] = bound;
      }
      s = bound;
    }
    return s;
  }
};

TokenEntry ProfiledCostModel::Impl::compute_tokens(double m) const {
  TokenEntry e;
  const double layers = shapes.layers;
  std::array<double, 3> by_kind{};
  const auto finish = [&](size_t slot, Split& part, double bound) {
    e.s[slot] = part.clamp_to(bound, &clamped_predictions);
    for (size_t k = 0; k < 3; ++k) {
      by_kind[k] += part.by_kind[k];
    }
  };
  const auto gemm = [&](const GemmSource& g, double rows, double times, Split* out) {
    const Lookup l = g.at(rows);
    out->add(times * l.seconds, g.kind(l));
  };
  Split q, ov, mlp, elem, ar;
  gemm(qkv, m, shapes.attention_layers, &q);
  gemm(o, m, shapes.attention_layers, &ov);
  if (shapes.linear_layers > 0) {  // the GEMM tables at the linear layers' projection shapes
    gemm(linear_in, m, shapes.linear_layers, &q);
    gemm(linear_out, m, shapes.linear_layers, &ov);
  }
  finish(0, q, detail::qkv_time(peak, m));
  finish(1, ov, detail::o_time(peak, m));
  if (!shapes.moe) {
    gemm(gate_up, m, layers, &mlp);
    gemm(down, m, layers, &mlp);
  } else {
    const double moe_layers = shapes.moe_layers;
    gemm(router, m, moe_layers, &mlp);
    // The busiest rank of the expert-parallel group sets the time (every rank at ep = 1).
    const RankLoad load = shapes.expert_load->busiest(m);
    const double routed = load.routed_rows;
    const double touched = load.touched_experts;
    // The engine's MoE kernels against the tables (ProfiledParams::moe_kernel_scale).
    const double expert_layers = moe_layers * moe_scale;
    if (moe_table != nullptr && moe_table_own_routing) {
      // Measured under this routing, its busiest rank included: the pass's tokens as they are.
      const Lookup l = moe_table->predict(moe_key, m);
      mlp.add(expert_layers * l.seconds, kind_of(l));
    } else if (moe_table != nullptr) {
      // The table's rows are loads of num_tokens tokens: the busiest rank's load is that of
      // routed / (k / ep) tokens. A balanced row spreads them over min(E/ep, routed) experts, so
      // it reads the weights of more experts than the routing reaches (`touched`): scaled by
      // that ratio (the weight-bound part dominates while they differ).
      const Lookup l = moe_table->predict(moe_key, routed * shapes.ep / shapes.experts_per_token);
      const double spread =
          moe_table_balanced ? touched / std::min(shapes.experts / shapes.ep, routed) : 1.0;
      mlp.add(expert_layers * l.seconds * spread, kind_of(l));
    } else {
      // The touched experts run as one grouped kernel per layer, scaled by what the fused MoE
      // kernels of the dtype's measured shapes take over that estimate at as many tokens.
      const double scale = moe_efficiency.at(routed * shapes.ep / shapes.experts_per_token);
      const auto experts = [&](const GemmSource& g) {
        const Lookup l = g.at(routed / touched);
        mlp.add(expert_layers * scale * grouped_gemm_s(g, l, touched), g.kind(l));
      };
      experts(gate_up);
      experts(down);
    }
    if (shapes.shared_down_k > 0) {
      gemm(shared_gate_up, m, moe_layers, &mlp);
      gemm(shared_down, m, moe_layers, &mlp);
    }
    if (shapes.dense_layers > 0) {
      gemm(dense_gate_up, m, shapes.dense_layers, &mlp);
      gemm(dense_down, m, shapes.dense_layers, &mlp);
    }
  }
  finish(2, mlp, detail::mlp_time(peak, m));
  if (elementwise != nullptr) {
    for (const auto& [key, count] : elementwise_keys) {
      const Lookup l = elementwise->predict(key, m);
      elem.add(layers * count * l.seconds, kind_of(l));
    }
  } else {
    elem.add(
        layers * (m * shapes.elementwise_bytes_per_token / elementwise_bw +
                  detail::kElementwiseKernelsPerLayer * to_seconds(params.roofline.kernel_launch)),
        kAnalytic);
  }
  finish(3, elem, peak.elementwise_s * m);
  if (d.tp > 1) {
    const double bytes = m * shapes.allreduce_bytes_per_token;
    const double per_pass = layers * detail::kAllReducesPerLayer;
    if (custom_ar != nullptr && bytes >= custom_ar_min_bytes && bytes <= custom_ar_max_bytes) {
      const Lookup l = custom_ar->predict(custom_ar_key, bytes);
      ar.add(per_pass * l.seconds, kind_of(l));
    } else if (nccl_ar != nullptr) {
      const Lookup l = nccl_ar->predict(nccl_ar_key, bytes);
      ar.add(per_pass * l.seconds, kind_of(l));
    } else if (custom_ar != nullptr) {
      const Lookup l = custom_ar->predict(custom_ar_key, bytes);
      ar.add(per_pass * l.seconds, kExtrapolated);
    } else {
      ar.add(achievable.allreduce_s * m + achievable.allreduce_fixed_s, kAnalytic);
    }
    finish(4, ar, peak.allreduce_s * m);
  }
  e.split = by_kind;
  return e;
}

RowsEntry ProfiledCostModel::Impl::compute_lm_head(double rows) const {
  const Lookup l = lm_head.at(rows);
  Split part;
  part.add(l.seconds, lm_head.kind(l));
  RowsEntry e;
  e.s = part.clamp_to(peak.lm_head.time(rows), &clamped_predictions);
  e.kind = static_cast<uint8_t>(lm_head.kind(l));
  e.ready = true;
  return e;
}

void ProfiledCostModel::Impl::attention(const detail::BatchSums& s, Parts* out) const {
  if (shapes.mla) {
    mla_attention(s, out);
    return;
  }
  // Tables and fits cover the full-attention layers. Sliding-window layers add, in prefill, the
  // roofline over the windowed sums (window_attention); in decode, the table at their window.
  const double layers = shapes.full_attention_layers;
  const double hd = static_cast<double>(model.head_dim);
  // The Gated DeltaNet recurrence has no table: it runs at the efficiency the full-attention
  // layers' kernel achieved on this pass against the peak roofline (their table, or the fit of
  // the GPU's measured attention kernels: the nearest measured kernel), counted as extrapolated.
  const auto add_recurrence = [&](Split& part, double measured_s, double peak_s, double tokens,
                                  double sequences, bool prefill_step) {
    if (!achievable.has_linear) return;
    if (measured_s > 0 && peak_s > 0) {
      part.add(detail::linear_attention_time(peak, tokens, sequences, prefill_step) *
                   std::max(1.0, measured_s / peak_s),
               kExtrapolated);
    } else {
      part.add(detail::linear_attention_time(achievable, tokens, sequences, prefill_step),
               kAnalytic);
    }
  };
  if (s.has_prefill) {
    const double b = s.prefill_segments;
    Split part;
    double measured_s = 0;  // the full-attention layers' time (table or fit)
    if (prefill != nullptr) {
      Lookup l;
      if (prefill_bound.has_prefix_rows()) {
        // Equivalent uniform batch: q_eq = sqrt(mean q^2), c_eq matching sum(q c).
        const double q_eq = std::sqrt(s.prefill_q2 / b);
        const double c_eq = s.prefill_qc / (b * q_eq);
        l = prefill_bound.predict(b, q_eq, c_eq);
      } else {
        // AIConfigurator's rule on the batch: T(B, K) * sum(k^2 - c^2) / sum(k^2).
        const double k_eq = std::sqrt(s.prefill_k2 / b);
        l = prefill_bound.predict(b, k_eq, 0);
        const double work =
            prefill->causal() ? 2 * s.prefill_qc + s.prefill_q2 : s.prefill_qc + s.prefill_q2;
        l.seconds *= work / s.prefill_k2;
      }
      if (prefill_bidirectional_from_causal) {
        // Bidirectional attention (diffusion LLM) from causal rows: scaled by the key positions.
        l.seconds *= (s.prefill_qc + s.prefill_q2) / s.prefill_key_positions;
        l.extrapolated = true;
      }
      measured_s = layers * l.seconds;
      part.add(measured_s, kind_of(l));
    } else {
      const double q_eq = std::sqrt(s.prefill_q2 / b);
      const double c_eq = s.prefill_qc / (b * q_eq);
      measured_s = layers * interp::prefill_reference(prefill_fit, shapes.heads, shapes.kv_heads,
                                                      hd, b, q_eq, c_eq, shapes.kv_bytes, causal);
      part.add(measured_s, kAnalytic);
    }
    if (achievable.windowed) {
      part.add(detail::attention_time(achievable.window_prefill, s.window_prefill_key_positions,
                                      s.window_prefill_kv_tokens, s.prefill_query_tokens, 0),
               kAnalytic);
    }
    add_recurrence(part, measured_s,
                   detail::attention_time(peak.attn_prefill, s.prefill_key_positions,
                                          s.prefill_kv_tokens, s.prefill_query_tokens, 0),
                   s.prefill_query_tokens, s.prefill_segments, true);
    out->s[kPrefill] =
        part.clamp_to(detail::prefill_attention_time(peak, s), &clamped_predictions);
    for (size_t k = 0; k < 3; ++k) {
      out->split[k] += part.by_kind[k];
    }
  }
  if (s.has_decode) {
    const double b = s.decode_query_tokens;
    Split part;
    // One decode attention kernel per layer over `kv_tokens` (attended + written, summed over the
    // batch): the table or fit of the full-attention layers. A sliding-window layer runs the same
    // kernel over its window, so it is priced the same way at its windowed context. Returns the
    // time it added.
    const auto add_layers = [&](double count, double kv_tokens) {
      const double context = (kv_tokens - b) / b;
      if (decode != nullptr) {
        const uint64_t key = DecodeMemo::key(b, kv_tokens);
        Lookup l;
        if (key == 0 || !decode_memo.find(key, &l)) {
          l = decode_bound.predict(b, context);
          if (key != 0) decode_memo.insert(key, l);
        }
        part.add(count * l.seconds, kind_of(l));
        return count * l.seconds;
      }
      double t = interp::decode_reference(decode_fit, shapes.heads, shapes.kv_heads, hd, b, context,
                                          shapes.kv_bytes);
      if (decode_floor_bw > 0) {
        t = std::max(t, 2 * b * context * shapes.kv_heads * hd * shapes.kv_bytes / decode_floor_bw);
      }
      part.add(count * t, kAnalytic);
      return count * t;
    };
    const double measured_s = add_layers(layers, s.decode_kv_tokens);
    if (achievable.windowed) add_layers(shapes.window_layers, s.window_decode_kv_tokens);
    add_recurrence(
        part, measured_s,
        detail::attention_time(peak.attn_decode, s.decode_key_positions, s.decode_kv_tokens, b, 0),
        b, b, false);
    out->s[kDecode] = part.clamp_to(detail::decode_attention_time(peak, s), &clamped_predictions);
    for (size_t k = 0; k < 3; ++k) {
      out->split[k] += part.by_kind[k];
    }
  }
}

void ProfiledCostModel::Impl::mla_attention(const detail::BatchSums& s, Parts* out) const {
  // `achieved` includes `indexer`, DSA's lightning indexer: an operator no table covers, priced
  // at the GPU's measured FP8 matmul efficiency (the nearest measured kernel) and so counted as
  // extrapolated; the rest of MLA's attention is the roofline (no MLA tables).
  const auto add = [&](size_t slot, double achieved, double indexer, double bound) {
    Split part;
    part.add(achieved - indexer, kAnalytic);
    part.add(indexer, kExtrapolated);
    out->s[slot] = part.clamp_to(bound, &clamped_predictions);
    for (size_t k = 0; k < 3; ++k) out->split[k] += part.by_kind[k];
  };
  const auto indexer = [&](double key_positions, double kv_tokens, double queries) {
    return achievable.has_indexer
               ? detail::attention_time(achievable.indexer, key_positions, kv_tokens, queries, 0)
               : 0.0;
  };
  if (s.has_prefill) {
    add(kPrefill, detail::prefill_attention_time(achievable, s),
        indexer(s.prefill_key_positions, s.prefill_kv_tokens, s.prefill_query_tokens),
        detail::prefill_attention_time(peak, s));
  }
  if (s.has_decode) {
    add(kDecode, detail::decode_attention_time(achievable, s),
        indexer(s.decode_key_positions, s.decode_kv_tokens, s.decode_query_tokens),
        detail::decode_attention_time(peak, s));
  }
}

Parts ProfiledCostModel::Impl::evaluate(const detail::BatchSums& s) const {
  Parts out;
  if (uncalibrated) {
    const OperatorTimes t = detail::evaluate(achievable, s);
    const Duration parts[kOps] = {t.qkv_gemm,          t.o_gemm,           t.mlp_gemm,
                                  t.attention_prefill, t.attention_decode, t.norms_elementwise,
                                  t.allreduce,         t.lm_head,          t.overhead};
    for (size_t i = 0; i < kOps; ++i) {
      out.s[i] = to_seconds(parts[i]);
      out.split[kAnalytic] += out.s[i];
    }
    out.lookups = 1;
    return out;
  }
  const TokenEntry& e = tokens_entry(static_cast<int64_t>(s.tokens));
  out.s[kQkv] = e.s[0];
  out.s[kO] = e.s[1];
  out.s[kMlp] = e.s[2];
  out.s[kElementwise] = e.s[3];
  out.s[kAllreduce] = e.s[4];
  out.split = e.split;
  out.lookups = d.tp > 1 ? 5 : 4;
  if (s.logit_rows > 0) {
    const auto rows = static_cast<int64_t>(s.logit_rows);
    RowsEntry computed;
    const RowsEntry* lm = &computed;
    if (rows <= params.memo_tokens) {
      const auto index = static_cast<size_t>(rows);
      if (index >= lm_memo.size()) {
        lm_memo.resize(std::min(static_cast<size_t>(params.memo_tokens) + 1,
                                std::max(index + 1, 2 * lm_memo.size())));
      }
      if (!lm_memo[index].ready) {
        lm_memo[index] = compute_lm_head(s.logit_rows);
      }
      lm = &lm_memo[index];
    } else {
      computed = compute_lm_head(s.logit_rows);
    }
    out.s[kLmHead] = lm->s;
    out.split[lm->kind] += lm->s;
    ++out.lookups;
  }
  attention(s, &out);
  out.lookups += (s.has_prefill ? 1 : 0) + (s.has_decode ? 1 : 0);
  out.s[kOverhead] = to_seconds(params.roofline.iteration_overhead);
  out.split[kAnalytic] += out.s[kOverhead];
  return out;
}

namespace {

OperatorTimes to_operator_times(const Parts& p) {
  OperatorTimes t;
  t.qkv_gemm = duration_from_seconds(p.s[kQkv]);
  t.o_gemm = duration_from_seconds(p.s[kO]);
  t.mlp_gemm = duration_from_seconds(p.s[kMlp]);
  t.attention_prefill = duration_from_seconds(p.s[kPrefill]);
  t.attention_decode = duration_from_seconds(p.s[kDecode]);
  t.norms_elementwise = duration_from_seconds(p.s[kElementwise]);
  t.allreduce = duration_from_seconds(p.s[kAllreduce]);
  t.lm_head = duration_from_seconds(p.s[kLmHead]);
  t.overhead = duration_from_seconds(p.s[kOverhead]);
  return t;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

ProfiledCostModel::ProfiledCostModel(const Deployment& d,
                                     const std::vector<profiles::Profile>& gpu_profiles,
                                     const ProfiledParams& p)
    : impl_(std::make_unique<Impl>(d, gpu_profiles, p)) {}

ProfiledCostModel::~ProfiledCostModel() = default;

OperatorTimes ProfiledCostModel::Impl::counted(const detail::BatchSums& s) const {
  const Parts p = evaluate(s);
  stats.interpolated_s += p.split[kInterpolated];
  stats.extrapolated_s += p.split[kExtrapolated];
  stats.analytic_s += p.split[kAnalytic];
  stats.lookups += p.lookups;
  return to_operator_times(p);
}

Duration ProfiledCostModel::iteration_time(const BatchShape& shape) const {
  return impl_->counted(detail::sum_segments(shape, impl_->shapes.window)).total();
}

OperatorTimes ProfiledCostModel::counted_breakdown(const BatchShape& shape) const {
  return impl_->counted(detail::sum_segments(shape, impl_->shapes.window));
}

std::optional<Duration> ProfiledCostModel::decode_iteration_time(const DecodePass& pass) const {
  if (impl_->shapes.window > 0) return std::nullopt;  // windowed sums need each context
  return impl_->counted(detail::decode_sums(pass)).total();
}

std::optional<Duration> ProfiledCostModel::mixed_iteration_time(const DecodePass& run,
                                                                const BatchShape& rest) const {
  if (impl_->shapes.window > 0) return std::nullopt;
  return impl_->counted(detail::mixed_sums(run, rest)).total();
}

OperatorTimes ProfiledCostModel::breakdown(const BatchShape& shape) const {
  return to_operator_times(impl_->evaluate(detail::sum_segments(shape, impl_->shapes.window)));
}

Duration ProfiledCostModel::peak_bound_time(const BatchShape& shape) const {
  return peak_bound_breakdown(shape).total();
}

OperatorTimes ProfiledCostModel::peak_bound_breakdown(const BatchShape& shape) const {
  return detail::evaluate(impl_->peak, detail::sum_segments(shape, impl_->shapes.window));
}

LookupStats ProfiledCostModel::lookup_stats() const { return impl_->stats; }

std::string ProfiledCostModel::calibration_note() const { return impl_->note; }

const ProfiledDiagnostics& ProfiledCostModel::diagnostics() const {
  impl_->diag.predictions_clamped_to_peak = impl_->clamped_predictions;
  return impl_->diag;
}

std::string ProfiledCostModel::describe() const {
  const Impl& m = *impl_;
  std::string dtypes = dtype_name(m.d.weight_dtype);
  if (m.d.kv_dtype != m.d.weight_dtype) {
    dtypes += fmt::format(" (kv {})", dtype_name(m.d.kv_dtype));
  }
  return fmt::format("profiled {} on {} {} {}: {}; overhead {:g} ms", m.model.key, m.gpu.key,
                     parallelism_label(m.d), dtypes, m.note,
                     to_ms(m.params.roofline.iteration_overhead));
}

namespace {

// NCCL's all-to-all among `gpus` GPUs of one node as the first profile that measured it gives it
// (16-bit rows, by message bytes per GPU); empty when none did.
AllToAllTime measured_all_to_all(const std::vector<profiles::Profile>& gpu_profiles, int gpus) {
  for (const profiles::Profile& prof : gpu_profiles) {
    std::vector<interp::CurveTable::Row> rows;
    const std::string key = interp::collective_key("alltoall", "16bit", gpus, 1);
    for (const profiles::CollectiveRow& r : prof.collective) {
      if (r.op == "alltoall" && r.num_gpus == gpus && r.nodes == 1 &&
          (r.dtype == "bf16" || r.dtype == "fp16")) {
        rows.push_back({key, static_cast<double>(r.message_bytes), r.latency_us * 1e-6});
      }
    }
    if (rows.size() < 2) continue;
    auto table = std::make_shared<const interp::CurveTable>(rows);
    return [table, key](double bytes) -> std::optional<double> {
      return table->predict(key, std::max(bytes, 1.0)).seconds;
    };
  }
  return {};
}

}  // namespace

std::unique_ptr<IterationCostModel> make_profiled_cost_model(
    const Deployment& d, const std::vector<profiles::Profile>& gpu_profiles,
    const ProfiledParams& p) {
  if (d.attention_dp > 1) {
    return make_attention_dp_cost_model(
        d, [&](const Deployment& plain) { return make_profiled_cost_model(plain, gpu_profiles, p); },
        p.roofline, measured_all_to_all(gpu_profiles, d.gpus()));
  }
  if (d.pp > 1) {
    return make_pipeline_cost_model(
        d,
        [&](const Deployment& plain) { return make_profiled_cost_model(plain, gpu_profiles, p); },
        p.roofline);
  }
  return std::make_unique<ProfiledCostModel>(d, gpu_profiles, p);
}

std::string gpu_architecture(const GpuSpec& gpu) {
  const size_t paren = gpu.arch.find(" (");
  std::string family = paren == std::string::npos ? gpu.arch : gpu.arch.substr(0, paren);
  while (!family.empty() && family.back() == ' ') {
    family.pop_back();
  }
  return family;
}

namespace {

// "sm_89" in an arch string, or "" when absent.
std::string sm_version(const GpuSpec& gpu) {
  const size_t at = gpu.arch.find("sm_");
  if (at == std::string::npos) {
    return "";
  }
  size_t end = at + 3;
  while (end < gpu.arch.size() && std::isalnum(static_cast<unsigned char>(gpu.arch[end]))) {
    ++end;
  }
  return gpu.arch.substr(at, end - at);
}

}  // namespace

std::optional<std::string> pick_donor_gpu(const GpuSpec& target, const GpuCatalog& catalog,
                                          const std::vector<std::string>& with_tables) {
  const std::string family = gpu_architecture(target);
  std::optional<std::string> best;
  std::pair<int, double> best_score{std::numeric_limits<int>::max(), 0};
  for (const std::string& key : with_tables) {
    if (key == target.key || catalog.all().count(key) == 0) {
      continue;
    }
    const GpuSpec& g = catalog.get(key);
    if (family.empty() || gpu_architecture(g) != family) {
      continue;
    }
    const std::pair<int, double> score{
        sm_version(g) == sm_version(target) ? 0 : 1,
        std::abs(std::log(g.mem_bw_bytes_per_s / target.mem_bw_bytes_per_s))};
    if (!best || score < best_score) {
      best = key;
      best_score = score;
    }
  }
  return best;
}

std::unique_ptr<IterationCostModel> load_profiled_cost_model(const Deployment& d,
                                                             const GpuCatalog& catalog,
                                                             const std::string& profiles_root,
                                                             ProfiledParams p) {
  validate_deployment(d);
  std::vector<profiles::Profile> profs = profiles::load_gpu_profiles(profiles_root, d.gpu->key);
  if (profs.empty()) {
    const std::optional<std::string> donor =
        pick_donor_gpu(*d.gpu, catalog, profiles::profiled_gpus(profiles_root));
    if (donor) {
      profs = profiles::load_gpu_profiles(profiles_root, *donor);
      p.tables_gpu = &catalog.get(*donor);
    }
  }
  return make_profiled_cost_model(d, profs, p);
}

}  // namespace servesim::models
