#include "app/distserve_check.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

#include <Eigen/Dense>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "models/cost/engine_efficiency.h"
#include "scenarios/cost_models.h"
#include "scenarios/json_reader.h"
#include "core/error.h"

namespace servesim::app {
namespace fs = std::filesystem;

double DistServeLatencyModel::prefill_ms(int64_t batch, int64_t len) const {
  const double b = static_cast<double>(batch), l = static_cast<double>(len);
  return prefill[0] + prefill[1] * b * l + prefill[2] * b * l * l;
}

namespace {

// One decode piece a + b * sum(context) + c * batch.
double decode_piece_ms(const std::array<double, 3>& c, int64_t batch, int64_t context) {
  const double b = static_cast<double>(batch);
  return c[0] + c[1] * b * static_cast<double>(context) + c[2] * b;
}

}  // namespace

double DistServeLatencyModel::decode_ms(int64_t batch, int64_t context) const {
  return decode_piece_ms(batch < threshold ? decode_small : decode_large, batch, context);
}

namespace {

// a + b x1 + c x2 minimising sum ((a + b x1 + c x2) / t - 1)^2 over rows {x1, x2, t}.
std::array<double, 3> fit_relative(const std::vector<std::array<double, 3>>& rows) {
  Eigen::MatrixXd a(static_cast<Eigen::Index>(rows.size()), 3);
  const Eigen::VectorXd ones = Eigen::VectorXd::Ones(static_cast<Eigen::Index>(rows.size()));
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& [x1, x2, t] = rows[i];
    a.row(static_cast<Eigen::Index>(i)) << 1 / t, x1 / t, x2 / t;
  }
  const Eigen::Vector3d x = a.colPivHouseholderQr().solve(ones);
  return {x(0), x(1), x(2)};
}

}  // namespace

DistServeLatencyModel fit_distserve_model(const std::vector<DistServeSweepPoint>& points,
                                          int64_t threshold) {
  if (points.size() < 3) throw std::invalid_argument("fitting a DistServe model needs 3 points");
  std::vector<std::array<double, 3>> prefill, small, large;
  for (const DistServeSweepPoint& p : points) {
    if (!(p.prefill_ms > 0) || !(p.decode_ms > 0)) {
      throw std::invalid_argument("DistServe sweep times must be > 0");
    }
    const double b = static_cast<double>(p.batch), l = static_cast<double>(p.input_len);
    prefill.push_back({b * l, b * l * l, p.prefill_ms});
    (p.batch < threshold ? small : large).push_back({b * l, b, p.decode_ms});
  }
  DistServeLatencyModel m;
  m.threshold = threshold;
  m.prefill = fit_relative(prefill);
  if (small.size() >= 3) m.decode_small = fit_relative(small);
  if (large.size() >= 3) m.decode_large = fit_relative(large);
  if (small.size() < 3) m.decode_small = m.decode_large;
  if (large.size() < 3) m.decode_large = m.decode_small;
  return m;
}

namespace {

// The sweep DistServe measured before fitting: the (batch, input length) pairs it ran and, per
// (model, tp), the token budget batch x round_up(len, 16) it kept to.
struct ProfilingSweep {
  std::vector<int64_t> batch_sizes;
  std::vector<int64_t> input_lens;
  std::map<std::pair<std::string, int>, int64_t> token_limits;

  bool covers(int64_t batch, int64_t len, int64_t limit) const {
    const auto listed = [](const std::vector<int64_t>& v, int64_t x) {
      return std::find(v.begin(), v.end(), x) != v.end();
    };
    return listed(batch_sizes, batch) && listed(input_lens, len) &&
           batch * ((len + 15) / 16 * 16) <= limit;
  }
};

ProfilingSweep read_sweep(const fs::path& file) {
  const scenarios::Json doc = scenarios::read_json_file(file.string(), "DistServe's profiling sweep");
  ProfilingSweep sweep;
  try {
    sweep.batch_sizes = doc.at("batch_sizes").get<std::vector<int64_t>>();
    sweep.input_lens = doc.at("input_lens").get<std::vector<int64_t>>();
    for (const auto& [model, by_tp] : doc.at("token_limits").items()) {
      for (const auto& [tp, limit] : by_tp.items()) {
        sweep.token_limits[{model, std::stoi(tp)}] = limit.get<int64_t>();
      }
    }
  } catch (const std::exception& e) {
    throw InputError(file.string(), 0,
                     std::string("expected batch_sizes, input_lens and token_limits: ") + e.what());
  }
  return sweep;
}

// KV-cache token capacity of DistServe's engine per (upstream model name, tp) at pp 1.
std::map<std::pair<std::string, int>, int64_t> read_kv_capacity(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw InputError(file.string(), 0, "cannot open DistServe's KV capacities");
  std::map<std::pair<std::string, int>, int64_t> out;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line_no == 1 || line.empty()) continue;  // header: model,tp,pp,max_num_tokens
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) f.push_back(cell);
    try {
      if (f.size() != 4) throw std::invalid_argument("4 columns");
      if (std::stoi(f[2]) == 1) out[{f[0], std::stoi(f[1])}] = std::stoll(f[3]);
    } catch (const std::exception&) {
      throw InputError(file.string(), line_no, "expected model,tp,pp,max_num_tokens");
    }
  }
  return out;
}

DistServeLatencyModel read_model(const scenarios::Json& coef) {
  DistServeLatencyModel m;
  m.prefill = coef.at("prefill").get<std::array<double, 3>>();
  m.decode_small = coef.at("decoding_smallbs").get<std::array<double, 3>>();
  m.decode_large = coef.at("decoding_largebs").get<std::array<double, 3>>();
  m.threshold = coef.at("decoding_large_small_bs_threshold").get<int64_t>();
  return m;
}

models::BatchShape prefill_shape(int64_t batch, int64_t len) {
  models::BatchShape s;
  s.segments.assign(static_cast<size_t>(batch), {len, len, 1});
  return s;
}

models::BatchShape decode_shape(int64_t batch, int64_t context) {
  models::BatchShape s;
  s.segments.assign(static_cast<size_t>(batch), {1, context, 1});
  return s;
}

double predict_ms(const models::IterationCostModel& m, const models::BatchShape& shape) {
  return to_ms(m.iteration_time(shape));
}

// One shape servesim checks: a prefill of one `len`-token prompt, or a decode step of `batch`
// requests at context `len`.
struct CheckPoint {
  bool prefill = true;
  int64_t batch = 1;
  int64_t len = 0;

  std::string label() const {
    return prefill ? fmt::format("prefill 1 x {}", len)
                   : fmt::format("decode {} x ctx {}", batch, len);
  }
  models::BatchShape shape() const { return prefill ? prefill_shape(1, len) : decode_shape(batch, len); }
  double on(const DistServeLatencyModel& m) const {
    return prefill ? m.prefill_ms(1, len) : m.decode_ms(batch, len);
  }
};

struct Case {
  std::string model;     // servesim catalog key
  int tp = 1;
  DistServeLatencyModel reference;
  std::shared_ptr<const models::IterationCostModel> cost;  // servesim's calibrated A100 model
  int64_t token_limit = 0;       // the sweep's batch x round_up(len, 16) budget
  bool limit_from_sweep = true;  // false: absent from the sweep; its KV capacity bounds it
  std::vector<CheckPoint> points;
  int64_t beyond_range = 0;      // checked shapes left out: outside the fitted range
};

// servesim checks each model on prompts of 128-2020 tokens (one request) and decode batches of
// 1-192 at contexts 256 and 1024, keeping the shapes inside the sweep the model was fitted on.
std::vector<Case> read_cases(const scenarios::DataRoot& root, const ProfilingSweep& sweep) {
  const fs::path dir = fs::path(root.root) / "profiles/distserve";
  const fs::path file = dir / "profiler-a100-80g.distserve.json";
  const scenarios::Json doc = scenarios::read_json_file(file.string(), "the DistServe latency models");
  const auto capacity = read_kv_capacity(dir / "max_num_tokens.csv");
  const auto& cat = scenarios::Catalogs::get(root);
  const std::pair<const char*, const char*> models_checked[] = {{"facebook/opt-13b", "opt-13b"},
                                                                {"facebook/opt-66b", "opt-66b"}};
  std::vector<Case> cases;
  for (const auto& [upstream, key] : models_checked) {
    if (!doc.contains(upstream)) continue;
    for (const auto& [tp, coef] : doc[upstream].items()) {
      Case c;
      c.model = key;
      c.tp = std::stoi(tp);
      const models::ModelSpec& spec = cat.models.get(key);
      if (spec.num_attention_heads % c.tp != 0) continue;
      try {
        c.reference = read_model(coef);
      } catch (const std::exception& e) {
        throw InputError(file.string(), 0, fmt::format("{}.{}: {}", upstream, tp, e.what()));
      }
      if (const auto lim = sweep.token_limits.find({upstream, c.tp});
          lim != sweep.token_limits.end()) {
        c.token_limit = lim->second;
      } else {
        const auto cap = capacity.find({upstream, c.tp});
        if (cap == capacity.end()) continue;
        c.token_limit = cap->second;
        c.limit_from_sweep = false;
      }
      const models::Deployment dep{&spec, &cat.gpus.get("a100_80gb_sxm"), c.tp,
                                   models::Dtype::kBf16, models::Dtype::kBf16};
      // DistServe's engine all-reduces with NCCL (no vLLM custom all-reduce kernel).
      scenarios::CostModelChoice choice;
      choice.custom_allreduce = false;
      c.cost = scenarios::make_cost_model(choice, dep, root);
      std::vector<CheckPoint> grid;
      for (int64_t len : {128, 256, 512, 1024, 2020}) grid.push_back({true, 1, len});
      for (int64_t batch : {1, 8, 32, 64, 128, 192}) {
        for (int64_t ctx : {256, 1024}) grid.push_back({false, batch, ctx});
      }
      for (const CheckPoint& p : grid) {
        if (sweep.covers(p.batch, p.len, c.token_limit)) {
          c.points.push_back(p);
        } else {
          ++c.beyond_range;
        }
      }
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

// servesim's predictions over the case's sweep, fitted the way DistServe fitted its engine. A
// decode point is predicted at the mean context of its 16 decode steps.
DistServeLatencyModel fit_over_sweep(const Case& c, const ProfilingSweep& sweep,
                                     const models::IterationCostModel& m) {
  std::vector<DistServeSweepPoint> points;
  for (int64_t batch : sweep.batch_sizes) {
    for (int64_t len : sweep.input_lens) {
      if (!sweep.covers(batch, len, c.token_limit)) continue;
      points.push_back({batch, len, predict_ms(m, prefill_shape(batch, len)),
                        predict_ms(m, decode_shape(batch, len + 8))});
    }
  }
  return fit_distserve_model(points, c.reference.threshold);
}

std::string range_note(const Case& c) {
  return fmt::format("range: batch x round_up(len, 16) <= {} tokens ({}){}", c.token_limit,
                     c.limit_from_sweep ? "DistServe's profiling sweep"
                                        : "absent from the published sweep: its KV capacity",
                     c.beyond_range == 0
                         ? ""
                         : fmt::format("; {} shapes outside it left out", c.beyond_range));
}

// Where DistServe's two decode pieces meet (batch = threshold, context 1024), how far apart they
// are: a large gap means the fit itself is uncertain there.
double decode_piece_gap(const DistServeLatencyModel& m) {
  const double small = decode_piece_ms(m.decode_small, m.threshold, 1024);
  return (decode_piece_ms(m.decode_large, m.threshold, 1024) - small) / small;
}

// Relative errors of a case's points: their mean absolute value, largest, and count beyond a bound.
struct ErrorTally {
  int64_t n = 0;
  double sum = 0, worst = 0;
  int beyond = 0;

  void add(double relative_error, double bound) {
    const double e = std::fabs(relative_error);
    ++n;
    sum += e;
    worst = std::max(worst, e);
    beyond += e > bound ? 1 : 0;
  }
  double mape_pct() const { return n == 0 ? 0.0 : sum / static_cast<double>(n) * 100; }
};

// Prints one case; returns the number of points beyond `bound` (when bounded).
int print_case(const std::string& title, const Case& c, const models::IterationCostModel& m,
               const ProfilingSweep& sweep, double bound, bool bounded, std::ostream& out) {
  const DistServeLatencyModel servesim_fit = fit_over_sweep(c, sweep, m);
  out << title << "\n  " << range_note(c)
      << fmt::format("; DistServe's decode pieces differ by {:+.0f} % where they meet\n",
                     decode_piece_gap(c.reference) * 100);
  out << fmt::format("  {:<22} {:>12} {:>11} {:>8} {:>15} {:>8}  {}\n", "point", "DistServe ms",
                     "servesim ms", "error", "servesim fit ms", "error", "verdict");
  ErrorTally points, fits;
  for (const CheckPoint& p : c.points) {
    const double ref = p.on(c.reference);
    const double predicted = predict_ms(m, p.shape());
    const double point_err = (predicted - ref) / ref;
    const double fit_err = (p.on(servesim_fit) - ref) / ref;
    points.add(point_err, bound);
    fits.add(fit_err, bound);
    out << fmt::format("  {:<22} {:>12.2f} {:>11.2f} {:>+7.1f}% {:>15.2f} {:>+7.1f}%  {}\n",
                       p.label(), ref, predicted, point_err * 100, p.on(servesim_fit),
                       fit_err * 100,
                       !bounded ? "reported" : std::fabs(point_err) <= bound ? "ok" : "FAIL");
  }
  out << fmt::format(
      "  {} points: servesim MAPE {:.1f} %, {} beyond {:.0f} %; servesim fit MAPE {:.1f} %, {} "
      "beyond {:.0f} %\n\n",
      c.points.size(), points.mape_pct(), points.beyond, bound * 100, fits.mape_pct(), fits.beyond,
      bound * 100);
  return bounded ? points.beyond : 0;
}

std::string case_name(const Case& c) { return fmt::format("{} tp {}", c.model, c.tp); }

// DistServe's engine efficiency relative to servesim's tables, fitted on the check points of
// every published-sweep case except `held_out` (none: all of them), minimising the largest
// relative error.
models::EngineEfficiency fit_engine(const std::vector<Case>& cases, const Case* held_out,
                                    double gemm_ridge_tokens) {
  std::vector<models::EngineSample> samples;
  for (const Case& c : cases) {
    if (!c.limit_from_sweep || &c == held_out) continue;
    for (const CheckPoint& p : c.points) {
      const models::BatchShape shape = p.shape();
      samples.push_back({c.cost->breakdown(shape), shape.total_query_tokens(), p.on(c.reference)});
    }
  }
  models::EngineFitOptions options;
  options.gemm_ridge_tokens = gemm_ridge_tokens;
  options.minimax_rounds = 20;
  return models::fit_engine_efficiency(samples, "distserve", options);
}

// Leave one case out: each published-sweep case predicted with the engine efficiency fitted on
// the others. Reported: it shows how far the efficiency carries to a model or TP degree it never
// saw.
void print_cross_validation(const std::vector<Case>& cases, double gemm_ridge_tokens,
                            double bound, std::ostream& out) {
  out << "DistServe engine efficiency, leave one model out (each case predicted with the "
         "efficiency fitted on the other cases; reported):\n";
  out << fmt::format("  {:<12} {:>6} {:>7} {:>7} {:>8}\n", "case", "points", "MAPE%", "max%",
                     fmt::format("> {:.0f}%", bound * 100));
  for (const Case& c : cases) {
    if (!c.limit_from_sweep) continue;
    const auto scaled = models::scale_by_engine(c.cost, fit_engine(cases, &c, gemm_ridge_tokens));
    ErrorTally held_out;
    for (const CheckPoint& p : c.points) {
      const double ref = p.on(c.reference);
      held_out.add((predict_ms(*scaled, p.shape()) - ref) / ref, bound);
    }
    out << fmt::format("  {:<12} {:>6} {:>7.1f} {:>7.1f} {:>8}\n", case_name(c), c.points.size(),
                       held_out.mape_pct(), held_out.worst * 100, held_out.beyond);
  }
  out << "\n";
}

}  // namespace

int distserve_report(const scenarios::DataRoot& root, double bound, std::ostream& out) {
  const fs::path dir = fs::path(root.root) / "profiles/distserve";
  const ProfilingSweep sweep = read_sweep(dir / "profiling_sweep.json");
  const std::vector<Case> cases = read_cases(root, sweep);
  out << "DistServe latency models (A100-80GB). Point by point: servesim's prediction of the "
         "shape; fit against fit: servesim's predictions over DistServe's profiling sweep, "
         "fitted by DistServe's procedure. The bound applies point by point to the "
         "engine-scaled predictions of the models in the published sweep.\n\n";
  // DistServe runs its own kernels: the vLLM-calibrated tables are first compared as they are,
  // then scaled by one engine efficiency (7 factors) fitted on every published-sweep case.
  for (const Case& c : cases) {
    print_case(fmt::format("DistServe latency model: {}, vLLM-calibrated tables as they are "
                           "(reported)",
                           case_name(c)),
               c, *c.cost, sweep, bound, false, out);
  }
  // GEMMs turn compute bound near m = peak FLOP/s / (bytes/s per bf16 weight element).
  const models::GpuSpec& a100 = scenarios::Catalogs::get(root).gpus.get("a100_80gb_sxm");
  const double ridge_tokens = a100.bf16_flops_per_s / a100.mem_bw_bytes_per_s;
  const models::EngineEfficiency engine = fit_engine(cases, nullptr, ridge_tokens);
  std::vector<std::string> fitted;
  size_t fit_points = 0;
  for (const Case& c : cases) {
    if (!c.limit_from_sweep) continue;
    fitted.push_back(case_name(c));
    fit_points += c.points.size();
  }
  out << fmt::format(
      "DistServe engine efficiency fitted on {} ({} points), minimising the largest relative "
      "error: {}\n\n",
      fmt::join(fitted, ", "), fit_points, engine.describe());
  print_cross_validation(cases, ridge_tokens, bound, out);
  int failed = 0;
  for (const Case& c : cases) {
    const auto scaled = models::scale_by_engine(c.cost, engine);
    failed += print_case(
        fmt::format("DistServe latency model: {}, x DistServe engine efficiency ({})",
                    case_name(c),
                    c.limit_from_sweep ? "fitted" : "held out; reported: not in the published sweep"),
        c, *scaled, sweep, bound, c.limit_from_sweep, out);
  }
  return failed;
}

}  // namespace servesim::app
