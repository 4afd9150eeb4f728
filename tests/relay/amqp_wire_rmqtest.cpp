// outbox::content_header_frame_bytes against rabbitmq-c itself: a message whose
// computed size is exactly the negotiated frame_max is sent and confirmed; one byte
// more and rabbitmq-c cannot encode it. So the relay's and the SDK's check refuse
// exactly what cannot be sent, nothing more.
#include <doctest/doctest.h>

#include "outbox/rabbitmq_c.h"

#include <string>
#include <vector>

#include "outbox/amqp_wire.h"
#include "test_env.h"

namespace {

amqp_bytes_t bytes_of(const std::string& s) { return amqp_bytes_t{s.size(), const_cast<char*>(s.data())}; }

struct Connection {
  explicit Connection(int frame_max) {
    std::string uri = testenv::amqp_uri();
    amqp_connection_info info;
    REQUIRE(amqp_parse_url(uri.data(), &info) == AMQP_STATUS_OK);
    conn = amqp_new_connection();
    auto* socket = amqp_tcp_socket_new(conn);
    REQUIRE(amqp_socket_open(socket, info.host, info.port) == AMQP_STATUS_OK);
    REQUIRE(amqp_login(conn, info.vhost, 0, frame_max, 0, AMQP_SASL_METHOD_PLAIN, info.user, info.password)
                .reply_type == AMQP_RESPONSE_NORMAL);
    amqp_channel_open(conn, 1);
    REQUIRE(amqp_get_rpc_reply(conn).reply_type == AMQP_RESPONSE_NORMAL);
  }
  ~Connection() { amqp_destroy_connection(conn); }
  amqp_connection_state_t conn;
};

// Publishes the message the relay would send (same properties and header table).
int publish(amqp_connection_state_t conn, const std::vector<std::pair<std::string, std::string>>& headers) {
  const std::string content_type = "application/json", message_id = "0190f5a0-0000-7000-8000-000000000001",
                    type = "OrderPlaced", correlation = "corr-1", queue = "amq.rabbitmq.nonexistent-routing";
  std::vector<amqp_table_entry_t> entries(1);
  entries[0].key = amqp_cstring_bytes("x-outbox-id");
  entries[0].value.kind = AMQP_FIELD_KIND_I64;
  entries[0].value.value.i64 = 42;
  for (const auto& [name, value] : headers) {
    amqp_table_entry_t e;
    e.key = bytes_of(name);
    e.value.kind = AMQP_FIELD_KIND_UTF8;
    e.value.value.bytes = bytes_of(value);
    entries.push_back(e);
  }
  amqp_basic_properties_t p{};
  p._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG |
             AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_TIMESTAMP_FLAG | AMQP_BASIC_HEADERS_FLAG |
             AMQP_BASIC_CORRELATION_ID_FLAG;
  p.content_type = bytes_of(content_type);
  p.delivery_mode = 2;
  p.message_id = bytes_of(message_id);
  p.type = bytes_of(type);
  p.timestamp = 1700000000;
  p.correlation_id = bytes_of(correlation);
  p.headers = amqp_table_t{static_cast<int>(entries.size()), entries.data()};
  return amqp_basic_publish(conn, 1, amqp_cstring_bytes(""), bytes_of(queue), 0, 0, &p, amqp_cstring_bytes("{}"));
}

std::size_t computed(const std::vector<std::pair<std::string, std::string>>& headers) {
  const std::string content_type = "application/json", message_id = "0190f5a0-0000-7000-8000-000000000001",
                    type = "OrderPlaced", correlation = "corr-1";
  return outbox::content_header_frame_bytes({&content_type, &message_id, &type, &correlation, &headers});
}

}  // namespace

TEST_CASE("a content header of exactly frame_max bytes is sent and one byte more cannot be") {
  const int frame_max = 8192;
  std::vector<std::pair<std::string, std::string>> headers{{"a", std::string(100, 'v')}, {"b", ""}};
  headers[1].second.assign(frame_max - computed(headers), 'w');
  REQUIRE(computed(headers) == static_cast<std::size_t>(frame_max));
  {
    Connection c(frame_max);
    CHECK(publish(c.conn, headers) == AMQP_STATUS_OK);
  }
  headers[1].second.push_back('w');
  REQUIRE(computed(headers) == static_cast<std::size_t>(frame_max) + 1);
  Connection c(frame_max);
  CHECK(publish(c.conn, headers) != AMQP_STATUS_OK);
}
