// The admin commands read rows written by hand (psql, producers in other languages):
// whatever text a row holds, what they print cannot act on the operator's terminal
// and stays bounded.
#include <doctest/doctest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "outbox/outbox_writer.h"
#include "outbox/pqxx_compat.h"
#include "relay_process.h"
#include "test_env.h"
#include "test_text.h"

using testenv::run_relay_command;
using testenv::ScopedSchema;
using testenv::sql_exec;

namespace {

using testenv::contains;

// Rows of `type`, parked, with `last_error`; written as a producer and an operator
// in psql could.
void park_rows(const ScopedSchema& schema, const std::string& type, const std::string& last_error, int n) {
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  for (int i = 0; i < n; ++i)
    outbox::pgx::exec_params(tx,
                             "INSERT INTO \"" + schema.name() +
                                 "\".outbox (exchange, routing_key, message_type, payload) "
                                 "VALUES ('ex', 'rk', $1, '\\x7b7d'::bytea)",
                             type);
  outbox::pgx::exec_params(
      tx, "UPDATE \"" + schema.name() + "\".outbox SET parked_at = now(), attempts = 10, last_error = $1", last_error);
  tx.commit();
}

// The JSON value a command printed on its one line of stdout (stderr is captured too).
nlohmann::json json_of(const std::string& output) {
  auto begin = output.find('{'), end = output.rfind('}');
  REQUIRE(begin != std::string::npos);
  return nlohmann::json::parse(output.substr(begin, end - begin + 1));
}

}  // namespace

TEST_CASE("dead list and status print no terminal control from a row, and dead list bounds a huge last_error") {
  // Such a type is refused since migration 0015 (outbox_control_characters): the rows
  // were written before it, and stay.
  ScopedSchema schema("t", 14);
  // U+009B is CSI and U+009D OSC to a terminal in UTF-8 mode: clear the screen,
  // write the clipboard; U+202E reverses what follows.
  const std::string csi = "\xc2\x9b", osc = "\xc2\x9d";
  const std::string type = "Order" + csi + "2J" + osc + "52;c;cm0gLXJmIC8K\xc2\x9c\xe2\x80\xae";
  const std::string last_error = "refused " + csi + "8m" + std::string(5 * 1024 * 1024, 'x');  // 5 MiB
  park_rows(schema, type, last_error, 3);
  schema.migrate();
  const auto cfg = testenv::write_temp_file(testenv::relay_config_yaml(schema.name()));

  for (const auto& args : {std::vector<std::string>{"dead", "list", "-c", cfg},
                           {"dead", "list", "-c", cfg, "--json"},
                           {"status", "-c", cfg},
                           {"status", "-c", cfg, "--json"}}) {
    auto r = run_relay_command(args);
    const auto shown = (args[0] == "dead" ? "dead list" : args[0]) + (args.back() == "--json" ? " --json" : "");
    REQUIRE_MESSAGE(r.exit_code == 0, (shown + ": " + r.output.substr(0, 2000)));
    CHECK_MESSAGE(!contains(r.output, csi), shown);
    CHECK_MESSAGE(!contains(r.output, osc), shown);
    CHECK_MESSAGE(!contains(r.output, "\xe2\x80\xae"), shown);
    CHECK_MESSAGE(!contains(r.output, "\x1b"), shown);
    CHECK_MESSAGE(r.output.size() < 64 * 1024, (shown + ": " + std::to_string(r.output.size()) + " bytes"));
  }
  // The JSON still carries the text itself (as \uXXXX escapes), the error cut and flagged.
  auto j = json_of(run_relay_command({"dead", "list", "-c", cfg, "--json"}).output);
  REQUIRE(j["rows"].size() == 3);
  CHECK(j["rows"][0]["type"] == type);
  CHECK(j["rows"][0]["last_error"].get<std::string>().rfind("refused " + csi + "8mxxx", 0) == 0);
  CHECK(j["rows"][0]["last_error"].get<std::string>().size() < 4096);
  CHECK(j["rows"][0]["last_error_cut"] == true);
  auto status = json_of(run_relay_command({"status", "-c", cfg, "--json"}).output);
  CHECK(status["by_type"][0]["type"] == type);
  // Parked, not published: status counts them under the rule they break.
  CHECK(status["rule_breaks"] == nlohmann::json({{"outbox_control_characters", 3}}));
}

TEST_CASE("a hand-written row with control characters in its routing key is refused at the INSERT, never published") {
  ScopedSchema schema;
  // CR, LF, TAB and ESC, as the finding wrote them (issue 40, finding 7).
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  CHECK_THROWS_AS(outbox::pgx::exec_params(tx,
                                           "INSERT INTO \"" + schema.name() +
                                               "\".outbox (exchange, routing_key, message_type, payload) "
                                               "VALUES ('ex', $1, 'T', '\\x7b7d'::bytea)",
                                           std::string("order\r\nplaced\t\x1b[31m")),
                  pqxx::check_violation);
  tx.abort();
  CHECK(testenv::sql_value("SELECT count(*) FROM \"" + schema.name() + "\".outbox") == "0");
}

TEST_CASE("status lists the 50 types with the most pending rows, not every one of thousands; --json lists them all") {
  ScopedSchema schema;
  // 3 000 distinct types of one row each, as a script or a bad producer writes them,
  // and two busy types that sort last by name.
  sql_exec("INSERT INTO \"" + schema.name() +
           "\".outbox (exchange, routing_key, message_type, payload) "
           "SELECT 'ex', 'rk', 'T' || lpad(g::text, 5, '0'), '\\x7b7d'::bytea FROM generate_series(1, 3000) g");
  sql_exec("INSERT INTO \"" + schema.name() +
           "\".outbox (exchange, routing_key, message_type, payload) "
           "SELECT 'ex', 'rk', CASE WHEN g <= 5 THEN 'zzBusy' ELSE 'zzSecond' END, '\\x7b7d'::bytea "
           "FROM generate_series(1, 8) g");
  const auto cfg = testenv::write_temp_file(testenv::relay_config_yaml(schema.name()));

  auto text = run_relay_command({"status", "-c", cfg});
  REQUIRE_MESSAGE(text.exit_code == 0, text.output.substr(0, 2000));
  const auto lines = std::count(text.output.begin(), text.output.end(), '\n');
  CHECK_MESSAGE(lines < 70, lines);
  CHECK(contains(text.output, "pending                        3008"));  // totals count every type
  CHECK(contains(text.output, "zzBusy "));
  CHECK(contains(text.output, "zzSecond "));
  CHECK(contains(text.output, "T00048 "));
  CHECK(!contains(text.output, "T00049 "));
  CHECK_MESSAGE(contains(text.output, "... and 2952 more types (--json lists every type)"),
                text.output.substr(0, 4000));
  CHECK(text.output.find("zzBusy") < text.output.find("zzSecond"));

  auto json = run_relay_command({"status", "-c", cfg, "--json"});
  REQUIRE(json.exit_code == 0);
  const auto j = json_of(json.output);
  CHECK(j["by_type"].size() == 3002);
  CHECK(j["pending"] == 3008);
}
