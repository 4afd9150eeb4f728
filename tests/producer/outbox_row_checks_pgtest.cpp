// Migrations 0007 and 0009: the outbox table refuses, with an error naming the rule, the rows
// the relay cannot send, when they are written around the SDK (a hand-written
// INSERT, as a producer in another language writes it). Rows from before the
// migration stay, and the relay can still mark them.
#include <doctest/doctest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "outbox/errors.h"
#include "outbox/header_rules.h"
#include "outbox/outbox_writer.h"
#include "outbox/pqxx_compat.h"
#include "relay_process.h"
#include "test_env.h"

using namespace outbox;
using testenv::ScopedSchema;
using testenv::sql_exec;
using testenv::sql_value;

namespace {

std::string table(const ScopedSchema& s) { return "\"" + s.name() + "\".outbox"; }

std::string quoted(const std::string& text) { return pqxx::connection(testenv::pg_dsn()).quote(text); }

// An INSERT naming the columns a producer writes, with `values` (SQL expressions)
// in place of the defaults; "headers" and the other optional columns may be added.
std::string insert_sql(const ScopedSchema& s, std::map<std::string, std::string> values = {}) {
  const std::map<std::string, std::string> defaults = {{"message_id", "gen_random_uuid()"},
                                                       {"exchange", "'orders'"},
                                                       {"routing_key", "'order.placed'"},
                                                       {"message_type", "'OrderPlaced'"},
                                                       {"payload", "'PAYLOAD-MARKER'"}};
  for (const auto& [column, value] : defaults) values.emplace(column, value);
  std::string columns, list;
  for (const auto& [column, value] : values) {
    columns += (columns.empty() ? "" : ", ") + column;
    list += (list.empty() ? "" : ", ") + value;
  }
  return "INSERT INTO " + table(s) + " (" + columns + ") VALUES (" + list + ")";
}

std::string insert_headers(const ScopedSchema& s, const std::string& headers) {
  return insert_sql(s, {{"headers", headers}});
}

// The check constraint a statement violates, or "(accepted)"; "(other: ...)" for any
// other error. A violation must be SQLSTATE 23514.
std::string violated(const std::string& sql) {
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  try {
    tx.exec(sql);
  } catch (const pqxx::sql_error& e) {
    if (e.sqlstate() != "23514") return "(other: " + e.sqlstate() + " " + e.what() + ")";
    const std::string what = e.what();
    const std::string marker = "violates check constraint \"";
    const auto at = what.find(marker);
    if (at == std::string::npos) return "(unnamed: " + what + ")";
    const auto begin = at + marker.size();
    return what.substr(begin, what.find('"', begin) - begin);
  }
  tx.commit();
  return "(accepted)";
}

std::string headers_with(const std::string& name, const std::string& value) {
  return "jsonb_build_object(" + quoted(name) + "::text, " + quoted(value) + "::text)";
}

// n headers of `value_bytes` ASCII bytes each, named h0001...: 6 + 5 + value_bytes each.
std::string big_headers(int n, int value_bytes) {
  return "(SELECT jsonb_object_agg('h' || lpad(i::text, 4, '0'), repeat('v', " + std::to_string(value_bytes) +
         ")) FROM generate_series(1, " + std::to_string(n) + ") i)";
}

// Headers whose entries take exactly `bytes` of the AMQP table (see header_entries_bytes).
std::string headers_of_bytes(std::size_t bytes) {
  const int full = static_cast<int>((bytes - 100) / (6 + 5 + 4096));
  const std::size_t rest = bytes - full * (6 + 5 + 4096) - (6 + 4);
  return "(" + big_headers(full, 4096) + " || jsonb_build_object('last', repeat('v', " + std::to_string(rest) + ")))";
}

int count(const ScopedSchema& s, const std::string& where) {
  return std::stoi(sql_value("SELECT count(*) FROM " + table(s) + " WHERE " + where));
}

}  // namespace

TEST_CASE("a row the relay can send passes the checks, at each limit") {
  ScopedSchema s;
  CHECK(violated(insert_sql(s)) == "(accepted)");
  CHECK(violated(insert_headers(s, headers_with("traceparent",
                                                "00-4bf92f3577b34da6a50ef0ad5d85bd2b-00f067aa0ba902b7-01"))) ==
        "(accepted)");
  CHECK(violated(insert_headers(s, headers_with(std::string(128, 'n'), std::string(4096, 'v')))) == "(accepted)");
  CHECK(violated(insert_headers(s, headers_with("city", std::string(2048, 'x') + "\u00e9\u00e9\u00e9\u00e9"))) ==
        "(accepted)");  // 2052 characters, 2056 bytes
  CHECK(violated(insert_headers(s, headers_of_bytes(kMaxHeadersBytes))) == "(accepted)");
  // 255 bytes, 254 of them in 127 two-byte characters: bytes count, as on the wire.
  for (std::string column :
       {"exchange", "routing_key", "message_type", "content_type", "ordering_key", "correlation_id"})
    CHECK_MESSAGE(violated(insert_sql(s, {{column, "repeat('\u00e9', 127) || 'k'"}})) == "(accepted)", column);
}

TEST_CASE("headers that are not an object of strings are refused by outbox_headers_object") {
  ScopedSchema s;
  for (std::string bad : {"'[]'", "'\"text\"'", "'null'", "'{\"n\": 1}'", "'{\"n\": null}'", "'{\"n\": true}'",
                          "'{\"n\": {\"a\": \"b\"}}'", "'{\"n\": [\"a\"]}'", "'{\"ok\": \"v\", \"n\": 2}'"})
    CHECK_MESSAGE(violated(insert_headers(s, bad)) == "outbox_headers_object", bad);
}

TEST_CASE("header names outside 1-128 of [A-Za-z0-9_.-] are refused by outbox_header_names") {
  ScopedSchema s;
  for (std::string bad : {std::string(""), std::string("has space"), std::string("semi;colon"),
                          std::string("\u00fcn\u00efcode"), std::string("new\nline"), std::string(129, 'n')})
    CHECK_MESSAGE(violated(insert_headers(s, headers_with(bad, "v"))) == "outbox_header_names", bad);
}

TEST_CASE("every header name the SDK reserves is refused by outbox_header_names_reserved") {
  ScopedSchema s;
  // Taken from the SDK's own list, so the table and the SDK cannot drift apart.
  for (const auto& r : reserved_headers()) {
    const std::string name = std::string(r.name) + (r.prefix ? "queue" : "");
    CHECK_MESSAGE(violated(insert_headers(s, headers_with(name, "v"))) == "outbox_header_names_reserved", name);
  }
  for (std::string fine : {"cc", "Bcc", "x-deathly", "x-outbox", "tenant-CC", "x-tenant"})
    CHECK_MESSAGE(violated(insert_headers(s, headers_with(fine, "v"))) == "(accepted)", fine);
}

TEST_CASE("a header value above 4096 bytes is refused by outbox_header_values, counting bytes not characters") {
  ScopedSchema s;
  CHECK(violated(insert_headers(s, headers_with("h", std::string(4097, 'v')))) == "outbox_header_values");
  // 2049 characters, 4098 bytes.
  CHECK(violated(insert_headers(s, "jsonb_build_object('h', repeat('\u00e9', 2049))")) == "outbox_header_values");
  CHECK(violated(insert_headers(s, "jsonb_build_object('h', repeat('\u00e9', 2048))")) == "(accepted)");
}

TEST_CASE("headers above the table's bound are refused by outbox_headers_size: the 40 x 4 KiB report") {
  ScopedSchema s;
  CHECK(violated(insert_headers(s, big_headers(40, 4096))) == "outbox_headers_size");
  CHECK(violated(insert_headers(s, headers_of_bytes(kMaxHeadersBytes + 1))) == "outbox_headers_size");
}

TEST_CASE("a column longer than an AMQP short string is refused by outbox_shortstr_lengths") {
  ScopedSchema s;
  // 256 bytes in 128 characters: bytes count, as on the wire.
  for (std::string column :
       {"exchange", "routing_key", "message_type", "content_type", "ordering_key", "correlation_id"})
    CHECK_MESSAGE(violated(insert_sql(s, {{column, "repeat('\u00e9', 128)"}})) == "outbox_shortstr_lengths", column);
}

TEST_CASE("a plain INSERT is refused what enqueue() refuses: sentinel ids, empty content type and correlation id") {
  ScopedSchema s;
  for (std::string id : {"'00000000-0000-0000-0000-000000000000'", "'ffffffff-ffff-ffff-ffff-ffffffffffff'",
                         "'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF'"})
    CHECK_MESSAGE(violated(insert_sql(s, {{"message_id", id}})) == "outbox_message_id_distinct", id);
  CHECK(violated(insert_sql(s, {{"content_type", "''"}})) == "outbox_content_type_not_empty");
  CHECK(violated(insert_sql(s, {{"correlation_id", "''"}})) == "outbox_correlation_id_not_empty");
  // Their neighbours pass: any other id, a content type, no correlation id.
  CHECK(violated(insert_sql(s, {{"message_id", "'00000000-0000-0000-0000-000000000001'"}})) == "(accepted)");
  CHECK(violated(insert_sql(s, {{"content_type", "'text/plain'"}, {"correlation_id", "NULL"}})) == "(accepted)");
  CHECK(count(s, "true") == 2);
}

TEST_CASE("a control character in a column the relay sends is refused by outbox_control_characters") {
  ScopedSchema s;
  // CR, LF, TAB, ESC, DEL, NEL (U+0085) and CSI (U+009B), in each of the five columns.
  for (std::string bad :
       {"E'a\\rb'", "E'a\\nb'", "E'a\\tb'", "E'a\\u001b[2J'", "E'a\\u007f'", "E'a\\u0085'", "E'\\u009b31m'"})
    for (std::string column : {"exchange", "routing_key", "message_type", "content_type", "correlation_id"})
      CHECK_MESSAGE(violated(insert_sql(s, {{column, bad}})) == "outbox_control_characters",
                    std::string(column + " " + bad));
  // Not sent, not refused: the ordering key; nor printable text of any script, nor a header value.
  CHECK(violated(insert_sql(s, {{"ordering_key", "E'order\\t7'"}})) == "(accepted)");
  CHECK(violated(insert_sql(s, {{"routing_key", "'commande.pass\u00e9e.\u20ac\u00a0'"}})) == "(accepted)");
  CHECK(violated(insert_headers(s, "jsonb_build_object('note', E'two\\nlines')")) == "(accepted)");
  CHECK(count(s, "true") == 3);
}

TEST_CASE("a column rule's error names the column and shows its value escaped; a header rule's shows no value") {
  ScopedSchema s;
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::nontransaction q(conn);
  // What PL/pgSQL reads of the error: the message alone, the column and constraint fields.
  const auto raised = [&](const std::string& sql) {
    q.exec("DO $do$ DECLARE m text; c text; k text; BEGIN " + sql +
           "; EXCEPTION WHEN check_violation THEN GET STACKED DIAGNOSTICS m = MESSAGE_TEXT, c = COLUMN_NAME, "
           "k = CONSTRAINT_NAME; PERFORM set_config('t.m', m, false), set_config('t.c', c, false), "
           "set_config('t.k', k, false); END $do$");
    const auto r = outbox::pgx::exec1(q,
                                      "SELECT current_setting('t.m'), current_setting('t.c'), current_setting('t.k')");
    return std::vector<std::string>{r[0].c_str(), r[1].c_str(), r[2].c_str()};
  };
  auto e = raised(insert_sql(s, {{"routing_key", "E'order\\r\\nERROR: forged\\u001b[2J'"}}));
  CHECK(e[0] ==
        "new row for relation \"outbox\" violates check constraint \"outbox_control_characters\": routing_key holds a "
        "control character (U+0000-U+001F, U+007F-U+009F): 'order\\r\\nERROR: forged\\x1b[2J'");
  CHECK(e[1] == "routing_key");
  CHECK(e[2] == "outbox_control_characters");
  e = raised(insert_sql(s, {{"message_id", "'ffffffff-ffff-ffff-ffff-ffffffffffff'"}}));
  CHECK(e[0] ==
        "new row for relation \"outbox\" violates check constraint \"outbox_message_id_distinct\": message_id is the "
        "max UUID 'ffffffff-ffff-ffff-ffff-ffffffffffff', which names no message: an inbox would take every later "
        "message carrying it for a duplicate");
  CHECK(e[1] == "message_id");
  e = raised(insert_sql(s, {{"content_type", "''"}}));
  CHECK(e[0] ==
        "new row for relation \"outbox\" violates check constraint \"outbox_content_type_not_empty\": "
        "content_type must not be empty (it is '')");
  CHECK(e[1] == "content_type");
  e = raised(insert_sql(s, {{"correlation_id", "''"}}));
  CHECK(e[1] == "correlation_id");
  e = raised(insert_headers(s, headers_with("CC", "SECRET")));
  CHECK(e[0] == "new row for relation \"outbox\" violates check constraint \"outbox_header_names_reserved\"");
  CHECK(e[1].empty());
}

TEST_CASE("a row breaking several rules is refused naming the first rule in name order") {
  ScopedSchema s;
  // The order PostgreSQL checked 0007's constraints in; 0009's trigger keeps it.
  CHECK(violated(insert_headers(s, "'{\"has space\": 1, \"CC\": \"q\"}'")) == "outbox_header_names");
  CHECK(violated(insert_headers(s, "'{\"CC\": 1}'")) == "outbox_header_names_reserved");
  CHECK(violated(insert_headers(s, "jsonb_build_object('h', repeat('v', 5000), 'n', 1)")) == "outbox_header_values");
  CHECK(violated(insert_sql(s, {{"headers", "'{\"n\": 1}'"}, {"exchange", "repeat('e', 300)"}})) ==
        "outbox_headers_object");
  CHECK(violated(insert_sql(s, {{"headers", big_headers(40, 4096)}, {"exchange", "repeat('e', 300)"}})) ==
        "outbox_headers_size");
  // The column rules of migration 0015 take their places in the same order.
  const std::map<std::string, std::string> all_column_faults = {
      {"content_type", "''"},
      {"routing_key", "E'a\\nb'"},
      {"correlation_id", "''"},
      {"headers", "'{\"CC\": \"q\"}'"},
      {"message_id", "'00000000-0000-0000-0000-000000000000'"}};
  CHECK(violated(insert_sql(s, all_column_faults)) == "outbox_content_type_not_empty");
  auto faults = all_column_faults;
  faults.erase("content_type");
  CHECK(violated(insert_sql(s, faults)) == "outbox_control_characters");
  faults.erase("routing_key");
  CHECK(violated(insert_sql(s, faults)) == "outbox_correlation_id_not_empty");
  faults.erase("correlation_id");
  CHECK(violated(insert_sql(s, faults)) == "outbox_header_names_reserved");
  faults.erase("headers");
  CHECK(violated(insert_sql(s, faults)) == "outbox_message_id_distinct");
  CHECK(count(s, "true") == 0);
}

TEST_CASE("a refused row's error names the rule and holds none of the row's values") {
  ScopedSchema s;
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  try {
    tx.exec(insert_sql(s, {{"headers", headers_with("CC", "SECRET-HEADER-VALUE")}, {"ordering_key", "'KEY-MARKER'"}}));
    FAIL("the INSERT was accepted");
  } catch (const pqxx::check_violation& e) {
    const std::string what = e.what();
    CHECK(what.find("outbox_header_names_reserved") != std::string::npos);
    for (const char* value : {"SECRET-HEADER-VALUE", "PAYLOAD-MARKER", "KEY-MARKER", "order.placed"})
      CHECK_MESSAGE(what.find(value) == std::string::npos, what);
  }
}

TEST_CASE("a pending row changed by hand is checked again; a replica session is checked too") {
  ScopedSchema s;
  sql_exec(insert_sql(s));
  const auto t = table(s);
  CHECK(violated("UPDATE " + t + " SET headers = " + headers_with("x-death", "forged")) ==
        "outbox_header_names_reserved");
  CHECK(violated("UPDATE " + t + " SET routing_key = repeat('r', 256)") == "outbox_shortstr_lengths");
  CHECK(violated("UPDATE " + t + " SET headers = " + headers_with("tenant", "acme")) == "(accepted)");
  // Logical replication's apply and pg_restore run as replica, where ordinary triggers
  // sleep: the checks must not.
  CHECK(violated("SET LOCAL session_replication_role = replica; " + insert_headers(s, "'{\"n\": 1}'")) ==
        "outbox_headers_object");
  CHECK(count(s, "headers = '{\"tenant\": \"acme\"}'") == 1);
}

TEST_CASE("what the SDK accepts at its limits, the table accepts") {
  ScopedSchema s;
  Message m;
  m.exchange = Exchange(std::string(255, 'e'));
  m.routing_key = RoutingKey(std::string(255, 'k'));
  m.type = MessageType(std::string(255, 't'));
  // With every other field at its limit, the key's own headers (x-outbox-key and
  // x-outbox-seq, migration 0016) leave room in the default frame for a key of 123
  // bytes: the frame is then exactly 131072 bytes.
  m.ordering_key = std::string(123, 'o');
  m.content_type = std::string(255, 'c');
  m.correlation_id = std::string(255, 'i');
  m.payload = "{}";
  m.traceparent = "00-4bf92f3577b34da6a50ef0ad5d85bd2b-00f067aa0ba902b7-01";
  m.tracestate = "vendor=abc";
  // Application headers filling the bound exactly together with the trace context.
  std::vector<std::pair<std::string, std::string>> sent{{"traceparent", *m.traceparent}, {"tracestate", *m.tracestate}};
  for (int i = 0; header_entries_bytes(sent) + 6 + 4 + 4096 <= kMaxHeadersBytes; ++i) {
    const std::string name = "h" + std::to_string(1000 + i);
    m.headers[name] = std::string(4096, 'v');
    sent.emplace_back(name, m.headers[name]);
  }
  m.headers["last"] = std::string(kMaxHeadersBytes - header_entries_bytes(sent) - (6 + 4), 'v');
  REQUIRE_NOTHROW(validate_message(m, {}));
  // One byte more of key, and the relay could not send it: the SDK says so.
  auto longer = m;
  longer.ordering_key += "o";
  CHECK_THROWS_WITH_AS(validate_message(longer, {}),
                       "headers: the message's AMQP header frame would be 131073 bytes, above frame_max 131072",
                       outbox::ValidationError);
  OutboxWriter writer({s.name(), {}});
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  CHECK_NOTHROW(writer.enqueue(tx, m));
  tx.commit();
  CHECK(count(s, "\"" + s.name() + "\".outbox_headers_bytes(headers) = " + std::to_string(kMaxHeadersBytes)) == 1);
}

TEST_CASE("a table holding bad rows migrates without checking them, and the relay can still mark them") {
  ScopedSchema s("t", 6);
  // One row per rule, written before the migration; each is pending.
  const std::vector<std::string> bad = {"'{\"n\": 1}'", headers_with("has space", "v"), headers_with("CC", "q"),
                                        headers_with("h", std::string(5000, 'v')), big_headers(40, 4096)};
  for (const auto& headers : bad) sql_exec(insert_headers(s, headers));
  sql_exec(insert_sql(s, {{"ordering_key", "repeat('o', 300)"}}));
  s.migrate();
  CHECK(sql_value("SELECT count(*) FROM \"" + s.name() + "\".outbox_migrations WHERE version = 7") == "1");
  // 0007 added the rules NOT VALID and 0009 moved them into a trigger: the existing
  // rows were never scanned. The trigger fires always, in replica sessions too.
  CHECK(sql_value("SELECT count(*) FROM pg_constraint WHERE conrelid = '" + table(s) +
                  "'::regclass "
                  "AND conname IN ('outbox_headers_object', 'outbox_header_names', 'outbox_header_names_reserved', "
                  "'outbox_header_values', 'outbox_headers_size')") == "0");
  CHECK(sql_value("SELECT count(*) FROM pg_constraint WHERE conrelid = '" + table(s) +
                  "'::regclass "
                  "AND conname = 'outbox_shortstr_lengths' AND NOT convalidated") == "1");
  CHECK(sql_value("SELECT tgenabled FROM pg_trigger WHERE tgrelid = '" + table(s) +
                  "'::regclass "
                  "AND tgname = 'outbox_row_checks'") == "A");
  REQUIRE(count(s, "true") == 6);
  // A bad row's insert now fails: the same rows cannot be written again.
  CHECK(violated(insert_headers(s, headers_with("CC", "q"))) == "outbox_header_names_reserved");

  // The relay's statements (relay/src/pg/outbox_store.cpp) on every old row: a failure
  // that does not count (attempts unchanged, last_error set), one that counts, parking.
  const auto t = table(s);
  CHECK(violated("UPDATE " + t +
                 " SET attempts = attempts + 0, last_error = 'broker unavailable', "
                 "next_attempt_at = now() + interval '1 second'") == "(accepted)");
  CHECK(violated("UPDATE " + t +
                 " SET attempts = attempts + 1, last_error = 'not publishable', "
                 "next_attempt_at = now() + interval '1 second', parked_at = NULL") == "(accepted)");
  CHECK(violated("UPDATE " + t +
                 " SET attempts = attempts + 1, last_error = 'not publishable', "
                 "parked_at = now()") == "(accepted)");
  CHECK(count(s, "parked_at IS NOT NULL AND attempts = 2") == 6);
}

TEST_CASE("an old bad row never tried can be marked published by the relay") {
  ScopedSchema s("t", 6);
  sql_exec(insert_headers(s, headers_with("x-death", "forged")));
  s.migrate();
  CHECK(violated("UPDATE " + table(s) + " SET published_at = clock_timestamp()") == "(accepted)");
  CHECK(count(s, "published_at IS NOT NULL") == 1);
}

TEST_CASE("dead requeue of an old bad row keeps it marked; replay of one fails naming the rule and changes nothing") {
  ScopedSchema s("t", 6);
  sql_exec(insert_headers(s, headers_with("BCC", "audit")));    // id 1: will be parked
  sql_exec(insert_headers(s, headers_with("BCC", "audit")));    // id 2: was published
  sql_exec(insert_headers(s, headers_with("tenant", "acme")));  // id 3: a good published row
  s.migrate();
  const auto t = table(s);
  sql_exec("UPDATE " + t + " SET attempts = 10, last_error = 'not publishable', parked_at = now() WHERE id = 1");
  sql_exec("UPDATE " + t + " SET published_at = now() WHERE id IN (2, 3)");
  const auto config = testenv::write_temp_file(testenv::relay_config_yaml(s.name()));

  // dead requeue keeps last_error: the row is pending again, the relay fails and parks it again.
  auto r = testenv::run_relay_command({"dead", "requeue", "--config", config, "--id", "1"});
  CHECK_MESSAGE(r.exit_code == 0, r.output);
  CHECK(count(s, "id = 1 AND parked_at IS NULL AND attempts = 0 AND last_error IS NOT NULL") == 1);
  CHECK(violated("UPDATE " + t +
                 " SET attempts = attempts + 1, last_error = 'not publishable', "
                 "parked_at = now() WHERE id = 1") == "(accepted)");

  // replay clears the relay's state: the old row would look new, and the check refuses it.
  r = testenv::run_relay_command({"replay", "--config", config, "--id", "2", "--id", "3"});
  CHECK(r.exit_code != 0);
  CHECK_MESSAGE(r.output.find("outbox_header_names_reserved") != std::string::npos, r.output);
  CHECK(count(s, "published_at IS NOT NULL") == 2);  // both untouched, the good one too
  r = testenv::run_relay_command({"replay", "--config", config, "--id", "3"});
  CHECK_MESSAGE(r.exit_code == 0, r.output);
  CHECK(count(s, "id = 3 AND published_at IS NULL") == 1);
}

TEST_CASE(
    "rows from before migration 0015 that break its rules stay, are marked and replayed, and status counts them") {
  ScopedSchema s("t", 14);
  const auto t = table(s);
  // Written before the rules, as a producer in another language could: one per rule
  // (two with control characters), and a good row.
  sql_exec(insert_sql(s, {{"routing_key", "E'order\\r\\nplaced'"}}));                   // id 1
  sql_exec(insert_sql(s, {{"message_type", "E'Order\\u009b2J'"}}));                     // id 2
  sql_exec(insert_sql(s, {{"message_id", "'00000000-0000-0000-0000-000000000000'"}}));  // id 3
  sql_exec(insert_sql(s, {{"content_type", "''"}}));                                    // id 4
  sql_exec(insert_sql(s, {{"correlation_id", "''"}}));                                  // id 5
  sql_exec(insert_sql(s, {{"message_id", "'ffffffff-ffff-ffff-ffff-ffffffffffff'"}}));  // id 6
  sql_exec(insert_sql(s));                                                              // id 7
  s.migrate();
  REQUIRE(count(s, "true") == 7);  // nothing refused, nothing changed

  // The relay's statements: a clean-state UPDATE of other columns, marks, parking.
  CHECK(violated("UPDATE " + t + " SET next_attempt_at = now()") == "(accepted)");
  CHECK(violated("UPDATE " + t + " SET headers = '{\"tenant\": \"acme\"}' WHERE id = 1") == "(accepted)");
  CHECK(violated("UPDATE " + t + " SET attempts = 10, last_error = 'x', parked_at = now() WHERE id = 6") ==
        "(accepted)");
  CHECK(violated("UPDATE " + t + " SET published_at = now() WHERE id = 2") == "(accepted)");
  // Changing a column to a value its rule refuses is refused; mending it is not.
  CHECK(violated("UPDATE " + t + " SET routing_key = E'order\\tplaced' WHERE id = 1") == "outbox_control_characters");
  CHECK(violated("UPDATE " + t + " SET content_type = '' WHERE id = 7") == "outbox_content_type_not_empty");

  // status: the rows still to be published (pending, or parked as id 6), by rule;
  // id 2, published, is not counted.
  const auto cfg = testenv::write_temp_file(testenv::relay_config_yaml(s.name()));
  auto r = testenv::run_relay_command({"status", "-c", cfg, "--json"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  const auto j = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  CHECK(j["rule_breaks"] == nlohmann::json({{"outbox_content_type_not_empty", 1},
                                            {"outbox_control_characters", 1},
                                            {"outbox_correlation_id_not_empty", 1},
                                            {"outbox_message_id_distinct", 2}}));
  r = testenv::run_relay_command({"status", "-c", cfg});
  REQUIRE(r.exit_code == 0);
  CHECK_MESSAGE(r.output.find("rows still to publish that break a row rule") != std::string::npos, r.output);
  CHECK_MESSAGE(r.output.find("  outbox_message_id_distinct                  2\n") != std::string::npos, r.output);

  // replay of the old published row works as before: its columns are unchanged.
  r = testenv::run_relay_command({"replay", "--config", cfg, "--id", "2"});
  CHECK_MESSAGE(r.exit_code == 0, r.output);
  CHECK(count(s, "id = 2 AND published_at IS NULL") == 1);
  r = testenv::run_relay_command({"status", "-c", cfg, "--json"});
  CHECK(nlohmann::json::parse(r.output.substr(r.output.find('{')))["rule_breaks"]["outbox_control_characters"] == 2);
  // Mended by hand, a row is no longer counted.
  CHECK(violated("UPDATE " + t + " SET routing_key = 'order.placed' WHERE id = 1") == "(accepted)");
  r = testenv::run_relay_command({"status", "-c", cfg, "--json"});
  CHECK(nlohmann::json::parse(r.output.substr(r.output.find('{')))["rule_breaks"]["outbox_control_characters"] == 1);
}

TEST_CASE("a trace context in a plain INSERT's headers is held to enqueue()'s rules by outbox_trace_context") {
  ScopedSchema s;
  const std::string good = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  const auto trace = [](const std::string& traceparent, const std::string& tracestate = "") {
    std::string j = "jsonb_build_object('traceparent', " + quoted(traceparent) + "::text";
    if (!tracestate.empty()) j += ", 'tracestate', " + quoted(tracestate) + "::text";
    return j + ")";
  };
  for (const auto& bad : std::vector<std::string>{
           "not-a-traceparent", "ff" + good.substr(2), "00-00000000000000000000000000000000-b7ad6b7169203331-01",
           "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", good + "-extra"})
    CHECK_MESSAGE(violated(insert_headers(s, trace(bad))) == "outbox_trace_context", bad);
  CHECK(violated(insert_headers(s, trace(good, "Bad Key=1"))) == "outbox_trace_context");
  CHECK(violated(insert_headers(s, trace(good, "a=1,a=2"))) == "outbox_trace_context");
  CHECK(violated(insert_headers(s, "jsonb_build_object('tracestate', 'a=1')")) == "outbox_trace_context");
  // The error names the rule, the header and enqueue()'s words for what is wrong.
  try {
    pqxx::connection conn(testenv::pg_dsn());
    pqxx::work tx(conn);
    tx.exec(insert_headers(s, trace("garbage")));
    FAIL("a bad traceparent was stored");
  } catch (const pqxx::sql_error& e) {
    CHECK_MESSAGE(std::string(e.what()).find("\"outbox_trace_context\": headers' traceparent is not a W3C "
                                             "traceparent") != std::string::npos,
                  e.what());
  }
  // What enqueue() takes, the table takes: version 00, a later version with more, a tracestate.
  CHECK(violated(insert_headers(s, trace(good))) == "(accepted)");
  CHECK(violated(insert_headers(s, trace("01" + good.substr(2) + "-more"))) == "(accepted)");
  CHECK(violated(insert_headers(s, trace(good, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"))) == "(accepted)");
  CHECK(count(s, "true") == 3);
}

TEST_CASE("an old row with a bad trace context is replayed as before and counted by status") {
  ScopedSchema s("t", 14);
  const auto t = table(s);
  sql_exec(insert_headers(s, "jsonb_build_object('traceparent', 'garbage')"));  // id 1
  s.migrate();
  CHECK(violated("UPDATE " + t + " SET published_at = now() WHERE id = 1") == "(accepted)");
  const auto cfg = testenv::write_temp_file(testenv::relay_config_yaml(s.name()));
  auto r = testenv::run_relay_command({"replay", "--config", cfg, "--id", "1"});
  CHECK_MESSAGE(r.exit_code == 0, r.output);
  r = testenv::run_relay_command({"status", "-c", cfg, "--json"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK(nlohmann::json::parse(r.output.substr(r.output.find('{')))["rule_breaks"] ==
        nlohmann::json({{"outbox_trace_context", 1}}));
  // Changing the headers checks them again.
  CHECK(violated("UPDATE " + t + " SET headers = jsonb_build_object('traceparent', 'still bad') WHERE id = 1") ==
        "outbox_trace_context");
}
