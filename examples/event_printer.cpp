// event-printer: an example consumer that shows events arriving in a queue.
//
//   event-printer --declare [--quorum]      declare exchange "orders", queue "order-events"
//                                           (--quorum: a quorum queue, for a RabbitMQ cluster)
//   event-printer --expect N [--idle-ms M]  consume until N distinct events or M ms of silence
//
// Reads OUTBOX_AMQP_URI. Prints the first few events and a summary line:
// received, distinct message ids, redeliveries seen.

// rabbitmq-c 0.12+ (Debian 13) moved its headers under rabbitmq-c/; 0.11 (Debian 12) has them at the top.
#if __has_include(<rabbitmq-c/amqp.h>)
#include <rabbitmq-c/amqp.h>
#include <rabbitmq-c/tcp_socket.h>
#else
#include <amqp.h>
#include <amqp_tcp_socket.h>
#endif

#include <iostream>
#include <set>
#include <string>

namespace {

void check(amqp_rpc_reply_t r, const char* what) {
  if (r.reply_type != AMQP_RESPONSE_NORMAL) throw std::runtime_error(std::string(what) + " failed");
}

std::string str(amqp_bytes_t b) { return std::string(static_cast<const char*>(b.bytes), b.len); }

amqp_connection_state_t connect(const char* uri_env) {
  std::string uri = uri_env;
  amqp_connection_info info;
  amqp_default_connection_info(&info);
  if (amqp_parse_url(uri.data(), &info) != AMQP_STATUS_OK)
    throw std::runtime_error("OUTBOX_AMQP_URI is not a valid URI");
  auto conn = amqp_new_connection();
  if (amqp_socket_open(amqp_tcp_socket_new(conn), info.host, info.port) != AMQP_STATUS_OK)
    throw std::runtime_error("cannot connect to the broker");
  check(amqp_login(conn, info.vhost, 0, 131072, 30, AMQP_SASL_METHOD_PLAIN, info.user, info.password), "login");
  amqp_channel_open(conn, 1);
  check(amqp_get_rpc_reply(conn), "channel.open");
  return conn;
}

// `quorum`: x-queue-type quorum (replicated over a cluster's nodes); otherwise a
// classic queue, fine on a single development node.
void declare(amqp_connection_state_t conn, bool quorum) {
  amqp_exchange_declare(conn, 1, amqp_cstring_bytes("orders"), amqp_cstring_bytes("topic"), 0, 1, 0, 0,
                        amqp_empty_table);
  check(amqp_get_rpc_reply(conn), "exchange.declare");
  amqp_table_entry_t type;
  type.key = amqp_cstring_bytes("x-queue-type");
  type.value.kind = AMQP_FIELD_KIND_UTF8;
  type.value.value.bytes = amqp_cstring_bytes("quorum");
  amqp_queue_declare(conn, 1, amqp_cstring_bytes("order-events"), 0, 1, 0, 0,
                     quorum ? amqp_table_t{1, &type} : amqp_empty_table);
  check(amqp_get_rpc_reply(conn), "queue.declare");
  amqp_queue_bind(conn, 1, amqp_cstring_bytes("order-events"), amqp_cstring_bytes("orders"),
                  amqp_cstring_bytes("order.#"), amqp_empty_table);
  check(amqp_get_rpc_reply(conn), "queue.bind");
}

}  // namespace

int main(int argc, char** argv) {
  bool declare_only = false, quorum = false;
  long expect = 0, idle_ms = 5000;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--declare") declare_only = true;
    else if (a == "--quorum") quorum = true;
    else if (a == "--expect" && i + 1 < argc) expect = std::atol(argv[++i]);
    else if (a == "--idle-ms" && i + 1 < argc) idle_ms = std::atol(argv[++i]);
    else {
      std::cerr << "event-printer: unknown argument '" << a << "'\n";
      return 2;
    }
  }
  const char* uri = std::getenv("OUTBOX_AMQP_URI");
  if (!uri) {
    std::cerr << "event-printer: OUTBOX_AMQP_URI is not set\n";
    return 2;
  }
  try {
    auto conn = connect(uri);
    declare(conn, quorum);
    if (declare_only) {
      std::cout << "event-printer: exchange 'orders' -> queue 'order-events' (order.#) declared\n";
      return 0;
    }
    amqp_basic_qos(conn, 1, 0, 500, 0);
    amqp_basic_consume(conn, 1, amqp_cstring_bytes("order-events"), amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
    check(amqp_get_rpc_reply(conn), "basic.consume");
    std::set<std::string> ids;
    long received = 0;
    while (expect == 0 || static_cast<long>(ids.size()) < expect) {
      amqp_envelope_t env;
      amqp_maybe_release_buffers(conn);
      timeval tv{idle_ms / 1000, (idle_ms % 1000) * 1000};
      auto r = amqp_consume_message(conn, &env, &tv, 0);
      if (r.reply_type != AMQP_RESPONSE_NORMAL) break;  // silence (or a closed link): stop
      ++received;
      std::string id = str(env.message.properties.message_id);
      if (ids.insert(id).second && ids.size() <= 5)
        std::cout << "  received " << str(env.message.properties.type) << " " << id << " " << str(env.message.body)
                  << "\n";
      amqp_basic_ack(conn, 1, env.delivery_tag, 0);
      amqp_destroy_envelope(&env);
    }
    std::cout << "event-printer: received " << received << " messages, " << ids.size() << " distinct message ids, "
              << received - static_cast<long>(ids.size()) << " redeliveries\n";
    amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(conn);
    return (expect == 0 || static_cast<long>(ids.size()) >= expect) ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "event-printer: " << e.what() << "\n";
    return 1;
  }
}
