#include "floor_pipeline.h"

#include <chrono>
#include <memory>
#include <pqxx/pqxx>
#include <vector>

#include "amqp_bench_client.h"
#include "outbox/pqxx_compat.h"
#include "tag_counter.h"

namespace bench {
namespace {

constexpr auto kConfirmTimeout = std::chrono::seconds(30);

// "{1,2,3}": the claimed ids as one bigint[] parameter.
std::string id_array(const std::vector<std::int64_t>& ids) {
  std::string out = "{";
  for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out + "}";
}

}  // namespace

FloorPipeline::FloorPipeline(const BenchEnv& env, int batch_size)
    : dsn_(env.relay_dsn()), amqp_uri_(env.amqp_uri()), schema_(env.schema()), batch_size_(batch_size) {
  thread_ = std::thread([this] {
    try {
      run();
    } catch (const std::exception& e) {
      error_ = e.what();
    }
  });
}

FloorPipeline::~FloorPipeline() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

void FloorPipeline::stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  if (!error_.empty()) throw BenchError("floor pipeline: " + error_);
}

void FloorPipeline::run() {
  pqxx::connection pg(dsn_);
  AmqpBenchClient amqp(amqp_uri_);
  amqp.confirm_select();
  TagCounter tags;
  const std::string table = pg.quote_name(schema_) + ".outbox";
  pg.prepare("claim", "SELECT id, message_id::text, exchange, routing_key, payload FROM " + table +
                          " WHERE published_at IS NULL AND parked_at IS NULL AND next_attempt_at <= now() "
                          "ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED");
  pg.prepare("mark", "UPDATE " + table + " SET published_at = clock_timestamp() WHERE id = ANY($1::bigint[])");
  {
    pqxx::nontransaction setup(pg);
    // What every claimer needs (the relay too, docs/perf/NOTEBOOK.md, round three):
    // past five runs the prepared claim's generic plan may read the whole table.
    setup.exec("SET enable_seqscan = off");
    setup.exec("LISTEN " + pg.quote_name(("outbox_" + schema_).substr(0, 63)));
  }
  // One batch: claim, publish, every ack, mark, commit. Returns the rows it moved.
  auto batch = [&]() -> std::size_t {
    pqxx::work tx(pg);
    const auto rows = outbox::pgx::exec_prepared(tx, "claim", batch_size_);
    if (rows.empty()) return 0;
    std::vector<std::int64_t> ids;
    for (const auto& r : rows) {
      ids.push_back(r[0].as<std::int64_t>());
      amqp.publish(r[2].c_str(), r[3].c_str(), r[1].c_str(), ids.back(), outbox::pgx::bytea_of(r[4]));
      tags.published();
    }
    // Every ack of the batch; a nack or a silent broker ends the pipeline (the floor
    // has no retry to offer).
    while (tags.outstanding() > 0) {
      const auto c = amqp.next_confirm(kConfirmTimeout);
      if (!c) throw BenchError("floor pipeline: no confirm within 30 s");
      tags.settle(*c);
    }
    if (tags.nacked() > 0) throw BenchError("floor pipeline: the broker nacked a message");
    outbox::pgx::exec_prepared0(tx, "mark", id_array(ids));
    tx.commit();
    return rows.size();
  };
  const std::string lock_key = "1868724338, hashtext(" + pg.quote(schema_) + ")";
  while (!stopping_) {
    while (!stopping_ && batch() > 0) {
    }
    // Idle: hold the lock, so every producer's insert notifies; a row committed
    // before the lock was taken sent none, hence one more look before the wait.
    pqxx::nontransaction(pg).exec("SELECT pg_advisory_lock(" + lock_key + ")");
    if (batch() == 0) pg.await_notification(0, 100000);
    pqxx::nontransaction(pg).exec("SELECT pg_advisory_unlock(" + lock_key + ")");
  }
}

}  // namespace bench
