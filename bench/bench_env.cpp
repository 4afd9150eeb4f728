#include "bench_env.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <pqxx/pqxx>
#include <random>

#include "outbox/migrator.h"
#include "outbox/pqxx_compat.h"

namespace bench {
namespace {

std::string required_env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v)
    throw BenchError(std::string(name) +
                     " is not set: start the servers with deploy/local/servers.sh "
                     "start and source the settings it prints");
  return v;
}

std::string hex_of(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out = "\\x";
  out.reserve(2 + bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

}  // namespace

std::string BenchEnv::random_payload(int bytes) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::mt19937_64 rng(std::random_device{}());
  std::string s(static_cast<std::size_t>(bytes), 'x');
  for (auto& c : s) c = alphabet[rng() % 64];
  const std::string head = "{\"data\":\"", tail = "\"}";
  if (s.size() >= head.size() + tail.size()) {
    s.replace(0, head.size(), head);
    s.replace(s.size() - tail.size(), tail.size(), tail);
  }
  return s;
}

BenchEnv::BenchEnv(bool quorum) : pg_dsn_(required_env("OUTBOX_PG_DSN")), amqp_uri_(required_env("OUTBOX_AMQP_URI")) {
  const auto salt = std::to_string(std::random_device{}() % 1000000);
  name_ = "bench_" + std::to_string(getpid()) + "_" + salt;
  exchange_ = name_ + "_x";
  queue_ = name_ + "_q";
  routing_key_ = "bench";
  relay_app_ = "outbox-bench-relay-" + name_;
  id_base_ms_ =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  pg_ = std::make_unique<pqxx::connection>(pg_dsn_);
  // Recorded before they exist: a run killed while making them leaves nothing either.
  schema_record_ = Janitor::record("schema", {name_});
  outbox::Migrator(name_).migrate(*pg_);
  try {
    queue_record_ = Janitor::record("queue", {exchange_, queue_});
    amqp_ = std::make_unique<AmqpBenchClient>(amqp_uri_);
    amqp_->declare(exchange_, queue_, routing_key_, quorum);
  } catch (...) {
    pqxx::nontransaction(*pg_).exec("DROP SCHEMA IF EXISTS \"" + name_ + "\" CASCADE");
    Janitor::forget(schema_record_);
    throw;
  }
}

BenchEnv::~BenchEnv() {
  try {
    amqp_->remove(exchange_, queue_);
    Janitor::forget(queue_record_);
  } catch (const std::exception& e) {
    std::cerr << "outbox-bench: cleanup of " << queue_ << " failed: " << e.what() << "\n";
  }
  try {
    pqxx::nontransaction(*pg_).exec("DROP SCHEMA IF EXISTS \"" + name_ + "\" CASCADE");
    Janitor::forget(schema_record_);
  } catch (const std::exception& e) {
    std::cerr << "outbox-bench: dropping schema " << name_ << " failed: " << e.what() << "\n";
  }
}

std::string BenchEnv::drop_recorded_schema(const Janitor::Fields& fields) {
  pqxx::connection pg(required_env("OUTBOX_PG_DSN"));
  pqxx::nontransaction tx(pg);
  // The killed run's sessions hold locks until PostgreSQL notices them gone.
  tx.exec("SET lock_timeout = '30s'");
  tx.exec("DROP SCHEMA IF EXISTS " + tx.quote_name(fields.at(0)) + " CASCADE");
  return "dropped schema " + fields.at(0);
}

std::string BenchEnv::remove_recorded_queue(const Janitor::Fields& fields) {
  AmqpBenchClient amqp(required_env("OUTBOX_AMQP_URI"));
  if (fields.at(0).empty()) {
    amqp.remove_queue(fields.at(1));
    return "deleted queue " + fields.at(1);
  }
  amqp.remove(fields.at(0), fields.at(1));
  return "deleted queue " + fields.at(1) + " and exchange " + fields.at(0);
}

std::string BenchEnv::dsn_for(const std::string& application) const {
  bool uri = pg_dsn_.rfind("postgresql://", 0) == 0 || pg_dsn_.rfind("postgres://", 0) == 0;
  if (uri) return pg_dsn_ + (pg_dsn_.find('?') == std::string::npos ? "?" : "&") + "application_name=" + application;
  return pg_dsn_ + " application_name=" + application;
}

void BenchEnv::fill(long rows, int bytes, bool published, long keys) {
  const std::string payload_hex = hex_of(random_payload(bytes));
  // Ids: 48 bits of this run's start time, then a per-run counter, shaped as UUIDv7
  // (version and variant nibbles), so index inserts are in order like the SDK's.
  const std::string sql = "INSERT INTO \"" + name_ +
                          "\".outbox (message_id, exchange, routing_key, message_type, payload, "
                          "published_at, ordering_key) "
                          "SELECT overlay(overlay(lpad(to_hex($1::bigint), 12, '0') || lpad(to_hex(g), 20, '0') "
                          "placing '7' from 13) placing '8' from 17)::uuid, $2, $3, 'BenchEvent', $4::bytea, "
                          "CASE WHEN $5 THEN now() END, CASE WHEN $8 > 0 THEN 'k' || (g % $8) ELSE '' END "
                          "FROM generate_series($6::bigint, $7::bigint) g";
  constexpr long kChunk = 100000;
  for (long done = 0; done < rows;) {
    long n = std::min(kChunk, rows - done);
    pqxx::work tx(*pg_);
    outbox::pgx::exec_params0(tx, sql, id_base_ms_, exchange_, routing_key_, payload_hex, published, next_seq_,
                              next_seq_ + n - 1, keys);
    tx.commit();
    next_seq_ += n;
    done += n;
  }
  pqxx::nontransaction(*pg_).exec("ANALYZE \"" + name_ + "\".outbox");
}

void BenchEnv::reset() {
  if (history_max_id_ > 0)
    pqxx::nontransaction(*pg_).exec("DELETE FROM \"" + name_ + "\".outbox WHERE id > " +
                                    std::to_string(history_max_id_));
  else pqxx::nontransaction(*pg_).exec("TRUNCATE \"" + name_ + "\".outbox, \"" + name_ + "\".outbox_key_sequences");
  amqp_->purge(queue_);
}

void BenchEnv::keep_history() {
  pqxx::nontransaction tx(*pg_);
  history_max_id_ =
      outbox::pgx::exec1(tx, "SELECT coalesce(max(id), 0) FROM \"" + name_ + "\".outbox")[0].as<std::int64_t>();
  tx.exec("VACUUM ANALYZE \"" + name_ + "\".outbox");
}

long BenchEnv::pending_rows() {
  pqxx::nontransaction tx(*pg_);
  return outbox::pgx::exec1(tx, "SELECT count(*) FROM \"" + name_ + "\".outbox WHERE published_at IS NULL")[0]
      .as<long>();
}

bool BenchEnv::any_pending() {
  pqxx::nontransaction tx(*pg_);
  return outbox::pgx::exec1(tx, "SELECT EXISTS (SELECT 1 FROM \"" + name_ + "\".outbox WHERE published_at IS NULL)")[0]
      .as<bool>();
}

long BenchEnv::published_rows() {
  pqxx::nontransaction tx(*pg_);
  return outbox::pgx::exec1(tx, "SELECT count(*) FROM \"" + name_ +
                                    "\".outbox WHERE published_at IS NOT NULL AND id > " +
                                    std::to_string(history_max_id_))[0]
      .as<long>();
}

}  // namespace bench
