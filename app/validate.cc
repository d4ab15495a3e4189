#include "app/validate.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "app/distserve_check.h"
#include "models/calibration/fidelity.h"
#include "models/cost/gemm_efficiency.h"
#include "models/cost/profiled_cost_model.h"
#include "profiles/profile_tables.h"
#include "scenarios/cost_models.h"
#include "core/error.h"

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

// GEMM tables against their GPU's peaks: each dtype's compute-bound efficiency, a lower precision
// slower per unit of work than a higher one in the same table, and a GPU with the higher peak
// slower than another on the same shapes of the same source (gemm_efficiency.h). Returns the
// number of inversions (flags, not failures: the tables are measurements).
int efficiency_report(const scenarios::DataRoot& root, const ValidateOptions& options,
                      std::ostream& out, scenarios::Json* json) {
  const auto& cat = scenarios::Catalogs::get(root);
  out << fmt::format("GEMM efficiency: achieved FLOP/s over the dtype's peak on compute-bound "
                     "shapes (m, n, k >= {})\n",
                     models::kComputeBoundDim);
  out << fmt::format("{:<14} {:<34} {:<11} {:>6} {:>8} {:>6}\n", "gpu", "source", "dtype", "rows",
                     "median%", "max%");
  struct Table {
    std::string gpu, source;
    const profiles::Profile* profile;
  };
  std::vector<Table> tables;
  int inversions = 0;
  for (const std::string& gpu : selected_gpus(root, options)) {
    if (!cat.gpus.all().count(gpu)) {
      out << fmt::format("{:<14} (not in the GPU catalog: no peaks to compare with)\n", gpu);
      continue;
    }
    const models::GpuSpec& spec = cat.gpus.get(gpu);
    for (const profiles::Profile& p : scenarios::gpu_profiles(root, gpu)) {
      if (p.gemm.empty()) continue;
      const std::string source = fs::path(p.dir).filename().string();
      tables.push_back({gpu, source, &p});
      for (const models::GemmEfficiency& e : models::gemm_efficiency(p.gemm, spec)) {
        out << fmt::format("{:<14} {:<34} {:<11} {:>6} {:>8.1f} {:>6.1f}\n", gpu, source, e.dtype,
                           e.rows, e.median * 100, e.max * 100);
        if (json) {
          (*json)["efficiency"].push_back({{"gpu", gpu}, {"source", source}, {"dtype", e.dtype},
                                           {"rows", e.rows}, {"median", e.median},
                                           {"max", e.max}});
        }
      }
      for (const models::PrecisionInversion& v : models::precision_inversions(p.gemm, spec)) {
        const bool repriced = models::reprices_when_inverted(spec, v.low);
        out << fmt::format(
            "  INVERSION {} {}: {} takes x{:.2f} the time of {} on {} shared shapes (the peaks "
            "say x{:.2f}){}\n",
            gpu, source, v.low, v.ratio.median, v.high, v.ratio.shapes, v.expected,
            repriced ? "; the cost model prices it from the bf16 kernel" : "");
        inversions++;
        if (json) {
          (*json)["inversions"].push_back(
              {{"kind", "precision"}, {"gpu", gpu}, {"source", source}, {"low", v.low},
               {"high", v.high}, {"shapes", v.ratio.shapes}, {"time_ratio", v.ratio.median},
               {"expected", v.expected}, {"repriced", repriced}});
        }
      }
    }
  }
  // Newer against older: the same source on two GPUs, the one with the higher peak for the dtype
  // slower on the shapes both measured.
  for (const Table& a : tables) {
    for (const Table& b : tables) {
      if (a.source != b.source || a.gpu == b.gpu) continue;
      std::set<std::string> dtypes;
      for (const profiles::GemmRow& r : a.profile->gemm) dtypes.insert(r.dtype);
      for (const std::string& dtype : dtypes) {
        const double peak_a = models::gemm_table_peak(cat.gpus.get(a.gpu), dtype);
        const double peak_b = models::gemm_table_peak(cat.gpus.get(b.gpu), dtype);
        if (peak_b <= 0 || peak_a <= peak_b) continue;
        const auto r =
            models::compute_bound_time_ratio(a.profile->gemm, dtype, b.profile->gemm, dtype);
        if (!r || r->median <= 1) continue;
        out << fmt::format(
            "  INVERSION {} {}: {} ({:.0f} TFLOP/s peak) takes x{:.2f} the time of {} ({:.0f}) on "
            "{} shared shapes\n",
            a.source, dtype, a.gpu, peak_a / 1e12, r->median, b.gpu, peak_b / 1e12, r->shapes);
        inversions++;
        if (json) {
          (*json)["inversions"].push_back(
              {{"kind", "gpu"}, {"source", a.source}, {"dtype", dtype}, {"gpu", a.gpu},
               {"older_gpu", b.gpu}, {"shapes", r->shapes}, {"time_ratio", r->median}});
        }
      }
    }
  }
  out << fmt::format("{} inversion(s) flagged\n\n", inversions);
  if (json) (*json)["inversions_flagged"] = inversions;
  return inversions;
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
  scenarios::Json tables = {{"efficiency", scenarios::Json::array()},
                            {"inversions", scenarios::Json::array()}};
  if (options.efficiency) efficiency_report(root, options, out, j ? &tables : nullptr);
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
          {"forward_passes", forward},
          {"gemm_tables", options.efficiency ? tables : scenarios::Json(nullptr)}};
  }
  return failed;
}

}  // namespace servesim::app
