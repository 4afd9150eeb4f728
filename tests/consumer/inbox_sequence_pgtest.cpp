// inbox_sequence() (migration 0017), the sequence guard's rule as consumers in any
// language call it, and SequenceGuard, the C++ SDK's call of it.

#include <doctest/doctest.h>

#include <future>
#include <pqxx/pqxx>

#include "consumer_test_support.h"
#include "outbox/errors.h"
#include "outbox/pqxx_compat.h"
#include "outbox/sequence_guard.h"
#include "test_env.h"

namespace {

using outbox::SequenceOutcome;

struct Fixture {
  testenv::ScopedSchema schema{"inboxseq"};
  outbox::SequenceGuard guard{{schema.name(), outbox::ConsumerName("ledger")}};

  // The outcome of one check in its own committed (or rolled back) transaction.
  outbox::SequenceCheck check(const std::string& key, std::int64_t seq, bool commit = true) {
    pqxx::connection c(testenv::pg_dsn());
    pqxx::work tx(c);
    auto r = guard.check(tx, {key, seq});
    if (commit) tx.commit();
    return r;
  }
  std::string last(const std::string& key) const {
    return testenv::sql_value("SELECT last_seq FROM " + schema.name() +
                              ".inbox_key_sequences WHERE consumer = 'ledger' AND ordering_key = '" + key + "'");
  }
};

}  // namespace

TEST_CASE("the next sequence is applied, one at or below the last is a duplicate, one beyond is a gap") {
  Fixture f;
  CHECK(f.check("k", 1).outcome == SequenceOutcome::kApply);
  CHECK(f.check("k", 1).outcome == SequenceOutcome::kDuplicate);
  auto gap = f.check("k", 3);
  CHECK(gap.outcome == SequenceOutcome::kGap);
  CHECK(gap.last_applied == 1);
  REQUIRE(gap.waiting_since.has_value());
  // The gap's start stays the first one's while it lasts.
  auto again = f.check("k", 4);
  CHECK(again.waiting_since == gap.waiting_since);
  auto two = f.check("k", 2);
  CHECK(two.outcome == SequenceOutcome::kApply);
  CHECK(two.last_applied == 2);
  CHECK_FALSE(two.waiting_since.has_value());  // nothing is held in inbox_held for it
  CHECK(f.last("k") == "2");
  // Keys and consumers are counted apart.
  CHECK(f.check("other", 1).outcome == SequenceOutcome::kApply);
  outbox::SequenceGuard billing({f.schema.name(), outbox::ConsumerName("billing")});
  pqxx::connection c(testenv::pg_dsn());
  pqxx::work tx(c);
  CHECK(billing.check(tx, {"k", 1}).outcome == SequenceOutcome::kApply);
}

TEST_CASE("an event held early and delivered again in its turn is applied once and leaves no held copy") {
  Fixture f;
  CHECK(f.check("k", 1).outcome == SequenceOutcome::kApply);
  CHECK(f.check("k", 3).outcome == SequenceOutcome::kGap);
  CHECK(f.check("k", 4).outcome == SequenceOutcome::kGap);
  // What the SDK keeps of the early ones (a consumer in another language may too).
  testenv::sql_exec("INSERT INTO " + f.schema.name() +
                    ".inbox_held (consumer, ordering_key, key_seq, message_id, body) VALUES "
                    "('ledger', 'k', 3, gen_random_uuid(), ''), ('ledger', 'k', 4, gen_random_uuid(), '')");
  CHECK(f.check("k", 2).next_held);
  // The broker redelivers 3 (its ack was lost with a connection) before 3's held
  // copy is taken: it is applied from the delivery, and its held copy goes with it.
  auto three = f.check("k", 3);
  CHECK(three.outcome == SequenceOutcome::kApply);
  CHECK(three.next_held);
  const std::string held = "SELECT string_agg(key_seq::text, ',' ORDER BY key_seq) FROM " + f.schema.name() +
                           ".inbox_held WHERE consumer = 'ledger' AND ordering_key = 'k'";
  CHECK(testenv::sql_value(held) == "4");
  CHECK(f.check("k", 4).outcome == SequenceOutcome::kApply);
  CHECK(testenv::sql_value(held) == "");
  CHECK(f.last("k") == "4");
}

TEST_CASE("a rolled-back effect takes the sequence's advance back with it") {
  Fixture f;
  CHECK(f.check("k", 1, /*commit=*/false).outcome == SequenceOutcome::kApply);
  CHECK(f.check("k", 1).outcome == SequenceOutcome::kApply);
  CHECK(f.last("k") == "1");
}

TEST_CASE("a second worker's check of the same key waits for the first transaction, then sees its advance") {
  Fixture f;
  CHECK(f.check("k", 1).outcome == SequenceOutcome::kApply);
  pqxx::connection first(testenv::pg_dsn());
  pqxx::work tx(first);
  CHECK(f.guard.check(tx, {"k", 2}).outcome == SequenceOutcome::kApply);
  auto second = std::async(std::launch::async, [&] { return f.check("k", 3).outcome; });
  CHECK(second.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);
  tx.commit();
  CHECK(second.get() == SequenceOutcome::kApply);  // 3 after 2, not a gap
  CHECK(f.last("k") == "3");
}

TEST_CASE("inbox_sequence refuses a bad consumer, key or sequence, naming the argument") {
  Fixture f;
  const std::string fn = f.schema.name() + ".inbox_sequence";
  struct Bad {
    std::string args, column, said;
  } cases[] = {
      {"'bad name', 'k', 1", "consumer", "'bad name' is not a consumer name"},
      {"'ledger', '', 1", "ordering_key", "must be a non-empty key"},
      {"'ledger', 'k', 0", "seq", "is 0, sequences start at 1"},
      {"'ledger', 'k', NULL", "seq", "is NULL, sequences start at 1"},
  };
  for (const auto& c : cases) {
    pqxx::connection conn(testenv::pg_dsn());
    pqxx::work tx(conn);
    try {
      tx.exec("SELECT * FROM " + fn + "(" + c.args + ")");
      FAIL("accepted " << c.args);
    } catch (const pqxx::sql_error& e) {
      CHECK(e.sqlstate() == "22023");
      CHECK_MESSAGE(std::string(e.what()).find("inbox_sequence: " + c.column + " " + c.said) != std::string::npos,
                    e.what());
    }
  }
  CHECK_THROWS_AS(f.check("", 1), outbox::ValidationError);
  CHECK_THROWS_AS(f.check("k", 0), outbox::ValidationError);
}

TEST_CASE("key_sequence_of reads the relay's headers and refuses half or malformed ones") {
  outbox::Delivery d;
  CHECK_FALSE(outbox::key_sequence_of(d).has_value());
  d.headers = {{"x-outbox-key", "order-1"}, {"x-outbox-seq", "42"}};
  auto ks = outbox::key_sequence_of(d);
  REQUIRE(ks.has_value());
  CHECK(ks->key == "order-1");
  CHECK(ks->seq == 42);
  for (const std::string& seq : {"0", "-1", "4x", "", "99999999999999999999"}) {
    d.headers["x-outbox-seq"] = seq;
    CHECK_THROWS_WITH_AS(outbox::key_sequence_of(d), doctest::Contains("header x-outbox-seq"), outbox::ValidationError);
  }
  d.headers = {{"x-outbox-key", "order-1"}};
  CHECK_THROWS_WITH_AS(outbox::key_sequence_of(d), doctest::Contains("header x-outbox-seq: is missing"),
                       outbox::ValidationError);
  d.headers = {{"x-outbox-seq", "1"}};
  CHECK_THROWS_WITH_AS(outbox::key_sequence_of(d), doctest::Contains("header x-outbox-key: is missing"),
                       outbox::ValidationError);
}
