#include "outbox/pg_connection.h"

#include "outbox/secret_scrubber.h"

namespace outbox {

namespace detail {

void rethrow_connect_error_without_password(const PgConnInfo& info) {
  // The password as libpq got it (decoded from a URI).
  const SecretScrubber scrubber({info.get("password").value_or("")});
  try {
    throw;
  } catch (const pqxx::sql_error& e) {
    throw pqxx::sql_error(scrubber.scrub(e.what()), "", e.sqlstate().c_str());
  } catch (const pqxx::broken_connection& e) {
    throw pqxx::broken_connection(scrubber.scrub(e.what()));
  } catch (const pqxx::failure& e) {
    throw pqxx::failure(scrubber.scrub(e.what()));
  }
}

}  // namespace detail

std::unique_ptr<pqxx::connection> open_pg_connection(const std::string& dsn) {
  return open_pg_connection_as<pqxx::connection>(dsn);
}

}  // namespace outbox
