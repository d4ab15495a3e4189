#include "models/engine_efficiency.h"

#include <array>
#include <cmath>
#include <stdexcept>

#include <Eigen/Dense>

namespace servesim::models {
namespace {

constexpr int kClasses = 6;

// Milliseconds of each class in a breakdown, in EngineEfficiency field order.
std::array<double, kClasses> class_ms(const OperatorTimes& t) {
  return {to_ms(t.qkv_gemm + t.o_gemm + t.mlp_gemm + t.lm_head), to_ms(t.attention_prefill),
          to_ms(t.attention_decode),                             to_ms(t.allreduce),
          to_ms(t.norms_elementwise),                            to_ms(t.overhead)};
}

std::array<double, kClasses> factors_of(const EngineEfficiency& e) {
  return {e.gemm, e.attention_prefill, e.attention_decode, e.allreduce, e.elementwise, e.overhead};
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
    t.qkv_gemm = scale(t.qkv_gemm, f_[0]);
    t.o_gemm = scale(t.o_gemm, f_[0]);
    t.mlp_gemm = scale(t.mlp_gemm, f_[0]);
    t.lm_head = scale(t.lm_head, f_[0]);
    t.attention_prefill = scale(t.attention_prefill, f_[1]);
    t.attention_decode = scale(t.attention_decode, f_[2]);
    t.allreduce = scale(t.allreduce, f_[3]);
    t.norms_elementwise = scale(t.norms_elementwise, f_[4]);
    t.overhead = scale(t.overhead, f_[5]);
    return t;
  }
  Duration peak_bound_time(const BatchShape& shape) const override {
    return inner_->peak_bound_time(shape);
  }
  LookupStats lookup_stats() const override { return inner_->lookup_stats(); }
  std::string describe() const override {
    return inner_->describe() +
           (e_.identity() ? std::string()
                          : " x engine '" + e_.name + "' efficiency (gemm " + fmt(e_.gemm) +
                                ", prefill attention " + fmt(e_.attention_prefill) +
                                ", decode attention " + fmt(e_.attention_decode) + ", all-reduce " +
                                fmt(e_.allreduce) + ", elementwise " + fmt(e_.elementwise) +
                                ", overhead " + fmt(e_.overhead) + ")");
  }

 private:
  static std::string fmt(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", v);
    return buf;
  }
  std::shared_ptr<const IterationCostModel> inner_;
  EngineEfficiency e_;
  std::array<double, kClasses> f_;
};

}  // namespace

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

EngineEfficiency fit_engine_efficiency(const std::vector<EngineSample>& samples,
                                       const std::string& name, double ridge,
                                       double min_factor) {
  if (samples.size() < static_cast<size_t>(kClasses)) {
    throw std::invalid_argument("fitting an engine efficiency needs at least 6 samples");
  }
  const auto n = static_cast<Eigen::Index>(samples.size());
  Eigen::MatrixXd a = Eigen::MatrixXd::Zero(n + kClasses, kClasses);
  Eigen::VectorXd b = Eigen::VectorXd::Zero(n + kClasses);
  for (size_t i = 0; i < samples.size(); ++i) {
    if (!(samples[i].reference_ms > 0)) throw std::invalid_argument("reference times must be > 0");
    const auto ms = class_ms(samples[i].breakdown);
    for (int k = 0; k < kClasses; ++k) a(static_cast<Eigen::Index>(i), k) = ms[k] / samples[i].reference_ms;
    b(static_cast<Eigen::Index>(i)) = 1.0;
  }
  // Classes absent from every sample keep factor 1; a class fitted below min_factor is pinned there.
  std::array<double, kClasses> f{1, 1, 1, 1, 1, 1};
  std::array<bool, kClasses> free{};
  for (int k = 0; k < kClasses; ++k) free[k] = a.col(k).head(n).cwiseAbs().sum() > 1e-9;
  // The ridge rows: sqrt(ridge * samples) * (factor - 1) = 0.
  const double w = std::sqrt(ridge * static_cast<double>(n));
  for (int k = 0; k < kClasses; ++k) {
    a(n + k, k) = w;
    b(n + k) = w;
  }
  for (int round = 0; round < kClasses; ++round) {
    std::vector<int> cols;
    Eigen::VectorXd rhs = b;
    for (int k = 0; k < kClasses; ++k) {
      if (free[k]) {
        cols.push_back(k);
      } else {
        rhs -= a.col(k) * f[k];
      }
    }
    if (cols.empty()) break;
    Eigen::MatrixXd sub(a.rows(), static_cast<Eigen::Index>(cols.size()));
    for (size_t j = 0; j < cols.size(); ++j) sub.col(static_cast<Eigen::Index>(j)) = a.col(cols[j]);
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
  EngineEfficiency e;
  e.name = name;
  e.gemm = f[0];
  e.attention_prefill = f[1];
  e.attention_decode = f[2];
  e.allreduce = f[3];
  e.elementwise = f[4];
  e.overhead = f[5];
  return e;
}

}  // namespace servesim::models
