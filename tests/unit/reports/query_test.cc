#include "reports/query.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>

#include "reports/sqlite_sink.h"
#include "reports_temp_dir.h"
#include "core/error.h"

namespace servesim::reports {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

class QueryTest : public testing::TempDirTest {
 protected:
  // A database with one run holding two scalars.
  std::string make_db() {
    const std::string db = path("q.db");
    SqliteSink sink(db);
    sink.begin_run({.scenario = "s"}, {});
    sink.add_scalar("run", "goodput_tokens_per_s", 1234.5);
    sink.add_scalar("instance/0", "busy_fraction", 0.25);
    sink.end_run("ok", 2, "");
    return db;
  }
};

TEST_F(QueryTest, ReturnsColumnsAndTypedText) {
  const std::string db = make_db();
  const QueryResult r = run_query(
      db, "SELECT entity, name, value, 7 AS n, 3.0 AS r, NULL AS z FROM scalar ORDER BY entity");
  EXPECT_EQ(r.columns, (std::vector<std::string>{"entity", "name", "value", "n", "r", "z"}));
  EXPECT_EQ(r.rows, (std::vector<std::vector<std::string>>{
                        {"instance/0", "busy_fraction", "0.25", "7", "3.0", "NULL"},
                        {"run", "goodput_tokens_per_s", "1234.5", "7", "3.0", "NULL"}}));
}

TEST_F(QueryTest, LastStatementWithColumnsWins) {
  const std::string db = make_db();
  const QueryResult r = run_query(db, "SELECT 1; -- first\n SELECT 2 AS two;  ");
  EXPECT_EQ(r.columns, (std::vector<std::string>{"two"}));
  EXPECT_EQ(r.rows, (std::vector<std::vector<std::string>>{{"2"}}));
}

TEST_F(QueryTest, MissingFileNamesThePath) {
  const std::string missing = path("nope.db");
  EXPECT_EQ(error_of([&] { run_query(missing, "SELECT 1"); }),
            missing + ": no such results database");
  // Bad input, as `report` says of the same file (the CLI's exit code 2).
  EXPECT_THROW(run_query(missing, "SELECT 1"), InputError);
  // And does not create it.
  EXPECT_FALSE(std::filesystem::exists(missing));
}

TEST_F(QueryTest, BadSqlCarriesSqliteMessage) {
  const std::string db = make_db();
  EXPECT_EQ(error_of([&] { run_query(db, "SELEC 1"); }),
            db + ": sqlite error: near \"SELEC\": syntax error (while preparing the query)");
  EXPECT_EQ(error_of([&] { run_query(db, "SELECT nope FROM scalar"); }),
            db + ": sqlite error: no such column: nope (while preparing the query)");
}

TEST_F(QueryTest, IsReadOnly) {
  const std::string db = make_db();
  const std::string message = error_of([&] { run_query(db, "DELETE FROM scalar"); });
  EXPECT_EQ(message, db + ": sqlite error: attempt to write a readonly database (while running "
                          "the query)");
  EXPECT_EQ(run_query(db, "SELECT count(*) FROM scalar").rows,
            (std::vector<std::vector<std::string>>{{"2"}}));
}

// A write-ahead-logged database needs -wal and -shm files while open; a query that only read it
// leaves none behind.
TEST_F(QueryTest, LeavesNoFilesBesideTheDatabase) {
  const std::string db = make_db();
  ASSERT_FALSE(std::filesystem::exists(db + "-wal"));
  EXPECT_EQ(run_query(db, "SELECT count(*) FROM scalar").rows,
            (std::vector<std::vector<std::string>>{{"2"}}));
  EXPECT_FALSE(std::filesystem::exists(db + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(db + "-shm"));
}

TEST_F(QueryTest, KnowsTheShellsTablesAndSchemaCommands) {
  const std::string db = make_db();
  const QueryResult tables = run_query(db, "  .tables ");
  EXPECT_EQ(tables.columns, (std::vector<std::string>{"name"}));
  EXPECT_NE(std::find(tables.rows.begin(), tables.rows.end(), std::vector<std::string>{"scalar"}),
            tables.rows.end());
  const QueryResult count = run_query(
      db, "SELECT count(*) FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE "
          "'sqlite_%'");
  EXPECT_EQ(count.rows.front().front(), std::to_string(tables.rows.size()));
  const QueryResult schema = run_query(db, ".schema scalar;");
  ASSERT_EQ(schema.rows.size(), 1u);
  EXPECT_EQ(schema.rows[0][0].rfind("CREATE TABLE scalar", 0), 0u) << schema.rows[0][0];
  EXPECT_EQ(run_query(db, ".schema no_such_table").rows.size(), 0u);
  EXPECT_GT(run_query(db, ".schema").rows.size(), 1u);
  EXPECT_THROW(run_query(db, ".dump"), InputError);
  EXPECT_EQ(error_of([&] { run_query(db, ".tables extra"); }),
            "query: '.tables extra' is not a dot command servesim query knows: use .tables, "
            ".schema [TABLE] or SQL");
}

TEST(FormatTableTest, Golden) {
  QueryResult r;
  r.columns = {"run_id", "name", "value", "note"};
  r.rows = {{"1", "ttft_p99_s", "0.25", "fast"},
            {"12", "goodput_tokens_per_s", "1234.5", "NULL"},
            {"3", "x", "NULL", "-"}};
  EXPECT_EQ(format_table(r),
            "run_id  name                   value  note\n"
            "------  --------------------  ------  ----\n"
            "     1  ttft_p99_s              0.25  fast\n"
            "    12  goodput_tokens_per_s  1234.5  NULL\n"
            "     3  x                       NULL  -\n"
            "(3 rows)\n");
}

TEST(FormatTableTest, SingleRowAndEmpty) {
  QueryResult one;
  one.columns = {"count(*)"};
  one.rows = {{"-1.5e-07"}};
  EXPECT_EQ(format_table(one),
            "count(*)\n"
            "--------\n"
            "-1.5e-07\n"
            "(1 row)\n");
  QueryResult none;
  none.columns = {"a", "bb"};
  EXPECT_EQ(format_table(none),
            "a  bb\n"
            "-  --\n"
            "(0 rows)\n");
  EXPECT_EQ(format_table(QueryResult{}), "(0 rows)\n");
}

}  // namespace
}  // namespace servesim::reports
