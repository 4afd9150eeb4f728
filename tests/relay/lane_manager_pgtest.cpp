// Lane ownership through advisory locks, against a real PostgreSQL: fair shares,
// hand-over to a newcomer, take-over from a dead relay, never two owners.
#include <doctest/doctest.h>

#include <memory>
#include <pqxx/pqxx>
#include <set>
#include <thread>

#include "pg/lane_manager.h"
#include "test_env.h"

using relay::LaneManager;

namespace {

constexpr int kLanes = 16;

struct Member {
  std::unique_ptr<relay::PgSession> conn = std::make_unique<relay::PgSession>(testenv::pg_dsn());
  LaneManager lanes;
  explicit Member(const std::string& schema) : lanes(schema, kLanes) { lanes.join(*conn); }
  LaneManager::Change rebalance() { return lanes.rebalance(*conn); }
};

// Every lane held by at most one member, and the union of what members believe
// they own matches what the server's lock table says.
void check_exclusive(const std::vector<Member*>& members) {
  std::set<int> seen;
  for (auto* m : members)
    for (int lane : m->lanes.owned()) {
      CHECK_MESSAGE(seen.insert(lane).second, "lane " << lane << " owned twice");
    }
  auto held =
      testenv::sql_value("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = " +
                         std::to_string(members.front()->lanes.lane_class()) + " AND objsubid = 2");
  CHECK(held == std::to_string(seen.size()));
}

}  // namespace

TEST_CASE("a lone relay takes every lane") {
  auto schema = testenv::unique_name("lanes");
  Member a(schema);
  auto change = a.rebalance();
  CHECK(change.members == 1);
  CHECK(change.fair_share == kLanes);
  CHECK(a.lanes.owned().size() == kLanes);
  check_exclusive({&a});
}

TEST_CASE("a joining relay gets its fair share once the owner gives up the surplus") {
  auto schema = testenv::unique_name("lanes");
  Member a(schema);
  a.rebalance();
  Member b(schema);
  auto first = b.rebalance();
  CHECK(first.members == 2);
  CHECK(b.lanes.owned().empty());  // all taken: nothing stolen, nothing shared
  check_exclusive({&a, &b});
  auto released = a.rebalance();
  CHECK(released.released.size() == kLanes / 2);
  b.rebalance();
  CHECK(a.lanes.owned().size() == kLanes / 2);
  CHECK(b.lanes.owned().size() == kLanes / 2);
  check_exclusive({&a, &b});
}

TEST_CASE("three relays cover every lane without overlap") {
  auto schema = testenv::unique_name("lanes");
  Member a(schema), b(schema), c(schema);
  for (int round = 0; round < 3; ++round)
    for (auto* m : {&a, &b, &c}) m->rebalance();
  std::size_t total = a.lanes.owned().size() + b.lanes.owned().size() + c.lanes.owned().size();
  CHECK(total == kLanes);
  for (auto* m : {&a, &b, &c}) CHECK(m->lanes.owned().size() <= 6);  // ceil(16/3)
  check_exclusive({&a, &b, &c});
}

TEST_CASE("a dead relay's lanes are taken over at the next rebalance") {
  auto schema = testenv::unique_name("lanes");
  Member a(schema);
  auto b = std::make_unique<Member>(schema);
  a.rebalance();
  b->rebalance();
  a.rebalance();
  b->rebalance();
  REQUIRE(b->lanes.owned().size() == kLanes / 2);
  b.reset();  // its session ends: the server releases its locks once the backend exits
  // The backend exits a moment after the client closed; rebalance as a relay would,
  // once per interval, until the server has let go.
  LaneManager::Change change;
  std::size_t taken = 0;
  for (int i = 0; i < 50 && a.lanes.owned().size() < kLanes; ++i) {
    change = a.rebalance();
    taken += change.taken.size();
    if (a.lanes.owned().size() < kLanes) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(change.members == 1);
  CHECK(a.lanes.owned().size() == kLanes);
  CHECK(taken == kLanes / 2);
}

TEST_CASE("lanes follow the SQL hash, so every key maps to one lane in range") {
  pqxx::connection conn(testenv::pg_dsn());
  pqxx::nontransaction tx(conn);
  auto r = tx.exec("SELECT min(l), max(l), count(DISTINCT l) FROM (SELECT " +
                   LaneManager::lane_sql("'order-' || g", "16") + " AS l FROM generate_series(1, 2000) g) s");
  CHECK(r[0][0].as<int>() == 0);
  CHECK(r[0][1].as<int>() == 15);
  CHECK(r[0][2].as<int>() == 16);
}
