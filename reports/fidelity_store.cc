#include "reports/fidelity_store.h"

#include "reports/sqlite_db.h"

namespace servesim::reports {
namespace {

constexpr const char* kSchema =
    "CREATE TABLE IF NOT EXISTS fidelity(fidelity_id INTEGER PRIMARY KEY, csv TEXT, "
    "started_at TEXT, code_rev TEXT, mode TEXT, calibration TEXT, status TEXT);"
    "CREATE TABLE IF NOT EXISTS fidelity_row(fidelity_id INTEGER NOT NULL REFERENCES "
    "fidelity(fidelity_id) ON DELETE CASCADE, row_index INTEGER NOT NULL, line INTEGER, csv_id "
    "TEXT, engine TEXT, engine_version TEXT, gpu TEXT, model TEXT, moe INTEGER, tp INTEGER, isl "
    "INTEGER, osl INTEGER, concurrency INTEGER, status TEXT, skip_reason TEXT, measured_ttft_ms "
    "REAL, measured_tpot_ms REAL, predicted_ttft_ms REAL, predicted_tpot_ms REAL, ttft_error "
    "REAL, tpot_error REAL, prediction TEXT NOT NULL, extrapolated_share REAL, scenario TEXT, "
    "PRIMARY KEY(fidelity_id, row_index, prediction));";

}  // namespace

int64_t write_fidelity(const std::string& db_path, const FidelityHeader& h,
                       const std::vector<FidelityRowRecord>& rows) {
  SqliteDb db(db_path, SqliteDb::Mode::kReadWriteCreate);
  db.exec("PRAGMA busy_timeout = 60000", "setting the busy timeout");
  db.exec(kSchema, "creating the fidelity tables");
  db.exec("BEGIN IMMEDIATE", "beginning the fidelity study");
  try {
    Statement head(db,
                   "INSERT INTO fidelity(csv, started_at, code_rev, mode, calibration, status) "
                   "VALUES(?, ?, ?, ?, ?, ?) RETURNING fidelity_id",
                   "inserting the fidelity row");
    head.bind(1, std::string_view(h.csv))
        .bind(2, std::string_view(h.started_at))
        .bind(3, std::string_view(h.code_rev))
        .bind(4, std::string_view(h.mode))
        .bind(5, std::string_view(h.calibration))
        .bind(6, std::string_view(h.status));
    head.step();
    const int64_t id = head.column_int64(0);
    while (head.step()) {
    }
    Statement row(db,
                  "INSERT INTO fidelity_row VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                  "?, ?, ?, ?, ?, ?, ?, ?)",
                  "inserting a fidelity row");
    for (const FidelityRowRecord& r : rows) {
      row.bind(1, id)
          .bind(2, r.row_index)
          .bind(3, r.line)
          .bind(4, std::string_view(r.csv_id))
          .bind(5, std::string_view(r.engine))
          .bind(6, std::string_view(r.engine_version))
          .bind(7, std::string_view(r.gpu))
          .bind(8, std::string_view(r.model))
          .bind(9, int64_t{r.moe})
          .bind(10, r.tp)
          .bind(11, r.isl)
          .bind(12, r.osl)
          .bind(13, r.concurrency)
          .bind(14, std::string_view(r.status))
          .bind(15, std::string_view(r.skip_reason))
          .bind(16, r.measured_ttft_ms)
          .bind(17, r.measured_tpot_ms);
      if (r.status == "ok") {
        row.bind(18, r.predicted_ttft_ms)
            .bind(19, r.predicted_tpot_ms)
            .bind(20, r.ttft_error)
            .bind(21, r.tpot_error);
      } else {
        row.bind_null(18).bind_null(19).bind_null(20).bind_null(21);
      }
      row.bind(22, std::string_view(r.prediction))
          .bind(23, r.extrapolated_share)
          .bind(24, std::string_view(r.scenario));
      row.run();
    }
    db.exec("COMMIT", "committing the fidelity study");
    return id;
  } catch (...) {
    db.exec_noexcept("ROLLBACK");
    throw;
  }
}

}  // namespace servesim::reports
