#include "reports/plan_store.h"

#include "reports/sqlite_db.h"

namespace servesim::reports {

struct PlanStore::Impl {
  SqliteDb db;
  explicit Impl(const std::string& path) : db(path, SqliteDb::Mode::kReadWriteCreate) {}
};

PlanStore::PlanStore(const std::string& path) : impl_(std::make_unique<Impl>(path)) {
  impl_->db.exec("PRAGMA busy_timeout = 60000", "setting the busy timeout");
  impl_->db.exec(
      "CREATE TABLE IF NOT EXISTS plan(plan_id INTEGER PRIMARY KEY, name TEXT, source TEXT, "
      "mode TEXT, target_rate REAL, started_at TEXT, status TEXT, document TEXT);"
      "CREATE TABLE IF NOT EXISTS plan_config(plan_id INTEGER NOT NULL, config_index INTEGER NOT "
      "NULL, label TEXT, candidate TEXT, gpu TEXT, policy TEXT, num_gpus INTEGER, "
      "price_per_gpu_hour REAL, cost_per_hour REAL, status TEXT, reason TEXT, bound_rps REAL, "
      "capacity_rps REAL, meets_target INTEGER, overrides TEXT, "
      "PRIMARY KEY(plan_id, config_index));"
      "CREATE TABLE IF NOT EXISTS plan_run(plan_id INTEGER NOT NULL, config_index INTEGER NOT "
      "NULL, run_id INTEGER NOT NULL, rate REAL, meets INTEGER);",
      "creating the plan tables");
}

PlanStore::~PlanStore() {
  if (impl_) impl_->db.exec_noexcept("ROLLBACK");
}

int64_t PlanStore::begin_plan(const PlanRow& p) {
  Statement st(impl_->db,
               "INSERT INTO plan(name, source, mode, target_rate, started_at, status, document) "
               "VALUES(?, ?, ?, ?, ?, 'running', ?) RETURNING plan_id",
               "inserting the plan row");
  st.bind(1, std::string_view(p.name)).bind(2, std::string_view(p.source)).bind(3, std::string_view(p.mode));
  if (p.target_rate > 0) {
    st.bind(4, p.target_rate);
  } else {
    st.bind_null(4);
  }
  st.bind(5, std::string_view(p.started_at)).bind(6, std::string_view(p.document));
  st.step();
  const int64_t id = st.column_int64(0);
  while (st.step()) {
  }
  return id;
}

void PlanStore::add_run(int64_t plan_id, int64_t config_index, int64_t run_id, double rate,
                        bool meets) {
  Statement st(impl_->db, "INSERT INTO plan_run VALUES(?, ?, ?, ?, ?)", "inserting a plan run");
  st.bind(1, plan_id).bind(2, config_index).bind(3, run_id).bind(4, rate).bind(5, int64_t{meets});
  st.run();
}

void PlanStore::add_config(int64_t plan_id, const PlanConfigRow& r) {
  Statement st(impl_->db,
               "INSERT INTO plan_config VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
               "inserting a plan config");
  st.bind(1, plan_id).bind(2, r.config_index).bind(3, std::string_view(r.label));
  st.bind(4, std::string_view(r.candidate)).bind(5, std::string_view(r.gpu));
  st.bind(6, std::string_view(r.policy)).bind(7, r.num_gpus).bind(8, r.price_per_gpu_hour);
  st.bind(9, r.cost_per_hour).bind(10, std::string_view(r.status)).bind(11, std::string_view(r.reason));
  if (r.bound_rps > 0) {
    st.bind(12, r.bound_rps);
  } else {
    st.bind_null(12);
  }
  st.bind(13, r.capacity_rps);
  if (r.meets_target >= 0) {
    st.bind(14, int64_t{r.meets_target});
  } else {
    st.bind_null(14);
  }
  st.bind(15, std::string_view(r.overrides));
  st.run();
}

void PlanStore::finish_plan(int64_t plan_id, const std::string& status) {
  Statement st(impl_->db, "UPDATE plan SET status = ? WHERE plan_id = ?", "finishing the plan");
  st.bind(1, std::string_view(status)).bind(2, plan_id);
  st.run();
}

}  // namespace servesim::reports
