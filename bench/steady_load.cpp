#include "steady_load.h"

#include <cmath>
#include <pqxx/pqxx>

#include "outbox/outbox_writer.h"

namespace bench {

std::int64_t unix_us(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

SteadyPlan plan_steady(long rate, int per_tx) {
  SteadyPlan p;
  p.per_tx = per_tx > 0 ? per_tx : static_cast<int>(std::ceil(rate / 1000.0));
  p.tx_rate = static_cast<double>(rate) / p.per_tx;
  p.producers = static_cast<int>(std::ceil(p.tx_rate / 250.0));
  return p;
}

void produce_steady(BenchEnv& env, pqxx::connection& conn, const ProducerRun& run, const std::string& payload,
                    const OnCommit& on_commit, const std::atomic<bool>* stop) {
  outbox::OutboxWriter writer({env.schema(), {}});
  outbox::Message m;
  m.exchange = outbox::Exchange(env.exchange());
  m.routing_key = outbox::RoutingKey(env.routing_key());
  m.type = outbox::MessageType("BenchEvent");
  m.payload = payload;
  const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(1.0 / run.tx_per_second));
  const auto start = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(interval * run.phase);
  std::vector<outbox::Message> group(static_cast<std::size_t>(run.per_tx), m);
  std::vector<std::string> ids;
  long n = run.key_offset;
  for (long k = 0;; ++k) {
    const auto at = start + k * interval;
    if (at - start >= run.length || (stop && *stop)) break;
    std::this_thread::sleep_until(at);
    if (run.keys > 0)
      for (auto& g : group) g.ordering_key = "k" + std::to_string(n++ % run.keys);
    pqxx::work tx(conn);
    auto committed_ids = run.per_tx == 1 ? std::vector<outbox::MessageId>{writer.enqueue(tx, group.front())}
                                         : writer.enqueue_batch(tx, group);
    tx.commit();
    const auto committed = unix_us(std::chrono::system_clock::now());
    ids.clear();
    for (const auto& id : committed_ids) ids.push_back(id.to_string());
    on_commit(ids, committed);
  }
}

DeliveryStream::DeliveryStream(BenchEnv& env, std::function<void(Delivery&&)> on_delivery)
    : client_(env.amqp_uri()), on_delivery_(std::move(on_delivery)) {
  client_.consume(env.queue());
  thread_ = std::thread([this] { loop(); });
}

void DeliveryStream::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void DeliveryStream::check() const {
  if (failed_) throw BenchError("consumer: " + error_);
}

void DeliveryStream::loop() {
  try {
    while (!stop_)
      if (auto d = client_.next_delivery(std::chrono::milliseconds(50))) on_delivery_(std::move(*d));
  } catch (const std::exception& e) {
    error_ = e.what();
    failed_ = true;
  }
}

}  // namespace bench
