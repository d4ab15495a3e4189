#include "reports/sqlite_db.h"

#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sqlite3.h>

#include <unistd.h>

#include <utility>

#include "core/error.h"

namespace servesim::reports {
namespace {

[[noreturn]] void throw_sqlite(const std::string& path, const char* message,
                               std::string_view what) {
  throw Error(fmt::format("{}: sqlite error: {} (while {})", path,
                          message != nullptr ? message : "unknown error", what));
}

}  // namespace

SqliteDb::SqliteDb(std::string path, Mode mode) : path_(std::move(path)) {
  const bool read_only = mode == Mode::kReadOnly;
  const bool writable = ::access(path_.c_str(), W_OK) == 0;
  const int flags = read_only && !writable ? SQLITE_OPEN_READONLY
                    : read_only            ? SQLITE_OPEN_READWRITE
                                           : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  const int rc = sqlite3_open_v2(path_.c_str(), &db_, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    // The handle may exist even on failure; it carries the message and must still be closed.
    const std::string message = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw_sqlite(path_, message.c_str(), "opening the database");
  }
  sqlite3_extended_result_codes(db_, 1);
  if (read_only && writable && !exec_noexcept("PRAGMA query_only = ON")) {
    // A throwing constructor runs no destructor: close the handle here.
    const std::string message = sqlite3_errmsg(db_);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw_sqlite(path_, message.c_str(), "making the connection read-only");
  }
}

SqliteDb::~SqliteDb() {
  // close_v2 defers the close until outstanding statements are finalized; it never fails for a
  // valid handle, and a destructor has nobody to report to anyway.
  sqlite3_close_v2(db_);
}

void SqliteDb::exec(const std::string& sql, std::string_view what) {
  char* message = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    const std::string text = message != nullptr ? message : sqlite3_errmsg(db_);
    sqlite3_free(message);
    throw_sqlite(path_, text.c_str(), what);
  }
}

bool SqliteDb::exec_noexcept(const char* sql) noexcept {
  return sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) == SQLITE_OK;
}

void SqliteDb::fail(std::string_view what) const { throw_sqlite(path_, sqlite3_errmsg(db_), what); }

Statement::Statement(SqliteDb& db, std::string_view sql, std::string_view what)
    : db_(db), what_(what) {
  if (sqlite3_prepare_v2(db_.handle(), sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr) !=
      SQLITE_OK) {
    db_.fail(fmt::format("preparing the statement for {}", what_));
  }
  if (stmt_ == nullptr) {
    throw Error(fmt::format("{}: empty SQL statement (while {})", db_.path(), what_));
  }
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::bind(int index, int64_t value) {
  if (sqlite3_bind_int64(stmt_, index, value) != SQLITE_OK) {
    db_.fail(what_);
  }
  return *this;
}

Statement& Statement::bind(int index, double value) {
  if (sqlite3_bind_double(stmt_, index, value) != SQLITE_OK) {
    db_.fail(what_);
  }
  return *this;
}

Statement& Statement::bind(int index, std::string_view value) {
  if (sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()),
                        SQLITE_TRANSIENT) != SQLITE_OK) {
    db_.fail(what_);
  }
  return *this;
}

Statement& Statement::bind_null(int index) {
  if (sqlite3_bind_null(stmt_, index) != SQLITE_OK) {
    db_.fail(what_);
  }
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) {
    return true;
  }
  if (rc == SQLITE_DONE) {
    return false;
  }
  // Read the message before reset() so that it describes this failure.
  const std::string message = sqlite3_errmsg(db_.handle());
  sqlite3_reset(stmt_);
  throw_sqlite(db_.path(), message.c_str(), what_);
}

void Statement::run() {
  while (step()) {
  }
  reset();
}

void Statement::reset() {
  // After a successful step sequence reset cannot fail; after a failed one step() has already
  // thrown, so the return code carries no new information here.
  sqlite3_reset(stmt_);
}

int64_t Statement::column_int64(int index) const { return sqlite3_column_int64(stmt_, index); }

double Statement::column_double(int index) const { return sqlite3_column_double(stmt_, index); }

bool Statement::column_is_null(int index) const {
  return sqlite3_column_type(stmt_, index) == SQLITE_NULL;
}

double Statement::column_double_or_nan(int index) const {
  return column_is_null(index) ? std::numeric_limits<double>::quiet_NaN() : column_double(index);
}

std::string Statement::column_text(int index) const {
  const unsigned char* text = sqlite3_column_text(stmt_, index);
  const int size = sqlite3_column_bytes(stmt_, index);
  return text != nullptr ? std::string(reinterpret_cast<const char*>(text), size) : std::string();
}

bool has_table(SqliteDb& db, const std::string& name) {
  Statement st(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?",
               "reading the database schema");
  st.bind(1, std::string_view(name));
  st.step();
  return st.column_int64(0) > 0;
}

std::vector<int64_t> read_ids(SqliteDb& db, const std::string& sql) {
  std::vector<int64_t> ids;
  Statement st(db, sql, "listing ids");
  while (st.step()) ids.push_back(st.column_int64(0));
  return ids;
}

std::string describe_ids(const std::vector<int64_t>& ids) {
  if (ids.empty()) return "none";
  if (ids.size() > 12) {
    return fmt::format("{} .. {} ({} in all)", ids.front(), ids.back(), ids.size());
  }
  return fmt::format("{}", fmt::join(ids, ", "));
}

}  // namespace servesim::reports
