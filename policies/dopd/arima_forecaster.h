// ARIMA(p,d,q) one-step forecaster over a sliding window (policies.md §4.3), fitted with Eigen.
//
// Contract:
// - add(x) appends an observation; only the last `window` observations are kept and fitted.
// - predict_next() refits on the window and returns the one-step-ahead forecast. With fewer than
//   `min_points` observations, or a constant window, it returns the last value (Dynamo's
//   ARIMAPredictor does the same). REQUIRES: at least one observation.
// - Fitting: d is chosen by a unit-root check (an AR(1) fitted to the window with a constant has a
//   coefficient >= unit_root_threshold: difference once, up to max_d); then every (p, q) with
//   p <= max_p, q <= max_q is fitted by Hannan-Rissanen least squares (q > 0: residuals of a long
//   AR stand in for the innovations) and the order with the smallest AIC per observation wins,
//   among the fits whose AR part is stationary and MA part invertible (as auto-ARIMA): an
//   explosive fit on a short noisy window would forecast far outside anything observed.
// - Deterministic; no randomness, no global state.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <vector>

namespace servesim::policies::dopd {

struct ArimaOptions {
  size_t window = 50;
  size_t min_points = 5;
  int max_p = 2;
  int max_d = 1;
  int max_q = 1;
  double unit_root_threshold = 0.9;
};

// A fitted model of the d-times differenced series z: z_t = c + sum ar_i z_{t-i} + sum ma_j e_{t-j}.
struct ArimaFit {
  int p = 0, d = 0, q = 0;
  double constant = 0;
  std::vector<double> ar;
  std::vector<double> ma;
  double sigma2 = 0;  // residual variance
  double aic = 0;     // per observation: ln(sigma2) + 2 k / n
  bool valid = false;  // false when the series is too short for this order
};

// Fits ARIMA(p, d, q) to `y` (least squares as described above).
ArimaFit fit_arima(const std::vector<double>& y, int p, int d, int q);
// Chooses d, then (p, q) by AIC, as described above. REQUIRES: y.size() >= 2.
ArimaFit select_arima(const std::vector<double>& y, const ArimaOptions& options);
// One-step forecast of y from a fit of y.
double forecast_next(const ArimaFit& fit, const std::vector<double>& y);

class ArimaForecaster {
 public:
  explicit ArimaForecaster(ArimaOptions options = {}) : options_(options) {}
  void add(double x);
  size_t size() const { return values_.size(); }
  double last() const { return values_.back(); }
  double predict_next() const;
  // predict_next() kept within [min - span, max + span] of the window (span = max - min): a
  // poorly conditioned fit on a short, noisy window must not forecast far outside what was seen.
  // Refitted only after add(): a series that receives nothing (no arrival in an idle window)
  // costs nothing to forecast again.
  double predict_bounded() const;
  // The model predict_next() would use (valid == false when it would return the last value).
  ArimaFit model() const;

 private:
  ArimaOptions options_;
  std::deque<double> values_;
  mutable std::optional<double> bounded_;  // predict_bounded() of the current window
};

}  // namespace servesim::policies::dopd
