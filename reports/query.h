// Read-only SQL queries over a results database, and their text rendering (`servesim query`).
//
// Contract: run_query() never modifies the database: it opens the file read-only and fails on
// any attempt to write. Values come back as text: integers in decimal, reals in their shortest
// round-trip form (parsing the text gives back the stored double), NULL as "NULL".
#pragma once

#include <string>
#include <vector>

namespace servesim::reports {

struct QueryResult {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;  // each row has columns.size() cells
};

// Runs `statements` (one or more SQL statements separated by ';', or one of the sqlite3 shell's
// dot commands ".tables" and ".schema [TABLE]") against the database at `db_path` and returns
// the result of the last statement that yields columns. Leaves no file beside the database.
// Throws servesim::InputError naming the path when the file does not exist, or naming an unknown
// dot command; servesim::Error when it cannot be opened, carrying SQLite's message when the SQL
// fails.
QueryResult run_query(const std::string& db_path, const std::string& statements);

// Renders `result` as an aligned table: a header, a rule of dashes under each column, one line
// per row, then "(N rows)" ("(1 row)"). Columns are separated by two spaces. Numeric cells are
// right-aligned and other cells left-aligned; the header and NULL cells of a column are
// right-aligned when all its non-NULL cells are numeric. Trailing spaces are trimmed. Ends with a
// newline.
std::string format_table(const QueryResult& result);

}  // namespace servesim::reports
