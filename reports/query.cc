#include "reports/query.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <memory>
#include <sstream>
#include <system_error>

#include "reports/sqlite_db.h"
#include "core/error.h"

namespace servesim::reports {
namespace {

constexpr int kReadBusyTimeoutMs = 5'000;
constexpr const char* kNull = "NULL";

// Shortest text that parses back to `value`, always marked as a real ("2.0", not "2").
std::string real_text(double value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".eEn") == std::string::npos) {  // 'n' covers inf and nan
    text += ".0";
  }
  return text;
}

std::string cell_text(sqlite3_stmt* stmt, int column) {
  switch (sqlite3_column_type(stmt, column)) {
    case SQLITE_NULL:
      return kNull;
    case SQLITE_INTEGER:
      return std::to_string(sqlite3_column_int64(stmt, column));
    case SQLITE_FLOAT:
      return real_text(sqlite3_column_double(stmt, column));
    default: {
      // Text, or a blob shown as its bytes.
      const auto* data = static_cast<const char*>(sqlite3_column_blob(stmt, column));
      const int size = sqlite3_column_bytes(stmt, column);
      return data != nullptr ? std::string(data, size) : std::string();
    }
  }
}

// True for decimal numbers as run_query renders them: [-]digits[.digits][e[+-]digits], inf, nan.
bool is_numeric(const std::string& text) {
  size_t i = 0;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) {
    ++i;
  }
  const std::string_view rest(text.data() + i, text.size() - i);
  if (rest == "inf" || rest == "nan") {
    return true;
  }
  auto digits = [&] {
    const size_t start = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      ++i;
    }
    return i - start;
  };
  size_t mantissa = digits();
  if (i < text.size() && text[i] == '.') {
    ++i;
    mantissa += digits();
  }
  if (mantissa == 0) {
    return false;
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) {
      ++i;
    }
    if (digits() == 0) {
      return false;
    }
  }
  return i == text.size();
}

void trim_right(std::string& line) {
  while (!line.empty() && line.back() == ' ') {
    line.pop_back();
  }
}

// The SQL of the sqlite3 shell's dot commands that `query` knows (".tables", ".schema [NAME]"),
// or `sql` itself when it is no dot command. Throws InputError for any other dot command.
std::string dot_command_sql(const std::string& sql) {
  const size_t first = sql.find_first_not_of(" \t\n\r");
  if (first == std::string::npos || sql[first] != '.') return sql;
  const size_t last = sql.find_last_not_of(" \t\n\r;");
  std::istringstream words(sql.substr(first, last - first + 1));
  std::string command, name, extra;
  words >> command >> name >> extra;
  if (command == ".tables" && name.empty()) {
    return "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE "
           "'sqlite_%' ORDER BY name";
  }
  if (command == ".schema" && extra.empty()) {
    std::string quoted;  // NAME as an SQL string literal
    for (char c : name) quoted += c == '\'' ? std::string("''") : std::string(1, c);
    return "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL" +
           (name.empty() ? std::string() : " AND name = '" + quoted + "'") + " ORDER BY name";
  }
  throw InputError("query", 0,
                   fmt::format("'{}' is not a dot command servesim query knows: use .tables, "
                               ".schema [TABLE] or SQL",
                               sql.substr(first, last - first + 1)));
}

}  // namespace

QueryResult run_query(const std::string& db_path, const std::string& statements) {
  std::error_code ec;
  if (!std::filesystem::exists(db_path, ec)) {
    throw InputError(db_path, 0, "no such results database");
  }
  if (!std::filesystem::is_regular_file(db_path, ec)) {
    throw InputError(db_path, 0, "not a regular file");
  }
  const std::string sql = dot_command_sql(statements);
  SqliteDb db(db_path, SqliteDb::Mode::kReadOnly);
  if (sqlite3_busy_timeout(db.handle(), kReadBusyTimeoutMs) != SQLITE_OK) {
    db.fail("setting the busy timeout");
  }

  QueryResult result;
  const char* next = sql.c_str();
  const char* const end = sql.c_str() + sql.size();
  while (next < end) {
    sqlite3_stmt* raw = nullptr;
    const char* tail = nullptr;
    if (sqlite3_prepare_v2(db.handle(), next, static_cast<int>(end - next), &raw, &tail) !=
        SQLITE_OK) {
      db.fail("preparing the query");
    }
    next = tail;
    if (raw == nullptr) {
      continue;  // only whitespace or a comment
    }
    std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> stmt(raw, sqlite3_finalize);
    const int column_count = sqlite3_column_count(raw);
    QueryResult current;
    for (int c = 0; c < column_count; ++c) {
      const char* name = sqlite3_column_name(raw, c);
      current.columns.emplace_back(name != nullptr ? name : "");
    }
    for (;;) {
      const int rc = sqlite3_step(raw);
      if (rc == SQLITE_DONE) {
        break;
      }
      if (rc != SQLITE_ROW) {
        db.fail("running the query");
      }
      std::vector<std::string>& row = current.rows.emplace_back();
      row.reserve(column_count);
      for (int c = 0; c < column_count; ++c) {
        row.push_back(cell_text(raw, c));
      }
    }
    if (column_count > 0) {
      result = std::move(current);
    }
  }
  return result;
}

std::string format_table(const QueryResult& result) {
  const size_t n = result.columns.size();
  std::vector<size_t> width(n);
  std::vector<bool> numeric_column(n);
  for (size_t c = 0; c < n; ++c) {
    width[c] = result.columns[c].size();
    bool all_numeric = true;
    bool any_value = false;
    for (const auto& row : result.rows) {
      const std::string& cell = row[c];
      width[c] = std::max(width[c], cell.size());
      if (cell != kNull) {
        any_value = true;
        all_numeric = all_numeric && is_numeric(cell);
      }
    }
    numeric_column[c] = any_value && all_numeric;
  }

  std::string out;
  auto emit = [&](const std::vector<std::string>& cells, auto right_aligned) {
    std::string line;
    for (size_t c = 0; c < n; ++c) {
      if (c > 0) {
        line += "  ";
      }
      line += right_aligned(c, cells[c]) ? fmt::format("{:>{}}", cells[c], width[c])
                                         : fmt::format("{:<{}}", cells[c], width[c]);
    }
    trim_right(line);
    out += line;
    out += '\n';
  };
  if (n > 0) {
    emit(result.columns, [&](size_t c, const std::string&) { return numeric_column[c]; });
    std::vector<std::string> rule(n);
    for (size_t c = 0; c < n; ++c) {
      rule[c] = std::string(width[c], '-');
    }
    emit(rule, [](size_t, const std::string&) { return false; });
    for (const auto& row : result.rows) {
      emit(row, [&](size_t c, const std::string& cell) {
        return cell == kNull ? numeric_column[c] : is_numeric(cell);
      });
    }
  }
  out += fmt::format("({} {})\n", result.rows.size(), result.rows.size() == 1 ? "row" : "rows");
  return out;
}

}  // namespace servesim::reports
