#include "outbox/amqp/amqp_text.h"

#include "outbox/rabbitmq_c.h"

#include <algorithm>

namespace outbox::amqp {

amqp_bytes_t bytes_of(const std::string& s) { return amqp_bytes_t{s.size(), const_cast<char*>(s.data())}; }

std::string string_of(amqp_bytes_t b) {
  return b.len ? std::string(static_cast<const char*>(b.bytes), b.len) : std::string();
}

timeval to_timeval(std::chrono::milliseconds ms) {
  ms = std::max(ms, std::chrono::milliseconds(0));
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

std::string describe(amqp_rpc_reply_t reply) {
  switch (reply.reply_type) {
    case AMQP_RESPONSE_NORMAL: return "ok";
    case AMQP_RESPONSE_NONE: return "missing RPC reply";
    case AMQP_RESPONSE_LIBRARY_EXCEPTION: return amqp_error_string2(reply.library_error);
    case AMQP_RESPONSE_SERVER_EXCEPTION:
      if (reply.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
        auto* m = static_cast<amqp_connection_close_t*>(reply.reply.decoded);
        return "connection closed by broker: " + std::to_string(m->reply_code) + " " + string_of(m->reply_text);
      }
      if (reply.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        auto* m = static_cast<amqp_channel_close_t*>(reply.reply.decoded);
        return "channel closed by broker: " + std::to_string(m->reply_code) + " " + string_of(m->reply_text);
      }
      return "broker error (method " + std::to_string(reply.reply.id) + ")";
  }
  return "unknown RPC reply";
}

AmqpError::Fields fields_of(amqp_rpc_reply_t reply) {
  AmqpError::Fields fields;
  if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) fields.status = reply.library_error;
  if (reply.reply_type != AMQP_RESPONSE_SERVER_EXCEPTION) return fields;
  if (reply.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
    auto* m = static_cast<amqp_connection_close_t*>(reply.reply.decoded);
    fields.close = {CloseScope::kConnection, m->reply_code, m->class_id, m->method_id};
  } else if (reply.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
    auto* m = static_cast<amqp_channel_close_t*>(reply.reply.decoded);
    fields.close = {CloseScope::kChannel, m->reply_code, m->class_id, m->method_id};
  }
  return fields;
}

}  // namespace outbox::amqp
