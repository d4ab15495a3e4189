#include "app/regress.h"

#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "app/atomic_file.h"
#include "app/dllm_run.h"
#include "app/run_scenario.h"
#include "scenarios/json_reader.h"

namespace servesim::app {
namespace {

// "ok", or why `measured` leaves the band baseline x (1 +- tolerance).
std::string regress_verdict(double baseline, double tolerance, double measured) {
  if (measured < baseline * (1.0 - tolerance)) return "FAIL (below baseline - tolerance)";
  if (measured > baseline * (1.0 + tolerance)) {
    return "FAIL (above baseline + tolerance: --update if intended)";
  }
  return "ok";
}

}  // namespace

int run_regression(const std::string& baseline_path, const scenarios::DataRoot& root,
                   const RegressOptions& options, std::ostream& out) {
  scenarios::Json doc = scenarios::read_json_file(baseline_path, "baseline file");
  // Validate the file's structure up front, reporting every problem.
  scenarios::Issues issues;
  scenarios::Json resolved;
  struct Entry {
    std::string name, scenario;
    std::vector<std::string> overrides;
    double goodput = 0, tolerance = 0;
  };
  std::vector<Entry> entries;
  {
    scenarios::ObjectReader top(doc, "", issues, resolved);
    const auto* list = top.array("entries", true);
    if (list) {
      for (size_t i = 0; i < list->size(); ++i) {
        scenarios::Json eout;
        scenarios::ObjectReader r((*list)[i], fmt::format("entries[{}]", i), issues, eout);
        Entry e;
        e.name = r.string("name", std::nullopt).value_or("");
        e.scenario = r.string("scenario", std::nullopt).value_or("");
        if (const auto* set = r.array("set", false)) {
          for (const auto& s : *set) {
            if (s.is_string()) {
              e.overrides.push_back(s.get<std::string>());
            } else {
              issues.add(r.child_path("set"), "expected an array of \"path=value\" strings");
            }
          }
        }
        // Required unless --update is to fill it in.
        e.goodput = r.number("goodput_tokens_per_s", 0.0, 0.0).value_or(0);
        if (!options.update && !(*list)[i].contains("goodput_tokens_per_s")) {
          issues.add(r.child_path("goodput_tokens_per_s"),
                     "is required (servesim regress --update measures it and fills it in)");
        }
        e.tolerance = r.number("tolerance", 0.05, 0.0, 1.0).value_or(0.05);
        r.finish();
        entries.push_back(e);
      }
    }
    top.finish();
  }
  if (!issues.empty()) throw ConfigError(baseline_path, issues.list());

  const std::string base_dir = std::filesystem::path(baseline_path).parent_path().string();
  int failures = 0;
  scenarios::Json report = {{"baseline", baseline_path}, {"entries", scenarios::Json::array()}};
  if (!options.json) {
    out << fmt::format("{:<28} {:>14} {:>14} {:>8} {:>7}  {}\n", "entry", "baseline tok/s",
                       "measured tok/s", "change", "tol", "verdict");
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    Entry& e = entries[i];
    const std::string path = scenarios::resolve_data_path(e.scenario, base_dir, root);
    double measured = 0;
    const scenarios::Scenario s = scenarios::load_scenario(path, e.overrides, root);
    if (s.dllm) {
      // dLLM scenarios have no SLO (dLLM-Serve's metric): generated tokens/s; 0 when out of memory.
      measured = run_dllm(s, root, "").metrics.throughput_tok_s;
    } else {
      RunOptions ro;
      ro.keep_records = false;
      measured = run_scenario(s, root, ro).summary.goodput_tokens_per_s;
    }
    const std::string verdict = options.update ? "updated" : regress_verdict(e.goodput, e.tolerance, measured);
    if (verdict.rfind("FAIL", 0) == 0) failures++;
    const double change = e.goodput > 0 ? (measured / e.goodput - 1.0) * 100.0 : 0.0;
    if (options.json) {
      report["entries"].push_back({{"name", e.name},
                                   {"baseline", e.goodput},
                                   {"measured", measured},
                                   {"change", change / 100.0},
                                   {"tolerance", e.tolerance},
                                   {"verdict", verdict}});
    } else {
      out << fmt::format("{:<28} {:>14.1f} {:>14.1f} {:>+7.2f}% {:>6.1f}%  {}\n", e.name,
                         e.goodput, measured, change, e.tolerance * 100.0, verdict);
    }
    if (options.update) doc["entries"][i]["goodput_tokens_per_s"] = std::round(measured * 10) / 10;
  }
  if (options.update) write_file_atomically(baseline_path, doc.dump(2) + "\n");
  report["passed"] = static_cast<int64_t>(entries.size()) - failures;
  report["failed"] = failures;
  report["updated"] = options.update;
  if (options.json) {
    out << report.dump(2) << "\n";
  } else if (options.update) {
    out << fmt::format("updated {}\n", baseline_path);
  } else {
    out << fmt::format("{} passed, {} failed\n", entries.size() - failures, failures);
  }
  return failures;
}

}  // namespace servesim::app
