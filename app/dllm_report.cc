// `servesim dllm-report`: the dLLM-Serve paper's experiments, each printed next to the paper's
// numbers. Every run is a shipped scenario under scenarios/dllm/ plus the overrides printed with
// the table, so `servesim run <file> --set ...` reproduces any cell.
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <array>

#include <fmt/format.h>

#include "app/dllm_run.h"

namespace servesim::app {
namespace {

const char* const kWorkloads[] = {"livebench", "burst", "osc"};
const char* const kBaselines[] = {"dllm-cache", "sparse-dllm", "fast-dllm"};

struct Cell {
  bool oom = false;
  double tok_s = 0, latency_s = 0, std_s = 0, span_s = 0;
};

class Runner {
 public:
  Runner(const scenarios::DataRoot& root, int64_t baseline_max_batch)
      : root_(root), baseline_max_batch_(baseline_max_batch) {}

  // The policy object of baseline `name` (the file's policy is dllm-serve's), its static batch
  // capped at `max_batch` (0: the largest that fits; -1: the --baseline-batch convention).
  std::string baseline_policy(const std::string& name, int64_t max_batch = -1) const {
    if (max_batch < 0) max_batch = baseline_max_batch_;
    if (max_batch <= 0) return fmt::format("{{\"type\":\"{}\"}}", name);
    return fmt::format("{{\"type\":\"{}\",\"max_batch_size\":{}}}", name, max_batch);
  }
  int64_t baseline_max_batch() const { return baseline_max_batch_; }
  // How the baselines batch, for the table headers.
  std::string baseline_batching() const {
    if (baseline_max_batch_ <= 0) return "baselines at the largest static batch that fits";
    if (baseline_max_batch_ == 1) {
      return "baselines one request at a time, at most 1 per batch: the paper's convention "
             "(--baseline-batch 1)";
    }
    return fmt::format("baselines at static batches of at most {} (--baseline-batch)",
                       baseline_max_batch_);
  }

  // Runs scenarios/dllm/<gpu>_<workload>.json with `policy` (a JSON object replacing the file's
  // policy for the baselines; empty = the file's dllm-serve policy) and extra overrides.
  Cell run(const std::string& gpu, const std::string& workload, const std::string& policy,
           std::vector<std::string> overrides) {
    const std::string file =
        (std::filesystem::path(root_.root) / "scenarios/dllm" / (gpu + "_" + workload + ".json"))
            .string();
    if (!policy.empty()) overrides.insert(overrides.begin(), "policy=" + policy);
    const scenarios::Scenario s = scenarios::load_scenario(file, overrides, root_);
    const DllmOutcome o = run_dllm(s, root_, "");
    if (cost_models_.emplace(o.cost_model).second) notes_.push_back(o.cost_model);
    const std::string source = o.workload.substr(0, o.workload.find(", Poisson"));
    if (workloads_.emplace(source).second) notes_.push_back(o.workload);
    Cell c;
    c.oom = !o.oom.empty();
    c.tok_s = o.metrics.throughput_tok_s;
    c.latency_s = o.metrics.mean_latency_s;
    c.std_s = o.metrics.std_latency_s;
    c.span_s = o.metrics.span_s();
    return c;
  }
  void print_notes(std::ostream& out) {
    out << "inputs:\n";
    for (const auto& n : notes_) out << "  " << n << "\n";
    notes_.clear();
  }

 private:
  const scenarios::DataRoot& root_;
  int64_t baseline_max_batch_;
  std::set<std::string> cost_models_, workloads_;
  std::vector<std::string> notes_;
};

std::string verdict(bool ok) { return ok ? "met" : "NOT MET"; }

std::string fmt_cell(const Cell& c, const char* f = "{:.2f}") {
  return c.oom ? std::string("OOM") : fmt::format(fmt::runtime(f), c.tok_s);
}

// dLLM-Serve's per-request host cost per pass (dllm::kDllmServeRequestOverhead), fitted on ONE
// cell: the request_overhead (whole microseconds, by bisection; throughput falls as it grows)
// at which dllm-serve delivers the paper's L40S LiveBench throughput. Prints the fit beside the
// shipped default; the tables that follow are the held-out check.
void stack_fit(Runner& run, std::ostream& out) {
  constexpr double kPaperTokS = 90.17;  // Table 4, L40S, LiveBench, dLLM-Serve
  std::map<int64_t, double> simulated;  // request_overhead (us) -> tok/s, each simulated once
  const auto tok_s = [&](int64_t us) {
    auto it = simulated.find(us);
    if (it == simulated.end()) {
      const std::string knob = fmt::format("policy.request_overhead={}us", us);
      it = simulated.emplace(us, run.run("l40s", "livebench", "", {knob}).tok_s).first;
    }
    return it->second;
  };
  int64_t lo = 0, hi = 20'000;  // tok_s(lo) >= paper > tok_s(hi), or the fit is at a bound
  if (tok_s(lo) <= kPaperTokS) {
    hi = lo;
  } else if (tok_s(hi) >= kPaperTokS) {
    lo = hi;
  } else {
    while (hi - lo > 1) {
      const int64_t mid = (lo + hi) / 2;
      (tok_s(mid) > kPaperTokS ? lo : hi) = mid;
    }
  }
  const int64_t fit = std::abs(tok_s(lo) - kPaperTokS) <= std::abs(tok_s(hi) - kPaperTokS) ? lo : hi;
  const double shipped_ms = to_ms(dllm::kDllmServeRequestOverhead);
  const double at_shipped = run.run("l40s", "livebench", "", {}).tok_s;
  out << fmt::format(
      "dLLM-Serve stack: {:.3f} ms of host time per request per pass fitted on ONE cell (L40S "
      "LiveBench, paper {:.2f} tok/s: {:.2f} with the fit); shipped default {:.3f} ms "
      "(policy.request_overhead), giving {:.2f} tok/s there ({:+.1f} % in-sample). Every other "
      "cell below is held out.\n",
      static_cast<double>(fit) / 1000.0, kPaperTokS, tok_s(fit), shipped_ms, at_shipped,
      (at_shipped / kPaperTokS - 1) * 100);
}

void table4(Runner& run, std::ostream& out) {
  // Paper Table 4 (L40S, 1.0 req/s): latency s / tok/s / speedup vs Sparse-dLLM.
  const std::map<std::string, std::map<std::string, std::array<double, 3>>> paper = {
      {"livebench",
       {{"dllm-cache", {419.17, 32.52, 1.01}}, {"sparse-dllm", {435.18, 32.26, 1.00}},
        {"fast-dllm", {241.19, 56.46, 1.75}}, {"dllm-serve", {218.50, 90.17, 2.79}}}},
      {"burst",
       {{"dllm-cache", {6766.53, 33.07, 0.97}}, {"sparse-dllm", {6466.96, 34.23, 1.00}},
        {"fast-dllm", {3158.38, 61.26, 1.79}}, {"dllm-serve", {1551.40, 106.95, 3.12}}}},
      {"osc",
       {{"dllm-cache", {6898.20, 32.62, 0.99}}, {"sparse-dllm", {6791.42, 32.87, 1.00}},
        {"fast-dllm", {3408.36, 58.23, 1.77}}, {"dllm-serve", {1849.79, 94.32, 2.87}}}}};
  out << "== Table 4: L40S, LLaDA-8B-Instruct, 1.0 req/s (scenarios/dllm/l40s_<workload>.json; "
         "baselines: --set 'policy={\"type\":\"<name>\"}', plus \"max_batch_size\" with "
         "--baseline-batch) ==\n";
  out << fmt::format("{:<10} {:<12} {:>11} {:>11} {:>9} | {:>11} {:>9} {:>8}\n", "workload",
                     "system", "latency s", "tok/s", "speedup", "paper lat", "paper t/s", "paper x");
  std::map<std::string, double> serve_tok_s;  // per workload, for the extension below
  for (const char* w : kWorkloads) {
    std::map<std::string, Cell> cells;
    for (const char* b : kBaselines) cells[b] = run.run("l40s", w, run.baseline_policy(b), {});
    cells["dllm-serve"] = run.run("l40s", w, "", {});
    serve_tok_s[w] = cells["dllm-serve"].tok_s;
    const double base = cells["sparse-dllm"].tok_s;
    for (const char* name : {"dllm-cache", "sparse-dllm", "fast-dllm", "dllm-serve"}) {
      const Cell& c = cells[name];
      const auto& p = paper.at(w).at(name);
      out << fmt::format("{:<10} {:<12} {:>11} {:>11} {:>9} | {:>11.2f} {:>9.2f} {:>7.2f}x\n", w,
                         name, c.oom ? "OOM" : fmt::format("{:.2f}", c.latency_s), fmt_cell(c),
                         c.oom || base <= 0 ? "-" : fmt::format("{:.2f}x", c.tok_s / base), p[0],
                         p[1], p[2]);
    }
    const double serve = cells["dllm-serve"].tok_s, fast = cells["fast-dllm"].tok_s,
                 sparse = cells["sparse-dllm"].tok_s, cache = cells["dllm-cache"].tok_s;
    const bool ranking = serve > fast && fast > std::max(sparse, cache) &&
                         std::abs(sparse - cache) <= 0.15 * std::max(sparse, cache);
    const double speedup = base > 0 ? serve / base : 0;
    const double target = paper.at(w).at("dllm-serve")[2];
    out << fmt::format("  ranking dllm-serve > fast-dllm > sparse-dllm ~ dllm-cache (within 15 %): "
                       "{}; speedup {:.2f}x vs paper {:.2f}x ({:+.0f} %, +-25 %: {}); dllm-serve "
                       "{:+.1f} % tok/s vs paper{}\n",
                       verdict(ranking), speedup, target, (speedup / target - 1) * 100,
                       verdict(std::abs(speedup / target - 1) <= 0.25),
                       (serve / paper.at(w).at("dllm-serve")[1] - 1) * 100,
                       std::string(w) == "livebench" ? " (in-sample: the stack fit's cell)" : "");
  }
  if (run.baseline_max_batch() == 1) {
    // servesim's own extension: the paper's baselines never batch; how the speedups change if
    // they ran the largest static batch that fits.
    out << "servesim's extension, not in the paper: if the baselines batched (largest static batch "
           "that fits, --baseline-batch 0), dllm-serve's speedup over Sparse-dLLM would be\n";
    for (const char* w : kWorkloads) {
      const double sparse = run.run("l40s", w, run.baseline_policy("sparse-dllm", 0), {}).tok_s;
      const double fast = run.run("l40s", w, run.baseline_policy("fast-dllm", 0), {}).tok_s;
      const double serve = serve_tok_s.at(w);
      out << fmt::format("  {:<10} {:.2f}x (fast-dllm {:.2f}x)\n", w,
                         sparse > 0 ? serve / sparse : 0, sparse > 0 ? fast / sparse : 0);
    }
  }
  run.print_notes(out);
  out << "\n";
}

void rtx4090(Runner& run, std::ostream& out) {
  const double rates[] = {0.1, 0.2, 0.25, 0.3, 0.4, 0.5};
  out << "== Fig. 3/4: RTX 4090 throughput (tok/s) vs arrival rate "
         "(scenarios/dllm/rtx4090_<workload>.json --set workload.arrival.rate=R) ==\n";
  out << "paper: baselines flatten near 0.25 req/s, dllm-serve keeps scaling to 0.4-0.5 req/s; "
         "peak dllm-serve 76.6 tok/s vs Fast-dLLM 42.4 (1.81x, Burst); at 0.5 req/s (LiveBench) "
         "sigma -56 %, span -53 % vs the best baseline\n";
  for (const char* w : kWorkloads) {
    out << fmt::format("{:<10} {:<12}", w, "rate");
    for (double r : rates) out << fmt::format(" {:>8.2f}", r);
    out << "\n";
    std::map<std::string, std::vector<Cell>> cells;
    for (const char* name : {"dllm-cache", "sparse-dllm", "fast-dllm", "dllm-serve"}) {
      for (double r : rates) {
        const std::vector<std::string> o = {fmt::format("workload.arrival.rate={}", r)};
        cells[name].push_back(std::string(name) == "dllm-serve"
                                  ? run.run("rtx4090", w, "", o)
                                  : run.run("rtx4090", w, run.baseline_policy(name), o));
      }
      out << fmt::format("{:<10} {:<12}", "", name);
      for (const Cell& c : cells[name]) out << fmt::format(" {:>8}", fmt_cell(c, "{:.1f}"));
      out << "\n";
    }
    auto peak = [](const std::vector<Cell>& v) {
      double m = 0;
      for (const Cell& c : v) m = std::max(m, c.oom ? 0.0 : c.tok_s);
      return m;
    };
    const double ps = peak(cells["dllm-serve"]), pf = peak(cells["fast-dllm"]);
    // Scaling: throughput gain from 0.25 to 0.5 req/s.
    const double fast_gain = cells["fast-dllm"][5].tok_s / std::max(cells["fast-dllm"][2].tok_s, 1e-9);
    const double serve_gain =
        cells["dllm-serve"][5].tok_s / std::max(cells["dllm-serve"][2].tok_s, 1e-9);
    const double ratio = pf > 0 ? ps / pf : 0;
    out << fmt::format("  peak dllm-serve / fast-dllm = {:.2f}x (paper 1.81x, +-25 %: {}); "
                       "throughput 0.25 -> 0.5 req/s: fast-dllm x{:.2f}, dllm-serve x{:.2f}\n",
                       ratio, verdict(std::abs(ratio / 1.81 - 1) <= 0.25), fast_gain, serve_gain);
    // Jitter at 0.5 req/s against the best baseline (highest throughput).
    const Cell* best = nullptr;
    for (const char* b : kBaselines) {
      const Cell& c = cells[b][5];
      if (!c.oom && (best == nullptr || c.tok_s > best->tok_s)) best = &c;
    }
    const Cell& s = cells["dllm-serve"][5];
    if (best != nullptr && !s.oom) {
      out << fmt::format("  at 0.5 req/s: latency mean {:.0f} s vs best baseline {:.0f} s; sigma "
                         "{:+.0f} %, span {:+.0f} % (paper LiveBench: -56 %, -53 %)\n",
                         s.latency_s, best->latency_s, (s.std_s / best->std_s - 1) * 100,
                         (s.span_s / best->span_s - 1) * 100);
    }
  }
  run.print_notes(out);
  out << "\n";
}

void ablation(Runner& run, std::ostream& out) {
  out << "== Fig. 8 ablation: speedup over Sparse-dLLM (cumulative), RTX 4090 at 0.5 req/s and "
         "L40S at 1.0 req/s (the scenario files' rates) ==\n"
         "engine = dllm-serve with --set policy.phase_aware=false --set policy.logit_budgeting=false; "
         "+scheduler = --set policy.logit_budgeting=false; +logit budgeting = the full system\n";
  const std::map<std::string, std::array<double, 3>> paper = {
      {"livebench", {1.48, NAN, 1.75}}, {"burst", {1.76, 1.82, 1.97}}, {"osc", {1.58, 1.68, 1.76}}};
  out << fmt::format("{:<14} {:>10} {:>12} {:>14} | {:>8} {:>10} {:>12}  {}\n", "workload",
                     "engine", "+scheduler", "+logit budget", "paper", "paper", "paper",
                     "monotone");
  for (const char* gpu : {"rtx4090", "l40s"}) {
  for (const char* w : kWorkloads) {
    const double base = run.run(gpu, w, run.baseline_policy("sparse-dllm"), {}).tok_s;
    const Cell e = run.run(gpu, w, "", {"policy.phase_aware=false", "policy.logit_budgeting=false"});
    const Cell s = run.run(gpu, w, "", {"policy.logit_budgeting=false"});
    const Cell f = run.run(gpu, w, "", {});
    const auto x = [&](const Cell& c) {
      return c.oom || base <= 0 ? std::string("OOM") : fmt::format("{:.2f}x", c.tok_s / base);
    };
    const auto p = paper.at(w);
    const auto px = [](double v) { return std::isnan(v) ? std::string("-") : fmt::format("{:.2f}x", v); };
    const bool mono = !e.oom && !s.oom && !f.oom && e.tok_s <= s.tok_s && s.tok_s <= f.tok_s;
    out << fmt::format("{:<14} {:>10} {:>12} {:>14} | {:>8} {:>10} {:>12}  {}\n",
                       fmt::format("{} {}", gpu == std::string("l40s") ? "L40S" : "4090", w), x(e),
                       x(s), x(f), px(p[0]), px(p[1]), px(p[2]), verdict(mono));
  }
  }
  run.print_notes(out);
  out << "\n";
}

void sensitivity(Runner& run, std::ostream& out) {
  constexpr double kRate = 2.0;  // req/s
  out << "== Fig. 7 sensitivity: RTX 4090, saturated, dllm-serve / sparse-dllm throughput ==\n"
      << fmt::format(
             "(scenarios/dllm/rtx4090_osc.json --set workload.arrival.rate={} with "
             "workload.prompts={{\"type\":\"fixed\",\"tokens\":P}}; the output sweep sets "
             "denoise.gen_length = denoise.steps = G. The paper's 0.5 req/s saturated its systems; "
             "servesim's dllm-serve keeps up with 0.5 req/s at short lengths, so the sweep runs at "
             "{} req/s to compare capacities)\n",
             kRate, kRate);
  out << "paper: prompt 100 -> 600: 3.12x -> ~2.45x; output 128 -> 512: 3.21x -> ~2.47x\n";
  // A ratio is a capacity ratio only if both systems are saturated: a '*' marks a cell where one
  // of them delivers 95 % or more of the offered kRate x G tokens/s.
  const auto speedup = [&](int64_t gen, std::vector<std::string> o) {
    o.push_back(fmt::format("workload.arrival.rate={}", kRate));
    const Cell b = run.run("rtx4090", "osc", run.baseline_policy("sparse-dllm"), o);
    const Cell s = run.run("rtx4090", "osc", "", o);
    if (b.oom || s.oom || b.tok_s <= 0) return std::string("OOM");
    const double offered = kRate * static_cast<double>(gen);
    const bool unsaturated = std::max(b.tok_s, s.tok_s) >= 0.95 * offered;
    return fmt::format("{:.2f}x{}", s.tok_s / b.tok_s, unsaturated ? "*" : "");
  };
  out << "prompt (output 256):";
  for (int p : {100, 200, 300, 400, 500, 600}) {
    const std::string prompts =
        fmt::format("workload.prompts={{\"type\":\"fixed\",\"tokens\":{}}}", p);
    out << fmt::format("  {}: {}", p, speedup(256, {prompts}));
  }
  out << "\noutput (prompt 100): ";
  for (int g : {128, 256, 384, 512}) {
    out << fmt::format("  {}: {}", g,
                       speedup(g, {"workload.prompts={\"type\":\"fixed\",\"tokens\":100}",
                                   fmt::format("denoise.gen_length={}", g),
                                   fmt::format("denoise.steps={}", g)}));
  }
  out << "\n* not a capacity ratio: a system delivers >= 95 % of the offered load\n";
  run.print_notes(out);
  out << "\n";
}

}  // namespace

int run_dllm_report(const std::string& table, const scenarios::DataRoot& root, std::ostream& out,
                    int64_t baseline_max_batch) {
  Runner run(root, baseline_max_batch);
  out << "(" << run.baseline_batching() << ")\n";
  const bool all = table == "all";
  if (all || table == "l40s") {
    stack_fit(run, out);
    table4(run, out);
  }
  if (all || table == "rtx4090") rtx4090(run, out);
  if (all || table == "ablation") ablation(run, out);
  if (all || table == "sensitivity") sensitivity(run, out);
  return 0;
}

}  // namespace servesim::app
