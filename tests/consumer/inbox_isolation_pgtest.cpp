// Consumers isolated from each other (issue 40, finding 2; migration 0014 and
// schema/roles.sql): a login of the consumer role records and reads only the inbox
// rows of the consumer names inbox_consumers maps to it, so it cannot pre-empt
// another consumer's record (which made the real consumer skip its effect, a missed
// charge) nor read its rows. The owner, roles outside the consumer role and retention
// see every row as before; the consumer SDK works unchanged under a mapped login.
#include <doctest/doctest.h>

#include <pqxx/pqxx>

#include "outbox/inbox.h"
#include "outbox/inbox_retention.h"
#include "outbox/message_id.h"
#include "outbox/pqxx_compat.h"
#include "relay_process.h"
#include "test_env.h"
#include "test_text.h"

using namespace outbox;
using testenv::ScopedSchema;
using testenv::sql_exec;
using testenv::sql_value;

namespace {

using testenv::contains;

// roles.sql's groups for one schema, a billing and a shipping login mapped to their
// consumer names, and any further logins a test adds; all dropped on destruction.
class ConsumerLogins {
 public:
  explicit ConsumerLogins(const ScopedSchema& schema)
      : schema_(schema.name()), prefix_(testenv::unique_name("iso")), group_(prefix_ + "_consumer") {
    created_ = {prefix_ + "_relay", prefix_ + "_producer", group_};
    const auto roles = run_roles_sql();  // makes the groups
    REQUIRE_MESSAGE(roles.exit_code == 0, roles.output);
    billing = login("billing");
    shipping = login("shipping");
    map("billing", billing);
    map("shipping", shipping);
  }
  ~ConsumerLogins() {
    for (auto r = created_.rbegin(); r != created_.rend(); ++r) {
      try {
        sql_exec("DROP OWNED BY " + *r);
        sql_exec("DROP ROLE " + *r);
      } catch (...) {
      }
    }
  }
  ConsumerLogins(const ConsumerLogins&) = delete;
  ConsumerLogins& operator=(const ConsumerLogins&) = delete;

  // A new login role named after `what`, in the consumer role when `in_group`.
  std::string login(const std::string& what, bool in_group = true) {
    const auto name = prefix_ + "_" + what;
    created_.push_back(name);
    sql_exec("CREATE ROLE " + name + " LOGIN" + (in_group ? " IN ROLE " + group_ : ""));
    return name;
  }
  std::string group(const std::string& what) {
    const auto name = prefix_ + "_" + what;
    created_.push_back(name);
    sql_exec("CREATE ROLE " + name + " NOLOGIN");
    return name;
  }
  void map(const std::string& consumer, const std::string& role) const {
    sql_exec("INSERT INTO \"" + schema_ + "\".inbox_consumers (consumer, member_of) VALUES ('" + consumer + "', '" +
             role + "')");
  }
  // schema/roles.sql as an operator runs it, with the consumer role.
  testenv::CommandResult run_roles_sql() const {
    return testenv::run_command({"/bin/sh", "-c",
                                 "psql '" + testenv::pg_dsn() + "' -q -v ON_ERROR_STOP=1 -v schema=" + schema_ +
                                     " -v relay_role=" + prefix_ + "_relay -v producer_role=" + prefix_ +
                                     "_producer -v consumer_role=" + group_ + " -f " + OUTBOX_ROLES_SQL + " 2>&1"});
  }
  static std::string dsn(const std::string& login) { return testenv::pg_dsn() + " user=" + login; }

  std::string billing, shipping;

 private:
  std::string schema_, prefix_, group_;
  std::vector<std::string> created_;
};

// inbox_record as `login`, committed: "true", "false", or the error it raised.
std::string record_as(const std::string& login, const ScopedSchema& s, const std::string& id,
                      const std::string& consumer) {
  pqxx::connection conn(ConsumerLogins::dsn(login));
  pqxx::work tx(conn);
  try {
    const auto r = outbox::pgx::exec1(tx, "SELECT \"" + s.name() + "\".inbox_record('" + id + "', '" + consumer +
                                              "', 'OrderPlaced')::text")[0]
                       .as<std::string>();
    tx.commit();
    return r;
  } catch (const pqxx::insufficient_privilege& e) {  // SQLSTATE 42501 (sqlstate() is empty in libpqxx 6.4)
    return std::string("error 42501: ") + e.what();
  } catch (const pqxx::sql_error& e) {
    return std::string("error: ") + e.what();
  }
}

// The consumer names of the inbox rows `login` can read, in order, "|"-separated.
std::string visible_to(const std::string& login, const ScopedSchema& s) {
  pqxx::connection conn(ConsumerLogins::dsn(login));
  pqxx::nontransaction q(conn);
  return outbox::pgx::exec1(q, "SELECT coalesce(string_agg(consumer, '|' ORDER BY consumer), '') FROM \"" + s.name() +
                                   "\".inbox")[0]
      .as<std::string>();
}

}  // namespace

TEST_CASE("a consumer login cannot record another consumer's message, so that consumer still applies its effect") {
  ScopedSchema s("iso");
  ConsumerLogins logins(s);
  const auto id = MessageId::generate_v7().to_string();
  // The attack of the finding: shipping's login records the message for billing first.
  const auto attack = record_as(logins.shipping, s, id, "billing");
  CHECK_MESSAGE(contains(attack, "error 42501"), attack);
  CHECK_MESSAGE(contains(attack, s.name() + ".inbox: role '" + logins.shipping +
                                     "' may not record consumer 'billing': " + s.name() +
                                     ".inbox_consumers maps no role of it to that name"),
                attack);
  // A plain INSERT, as a consumer in another language writes it, is refused the same way.
  pqxx::connection conn(ConsumerLogins::dsn(logins.shipping));
  pqxx::work tx(conn);
  CHECK_THROWS_AS(tx.exec("INSERT INTO \"" + s.name() + "\".inbox (message_id, consumer) VALUES ('" + id +
                          "', 'billing') ON CONFLICT ON CONSTRAINT inbox_pkey DO NOTHING"),
                  pqxx::insufficient_privilege);
  tx.abort();
  // The real billing consumer gets the message as new (it charges), once.
  CHECK(record_as(logins.billing, s, id, "billing") == "true");
  CHECK(record_as(logins.billing, s, id, "billing") == "false");
  // And the other way round.
  CHECK(contains(record_as(logins.billing, s, id, "shipping"), "may not record consumer 'shipping'"));
  CHECK(record_as(logins.shipping, s, id, "shipping") == "true");
  CHECK(sql_value("SELECT string_agg(consumer, '|' ORDER BY consumer) FROM \"" + s.name() + "\".inbox") ==
        "billing|shipping");
}

TEST_CASE("a consumer login reads only its own consumer's inbox rows; the owner and other roles read all") {
  ScopedSchema s("iso");
  ConsumerLogins logins(s);
  for (int i = 0; i < 3; ++i) {
    const auto id = MessageId::generate_v7().to_string();
    REQUIRE(record_as(logins.billing, s, id, "billing") == "true");
    REQUIRE(record_as(logins.shipping, s, id, "shipping") == "true");
  }
  CHECK(visible_to(logins.billing, s) == "billing|billing|billing");
  CHECK(visible_to(logins.shipping, s) == "shipping|shipping|shipping");
  // Naming the other's rows finds nothing.
  pqxx::connection conn(ConsumerLogins::dsn(logins.billing));
  pqxx::nontransaction q(conn);
  CHECK(outbox::pgx::exec1(q, "SELECT count(*) FROM \"" + s.name() + "\".inbox WHERE consumer = 'shipping'")[0]
            .as<int>() == 0);
  // The owner (the test's superuser), and an admin login outside the consumer role
  // given SELECT on the inbox, see every row.
  CHECK(sql_value("SELECT count(*) FROM \"" + s.name() + "\".inbox") == "6");
  const auto admin = logins.login("admin", false);
  sql_exec("GRANT USAGE ON SCHEMA \"" + s.name() + "\" TO " + admin);
  sql_exec("GRANT SELECT ON \"" + s.name() + "\".inbox TO " + admin);
  CHECK(visible_to(admin, s) == "billing|billing|billing|shipping|shipping|shipping");
}

TEST_CASE("the consumer SDK's Inbox works unchanged under a mapped login, and only for its own name") {
  ScopedSchema s("iso");
  ConsumerLogins logins(s);
  const auto id = MessageId::generate_v7();
  pqxx::connection conn(ConsumerLogins::dsn(logins.billing));
  {
    pqxx::work tx(conn);
    CHECK(Inbox({s.name(), ConsumerName("billing")}).record(tx, id, "OrderPlaced") == InboxOutcome::kNew);
    tx.commit();
  }
  {
    pqxx::work tx(conn);
    CHECK(Inbox({s.name(), ConsumerName("billing")}).record(tx, id, "OrderPlaced") == InboxOutcome::kDuplicate);
  }
  pqxx::work tx(conn);
  const auto what = testenv::error_of<pqxx::insufficient_privilege>([&] {
    Inbox({s.name(), ConsumerName("shipping")}).record(tx, id, "OrderPlaced");
  });
  CHECK_MESSAGE(contains(what, "may not record consumer 'shipping'"), what);
}

TEST_CASE("every login of a consumer's group records under its name; an unmapped login records nothing") {
  ScopedSchema s("iso");
  ConsumerLogins logins(s);
  // Blue and green credentials of one service, through a group mapped once.
  const auto group = logins.group("ledger_group");
  logins.map("ledger", group);
  const auto blue = logins.login("ledger_blue"), green = logins.login("ledger_green");
  sql_exec("GRANT " + group + " TO " + blue + ", " + green);
  const auto id = MessageId::generate_v7().to_string();
  CHECK(record_as(blue, s, id, "ledger") == "true");
  CHECK(record_as(green, s, id, "ledger") == "false");
  CHECK(visible_to(green, s) == "ledger");
  // A login in the consumer role that no row maps: refused, and roles.sql says so.
  const auto stray = logins.login("stray");
  CHECK(contains(record_as(stray, s, id, "billing"), "error 42501"));
  CHECK(visible_to(stray, s).empty());
  const auto rerun = logins.run_roles_sql();
  CHECK(rerun.exit_code == 0);
  CHECK_MESSAGE(contains(rerun.output, "WARNING:  login " + stray + " is in role"), rerun.output);
  CHECK_FALSE(contains(rerun.output, "login " + blue));
}

TEST_CASE("inbox retention run by a cleanup login outside the consumer role purges every consumer's old rows") {
  ScopedSchema s("iso");
  ConsumerLogins logins(s);
  sql_exec("INSERT INTO \"" + s.name() +
           "\".inbox (message_id, consumer, processed_at) "
           "SELECT gen_random_uuid(), c, now() - interval '40 days' FROM generate_series(1, 5), "
           "unnest(ARRAY['billing', 'shipping']) c");
  const auto id = MessageId::generate_v7().to_string();
  REQUIRE(record_as(logins.billing, s, id, "billing") == "true");
  const auto cleaner = logins.login("cleaner", false);
  sql_exec("GRANT USAGE ON SCHEMA \"" + s.name() + "\" TO " + cleaner);
  sql_exec("GRANT SELECT, UPDATE, DELETE ON \"" + s.name() + "\".inbox TO " + cleaner);
  RetentionPolicy policy;  // 30 days
  pqxx::connection conn(ConsumerLogins::dsn(cleaner));
  const auto result = InboxRetention(s.name(), policy).purge(conn);
  CHECK(result.removed == 10);
  CHECK(sql_value("SELECT string_agg(consumer, '|') FROM \"" + s.name() + "\".inbox") == "billing");
}

TEST_CASE("roles.sql refuses to set up consumers on a schema migrated before inbox_consumers, naming the migration") {
  ScopedSchema s("iso", 12);
  const auto prefix = testenv::unique_name("iso_old");
  const auto r = testenv::run_command({"/bin/sh", "-c",
                                       "psql '" + testenv::pg_dsn() + "' -q -v ON_ERROR_STOP=1 -v schema=" + s.name() +
                                           " -v relay_role=" + prefix + "_relay -v producer_role=" + prefix +
                                           "_producer -v consumer_role=" + prefix + "_consumer -f " + OUTBOX_ROLES_SQL +
                                           " 2>&1"});
  for (const auto& role : {prefix + "_relay", prefix + "_producer", prefix + "_consumer"}) {
    try {
      sql_exec("DROP OWNED BY " + role);
      sql_exec("DROP ROLE " + role);
    } catch (...) {
    }
  }
  CHECK(r.exit_code != 0);
  CHECK_MESSAGE(contains(r.output, "has no inbox_consumers table: run `outbox-relay migrate` (migration 0014) first"),
                r.output);
}
