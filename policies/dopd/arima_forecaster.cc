#include "policies/dopd/arima_forecaster.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <Eigen/Dense>

namespace servesim::policies::dopd {
namespace {

std::vector<double> difference(const std::vector<double>& y, int d) {
  std::vector<double> z = y;
  for (int k = 0; k < d; ++k) {
    std::vector<double> next;
    for (size_t t = 1; t < z.size(); ++t) next.push_back(z[t] - z[t - 1]);
    z = std::move(next);
  }
  return z;
}

bool is_constant(const std::vector<double>& y) {
  if (y.empty()) return true;
  const auto [lo, hi] = std::minmax_element(y.begin(), y.end());
  return *hi - *lo <= 1e-12 * std::max(1.0, std::abs(*hi));
}

// Least squares fit of target[t] = c + sum_i coef_i * regressors[t][i]; returns residuals too.
struct Ols {
  Eigen::VectorXd beta;
  std::vector<double> residuals;
  double rss = 0;
};

Ols least_squares(const Eigen::MatrixXd& x, const Eigen::VectorXd& target) {
  Ols o;
  o.beta = x.colPivHouseholderQr().solve(target);
  const Eigen::VectorXd r = target - x * o.beta;
  o.residuals.assign(r.data(), r.data() + r.size());
  o.rss = r.squaredNorm();
  return o;
}

// Residuals of a long AR fitted to z (Hannan-Rissanen step 1); entries before the AR order are 0.
std::vector<double> long_ar_residuals(const std::vector<double>& z, int order) {
  const int n = static_cast<int>(z.size());
  std::vector<double> e(z.size(), 0.0);
  const int rows = n - order;
  Eigen::MatrixXd x(rows, order + 1);
  Eigen::VectorXd target(rows);
  for (int t = order; t < n; ++t) {
    x(t - order, 0) = 1.0;
    for (int i = 1; i <= order; ++i) x(t - order, i) = z[static_cast<size_t>(t - i)];
    target(t - order) = z[static_cast<size_t>(t)];
  }
  const Ols o = least_squares(x, target);
  for (int t = order; t < n; ++t) e[static_cast<size_t>(t)] = o.residuals[static_cast<size_t>(t - order)];
  return e;
}

int long_order(size_t n, int p, int q) {
  return std::max(p + q + 1, std::min(10, static_cast<int>(n) / 4));
}

}  // namespace

ArimaFit fit_arima(const std::vector<double>& y, int p, int d, int q) {
  ArimaFit f;
  f.p = p;
  f.d = d;
  f.q = q;
  const std::vector<double> z = difference(y, d);
  const int n = static_cast<int>(z.size());
  const int m = q > 0 ? long_order(z.size(), p, q) : 0;
  const int start = m + std::max(p, q);
  const int rows = n - start;
  const int k = 1 + p + q;
  if (rows < k + 2 || (q > 0 && n - m < m + 2)) return f;
  std::vector<double> e;
  if (q > 0) e = long_ar_residuals(z, m);
  Eigen::MatrixXd x(rows, k);
  Eigen::VectorXd target(rows);
  for (int t = start; t < n; ++t) {
    const int r = t - start;
    x(r, 0) = 1.0;
    for (int i = 1; i <= p; ++i) x(r, i) = z[static_cast<size_t>(t - i)];
    for (int j = 1; j <= q; ++j) x(r, p + j) = e[static_cast<size_t>(t - j)];
    target(r) = z[static_cast<size_t>(t)];
  }
  const Ols o = least_squares(x, target);
  f.constant = o.beta(0);
  for (int i = 1; i <= p; ++i) f.ar.push_back(o.beta(i));
  for (int j = 1; j <= q; ++j) f.ma.push_back(o.beta(p + j));
  // A perfect fit (rss 0) would make ln(sigma2) -inf; floor it relative to the data's scale.
  double scale = 0;
  for (double v : z) scale = std::max(scale, std::abs(v));
  f.sigma2 = std::max(o.rss / rows, 1e-18 * std::max(1.0, scale * scale));
  f.aic = std::log(f.sigma2) + 2.0 * (k + 1) / rows;
  f.valid = true;
  return f;
}

namespace {

// Whether every root of z^k + c_1 z^(k-1) + ... + c_k lies strictly inside the unit circle: the
// eigenvalues of its companion matrix.
bool roots_inside_unit_circle(const std::vector<double>& c) {
  const auto k = static_cast<Eigen::Index>(c.size());
  if (k == 0) return true;
  Eigen::MatrixXd companion = Eigen::MatrixXd::Zero(k, k);
  for (Eigen::Index j = 0; j < k; ++j) companion(0, j) = -c[static_cast<size_t>(j)];
  for (Eigen::Index i = 1; i < k; ++i) companion(i, i - 1) = 1.0;
  const Eigen::VectorXcd roots = companion.eigenvalues();
  for (Eigen::Index i = 0; i < k; ++i) {
    if (!(std::abs(roots(i)) < 1.0)) return false;
  }
  return true;
}

// Stationary AR part (z_t = sum a_i z_{t-i} + ...: roots of z^p - a_1 z^(p-1) - ... - a_p inside
// the unit circle) and invertible MA part (roots of z^q + m_1 z^(q-1) + ... + m_q inside), as
// auto-ARIMA requires of the orders it considers.
bool stationary_and_invertible(const ArimaFit& f) {
  std::vector<double> ar(f.ar.size());
  for (size_t i = 0; i < f.ar.size(); ++i) ar[i] = -f.ar[i];
  return roots_inside_unit_circle(ar) && roots_inside_unit_circle(f.ma);
}

}  // namespace

ArimaFit select_arima(const std::vector<double>& y, const ArimaOptions& options) {
  if (y.size() < 2) throw std::invalid_argument("select_arima: need at least two points");
  int d = 0;
  std::vector<double> z = y;
  while (d < options.max_d && z.size() >= 4 && !is_constant(z)) {
    const ArimaFit ar1 = fit_arima(z, 1, 0, 0);
    if (!ar1.valid || ar1.ar[0] < options.unit_root_threshold) break;
    z = difference(z, 1);
    ++d;
  }
  ArimaFit best;
  best.d = d;
  best.aic = std::numeric_limits<double>::infinity();
  for (int p = 0; p <= options.max_p; ++p) {
    for (int q = 0; q <= options.max_q; ++q) {
      const ArimaFit f = fit_arima(y, p, d, q);
      if (f.valid && stationary_and_invertible(f) && f.aic < best.aic) best = f;
    }
  }
  return best;
}

double forecast_next(const ArimaFit& fit, const std::vector<double>& y) {
  const std::vector<double> z = difference(y, fit.d);
  double z_next = z.empty() ? 0.0 : z.back();
  if (fit.valid && !is_constant(z)) {
    std::vector<double> e;
    if (fit.q > 0) {
      // Innovations of the fitted model, run forward over the whole differenced series.
      e.assign(z.size(), 0.0);
      for (size_t t = 0; t < z.size(); ++t) {
        double pred = fit.constant;
        for (int i = 1; i <= fit.p; ++i) {
          if (t >= static_cast<size_t>(i)) pred += fit.ar[static_cast<size_t>(i - 1)] * z[t - static_cast<size_t>(i)];
        }
        for (int j = 1; j <= fit.q; ++j) {
          if (t >= static_cast<size_t>(j)) pred += fit.ma[static_cast<size_t>(j - 1)] * e[t - static_cast<size_t>(j)];
        }
        e[t] = t >= static_cast<size_t>(std::max(fit.p, fit.q)) ? z[t] - pred : 0.0;
      }
    }
    const size_t n = z.size();
    z_next = fit.constant;
    for (int i = 1; i <= fit.p; ++i) z_next += fit.ar[static_cast<size_t>(i - 1)] * z[n - static_cast<size_t>(i)];
    for (int j = 1; j <= fit.q; ++j) z_next += fit.ma[static_cast<size_t>(j - 1)] * e[n - static_cast<size_t>(j)];
  }
  // Undo the differencing: y_{n} = z_next + sum of the last values of the lower differences.
  double out = z_next;
  for (int k = fit.d - 1; k >= 0; --k) out += difference(y, k).back();
  return out;
}

void ArimaForecaster::add(double x) {
  bounded_.reset();
  values_.push_back(x);
  while (values_.size() > options_.window) values_.pop_front();
}

ArimaFit ArimaForecaster::model() const {
  const std::vector<double> y(values_.begin(), values_.end());
  if (y.size() < std::max<size_t>(options_.min_points, 2) || is_constant(y)) return {};
  return select_arima(y, options_);
}

double ArimaForecaster::predict_next() const {
  if (values_.empty()) throw std::logic_error("ArimaForecaster: no observations to forecast from");
  const ArimaFit fit = model();
  if (!fit.valid) return values_.back();
  return forecast_next(fit, std::vector<double>(values_.begin(), values_.end()));
}

double ArimaForecaster::predict_bounded() const {
  if (bounded_) return *bounded_;
  const double f = predict_next();
  const auto [lo, hi] = std::minmax_element(values_.begin(), values_.end());
  const double span = *hi - *lo;
  bounded_ = std::clamp(f, *lo - span, *hi + span);
  return *bounded_;
}

}  // namespace servesim::policies::dopd
