#include "sequenced_consumer.h"

#include <chrono>
#include <pqxx/pqxx>
#include <thread>

#include "outbox/consumer_runner.h"
#include "outbox/pqxx_compat.h"
#include "outbox/sequence_guard.h"

namespace chaos {
namespace {

const std::string kConsumer = "chaos-ledger";

}  // namespace

SequencedConsumer::SequencedConsumer(const std::string& pg_dsn, const std::string& amqp_uri, const std::string& schema,
                                     const Topology& topology)
    : pg_dsn_(pg_dsn), schema_(schema) {
  {
    pqxx::connection conn(pg_dsn_);
    pqxx::nontransaction tx(conn);
    tx.exec("CREATE TABLE IF NOT EXISTS \"" + schema_ +
            "\".chaos_applied (n bigserial PRIMARY KEY, key text NOT NULL, seq bigint NOT NULL, message_id uuid)");
  }
  outbox::RunnerOptions o;
  o.pg_dsn = pg_dsn;
  o.amqp_uri = amqp_uri;
  o.schema = schema;
  o.consumer = outbox::ConsumerName(kConsumer);
  o.queue = "chaos_sequenced";
  o.bindings = {{topology.exchange, "order", "direct"}};
  o.dead_letter_exchange = "chaos_sequenced_dlx";
  o.concurrency = 3;
  o.prefetch = 10;
  o.retry_delay = std::chrono::milliseconds(50);
  o.retry_delay_max = std::chrono::milliseconds(1000);
  o.connect_timeout = std::chrono::milliseconds(2000);
  o.heartbeat_s = 2;
  o.sequence_guard = true;
  o.sequence_gap_alert = std::chrono::seconds(30);
  const std::string insert = "INSERT INTO \"" + schema_ +
                             "\".chaos_applied (key, seq, message_id) VALUES ($1, $2, $3::uuid)";
  runner_ = std::make_unique<outbox::ConsumerRunner>(o, [insert](pqxx::transaction_base& tx,
                                                                 const outbox::Delivery& d) {
    auto ks = outbox::key_sequence_of(d);
    if (!ks || ks->key.rfind(kSharedKeyPrefix, 0) != 0) return;  // only the shared keys are checked
    outbox::pgx::exec_params0(tx, insert, ks->key, ks->seq, d.message_id.to_string());
  });
}

SequencedConsumer::~SequencedConsumer() {
  runner_->stop();
  runner_->wait();
}

void SequencedConsumer::start() { runner_->start(); }

std::uint64_t SequencedConsumer::held() const { return runner_->counters().held; }
std::uint64_t SequencedConsumer::applied() const { return runner_->counters().processed; }

std::vector<std::string> SequencedConsumer::wait_and_check(int timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  std::vector<std::string> failures;
  for (;;) {
    try {
      failures = check();
    } catch (const std::exception& e) {
      failures = {std::string("sequence check failed: ") + e.what()};
    }
    if (failures.empty() || std::chrono::steady_clock::now() > deadline) return failures;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

std::vector<std::string> SequencedConsumer::check() const {
  pqxx::connection conn(pg_dsn_);
  pqxx::read_transaction tx(conn);
  const std::string s = "\"" + schema_ + "\"";
  std::vector<std::string> failures;
  // Keys whose applied sequence differs from the outbox's.
  auto behind = outbox::pgx::exec_params(
      tx,
      "SELECT o.ordering_key, o.last_seq, coalesce(c.last_seq, 0) FROM " + s + ".outbox_key_sequences o LEFT JOIN " +
          s +
          ".inbox_key_sequences c ON c.ordering_key = o.ordering_key AND c.consumer = $1 "
          "WHERE starts_with(o.ordering_key, $2) AND o.last_seq <> coalesce(c.last_seq, 0) ORDER BY 1",
      kConsumer, kSharedKeyPrefix);
  if (!behind.empty())
    failures.push_back(std::to_string(behind.size()) + " key(s) not in step with the outbox, e.g. " +
                       behind[0][0].c_str() + ": outbox " + behind[0][1].c_str() + ", applied " + behind[0][2].c_str());
  auto held = outbox::pgx::exec1(tx, "SELECT count(*) FROM " + s + ".inbox_held")[0].as<long long>();
  if (held != 0) failures.push_back(std::to_string(held) + " event(s) still held at the end");
  // Each key's events in the order applied must be exactly 1, 2, 3, ...
  auto disorder = outbox::pgx::exec1(
      tx,
      "SELECT count(*), min(key) FROM (SELECT key, seq, row_number() OVER (PARTITION BY key ORDER BY n) AS pos FROM " +
          s + ".chaos_applied) a WHERE seq <> pos");
  if (disorder[0].as<long long>() != 0)
    failures.push_back(std::string(disorder[0].c_str()) + " event(s) applied out of order or twice, e.g. on key " +
                       disorder[1].c_str());
  auto totals = outbox::pgx::exec_params1(
      tx,
      "SELECT (SELECT coalesce(sum(last_seq), 0) FROM " + s +
          ".outbox_key_sequences WHERE starts_with(ordering_key, $1)), (SELECT count(*) FROM " + s + ".chaos_applied)",
      kSharedKeyPrefix);
  if (totals[0].as<long long>() != totals[1].as<long long>())
    failures.push_back("the outbox numbered " + std::string(totals[0].c_str()) +
                       " shared-key events, the consumer applied " + totals[1].c_str());
  return failures;
}

}  // namespace chaos
