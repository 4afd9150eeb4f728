#include "outbox/migration_steps.h"

#include <regex>
#include <sstream>

#include "outbox/errors.h"

namespace outbox {
namespace {

const std::string kMarker = "-- outbox-migrate: concurrently";

bool ends_statement(const std::string& line) {
  auto end = line.find_last_not_of(" \t\r");
  return end != std::string::npos && line[end] == ';';
}

}  // namespace

std::string ConcurrentIndex::in_transaction_statement() const {
  static const std::regex concurrently(R"(\s+CONCURRENTLY\b)", std::regex::icase);
  return std::regex_replace(statement, concurrently, "", std::regex_constants::format_first_only);
}

MigrationSteps MigrationSteps::parse(std::string_view sql, std::string_view migration_name) {
  static const std::regex marker(
      R"(^-- outbox-migrate: concurrently index=([a-z_][a-z0-9_]*) table=([a-z_][a-z0-9_]*)\s*$)");
  MigrationSteps steps;
  std::istringstream in{std::string(sql)};
  std::string line;
  int number = 0;
  auto fail = [&](const std::string& why) {
    throw ValidationError("migration " + std::string(migration_name), "line " + std::to_string(number) + ": " + why);
  };
  while (std::getline(in, line)) {
    ++number;
    if (line.rfind(kMarker, 0) != 0) {
      steps.transactional += line + "\n";
      continue;
    }
    std::smatch m;
    if (!std::regex_match(line, m, marker)) fail("expected '" + kMarker + " index=NAME table=TABLE'");
    ConcurrentIndex index{m[1], m[2], ""};
    while (std::getline(in, line)) {
      ++number;
      index.statement += line + "\n";
      if (ends_statement(line)) break;
    }
    const std::regex shape("^\\s*CREATE\\s+(UNIQUE\\s+)?INDEX\\s+CONCURRENTLY\\s+IF\\s+NOT\\s+EXISTS\\s+" +
                           index.index + "\\s+ON\\s+\\{\\{schema\\}\\}\\." + index.table + "\\b[^;]*;\\s*$");
    if (!std::regex_search(index.statement, shape))
      fail("the statement after the marker must be 'CREATE INDEX CONCURRENTLY IF NOT EXISTS " + index.index +
           " ON {{schema}}." + index.table + " ...;'");
    steps.indexes.push_back(std::move(index));
  }
  return steps;
}

}  // namespace outbox
