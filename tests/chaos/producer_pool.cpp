#include "producer_pool.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <pqxx/pqxx>
#include <random>

#include "outbox/outbox_writer.h"
#include "outbox/pqxx_compat.h"
#include "sequenced_consumer.h"

namespace chaos {
namespace {

using Clock = std::chrono::steady_clock;

struct Pick {
  const std::string* type;
  std::string exchange, routing_key;
};

Pick pick_class(const ProducerOptions& o, bool orders_only, std::mt19937_64& rng) {
  const auto& t = o.topology;
  if (!orders_only) {
    double x = std::uniform_real_distribution<double>(0, 1)(rng);
    if ((x -= o.nack_share) < 0) return {&kind::kNack, t.exchange, "limited"};
    if ((x -= o.unroutable_share) < 0) return {&kind::kUnroutable, t.exchange, "nowhere"};
    if ((x -= o.missing_share) < 0) return {&kind::kMissing, t.missing_exchange, "order"};
    if ((x -= o.late_share) < 0) return {&kind::kLate, t.late_exchange, "late"};
  }
  return {&kind::kOrder, t.exchange, "order"};
}

}  // namespace

ProducerPool::ProducerPool(ProducerOptions options) : options_(std::move(options)) {
  {
    pqxx::connection conn(options_.dsn);
    pqxx::nontransaction tx(conn);
    tx.exec("CREATE TABLE IF NOT EXISTS \"" + options_.schema +
            "\".chaos_orders (id bigserial PRIMARY KEY, total numeric NOT NULL)");
  }
  paused_ = options_.start_paused;
  orders_only_ = options_.orders_only;
  for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this, i] { run(i); });
}

ProducerPool::~ProducerPool() { stop(); }

void ProducerPool::stop() {
  stop_ = true;
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

ProducerStats ProducerPool::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

std::unordered_set<std::string> ProducerPool::rolled_back_ids() const {
  std::lock_guard lock(mutex_);
  return rolled_back_;
}

void ProducerPool::run(int index) {
  std::mt19937_64 rng(options_.seed * 7919 + static_cast<unsigned>(index));
  outbox::OutboxWriter writer({options_.schema, {}});
  const std::string insert_order = "INSERT INTO \"" + options_.schema + "\".chaos_orders (total) VALUES ($1)";
  const double per_thread = options_.rate / options_.threads;
  std::unique_ptr<pqxx::connection> conn;
  auto next = Clock::now();
  std::uint64_t n = 0;
  while (!stop_) {
    if (paused_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      next = Clock::now();
      continue;
    }
    int count = std::uniform_int_distribution<int>(1, 4)(rng);
    bool rollback = std::uniform_real_distribution<double>(0, 1)(rng) < options_.rollback_share;
    std::vector<outbox::Message> batch;
    for (int i = 0; i < count; ++i) {
      auto pick = pick_class(options_, orders_only_, rng);
      outbox::Message m;
      m.exchange = outbox::Exchange(pick.exchange);
      m.routing_key = outbox::RoutingKey(pick.routing_key);
      m.type = outbox::MessageType(*pick.type);
      m.ordering_key = *pick.type == kind::kOrder
                           ? kSharedKeyPrefix +
                                 std::to_string(std::uniform_int_distribution<int>(0, options_.shared_keys - 1)(rng))
                           : "order-" + std::to_string(index) + "-" + std::to_string(n);
      m.payload = R"({"order":)" + std::to_string(n++) + R"(,"note":"grüße ✓ \"quoted\""})";
      m.headers["tenant"] = "acme-ü";
      m.correlation_id = "chaos-" + std::to_string(index);
      // Some are scheduled a little ahead (deliver_at): published then, never before,
      // through the same kills and restarts (ledger_check).
      if (std::uniform_real_distribution<double>(0, 1)(rng) < 0.05)
        m.deliver_after = std::chrono::milliseconds(std::uniform_int_distribution<int>(100, 3000)(rng));
      batch.push_back(std::move(m));
    }
    // Keys in one order in every transaction: two transactions writing the same keys
    // in opposite orders would deadlock on their sequence counters (migration 0016).
    std::stable_sort(batch.begin(), batch.end(), [](const outbox::Message& a, const outbox::Message& b) {
      return a.ordering_key < b.ordering_key;
    });
    std::vector<outbox::MessageId> ids;
    bool committing = false;
    try {
      if (!conn || !conn->is_open()) conn = std::make_unique<pqxx::connection>(options_.dsn);
      pqxx::work tx(*conn);
      outbox::pgx::exec_params0(tx, insert_order, count * 10);
      ids = writer.enqueue_batch(tx, batch);
      if (rollback) {
        tx.abort();
        std::lock_guard lock(mutex_);
        stats_.rolled_back_messages += ids.size();
        for (const auto& id : ids) rolled_back_.insert(id.to_string());
      } else {
        committing = true;
        tx.commit();
        std::lock_guard lock(mutex_);
        stats_.committed_messages += ids.size();
      }
    } catch (const std::exception&) {
      std::lock_guard lock(mutex_);
      ++stats_.errors;
      if (committing) stats_.in_doubt_messages += ids.size();
      conn.reset();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    next += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(count / per_thread));
    auto now = Clock::now();
    if (next < now - std::chrono::seconds(1)) next = now;  // after an outage: no burst
    std::this_thread::sleep_until(next);
  }
}

}  // namespace chaos
