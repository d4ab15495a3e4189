// Interpolators over measured operator tables, shared by the profiled cost model and by the
// fidelity checks (leave-one-out), so that both judge exactly the same scheme.
//
// Scheme (every table): a fitted reference R(x) (a roofline whose achievable FLOP/s and bandwidth
// are fitted to the table by least squares, RooflineFit) carries the physics; the table carries the
// residual r = ln(t / R) at the measured points, interpolated piecewise-linearly in the logarithms
// of the coordinates (1-D Curve, 1- to 3-D Grid). A prediction is R(x) * exp(r(x)):
//  - on a measured point it is that point exactly;
//  - between points it follows R's shape, clamped into the range of the bracketing points' times
//    (so a monotone table gives a monotone prediction between its points);
//  - outside the measured range the edge residual is held (R anchored to the edge point): that
//    is the extrapolation, and it is flagged so that callers can count it.
// Interpolating ln(t / R) rather than ln t is exact for data that follow R (time proportional to
// the work, plus a latency) and beats plain log-log interpolation in leave-one-out on every
// measured table; for a pure power law of exponent != 1 it is not exact (a few per cent). Units:
// seconds, bytes, FLOPs. Coordinates are given in natural logarithms.
//
// Thread-safety: built once, then const and safe to share.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "profiles/profile_tables.h"

namespace servesim::models::interp {

// Bytes per element of a table dtype string ("bf16", "fp16" 2; "fp8_e4m3", "fp8_block", "int8" 1;
// "nvfp4" 0.5625 = 4 bits + one 8-bit scale per 16 elements). 2 for unknown strings.
double table_dtype_bytes(const std::string& dtype);

// ---------------------------------------------------------------------------------------------
// Fitted roofline:
//   t = t0 + max(flops / F(u, v), items * item_s + bytes * mem_s_per_byte),
//   F(u, v) = f_max * u / (u + u_half) * v / (v + v_half),
// with `items` a per-work-item cost (decode: per sequence; 0 elsewhere) and the achievable FLOP/s
// F rising with two size measures chosen by the caller (GEMM: u = m, v = n*k; prefill attention:
// u = q_tokens, v = batch*heads), saturating at f_max. Monotone, so it never dips between
// measured shapes.
struct RooflineFit {
  double t0_s = 0;            // fixed latency
  double mem_s_per_byte = 0;  // 1 / achievable bandwidth
  double item_s = 0;          // per work item (decode: per sequence)
  bool compute = false;       // false: memory-only (no compute term)
  double f_max = 0;           // saturated achievable FLOP/s
  double u_half = 0, v_half = 0;
  int rows = 0;     // rows it was fitted on
  double mape = 0;  // mean |R - t| / t over those rows

  double flops_per_s(double u, double v) const {
    return f_max * (u / (u + u_half)) * (v / (v + v_half));
  }
  double time(double flops, double bytes, double u, double v, double items = 0) const;
  double bandwidth() const { return mem_s_per_byte > 0 ? 1 / mem_s_per_byte : 0; }
  // The same efficiency curves on another GPU: FLOP/s scaled by `flops_ratio`, bandwidth by
  // `bandwidth_ratio`, latencies kept.
  RooflineFit scaled(double flops_ratio, double bandwidth_ratio) const;
};

struct FitRow {
  double flops = 0, bytes = 0, u = 1, v = 1, t = 0, items = 0;
};

// Least-squares fit of a RooflineFit (`compute` false: memory part only).
// - Memory part: t = t0 + a * items + s * bytes with non-negative coefficients, weighted by 1/t
//   (relative error), on the rows the current model calls memory-dominated.
// - Compute part: over the rows whose time beyond t0 is compute-dominated, ln f_max in closed form
//   (the mean of ln(flops / (t - t0)) - ln of the two efficiency factors) for each (u_half,
//   v_half) of a grid of powers of two; the pair kept minimises the whole model's mean relative
//   error over all rows (so the curve never makes memory-bound rows look compute-bound).
// - Four rounds of reassigning rows to regimes.
// - Rows with bytes < min_bytes (operands that fit in L2, timed cache-hot) are left out when at
//   least 20 rows remain.
// REQUIRES: rows with t > 0. Never NaN.
RooflineFit fit_roofline(const std::vector<FitRow>& rows, bool compute, double min_bytes = 0);

// Reference times of the operator tables for a given fit (the tables use their own fit; the
// profiled model evaluates them with fits carried over from a donor GPU).
// GEMM D[m x n] = X[m x k] W[n x k]^T: flops 2mnk, bytes n k wb + 2 (m k + m n), u = m, v = n k.
double gemm_reference(const RooflineFit& f, double m, double n, double k, double weight_bytes);
// Prefill attention of `batch` sequences, q new tokens after `prefix` cached ones, per layer.
double prefill_reference(const RooflineFit& f, double heads, double kv_heads, double head_dim,
                         double batch, double q, double prefix, double kv_bytes, bool causal);
// Decode attention of `batch` sequences over `context` keys, per layer.
double decode_reference(const RooflineFit& f, double heads, double kv_heads, double head_dim,
                        double batch, double context, double kv_bytes);

// ---------------------------------------------------------------------------------------------
// Bracket of x on a sorted axis: x lies in [a[i], a[i+1]] at weight w of a[i+1]; outside the axis
// the nearest end is used (w = 0 or 1) and `outside` is set. A one-value axis gives i = 0, w = 0.
struct Bracket {
  size_t i = 0;
  double w = 0;
  bool outside = false;
};
Bracket bracket(const std::vector<double>& axis, double x);

// 1-D residual curve over x = ln(coordinate).
struct CurvePoint {
  double x = 0;        // ln coordinate
  double log_t = 0;    // ln measured time
  double log_ref = 0;  // ln R at the point
};

class Curve {
 public:
  Curve() = default;
  // Duplicate x are merged (mean of ln t). REQUIRES: at least one point.
  explicit Curve(std::vector<CurvePoint> points);

  // Residual ln(t/R) at x. `log_ref` is ln R at x for this curve's own configuration (used to clamp
  // into the bracketing points' time range). Sets *extrapolated outside [x_0, x_last].
  double residual(double x, double log_ref, bool* extrapolated) const;
  // Residual at point i predicted from the other points (leave-one-out).
  double residual_without(size_t i, bool* extrapolated) const;

  size_t size() const { return x_.size(); }
  double x(size_t i) const { return x_[i]; }
  double log_t(size_t i) const { return lt_[i]; }
  double log_ref(size_t i) const { return lt_[i] - r_[i]; }
  double x_min() const { return x_.front(); }
  double x_max() const { return x_.back(); }

 private:
  double interpolate(size_t lo, size_t hi, double x, double log_ref) const;
  std::vector<double> x_, lt_, r_;
};

// Residual grid in 1 to 3 dimensions over log-coordinates, on the rectilinear grid spanned by the
// points' distinct coordinates. Nodes without a usable point are filled once, from measured nodes
// only: along each axis (in `axis_order`) whose line through the node has measured nodes on both
// sides, the residual is interpolated linearly between the nearest two; the node takes the first
// such estimate (Fill::kFirst) or the mean of all of them (Fill::kAverage) -- "interpolated". When
// no axis brackets it, it holds the residual of the nearest measured node along the first axis (in
// `axis_order`) that has one -- "extrapolated"; nodes with no measured node on any of their axis
// lines (sparse grids) then hold the nearest node filled by an earlier pass, along their axis
// lines. A query is multilinear over its cell's nodes, clamped into the range of their times when
// inside the grid; outside, the coordinates are clamped to the grid (edge residual held,
// extrapolated).
class Grid {
 public:
  static constexpr int kMaxDims = 3;
  using Coord = std::array<double, kMaxDims>;
  struct Point {
    Coord x{};  // log-coordinates (first `dims` used)
    double log_t = 0, log_ref = 0;
  };
  using LogRef = std::function<double(const Coord& x)>;
  // kFirst: the first bracketing axis in axis_order; kAverage: mean over all bracketing axes.
  enum class Fill { kFirst, kAverage };

  Grid() = default;
  // `usable[i]` false leaves point i out (e.g. cache-hot rows); empty = all usable. `log_ref`
  // evaluates ln R of this grid's configuration anywhere (used while filling).
  // REQUIRES: 1 <= dims <= 3, at least one usable point, axis_order a permutation of 0..dims-1.
  Grid(int dims, const std::vector<Point>& points, const std::vector<bool>& usable,
       const LogRef& log_ref, std::array<int, kMaxDims> axis_order, Fill fill_mode);

  // t(x) / R(x) for this grid's configuration: exp of the multilinear residual, with t clamped into
  // the range of the cell's node times when x is inside the grid. `ref` = R(x) for this grid's
  // configuration. Sets *extrapolated when x is outside the grid or a node it uses was filled by
  // extrapolation.
  double ratio(const Coord& x, double ref, bool* extrapolated) const;
  // The grid with dimension `dim` fixed at log-coordinate x (multilinear along it; outside its
  // range the edge is held and the slice's nodes count as extrapolated): the same predictions as
  // ratio() at that coordinate, with one dimension less to search. REQUIRES: dims >= 2.
  Grid slice(int dim, double x) const;
  // Residual at usable input point `p` from the other measured nodes (leave-one-out).
  double residual_without(size_t p, bool* extrapolated) const;

  bool empty() const { return nodes_ == 0; }
  const std::vector<double>& axis(int d) const { return axes_[static_cast<size_t>(d)]; }

 private:
  enum State : uint8_t { kMissing, kMeasured, kFilledInterpolated, kFilledExtrapolated };
  // Fill value of `node` from measured nodes other than `skip` (NaN when no axis line through it
  // has one).
  double fill(size_t node, size_t skip, bool* extrapolated) const;
  // Residual of the nearest usable node on the node's axis lines (first axis in order that has
  // one): measured nodes only, or any non-missing node. NaN when none.
  double hold_nearest(size_t node, size_t skip, bool measured_only) const;

  int dims_ = 0;
  std::array<std::vector<double>, kMaxDims> axes_;
  std::array<size_t, kMaxDims> stride_{};
  size_t nodes_ = 0;
  std::array<int, kMaxDims> order_{0, 1, 2};
  Fill fill_mode_ = Fill::kFirst;
  std::vector<double> r_;  // residual ln(t / R) per node
  std::vector<double> t_;  // time per node (clamp bounds)
  std::vector<uint8_t> state_;
  std::vector<size_t> point_node_;  // input point -> node
};

// A prediction and where it came from.
struct Lookup {
  double seconds = 0;
  bool extrapolated = false;
};

// ---------------------------------------------------------------------------------------------
// GEMM table of one dtype (one profile): a 3-D Grid over (ln m, ln n, ln k).
//  - exact (n, k) present: piecewise-linear in ln m along that shape's m-curve;
//  - (n, k) absent but inside the (n, k) grid: bilinear in (ln n, ln k) over the bracketing
//    shapes' m-curves (a shape of the grid that was not measured is a filled node);
//  - outside the m range or the (n, k) hull: edge residual held (extrapolated).
// Missing nodes (and a left-out point) are filled by averaging the interpolations along m, n and k
// that bracket them. R: the GEMM roofline fitted to the table's rows whose operands exceed L2
// (u = m, v = n*k).
class GemmTable {
 public:
  GemmTable() = default;
  // `rows` all of one dtype; `weight_bytes` per weight element of that dtype. `l2_bytes` (0 =
  // unknown): the roofline is fitted on rows whose operands exceed L2 (the others were timed with
  // their operands cache-resident).
  GemmTable(const std::vector<profiles::GemmRow>& rows, double weight_bytes, int64_t l2_bytes = 0);

  Lookup predict(double m, double n, double k) const;
  double reference_time(double m, double n, double k) const;
  const RooflineFit& fit() const { return fit_; }
  double weight_bytes() const { return weight_bytes_; }
  bool empty() const { return grid_.empty(); }
  // True when (n, k) is a measured shape.
  bool has_shape(double n, double k) const;

  // Leave-one-out over the table's distinct points.
  size_t points() const { return loo_.size(); }
  double measured(size_t p) const { return loo_[p].seconds; }
  Lookup predict_without(size_t p) const;

  // Distinct (m, n, k) points left out of the table: slower than a larger-m point of the same
  // (n, k) by more than kSlowerThanLargerM.
  static constexpr double kSlowerThanLargerM = 1.5;
  size_t slower_than_larger_m() const { return slower_than_larger_m_; }

 private:
  double bytes(double m, double n, double k) const;
  size_t slower_than_larger_m_ = 0;
  double weight_bytes_ = 2;
  RooflineFit fit_;
  Grid grid_;
  std::vector<std::pair<int64_t, int64_t>> shapes_;  // sorted measured (n, k)
  struct LooPoint {
    double m = 0, n = 0, k = 0, seconds = 0;
  };
  std::vector<LooPoint> loo_;
};

// Attention head configuration of one GPU.
struct HeadConfig {
  int heads = 0, kv_heads = 0, head_dim = 0;
};

// Attention rows are grouped into families of equal (kv_heads, head_dim); within a family the
// number of query heads is a grid axis. A query whose kv_heads has no family uses the family with
// the same head_dim and the nearest kv_heads (in ln), with the reference R evaluated for the
// query's own heads (a transfer: flagged extrapolated).
struct AttentionFamily {
  int kv_heads = 0, head_dim = 0;
  auto key() const { return std::tie(kv_heads, head_dim); }
  bool operator<(const AttentionFamily& o) const { return key() < o.key(); }
  bool operator==(const AttentionFamily& o) const { return key() == o.key(); }
};

// ---------------------------------------------------------------------------------------------
// Prefill attention table of one (dtype, kv_dtype, causal) family. Per (kv_heads, head_dim) and
// prefix level, a 3-D Grid over (ln batch, ln q_tokens, ln heads); missing nodes filled along
// heads, then batch, then q (the first bracketing axis).
//  - Uniform batch, no prefix: T(B, q) from the grid.
//  - Prefix rows exist (levels p_0 = 0 < p_1 < ...): T at each bracketing level, linear in the
//    prefix between levels; beyond the last level its residual is held with R at the true
//    prefix (extrapolated).
//  - No prefix rows: AIConfigurator's rule T(B, k) * (k^2 - c^2) / k^2 (k = c + q keys).
// R: flops = 4 hd H B (q c + q (q+1)/2) causal (q (c+q) bidirectional),
//    bytes = B ((c+q) 2 kvh hd kvb + q 2 H hd 2), u = q, v = B H; fitted to the whole table.
class PrefillTable {
 public:
  PrefillTable() = default;
  PrefillTable(const std::vector<profiles::AttentionPrefillRow>& rows, bool causal);

  // `batch` sequences of `q` new tokens after `prefix` cached ones (q, prefix may be fractional
  // equivalents of a mixed batch). REQUIRES: covers(h). Equals bind(h).predict(...).
  Lookup predict(const HeadConfig& h, double batch, double q, double prefix) const;

  struct Level;
  // The table resolved for one head configuration: its family looked up and each prefix level's
  // grid sliced at ln(heads) (Grid::slice), so a prediction is a 2-D lookup. Keeps a pointer to the
  // table.
  class Bound {
   public:
    Lookup predict(double batch, double q, double prefix) const;
    bool has_prefix_rows() const {
      return levels_.size() > 1 || (levels_.size() == 1 && levels_[0].prefix > 0);
    }
    bool transferred() const { return transferred_; }

   private:
    friend class PrefillTable;
    struct Slice {
      double prefix = 0;
      Grid grid;  // 2-D over (ln batch, ln q)
    };
    Lookup at(const Slice& s, double batch, double q, double prefix) const;
    const PrefillTable* table_ = nullptr;
    HeadConfig h_, own_;
    bool transferred_ = false;
    std::vector<Slice> levels_;
  };
  // REQUIRES: covers(h).
  Bound bind(const HeadConfig& h) const;
  bool has_prefix_rows(const HeadConfig& h) const;
  bool covers(const HeadConfig& h) const;  // some family with this head_dim
  double reference_time(const HeadConfig& h, double batch, double q, double prefix) const;
  const RooflineFit& fit() const { return fit_; }
  bool empty() const { return families_.empty(); }
  bool causal() const { return causal_; }
  double kv_bytes() const { return kv_bytes_; }
  // True when a family with exactly h.kv_heads and h.head_dim was measured.
  bool has_family(const HeadConfig& h) const {
    return families_.count(AttentionFamily{h.kv_heads, h.head_dim}) > 0;
  }

  size_t points() const { return loo_.size(); }
  double measured(size_t p) const { return loo_[p].seconds; }
  Lookup predict_without(size_t p) const;

 public:
  struct Level {
    double prefix = 0;
    Grid grid;  // 3-D over (ln batch, ln q, ln heads)
  };

 private:
  const std::vector<Level>* family(const HeadConfig& h, AttentionFamily* chosen) const;
  double kv_bytes_ = 2;
  bool causal_ = true;
  RooflineFit fit_;
  std::map<AttentionFamily, std::vector<Level>> families_;
  struct LooPoint {
    AttentionFamily f;
    size_t level = 0, index = 0;
    double heads = 0, batch = 0, q = 0, prefix = 0, seconds = 0;
  };
  std::vector<LooPoint> loo_;
};

// ---------------------------------------------------------------------------------------------
// Decode attention table of one (dtype, kv_dtype) family. Per (kv_heads, head_dim) a 3-D Grid over
// (ln batch, ln(batch * context), ln heads) -- total KV tokens as the second axis, since the time
// depends mostly on the KV bytes read; this also makes the L2 and memory limits grid columns.
// Missing nodes filled along the KV axis, then batch, then heads. Cache-hot guard: rows whose KV
// working set 2 * batch * context * kvh * hd * kvb is below the L2 size were timed with the KV in
// L2 (they reuse one cache) and are optimistic. A query whose KV exceeds L2 is answered by a grid
// built without them; every prediction is floored at KV bytes / floor_bandwidth, the highest KV
// read rate among rows with KV >= 4 x L2 (>= L2 when none; capped at `peak_bandwidth` when given).
// R: t0 + a * batch + bytes / BW fitted on the large-KV rows.
class DecodeTable {
 public:
  DecodeTable() = default;
  // l2_bytes 0 = unknown (no guard); peak_bandwidth 0 = unknown.
  DecodeTable(const std::vector<profiles::AttentionDecodeRow>& rows, int64_t l2_bytes,
              double peak_bandwidth);

  // REQUIRES: covers(h). Equals bind(h).predict(...).
  Lookup predict(const HeadConfig& h, double batch, double context) const;

  // The table resolved for one head configuration (family looked up, grids sliced at ln(heads)).
  // Keeps a pointer to the table.
  class Bound {
   public:
    Lookup predict(double batch, double context) const;
    bool transferred() const { return transferred_; }

   private:
    friend class DecodeTable;
    const DecodeTable* table_ = nullptr;
    HeadConfig h_, own_;
    bool transferred_ = false, has_cold_ = false;
    double kv_per_token_ = 0;  // KV bytes per (sequence x context token), own configuration
    Grid all_, cold_;          // 2-D over (ln batch, ln(batch * context))
  };
  // REQUIRES: covers(h).
  Bound bind(const HeadConfig& h) const;

  bool covers(const HeadConfig& h) const;
  double kv_bytes(const HeadConfig& h, double batch, double context) const;
  double reference_time(const HeadConfig& h, double batch, double context) const;
  double floor_bandwidth() const { return floor_bw_; }
  const RooflineFit& fit() const { return fit_; }
  bool empty() const { return families_.empty(); }
  int64_t l2_bytes() const { return l2_bytes_; }
  double kv_elem_bytes() const { return kv_elem_bytes_; }
  bool has_family(const HeadConfig& h) const {
    return families_.count(AttentionFamily{h.kv_heads, h.head_dim}) > 0;
  }
  // Rows whose KV fits in L2 (timed cache-hot).
  size_t cache_hot_rows() const { return hot_rows_; }

  size_t points() const { return loo_.size(); }
  double measured(size_t p) const { return loo_[p].seconds; }
  bool cache_hot(size_t p) const { return loo_[p].hot; }
  Lookup predict_without(size_t p) const;

 private:
  struct Group {
    Grid all, cold;
    bool has_cold = false;
  };
  const Group* family(const HeadConfig& h, AttentionFamily* chosen) const;
  Lookup finish(const HeadConfig& h, double batch, double context, double ratio,
                bool extrapolated) const;
  double kv_elem_bytes_ = 2;
  int64_t l2_bytes_ = 0;
  double floor_bw_ = 0;
  RooflineFit fit_;
  std::map<AttentionFamily, Group> families_;
  size_t hot_rows_ = 0;
  struct LooPoint {
    AttentionFamily f;
    size_t index = 0;  // point index in the family's grids
    double heads = 0, batch = 0, context = 0, seconds = 0;
    bool hot = false;
  };
  std::vector<LooPoint> loo_;
};

// ---------------------------------------------------------------------------------------------
// 1-D tables keyed by a configuration string, each a Curve over ln(size) with its own fitted
// reference t0 + s * size: collectives (key op/dtype/num_gpus/nodes, size = message bytes), MoE
// layers (key = dtype/shape/tp/ep/distribution, size = tokens), Vidur elementwise operators
// (key = model/op/tp, size = tokens).
class CurveTable {
 public:
  struct Row {
    std::string key;
    double size = 0;
    double seconds = 0;
  };
  CurveTable() = default;
  explicit CurveTable(const std::vector<Row>& rows);

  bool has(const std::string& key) const { return curves_.count(key) > 0; }
  // REQUIRES: has(key).
  Lookup predict(const std::string& key, double size) const;
  double max_size(const std::string& key) const;
  double min_size(const std::string& key) const;
  std::vector<std::string> keys() const;

  size_t points() const { return loo_.size(); }
  double measured(size_t p) const;
  const std::string& point_key(size_t p) const { return loo_[p].first; }
  Lookup predict_without(size_t p) const;

 private:
  struct Entry {
    RooflineFit fit;
    Curve curve;
  };
  std::map<std::string, Entry> curves_;
  std::vector<std::pair<std::string, size_t>> loo_;
};

// Key strings of the CurveTable families.
std::string collective_key(const std::string& op, const std::string& dtype, int num_gpus,
                           int nodes);
std::string moe_key(const profiles::MoeRow& r);  // dtype/hidden/inter/topk/experts/tp/ep/dist
std::string elementwise_key(const std::string& model, const std::string& op, int tp);
// Lower-case model name without an org prefix, "meta-" prefix or "-hf" suffix, so that Vidur's
// "meta-llama/Meta-Llama-3-8B" and the catalog's "llama-3-8b" compare equal.
std::string normalized_model_name(const std::string& name);

}  // namespace servesim::models::interp
