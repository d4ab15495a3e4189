// Thin RAII wrappers over the SQLite3 C API, shared by the sink and the query tool (internal to
// reports/; not part of the public API).
//
// Contract: every failing SQLite call throws servesim::Error reading
// "FILE: sqlite error: MESSAGE (while WHAT)", where FILE is the database path and WHAT says what
// was being done. Destructors release their handle and never throw. Neither type is copyable;
// a Statement must not outlive the SqliteDb it was prepared on.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace servesim::reports {

class SqliteDb {
 public:
  // kReadOnly: no statement can change the database (SQLite's query_only). Where the file is
  // writable the connection is still opened read-write, so that closing it checkpoints and
  // removes the -wal / -shm files a write-ahead-logged database needs while it is open: a
  // read-only connection could not, and would leave them beside a database it only read.
  enum class Mode { kReadOnly, kReadWriteCreate };

  // Opens `path`. Throws Error when SQLite cannot open it. A file that exists but is not a
  // database is only detected by the first statement that reads it.
  SqliteDb(std::string path, Mode mode);
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }

  // Runs one or more statements that return no rows of interest. Throws Error on failure.
  void exec(const std::string& sql, std::string_view what);
  // Like exec(), but never throws; for rollback on error and cleanup paths. Returns success.
  bool exec_noexcept(const char* sql) noexcept;

  // Throws Error with the connection's current error message.
  [[noreturn]] void fail(std::string_view what) const;

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
};

// One prepared statement. Bind indices are 1-based, as in SQLite.
class Statement {
 public:
  // Prepares the first statement of `sql`. Throws Error on a syntax or schema error.
  Statement(SqliteDb& db, std::string_view sql, std::string_view what);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int index, int64_t value);
  Statement& bind(int index, double value);
  Statement& bind(int index, std::string_view value);
  Statement& bind_null(int index);

  // Returns true when a row is available, false when the statement has finished.
  bool step();
  // Steps a statement that returns no rows, then resets it for reuse (bindings are kept).
  void run();
  void reset();

  int64_t column_int64(int index) const;
  double column_double(int index) const;
  bool column_is_null(int index) const;
  // The column as a double, NaN where it is NULL (SQLite has no NaN: writers store NULL).
  double column_double_or_nan(int index) const;
  std::string column_text(int index) const;

 private:
  SqliteDb& db_;
  std::string what_;
  sqlite3_stmt* stmt_ = nullptr;
};

// Whether the database holds table `name`.
bool has_table(SqliteDb& db, const std::string& name);

// The first column of `sql`'s rows as ids, in the query's order.
std::vector<int64_t> read_ids(SqliteDb& db, const std::string& sql);

// Ids as an error message lists them: "none", "1, 2, 3", or "1 .. 40 (40 in all)" past 12.
std::string describe_ids(const std::vector<int64_t>& ids);

}  // namespace servesim::reports
