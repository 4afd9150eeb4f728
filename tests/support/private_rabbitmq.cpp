#include "private_rabbitmq.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

#include "amqp_test_client.h"
#include "relay_process.h"
#include "test_env.h"

namespace testenv {
namespace {}  // namespace

PrivateRabbitMq::PrivateRabbitMq(std::string servers_sh, const std::string& rabbitmq_conf)
    : servers_sh_(std::move(servers_sh)), dir_("/tmp/" + unique_name("outbox_private_rmq")) {
  std::mt19937 rng(std::random_device{}());
  // 4xxxx, and the node's distribution port (AMQP port + 20000) must stay below 65535.
  for (int tries = 0; tries < 100 && port_ == 0; ++tries) {
    int p = 41000 + static_cast<int>(rng() % 4000);
    if (testenv::port_free(p) && testenv::port_free(p + 20000)) port_ = p;
  }
  if (port_ == 0) throw std::runtime_error("private RabbitMQ: no free port in 41000-44999");
  env_ = "env OUTBOX_LOCAL_DIR=" + dir_ + " OUTBOX_AMQP_PORT=" + std::to_string(port_) + " ";
  if (!rabbitmq_conf.empty()) {  // no single quote in it: it goes into the shell command in '...'
    if (rabbitmq_conf.find('\'') != std::string::npos) throw std::invalid_argument("rabbitmq_conf with a quote");
    env_ += "OUTBOX_RABBITMQ_CONF='" + rabbitmq_conf + "' ";
  }
  // restart-rabbitmq = stop (nothing there yet) + start, of the RabbitMQ half only:
  // `start` would also start a PostgreSQL, which this suite does not need.
  auto out = run("\"" + servers_sh_ + "\" restart-rabbitmq");
  if (out.find("rabbitmq: started") == std::string::npos)
    throw std::runtime_error("private RabbitMQ did not start: " + out);
  uri_ = "amqp://guest:guest@127.0.0.1:" + std::to_string(port_) + "/%2f";
  setenv("OUTBOX_AMQP_URI", uri_.c_str(), 1);
}

PrivateRabbitMq::~PrivateRabbitMq() {
  run("\"" + servers_sh_ + "\" stop");
  // Best effort in a destructor (the status must be read: _FORTIFY_SOURCE marks system()
  // warn_unused_result); a failure leaves the folder in /tmp.
  [[maybe_unused]] const int removed = std::system(("rm -rf '" + dir_ + "'").c_str());
}

std::string PrivateRabbitMq::run(const std::string& command) const {
  auto out = write_temp_file("", ".out");
  std::fflush(nullptr);  // the shell must not inherit (and write again) buffered output
  // The caller judges the output, not the exit status.
  [[maybe_unused]] const int status = std::system((env_ + command + " >" + out + " 2>&1").c_str());
  std::ifstream in(out);
  std::stringstream s;
  s << in.rdbuf();
  std::remove(out.c_str());
  return s.str();
}

std::string PrivateRabbitMq::rabbitmqctl(const std::string& args) const {
  return run("\"" + servers_sh_ + "\" rabbitmqctl " + args);
}

std::string PrivateRabbitMq::eval(const std::string& erlang) const {
  auto out = rabbitmqctl("eval '" + erlang + "'");
  if (out.find("Error") != std::string::npos || out.find("error") != std::string::npos)
    throw std::runtime_error("rabbitmqctl eval failed: " + out);
  return out;
}

void PrivateRabbitMq::declare_exchange(const std::string& name, const std::string& type, bool internal) const {
  AmqpEndpoint endpoint;  // 127.0.0.1, guest/guest, vhost "/"
  endpoint.port = port_;
  AmqpTestClient(endpoint, "private RabbitMQ").declare_exchange(name, type, /*durable=*/false, internal);
}

}  // namespace testenv
