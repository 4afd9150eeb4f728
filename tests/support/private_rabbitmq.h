#pragma once
// PrivateRabbitMq: a RabbitMQ node of a test binary's own, for settings the shared
// broker must not get (a low max_message_size, internal exchanges).

#include <string>

namespace testenv {

// Starts a RabbitMQ node (deploy/local/servers.sh, only its RabbitMQ half) in a
// fresh folder on a free port of the 4xxxx range, and points OUTBOX_AMQP_URI at it
// for this process and the relays it starts (PostgreSQL stays the shared one). The
// destructor stops the node by its pid and removes the folder.
//
// Thread safety: none; construct once per binary (e.g. a function-local static)
// before any relay or TestBroker connects.
// REQUIRES: `servers_sh` is the path of deploy/local/servers.sh; run as root or as a
// user that may start rabbitmq-server (as the shared servers are).
class PrivateRabbitMq {
 public:
  // `rabbitmq_conf`: more rabbitmq.conf lines (';'-separated) the node boots with
  // (servers.sh's OUTBOX_RABBITMQ_CONF), e.g. "max_message_size = 65536": RabbitMQ 4.0
  // reads such settings at boot only, where eval("application:set_env(...)") changes nothing.
  explicit PrivateRabbitMq(std::string servers_sh, const std::string& rabbitmq_conf = "");
  ~PrivateRabbitMq();
  PrivateRabbitMq(const PrivateRabbitMq&) = delete;
  PrivateRabbitMq& operator=(const PrivateRabbitMq&) = delete;

  // Runs `rabbitmqctl ARGS` against the node; returns its output (stdout+stderr).
  std::string rabbitmqctl(const std::string& args) const;
  // Evaluates an Erlang expression on the node (e.g. application:set_env); throws
  // when rabbitmqctl reports an error.
  std::string eval(const std::string& erlang) const;
  // Declares a (non-durable) exchange; `internal` makes it refuse publishes (403).
  void declare_exchange(const std::string& name, const std::string& type, bool internal) const;
  int port() const { return port_; }
  const std::string& uri() const { return uri_; }

 private:
  std::string run(const std::string& command) const;
  std::string servers_sh_, dir_, env_, uri_;
  int port_ = 0;
};

}  // namespace testenv
