#include "outbox/pg_connection.h"

#include <pqxx/except>

#include "outbox/pg_conninfo.h"
#include "outbox/secret_scrubber.h"

namespace outbox {

std::unique_ptr<pqxx::connection> open_pg_connection(const std::string& dsn) {
  const auto info = PgConnInfo::parse(dsn);
  // The password as libpq gets it (decoded from a URI).
  const auto scrubber = [&] { return SecretScrubber({info.get("password").value_or("")}); };
  try {
    return std::make_unique<pqxx::connection>(info.to_string());
  } catch (const pqxx::sql_error& e) {
    throw pqxx::sql_error(scrubber().scrub(e.what()), "", e.sqlstate().c_str());
  } catch (const pqxx::broken_connection& e) {
    throw pqxx::broken_connection(scrubber().scrub(e.what()));
  } catch (const pqxx::failure& e) {
    throw pqxx::failure(scrubber().scrub(e.what()));
  }
}

}  // namespace outbox
