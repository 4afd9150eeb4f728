#pragma once
// BrokerEvent: what the broker tells a publishing relay, decoded from AMQP frames.

#include <cstdint>
#include <string>

namespace relay {

struct BrokerEvent {
  enum class Kind {
    kAck,               // basic.ack: the broker took responsibility up to `tag`
    kNack,              // basic.nack: the broker refused; republish later
    kReturn,            // basic.return: unroutable (mandatory); matched by message id
    kChannelClosed,     // the broker closed the channel (e.g. 404 no exchange)
    kConnectionClosed,  // connection.close from the broker, or a socket error
  };
  Kind kind;
  std::uint64_t tag = 0;   // ack/nack
  bool multiple = false;   // ack/nack: settles every outstanding tag <= tag
  std::string message_id;  // return
  std::string reason;      // return/close: reply code and text, one line
  int reply_code = 0;      // channel/connection close: the AMQP reply code (0: none, a socket error)
  // kChannelClosed: the broker closed the whole connection with reply_code and the
  // publisher reconnected at once (a new connection, a new channel). RabbitMQ 4.0
  // answers some messages with a connection-level close (541 INTERNAL_ERROR for a
  // 404 whose reply text it cannot cut), so one message can end the connection.
  bool connection_level = false;
};

}  // namespace relay
