#pragma once
// BenchEnv: the run's own schema, exchange and queue on the local servers, and the
// helpers that fill and inspect them. Everything it creates is removed when it ends,
// by the Janitor when the run is killed.

#include <cstdint>
#include <memory>
#include <pqxx/connection>
#include <string>

#include "amqp_bench_client.h"
#include "janitor.h"

namespace bench {

// Thread safety: none (one admin connection each to PostgreSQL and RabbitMQ); the
// measurement threads open connections of their own. Not copyable.
class BenchEnv {
 public:
  // Reads OUTBOX_PG_DSN and OUTBOX_AMQP_URI; creates and migrates schema
  // bench_<pid>_<random>, declares its exchange and queue.
  // `quorum`: the queue is declared with x-queue-type quorum.
  explicit BenchEnv(bool quorum = false);
  ~BenchEnv();
  BenchEnv(const BenchEnv&) = delete;
  BenchEnv& operator=(const BenchEnv&) = delete;

  const std::string& pg_dsn() const { return pg_dsn_; }
  const std::string& amqp_uri() const { return amqp_uri_; }
  const std::string& schema() const { return name_; }
  const std::string& exchange() const { return exchange_; }
  const std::string& queue() const { return queue_; }
  const std::string& routing_key() const { return routing_key_; }
  // application_name of the relays this run starts, to find their sessions.
  const std::string& relay_application_name() const { return relay_app_; }
  // The DSN the relays get: pg_dsn() plus relay_application_name().
  std::string relay_dsn() const { return dsn_for(relay_app_); }
  // pg_dsn() plus application_name=`application` (key/value or URI form).
  std::string dsn_for(const std::string& application) const;

  // Writes `rows` pending rows (payload of `bytes` random bytes, UUIDv7-shaped ids)
  // server-side, in transactions of at most 100k rows. `published`: the rows are
  // written as already published (history). `keys` > 0: row i gets the ordering key
  // "k<i mod keys>" (for per_key relays); 0: no ordering key.
  void fill(long rows, int bytes, bool published = false, long keys = 0);
  // Empties the outbox (all but the history, see keep_history) and the queue.
  void reset();
  // From now on reset() keeps the rows written so far (published history).
  void keep_history();
  // Rows with an id above this are the current measurement's (0 without history).
  std::int64_t history_max_id() const { return history_max_id_; }
  long pending_rows();
  // Whether any row is still pending (cheap: stops at the first one).
  bool any_pending();
  long published_rows();
  std::uint32_t queue_depth() { return amqp_->depth(queue_); }
  void purge_queue() { amqp_->purge(queue_); }
  pqxx::connection& admin() { return *pg_; }

  // A JSON object of exactly `bytes` bytes holding one random base64 string: what an
  // event with encrypted fields looks like, and incompressible enough that TOAST
  // compression does not flatter large payloads.
  static std::string random_payload(int bytes);

  // The Janitor's undo of the records BenchEnv makes: "schema" {name} and "queue"
  // {exchange, queue} ("" exchange: the queue alone), on $OUTBOX_PG_DSN and
  // $OUTBOX_AMQP_URI.
  static std::string drop_recorded_schema(const Janitor::Fields& fields);
  static std::string remove_recorded_queue(const Janitor::Fields& fields);

 private:
  std::string pg_dsn_, amqp_uri_, name_, exchange_, queue_, routing_key_, relay_app_;
  std::unique_ptr<pqxx::connection> pg_;
  std::unique_ptr<AmqpBenchClient> amqp_;
  long next_seq_ = 1;
  std::int64_t history_max_id_ = 0;
  std::int64_t id_base_ms_ = 0;
  Janitor::Id schema_record_ = 0, queue_record_ = 0;
};

}  // namespace bench
