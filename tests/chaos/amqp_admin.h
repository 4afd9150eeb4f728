#pragma once
// AmqpAdmin: declares the chaos run's exchanges and queues on its private broker.

#include <cstdint>
#include <string>

#include "amqp_test_client.h"

namespace chaos {

// Names of what the chaos run declares. Every message class has its own type.
struct Topology {
  std::string exchange = "chaos_x";                  // direct, durable
  std::string queue = "chaos_q";                     // bound with "order" and "late"
  std::string limited_queue = "chaos_limited";       // x-max-length, overflow reject-publish
  std::string late_exchange = "chaos_late_x";        // created in the middle of the run
  std::string missing_exchange = "chaos_missing_x";  // never created
  int limited_max_length = 20;
  // The main queue as a quorum queue (x-queue-type: quorum), for a cluster run.
  bool quorum = false;
};

// One short-lived AMQP connection for declarations (a testenv::AmqpTestClient with
// a 5 s connect/RPC timeout). Throws std::runtime_error ("admin: ...") when the
// broker refuses. Not thread-safe; not copyable.
class AmqpAdmin {
 public:
  AmqpAdmin(const std::string& host, std::uint16_t port);
  ~AmqpAdmin();
  AmqpAdmin(const AmqpAdmin&) = delete;
  AmqpAdmin& operator=(const AmqpAdmin&) = delete;

  // The exchange, both queues and their bindings (idempotent).
  void declare(const Topology& t);
  // The late exchange (fanout-free direct) bound to the main exchange's queue.
  void declare_late_exchange(const Topology& t);
  // Messages ready in `queue` now.
  std::uint32_t ready(const std::string& queue);

 private:
  testenv::AmqpTestClient client_;
};

}  // namespace chaos
