#pragma once
// Test support: connection settings for the real local servers, unique names,
// and scoped resources that clean up after each test.

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "amqp_test_client.h"

namespace testenv {

// From OUTBOX_PG_DSN / OUTBOX_AMQP_URI (deploy/local/servers.sh env). Throws when
// unset: a test that needs a server fails loudly rather than skipping.
std::string pg_dsn();
std::string amqp_uri();
// amqp_uri() as an endpoint for AmqpTestClient (the shared local broker).
AmqpEndpoint shared_amqp_endpoint();
// The shared servers' ports, and pg_dsn() / amqp_uri() pointed at another local
// port instead (a TcpProxy's in front of them).
int pg_port();
int amqp_port();
std::string pg_dsn_via(int port);
std::string amqp_uri_via(int port);

// prefix_<pid>_<counter>_<random>: unique across processes and runs, lower case.
std::string unique_name(const std::string& prefix);

// A schema migrated with the outbox tables, dropped (CASCADE) on destruction.
// With `version`, migrated only up to that migration (rows written before a later
// one, e.g. rows 0007's checks would refuse); migrate() applies the rest.
class ScopedSchema {
 public:
  explicit ScopedSchema(const std::string& prefix = "t", std::optional<int> version = std::nullopt);
  ~ScopedSchema();
  ScopedSchema(const ScopedSchema&) = delete;
  ScopedSchema& operator=(const ScopedSchema&) = delete;
  const std::string& name() const { return name_; }
  void migrate();

 private:
  std::string name_;
};

// A message as a consumer sees it.
struct Received {
  std::string body;
  std::string message_id;
  std::string type;
  std::string content_type;
  std::string correlation_id;
  std::uint64_t timestamp = 0;
  bool persistent = false;
  std::map<std::string, std::string> headers;  // string values; 64-bit integers (x-outbox-id, -seq) as decimal
};

// A test's own exchange (direct) and queue bound with `routing_key`, deleted on
// destruction. Consumes with its own connection. With `alternate_exchange`, the
// exchange routes what it cannot route to that exchange (argument alternate-exchange).
class TestBroker {
 public:
  explicit TestBroker(const std::string& prefix = "t", const std::string& routing_key = "rk",
                      const std::string& alternate_exchange = "");
  ~TestBroker();
  TestBroker(const TestBroker&) = delete;
  TestBroker& operator=(const TestBroker&) = delete;

  const std::string& exchange() const { return exchange_; }
  const std::string& queue() const { return queue_; }
  const std::string& routing_key() const { return routing_key_; }

  // Receives until `count` messages arrived or nothing arrived for `idle`.
  std::vector<Received> receive(std::size_t count, std::chrono::milliseconds idle);
  // Messages ready in the queue now (queue.declare passive).
  std::uint32_t ready_count();

 private:
  void start_consuming();
  std::optional<AmqpTestClient> client_;  // declares, then consumes
  std::string exchange_, queue_, routing_key_;
  bool consuming_ = false;
};

// Whether a TCP port on 127.0.0.1 can be bound now (for private servers' ports).
bool port_free(int port);
// `s` percent-encoded for a URI (unreserved characters kept).
std::string percent_encoded(const std::string& s);
// `s` as a single-quoted libpq keyword value (backslash and quote escaped).
std::string single_quoted(const std::string& s);

// Polls `done` every `poll` until it holds or `limit` passes; returns its last
// value. The one way tests wait for something another process or thread does.
bool eventually(std::chrono::milliseconds limit, const std::function<bool()>& done,
                std::chrono::milliseconds poll = std::chrono::milliseconds(20));
// The first 4-byte piece of `secret` found in `text`, or "" when there is none
// (what SecretScrubber removes: no output may hold any of them).
std::string leaked_fragment(const std::string& text, const std::string& secret);
// How many lines of `text` contain `needle` (log assertions).
int lines_with(const std::string& text, const std::string& needle);

// A SQL helper: runs one statement and returns the first column of the first row.
std::string sql_value(const std::string& sql);
void sql_exec(const std::string& sql);
// Runs one statement expected to fail: "SQLSTATE: message", or "nothing raised".
std::string sql_error_of(const std::string& sql);

}  // namespace testenv
