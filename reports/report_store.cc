#include "reports/report_store.h"

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace servesim::reports {
namespace {

std::string plan_ids(SqliteDb &db) {
  return describe_ids(has_table(db, "plan")
                          ? read_ids(db, "SELECT plan_id FROM plan ORDER BY plan_id")
                          : std::vector<int64_t>{});
}

void load_plan_row(SqliteDb &db, PlanData &p) {
  if (!has_table(db, "plan")) {
    throw InputError(db.path(), 0, fmt::format("no plan {} (plans: none)", p.plan_id));
  }
  Statement st(
      db, "SELECT name, source, mode, target_rate, status, document FROM plan WHERE plan_id = ?",
      "reading the plan");
  st.bind(1, p.plan_id);
  if (!st.step()) {
    throw InputError(db.path(), 0, fmt::format("no plan {} (plans: {})", p.plan_id, plan_ids(db)));
  }
  p.name = st.column_text(0);
  p.source = st.column_text(1);
  p.mode = st.column_text(2);
  p.target_rate = st.column_double_or_nan(3);
  p.status = st.column_text(4);
  try {
    const auto doc = nlohmann::json::parse(st.column_text(5));
    if (doc.contains("slo") && doc["slo"].contains("attainment")) {
      p.attainment_target = doc["slo"]["attainment"].get<double>();
    }
  } catch (const std::exception &) {
  }
}

}  // namespace

PlanData load_plan(SqliteDb &db, int64_t plan_id) {
  PlanData p;
  p.plan_id = plan_id;
  load_plan_row(db, p);
  std::map<int64_t, size_t> by_index;
  {
    Statement st(db,
                 "SELECT config_index, label, candidate, gpu, policy, num_gpus, cost_per_hour, "
                 "status, reason, bound_rps, capacity_rps, meets_target FROM plan_config WHERE "
                 "plan_id = ? ORDER BY config_index",
                 "reading plan configs");
    st.bind(1, plan_id);
    while (st.step()) {
      PlanConfigData c;
      c.index = st.column_int64(0);
      c.label = st.column_text(1);
      c.candidate = st.column_text(2);
      c.gpu = st.column_text(3);
      c.policy = st.column_text(4);
      c.num_gpus = st.column_int64(5);
      c.cost = st.column_double(6);
      c.status = st.column_text(7);
      c.reason = st.column_text(8);
      c.bound = st.column_double_or_nan(9);
      c.capacity = st.column_double_or_nan(10);
      c.meets_target = st.column_is_null(11) ? -1 : static_cast<int>(st.column_int64(11));
      by_index[c.index] = p.configs.size();
      p.configs.push_back(std::move(c));
    }
  }
  // Each simulation with the run scalars the report draws (one row per plan_run row).
  Statement st(db,
               "SELECT p.config_index, p.run_id, p.rate, p.meets, max(CASE WHEN s.name = "
               "'slo_attainment' THEN s.value END), max(CASE WHEN s.name = 'goodput_tokens_per_s' "
               "THEN s.value END), max(CASE WHEN s.name = 'output_tokens_per_s' THEN s.value END), "
               "max(CASE WHEN s.name = 'tpot_mean_s' THEN s.value END) FROM plan_run p LEFT JOIN "
               "scalar s ON s.run_id = p.run_id AND s.entity = 'run' AND s.name IN "
               "('slo_attainment', 'goodput_tokens_per_s', 'output_tokens_per_s', 'tpot_mean_s') "
               "WHERE p.plan_id = ? GROUP BY p.rowid ORDER BY p.config_index, p.rowid",
               "reading plan runs");
  st.bind(1, plan_id);
  while (st.step()) {
    auto it = by_index.find(st.column_int64(0));
    if (it == by_index.end()) continue;
    PlanConfigData::Probe probe;
    probe.run_id = st.column_int64(1);
    probe.rate = st.column_double(2);
    probe.meets = st.column_int64(3) != 0;
    probe.attainment = st.column_double_or_nan(4);
    probe.goodput = st.column_double_or_nan(5);
    probe.output_tokens_per_s = st.column_double_or_nan(6);
    probe.tpot_mean_s = st.column_double_or_nan(7);
    p.configs[it->second].probes.push_back(probe);
  }
  return p;
}

std::vector<IterationBin> load_iteration_bins(SqliteDb &db, int64_t run_id,
                                              const std::string &metric) {
  std::vector<IterationBin> bins;
  if (!has_table(db, "iteration_histogram")) return bins;
  Statement st(db,
               "SELECT instance_id, lower, upper, count FROM iteration_histogram WHERE run_id = ? "
               "AND metric = ? ORDER BY instance_id, lower",
               "reading the iteration histograms");
  st.bind(1, run_id).bind(2, std::string_view(metric));
  while (st.step()) {
    bins.push_back({static_cast<int32_t>(st.column_int64(0)), st.column_int64(1),
                    st.column_int64(2), st.column_int64(3)});
  }
  return bins;
}

}  // namespace servesim::reports
