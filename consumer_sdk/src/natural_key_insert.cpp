#include "outbox/natural_key_insert.h"

#include <algorithm>

#include "outbox/sql_identifier.h"

namespace outbox {
namespace {

std::string quoted_list(const std::vector<std::string>& names, const std::string& field) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + quoted_identifier(n, field);
  return out;
}

}  // namespace

NaturalKeyInsert::NaturalKeyInsert(const std::string& schema, const std::string& table,
                                   const std::vector<std::string>& columns, const std::vector<std::string>& key_columns)
    : table_(schema + "." + table), column_count_(columns.size()) {
  std::string target = quoted_identifier(schema, "schema") + "." + quoted_identifier(table, "table");
  if (columns.empty()) throw ValidationError("columns", "at least one column is needed");
  if (key_columns.empty()) throw ValidationError("key_columns", "at least one key column is needed");
  for (const auto& k : key_columns)
    if (std::find(columns.begin(), columns.end(), k) == columns.end())
      throw ValidationError("key_columns",
                            "'" + quoted_identifier(k, "key_columns") + "' is not one of the inserted columns");
  std::string placeholders;
  for (std::size_t i = 1; i <= columns.size(); ++i) placeholders += (i > 1 ? ", $" : "$") + std::to_string(i);
  sql_ = "INSERT INTO " + target + " (" + quoted_list(columns, "columns") + ") VALUES (" + placeholders +
         ") ON CONFLICT (" + quoted_list(key_columns, "key_columns") + ") DO NOTHING";
}

}  // namespace outbox
