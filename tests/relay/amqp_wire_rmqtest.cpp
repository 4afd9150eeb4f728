// outbox::content_header_frame_bytes against rabbitmq-c itself: a message whose
// computed size is exactly the negotiated frame_max is sent and confirmed; one byte
// more and rabbitmq-c cannot encode it. So the relay's and the SDK's check refuse
// exactly what cannot be sent, nothing more.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "amqp_test_client.h"
#include "outbox/amqp_wire.h"
#include "test_env.h"

namespace {

using testenv::amqp_bytes_of;

// The shared broker with `frame_max` proposed at login.
testenv::AmqpEndpoint endpoint(int frame_max) {
  auto e = testenv::shared_amqp_endpoint();
  e.frame_max = frame_max;
  return e;
}

using Headers = std::vector<std::pair<std::string, std::string>>;

// Publishes the message the relay would send (same properties and header table; with
// a non-empty `key`, the relay's x-outbox-key and x-outbox-seq entries too).
int publish(amqp_connection_state_t conn, const Headers& headers, const std::string& key = "") {
  const std::string content_type = "application/json", message_id = "0190f5a0-0000-7000-8000-000000000001",
                    type = "OrderPlaced", correlation = "corr-1", queue = "amq.rabbitmq.nonexistent-routing";
  std::vector<amqp_table_entry_t> entries(1);
  entries[0].key = amqp_cstring_bytes("x-outbox-id");
  entries[0].value.kind = AMQP_FIELD_KIND_I64;
  entries[0].value.value.i64 = 42;
  if (!key.empty()) {
    entries.resize(3);
    entries[1].key = amqp_cstring_bytes(outbox::kKeyHeader);
    entries[1].value.kind = AMQP_FIELD_KIND_UTF8;
    entries[1].value.value.bytes = amqp_bytes_of(key);
    entries[2].key = amqp_cstring_bytes(outbox::kKeySeqHeader);
    entries[2].value.kind = AMQP_FIELD_KIND_I64;
    entries[2].value.value.i64 = INT64_MAX;
  }
  for (const auto& [name, value] : headers) {
    amqp_table_entry_t e;
    e.key = amqp_bytes_of(name);
    e.value.kind = AMQP_FIELD_KIND_UTF8;
    e.value.value.bytes = amqp_bytes_of(value);
    entries.push_back(e);
  }
  amqp_basic_properties_t p{};
  p._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG |
             AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_TIMESTAMP_FLAG | AMQP_BASIC_HEADERS_FLAG |
             AMQP_BASIC_CORRELATION_ID_FLAG;
  p.content_type = amqp_bytes_of(content_type);
  p.delivery_mode = 2;
  p.message_id = amqp_bytes_of(message_id);
  p.type = amqp_bytes_of(type);
  p.timestamp = 1700000000;
  p.correlation_id = amqp_bytes_of(correlation);
  p.headers = amqp_table_t{static_cast<int>(entries.size()), entries.data()};
  return amqp_basic_publish(conn, 1, amqp_cstring_bytes(""), amqp_bytes_of(queue), 0, 0, &p, amqp_cstring_bytes("{}"));
}

std::size_t computed(const Headers& headers, const std::string& key = "") {
  const std::string content_type = "application/json", message_id = "0190f5a0-0000-7000-8000-000000000001",
                    type = "OrderPlaced", correlation = "corr-1";
  return outbox::content_header_frame_bytes({&content_type, &message_id, &type, &correlation, &headers, &key});
}

}  // namespace

TEST_CASE("a content header of exactly frame_max bytes is sent and one byte more cannot be") {
  const int frame_max = 8192;
  // Without an ordering key, and with the longest one (255 bytes) and its sequence.
  for (const std::string& key : {std::string(), std::string(255, 'k')}) {
    INFO("key of " << key.size() << " bytes");
    Headers headers{{"a", std::string(100, 'v')}, {"b", ""}};
    headers[1].second.assign(frame_max - computed(headers, key), 'w');
    REQUIRE(computed(headers, key) == static_cast<std::size_t>(frame_max));
    {
      testenv::AmqpTestClient c(endpoint(frame_max));
      CHECK(publish(c.conn(), headers, key) == AMQP_STATUS_OK);
    }
    headers[1].second.push_back('w');
    REQUIRE(computed(headers, key) == static_cast<std::size_t>(frame_max) + 1);
    testenv::AmqpTestClient c(endpoint(frame_max));
    CHECK(publish(c.conn(), headers, key) != AMQP_STATUS_OK);
  }
}
