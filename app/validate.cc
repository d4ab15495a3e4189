#include "app/validate.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "models/engine_efficiency.h"
#include "models/fidelity.h"
#include "profiles/profile_tables.h"
#include "scenarios/cost_models.h"
#include "sim/core/error.h"

namespace servesim::app {
namespace fs = std::filesystem;

namespace {

double loo_bound(const std::string& op, const ValidateBounds& b) {
  if (op == "gemm") return b.loo_gemm_mape;
  if (op == "attention_prefill") return b.loo_prefill_mape;
  if (op == "attention_decode") return b.loo_decode_mape;
  if (op == "collective") return b.loo_collective_mape;
  return 0;  // reported, not bounded
}

// Leave-one-out over every measured table. Returns the number of failing cells.
int leave_one_out_report(const scenarios::DataRoot& root, const ValidateOptions& options,
                         const ValidateBounds& bounds, std::ostream& out) {
  const std::string profiles_root = (fs::path(root.root) / "profiles").string();
  out << "Leave-one-out: each measured point predicted from the other points of its table\n";
  out << fmt::format("{:<14} {:<20} {:<18} {:<28} {:>6} {:>5} {:>7} {:>7} {:>8} {:>6} {:>6}  {}\n",
                     "gpu", "source", "operator", "variant", "points", "excl", "MAPE%", "p90%",
                     "max%", "extr%", "bound%", "verdict");
  int failed = 0, cells = 0;
  for (const std::string& gpu : profiles::profiled_gpus(profiles_root)) {
    if (!options.gpus.empty() &&
        std::find(options.gpus.begin(), options.gpus.end(), gpu) == options.gpus.end()) {
      continue;
    }
    for (const profiles::Profile& p : scenarios::gpu_profiles(root, gpu)) {
      for (const models::FidelityCell& c : models::leave_one_out(p)) {
        const double bound = loo_bound(c.op, bounds);
        const bool pass = bound == 0 || c.mape_pct <= bound * 100;
        failed += pass ? 0 : 1;
        cells++;
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
                 std::ostream& out) {
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
  return failed;
}

double predict_ms(const models::IterationCostModel& m, const models::BatchShape& shape) {
  return to_ms(m.iteration_time(shape));
}

// DOPD Table I: prefill time of LLaMa-3.3-70B-FP8 on one H100 (vLLM).
int dopd_table1(const scenarios::DataRoot& root, const ValidateBounds& bounds, std::ostream& out) {
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
      checks, bounds.iteration_error, out);
}

// DistServe's latency models fitted to A100-80GB measurements:
//   prefill_ms = a + b * sum(len) + c * sum(len^2); decode_ms = a + b * sum(ctx) + c * batch
// (separate decode coefficients below/above decoding_large_small_bs_threshold).
struct DistServePoint {
  std::string label;
  models::BatchShape shape;
  double reference_ms = 0;
};

struct DistServeCase {
  std::string model;  // catalog key
  int tp = 1;
  std::shared_ptr<const models::IterationCostModel> cost;  // servesim's calibrated A100 model
  std::vector<DistServePoint> points;
  int64_t kv_capacity_tokens = 0;  // the engine's KV capacity (max_num_tokens.csv, pp 1)
  int64_t beyond_capacity = 0;     // decode points left out: more context than the KV holds
};

// KV-cache token capacity of DistServe's engine per (upstream model name, tp) at pp 1.
std::map<std::pair<std::string, int>, int64_t> distserve_kv_capacity(const fs::path& file) {
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

std::vector<DistServeCase> distserve_cases(const scenarios::DataRoot& root) {
  const fs::path file = fs::path(root.root) / "profiles/distserve/profiler-a100-80g.distserve.json";
  std::ifstream in(file);
  if (!in) throw InputError(file.string(), 0, "cannot open the DistServe latency models");
  const nlohmann::json doc = nlohmann::json::parse(in);
  const auto capacity =
      distserve_kv_capacity(fs::path(root.root) / "profiles/distserve/max_num_tokens.csv");
  const auto& cat = scenarios::Catalogs::get(root);
  const std::pair<const char*, const char*> models_checked[] = {{"facebook/opt-13b", "opt-13b"},
                                                                {"facebook/opt-66b", "opt-66b"}};
  std::vector<DistServeCase> cases;
  for (const auto& [upstream, key] : models_checked) {
    if (!doc.contains(upstream)) continue;
    for (auto it = doc[upstream].begin(); it != doc[upstream].end(); ++it) {
      DistServeCase c;
      c.model = key;
      c.tp = std::stoi(it.key());
      const models::ModelSpec& spec = cat.models.get(key);
      if (spec.num_attention_heads % c.tp != 0) continue;
      const models::Deployment dep{&spec, &cat.gpus.get("a100_80gb_sxm"), c.tp,
                                   models::Dtype::kBf16, models::Dtype::kBf16};
      // DistServe's engine all-reduces with NCCL (no vLLM custom all-reduce kernel).
      scenarios::CostModelChoice choice;
      choice.custom_allreduce = false;
      c.cost = scenarios::make_cost_model(choice, dep, root);
      const auto cap = capacity.find({upstream, c.tp});
      c.kv_capacity_tokens = cap == capacity.end() ? 0 : cap->second;
      const auto& coef = it.value();
      const auto& pre = coef["prefill"];
      for (int64_t len : {128, 256, 512, 1024, 2048}) {
        DistServePoint p;
        p.label = fmt::format("prefill 1 x {}", len);
        p.shape.segments = {{len, len, 1}};
        p.reference_ms = pre[0].get<double>() + pre[1].get<double>() * len +
                         pre[2].get<double>() * static_cast<double>(len) * len;
        c.points.push_back(std::move(p));
      }
      const int64_t threshold = coef["decoding_large_small_bs_threshold"].get<int64_t>();
      for (int64_t batch : {1, 8, 32, 64, 128, 256}) {
        for (int64_t ctx : {256, 1024}) {
          // The fits come from batches the engine could hold: a batch with more context than its
          // KV capacity is outside their range.
          if (c.kv_capacity_tokens > 0 && batch * ctx > c.kv_capacity_tokens) {
            ++c.beyond_capacity;
            continue;
          }
          const auto& d = batch < threshold ? coef["decoding_smallbs"] : coef["decoding_largebs"];
          DistServePoint p;
          p.label = fmt::format("decode {} x ctx {}", batch, ctx);
          p.shape.segments.assign(static_cast<size_t>(batch), {1, ctx, 1});
          p.reference_ms = d[0].get<double>() + d[1].get<double>() * batch * ctx +
                           d[2].get<double>() * batch;
          c.points.push_back(std::move(p));
        }
      }
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

// DistServe runs its own kernels, so servesim's vLLM-calibrated tables are first compared as they
// are (reported), then scaled by an engine-efficiency profile fitted on OPT-13B (every TP degree)
// and checked on OPT-66B, which the fit never saw. The bound applies to the scaled predictions.
std::string range_note(const DistServeCase& c) {
  if (c.beyond_capacity == 0) return "";
  return fmt::format("; {} decode points beyond its KV capacity of {} tokens left out",
                     c.beyond_capacity, c.kv_capacity_tokens);
}

int distserve_models(const scenarios::DataRoot& root, const ValidateBounds& bounds,
                     std::ostream& out) {
  const std::vector<DistServeCase> cases = distserve_cases(root);
  const auto checks_of = [](const DistServeCase& c, const models::IterationCostModel& m) {
    std::vector<PointCheck> checks;
    for (const DistServePoint& p : c.points) {
      checks.push_back({p.label, p.reference_ms, predict_ms(m, p.shape)});
    }
    return checks;
  };
  std::vector<models::EngineSample> fit_set;
  for (const DistServeCase& c : cases) {
    print_checks(fmt::format("DistServe latency model: {} tp {} on A100-80GB, vLLM-calibrated "
                             "tables as they are (reported){}",
                             c.model, c.tp, range_note(c)),
                 checks_of(c, *c.cost), bounds.iteration_error, out);
    if (c.model != "opt-13b") continue;
    for (const DistServePoint& p : c.points) fit_set.push_back({c.cost->breakdown(p.shape), p.reference_ms});
  }
  if (fit_set.empty()) return 0;
  const models::EngineEfficiency engine = models::fit_engine_efficiency(fit_set, "distserve");
  out << fmt::format(
      "DistServe engine efficiency fitted on OPT-13B (tp 1/2/4, {} points): gemm x{:.2f}, prefill "
      "attention x{:.2f}, decode attention x{:.2f}, all-reduce x{:.2f}, elementwise x{:.2f}, "
      "overhead x{:.2f}\n\n",
      fit_set.size(), engine.gemm, engine.attention_prefill, engine.attention_decode,
      engine.allreduce, engine.elementwise, engine.overhead);
  int failed = 0;
  for (const DistServeCase& c : cases) {
    const auto scaled = models::scale_by_engine(c.cost, engine);
    failed += print_checks(
        fmt::format("DistServe latency model: {} tp {} on A100-80GB, x DistServe engine efficiency "
                    "({}){}",
                    c.model, c.tp, c.model == "opt-13b" ? "fitted here" : "held out",
                    range_note(c)),
        checks_of(c, *scaled), bounds.iteration_error, out);
  }
  return failed;
}

// Whole forward passes measured by servesim-profile against the profiled and roofline models.
void forward_passes(const scenarios::DataRoot& root, std::ostream& out) {
  for (const profiles::Profile& p : scenarios::gpu_profiles(root, "h100_sxm")) {
    if (p.forward.empty()) continue;
    const auto& cat = scenarios::Catalogs::get(root);
    const models::Deployment dep{&cat.models.get(p.meta.model), &cat.gpus.get(p.meta.gpu), p.meta.tp,
                                 models::Dtype::kBf16, models::Dtype::kBf16};
    models::RooflineParams no_overhead;
    no_overhead.iteration_overhead = Duration{0};
    const auto profiled = scenarios::make_cost_model({"profiled", no_overhead}, dep, root);
    const auto roofline = scenarios::make_cost_model({"roofline", no_overhead}, dep, root);
    out << fmt::format("Forward passes of {} measured on {} ({}), per-iteration overhead 0:\n",
                       p.meta.model, p.meta.gpu_name, p.dir);
    out << fmt::format("  {:<8} {:>5} {:>6} {:>7} {:>5} {:>12} {:>12} {:>8} {:>12} {:>8}\n", "kind",
                       "batch", "q", "context", "graph", "measured ms", "profiled ms", "error",
                       "roofline ms", "error");
    double sum = 0, sum_ref = 0;
    const auto rows = models::forward_check(p.forward, *profiled, roofline.get());
    for (const auto& r : rows) {
      out << fmt::format("  {:<8} {:>5} {:>6} {:>7} {:>5} {:>12.2f} {:>12.2f} {:>+7.1f}% {:>12.2f} "
                         "{:>+7.1f}%\n",
                         r.row.kind, r.row.batch, r.row.q_tokens, r.row.context_tokens,
                         r.row.graph ? 1 : 0, r.measured_s * 1e3, r.predicted_s * 1e3, r.error_pct,
                         r.reference_s * 1e3, r.reference_error_pct);
      sum += std::fabs(r.error_pct);
      sum_ref += std::fabs(r.reference_error_pct);
    }
    out << fmt::format("  MAPE: profiled {:.1f} %, roofline {:.1f} %\n\n",
                       rows.empty() ? 0.0 : sum / rows.size(),
                       rows.empty() ? 0.0 : sum_ref / rows.size());
  }
}

}  // namespace

int run_validation(const scenarios::DataRoot& root, const ValidateOptions& options,
                   const ValidateBounds& bounds, std::ostream& out) {
  int failed = 0;
  if (options.leave_one_out) failed += leave_one_out_report(root, options, bounds, out);
  if (options.iterations) {
    failed += dopd_table1(root, bounds, out);
    failed += distserve_models(root, bounds, out);
    forward_passes(root, out);
  }
  out << fmt::format("validate: {} check(s) failed\n", failed);
  return failed;
}

}  // namespace servesim::app
