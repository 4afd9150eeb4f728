// Scheduled delivery at enqueue (migration 0018): deliver_at from the C++ SDK (a time
// or a delay), from enqueue() and from a plain INSERT; next_attempt_at follows it, so
// anything that waits for next_attempt_at waits for it; a time that is no point in
// time is refused, naming the argument or the rule.
#include <doctest/doctest.h>

#include <chrono>
#include <pqxx/pqxx>
#include <string>

#include "outbox/errors.h"
#include "outbox/outbox_writer.h"
#include "outbox/pqxx_compat.h"
#include "test_env.h"

using namespace outbox;
using namespace std::chrono_literals;
using testenv::ScopedSchema;
using testenv::sql_exec;
using testenv::sql_value;

namespace {

Message event() {
  Message m;
  m.exchange = Exchange("payments");
  m.routing_key = RoutingKey("payment.retry");
  m.type = MessageType("PaymentRetry");
  m.payload = "{}";
  return m;
}

std::string enqueue(const ScopedSchema& s, const Message& m) {
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  auto id = OutboxWriter({s.name(), {}}).enqueue(tx, m);
  tx.commit();
  return id.to_string();
}

std::string column(const ScopedSchema& s, const std::string& id, const std::string& expr) {
  return sql_value("SELECT " + expr + " FROM \"" + s.name() + "\".outbox WHERE message_id = '" + id + "'");
}

}  // namespace

TEST_CASE("the SDK stores deliver_at to the microsecond, and next_attempt_at waits for it") {
  ScopedSchema s;
  Message m = event();
  // 2030-01-02 03:04:05.123456 UTC
  m.deliver_at = std::chrono::system_clock::time_point(std::chrono::microseconds(1893553445123456LL));
  const auto id = enqueue(s, m);
  CHECK(column(s, id, "extract(epoch FROM deliver_at)::numeric") == "1893553445.123456");
  CHECK(column(s, id, "next_attempt_at = deliver_at") == "t");
  // Unscheduled rows are as before: no deliver_at, due at once.
  const auto now = enqueue(s, event());
  CHECK(column(s, now, "deliver_at IS NULL AND next_attempt_at <= now()") == "t");
}

TEST_CASE("deliver_after counts from the enqueue statement by the database's clock") {
  ScopedSchema s;
  Message m = event();
  m.deliver_after = 15min;
  const auto before = sql_value("SELECT extract(epoch FROM clock_timestamp())");
  const auto id = enqueue(s, m);
  const double due = std::stod(column(s, id, "extract(epoch FROM deliver_at)"));
  CHECK(due - std::stod(before) >= 900 - 0.01);
  CHECK(due - std::stod(before) < 900 + 5);
  // A batch mixes scheduled and unscheduled messages.
  Message later = event(), at_once = event();
  later.deliver_after = 1h;
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::work tx(conn);
  const auto ids = OutboxWriter({s.name(), {}}).enqueue_batch(tx, {later, at_once});
  tx.commit();
  CHECK(column(s, ids[0].to_string(), "deliver_at > now() + interval '59 minutes'") == "t");
  CHECK(column(s, ids[1].to_string(), "deliver_at IS NULL") == "t");
}

TEST_CASE("a deliver_at in the past is due at once") {
  ScopedSchema s;
  Message m = event();
  m.deliver_at = std::chrono::system_clock::time_point(std::chrono::seconds(946684800));  // 2000-01-01
  const auto id = enqueue(s, m);
  CHECK(column(s, id, "next_attempt_at <= now() AND deliver_at < now()") == "t");
}

TEST_CASE("validate_message refuses a negative delay, or a delay and a time together, naming deliver_after") {
  Message m = event();
  m.deliver_after = -1ms;
  try {
    validate_message(m, {});
    FAIL("a negative delay passed");
  } catch (const ValidationError& e) {
    CHECK(std::string(e.what()).find("deliver_after") != std::string::npos);
    CHECK(std::string(e.what()).find("-1000 us") != std::string::npos);
  }
  m.deliver_after = 1s;
  m.deliver_at = std::chrono::system_clock::now();
  CHECK_THROWS_WITH_AS(validate_message(m, {}), doctest::Contains("give one of them"), ValidationError);
}

TEST_CASE("enqueue() takes deliver_at last; a call of 0015's twelve arguments means what it meant") {
  ScopedSchema s;
  const std::string q = "\"" + s.name() + "\"";
  const auto id = sql_value("SELECT " + q +
                            ".enqueue('payments', 'payment.retry', 'PaymentRetry', '{}'::bytea, "
                            "deliver_at => now() + interval '1 hour')");
  CHECK(column(s, id, "deliver_at = next_attempt_at AND deliver_at > now() + interval '59 minutes'") == "t");
  const auto twelve = sql_value("SELECT " + q +
                                ".enqueue('payments', 'payment.retry', 'PaymentRetry', '{}'::bytea, '{}', 'k', "
                                "'application/json', NULL, NULL, NULL, NULL, 1024)");
  CHECK(column(s, twelve, "deliver_at IS NULL") == "t");
  for (const char* never : {"'infinity'", "'-infinity'"}) {
    const auto e = testenv::sql_error_of("SELECT " + q +
                                         ".enqueue('payments', 'payment.retry', 'PaymentRetry', '{}'::bytea, " +
                                         "deliver_at => " + never + ")");
    CAPTURE(e);
    CHECK(e.rfind("22023", 0) == 0);
    CHECK(e.find("deliver_at") != std::string::npos);
  }
}

TEST_CASE(
    "a plain INSERT of an infinite deliver_at is refused by the table; a changed deliver_at moves the row's "
    "due time") {
  ScopedSchema s;
  const std::string t = "\"" + s.name() + "\".outbox";
  const auto e = testenv::sql_error_of("INSERT INTO " + t +
                                       " (message_id, exchange, routing_key, message_type, payload, deliver_at) VALUES "
                                       "(gen_random_uuid(), 'x', 'k', 'T', '', 'infinity')");
  CHECK(e.rfind("23514", 0) == 0);
  CHECK(e.find("outbox_deliver_at_finite") != std::string::npos);
  Message m = event();
  m.deliver_after = 24h;
  const auto id = enqueue(s, m);
  // The owner reschedules it to now, then unschedules it.
  sql_exec("UPDATE " + t + " SET deliver_at = now() - interval '1 minute' WHERE message_id = '" + id + "'");
  CHECK(column(s, id, "next_attempt_at = deliver_at") == "t");
  sql_exec("UPDATE " + t + " SET deliver_at = NULL WHERE message_id = '" + id + "'");
  CHECK(column(s, id, "next_attempt_at <= now()") == "t");
  // The relay's own UPDATE of next_attempt_at (a retry) leaves deliver_at alone.
  sql_exec("UPDATE " + t + " SET deliver_at = now() + interval '1 hour' WHERE message_id = '" + id + "'");
  sql_exec("UPDATE " + t + " SET next_attempt_at = now() + interval '2 hours' WHERE message_id = '" + id + "'");
  CHECK(column(s, id, "next_attempt_at > deliver_at") == "t");
}
