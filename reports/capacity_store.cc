#include "reports/capacity_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "reports/sqlite_db.h"
#include "reports/sqlite_sink.h"
#include "core/error.h"

namespace servesim::reports {
namespace {

constexpr const char *kCapacitySchema =
    "CREATE TABLE IF NOT EXISTS capacity(capacity_id INTEGER PRIMARY KEY, scenario TEXT, overrides "
    "TEXT, objectives TEXT, attainment_target REAL, min_throughput_ratio REAL, capacity_rps REAL, "
    "binding TEXT, binding_rate REAL, verdict TEXT, started_at TEXT, code_rev TEXT, wall_s REAL, "
    "status TEXT);CREATE TABLE IF NOT EXISTS capacity_probe(capacity_id INTEGER NOT NULL "
    "REFERENCES capacity(capacity_id) ON DELETE CASCADE, probe_index INTEGER NOT NULL, rate REAL, "
    "meets INTEGER, stopped_early TEXT, failed TEXT, requests INTEGER, slo_attainment REAL, "
    "sustained_rate REAL, offered_rate REAL, output_tokens_per_s REAL, goodput_tokens_per_s REAL, "
    "goodput_requests_per_s REAL, ttft_p50_s REAL, ttft_p90_s REAL, ttft_p99_s REAL, tbt_p50_s "
    "REAL, tbt_p90_s REAL, tbt_p99_s REAL, tpot_p50_s REAL, tpot_p90_s REAL, tpot_p99_s REAL, "
    "e2e_p50_s REAL, e2e_p90_s REAL, e2e_p99_s REAL, PRIMARY KEY(capacity_id, probe_index)) "
    "WITHOUT ROWID;CREATE TABLE IF NOT EXISTS capacity_check(capacity_id INTEGER NOT NULL "
    "REFERENCES capacity(capacity_id) ON DELETE CASCADE, probe_index INTEGER NOT NULL, name TEXT "
    "NOT NULL, value REAL, limit_value REAL, at_least INTEGER, ok INTEGER, unit TEXT, PRIMARY "
    "KEY(capacity_id, probe_index, name));";

// Binds `v`, or NULL when it is not finite (SQLite has no NaN).
void bind_real(Statement &st, int i, double v) {
  if (std::isfinite(v)) {
    st.bind(i, v);
  } else {
    st.bind_null(i);
  }
}

std::string json_array(const std::vector<std::string> &items) {
  return nlohmann::json(items).dump();
}

std::vector<std::string> parse_array(const std::string &text) {
  try {
    const auto doc = nlohmann::json::parse(text);
    if (doc.is_array()) return doc.get<std::vector<std::string>>();
  } catch (const std::exception &) {
  }
  return {};
}

int64_t insert_search(SqliteDb &db, const CapacitySearchRecord &s) {
  Statement st(
      db,
      "INSERT INTO capacity(scenario, overrides, objectives, attainment_target, "
      "min_throughput_ratio, capacity_rps, binding, binding_rate, verdict, started_at, code_rev, "
      "wall_s, status) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING capacity_id",
      "inserting the capacity row");
  st.bind(1, std::string_view(s.scenario))
      .bind(2, std::string_view(json_array(s.overrides)))
      .bind(3, std::string_view(json_array(s.objectives)));
  bind_real(st, 4, s.attainment_target);
  st.bind(5, s.min_throughput_ratio).bind(6, s.capacity_rps);
  st.bind(7, std::string_view(json_array(s.binding)));
  bind_real(st, 8, s.binding_rate > 0 ? s.binding_rate : std::numeric_limits<double>::quiet_NaN());
  st.bind(9, std::string_view(s.verdict))
      .bind(10, std::string_view(s.started_at))
      .bind(11, std::string_view(s.code_rev))
      .bind(12, s.wall_s)
      .bind(13, std::string_view(s.status));
  st.step();
  const int64_t id = st.column_int64(0);
  while (st.step()) {
  }
  return id;
}

void insert_probes(SqliteDb &db, int64_t id, const std::vector<CapacityProbeRecord> &probes) {
  Statement probe(db,
                  "INSERT INTO capacity_probe VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                  "?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                  "inserting a capacity probe");
  Statement check(db, "INSERT INTO capacity_check VALUES(?, ?, ?, ?, ?, ?, ?, ?)",
                  "inserting a capacity check");
  for (size_t k = 0; k < probes.size(); ++k) {
    const CapacityProbeRecord &p = probes[k];
    const auto index = static_cast<int64_t>(k);
    probe.bind(1, id).bind(2, index).bind(3, p.rate).bind(4, int64_t{p.meets});
    probe.bind(5, std::string_view(p.stopped_early)).bind(6, std::string_view(p.failed));
    probe.bind(7, p.requests);
    bind_real(probe, 8, p.slo_attainment);
    bind_real(probe, 9, p.sustained_rate);
    bind_real(probe, 10, p.offered_rate);
    bind_real(probe, 11, p.output_tokens_per_s);
    bind_real(probe, 12, p.goodput_tokens_per_s);
    bind_real(probe, 13, p.goodput_requests_per_s);
    int col = 14;
    for (const double *q : {p.ttft_s, p.tbt_s, p.tpot_s, p.e2e_s}) {
      for (int i = 0; i < 3; ++i) bind_real(probe, col++, q[i]);
    }
    probe.run();
    for (const CapacityCheckRecord &c : p.checks) {
      check.bind(1, id).bind(2, index).bind(3, std::string_view(c.name));
      bind_real(check, 4, c.value);
      bind_real(check, 5, c.limit);
      check.bind(6, int64_t{c.at_least}).bind(7, int64_t{c.ok}).bind(8, std::string_view(c.unit));
      check.run();
    }
  }
}

std::vector<int64_t> ids_of(SqliteDb &db) {
  if (!has_table(db, "capacity")) return {};
  return read_ids(db, "SELECT capacity_id FROM capacity ORDER BY capacity_id");
}

void read_probes(SqliteDb &db, CapacitySearchRecord &s) {
  Statement st(db,
               "SELECT rate, meets, stopped_early, failed, requests, slo_attainment, "
               "sustained_rate, offered_rate, output_tokens_per_s, goodput_tokens_per_s, "
               "goodput_requests_per_s, ttft_p50_s, ttft_p90_s, ttft_p99_s, tbt_p50_s, tbt_p90_s, "
               "tbt_p99_s, tpot_p50_s, tpot_p90_s, tpot_p99_s, e2e_p50_s, e2e_p90_s, e2e_p99_s "
               "FROM capacity_probe WHERE capacity_id = ? ORDER BY probe_index",
               "reading capacity probes");
  st.bind(1, s.capacity_id);
  while (st.step()) {
    CapacityProbeRecord p;
    p.rate = st.column_double(0);
    p.meets = st.column_int64(1) != 0;
    p.stopped_early = st.column_text(2);
    p.failed = st.column_text(3);
    p.requests = st.column_int64(4);
    p.slo_attainment = st.column_double_or_nan(5);
    p.sustained_rate = st.column_double_or_nan(6);
    p.offered_rate = st.column_double_or_nan(7);
    p.output_tokens_per_s = st.column_double_or_nan(8);
    p.goodput_tokens_per_s = st.column_double_or_nan(9);
    p.goodput_requests_per_s = st.column_double_or_nan(10);
    int col = 11;
    for (double *q : {p.ttft_s, p.tbt_s, p.tpot_s, p.e2e_s}) {
      for (int i = 0; i < 3; ++i) q[i] = st.column_double_or_nan(col++);
    }
    s.probes.push_back(std::move(p));
  }
  Statement ch(db,
               "SELECT probe_index, name, value, limit_value, at_least, ok, unit FROM "
               "capacity_check WHERE capacity_id = ? ORDER BY probe_index, rowid",
               "reading capacity checks");
  ch.bind(1, s.capacity_id);
  while (ch.step()) {
    const auto index = static_cast<size_t>(ch.column_int64(0));
    if (index >= s.probes.size()) continue;
    s.probes[index].checks.push_back({ch.column_text(1), ch.column_double_or_nan(2), ch.column_double_or_nan(3),
                                      ch.column_int64(4) != 0, ch.column_int64(5) != 0,
                                      ch.column_text(6)});
  }
}

}  // namespace

int64_t write_capacity(const std::string &db_path, const CapacitySearchRecord &search) {
  { SqliteSink schema(db_path); }  // checks (or creates) the run schema and its version
  SqliteDb db(db_path, SqliteDb::Mode::kReadWriteCreate);
  db.exec("PRAGMA busy_timeout = 60000", "setting the busy timeout");
  db.exec("BEGIN IMMEDIATE", "beginning the capacity search");
  try {
    db.exec(kCapacitySchema, "creating the capacity tables");
    const int64_t id = insert_search(db, search);
    insert_probes(db, id, search.probes);
    db.exec("COMMIT", "committing the capacity search");
    return id;
  } catch (...) {
    db.exec_noexcept("ROLLBACK");
    throw;
  }
}

std::vector<int64_t> capacity_ids(const std::string &db_path) {
  SqliteDb db(db_path, SqliteDb::Mode::kReadOnly);
  return ids_of(db);
}

CapacitySearchRecord read_capacity(const std::string &db_path, int64_t capacity_id) {
  SqliteDb db(db_path, SqliteDb::Mode::kReadOnly);
  CapacitySearchRecord s;
  s.capacity_id = capacity_id;
  const std::vector<int64_t> ids = ids_of(db);
  if (std::find(ids.begin(), ids.end(), capacity_id) == ids.end()) {
    throw InputError(db_path, 0,
                     fmt::format("no capacity search {} (capacity searches: {})", capacity_id,
                                 describe_ids(ids)));
  }
  Statement st(db,
               "SELECT scenario, overrides, objectives, attainment_target, min_throughput_ratio, "
               "capacity_rps, binding, binding_rate, verdict, started_at, code_rev, wall_s, status "
               "FROM capacity WHERE capacity_id = ?",
               "reading the capacity search");
  st.bind(1, capacity_id);
  st.step();
  s.scenario = st.column_text(0);
  s.overrides = parse_array(st.column_text(1));
  s.objectives = parse_array(st.column_text(2));
  s.attainment_target = st.column_double_or_nan(3);
  s.min_throughput_ratio = st.column_double_or_nan(4);
  s.capacity_rps = st.column_double_or_nan(5);
  s.binding = parse_array(st.column_text(6));
  const double binding_rate = st.column_double_or_nan(7);
  s.binding_rate = std::isfinite(binding_rate) ? binding_rate : 0;
  s.verdict = st.column_text(8);
  s.started_at = st.column_text(9);
  s.code_rev = st.column_text(10);
  s.wall_s = st.column_double_or_nan(11);
  s.status = st.column_text(12);
  while (st.step()) {
  }
  read_probes(db, s);
  return s;
}

}  // namespace servesim::reports
