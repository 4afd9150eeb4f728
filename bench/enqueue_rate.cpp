// Producer SDK enqueue rate: one business transaction per message, or a batch.
#include <atomic>
#include <chrono>
#include <mutex>
#include <pqxx/pqxx>
#include <thread>

#include "measurements.h"
#include "outbox/outbox_writer.h"

namespace bench {

double measure_enqueue_rate(BenchEnv& env, int connections, int per_tx, double seconds, int bytes, EnqueueKeys keys) {
  using Clock = std::chrono::steady_clock;
  const auto duration = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::atomic<long> total{0};
  std::atomic<bool> failed{false};
  std::string error;
  std::mutex error_mutex;
  const std::string payload = BenchEnv::random_payload(bytes);
  const auto start = Clock::now();
  std::atomic<long> next_key{0};
  // The key of the next message; "" without keys.
  const auto key_for = [&]() -> std::string {
    switch (keys) {
      case EnqueueKeys::kNone: return "";
      case EnqueueKeys::kNewEach: return "new-" + std::to_string(next_key++);
      case EnqueueKeys::kThousand: return "k" + std::to_string(next_key++ % 1000);
      case EnqueueKeys::kOneShared: return "shared";
    }
    return "";
  };
  std::vector<std::thread> threads;
  for (int c = 0; c < connections; ++c) {
    threads.emplace_back([&] {
      try {
        pqxx::connection conn(env.pg_dsn());
        outbox::OutboxWriter writer({env.schema(), {}});
        std::vector<outbox::Message> batch(static_cast<std::size_t>(per_tx));
        for (auto& m : batch) {
          m.exchange = outbox::Exchange(env.exchange());
          m.routing_key = outbox::RoutingKey(env.routing_key());
          m.type = outbox::MessageType("BenchEvent");
          m.payload = payload;
        }
        long done = 0;
        while (Clock::now() - start < duration && !failed) {
          for (auto& m : batch) m.ordering_key = key_for();
          pqxx::work tx(conn);
          if (per_tx == 1) writer.enqueue(tx, batch.front());
          else writer.enqueue_batch(tx, batch);
          tx.commit();
          done += per_tx;
        }
        total += done;
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(error_mutex);
        error = e.what();
        failed = true;
      }
    });
  }
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  if (failed) throw BenchError("enqueue rate: " + error);
  env.reset();
  return static_cast<double>(total) / elapsed;
}

}  // namespace bench
