#include "models/cost/engine_efficiency.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>

#include <Eigen/Dense>
#include <fmt/format.h>

namespace servesim::models {
namespace {

constexpr int kClasses = 7;

// The share of an iteration's GEMM time that runs compute bound: m / (m + ridge), 0 without a
// ridge.
double compute_share(int64_t query_tokens, double ridge_tokens) {
  if (!(ridge_tokens > 0) || query_tokens <= 0) return 0.0;
  const double m = static_cast<double>(query_tokens);
  return m / (m + ridge_tokens);
}

// Milliseconds of each class in a breakdown, in factors_of() order.
std::array<double, kClasses> class_ms(const OperatorTimes& t, double compute_share) {
  const double gemm = to_ms(t.qkv_gemm + t.o_gemm + t.mlp_gemm + t.lm_head);
  return {gemm * (1 - compute_share), gemm * compute_share,   to_ms(t.attention_prefill),
          to_ms(t.attention_decode),  to_ms(t.allreduce),      to_ms(t.norms_elementwise),
          to_ms(t.overhead)};
}

std::array<double, kClasses> factors_of(const EngineEfficiency& e) {
  return {e.gemm,      e.gemm_compute, e.attention_prefill, e.attention_decode,
          e.allreduce, e.elementwise,  e.overhead};
}

class EngineScaledCostModel : public IterationCostModel {
 public:
  EngineScaledCostModel(std::shared_ptr<const IterationCostModel> inner, EngineEfficiency e)
      : inner_(std::move(inner)), e_(std::move(e)), f_(factors_of(e_)) {}

  Duration iteration_time(const BatchShape& shape) const override {
    const OperatorTimes t = breakdown(shape);
    return t.total();
  }
  OperatorTimes breakdown(const BatchShape& shape) const override {
    OperatorTimes t = inner_->breakdown(shape);
    const auto scale = [](Duration d, double f) {
      return Duration{std::llround(static_cast<double>(d.count()) * f)};
    };
    const double share = compute_share(shape.total_query_tokens(), e_.gemm_ridge_tokens);
    const double gemm = f_[0] * (1 - share) + f_[1] * share;
    t.qkv_gemm = scale(t.qkv_gemm, gemm);
    t.o_gemm = scale(t.o_gemm, gemm);
    t.mlp_gemm = scale(t.mlp_gemm, gemm);
    t.lm_head = scale(t.lm_head, gemm);
    t.attention_prefill = scale(t.attention_prefill, f_[2]);
    t.attention_decode = scale(t.attention_decode, f_[3]);
    t.allreduce = scale(t.allreduce, f_[4]);
    t.norms_elementwise = scale(t.norms_elementwise, f_[5]);
    t.overhead = scale(t.overhead, f_[6]);
    return t;
  }
  Duration peak_bound_time(const BatchShape& shape) const override {
    return inner_->peak_bound_time(shape);
  }
  OperatorTimes peak_bound_breakdown(const BatchShape& shape) const override {
    return inner_->peak_bound_breakdown(shape);
  }
  LookupStats lookup_stats() const override { return inner_->lookup_stats(); }
  std::string describe() const override {
    return inner_->describe() + (e_.identity() ? std::string()
                                               : " x engine '" + e_.name + "' efficiency (" +
                                                     e_.describe() + ")");
  }

 private:
  std::shared_ptr<const IterationCostModel> inner_;
  EngineEfficiency e_;
  std::array<double, kClasses> f_;
};

}  // namespace

std::string EngineEfficiency::describe() const {
  const std::string gemm_text =
      gemm_ridge_tokens > 0
          ? fmt::format("gemm x{:.2f} weight-bound, x{:.2f} compute-bound (ridge {:.0f} tokens)",
                        gemm, gemm_compute, gemm_ridge_tokens)
          : fmt::format("gemm x{:.2f}", gemm);
  return fmt::format(
      "{}, prefill attention x{:.2f}, decode attention x{:.2f}, all-reduce x{:.2f}, elementwise "
      "x{:.2f}, overhead x{:.2f}",
      gemm_text, attention_prefill, attention_decode, allreduce, elementwise, overhead);
}

bool EngineEfficiency::identity() const {
  for (double f : factors_of(*this)) {
    if (f != 1.0) return false;
  }
  return true;
}

std::unique_ptr<IterationCostModel> scale_by_engine(std::shared_ptr<const IterationCostModel> inner,
                                                    const EngineEfficiency& efficiency) {
  if (!inner) throw std::invalid_argument("scale_by_engine needs a cost model");
  for (double f : factors_of(efficiency)) {
    if (!(f > 0) || !std::isfinite(f)) {
      throw std::invalid_argument("engine efficiency factors must be finite and > 0");
    }
  }
  return std::make_unique<EngineScaledCostModel>(std::move(inner), efficiency);
}

namespace {

// One weighted least-squares fit of the factors: rows 0..n-1 of `a` are the samples (class ms /
// reference, target 1), scaled by sqrt(weight); the last kClasses rows pull each factor toward 1.
std::array<double, kClasses> solve_factors(const Eigen::MatrixXd& a, const Eigen::VectorXd& b,
                                           const Eigen::VectorXd& weight, double min_factor) {
  const Eigen::Index n = weight.size();
  Eigen::MatrixXd aw = a;
  Eigen::VectorXd bw = b;
  for (Eigen::Index i = 0; i < n; ++i) {
    const double s = std::sqrt(weight(i));
    aw.row(i) *= s;
    bw(i) *= s;
  }
  // Classes absent from every sample keep factor 1; a class fitted below min_factor is pinned there.
  std::array<double, kClasses> f{1, 1, 1, 1, 1, 1, 1};
  std::array<bool, kClasses> free{};
  for (int k = 0; k < kClasses; ++k) free[k] = a.col(k).head(n).cwiseAbs().sum() > 1e-9;
  for (int round = 0; round < kClasses; ++round) {
    std::vector<int> cols;
    Eigen::VectorXd rhs = bw;
    for (int k = 0; k < kClasses; ++k) {
      if (free[k]) {
        cols.push_back(k);
      } else {
        rhs -= aw.col(k) * f[k];
      }
    }
    if (cols.empty()) break;
    Eigen::MatrixXd sub(aw.rows(), static_cast<Eigen::Index>(cols.size()));
    for (size_t j = 0; j < cols.size(); ++j) sub.col(static_cast<Eigen::Index>(j)) = aw.col(cols[j]);
    const Eigen::VectorXd x = sub.colPivHouseholderQr().solve(rhs);
    bool pinned = false;
    for (size_t j = 0; j < cols.size(); ++j) {
      f[cols[j]] = x(static_cast<Eigen::Index>(j));
      if (f[cols[j]] < min_factor) {
        f[cols[j]] = min_factor;
        free[cols[j]] = false;
        pinned = true;
      }
    }
    if (!pinned) break;
  }
  return f;
}

}  // namespace

EngineEfficiency fit_engine_efficiency(const std::vector<EngineSample>& samples,
                                       const std::string& name, const EngineFitOptions& options) {
  if (samples.size() < static_cast<size_t>(kClasses)) {
    throw std::invalid_argument("fitting an engine efficiency needs at least 7 samples");
  }
  if (options.gemm_ridge_tokens < 0) throw std::invalid_argument("gemm_ridge_tokens must be >= 0");
  const auto n = static_cast<Eigen::Index>(samples.size());
  Eigen::MatrixXd a = Eigen::MatrixXd::Zero(n + kClasses, kClasses);
  Eigen::VectorXd b = Eigen::VectorXd::Zero(n + kClasses);
  for (size_t i = 0; i < samples.size(); ++i) {
    if (!(samples[i].reference_ms > 0)) throw std::invalid_argument("reference times must be > 0");
    const auto ms = class_ms(samples[i].breakdown,
                             compute_share(samples[i].query_tokens, options.gemm_ridge_tokens));
    for (int k = 0; k < kClasses; ++k) a(static_cast<Eigen::Index>(i), k) = ms[k] / samples[i].reference_ms;
    b(static_cast<Eigen::Index>(i)) = 1.0;
  }
  // The ridge rows: sqrt(ridge * samples) * (factor - 1) = 0.
  const double w = std::sqrt(options.ridge * static_cast<double>(n));
  for (int k = 0; k < kClasses; ++k) {
    a(n + k, k) = w;
    b(n + k) = w;
  }
  Eigen::VectorXd weight = Eigen::VectorXd::Ones(n);
  std::array<double, kClasses> f = solve_factors(a, b, weight, options.min_factor);
  for (int round = 0; round < options.minimax_rounds; ++round) {
    // Lawson: weight_i *= |relative error_i|, normalised to mean 1.
    for (Eigen::Index i = 0; i < n; ++i) {
      double predicted = 0;
      for (int k = 0; k < kClasses; ++k) predicted += a(i, k) * f[k];
      weight(i) *= std::max(std::fabs(predicted - 1), 1e-12);
    }
    weight *= static_cast<double>(n) / weight.sum();
    f = solve_factors(a, b, weight, options.min_factor);
  }
  EngineEfficiency e;
  e.name = name;
  e.gemm = f[0];
  e.gemm_compute = options.gemm_ridge_tokens > 0 ? f[1] : f[0];
  e.gemm_ridge_tokens = options.gemm_ridge_tokens;
  e.attention_prefill = f[2];
  e.attention_decode = f[3];
  e.allreduce = f[4];
  e.elementwise = f[5];
  e.overhead = f[6];
  return e;
}

}  // namespace servesim::models
