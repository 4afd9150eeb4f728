// Migrating a live outbox: producers keep inserting at a steady rate while
// `migrate` builds its indexes (CREATE INDEX CONCURRENTLY, outside the migration's
// transaction), and none of their INSERTs waits more than 100 ms. The same index
// built the old way (inside a transaction) holds every INSERT for the whole build.
// A build cut off by a crash leaves an INVALID index, which migrate rebuilds.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <pqxx/pqxx>
#include <thread>
#include <tuple>

#include "outbox/embedded_migrations.h"
#include "outbox/migrator.h"
#include "outbox/pqxx_compat.h"
#include "test_env.h"

using namespace outbox;
using testenv::ScopedSchema;
using testenv::sql_exec;
using testenv::sql_value;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// Producers inserting one row per transaction every 5 ms each, as an order service
// would; remembers the slowest INSERT (statement and commit).
class SteadyProducers {
 public:
  SteadyProducers(const std::string& schema, int threads) {
    for (int t = 0; t < threads; ++t) threads_.emplace_back([this, schema, t] { run(schema, t); });
    while (inserts_ < 20) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~SteadyProducers() { stop(); }
  void stop() {
    stop_ = true;
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }
  // The slowest INSERT since the last call, and how many there were.
  std::pair<double, int> take_max() {
    int n = inserts_.exchange(0);
    return {max_us_.exchange(0) / 1000.0, n};
  }

 private:
  void run(const std::string& schema, int t) {
    pqxx::connection conn(testenv::pg_dsn());
    conn.prepare("ins", "INSERT INTO \"" + schema +
                            "\".outbox (message_id, exchange, routing_key, message_type, "
                            "ordering_key, payload) VALUES (gen_random_uuid(), 'orders', 'order.placed', "
                            "'OrderPlaced', $1, '\\x7b7d')");
    for (int i = 0; !stop_; ++i) {
      const auto start = Clock::now();
      pqxx::work tx(conn);
      outbox::pgx::exec_prepared(tx, "ins", "live-" + std::to_string(t) + "-" + std::to_string(i % 100));
      tx.commit();
      const auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
      for (auto seen = max_us_.load(); us > seen && !max_us_.compare_exchange_weak(seen, us);) {
      }
      ++inserts_;
      std::this_thread::sleep_until(start + std::chrono::milliseconds(5));
    }
  }
  std::atomic<bool> stop_{false};
  std::atomic<long long> max_us_{0};
  std::atomic<int> inserts_{0};
  std::vector<std::thread> threads_;
};

// A schema at version 4 (before the index migrations) whose outbox holds `rows`
// pending rows over 5000 ordering keys.
void fill(const ScopedSchema& schema, int rows) {
  sql_exec("INSERT INTO \"" + schema.name() +
           "\".outbox (message_id, exchange, routing_key, message_type, "
           "ordering_key, payload) SELECT gen_random_uuid(), 'orders', 'order.placed', 'OrderPlaced', "
           "'order-' || (i % 5000), convert_to(repeat('x', 100), 'UTF8') FROM generate_series(1, " +
           std::to_string(rows) + ") i");
  sql_exec("VACUUM ANALYZE \"" + schema.name() + "\".outbox");
}

std::string index_def(const ScopedSchema& schema, const std::string& index) {
  return sql_value(
      "SELECT coalesce((SELECT pg_get_indexdef(i.indexrelid) || CASE WHEN i.indisvalid THEN '' "
      "ELSE ' INVALID' END FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
      "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = '" +
      schema.name() + "' AND c.relname = '" + index + "'), 'absent')");
}

// One migration 4 -> 8 of a live outbox of `rows` rows, and for comparison the same
// index built the old way (inside a transaction) under the same load.
struct LiveRun {
  double baseline_ms = 0;  // the slowest INSERT in the second before migrating
  double migrate_ms = 0;
  int inserts = 0;         // INSERTs while migrating
  double max_wait_ms = 0;  // the slowest of them
  double old_build_ms = 0, old_max_wait_ms = 0;
};

LiveRun migrate_live(int rows) {
  ScopedSchema schema("live", 4);
  fill(schema, rows);
  SteadyProducers producers(schema.name(), 2);
  producers.take_max();
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  LiveRun run;
  run.baseline_ms = producers.take_max().first;

  // Two migrators at once, as two relays starting together would.
  const auto start = Clock::now();
  std::vector<std::thread> migrators;
  std::vector<Migrator::Result> results(2);
  for (int i = 0; i < 2; ++i)
    migrators.emplace_back([&, i] {
      pqxx::connection conn(testenv::pg_dsn());
      results[i] = Migrator(schema.name()).migrate(conn);
    });
  for (auto& t : migrators) t.join();
  run.migrate_ms = ms_since(start);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::tie(run.max_wait_ms, run.inserts) = producers.take_max();

  // From version 4 to the latest, each migration applied once between the two.
  // Counted, not latest - 4: numbers may have gaps while branches that hold the
  // missing ones are merged.
  const int latest = outbox::embedded_migrations().back().version;
  const auto after_4 = std::count_if(outbox::embedded_migrations().begin(), outbox::embedded_migrations().end(),
                                     [](const auto& m) { return m.version > 4; });
  CHECK(results[0].applied.size() + results[1].applied.size() == static_cast<std::size_t>(after_4));
  CHECK(results[0].version == latest);
  CHECK(results[1].version == latest);
  CHECK(index_def(schema, "outbox_pending_key_idx") ==
        "CREATE INDEX outbox_pending_key_idx ON " + schema.name() +
            ".outbox USING btree (ordering_key, id) WHERE (published_at IS NULL)");
  CHECK(index_def(schema, "outbox_parked_idx") == "CREATE INDEX outbox_parked_idx ON " + schema.name() +
                                                      ".outbox USING btree (id) WHERE (parked_at IS NOT NULL)");

  const auto old_start = Clock::now();
  sql_exec("CREATE INDEX old_way_idx ON \"" + schema.name() +
           "\".outbox (ordering_key, id) WHERE published_at IS NULL");
  run.old_build_ms = ms_since(old_start);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  run.old_max_wait_ms = producers.take_max().first;
  return run;
}

}  // namespace

TEST_CASE("migrating a live outbox never holds a producer's INSERT for more than 100 ms") {
  // The machine is shared: a run whose slowest INSERT is slow for reasons of its own
  // (another process took the CPU) is repeated, at most 3 runs. A migration that
  // blocks writers fails every run: the same index built in a transaction holds them
  // for the whole build, several hundred ms here.
  LiveRun run;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    run = migrate_live(200000);
    MESSAGE("run " << attempt << ": 200000 rows; slowest INSERT before migrating " << run.baseline_ms
                   << " ms; migrate 4 -> 8 took " << run.migrate_ms << " ms, " << run.inserts
                   << " INSERTs meanwhile, the slowest waited " << run.max_wait_ms
                   << " ms; the same index built in a transaction took " << run.old_build_ms
                   << " ms and held an INSERT " << run.old_max_wait_ms << " ms");
    // The test can fail: a blocking build holds the producers for about its whole length.
    CHECK(run.old_max_wait_ms > 0.5 * run.old_build_ms);
    if (run.max_wait_ms < 100.0) break;
  }
  CHECK(run.inserts > 20);
  CHECK(run.max_wait_ms < 100.0);
  CHECK(run.old_max_wait_ms > run.max_wait_ms);
}

TEST_CASE("an index build cut off by a crash is dropped and built again; a finished one is kept") {
  for (const long long concurrent_from : {0LL, 1LL << 40}) {
    CAPTURE(concurrent_from);
    ScopedSchema schema("crash", 4);
    fill(schema, 50);
    // A CREATE INDEX CONCURRENTLY that fails leaves its index INVALID, as a crash or
    // a cancel in the middle of the build would.
    pqxx::connection conn(testenv::pg_dsn());
    {
      pqxx::nontransaction q(conn);
      CHECK_THROWS(q.exec("CREATE UNIQUE INDEX CONCURRENTLY outbox_pending_key_idx ON \"" + schema.name() +
                          "\".outbox (exchange)"));
    }
    REQUIRE(index_def(schema, "outbox_pending_key_idx") == "CREATE UNIQUE INDEX outbox_pending_key_idx ON " +
                                                               schema.name() +
                                                               ".outbox USING btree (exchange) INVALID");
    // A build that finished before the crash, its migration unrecorded.
    sql_exec("CREATE INDEX outbox_parked_idx ON \"" + schema.name() + "\".outbox (id) WHERE parked_at IS NOT NULL");
    const auto parked_oid = sql_value("SELECT '\"" + schema.name() + "\".outbox_parked_idx'::regclass::oid");

    const auto result = Migrator(schema.name()).concurrent_index_min_bytes(concurrent_from).migrate(conn);
    CHECK(result.applied.front() == 5);
    CHECK(index_def(schema, "outbox_pending_key_idx") ==
          "CREATE INDEX outbox_pending_key_idx ON " + schema.name() +
              ".outbox USING btree (ordering_key, id) WHERE (published_at IS NULL)");
    CHECK(sql_value("SELECT '\"" + schema.name() + "\".outbox_parked_idx'::regclass::oid") == parked_oid);
  }
}
