// The SQL contract (migration 0008, docs/SQL-CONTRACT.md): enqueue() writes the row
// the C++ SDK writes and refuses what the SDK refuses, naming the argument;
// uuid_v7() makes RFC 9562 version 7 ids in time order; inbox_record() is the
// consumer SDK's Inbox::record; the least-privilege roles of schema/roles.sql may
// call them and gain nothing else.
#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <map>
#include <pqxx/pqxx>
#include <thread>

#include "outbox/errors.h"
#include "outbox/inbox.h"
#include "outbox/message_id.h"
#include "outbox/outbox_writer.h"
#include "outbox/pqxx_compat.h"
#include "outbox/trace_context.h"
#include "test_env.h"
#include "test_text.h"

using namespace outbox;
using testenv::ScopedSchema;
using testenv::sql_exec;
using testenv::sql_value;

namespace {

using testenv::contains;

// The columns a producer decides, as text, of the row with this message id.
std::string producer_columns(const ScopedSchema& s, const std::string& id) {
  return sql_value(
      "SELECT concat_ws('|', exchange, routing_key, message_type, ordering_key, content_type, "
      "headers::text, coalesce(correlation_id, '<null>'), encode(payload, 'hex'), attempts, "
      "published_at IS NULL, parked_at IS NULL, last_error IS NULL) FROM \"" +
      s.name() + "\".outbox WHERE message_id = '" + id + "'");
}

struct Refused {
  std::string sqlstate, message;
};

bool denied(const Refused& r) { return contains(r.message, "permission denied"); }

// Login roles made for one test, dropped on the way out whatever happened.
struct ScopedRoleNames {
  std::vector<std::string> names;
  ~ScopedRoleNames() {
    for (const auto& r : names) {
      try {
        sql_exec("DROP OWNED BY " + r);
        sql_exec("DROP ROLE " + r);
      } catch (...) {
      }
    }
  }
};

// Runs `call` in a transaction of its own; what it raised (empty if nothing).
Refused refused(const std::string& call, const std::string& dsn = testenv::pg_dsn()) {
  pqxx::connection conn(dsn);
  pqxx::work tx(conn);
  try {
    tx.exec(call);
  } catch (const pqxx::sql_error& e) {
    return {e.sqlstate(), e.what()};
  }
  return {"", "nothing raised"};
}

// What `call` raised, as PL/pgSQL reads it: the message alone (libpq adds CONTEXT
// lines) and the column field. Empty when it raised nothing.
Refused diagnostics(const std::string& call, std::string* column) {
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::nontransaction q(conn);
  q.exec("DO $do$ DECLARE m text; c text; BEGIN PERFORM " + call +
         "; "
         "EXCEPTION WHEN invalid_parameter_value THEN GET STACKED DIAGNOSTICS m = MESSAGE_TEXT, c = COLUMN_NAME; "
         "PERFORM set_config('outbox_test.message', m, false), set_config('outbox_test.column', c, false); END $do$");
  const auto r = outbox::pgx::exec1(q,
                                    "SELECT current_setting('outbox_test.message', true), "
                                    "current_setting('outbox_test.column', true)");
  *column = r[1].as<std::string>("");
  return {"", r[0].as<std::string>("")};
}

// Any byte a terminal or a log reader would act on: controls, DEL, and non-ASCII.
bool raw_bytes(const std::string& text) {
  for (unsigned char c : text)
    if (c < 0x20 || c >= 0x7f) return true;
  return false;
}

// The field the SDK's ValidationError names for a header called `name`.
std::string sdk_header_field(const std::string& name) {
  Message m;
  m.exchange = Exchange("o");
  m.routing_key = RoutingKey("r");
  m.type = MessageType("T");
  m.headers[name] = "v";
  try {
    validate_message(m, {});
  } catch (const ValidationError& e) {
    return e.field();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("enqueue writes the row OutboxWriter writes for the same message") {
  ScopedSchema schema;
  const auto s = "\"" + schema.name() + "\"";
  Message m;
  m.exchange = Exchange("orders");
  m.routing_key = RoutingKey("order.placed");
  m.type = MessageType("OrderPlaced");
  m.ordering_key = "order-7";
  m.payload = R"({"order_id":7})";
  m.headers = {{"tenant", "acme"}, {"source", "shop"}};
  m.correlation_id = "req-7";
  m.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  m.tracestate = "congo=t61rcWkgMzE";
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  const auto sdk_id = OutboxWriter({schema.name(), {}}).enqueue(tx, m).to_string();
  const auto sql_id =
      outbox::pgx::exec1(tx, "SELECT " + s +
                                 ".enqueue('orders', 'order.placed', 'OrderPlaced', "
                                 "convert_to('{\"order_id\":7}', 'UTF8'), '{\"tenant\":\"acme\",\"source\":\"shop\"}', "
                                 "'order-7', correlation_id => 'req-7', "
                                 "traceparent => '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', "
                                 "tracestate => 'congo=t61rcWkgMzE')::text")[0]
          .as<std::string>();
  tx.commit();
  CHECK(sql_id != sdk_id);
  CHECK(producer_columns(schema, sql_id) == producer_columns(schema, sdk_id));
  CHECK(contains(producer_columns(schema, sql_id), "traceparent"));

  // Defaults: no headers, no ordering key, JSON content type, no correlation id.
  const auto bare = sql_value("SELECT " + s + ".enqueue('orders', 'order.placed', 'OrderPlaced', '\\x7b7d')::text");
  CHECK(producer_columns(schema, bare) == "orders|order.placed|OrderPlaced||application/json|{}|<null>|7b7d|0|t|t|t");
  // An id the caller handed out already is kept.
  const std::string given = MessageId::generate_v7().to_string();
  CHECK(sql_value("SELECT " + s + ".enqueue('o', 'r', 'T', '', message_id => '" + given + "')::text") == given);
}

TEST_CASE("enqueue refuses what the SDK refuses, naming the argument, and writes nothing") {
  ScopedSchema schema;
  const auto s = "\"" + schema.name() + "\"";
  const auto call = [&](const std::string& args) { return "SELECT " + s + ".enqueue(" + args + ")"; };
  const std::string ok3 = "'orders', 'order.placed', 'OrderPlaced', ''";
  const std::string fn = schema.name() + ".enqueue: ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {call("'orders', repeat('r', 300), 'T', ''"), fn + "routing_key is 300 bytes, the limit is 255"},
      {call("repeat('é', 128), 'r', 'T', ''"), fn + "exchange is 256 bytes, the limit is 255"},
      {call("'', 'r', 'T', ''"), fn + "exchange must not be empty"},
      {call("'o', NULL, 'T', ''"), fn + "routing_key must not be empty"},
      {call("'o', 'r', '', ''"), fn + "message_type must not be empty"},
      {call(ok3 + ", ordering_key => repeat('k', 256)"), fn + "ordering_key is 256 bytes"},
      {call(ok3 + ", content_type => ''"), fn + "content_type must not be empty"},
      {call(ok3 + ", correlation_id => ''"), fn + "correlation_id must not be empty"},
      {call(ok3 + ", correlation_id => repeat('c', 256)"), fn + "correlation_id is 256 bytes"},
      {call("'o', 'r', 'T', NULL"), fn + "payload must not be null"},
      {call("'o', 'r', 'T', decode(repeat('00', 1048577), 'hex')"),
       fn + "payload is 1048577 bytes, the limit is 1048576"},
      {call("'o', 'r', 'T', '\\x0000', max_payload_bytes => 1"), fn + "payload is 2 bytes, the limit is 1"},
      {call(ok3 + ", '[]'"), fn + "headers must be a JSON object of string values, not a JSON array"},
      {call(ok3 + ", '{\"n\": 1}'"), fn + "headers['n'] must be a JSON string, not a JSON number"},
      {call(ok3 + ", '{\"bad name\": \"v\"}'"), fn + "headers['bad name'] header name must be 1-128 characters"},
      {call(ok3 + ", jsonb_build_object(repeat('n', 129), 'v')"), "header name must be 1-128 characters"},
      {call(ok3 + ", '{\"x-outbox-id\": \"1\"}'"), fn + "headers['x-outbox-id'] is reserved"},
      {call(ok3 + ", '{\"CC\": \"a\"}'"), fn + "headers['CC'] is reserved"},
      {call(ok3 + ", '{\"x-death\": \"a\"}'"), fn + "headers['x-death'] is reserved"},
      {call(ok3 + ", '{\"x-first-death-queue\": \"a\"}'"), fn + "headers['x-first-death-queue'] is reserved"},
      {call(ok3 + ", '{\"x-delay\": \"5\"}'"), fn + "headers['x-delay'] is reserved"},
      {call(ok3 + ", '{\"traceparent\": \"a\"}'"),
       fn + "headers['traceparent'] is reserved: set the trace context with the traceparent argument"},
      {call(ok3 + ", jsonb_build_object('big', repeat('v', 4097))"),
       fn + "headers['big'] is 4097 bytes, the limit is 4096"},
      {call(ok3 + ", (SELECT jsonb_object_agg('h' || i, repeat('v', 4000)) FROM generate_series(1, 33) i)"),
       fn + "headers would take 132288 bytes of the AMQP header table (trace context included), the limit is 130048"},
      {call(ok3 + ", traceparent => 'nope'"), fn + "traceparent is not a W3C traceparent"},
      {call(ok3 + ", traceparent => '00-00000000000000000000000000000000-b7ad6b7169203331-01'"),
       fn + "traceparent is not a W3C traceparent"},
      // A future version may be longer than 55 characters, but not than a header value.
      {call(ok3 + ", traceparent => '01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-' || repeat('a', 4944)"),
       fn + "traceparent is 5000 bytes, the limit is 4096"},
      {call(ok3 + ", tracestate => 'a=b'"), fn + "tracestate needs a traceparent"},
      {call(ok3 +
            ", traceparent => '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', tracestate => 'a=1,a=2'"),
       fn + "tracestate key 'a' appears twice"},
      {call(ok3 + ", traceparent => '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', tracestate => 'A=1'"),
       fn + "tracestate member 'A=1' is not a valid key=value list member"},
  };
  for (const auto& [sql, expected] : cases) {
    const auto r = refused(sql);
    CHECK_MESSAGE(r.sqlstate == "22023", sql);
    CHECK_MESSAGE(contains(r.message, expected), std::string(sql + " -> " + r.message));
  }
  CHECK(sql_value("SELECT count(*) FROM " + s + ".outbox") == "0");

  // The argument is also the error's column field, for drivers that read it.
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::nontransaction q(conn);
  q.exec("DO $$ DECLARE c text; BEGIN PERFORM " + s +
         ".enqueue('o', '', 'T', ''); "
         "EXCEPTION WHEN invalid_parameter_value THEN GET STACKED DIAGNOSTICS c = COLUMN_NAME; "
         "PERFORM set_config('outbox_test.column', c, false); END $$");
  CHECK(outbox::pgx::exec1(q, "SELECT current_setting('outbox_test.column')")[0].as<std::string>() == "routing_key");
}

TEST_CASE("what enqueue() refuses in a column, a plain INSERT and the SDK refuse too, and the other way round") {
  ScopedSchema schema;
  const auto s = "\"" + schema.name() + "\"";
  struct Case {
    std::string column, sql_value, rule, enqueue_says;
    std::function<void(Message&)> sdk;
  };
  const std::string controls = "holds a control character (U+0000-U+001F, U+007F-U+009F): ";
  const std::vector<Case> cases = {
      {"message_id", "'00000000-0000-0000-0000-000000000000'", "outbox_message_id_distinct",
       "message_id is the nil UUID", [](Message& m) { m.message_id = "00000000-0000-0000-0000-000000000000"; }},
      {"message_id", "'ffffffff-ffff-ffff-ffff-ffffffffffff'", "outbox_message_id_distinct",
       "message_id is the max UUID", [](Message& m) { m.message_id = "ffffffff-ffff-ffff-ffff-ffffffffffff"; }},
      {"content_type", "''", "outbox_content_type_not_empty", "content_type must not be empty",
       [](Message& m) { m.content_type = ""; }},
      {"correlation_id", "''", "outbox_correlation_id_not_empty", "correlation_id must not be empty",
       [](Message& m) { m.correlation_id = ""; }},
      {"exchange", "E'ex\\u001b[2J'", "outbox_control_characters", "exchange " + controls + "'ex\\x1b[2J'",
       [](Message& m) { m.exchange = Exchange("ex\x1b[2J"); }},
      {"routing_key", "E'order\\r\\nplaced\\t'", "outbox_control_characters",
       "routing_key " + controls + "'order\\r\\nplaced\\t'",
       [](Message& m) { m.routing_key = RoutingKey("order\r\nplaced\t"); }},
      {"message_type", "E'T\\u0085'", "outbox_control_characters", "message_type " + controls + "'T\\xc2\\x85'",
       [](Message& m) { m.type = MessageType("T\xc2\x85"); }},
      {"content_type", "E'text/plain\\n'", "outbox_control_characters", "content_type " + controls,
       [](Message& m) { m.content_type = "text/plain\n"; }},
      {"correlation_id", "E'req\\u007f'", "outbox_control_characters", "correlation_id " + controls + "'req\\x7f'",
       [](Message& m) { m.correlation_id = "req\x7f"; }},
  };
  const std::map<std::string, std::string> defaults = {{"exchange", "'o'"},        {"routing_key", "'r'"},
                                                       {"message_type", "'T'"},    {"content_type", "'a/b'"},
                                                       {"correlation_id", "NULL"}, {"message_id", s + ".uuid_v7()"}};
  for (const auto& c : cases) {
    CAPTURE(c.column);
    CAPTURE(c.sql_value);
    auto values = defaults;
    values[c.column] = c.sql_value;
    const auto args = values["exchange"] + ", " + values["routing_key"] + ", " + values["message_type"] +
                      ", '', content_type => " + values["content_type"] + ", correlation_id => " +
                      values["correlation_id"] + ", message_id => " + values["message_id"];
    const auto e = refused("SELECT " + s + ".enqueue(" + args + ")");
    CHECK(e.sqlstate == "22023");
    CHECK_MESSAGE(contains(e.message, schema.name() + ".enqueue: " + c.enqueue_says), e.message);
    const auto i = refused("INSERT INTO " + s +
                           ".outbox (exchange, routing_key, message_type, content_type, correlation_id, message_id, "
                           "payload) VALUES (" +
                           values["exchange"] + ", " + values["routing_key"] + ", " + values["message_type"] + ", " +
                           values["content_type"] + ", " + values["correlation_id"] + ", " + values["message_id"] +
                           ", '')");
    CHECK(i.sqlstate == "23514");
    CHECK_MESSAGE(contains(i.message, "violates check constraint \"" + c.rule + "\": " + c.column), i.message);
    Message m;
    m.exchange = Exchange("o");
    m.routing_key = RoutingKey("r");
    m.type = MessageType("T");
    c.sdk(m);
    const auto sdk = testenv::error_of<ValidationError>([&] { validate_message(m, {}); }, "(accepted)");
    CHECK_MESSAGE(contains(sdk, (c.column == "message_type" ? "type" : c.column) + ": "), sdk);
  }
  // What all three accept at those columns' edges, the table stores.
  CHECK(sql_value("SELECT " + s +
                  ".enqueue('ex.\u00e9', 'order.placed.\u20ac', 'T\u00a0', '', content_type => 'text/plain; "
                  "charset=utf-8', correlation_id => 'req-1', message_id => "
                  "'00000000-0000-0000-0000-000000000001') IS NOT NULL") == "t");
  CHECK(sql_value("SELECT count(*) FROM " + s + ".outbox") == "1");
}

TEST_CASE("enqueue refuses a NULL or negative max_payload_bytes instead of skipping the size check") {
  ScopedSchema schema;
  const auto s = "\"" + schema.name() + "\"";
  const std::string fn = schema.name() + ".enqueue: ";
  // 2 MiB: past the default limit, so a skipped check would have written it.
  const auto big = "SELECT " + s + ".enqueue('o', 'r', 'T', decode(repeat('00', 2097152), 'hex'), ";
  auto r = refused(big + "max_payload_bytes => NULL)");
  CHECK(r.sqlstate == "22023");
  CHECK_MESSAGE(contains(r.message, fn + "max_payload_bytes must not be null"), r.message);
  r = refused("SELECT " + s + ".enqueue('o', 'r', 'T', '', max_payload_bytes => -1)");
  CHECK(r.sqlstate == "22023");
  CHECK_MESSAGE(contains(r.message, fn + "max_payload_bytes is -1, it must not be negative"), r.message);
  CHECK(sql_value("SELECT count(*) FROM " + s + ".outbox") == "0");
  // 0 is a limit: only an empty payload fits.
  CHECK(sql_value("SELECT " + s + ".enqueue('o', 'r', 'T', '', max_payload_bytes => 0) IS NOT NULL") == "t");
}

TEST_CASE("enqueue and inbox_record refuse the nil and the max UUID as a message id, as the SDKs do") {
  ScopedSchema schema;
  const auto s = "\"" + schema.name() + "\"";
  for (const auto& [id, kind] : {std::pair<std::string, std::string>{"00000000-0000-0000-0000-000000000000", "nil"},
                                 {"FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF", "max"}}) {
    CAPTURE(id);
    const auto said = "message_id is the " + kind + " UUID '" + MessageId::parse(id).to_string() + "'";
    auto r = refused("SELECT " + s + ".enqueue('o', 'r', 'T', '', message_id => '" + id + "')");
    CHECK(r.sqlstate == "22023");
    CHECK_MESSAGE(contains(r.message, schema.name() + ".enqueue: " + said), r.message);
    r = refused("SELECT " + s + ".inbox_record('" + id + "', 'billing')");
    CHECK(r.sqlstate == "22023");
    CHECK_MESSAGE(contains(r.message, schema.name() + ".inbox_record: " + said), r.message);
    CHECK_THROWS_AS(MessageId::parse_distinct(id), ValidationError);  // the SDKs' rule, the same ids
  }
  CHECK(sql_value("SELECT (SELECT count(*) FROM " + s + ".outbox) + (SELECT count(*) FROM " + s + ".inbox)") == "0");
  // Any other id is a message's, whatever its version.
  CHECK(sql_value("SELECT " + s + ".inbox_record('00000000-0000-0000-0000-000000000001', 'billing')") == "t");
}

TEST_CASE("uuid_v7 ids carry version 7, variant 10 and the time, and increase within a session") {
  ScopedSchema schema;
  const auto s = "\"" + schema.name() + "\"";
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::nontransaction q(conn);
  const auto before =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  const auto rows = q.exec("SELECT " + s +
                           ".uuid_v7()::text FROM generate_series(1, 3000) WITH ORDINALITY AS g(i, n) ORDER BY n");
  const auto after =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  REQUIRE(rows.size() == 3000);
  std::string previous;
  bool increasing = true, layout = true, timely = true;
  for (const auto& row : rows) {
    const auto text = row[0].as<std::string>();
    const auto id = MessageId::parse(text);
    layout = layout && text[14] == '7' && std::string("89ab").find(text[19]) != std::string::npos;
    // The server's clock may differ from ours a little: 2 s either way.
    timely = timely && id.unix_ms() + 2000 >= std::uint64_t(before) && id.unix_ms() <= std::uint64_t(after) + 2000;
    increasing = increasing && text > previous;  // canonical lower-case hex sorts as the bytes do
    previous = text;
  }
  CHECK(layout);
  CHECK(timely);
  CHECK(increasing);
  // Ordered by the server's comparison too, and across statements of the session.
  CHECK(outbox::pgx::exec1(q, "SELECT bool_and(a < b) FROM (SELECT " + s + ".uuid_v7() a, " + s +
                                  ".uuid_v7() b "
                                  "FROM generate_series(1, 500)) t")[0]
            .as<bool>());
  // Random tails: 3000 ids, 3000 different last 62 bits.
  CHECK(outbox::pgx::exec1(q, "SELECT count(DISTINCT right(u::text, 15)) FROM (SELECT " + s +
                                  ".uuid_v7() u FROM generate_series(1, 3000)) t")[0]
            .as<int>() == 3000);
  // Across sessions the time orders them: one made later in another session sorts after.
  const auto first = outbox::pgx::exec1(q, "SELECT " + s + ".uuid_v7()::text")[0].as<std::string>();
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  CHECK(sql_value("SELECT " + s + ".uuid_v7()::text") > first);
}

TEST_CASE("a plain INSERT without message_id gets a UUIDv7 from the column default") {
  ScopedSchema schema;
  const auto id = sql_value("INSERT INTO \"" + schema.name() +
                            "\".outbox (exchange, routing_key, message_type, payload) "
                            "VALUES ('o', 'r', 'T', '') RETURNING message_id::text");
  CHECK(id[14] == '7');
}

TEST_CASE("inbox_record says true for the first delivery and false for one already committed") {
  ScopedSchema schema;
  const auto s = "\"" + schema.name() + "\"";
  const auto id = MessageId::generate_v7().to_string();
  const auto record = [&](pqxx::transaction_base& tx, const std::string& consumer) {
    return outbox::pgx::exec1(tx, "SELECT " + s + ".inbox_record('" + id + "', '" + consumer + "', 'OrderPlaced')")[0]
        .as<bool>();
  };
  pqxx::connection conn(testenv::pg_dsn());
  {
    pqxx::work tx(conn);
    CHECK(record(tx, "billing"));
    tx.abort();  // the effect failed: the delivery counts as never seen
  }
  {
    pqxx::work tx(conn);
    CHECK(record(tx, "billing"));
    tx.commit();
  }
  {
    pqxx::work tx(conn);
    CHECK_FALSE(record(tx, "billing"));  // a redelivery
    CHECK(record(tx, "shipping"));       // another consumer of the same message
    tx.commit();
  }
  // The C++ SDK's Inbox and the SQL function share the table and the key.
  pqxx::work tx(conn);
  Inbox inbox({schema.name(), ConsumerName("billing")});
  CHECK(inbox.record(tx, MessageId::parse(id), "OrderPlaced") == InboxOutcome::kDuplicate);
  const auto other = MessageId::generate_v7();
  CHECK(inbox.record(tx, other, "OrderPlaced") == InboxOutcome::kNew);
  CHECK_FALSE(
      outbox::pgx::exec1(tx, "SELECT " + s + ".inbox_record('" + other.to_string() + "', 'billing')")[0].as<bool>());
  tx.abort();

  const auto r = refused("SELECT " + s + ".inbox_record('" + id + "', 'bad name')");
  CHECK(r.sqlstate == "22023");
  CHECK(contains(r.message, schema.name() + ".inbox_record: consumer 'bad name' is not a consumer name"));
  CHECK(contains(refused("SELECT " + s + ".inbox_record(NULL, 'billing')").message, "message_id must not be null"));
}

TEST_CASE("the producer role of roles.sql may enqueue, and the consumer role may record, nothing more") {
  ScopedSchema schema;
  const auto s = "\"" + schema.name() + "\"";
  const auto relay = testenv::unique_name("relay_role"), producer = testenv::unique_name("producer_role"),
             consumer = testenv::unique_name("consumer_role");
  ScopedRoleNames roles{{producer + "_login", consumer + "_login", producer, consumer, relay}};
  const std::string cmd = "psql '" + testenv::pg_dsn() + "' -q -v ON_ERROR_STOP=1 -v schema=" + schema.name() +
                          " -v relay_role=" + relay + " -v producer_role=" + producer +
                          " -v consumer_role=" + consumer + " -f " + OUTBOX_ROLES_SQL + " >/dev/null";
  REQUIRE(std::system(cmd.c_str()) == 0);
  // Default privileges that take EXECUTE from PUBLIC must not matter: roles.sql grants it.
  sql_exec("REVOKE EXECUTE ON FUNCTION " + s +
           ".enqueue(text, text, text, bytea, jsonb, text, text, text, uuid, "
           "text, text, integer, timestamptz), " +
           s + ".uuid_v7(), " + s + ".inbox_record(uuid, text, text) FROM PUBLIC");
  sql_exec("CREATE ROLE " + producer + "_login LOGIN IN ROLE " + producer);
  sql_exec("CREATE ROLE " + consumer + "_login LOGIN IN ROLE " + consumer);
  // The consumer name its login records under (migration 0014; roles.sql's policy).
  sql_exec("INSERT INTO " + s + ".inbox_consumers (consumer, member_of) VALUES ('billing', '" + consumer + "_login')");
  const auto as_producer = testenv::pg_dsn() + " user=" + producer + "_login";
  const auto as_consumer = testenv::pg_dsn() + " user=" + consumer + "_login";
  {
    pqxx::connection conn(as_producer);
    pqxx::work tx(conn);
    const auto id =
        outbox::pgx::exec1(tx, "SELECT " + s + ".enqueue('o', 'r', 'T', '\\x01')::text")[0].as<std::string>();
    tx.commit();
    CHECK(sql_value("SELECT count(*) FROM " + s + ".outbox WHERE message_id = '" + id + "'") == "1");
  }
  // enqueue is SECURITY INVOKER: it lends the producer nothing. Reading rows, the
  // inbox and marking rows published stay refused.
  CHECK(denied(refused("SELECT count(*) FROM " + s + ".outbox", as_producer)));
  CHECK(denied(refused("SELECT " + s + ".inbox_record(" + s + ".uuid_v7(), 'billing')", as_producer)));
  CHECK(denied(refused("UPDATE " + s + ".outbox SET published_at = now()", as_producer)));
  {
    pqxx::connection conn(as_consumer);
    pqxx::work tx(conn);
    CHECK(outbox::pgx::exec1(tx, "SELECT " + s + ".inbox_record('" + MessageId::generate_v7().to_string() +
                                     "', 'billing')")[0]
              .as<bool>());
    tx.commit();
  }
  CHECK(denied(refused("SELECT " + s + ".enqueue('o', 'r', 'T', '')", as_consumer)));
  CHECK(denied(refused("DELETE FROM " + s + ".inbox", as_consumer)));
}

TEST_CASE("a refused value is escaped in enqueue's and inbox_record's errors as the SDK escapes it, never raw") {
  ScopedSchema schema;
  const auto s = "\"" + schema.name() + "\"";
  const auto fn = schema.name() + ".enqueue: ";
  const std::string traceparent = "'00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'";
  std::string column;
  // A newline, an ANSI colour and a right-to-left override: each would act on the
  // reader's terminal or split the caller's log line.
  auto r = diagnostics(s + ".enqueue('o', 'r', 'T', '', jsonb_build_object(E'a\\nb\\u001b[31m\\u202e', 'v'))", &column);
  const auto field = sdk_header_field("a\nb\x1b[31m\xe2\x80\xae");
  CHECK(field == "headers['a\\nb\\x1b[31m\\xe2\\x80\\xae']");
  CHECK(column == field);
  CHECK(r.message == fn + field + " header name must be 1-128 characters of [A-Za-z0-9_.-]");
  CHECK_FALSE(raw_bytes(r.message + column));
  // A long name: 64 bytes shown, then its size, as the SDK shows it.
  r = diagnostics(s + ".enqueue('o', 'r', 'T', '', jsonb_build_object(repeat('\u00e9', 100), 'v'))", &column);
  std::string long_name;
  for (int i = 0; i < 100; ++i) long_name += "\xc3\xa9";
  CHECK(column == sdk_header_field(long_name));
  CHECK(contains(column, "... (200 bytes)"));
  // A tracestate member: the SDK's own wording.
  r = diagnostics(s + ".enqueue('o', 'r', 'T', '', traceparent => " + traceparent +
                      ", tracestate => E'a=\\u001b]0;title\\u0007')",
                  &column);
  try {
    validate_tracestate("a=\x1b]0;title\x07");
    FAIL("the SDK accepted a tracestate with control characters");
  } catch (const ValidationError& e) {
    CHECK(r.message == fn + "tracestate " + e.detail());
  }
  CHECK(contains(r.message, "'a=\\x1b]0;title\\x07'"));
  // A consumer name that would forge a second log line.
  r = diagnostics(s + ".inbox_record('" + MessageId::generate_v7().to_string() + "', E'billing\\nERROR:  forged')",
                  &column);
  CHECK(r.message == schema.name() +
                         ".inbox_record: consumer 'billing\\nERROR:  forged' is not a consumer name (1-200 of "
                         "[A-Za-z0-9_.:-])");
  CHECK_FALSE(raw_bytes(r.message));
}
