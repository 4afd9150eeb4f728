#pragma once
// HostileScenario: one hostile row in the middle of a backlog of good rows, drained
// by real relays into the test's queue, with what a user relies on measured at the
// consumer and in the outbox table.

#include <chrono>
#include <cstddef>
#include <string>

#include "hostile_kinds.h"

namespace hostile {

struct ScenarioOptions {
  std::string ordering = "unordered";           // relay.ordering
  std::string key_failure_policy = "park_key";  // per_key only
  int relays = 2;
  // Good rows before and after the hostile row (by id). See hostile_rows_rmqtest.cpp
  // for why the suite uses more than 500 each.
  int rows_per_side = 500;
  int keys = 50;  // good rows cycle over key-0..key-(keys-1); the hostile row has key-3
  int max_attempts = 3;
  int publish_window = 200;
  std::chrono::seconds limit{15};
  // false: the same backlog without the hostile row (a control run, for the rates).
  bool hostile_row = true;  // give up waiting for the drain and the park after this
};

struct ScenarioResult {
  // The hostile row.
  int attempts = 0;
  bool parked = false;
  std::string last_error;
  bool in_dead_list = false;
  // Good rows: expected to arrive (all, less the ones park_key holds back).
  std::size_t good_expected = 0, good_received = 0, missing = 0;
  std::size_t extra_copies = 0;        // deliveries beyond the first of a good row
  std::size_t hostile_deliveries = 0;  // copies of the hostile row at the consumer
  // park_key: rows of the hostile row's key behind it.
  std::size_t held_back = 0, held_published = 0, held_received = 0;
  double longest_stall_ms = 0;  // longest gap between consecutive good-row arrivals
  // Good-row arrival rates (msg/s) in two equal windows: before the relays reached
  // the hostile row's place in the backlog, and after it was parked; measurable when
  // both windows are long enough to hold a few batches. In between (isolation_ms),
  // the relays isolate and retry the row: rate_during is the good-row rate then.
  bool rate_measurable = false;
  double rate_before = 0, rate_after = 0, rate_window_ms = 0;
  double isolation_ms = 0, rate_during = 0;
  double drain_s = 0;     // commit of the backlog to the last good arrival
  double scenario_s = 0;  // the whole scenario, setup to teardown
  int relays_running = 0;
  std::size_t channel_closes_logged = 0;  // log lines of all relays naming a channel close
  std::string relay_logs;                 // tails, for a failure's message
};

// Runs one scenario on a fresh schema and queue against the servers in
// OUTBOX_PG_DSN / OUTBOX_AMQP_URI. Blocking; not thread-safe (one at a time).
// REQUIRES: `internal_exchange` exists on the broker, declared internal.
class HostileScenario {
 public:
  HostileScenario(std::string kind_name, std::string internal_exchange, ScenarioOptions options);
  ScenarioResult run();
  // The kind as run (built for the scenario's own exchange and queue by run()).
  const HostileKind& kind() const { return kind_; }

 private:
  std::string relay_yaml(const std::string& schema) const;
  std::string kind_name_, internal_exchange_;
  HostileKind kind_;
  ScenarioOptions options_;
};

}  // namespace hostile
