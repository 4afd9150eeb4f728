// The admin commands against real servers: status reports the backlog, replay
// republishes with the same message id, cleanup deletes only old published rows.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <sstream>

#include "outbox/outbox_writer.h"
#include "relay_process.h"
#include "test_env.h"
#include "test_text.h"

using namespace outbox;
using testenv::RelayProcess;
using testenv::run_relay_command;
using testenv::ScopedSchema;
using testenv::sql_exec;
using testenv::sql_value;
using testenv::TestBroker;

namespace {

using testenv::contains;

std::string table(const ScopedSchema& s) { return "\"" + s.name() + "\".outbox"; }

std::string config_file(const ScopedSchema& s) {
  return testenv::write_temp_file(testenv::relay_config_yaml(s.name()));
}

std::vector<std::string> enqueue(const ScopedSchema& schema, const std::string& exchange, const std::string& key,
                                 const std::string& type, int n) {
  OutboxWriter writer({schema.name(), {}});
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) {
    Message m;
    m.exchange = Exchange(exchange);
    m.routing_key = RoutingKey(key);
    m.type = MessageType(type);
    m.payload = R"({"i":)" + std::to_string(i) + "}";
    ids.push_back(writer.enqueue(tx, m).to_string());
  }
  tx.commit();
  return ids;
}

int drain(const ScopedSchema& schema) {
  RelayProcess relay(testenv::relay_config_yaml(schema.name()), /*exit_when_idle=*/true);
  return relay.wait();
}

// The JSON object a command printed (stdout and stderr are captured together).
nlohmann::json json_of(const testenv::CommandResult& r) {
  auto begin = r.output.find('{'), end = r.output.rfind('}');
  REQUIRE(begin != std::string::npos);
  return nlohmann::json::parse(r.output.substr(begin, end - begin + 1));
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("status reports pending, parked, oldest pending age and published in the last minute, by type") {
  ScopedSchema schema;
  enqueue(schema, "ex", "rk", "OrderPlaced", 4);
  enqueue(schema, "ex", "rk", "RefundIssued", 3);
  sql_exec("UPDATE " + table(schema) +
           " SET created_at = now() - interval '90 seconds' "
           "WHERE message_type = 'OrderPlaced'");
  sql_exec("UPDATE " + table(schema) +
           " SET published_at = now() WHERE id IN "
           "(SELECT id FROM " +
           table(schema) + " WHERE message_type = 'OrderPlaced' ORDER BY id LIMIT 2)");
  sql_exec("UPDATE " + table(schema) +
           " SET parked_at = now(), attempts = 10 WHERE id = "
           "(SELECT max(id) FROM " +
           table(schema) + " WHERE message_type = 'RefundIssued')");

  auto r = run_relay_command({"status", "--config", config_file(schema), "--json"});
  REQUIRE(r.exit_code == 0);
  auto j = json_of(r);
  CHECK(j["pending"] == 4);  // 2 OrderPlaced + 2 RefundIssued
  CHECK(j["parked"] == 1);
  CHECK(j["published_last_minute"] == 2);
  CHECK(j["oldest_pending_age_s"].get<double>() >= 89);
  REQUIRE(j["by_type"].size() == 2);
  CHECK(j["by_type"][0]["type"] == "OrderPlaced");
  CHECK(j["by_type"][0]["pending"] == 2);
  CHECK(j["by_type"][1]["type"] == "RefundIssued");
  CHECK(j["by_type"][1]["parked"] == 1);
  CHECK(j["by_type"][1]["oldest_pending_age_s"].get<double>() < 60);

  auto text = run_relay_command({"status", "--config", config_file(schema)});
  CHECK(text.exit_code == 0);
  CHECK(contains(text.output, "oldest pending age"));
  CHECK(contains(text.output, "1 min 3"));  // 90-odd seconds, for people
  CHECK(contains(text.output, "RefundIssued"));
}

TEST_CASE("replay --id publishes a published row again with the same message id, once") {
  ScopedSchema schema;
  TestBroker broker;
  auto ids = enqueue(schema, broker.exchange(), broker.routing_key(), "OrderPlaced", 3);
  REQUIRE(drain(schema) == 0);
  REQUIRE(broker.receive(3, std::chrono::milliseconds(1500)).size() == 3);

  auto r = run_relay_command({"replay", "--config", config_file(schema), "--id", ids[1], "--json"});
  REQUIRE(r.exit_code == 0);
  CHECK(json_of(r)["replayed"] == 1);
  CHECK(sql_value("SELECT count(*) FROM " + table(schema) + " WHERE published_at IS NULL") == "1");
  REQUIRE(drain(schema) == 0);
  auto again = broker.receive(2, std::chrono::milliseconds(1500));
  REQUIRE(again.size() == 1);
  CHECK(again[0].message_id == ids[1]);
  CHECK(sql_value("SELECT count(*) FROM " + table(schema) + " WHERE published_at IS NULL") == "0");
}

TEST_CASE("replay refuses unknown, pending and parked ids and then changes nothing") {
  ScopedSchema schema;
  auto ids = enqueue(schema, "ex", "rk", "OrderPlaced", 3);
  sql_exec("UPDATE " + table(schema) + " SET published_at = now() WHERE message_id = '" + ids[0] + "'");
  sql_exec("UPDATE " + table(schema) + " SET parked_at = now() WHERE message_id = '" + ids[2] + "'");
  const std::string unknown = "01900000-0000-7000-8000-000000000000";
  auto r = run_relay_command({"replay", "--config", config_file(schema), "--id", ids[0], ids[1], ids[2], unknown});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, ids[1] + " is not published yet (pending)"));
  CHECK(contains(r.output, ids[2] + " is parked"));
  CHECK(contains(r.output, unknown + " not found"));
  CHECK(contains(r.output, "nothing changed"));
  CHECK(sql_value("SELECT count(*) FROM " + table(schema) + " WHERE published_at IS NOT NULL") == "1");

  auto bad = run_relay_command({"replay", "--config", config_file(schema), "--id", "not-an-id"});
  CHECK(bad.exit_code == 2);
  CHECK(contains(bad.output, "--id 'not-an-id' is neither a message id (UUID) nor an outbox id"));
  CHECK(run_relay_command({"replay", "--config", config_file(schema)}).exit_code == 2);
  CHECK(run_relay_command({"replay", "--config", config_file(schema), "--since", "yesterday"}).exit_code == 2);
}

TEST_CASE("replay --id with --type refuses an id of another type and then changes nothing") {
  ScopedSchema schema;
  auto a = enqueue(schema, "ex", "rk", "TypeA", 1);
  auto b = enqueue(schema, "ex", "rk", "TypeB", 1);
  sql_exec("UPDATE " + table(schema) + " SET published_at = now()");
  auto r = run_relay_command({"replay", "--config", config_file(schema), "--id", a[0], b[0], "--type", "TypeA"});
  CHECK(r.exit_code == 2);
  CHECK_MESSAGE(contains(r.output, b[0] + " is of type 'TypeB', not --type 'TypeA'"), r.output);
  CHECK(contains(r.output, "nothing changed"));
  CHECK(sql_value("SELECT count(*) FROM " + table(schema) + " WHERE published_at IS NULL") == "0");
  auto ok = run_relay_command({"replay", "--config", config_file(schema), "--id", a[0], "--type", "TypeA", "--json"});
  CHECK(ok.exit_code == 0);
  CHECK(json_of(ok)["replayed"] == 1);
}

TEST_CASE("replay --since selects by publication time and type, honours --max and --dry-run") {
  ScopedSchema schema;
  enqueue(schema, "ex", "rk", "OrderPlaced", 3);
  enqueue(schema, "ex", "rk", "RefundIssued", 2);
  sql_exec("UPDATE " + table(schema) + " SET published_at = now() - interval '3 hours'");
  sql_exec("UPDATE " + table(schema) + " SET published_at = now() WHERE id IN (SELECT id FROM " + table(schema) +
           " WHERE message_type = 'OrderPlaced' ORDER BY id LIMIT 2)");
  const auto cfg = config_file(schema);

  auto dry = run_relay_command({"replay", "--config", cfg, "--since", "1h", "--dry-run", "--json"});
  REQUIRE(dry.exit_code == 0);
  CHECK(json_of(dry)["matched"] == 2);
  CHECK(sql_value("SELECT count(*) FROM " + table(schema) + " WHERE published_at IS NULL") == "0");

  auto too_many = run_relay_command({"replay", "--config", cfg, "--since", "1d", "--max", "4"});
  CHECK(too_many.exit_code == 2);
  CHECK(contains(too_many.output, "5 rows match, more than --max 4"));

  auto typed = run_relay_command({"replay", "--config", cfg, "--since", "2000-01-01T00:00:00Z", "--type",
                                  "RefundIssued", "--expect", "2", "--json"});
  REQUIRE(typed.exit_code == 0);
  CHECK(json_of(typed)["replayed"] == 2);
  CHECK(sql_value("SELECT string_agg(DISTINCT message_type, ',') FROM " + table(schema) +
                  " WHERE published_at IS NULL") == "RefundIssued");
}

TEST_CASE("replay --since changes nothing until --expect confirms the count it printed") {
  ScopedSchema schema;
  enqueue(schema, "ex", "rk", "OrderPlaced", 3);
  enqueue(schema, "ex", "rk", "RefundIssued", 2);
  sql_exec("UPDATE " + table(schema) + " SET published_at = now() - interval '1 hour'");
  const auto cfg = config_file(schema);
  const auto pending = [&] {
    return sql_value("SELECT count(*) FROM " + table(schema) + " WHERE published_at IS NULL");
  };

  // A whole-table range, as a tired operator types it: shown, not replayed.
  auto blind = run_relay_command({"replay", "--config", cfg, "--since", "3650d"});
  CHECK_MESSAGE(blind.exit_code == 2, blind.output);
  CHECK_MESSAGE(contains(blind.output,
                         "5 published row(s) match; nothing changed. To replay them run again with --until "),
                blind.output);
  CHECK_MESSAGE(contains(blind.output, "Z --expect 5"), blind.output);
  CHECK_MESSAGE(contains(blind.output, "by type: OrderPlaced 3, RefundIssued 2; published "), blind.output);
  CHECK(pending() == "0");

  auto wrong = run_relay_command({"replay", "--config", cfg, "--since", "3650d", "--expect", "2"});
  CHECK_MESSAGE(wrong.exit_code == 2, wrong.output);
  CHECK_MESSAGE(contains(wrong.output, "5 row(s) match, not --expect 2"), wrong.output);
  CHECK(pending() == "0");

  auto confirmed = run_relay_command({"replay", "--config", cfg, "--since", "3650d", "--expect", "5", "--json"});
  REQUIRE_MESSAGE(confirmed.exit_code == 0, confirmed.output);
  CHECK(json_of(confirmed)["replayed"] == 5);
  CHECK(pending() == "5");
}

TEST_CASE("dead requeue --type and --all change nothing until --expect confirms the count they printed") {
  ScopedSchema schema;
  enqueue(schema, "ex", "rk", "OrderPlaced", 3);
  const auto refunds = enqueue(schema, "ex", "rk", "RefundIssued", 2);
  sql_exec("UPDATE " + table(schema) + " SET parked_at = now(), attempts = 10");
  const auto cfg = config_file(schema);
  const auto parked = [&] {
    return sql_value("SELECT count(*) FROM " + table(schema) + " WHERE parked_at IS NOT NULL");
  };

  // Every parked payment, when the operator fixed the cause of one batch: shown, not requeued.
  auto blind = run_relay_command({"dead", "requeue", "--config", cfg, "--all"});
  CHECK_MESSAGE(blind.exit_code == 2, blind.output);
  CHECK_MESSAGE(contains(blind.output,
                         "5 parked row(s) match; nothing changed. To requeue them run again with --until "),
                blind.output);
  CHECK_MESSAGE(contains(blind.output, "Z --expect 5"), blind.output);
  CHECK_MESSAGE(contains(blind.output, "by type: OrderPlaced 3, RefundIssued 2"), blind.output);
  CHECK(parked() == "5");

  auto wrong = run_relay_command({"dead", "requeue", "--config", cfg, "--type", "OrderPlaced", "--expect", "2"});
  CHECK_MESSAGE(wrong.exit_code == 2, wrong.output);
  CHECK_MESSAGE(contains(wrong.output, "3 row(s) match, not --expect 2"), wrong.output);
  CHECK(parked() == "5");

  auto dry = run_relay_command({"dead", "requeue", "--config", cfg, "--type", "OrderPlaced", "--dry-run", "--json"});
  REQUIRE_MESSAGE(dry.exit_code == 0, dry.output);
  CHECK(json_of(dry)["matched"] == 3);
  CHECK(json_of(dry)["requeued"] == 0);
  CHECK(parked() == "5");

  auto confirmed = run_relay_command({"dead", "requeue", "--config", cfg, "--type", "OrderPlaced", "--expect", "3",
                                      "--json"});
  REQUIRE_MESSAGE(confirmed.exit_code == 0, confirmed.output);
  CHECK(json_of(confirmed)["requeued"] == 3);
  CHECK(sql_value("SELECT string_agg(DISTINCT message_type, ',') FROM " + table(schema) +
                  " WHERE parked_at IS NULL AND attempts = 0") == "OrderPlaced");

  // An id that names no parked row stops the requeue before anything changes.
  const std::string unknown = "01900000-0000-7000-8000-000000000000";
  const auto requeued = sql_value("SELECT message_id::text FROM " + table(schema) +
                                  " WHERE parked_at IS NULL ORDER BY id LIMIT 1");
  auto refused = run_relay_command({"dead", "requeue", "--config", cfg, "--id", refunds[0], requeued, unknown});
  CHECK_MESSAGE(refused.exit_code == 2, refused.output);
  CHECK_MESSAGE(contains(refused.output, requeued + " is not parked"), refused.output);
  CHECK_MESSAGE(contains(refused.output, unknown + " not found"), refused.output);
  CHECK_FALSE(contains(refused.output, refunds[0] + " "));
  CHECK_MESSAGE(contains(refused.output, "dead requeue: nothing changed"), refused.output);
  CHECK(parked() == "2");

  // Ids are a selection the operator wrote out: no --expect needed.
  auto by_id = run_relay_command({"dead", "requeue", "--config", cfg, "--id", refunds[0]});
  CHECK_MESSAGE(by_id.exit_code == 0, by_id.output);
  CHECK(parked() == "1");
}

TEST_CASE("replay --since confirms the count its dry run printed while the type is still being published") {
  ScopedSchema schema;
  enqueue(schema, "ex", "rk", "PaymentCaptured", 5);
  sql_exec("UPDATE " + table(schema) + " SET published_at = now() - interval '2 minutes'");
  const auto cfg = config_file(schema);

  auto dry = run_relay_command({"replay", "--config", cfg, "--since", "5m", "--type", "PaymentCaptured", "--dry-run",
                                "--json"});
  REQUIRE_MESSAGE(dry.exit_code == 0, dry.output);
  CHECK(json_of(dry)["matched"] == 5);
  const std::string until = json_of(dry)["until"];
  REQUIRE_MESSAGE(until.size() == 27, until);  // 2026-12-05T09:30:00.123456Z
  auto shown = run_relay_command({"replay", "--config", cfg, "--since", "5m", "--type", "PaymentCaptured",
                                  "--dry-run"});
  CHECK_MESSAGE(contains(shown.output, "; to replay them: --until "), shown.output);

  // The type goes on being published between the dry run and the confirmation.
  enqueue(schema, "ex", "rk", "PaymentCaptured", 3);
  sql_exec("UPDATE " + table(schema) + " SET published_at = clock_timestamp() WHERE published_at IS NULL");

  // Without the bound the count has moved; with the one the dry run printed it has not.
  auto moved = run_relay_command({"replay", "--config", cfg, "--since", "5m", "--type", "PaymentCaptured", "--expect",
                                  "5"});
  CHECK_MESSAGE(moved.exit_code == 2, moved.output);
  CHECK_MESSAGE(contains(moved.output, "8 row(s) match, not --expect 5"), moved.output);
  auto confirmed = run_relay_command({"replay", "--config", cfg, "--since", "5m", "--until", until, "--type",
                                      "PaymentCaptured", "--expect", "5", "--json"});
  REQUIRE_MESSAGE(confirmed.exit_code == 0, confirmed.output);
  CHECK(json_of(confirmed)["replayed"] == 5);
  CHECK(sql_value("SELECT count(*) FROM " + table(schema) + " WHERE published_at IS NULL") == "5");
  CHECK(sql_value("SELECT count(*) FROM " + table(schema) + " WHERE published_at IS NOT NULL") == "3");
}

TEST_CASE("dead requeue --all confirms the count its dry run printed while rows go on being parked") {
  ScopedSchema schema;
  enqueue(schema, "ex", "rk", "OrderPlaced", 4);
  sql_exec("UPDATE " + table(schema) + " SET parked_at = now() - interval '1 minute', attempts = 10");
  const auto cfg = config_file(schema);
  auto dry = run_relay_command({"dead", "requeue", "--config", cfg, "--all", "--dry-run", "--json"});
  REQUIRE_MESSAGE(dry.exit_code == 0, dry.output);
  CHECK(json_of(dry)["matched"] == 4);
  const std::string until = json_of(dry)["until"];
  enqueue(schema, "ex", "rk", "OrderPlaced", 2);
  sql_exec("UPDATE " + table(schema) + " SET parked_at = clock_timestamp(), attempts = 10 WHERE parked_at IS NULL");
  auto confirmed = run_relay_command({"dead", "requeue", "--config", cfg, "--all", "--until", until, "--expect", "4",
                                      "--json"});
  REQUIRE_MESSAGE(confirmed.exit_code == 0, confirmed.output);
  CHECK(json_of(confirmed)["requeued"] == 4);
  CHECK(sql_value("SELECT count(*) FROM " + table(schema) + " WHERE parked_at IS NOT NULL") == "2");
}

TEST_CASE("--until is refused with --id and when it is neither a time nor an age, naming it") {
  ScopedSchema schema;
  const auto ids = enqueue(schema, "ex", "rk", "OrderPlaced", 1);
  const auto cfg = config_file(schema);
  auto with_id = run_relay_command({"replay", "--config", cfg, "--id", ids[0], "--until", "1h"});
  CHECK_MESSAGE(with_id.exit_code == 2, with_id.output);
  CHECK_MESSAGE(contains(with_id.output, "--until"), with_id.output);
  auto bad = run_relay_command({"replay", "--config", cfg, "--since", "1h", "--until", "soon", "--dry-run"});
  CHECK_MESSAGE(bad.exit_code == 2, bad.output);
  CHECK_MESSAGE(contains(bad.output, "--until 'soon' is neither an RFC 3339 time"), bad.output);
  auto dead_id = run_relay_command({"dead", "requeue", "--config", cfg, "--id", ids[0], "--until", "1h"});
  CHECK_MESSAGE(dead_id.exit_code == 2, dead_id.output);
  CHECK_MESSAGE(contains(dead_id.output, "--until"), dead_id.output);
}

TEST_CASE("replay --since reads a time without an offset as UTC whatever the session's time zone") {
  ScopedSchema schema;
  enqueue(schema, "ex", "rk", "OrderPlaced", 1);
  sql_exec("UPDATE " + table(schema) + " SET published_at = '2024-05-01 09:30:00+00'");
  const auto cfg = config_file(schema);
  // libpq sets the session's TimeZone from PGTZ: 10:00 in Tokyo is 01:00 UTC.
  setenv("PGTZ", "Asia/Tokyo", 1);
  auto r = run_relay_command({"replay", "--config", cfg, "--since", "2024-05-01T10:00:00", "--dry-run", "--json"});
  auto shown = run_relay_command({"replay", "--config", cfg, "--since", "2024-05-01T09:00", "--dry-run"});
  unsetenv("PGTZ");
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK_MESSAGE(json_of(r)["matched"] == 0, r.output);  // published 09:30 UTC, before 10:00 UTC
  CHECK_MESSAGE(contains(shown.output, "published 2024-05-01 09:30:00+00 to 2024-05-01 09:30:00+00"), shown.output);
}

TEST_CASE("cleanup deletes only rows published before the cutoff, in batches, keeping pending and parked ones") {
  ScopedSchema schema;
  enqueue(schema, "ex", "rk", "OrderPlaced", 30);
  const auto t = table(schema);
  // ids 1-20: published 10 days ago; 21-25: published now; 26-28: pending for 10
  // days; 29-30: parked for 10 days.
  sql_exec("UPDATE " + t + " SET created_at = now() - interval '10 days'");
  sql_exec("UPDATE " + t + " SET published_at = created_at + interval '1 second' WHERE id <= 20");
  sql_exec("UPDATE " + t + " SET published_at = now() WHERE id BETWEEN 21 AND 25");
  sql_exec("UPDATE " + t + " SET parked_at = now() WHERE id >= 29");

  auto dry = run_relay_command({"cleanup", "--config", config_file(schema), "--older-than", "7d", "--dry-run",
                                "--json"});
  REQUIRE(dry.exit_code == 0);
  CHECK(json_of(dry)["matched"] == 20);
  CHECK(sql_value("SELECT count(*) FROM " + t) == "30");

  auto r = run_relay_command({"cleanup", "--config", config_file(schema), "--older-than", "7d", "--batch", "3",
                              "--json"});
  REQUIRE(r.exit_code == 0);
  CHECK(json_of(r)["deleted"] == 20);
  CHECK(sql_value("SELECT count(*) FROM " + t) == "10");
  CHECK(sql_value("SELECT min(id) FROM " + t) == "21");
  CHECK(sql_value("SELECT count(*) FROM " + t + " WHERE published_at IS NULL AND parked_at IS NULL") == "3");
  CHECK(sql_value("SELECT count(*) FROM " + t + " WHERE parked_at IS NOT NULL") == "2");
}

TEST_CASE("cleanup shows progress and an ETA on a terminal") {
  ScopedSchema schema;
  enqueue(schema, "ex", "rk", "OrderPlaced", 50);
  sql_exec("UPDATE " + table(schema) +
           " SET created_at = now() - interval '2 days', "
           "published_at = now() - interval '2 days'");
  // script(1) gives the command a pseudo-terminal.
  const auto out = testenv::write_temp_file("", ".out");
  const std::string cmd = "script -qec '" + std::string(OUTBOX_RELAY_BIN) + " cleanup --config " + config_file(schema) +
                          " --older-than 1d --batch 10' /dev/null >" + out + " 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  auto text = read_file(out);
  CHECK(contains(text, "deleted 50 of 50 (100%)"));
  CHECK(contains(text, "ETA"));
  CHECK(sql_value("SELECT count(*) FROM " + table(schema)) == "0");
}

TEST_CASE("cleanup exits 1 while the retention lock is held elsewhere, and deletes nothing") {
  ScopedSchema schema;
  enqueue(schema, "ex", "rk", "OrderPlaced", 5);
  sql_exec("UPDATE " + table(schema) +
           " SET created_at = now() - interval '9 days', "
           "published_at = now() - interval '9 days'");
  pqxx::connection holder(testenv::pg_dsn());
  pqxx::nontransaction(holder).exec("SELECT pg_advisory_lock(hashtextextended('outbox-retention:" + schema.name() +
                                    "', 0))");
  auto r = run_relay_command({"cleanup", "--config", config_file(schema), "--older-than", "7d"});
  CHECK(r.exit_code == 1);
  CHECK(contains(r.output, "retention or another cleanup is running on schema '" + schema.name() + "'"));
  CHECK(sql_value("SELECT count(*) FROM " + table(schema)) == "5");
}

TEST_CASE("admin commands on a schema never migrated say to run migrate first, on one line") {
  const auto schema = testenv::unique_name("never_migrated");
  testenv::sql_exec("CREATE SCHEMA " + schema);  // there, but without the outbox table
  const auto config = testenv::write_temp_file(testenv::relay_config_yaml(schema));
  const std::vector<std::vector<std::string>> commands = {{"status", "--config", config},
                                                          {"dead", "list", "--config", config},
                                                          {"replay", "--config", config, "--since", "1h", "--dry-run"}};
  for (const auto& command : commands) {
    std::vector<std::string> args = command;
    const auto r = testenv::run_relay_command(args);
    CAPTURE(r.output);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.output, "schema '" + schema +
                                 "' is not migrated to this version of outbox-relay: run "
                                 "outbox-relay migrate first"));
    CHECK_FALSE(contains(r.output, "LINE 1"));  // PostgreSQL's first line only, not its query excerpt
  }
  testenv::sql_exec("DROP SCHEMA " + schema);
}

TEST_CASE("run on a schema an older release migrated exits 1 at start, saying to run migrate first") {
  testenv::ScopedSchema schema("old", 17);  // before migration 0018's deliver_at column
  const auto config = testenv::write_temp_file(testenv::relay_config_yaml(schema.name()));
  const auto r = testenv::run_relay_command({"run", "--config", config, "--exit-when-idle"});
  CAPTURE(r.output);
  CHECK(r.exit_code == 1);
  CHECK(contains(r.output, "table \"" + schema.name() +
                               "\".outbox has no column deliver_at (migration 0018), which this outbox-relay claims "
                               "by: run outbox-relay migrate first"));
  schema.migrate();
  CHECK(testenv::run_relay_command({"run", "--config", config, "--exit-when-idle"}).exit_code == 0);
}

TEST_CASE("each admin command has --help with its exit codes, and bad usage exits 2") {
  for (std::string cmd : {"status", "replay", "cleanup"}) {
    auto help = run_relay_command({cmd, "--help"});
    CHECK(help.exit_code == 0);
    CHECK(contains(help.output, "usage: outbox-relay " + cmd));
    CHECK(contains(help.output, "exit codes:"));
    auto bad = run_relay_command({cmd, "--config", "x.yaml", "--bogus"});
    CHECK(bad.exit_code == 2);
    CHECK(contains(bad.output, "unknown argument '--bogus' for " + cmd));
  }
  auto r = run_relay_command({"cleanup", "--config", "x.yaml", "--older-than", "30s"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "--older-than must be at least 1m"));
}

TEST_CASE(
    "migrate and the admin commands refuse an unencrypted session when postgres.require_tls is set, as run does") {
  ScopedSchema schema;
  // Over a Unix socket libpq uses no TLS whatever sslmode says: only the session check catches it.
  auto dirs = sql_value("SHOW unix_socket_directories");
  const auto dsn = "host=" + dirs.substr(0, dirs.find(',')) + " port=" + sql_value("SHOW port") +
                   " user=" + sql_value("SELECT current_user") + " dbname=" + sql_value("SELECT current_database()") +
                   " sslmode=verify-full sslrootcert=/nonexistent/ca.crt";
  const auto yaml = "postgres:\n  dsn: " + dsn + "\n  schema: " + schema.name() +
                    "\n  require_tls: true\namqp:\n  uri: ${OUTBOX_AMQP_URI}\n";
  const auto cfg = testenv::write_temp_file(yaml);
  for (const auto& args : {std::vector<std::string>{"status", "-c", cfg},
                           {"dead", "list", "-c", cfg},
                           {"replay", "-c", cfg, "--since", "1h", "--dry-run"},
                           {"cleanup", "-c", cfg, "--older-than", "7d", "--dry-run"},
                           {"migrate", "-c", cfg}}) {
    auto r = run_relay_command(args);
    CHECK_MESSAGE(r.exit_code == 1, r.output);
    CHECK_MESSAGE(contains(r.output, "postgres.require_tls is true but the PostgreSQL session is not encrypted"),
                  r.output);
  }
  // The same file without require_tls works: the session itself is fine.
  auto plain = testenv::write_temp_file(yaml.substr(0, yaml.find("  require_tls")) +
                                        "amqp:\n  uri: ${OUTBOX_AMQP_URI}\n");
  auto ok = run_relay_command({"status", "-c", plain});
  CHECK_MESSAGE(ok.exit_code == 0, ok.output);
}
