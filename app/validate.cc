#include "app/validate.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "app/distserve_check.h"
#include "models/fidelity.h"
#include "models/profiled_cost_model.h"
#include "profiles/profile_tables.h"
#include "scenarios/cost_models.h"
#include "sim/core/error.h"

namespace servesim::app {
namespace fs = std::filesystem;

namespace {

// The GPUs with profiles under the data root that the report is limited to (all when none is
// named).
std::vector<std::string> selected_gpus(const scenarios::DataRoot& root,
                                       const ValidateOptions& options) {
  std::vector<std::string> gpus =
      profiles::profiled_gpus((fs::path(root.root) / "profiles").string());
  std::erase_if(gpus, [&](const std::string& gpu) {
    return !options.gpus.empty() &&
           std::find(options.gpus.begin(), options.gpus.end(), gpu) == options.gpus.end();
  });
  return gpus;
}

double loo_bound(const std::string& op, const ValidateBounds& b) {
  if (op == "gemm") return b.loo_gemm_mape;
  if (op == "attention_prefill") return b.loo_prefill_mape;
  if (op == "attention_decode") return b.loo_decode_mape;
  if (op == "collective") return b.loo_collective_mape;
  return 0;  // reported, not bounded
}

// Leave-one-out over every measured table. Returns the number of failing cells.
int leave_one_out_report(const scenarios::DataRoot& root, const ValidateOptions& options,
                         const ValidateBounds& bounds, std::ostream& out, scenarios::Json* json) {
  out << "Leave-one-out: each measured point predicted from the other points of its table\n";
  out << fmt::format("{:<14} {:<20} {:<18} {:<28} {:>6} {:>5} {:>7} {:>7} {:>8} {:>6} {:>6}  {}\n",
                     "gpu", "source", "operator", "variant", "points", "excl", "MAPE%", "p90%",
                     "max%", "extr%", "bound%", "verdict");
  int failed = 0, cells = 0;
  for (const std::string& gpu : selected_gpus(root, options)) {
    for (const profiles::Profile& p : scenarios::gpu_profiles(root, gpu)) {
      for (const models::FidelityCell& c : models::leave_one_out(p)) {
        const double bound = loo_bound(c.op, bounds);
        const bool pass = bound == 0 || c.mape_pct <= bound * 100;
        failed += pass ? 0 : 1;
        cells++;
        if (json) {
          (*json)["cells"].push_back(
              {{"gpu", c.gpu},
               {"source", c.source},
               {"operator", c.op},
               {"variant", c.variant},
               {"points", c.points},
               {"excluded", c.excluded},
               {"mape_pct", c.mape_pct},
               {"p90_ape_pct", c.p90_ape_pct},
               {"max_ape_pct", c.max_ape_pct},
               {"extrapolated_share", c.extrapolated_share},
               {"bound_pct", bound > 0 ? scenarios::Json(bound * 100) : scenarios::Json(nullptr)},
               {"verdict", bound == 0 ? "reported"
                           : pass     ? "ok"
                                      : "FAIL"}});
        }
        out << fmt::format(
            "{:<14} {:<20} {:<18} {:<28} {:>6} {:>5} {:>7.2f} {:>7.2f} {:>8.2f} {:>6.1f} {:>6}  {}\n",
            c.gpu, c.source, c.op, c.variant, c.points, c.excluded, c.mape_pct, c.p90_ape_pct,
            c.max_ape_pct, c.extrapolated_share * 100,
            bound > 0 ? fmt::format("{:.0f}", bound * 100) : "-",
            bound == 0 ? "reported" : pass ? "ok" : "FAIL");
      }
    }
  }
  out << fmt::format("{} cells, {} over their bound\n\n", cells, failed);
  if (json) (*json)["failed"] = failed;
  return failed;
}

struct PointCheck {
  std::string label;
  double reference_ms = 0;
  double predicted_ms = 0;
  double error() const { return (predicted_ms - reference_ms) / reference_ms; }
};

// Prints checks and returns how many exceed `bound` (relative error).
int print_checks(const std::string& title, const std::vector<PointCheck>& checks, double bound,
                 std::ostream& out, scenarios::Json* json) {
  out << title << "\n";
  out << fmt::format("  {:<44} {:>12} {:>12} {:>8}  {}\n", "point", "reference ms", "servesim ms",
                     "error", "verdict");
  int failed = 0;
  double sum_abs = 0;
  for (const PointCheck& c : checks) {
    const bool pass = std::fabs(c.error()) <= bound;
    failed += pass ? 0 : 1;
    sum_abs += std::fabs(c.error());
    out << fmt::format("  {:<44} {:>12.2f} {:>12.2f} {:>+7.1f}%  {}\n", c.label, c.reference_ms,
                       c.predicted_ms, c.error() * 100, pass ? "ok" : "FAIL");
  }
  out << fmt::format("  {} points, MAPE {:.1f} %, {} beyond {:.0f} %\n\n", checks.size(),
                     checks.empty() ? 0.0 : sum_abs / checks.size() * 100, failed, bound * 100);
  if (json) {
    scenarios::Json points = scenarios::Json::array();
    for (const PointCheck& c : checks) {
      points.push_back({{"label", c.label},
                        {"reference_ms", c.reference_ms},
                        {"predicted_ms", c.predicted_ms},
                        {"error", c.error()},
                        {"ok", std::fabs(c.error()) <= bound}});
    }
    json->push_back({{"title", title},
                     {"bound", bound},
                     {"mape", checks.empty() ? 0.0 : sum_abs / checks.size()},
                     {"failed", failed},
                     {"points", points}});
  }
  return failed;
}

double predict_ms(const models::IterationCostModel& m, const models::BatchShape& shape) {
  return to_ms(m.iteration_time(shape));
}

// DOPD Table I: prefill time of LLaMa-3.3-70B-FP8 on one H100 (vLLM).
int dopd_table1(const scenarios::DataRoot& root, const ValidateBounds& bounds, std::ostream& out,
                scenarios::Json* json) {
  const auto& cat = scenarios::Catalogs::get(root);
  const models::Deployment dep{&cat.models.get("llama-3.3-70b-instruct"), &cat.gpus.get("h100_sxm"),
                               1, models::Dtype::kFp8, models::Dtype::kBf16};
  const auto model = scenarios::make_cost_model({}, dep, root);
  const std::pair<int64_t, double> points[] = {{100, 36}, {200, 46}, {700, 125}, {1200, 193},
                                               {1700, 269}};
  std::vector<PointCheck> checks;
  for (const auto& [prompt, ms] : points) {
    models::BatchShape shape;
    shape.segments = {{prompt, prompt, 1}};
    checks.push_back({fmt::format("prefill {} tokens", prompt), ms, predict_ms(*model, shape)});
  }
  return print_checks(
      fmt::format("DOPD Table I: LLaMa-3.3-70B-FP8 prefill on one H100 ({})", model->describe()),
      checks, bounds.iteration_error, out, json);
}

// Whole forward passes measured by servesim-profile, on every GPU with forward tables, against
// the profiled model built from the operator tables of the same harness run alone (the pass is
// made of those kernels), the profiled model as a run builds it from all of that GPU's tables
// (where engine-measured attention and quantized GEMMs come first), and the roofline.
void forward_passes(const scenarios::DataRoot& root, const ValidateOptions& options,
                    std::ostream& out, scenarios::Json* json) {
  const auto& cat = scenarios::Catalogs::get(root);
  for (const std::string& gpu : selected_gpus(root, options)) {
    for (const profiles::Profile& p : scenarios::gpu_profiles(root, gpu)) {
      if (p.forward.empty()) continue;
      const models::Deployment dep{&cat.models.get(p.meta.model), &cat.gpus.get(p.meta.gpu),
                                   p.meta.tp, models::Dtype::kBf16, models::Dtype::kBf16};
      models::RooflineParams no_overhead;
      no_overhead.iteration_overhead = Duration{0};
      models::ProfiledParams own_params;
      own_params.roofline = no_overhead;
      const auto own = models::make_profiled_cost_model(dep, {p}, own_params);
      const auto as_run = scenarios::make_cost_model({"profiled", no_overhead}, dep, root);
      const auto roofline = scenarios::make_cost_model({"roofline", no_overhead}, dep, root);
      const auto run_rows = models::forward_check(p.forward, *as_run);
      out << fmt::format("Forward passes of {} measured on {} ({}), per-iteration overhead 0:\n",
                         p.meta.model, p.meta.gpu_name, p.dir);
      out << fmt::format(
          "  {:<8} {:>5} {:>6} {:>7} {:>5} {:>12} {:>12} {:>8} {:>12} {:>8} {:>12} "
          "{:>8}\n",
          "kind", "batch", "q", "context", "graph", "measured ms", "own tbl ms", "error",
          "as run ms", "error", "roofline ms", "error");
      double sum = 0, sum_run = 0, sum_ref = 0;
      const auto rows = models::forward_check(p.forward, *own, roofline.get());
      for (size_t i = 0; i < rows.size(); ++i) {
        const models::ForwardCheckRow& r = rows[i];
        const double run_ms = run_rows[i].predicted_s * 1e3;
        const double run_err = run_rows[i].error_pct;
        out << fmt::format(
            "  {:<8} {:>5} {:>6} {:>7} {:>5} {:>12.2f} {:>12.2f} {:>+7.1f}% {:>12.2f} "
            "{:>+7.1f}% {:>12.2f} {:>+7.1f}%\n",
            r.row.kind, r.row.batch, r.row.q_tokens, r.row.context_tokens, r.row.graph ? 1 : 0,
            r.measured_s * 1e3, r.predicted_s * 1e3, r.error_pct, run_ms, run_err,
            r.reference_s * 1e3, r.reference_error_pct);
        sum += std::fabs(r.error_pct);
        sum_run += std::fabs(run_err);
        sum_ref += std::fabs(r.reference_error_pct);
        if (json) {
          json->push_back({{"model", p.meta.model},
                           {"gpu", p.meta.gpu},
                           {"kind", r.row.kind},
                           {"batch", r.row.batch},
                           {"q_tokens", r.row.q_tokens},
                           {"context_tokens", r.row.context_tokens},
                           {"graph", r.row.graph},
                           {"measured_ms", r.measured_s * 1e3},
                           {"profiled_ms", r.predicted_s * 1e3},
                           {"profiled_error_pct", r.error_pct},
                           {"as_run_ms", run_ms},
                           {"as_run_error_pct", run_err},
                           {"roofline_ms", r.reference_s * 1e3},
                           {"roofline_error_pct", r.reference_error_pct}});
        }
      }
      const double n = rows.empty() ? 1.0 : static_cast<double>(rows.size());
      out << fmt::format("  MAPE: own tables {:.1f} %, as run {:.1f} %, roofline {:.1f} %\n\n",
                         sum / n, sum_run / n, sum_ref / n);
    }
  }
}

}  // namespace

int run_validation(const scenarios::DataRoot& root, const ValidateOptions& options,
                   const ValidateBounds& bounds, std::ostream& out) {
  int failed = 0;
  scenarios::Json loo = {{"cells", scenarios::Json::array()}, {"failed", 0}};
  scenarios::Json checks = scenarios::Json::array();
  scenarios::Json forward = scenarios::Json::array();
  int distserve_failed = 0;
  scenarios::Json* j = options.json;
  if (options.leave_one_out)
    failed += leave_one_out_report(root, options, bounds, out, j ? &loo : nullptr);
  if (options.iterations) {
    failed += dopd_table1(root, bounds, out, j ? &checks : nullptr);
    distserve_failed = distserve_report(root, bounds.iteration_error, out);
    failed += distserve_failed;
    forward_passes(root, options, out, j ? &forward : nullptr);
  }
  out << fmt::format("validate: {} check(s) failed\n", failed);
  if (j) {
    *j = {{"command", "validate"},
          {"failed", failed},
          {"leave_one_out", options.leave_one_out ? loo : scenarios::Json(nullptr)},
          {"iteration_checks", checks},
          {"distserve", options.iterations ? scenarios::Json{{"failed", distserve_failed}}
                                           : scenarios::Json(nullptr)},
          {"forward_passes", forward}};
  }
  return failed;
}

}  // namespace servesim::app
