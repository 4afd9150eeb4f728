#include "pg_connect.h"

#include <pqxx/except>

#include "outbox_store.h"
#include "pg_conninfo.h"
#include "secret_scrubber.h"

namespace relay {
namespace {

// The password as libpq gets it (decoded from a URI).
SecretScrubber scrubber_for(const PostgresConfig& config) {
  std::vector<std::string> secrets;
  try {
    if (auto pw = PgConnInfo::parse(config.dsn).get("password")) secrets.push_back(*pw);
  } catch (const std::invalid_argument&) {
  }
  return SecretScrubber(std::move(secrets));
}

}  // namespace

std::unique_ptr<pqxx::connection> connect_postgres(const PostgresConfig& config) {
  try {
    return std::make_unique<pqxx::connection>(dsn_with_session_options(config));
  } catch (const pqxx::sql_error& e) {
    const auto scrub = scrubber_for(config);
    throw pqxx::sql_error(scrub.scrub(e.what()), "", e.sqlstate().c_str());
  } catch (const pqxx::broken_connection& e) {
    throw pqxx::broken_connection(scrubber_for(config).scrub(e.what()));
  } catch (const pqxx::failure& e) {
    throw pqxx::failure(scrubber_for(config).scrub(e.what()));
  }
}

}  // namespace relay
