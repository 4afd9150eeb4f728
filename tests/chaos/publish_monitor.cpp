#include "publish_monitor.h"

#include <algorithm>
#include <memory>
#include <pqxx/pqxx>

#include "outbox/pqxx_compat.h"

namespace chaos {

PublishMonitor::PublishMonitor(std::string dsn, std::string schema) : dsn_(std::move(dsn)), schema_(std::move(schema)) {
  thread_ = std::thread([this] { run(); });
}

PublishMonitor::~PublishMonitor() {
  stop_ = true;
  thread_.join();
}

void PublishMonitor::run() {
  std::unique_ptr<pqxx::connection> conn;
  std::int64_t last = -1;
  const std::string sql = "SELECT count(*) FROM " + schema_ + ".outbox WHERE published_at IS NOT NULL";
  while (!stop_) {
    try {
      if (!conn) conn = std::make_unique<pqxx::connection>(dsn_ + " connect_timeout=2");
      pqxx::nontransaction tx(*conn);
      auto n = outbox::pgx::exec1(tx, sql)[0].as<std::int64_t>();
      if (n > last) {
        std::lock_guard<std::mutex> lock(mutex_);
        growth_.push_back(Clock::now());
      }
      last = n;
    } catch (const std::exception&) {
      conn.reset();  // a server gone (failover): reconnect on the next round
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

bool PublishMonitor::grew_since(Clock::time_point t) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !growth_.empty() && growth_.back() > t;
}

double PublishMonitor::longest_pause(Clock::time_point from, Clock::time_point to) const {
  std::lock_guard<std::mutex> lock(mutex_);
  double longest = 0;
  Clock::time_point prev = from;
  for (auto t : growth_) {
    if (t <= from) continue;
    if (t > to) {
      longest = std::max(longest, std::chrono::duration<double>(to - prev).count());
      return longest;
    }
    longest = std::max(longest, std::chrono::duration<double>(t - prev).count());
    prev = t;
  }
  return std::max(longest, std::chrono::duration<double>(to - prev).count());
}

}  // namespace chaos
