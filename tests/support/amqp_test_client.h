#pragma once
// AmqpTestClient: the one rabbitmq-c connection tests (and the chaos driver) open
// themselves, to declare, bind, delete, inspect, publish or consume outside the
// code under test. No doctest here: the chaos driver links it too.

#include "outbox/rabbitmq_c.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace testenv {

// Where a test client connects and how long it waits.
struct AmqpEndpoint {
  std::string host = "127.0.0.1";
  int port = 5672;
  std::string vhost = "/";
  std::string user = "guest";
  std::string password = "guest";
  int frame_max = 131072;  // proposed at login (the broker may lower it)
  // Zero: connect and every RPC block (the local servers answer at once). Otherwise
  // the connect, the login handshake and every RPC give up after this long.
  std::chrono::milliseconds timeout{0};
};

// The endpoint an amqp:// URI names (rabbitmq-c's defaults for what it leaves out,
// user and password percent-decoded). Throws std::runtime_error("bad AMQP URI").
AmqpEndpoint amqp_endpoint_of(const std::string& uri);

// A queue's counts from queue.declare passive.
struct QueueCounts {
  std::uint32_t ready = 0;  // messages waiting (not delivered, not unacked)
  std::uint32_t consumers = 0;
};

// One AMQP connection with channel 1 open, logged in with PLAIN.
// Contract:
//  - The constructor connects, logs in and opens channel 1, or throws
//    std::runtime_error("<label>: cannot connect to the broker" | "<label>: login
//    failed" | "<label>: channel.open failed") and leaves nothing open.
//  - The destructor sends connection.close and frees the connection, unless
//    abandon() dropped it first (as a process that died: no close, no ack).
//  - The declare/bind/publish helpers throw std::runtime_error("<label>: <method>
//    failed") when the broker refuses (the channel is then closed: later calls on
//    it fail too). delete_* are best effort and never throw.
// Not thread-safe; not copyable.
class AmqpTestClient {
 public:
  explicit AmqpTestClient(const AmqpEndpoint& endpoint, std::string label = "test broker");
  ~AmqpTestClient();
  AmqpTestClient(const AmqpTestClient&) = delete;
  AmqpTestClient& operator=(const AmqpTestClient&) = delete;

  // The raw connection, for calls the helpers below do not cover (channel 1).
  amqp_connection_state_t conn() const { return conn_; }

  // Whether the last RPC on the connection succeeded (amqp_get_rpc_reply).
  bool last_ok();
  // Throws std::runtime_error("<label>: <what> failed") unless the last RPC succeeded.
  void check(const std::string& what);

  void declare_exchange(const std::string& name, const std::string& type, bool durable, bool internal = false,
                        amqp_table_t arguments = amqp_empty_table);
  void declare_queue(const std::string& name, bool durable, amqp_table_t arguments = amqp_empty_table);
  void bind(const std::string& queue, const std::string& exchange, const std::string& routing_key);
  // queue.declare passive: the queue's counts, or nullopt when it does not exist
  // (the broker then closed channel 1: use a fresh client for anything more).
  std::optional<QueueCounts> queue_counts(const std::string& queue);
  void delete_queue(const std::string& queue);
  void delete_exchange(const std::string& exchange);

  // Frees the connection now without connection.close; later calls are invalid.
  void abandon();

 private:
  amqp_connection_state_t conn_ = nullptr;
  std::string label_;
};

// `s` as rabbitmq-c bytes (no copy: valid while `s` is).
inline amqp_bytes_t amqp_bytes_of(const std::string& s) { return amqp_bytes_t{s.size(), const_cast<char*>(s.data())}; }

}  // namespace testenv
