#include "models/cost/profile_interpolation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <Eigen/Dense>

namespace servesim::models::interp {
namespace {

constexpr size_t kNone = std::numeric_limits<size_t>::max();
// Two log-coordinates closer than this are the same grid value.
constexpr double kSameCoordinate = 1e-9;
// Rows with a KV working set of at least this many L2 sizes fit the decode bandwidth and floor.
constexpr double kLargeKvL2Multiple = 4;

// Distinct sorted values (merging values closer than kSameCoordinate).
std::vector<double> distinct(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::vector<double> out;
  for (double x : v) {
    if (out.empty() || x - out.back() > kSameCoordinate) {
      out.push_back(x);
    }
  }
  return out;
}

size_t index_of(const std::vector<double>& axis, double x) {
  const auto it = std::lower_bound(axis.begin(), axis.end(), x - kSameCoordinate);
  return static_cast<size_t>(it - axis.begin());
}

// Weighted least squares of t = t0 + a * items + s * bytes over `idx`, weights 1/t (relative
// error), all coefficients >= 0 (a negative one is dropped and the rest refitted).
void fit_memory(const std::vector<FitRow>& rows, const std::vector<size_t>& idx, double* t0,
                double* a, double* s) {
  double bscale = 0, iscale = 0;
  for (size_t i : idx) {
    bscale = std::max(bscale, rows[i].bytes);
    iscale = std::max(iscale, rows[i].items);
  }
  *t0 = 0;
  *a = 0;
  *s = 0;
  if (idx.empty()) {
    return;
  }
  std::array<bool, 3> on = {true, iscale > 0, bscale > 0};
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::vector<int> cols;
    for (int c = 0; c < 3; ++c) {
      if (on[static_cast<size_t>(c)]) {
        cols.push_back(c);
      }
    }
    if (cols.empty()) {
      break;
    }
    Eigen::MatrixXd x(static_cast<long>(idx.size()), static_cast<long>(cols.size()));
    Eigen::VectorXd y(static_cast<long>(idx.size()));
    for (size_t r = 0; r < idx.size(); ++r) {
      const FitRow& row = rows[idx[r]];
      const double w = 1 / row.t;
      const std::array<double, 3> v = {1, iscale > 0 ? row.items / iscale : 0,
                                       bscale > 0 ? row.bytes / bscale : 0};
      for (size_t c = 0; c < cols.size(); ++c) {
        x(static_cast<long>(r), static_cast<long>(c)) = w * v[static_cast<size_t>(cols[c])];
      }
      y(static_cast<long>(r)) = 1;  // w * t
    }
    const Eigen::VectorXd coef = x.colPivHouseholderQr().solve(y);
    bool negative = false;
    std::array<double, 3> got = {0, 0, 0};
    for (size_t c = 0; c < cols.size(); ++c) {
      got[static_cast<size_t>(cols[c])] = coef(static_cast<long>(c));
      if (!(coef(static_cast<long>(c)) >= 0)) {
        negative = true;
      }
    }
    if (!negative) {
      *t0 = got[0];
      *a = iscale > 0 ? got[1] / iscale : 0;
      *s = bscale > 0 ? got[2] / bscale : 0;
      return;
    }
    // Drop the most negative coefficient (never the only remaining one) and refit.
    int worst = -1;
    for (size_t c = 0; c < cols.size(); ++c) {
      if (worst < 0 || got[static_cast<size_t>(cols[c])] < got[static_cast<size_t>(worst)]) {
        worst = cols[c];
      }
    }
    on[static_cast<size_t>(worst)] = false;
  }
  // Fallback: the smallest time as a constant latency.
  double tmin = std::numeric_limits<double>::infinity();
  for (size_t i : idx) {
    tmin = std::min(tmin, rows[i].t);
  }
  *t0 = tmin;
}

double mean_abs_rel_error(const RooflineFit& f, const std::vector<FitRow>& rows) {
  if (rows.empty()) {
    return 0;
  }
  double sum = 0;
  for (const FitRow& r : rows) {
    sum += std::abs(f.time(r.flops, r.bytes, r.u, r.v, r.items) - r.t) / r.t;
  }
  return sum / static_cast<double>(rows.size());
}

// Grid search of (u_half, v_half) over powers of two spanning the data. For each pair, ln f_max in
// closed form (the mean over the compute rows `idx`); the pair kept is the one whose whole model
// (with the current memory part) has the smallest mean |R / t - 1| over all rows (subsampled to at
// most kObjectiveRows), so that the efficiency curve never makes memory-bound rows look
// compute-bound.
constexpr size_t kObjectiveRows = 1500;

void fit_compute(const std::vector<FitRow>& rows, const std::vector<size_t>& idx, RooflineFit* f) {
  double u_lo = std::numeric_limits<double>::infinity(), u_hi = 0, v_lo = u_lo, v_hi = 0;
  double mean_lrate = 0;
  for (size_t i : idx) {
    const FitRow& r = rows[i];
    mean_lrate += std::log(r.flops / (r.t - f->t0_s));
    u_lo = std::min(u_lo, r.u);
    u_hi = std::max(u_hi, r.u);
    v_lo = std::min(v_lo, r.v);
    v_hi = std::max(v_hi, r.v);
  }
  const double n = static_cast<double>(idx.size());
  mean_lrate /= n;
  const auto candidates = [](double lo, double hi) {
    std::vector<double> c = {0};
    for (double x = std::exp2(std::floor(std::log2(lo)) - 2); x <= hi * 4; x *= 2) {
      c.push_back(x);
    }
    return c;
  };
  // Mean of ln(x / (x + half)) over the compute rows, per candidate half.
  const auto means = [&](const std::vector<double>& halves, double FitRow::*field) {
    std::vector<double> out;
    for (double h : halves) {
      double m = 0;
      for (size_t i : idx) {
        const double x = rows[i].*field;
        m += std::log(x / (x + h));
      }
      out.push_back(m / n);
    }
    return out;
  };
  const std::vector<double> us = candidates(u_lo, u_hi), vs = candidates(v_lo, v_hi);
  const std::vector<double> mu = means(us, &FitRow::u), mv = means(vs, &FitRow::v);
  const size_t step = std::max<size_t>(1, rows.size() / kObjectiveRows);
  // The objective's rows and the parts of RooflineFit::time that do not depend on f_max: each
  // row's memory time and its efficiency factors u / (u + u_half) and v / (v + v_half) for every
  // candidate half, computed once with the same expressions (so the objective is the one
  // RooflineFit::time gives, bit for bit).
  std::vector<const FitRow*> sample;
  for (size_t i = 0; i < rows.size(); i += step) sample.push_back(&rows[i]);
  const size_t n_sample = sample.size();
  std::vector<double> memory(n_sample), u_factor(us.size() * n_sample),
      v_factor(vs.size() * n_sample);
  for (size_t k = 0; k < n_sample; ++k) {
    const FitRow& r = *sample[k];
    memory[k] = r.items * f->item_s + r.bytes * f->mem_s_per_byte;
    for (size_t a = 0; a < us.size(); ++a) u_factor[a * n_sample + k] = r.u / (r.u + us[a]);
    for (size_t b = 0; b < vs.size(); ++b) v_factor[b * n_sample + k] = r.v / (r.v + vs[b]);
  }
  double best = std::numeric_limits<double>::infinity();
  RooflineFit trial = *f;
  trial.compute = true;
  for (size_t a = 0; a < us.size(); ++a) {
    const double* uf = &u_factor[a * n_sample];
    for (size_t b = 0; b < vs.size(); ++b) {
      const double* vf = &v_factor[b * n_sample];
      trial.u_half = us[a];
      trial.v_half = vs[b];
      trial.f_max = std::exp(mean_lrate - mu[a] - mv[b]);
      double objective = 0;
      for (size_t k = 0; k < n_sample; ++k) {
        const FitRow& r = *sample[k];
        const double work = r.flops / (trial.f_max * uf[k] * vf[k]);
        objective += std::abs((trial.t0_s + std::max(memory[k], work)) / r.t - 1);
      }
      if (objective < best) {
        best = objective;
        *f = trial;
      }
    }
  }
}

}  // namespace

double table_dtype_bytes(const std::string& dtype) {
  if (dtype == "fp8_e4m3" || dtype == "fp8" || dtype == "fp8_rowwise" || dtype == "fp8_block" ||
      dtype == "int8") {
    return 1;
  }
  if (dtype == "nvfp4") {
    return 0.5625;
  }
  return 2;
}

// ---------------------------------------------------------------------------------------------
// RooflineFit

double RooflineFit::time(double flops, double bytes, double u, double v, double items) const {
  const double memory = items * item_s + bytes * mem_s_per_byte;
  const double work = compute ? flops / flops_per_s(u, v) : 0;
  return t0_s + std::max(memory, work);
}

RooflineFit RooflineFit::scaled(double flops_ratio, double bandwidth_ratio) const {
  RooflineFit f = *this;
  f.f_max *= flops_ratio;
  f.mem_s_per_byte /= bandwidth_ratio;
  f.item_s /= bandwidth_ratio;
  return f;
}

RooflineFit fit_roofline(const std::vector<FitRow>& all_rows, bool compute, double min_bytes) {
  std::vector<FitRow> cold;
  if (min_bytes > 0) {
    for (const FitRow& r : all_rows) {
      if (r.bytes >= min_bytes) {
        cold.push_back(r);
      }
    }
  }
  const std::vector<FitRow>& rows = cold.size() >= 20 ? cold : all_rows;
  RooflineFit f;
  f.rows = static_cast<int>(rows.size());
  if (rows.empty()) {
    return f;
  }
  std::vector<size_t> all(rows.size());
  std::iota(all.begin(), all.end(), 0);
  if (!compute) {
    fit_memory(rows, all, &f.t0_s, &f.item_s, &f.mem_s_per_byte);
    f.mape = mean_abs_rel_error(f, rows);
    return f;
  }
  // Initial memory regime: the 30 % of rows with the lowest arithmetic intensity.
  std::vector<size_t> by_intensity = all;
  std::sort(by_intensity.begin(), by_intensity.end(), [&](size_t a, size_t b) {
    return rows[a].flops * rows[b].bytes < rows[b].flops * rows[a].bytes;
  });
  std::vector<size_t> mem(
      by_intensity.begin(),
      by_intensity.begin() + static_cast<long>(std::max<size_t>(1, rows.size() * 3 / 10)));
  fit_memory(rows, mem, &f.t0_s, &f.item_s, &f.mem_s_per_byte);
  for (int round = 0; round < 4; ++round) {
    std::vector<size_t> work;
    mem.clear();
    for (size_t i : all) {
      const FitRow& r = rows[i];
      const double rest = r.t - f.t0_s;
      const double memory = r.items * f.item_s + r.bytes * f.mem_s_per_byte;
      const bool compute_dominated =
          !f.compute ? rest > 2 * memory : r.flops / f.flops_per_s(r.u, r.v) > memory;
      // Compute rows must spend at least half their time beyond t0, so that flops / (t - t0) is
      // well conditioned.
      if (compute_dominated && rest >= 0.5 * r.t && r.flops > 0) {
        work.push_back(i);
      } else {
        mem.push_back(i);
      }
    }
    if (mem.size() >= 3) {
      fit_memory(rows, mem, &f.t0_s, &f.item_s, &f.mem_s_per_byte);
    }
    std::vector<size_t> used;
    for (size_t i : work) {
      if (rows[i].t - f.t0_s >= 0.5 * rows[i].t) {
        used.push_back(i);
      }
    }
    if (used.size() < 3) {
      break;
    }
    fit_compute(rows, used, &f);
  }
  f.mape = mean_abs_rel_error(f, rows);
  return f;
}

// ---------------------------------------------------------------------------------------------
// Bracket, Curve, Grid

Bracket bracket(const std::vector<double>& axis, double x) {
  Bracket b;
  const size_t n = axis.size();
  if (n <= 1) {
    b.outside = n == 1 && std::abs(x - axis[0]) > kSameCoordinate;
    return b;
  }
  if (x <= axis[0]) {
    b.outside = x < axis[0] - kSameCoordinate;
    return b;
  }
  if (x >= axis[n - 1]) {
    b.i = n - 2;
    b.w = 1;
    b.outside = x > axis[n - 1] + kSameCoordinate;
    return b;
  }
  const auto it = std::upper_bound(axis.begin(), axis.end(), x);
  b.i = static_cast<size_t>(it - axis.begin()) - 1;
  b.w = (x - axis[b.i]) / (axis[b.i + 1] - axis[b.i]);
  return b;
}

Curve::Curve(std::vector<CurvePoint> points) {
  if (points.empty()) {
    throw std::invalid_argument("a profile curve needs at least one point");
  }
  std::sort(points.begin(), points.end(),
            [](const CurvePoint& a, const CurvePoint& b) { return a.x < b.x; });
  size_t i = 0;
  while (i < points.size()) {
    size_t j = i;
    double lt = 0, lr = 0;
    while (j < points.size() && points[j].x - points[i].x <= kSameCoordinate) {
      lt += points[j].log_t;
      lr += points[j].log_ref;
      ++j;
    }
    const double n = static_cast<double>(j - i);
    x_.push_back(points[i].x);
    lt_.push_back(lt / n);
    r_.push_back((lt - lr) / n);
    i = j;
  }
}

double Curve::interpolate(size_t lo, size_t hi, double x, double log_ref) const {
  const double w = (x - x_[lo]) / (x_[hi] - x_[lo]);
  const double r = r_[lo] + w * (r_[hi] - r_[lo]);
  const double lt = std::clamp(log_ref + r, std::min(lt_[lo], lt_[hi]), std::max(lt_[lo], lt_[hi]));
  return lt - log_ref;
}

double Curve::residual(double x, double log_ref, bool* extrapolated) const {
  const size_t n = x_.size();
  if (x < x_[0] + kSameCoordinate || n == 1) {
    *extrapolated |= x < x_[0] - kSameCoordinate || (n == 1 && x > x_[0] + kSameCoordinate);
    return r_[0];
  }
  if (x > x_[n - 1] - kSameCoordinate) {
    *extrapolated |= x > x_[n - 1] + kSameCoordinate;
    return r_[n - 1];
  }
  const size_t hi = static_cast<size_t>(std::upper_bound(x_.begin(), x_.end(), x) - x_.begin());
  return interpolate(hi - 1, hi, x, log_ref);
}

double Curve::residual_without(size_t i, bool* extrapolated) const {
  const size_t n = x_.size();
  if (n == 1) {
    *extrapolated = true;
    return 0;
  }
  if (i == 0 || i == n - 1) {
    *extrapolated = true;
    return i == 0 ? r_[1] : r_[n - 2];
  }
  return interpolate(i - 1, i + 1, x_[i], lt_[i] - r_[i]);
}

Grid::Grid(int dims, const std::vector<Point>& points, const std::vector<bool>& usable,
           const LogRef& log_ref, std::array<int, kMaxDims> axis_order, Fill fill_mode)
    : dims_(dims), order_(axis_order), fill_mode_(fill_mode) {
  if (dims < 1 || dims > kMaxDims) {
    throw std::invalid_argument("a profile grid has 1 to 3 dimensions");
  }
  std::array<std::vector<double>, kMaxDims> coords;
  for (size_t p = 0; p < points.size(); ++p) {
    if (usable.empty() || usable[p]) {
      for (int d = 0; d < dims_; ++d) {
        coords[static_cast<size_t>(d)].push_back(points[p].x[static_cast<size_t>(d)]);
      }
    }
  }
  if (coords[0].empty()) {
    throw std::invalid_argument("a profile grid needs at least one usable point");
  }
  nodes_ = 1;
  for (int d = dims_ - 1; d >= 0; --d) {
    const auto du = static_cast<size_t>(d);
    axes_[du] = distinct(coords[du]);
    stride_[du] = nodes_;
    nodes_ *= axes_[du].size();
  }
  r_.assign(nodes_, 0);
  t_.assign(nodes_, 0);
  state_.assign(nodes_, kMissing);
  std::vector<double> lt(nodes_, 0), lr(nodes_, 0), count(nodes_, 0);
  point_node_.assign(points.size(), kNone);
  for (size_t p = 0; p < points.size(); ++p) {
    if (!(usable.empty() || usable[p])) {
      continue;
    }
    size_t nd = 0;
    for (int d = 0; d < dims_; ++d) {
      const auto du = static_cast<size_t>(d);
      nd += index_of(axes_[du], points[p].x[du]) * stride_[du];
    }
    point_node_[p] = nd;
    lt[nd] += points[p].log_t;
    lr[nd] += points[p].log_ref;
    count[nd] += 1;
  }
  for (size_t nd = 0; nd < nodes_; ++nd) {
    if (count[nd] > 0) {
      r_[nd] = (lt[nd] - lr[nd]) / count[nd];
      t_[nd] = std::exp(lt[nd] / count[nd]);
      state_[nd] = kMeasured;
    }
  }
  const auto node_coord = [&](size_t nd) {
    Coord x{};
    for (int d = 0; d < dims_; ++d) {
      const auto du = static_cast<size_t>(d);
      x[du] = axes_[du][(nd / stride_[du]) % axes_[du].size()];
    }
    return x;
  };
  // Pass 1: from measured nodes on the node's axis lines.
  std::vector<size_t> unresolved;
  for (size_t nd = 0; nd < nodes_; ++nd) {
    if (state_[nd] != kMissing) {
      continue;
    }
    bool extrapolated = false;
    const double r = fill(nd, kNone, &extrapolated);
    if (std::isnan(r)) {
      unresolved.push_back(nd);
      continue;
    }
    r_[nd] = r;
    t_[nd] = std::exp(log_ref(node_coord(nd)) + r);
    state_[nd] = extrapolated ? kFilledExtrapolated : kFilledInterpolated;
  }
  // Later passes: nodes with no measured node on any axis line hold the nearest node resolved by an
  // earlier pass along their axis lines (in axis order); a few passes reach every node.
  while (!unresolved.empty()) {
    std::vector<std::pair<size_t, double>> resolved;
    std::vector<size_t> still;
    for (size_t nd : unresolved) {
      const double r = hold_nearest(nd, kNone, false);
      if (std::isnan(r)) {
        still.push_back(nd);
      } else {
        resolved.emplace_back(nd, r);
      }
    }
    if (resolved.empty()) {
      break;  // unreachable: a grid spanned by its points connects every node to one
    }
    for (const auto& [nd, r] : resolved) {
      r_[nd] = r;
      t_[nd] = std::exp(log_ref(node_coord(nd)) + r);
      state_[nd] = kFilledExtrapolated;
    }
    unresolved = std::move(still);
  }
}

double Grid::hold_nearest(size_t nd, size_t skip, bool measured_only) const {
  for (int o = 0; o < dims_; ++o) {
    const auto d = static_cast<size_t>(order_[static_cast<size_t>(o)]);
    const std::vector<double>& axis = axes_[d];
    const long i = static_cast<long>((nd / stride_[d]) % axis.size());
    const size_t base = nd - static_cast<size_t>(i) * stride_[d];
    const auto usable = [&](long j) {
      const size_t n = base + static_cast<size_t>(j) * stride_[d];
      return n != skip && (measured_only ? state_[n] == kMeasured : state_[n] != kMissing);
    };
    long lo = -1, hi = -1;
    for (long j = i - 1; j >= 0; --j) {
      if (usable(j)) {
        lo = j;
        break;
      }
    }
    for (long j = i + 1; j < static_cast<long>(axis.size()); ++j) {
      if (usable(j)) {
        hi = j;
        break;
      }
    }
    if (lo < 0 && hi < 0) {
      continue;
    }
    long j = lo < 0 ? hi : lo;
    if (lo >= 0 && hi >= 0) {
      j = axis[static_cast<size_t>(i)] - axis[static_cast<size_t>(lo)] <=
                  axis[static_cast<size_t>(hi)] - axis[static_cast<size_t>(i)]
              ? lo
              : hi;
    }
    return r_[base + static_cast<size_t>(j) * stride_[d]];
  }
  return std::numeric_limits<double>::quiet_NaN();
}

double Grid::fill(size_t nd, size_t skip, bool* extrapolated) const {
  const auto measured = [&](size_t n) { return n != skip && state_[n] == kMeasured; };
  struct Neighbours {
    long lo = -1,
         hi = -1;  // axis indices of the nearest measured nodes below / above
  };
  std::array<Neighbours, kMaxDims> nb;
  double sum = 0;
  int estimates = 0;
  for (int o = 0; o < dims_; ++o) {
    const auto d = static_cast<size_t>(order_[static_cast<size_t>(o)]);
    const std::vector<double>& axis = axes_[d];
    const long i = static_cast<long>((nd / stride_[d]) % axis.size());
    const size_t base = nd - static_cast<size_t>(i) * stride_[d];
    Neighbours& n = nb[d];
    for (long j = i - 1; j >= 0; --j) {
      if (measured(base + static_cast<size_t>(j) * stride_[d])) {
        n.lo = j;
        break;
      }
    }
    for (long j = i + 1; j < static_cast<long>(axis.size()); ++j) {
      if (measured(base + static_cast<size_t>(j) * stride_[d])) {
        n.hi = j;
        break;
      }
    }
    if (n.lo >= 0 && n.hi >= 0) {
      const auto lo = static_cast<size_t>(n.lo), hi = static_cast<size_t>(n.hi);
      const double w = (axis[static_cast<size_t>(i)] - axis[lo]) / (axis[hi] - axis[lo]);
      const double est = (1 - w) * r_[base + lo * stride_[d]] + w * r_[base + hi * stride_[d]];
      if (fill_mode_ == Fill::kFirst) {
        return est;
      }
      sum += est;
      ++estimates;
    }
  }
  if (estimates > 0) {
    return sum / estimates;
  }
  // No axis brackets the node: hold the nearest measured node along the first axis (in order) that
  // has one; NaN when no axis line through the node has a measured node.
  *extrapolated = true;
  return hold_nearest(nd, skip, true);
}

double Grid::ratio(const Coord& x, double ref, bool* extrapolated) const {
  if (dims_ == 2 && axes_[0].size() > 1 && axes_[1].size() > 1) {
    // Bilinear fast path (the attention lookups of the cost model).
    const Bracket ba = bracket(axes_[0], x[0]);
    const Bracket bb = bracket(axes_[1], x[1]);
    const size_t n00 = ba.i * stride_[0] + bb.i * stride_[1];
    const size_t n01 = n00 + stride_[1], n10 = n00 + stride_[0], n11 = n10 + stride_[1];
    const double w00 = (1 - ba.w) * (1 - bb.w), w01 = (1 - ba.w) * bb.w, w10 = ba.w * (1 - bb.w),
                 w11 = ba.w * bb.w;
    const bool outside = ba.outside || bb.outside;
    const double r = w00 * r_[n00] + w01 * r_[n01] + w10 * r_[n10] + w11 * r_[n11];
    *extrapolated |= outside || (w00 > 0 && state_[n00] == kFilledExtrapolated) ||
                     (w01 > 0 && state_[n01] == kFilledExtrapolated) ||
                     (w10 > 0 && state_[n10] == kFilledExtrapolated) ||
                     (w11 > 0 && state_[n11] == kFilledExtrapolated);
    const double f = std::exp(r);
    if (outside || !(ref > 0)) {
      return f;
    }
    double lo = std::numeric_limits<double>::infinity(), hi = 0;
    const auto range = [&](double w, size_t n) {
      if (w > 0) {
        lo = std::min(lo, t_[n]);
        hi = std::max(hi, t_[n]);
      }
    };
    range(w00, n00);
    range(w01, n01);
    range(w10, n10);
    range(w11, n11);
    return std::clamp(ref * f, lo, hi) / ref;
  }
  std::array<Bracket, kMaxDims> br;
  bool outside = false;
  for (int d = 0; d < dims_; ++d) {
    const auto du = static_cast<size_t>(d);
    br[du] = bracket(axes_[du], x[du]);
    outside |= br[du].outside;
  }
  *extrapolated |= outside;
  double r = 0, lo = std::numeric_limits<double>::infinity(), hi = 0;
  const unsigned corners = 1u << dims_;
  for (unsigned c = 0; c < corners; ++c) {
    double w = 1;
    size_t nd = 0;
    bool skip = false;
    for (int d = 0; d < dims_; ++d) {
      const auto du = static_cast<size_t>(d);
      const bool upper = (c >> d) & 1u;
      if (axes_[du].size() == 1) {
        if (upper) {
          skip = true;
          break;
        }
        continue;
      }
      const double wd = upper ? br[du].w : 1 - br[du].w;
      if (wd <= 0) {
        skip = true;
        break;
      }
      w *= wd;
      nd += (br[du].i + (upper ? 1 : 0)) * stride_[du];
    }
    if (skip) {
      continue;
    }
    r += w * r_[nd];
    lo = std::min(lo, t_[nd]);
    hi = std::max(hi, t_[nd]);
    *extrapolated |= state_[nd] == kFilledExtrapolated;
  }
  const double f = std::exp(r);
  if (outside || !(ref > 0)) {
    return f;
  }
  return std::clamp(ref * f, lo, hi) / ref;
}

Grid Grid::slice(int dim, double x) const {
  if (dims_ < 2 || dim < 0 || dim >= dims_) {
    throw std::invalid_argument("Grid::slice needs a grid of 2 or 3 dimensions and a valid axis");
  }
  const auto fixed = static_cast<size_t>(dim);
  const Bracket b = bracket(axes_[fixed], x);
  Grid g;
  g.dims_ = dims_ - 1;
  g.fill_mode_ = fill_mode_;
  int k = 0;
  for (int d = 0; d < dims_; ++d) {
    if (d != dim) {
      g.axes_[static_cast<size_t>(k)] = axes_[static_cast<size_t>(d)];
      g.order_[static_cast<size_t>(k)] = k;
      ++k;
    }
  }
  g.nodes_ = 1;
  for (int d = g.dims_ - 1; d >= 0; --d) {
    const auto du = static_cast<size_t>(d);
    g.stride_[du] = g.nodes_;
    g.nodes_ *= g.axes_[du].size();
  }
  g.r_.assign(g.nodes_, 0);
  g.t_.assign(g.nodes_, 0);
  g.state_.assign(g.nodes_, kMeasured);
  const size_t n_fixed = axes_[fixed].size();
  for (size_t nd = 0; nd < g.nodes_; ++nd) {
    // The full-grid node with the fixed axis at index 0.
    size_t base = 0;
    int kk = 0;
    for (int d = 0; d < dims_; ++d) {
      if (d == dim) {
        continue;
      }
      const auto du = static_cast<size_t>(d), ku = static_cast<size_t>(kk);
      base += ((nd / g.stride_[ku]) % g.axes_[ku].size()) * stride_[du];
      ++kk;
    }
    const size_t n0 = base + b.i * stride_[fixed];
    bool extrapolated = b.outside;
    if (n_fixed == 1 || b.w <= 0) {
      g.r_[nd] = r_[n0];
      g.t_[nd] = t_[n0];
      extrapolated |= state_[n0] == kFilledExtrapolated;
    } else {
      const size_t n1 = n0 + stride_[fixed];
      g.r_[nd] = (1 - b.w) * r_[n0] + b.w * r_[n1];
      g.t_[nd] = std::exp((1 - b.w) * std::log(t_[n0]) + b.w * std::log(t_[n1]));
      extrapolated |= state_[n0] == kFilledExtrapolated || state_[n1] == kFilledExtrapolated;
    }
    g.state_[nd] = extrapolated ? kFilledExtrapolated : kMeasured;
  }
  return g;
}

double Grid::residual_without(size_t p, bool* extrapolated) const {
  const size_t nd = point_node_.at(p);
  if (nd == kNone) {
    throw std::invalid_argument("leave-one-out on a point the grid does not use");
  }
  const double r = fill(nd, nd, extrapolated);
  if (!std::isnan(r)) {
    return r;
  }
  // No other measured node on its axis lines: the nearest filled node along them.
  *extrapolated = true;
  const double held = hold_nearest(nd, nd, false);
  return std::isnan(held) ? 0 : held;
}

// ---------------------------------------------------------------------------------------------
// GemmTable

double GemmTable::bytes(double m, double n, double k) const {
  return n * k * weight_bytes_ + 2 * (m * k + m * n);
}

double GemmTable::reference_time(double m, double n, double k) const {
  return gemm_reference(fit_, m, n, k, weight_bytes_);
}

double gemm_reference(const RooflineFit& f, double m, double n, double k, double weight_bytes) {
  return f.time(2 * m * n * k, n * k * weight_bytes + 2 * (m * k + m * n), m, n * k);
}

double prefill_reference(const RooflineFit& f, double heads, double kv_heads, double head_dim,
                         double batch, double q, double prefix, double kv_bytes, bool causal) {
  const double positions = causal ? q * prefix + q * (q + 1) / 2 : q * (prefix + q);
  const double flops = 4.0 * head_dim * heads * batch * positions;
  const double bytes = batch * ((prefix + q) * 2.0 * kv_heads * head_dim * kv_bytes +
                                q * 2.0 * heads * head_dim * 2);
  return f.time(flops, bytes, q, batch * heads);
}

double decode_reference(const RooflineFit& f, double heads, double kv_heads, double head_dim,
                        double batch, double context, double kv_bytes) {
  const double bytes =
      2.0 * batch * context * kv_heads * head_dim * kv_bytes + batch * 2.0 * heads * head_dim * 2;
  return f.time(0, bytes, 1, 1, batch);
}

GemmTable::GemmTable(const std::vector<profiles::GemmRow>& rows, double weight_bytes,
                     int64_t l2_bytes)
    : weight_bytes_(weight_bytes) {
  // Deduplicate keys (geometric mean of repeated measurements).
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::pair<double, int>> acc;
  for (const profiles::GemmRow& r : rows) {
    if (r.m <= 0 || r.n <= 0 || r.k <= 0 || !(r.latency_us > 0)) {
      continue;
    }
    auto& a = acc[{r.m, r.n, r.k}];
    a.first += std::log(r.latency_us * 1e-6);
    a.second += 1;
  }
  // A GEMM of fewer rows can always run as the larger one (padded), so a row slower than a
  // larger-m row of the same (n, k) by more than kSlowerThanLargerM is a timing artifact (a cold
  // launch, a poor heuristic pick), not what a serving engine sees: drop it.
  std::map<std::pair<int64_t, int64_t>, double> fastest_larger;  // (n, k) -> min time at larger m
  for (auto it = acc.rbegin(); it != acc.rend();) {
    const auto& [mi, ni, ki] = it->first;
    const double t = std::exp(it->second.first / it->second.second);
    const auto f = fastest_larger.find({ni, ki});
    const bool slower = f != fastest_larger.end() && t > kSlowerThanLargerM * f->second;
    if (f == fastest_larger.end() || t < f->second) fastest_larger[{ni, ki}] = t;
    if (slower) {
      ++slower_than_larger_m_;
      it = std::make_reverse_iterator(acc.erase(std::next(it).base()));
    } else {
      ++it;
    }
  }
  if (acc.empty()) {
    return;
  }
  std::vector<FitRow> fit_rows;
  fit_rows.reserve(acc.size());
  for (const auto& [key, a] : acc) {
    const auto& [mi, ni, ki] = key;
    const double m = static_cast<double>(mi), n = static_cast<double>(ni),
                 k = static_cast<double>(ki);
    fit_rows.push_back({2 * m * n * k, bytes(m, n, k), m, n * k, std::exp(a.first / a.second)});
  }
  fit_ = fit_roofline(fit_rows, true, static_cast<double>(l2_bytes));
  std::vector<Grid::Point> points;
  points.reserve(acc.size());
  for (const auto& [key, a] : acc) {
    const auto& [mi, ni, ki] = key;
    const double m = static_cast<double>(mi), n = static_cast<double>(ni),
                 k = static_cast<double>(ki);
    const double t = std::exp(a.first / a.second);
    points.push_back(
        {{std::log(m), std::log(n), std::log(k)}, std::log(t), std::log(reference_time(m, n, k))});
    loo_.push_back({m, n, k, t});
    if (shapes_.empty() || shapes_.back() != std::make_pair(ni, ki)) {
      shapes_.emplace_back(ni, ki);
    }
  }
  std::sort(shapes_.begin(), shapes_.end());
  shapes_.erase(std::unique(shapes_.begin(), shapes_.end()), shapes_.end());
  grid_ = Grid(
      3, points, {},
      [this](const Grid::Coord& x) {
        return std::log(reference_time(std::exp(x[0]), std::exp(x[1]), std::exp(x[2])));
      },
      {0, 1, 2}, Grid::Fill::kAverage);
}

bool GemmTable::has_shape(double n, double k) const {
  return std::binary_search(shapes_.begin(), shapes_.end(),
                            std::pair<int64_t, int64_t>(static_cast<int64_t>(std::llround(n)),
                                                        static_cast<int64_t>(std::llround(k))));
}

Lookup GemmTable::predict(double m, double n, double k) const {
  Lookup out;
  const double ref = reference_time(m, n, k);
  if (grid_.empty()) {
    out.seconds = ref;
    out.extrapolated = true;
    return out;
  }
  out.seconds = ref * grid_.ratio({std::log(m), std::log(n), std::log(k)}, ref, &out.extrapolated);
  return out;
}

Lookup GemmTable::predict_without(size_t p) const {
  const LooPoint& lp = loo_[p];
  Lookup out;
  const double r = grid_.residual_without(p, &out.extrapolated);
  out.seconds = reference_time(lp.m, lp.n, lp.k) * std::exp(r);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Attention families

namespace {

// The family for `h`: exact (kv_heads, head_dim), else same head_dim and nearest kv_heads in ln.
template <typename Map>
const typename Map::mapped_type* find_family(const Map& families, const HeadConfig& h,
                                             AttentionFamily* chosen) {
  const auto exact = families.find(AttentionFamily{h.kv_heads, h.head_dim});
  if (exact != families.end()) {
    *chosen = exact->first;
    return &exact->second;
  }
  const typename Map::mapped_type* best = nullptr;
  double best_d = std::numeric_limits<double>::infinity();
  for (const auto& [f, value] : families) {
    if (f.head_dim != h.head_dim) {
      continue;
    }
    const double d = std::abs(std::log(static_cast<double>(f.kv_heads) / h.kv_heads));
    if (d < best_d) {
      best_d = d;
      best = &value;
      *chosen = f;
    }
  }
  return best;
}

double prefill_positions(double q, double prefix, bool causal) {
  return causal ? q * prefix + q * (q + 1) / 2 : q * (prefix + q);
}

struct LogAcc {
  double log_sum = 0;
  int count = 0;
  double mean() const { return std::exp(log_sum / count); }
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// PrefillTable

double PrefillTable::reference_time(const HeadConfig& h, double batch, double q,
                                    double prefix) const {
  return prefill_reference(fit_, h.heads, h.kv_heads, h.head_dim, batch, q, prefix, kv_bytes_,
                           causal_);
}

PrefillTable::PrefillTable(const std::vector<profiles::AttentionPrefillRow>& rows, bool causal)
    : causal_(causal) {
  // Deduplicate keys (geometric mean of repeated measurements).
  // Key: family, prefix, heads, batch, q.
  std::map<std::tuple<AttentionFamily, int64_t, int, int64_t, int64_t>, LogAcc> acc;
  for (const profiles::AttentionPrefillRow& r : rows) {
    if (r.causal != causal || r.batch <= 0 || r.q_tokens <= 0 || r.prefix_tokens < 0 ||
        r.num_heads <= 0 || r.num_kv_heads <= 0 || r.head_dim <= 0 || !(r.latency_us > 0)) {
      continue;
    }
    kv_bytes_ = table_dtype_bytes(r.kv_dtype.empty() ? r.dtype : r.kv_dtype);
    LogAcc& a = acc[{AttentionFamily{r.num_kv_heads, r.head_dim}, r.prefix_tokens, r.num_heads,
                     r.batch, r.q_tokens}];
    a.log_sum += std::log(r.latency_us * 1e-6);
    a.count += 1;
  }
  std::vector<FitRow> fit_rows;
  for (const auto& [key, a] : acc) {
    const auto& [f, prefix, heads, batch, q] = key;
    const HeadConfig h{heads, f.kv_heads, f.head_dim};
    const double b = static_cast<double>(batch), qd = static_cast<double>(q),
                 p = static_cast<double>(prefix);
    const double flops = 4.0 * h.head_dim * h.heads * b * prefill_positions(qd, p, causal_);
    const double bytes = b * ((p + qd) * 2.0 * h.kv_heads * h.head_dim * kv_bytes_ +
                              qd * 2.0 * h.heads * h.head_dim * 2);
    fit_rows.push_back({flops, bytes, qd, b * h.heads, a.mean()});
  }
  fit_ = fit_roofline(fit_rows, true);
  // Group into (family, prefix) grids.
  std::map<std::pair<AttentionFamily, int64_t>, std::vector<LooPoint>> groups;
  for (const auto& [key, a] : acc) {
    const auto& [f, prefix, heads, batch, q] = key;
    groups[{f, prefix}].push_back({f, 0, 0, static_cast<double>(heads), static_cast<double>(batch),
                                   static_cast<double>(q), static_cast<double>(prefix), a.mean()});
  }
  for (auto& [key, list] : groups) {
    const auto& [f, prefix] = key;
    const double p = static_cast<double>(prefix);
    std::vector<Grid::Point> gp;
    for (const LooPoint& lp : list) {
      const HeadConfig h{static_cast<int>(lp.heads), f.kv_heads, f.head_dim};
      gp.push_back({{std::log(lp.batch), std::log(lp.q), std::log(lp.heads)},
                    std::log(lp.seconds),
                    std::log(reference_time(h, lp.batch, lp.q, p))});
    }
    const AttentionFamily fc = f;
    std::vector<Level>& levels = families_[f];
    levels.push_back({p, Grid(
                             3, gp, {},
                             [this, fc, p](const Grid::Coord& x) {
                               const HeadConfig h{0, fc.kv_heads, fc.head_dim};
                               HeadConfig hh = h;
                               hh.heads = static_cast<int>(std::lround(std::exp(x[2])));
                               return std::log(
                                   reference_time(hh, std::exp(x[0]), std::exp(x[1]), p));
                             },
                             {2, 0, 1}, Grid::Fill::kFirst)});
    for (size_t i = 0; i < list.size(); ++i) {
      LooPoint lp = list[i];
      lp.level = levels.size() - 1;
      lp.index = i;
      loo_.push_back(lp);
    }
  }
}

const std::vector<PrefillTable::Level>* PrefillTable::family(const HeadConfig& h,
                                                             AttentionFamily* chosen) const {
  return find_family(families_, h, chosen);
}

bool PrefillTable::covers(const HeadConfig& h) const {
  AttentionFamily f;
  return family(h, &f) != nullptr;
}

bool PrefillTable::has_prefix_rows(const HeadConfig& h) const {
  AttentionFamily f;
  const std::vector<Level>* levels = family(h, &f);
  return levels != nullptr &&
         (levels->size() > 1 || (levels->size() == 1 && (*levels)[0].prefix > 0));
}

PrefillTable::Bound PrefillTable::bind(const HeadConfig& h) const {
  AttentionFamily f;
  const std::vector<Level>* levels = family(h, &f);
  if (levels == nullptr) {
    throw std::invalid_argument(
        fmt::format("no prefill attention rows with head_dim {}", h.head_dim));
  }
  Bound b;
  b.table_ = this;
  b.h_ = h;
  b.own_ = {h.heads, f.kv_heads, f.head_dim};
  b.transferred_ = f.kv_heads != h.kv_heads;
  for (const Level& level : *levels) {
    b.levels_.push_back({level.prefix, level.grid.slice(2, std::log(h.heads))});
  }
  return b;
}

Lookup PrefillTable::Bound::at(const Slice& s, double batch, double q, double prefix) const {
  Lookup out;
  out.extrapolated = transferred_;
  const double own_ref = table_->reference_time(own_, batch, q, s.prefix);
  const double ratio = s.grid.ratio({std::log(batch), std::log(q), 0}, own_ref, &out.extrapolated);
  const double ref =
      transferred_ || prefix != s.prefix ? table_->reference_time(h_, batch, q, prefix) : own_ref;
  out.seconds = ref * ratio;
  return out;
}

Lookup PrefillTable::Bound::predict(double batch, double q, double prefix) const {
  if (levels_.size() == 1 && levels_[0].prefix == 0) {
    if (prefix <= 0) {
      return at(levels_[0], batch, q, 0);
    }
    // AIConfigurator's prefix rule: the full-length time scaled by the causal work ratio.
    const double k = q + prefix;
    Lookup full = at(levels_[0], batch, k, 0);
    full.seconds *= table_->causal_ ? (k * k - prefix * prefix) / (k * k) : q / k;
    return full;
  }
  size_t hi = 0;
  while (hi < levels_.size() && levels_[hi].prefix < prefix) {
    ++hi;
  }
  if (hi == levels_.size() || (hi == 0 && prefix < levels_[0].prefix)) {
    // Outside the measured prefixes: the nearest level's residual, R at the true prefix.
    Lookup out = at(hi == 0 ? levels_.front() : levels_.back(), batch, q, prefix);
    out.extrapolated = true;
    return out;
  }
  if (levels_[hi].prefix == prefix) {
    return at(levels_[hi], batch, q, prefix);
  }
  const Lookup lo = at(levels_[hi - 1], batch, q, levels_[hi - 1].prefix);
  const Lookup up = at(levels_[hi], batch, q, levels_[hi].prefix);
  const double w =
      (prefix - levels_[hi - 1].prefix) / (levels_[hi].prefix - levels_[hi - 1].prefix);
  return {lo.seconds + w * (up.seconds - lo.seconds), lo.extrapolated || up.extrapolated};
}

Lookup PrefillTable::predict(const HeadConfig& h, double batch, double q, double prefix) const {
  return bind(h).predict(batch, q, prefix);
}

Lookup PrefillTable::predict_without(size_t p) const {
  const LooPoint& lp = loo_[p];
  const Level& level = families_.at(lp.f)[lp.level];
  Lookup out;
  const double r = level.grid.residual_without(lp.index, &out.extrapolated);
  const HeadConfig h{static_cast<int>(lp.heads), lp.f.kv_heads, lp.f.head_dim};
  out.seconds = reference_time(h, lp.batch, lp.q, lp.prefix) * std::exp(r);
  return out;
}

// ---------------------------------------------------------------------------------------------
// DecodeTable

double DecodeTable::kv_bytes(const HeadConfig& h, double batch, double context) const {
  return 2.0 * batch * context * h.kv_heads * h.head_dim * kv_elem_bytes_;
}

double DecodeTable::reference_time(const HeadConfig& h, double batch, double context) const {
  return decode_reference(fit_, h.heads, h.kv_heads, h.head_dim, batch, context, kv_elem_bytes_);
}

DecodeTable::DecodeTable(const std::vector<profiles::AttentionDecodeRow>& rows, int64_t l2_bytes,
                         double peak_bandwidth)
    : l2_bytes_(l2_bytes) {
  std::map<std::tuple<AttentionFamily, int, int64_t, int64_t>, LogAcc> acc;
  for (const profiles::AttentionDecodeRow& r : rows) {
    if (r.batch <= 0 || r.context_tokens <= 0 || r.num_heads <= 0 || r.num_kv_heads <= 0 ||
        r.head_dim <= 0 || !(r.latency_us > 0)) {
      continue;
    }
    kv_elem_bytes_ = table_dtype_bytes(r.kv_dtype.empty() ? r.dtype : r.kv_dtype);
    LogAcc& a =
        acc[{AttentionFamily{r.num_kv_heads, r.head_dim}, r.num_heads, r.batch, r.context_tokens}];
    a.log_sum += std::log(r.latency_us * 1e-6);
    a.count += 1;
  }
  std::map<AttentionFamily, std::vector<LooPoint>> groups;
  double max_kv = 0;
  for (const auto& [key, a] : acc) {
    const auto& [f, heads, batch, context] = key;
    LooPoint lp{f,
                0,
                static_cast<double>(heads),
                static_cast<double>(batch),
                static_cast<double>(context),
                a.mean(),
                false};
    max_kv = std::max(max_kv, kv_bytes({heads, f.kv_heads, f.head_dim}, lp.batch, lp.context));
    groups[f].push_back(lp);
  }
  // Large-KV rows: KV >= 4 x L2, else >= L2, else all.
  double threshold = 0;
  if (l2_bytes_ > 0) {
    threshold = kLargeKvL2Multiple * static_cast<double>(l2_bytes_);
    if (max_kv < threshold) {
      threshold = static_cast<double>(l2_bytes_);
    }
    if (max_kv < threshold) {
      threshold = 0;
    }
  }
  std::vector<FitRow> fit_rows;
  for (const auto& [f, list] : groups) {
    for (const LooPoint& lp : list) {
      const HeadConfig h{static_cast<int>(lp.heads), f.kv_heads, f.head_dim};
      const double kv = kv_bytes(h, lp.batch, lp.context);
      if (kv >= threshold) {
        const double bytes = kv + lp.batch * 2.0 * h.heads * h.head_dim * 2;
        fit_rows.push_back({0, bytes, 1, 1, lp.seconds, lp.batch});
        floor_bw_ = std::max(floor_bw_, kv / lp.seconds);
      }
    }
  }
  fit_ = fit_roofline(fit_rows, false);
  if (peak_bandwidth > 0) {
    floor_bw_ = std::min(floor_bw_, peak_bandwidth);
  }
  for (auto& [f, list] : groups) {
    std::vector<Grid::Point> gp;
    std::vector<bool> cold;
    for (LooPoint& lp : list) {
      const HeadConfig h{static_cast<int>(lp.heads), f.kv_heads, f.head_dim};
      gp.push_back({{std::log(lp.batch), std::log(lp.batch * lp.context), std::log(lp.heads)},
                    std::log(lp.seconds),
                    std::log(reference_time(h, lp.batch, lp.context))});
      lp.hot = l2_bytes_ > 0 && kv_bytes(h, lp.batch, lp.context) < static_cast<double>(l2_bytes_);
      cold.push_back(!lp.hot);
      hot_rows_ += lp.hot ? 1 : 0;
      lp.index = gp.size() - 1;
      loo_.push_back(lp);
    }
    const AttentionFamily fc = f;
    const auto ref = [this, fc](const Grid::Coord& x) {
      const HeadConfig h{static_cast<int>(std::lround(std::exp(x[2]))), fc.kv_heads, fc.head_dim};
      return std::log(reference_time(h, std::exp(x[0]), std::exp(x[1] - x[0])));
    };
    Group& g = families_[f];
    g.all = Grid(3, gp, {}, ref, {1, 2, 0}, Grid::Fill::kFirst);
    g.has_cold = std::find(cold.begin(), cold.end(), true) != cold.end();
    if (g.has_cold) {
      g.cold = Grid(3, gp, cold, ref, {1, 2, 0}, Grid::Fill::kFirst);
    }
  }
}

const DecodeTable::Group* DecodeTable::family(const HeadConfig& h, AttentionFamily* chosen) const {
  return find_family(families_, h, chosen);
}

bool DecodeTable::covers(const HeadConfig& h) const {
  AttentionFamily f;
  return family(h, &f) != nullptr;
}

Lookup DecodeTable::finish(const HeadConfig& h, double batch, double context, double ratio,
                           bool extrapolated) const {
  Lookup out;
  out.seconds = reference_time(h, batch, context) * ratio;
  out.extrapolated = extrapolated;
  if (floor_bw_ > 0) {
    out.seconds = std::max(out.seconds, kv_bytes(h, batch, context) / floor_bw_);
  }
  return out;
}

DecodeTable::Bound DecodeTable::bind(const HeadConfig& h) const {
  AttentionFamily f;
  const Group* g = family(h, &f);
  if (g == nullptr) {
    throw std::invalid_argument(
        fmt::format("no decode attention rows with head_dim {}", h.head_dim));
  }
  Bound b;
  b.table_ = this;
  b.h_ = h;
  b.own_ = {h.heads, f.kv_heads, f.head_dim};
  b.transferred_ = f.kv_heads != h.kv_heads;
  b.kv_per_token_ = kv_bytes(b.own_, 1, 1);
  b.all_ = g->all.slice(2, std::log(h.heads));
  b.has_cold_ = g->has_cold;
  if (g->has_cold) {
    b.cold_ = g->cold.slice(2, std::log(h.heads));
  }
  return b;
}

Lookup DecodeTable::Bound::predict(double batch, double context) const {
  const DecodeTable& t = *table_;
  const bool cold_query =
      t.l2_bytes_ > 0 && kv_per_token_ * batch * context >= static_cast<double>(t.l2_bytes_);
  const Grid& grid = cold_query && has_cold_ ? cold_ : all_;
  bool extrapolated = transferred_;
  const double own_ref = t.reference_time(own_, batch, context);
  const double ratio =
      grid.ratio({std::log(batch), std::log(batch * context), 0}, own_ref, &extrapolated);
  Lookup out;
  out.seconds = (transferred_ ? t.reference_time(h_, batch, context) : own_ref) * ratio;
  out.extrapolated = extrapolated;
  if (t.floor_bw_ > 0) {
    out.seconds = std::max(out.seconds, t.kv_bytes(h_, batch, context) / t.floor_bw_);
  }
  return out;
}

Lookup DecodeTable::predict(const HeadConfig& h, double batch, double context) const {
  return bind(h).predict(batch, context);
}

Lookup DecodeTable::predict_without(size_t p) const {
  const LooPoint& lp = loo_[p];
  const Group& g = families_.at(lp.f);
  bool extrapolated = false;
  const double r = !lp.hot && g.has_cold ? g.cold.residual_without(lp.index, &extrapolated)
                                         : g.all.residual_without(lp.index, &extrapolated);
  const HeadConfig h{static_cast<int>(lp.heads), lp.f.kv_heads, lp.f.head_dim};
  return finish(h, lp.batch, lp.context, std::exp(r), extrapolated);
}

// ---------------------------------------------------------------------------------------------
// CurveTable

CurveTable::CurveTable(const std::vector<Row>& rows) {
  std::map<std::string, std::map<double, std::pair<double, int>>> acc;
  for (const Row& r : rows) {
    if (!(r.size > 0) || !(r.seconds > 0)) {
      continue;
    }
    auto& a = acc[r.key][r.size];
    a.first += std::log(r.seconds);
    a.second += 1;
  }
  for (const auto& [key, pts] : acc) {
    std::vector<FitRow> fit_rows;
    for (const auto& [size, a] : pts) {
      fit_rows.push_back({0, size, 1, 1, std::exp(a.first / a.second)});
    }
    Entry e;
    e.fit = fit_roofline(fit_rows, false);
    std::vector<CurvePoint> cp;
    for (const auto& [size, a] : pts) {
      cp.push_back({std::log(size), a.first / a.second, std::log(e.fit.time(0, size, 0, 0))});
    }
    e.curve = Curve(std::move(cp));
    auto it = curves_.emplace(key, std::move(e)).first;
    for (size_t i = 0; i < it->second.curve.size(); ++i) {
      loo_.emplace_back(key, i);
    }
  }
}

Lookup CurveTable::predict(const std::string& key, double size) const {
  const Entry& e = curves_.at(key);
  Lookup out;
  const double ref = e.fit.time(0, size, 0, 0);
  const double r = e.curve.residual(std::log(size), std::log(ref), &out.extrapolated);
  out.seconds = ref * std::exp(r);
  return out;
}

double CurveTable::max_size(const std::string& key) const {
  return std::exp(curves_.at(key).curve.x_max());
}

double CurveTable::min_size(const std::string& key) const {
  return std::exp(curves_.at(key).curve.x_min());
}

std::vector<std::string> CurveTable::keys() const {
  std::vector<std::string> out;
  for (const auto& [k, e] : curves_) {
    out.push_back(k);
  }
  return out;
}

double CurveTable::measured(size_t p) const {
  return std::exp(curves_.at(loo_[p].first).curve.log_t(loo_[p].second));
}

Lookup CurveTable::predict_without(size_t p) const {
  const Entry& e = curves_.at(loo_[p].first);
  Lookup out;
  const double r = e.curve.residual_without(loo_[p].second, &out.extrapolated);
  out.seconds = std::exp(e.curve.log_ref(loo_[p].second) + r);
  return out;
}

std::string collective_key(const std::string& op, const std::string& dtype, int num_gpus,
                           int nodes) {
  return fmt::format("{}/{}/{}/{}", op, dtype, num_gpus, nodes);
}

std::string moe_key(const profiles::MoeRow& r) {
  return fmt::format("{}/{}/{}/{}/{}/{}/{}/{}", r.dtype, r.hidden_size, r.inter_size, r.topk,
                     r.num_experts, r.moe_tp, r.moe_ep, r.distribution);
}

std::string elementwise_key(const std::string& model, const std::string& op, int tp) {
  return fmt::format("{}/{}/{}", normalized_model_name(model), op, tp);
}

std::string normalized_model_name(const std::string& name) {
  std::string s =
      name.substr(name.find_last_of('/') == std::string::npos ? 0 : name.find_last_of('/') + 1);
  for (char& ch : s) {
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  if (s.rfind("meta-", 0) == 0) {
    s = s.substr(5);
  }
  if (s.size() > 3 && s.compare(s.size() - 3, 3, "-hf") == 0) {
    s = s.substr(0, s.size() - 3);
  }
  return s;
}

}  // namespace servesim::models::interp
