#include "ledger_consumer.h"

#include <optional>
#include <stdexcept>

#include "amqp_test_client.h"

namespace chaos {

LedgerConsumer::LedgerConsumer(ConsumerOptions options, Ledger& ledger)
    : options_(std::move(options)), ledger_(ledger) {
  delay_ms_ = static_cast<int>(options_.per_message_delay.count());
  thread_ = std::thread([this] { run(); });
}

LedgerConsumer::~LedgerConsumer() {
  stop_ = true;
  thread_.join();
}

void LedgerConsumer::run() {
  bool first = true;
  while (!stop_) {
    if (!first) ++reconnects_;
    first = false;
    consume_once();
    for (int i = 0; i < 5 && !stop_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void LedgerConsumer::consume_once() {
  testenv::AmqpEndpoint endpoint;  // guest/guest, vhost "/"
  endpoint.host = options_.host;
  endpoint.port = options_.ports.empty() ? options_.port : options_.ports[next_port_++ % options_.ports.size()];
  endpoint.timeout = std::chrono::seconds(2);
  std::optional<testenv::AmqpTestClient> client;
  try {
    client.emplace(endpoint, "ledger consumer");
  } catch (const std::runtime_error&) {
    return;  // the broker is down or refusing: run() tries again
  }
  struct Dropper {  // dropped without connection.close, as before (it is often broken by then)
    testenv::AmqpTestClient& c;
    ~Dropper() { c.abandon(); }
  } dropper{*client};
  amqp_connection_state_t conn = client->conn();
  auto ok = [&] { return client->last_ok(); };
  amqp_basic_qos(conn, 1, 0, static_cast<std::uint16_t>(options_.prefetch), 0);
  if (!ok()) return;
  amqp_basic_consume(conn, 1, amqp_cstring_bytes(options_.queue.c_str()), amqp_empty_bytes, 0,
                     /*no_ack=*/0, 0, amqp_empty_table);
  if (!ok()) return;
  while (!stop_) {
    if (paused_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    amqp_maybe_release_buffers(conn);
    amqp_envelope_t env;
    timeval wait{0, 200000};
    auto r = amqp_consume_message(conn, &env, &wait, 0);
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && r.library_error == AMQP_STATUS_TIMEOUT) continue;
    if (r.reply_type != AMQP_RESPONSE_NORMAL) return;
    const auto& p = env.message.properties;
    if (p._flags & AMQP_BASIC_MESSAGE_ID_FLAG)
      ledger_.record(std::string(static_cast<const char*>(p.message_id.bytes), p.message_id.len), env.redelivered != 0);
    else ledger_.record("(no message id)", env.redelivered != 0);
    int rc = amqp_basic_ack(conn, 1, env.delivery_tag, 0);
    amqp_destroy_envelope(&env);
    if (rc != AMQP_STATUS_OK) return;
    if (int d = delay_ms_; d > 0) std::this_thread::sleep_for(std::chrono::milliseconds(d));
  }
}

}  // namespace chaos
