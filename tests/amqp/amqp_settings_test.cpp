// The AMQP connection layer's handling of settings, URIs and endpoints, without a
// broker: what reaches errors and logs, and when TLS is used.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "outbox/amqp/amqp_error.h"
#include "outbox/amqp/amqp_text.h"
#include "outbox/amqp/amqp_uri.h"
#include "outbox/amqp/connection.h"
#include "test_text.h"

using outbox::amqp::AmqpConnection;
using outbox::amqp::AmqpError;
using outbox::amqp::AmqpUri;
using outbox::amqp::CloseScope;
using outbox::amqp::Settings;
using outbox::amqp::SocketCause;

namespace {

using testenv::contains;

// The error AmqpConnection::open() throws for `s`; fails the test when it opens.
AmqpError open_failure(const Settings& s) {
  AmqpConnection conn(s);
  try {
    conn.open();
  } catch (const AmqpError& e) {
    CHECK_FALSE(conn.is_open());
    return e;
  }
  FAIL("open() succeeded");
  return AmqpError("");
}

std::string open_error(const Settings& s) { return open_failure(s).what(); }

bool ssl_status(int status) { return status <= AMQP_STATUS_SSL_ERROR && status > -0x0300; }

// A loopback port where nothing listens (port 1 needs root to listen on).
const std::string kClosed = "127.0.0.1:1";

}  // namespace

TEST_CASE("amqps:// means TLS on 5671 by default, amqp:// plain TCP on 5672") {
  auto tls = AmqpUri::parse("amqps://u:p@broker.example/prod", "amqp.uri");
  CHECK(tls.tls());
  CHECK(tls.port() == 5671);
  CHECK(tls.endpoint() == "broker.example:5671/prod");
  auto plain = AmqpUri::parse("amqp://u:p@broker.example:5673/%2f", "amqp.uri");
  CHECK_FALSE(plain.tls());
  CHECK(plain.endpoint() == "broker.example:5673//");
}

TEST_CASE("a percent-encoded password full of @:/% is decoded for login and never part of the endpoint") {
  auto uri = AmqpUri::parse("amqps://relay:p%40ss%3Aw%2Frd%25x@mq.internal:5671/billing", "amqp.uri");
  CHECK(uri.password() == "p@ss:w/rd%x");
  CHECK(uri.user() == "relay");
  CHECK(uri.endpoint() == "mq.internal:5671/billing");
  for (const char* part : {"p@ss", "ss:w", "w/rd", "p%40ss", "relay"}) {
    CAPTURE(part);
    CHECK_FALSE(contains(uri.endpoint(), part));
  }
}

TEST_CASE("a URI with a raw @, :, / or % in the password is refused, naming the key and none of the URI") {
  const std::vector<std::string> secrets = {"s3cr@t", "s3cr:t9", "s3cr/t", "123:456", "12/s3cr", "s3cr#t"};
  for (const auto& secret : secrets) {
    CAPTURE(secret);
    const std::string uri = "amqp://relay:" + secret + "@mq.internal:5672/billing";
    std::string error;
    try {
      auto parsed = AmqpUri::parse(uri, "amqp_uri");
      // Accepted only if the secret went nowhere near the endpoint.
      CHECK_FALSE(contains(parsed.endpoint(), "s3cr"));
      CHECK_FALSE(contains(parsed.endpoint(), secret));
      continue;
    } catch (const AmqpError& e) {
      error = e.what();
    }
    CHECK(error.rfind("amqp_uri: not a valid amqp://user:password@host:port/vhost URI", 0) == 0);
    CHECK_FALSE(contains(error, "s3cr"));
    CHECK_FALSE(contains(error, "mq.internal"));
  }
}

TEST_CASE("open() names the URI key from key_prefix, and nothing of a bad URI") {
  Settings s;
  s.uri = "http://relay:hunter2@mq.internal/";
  const auto bad = open_failure(s);
  CHECK(std::string(bad.what()).rfind("amqp.uri: not a valid", 0) == 0);
  CHECK(bad.status() == AMQP_STATUS_BAD_URL);
  CHECK(bad.close().scope == CloseScope::kNone);
  s.key_prefix = "amqp_";
  auto error = open_error(s);
  CHECK(error.rfind("amqp_uri: not a valid", 0) == 0);
  CHECK_FALSE(contains(error, "hunter2"));
}

TEST_CASE("an amqps:// URI gets a TLS socket that loads ca_file; an amqp:// one never touches it") {
  Settings s;
  s.key_prefix = "amqp_";
  s.ca_file = "/nonexistent/ca.crt";
  s.connect_timeout_ms = 2000;
  s.uri = "amqps://relay:hunter2@" + kClosed + "/";
  const auto ca = open_failure(s);
  auto error = std::string(ca.what());
  CHECK(error == "amqp_ca_file: cannot load CA certificates from '/nonexistent/ca.crt'");
  CHECK_MESSAGE(ssl_status(ca.status()), ca.status());
  CHECK(ca.socket_cause() == SocketCause::kNone);
  s.uri = "amqp://relay:hunter2@" + kClosed + "/";
  const auto refused = open_failure(s);
  error = refused.what();
  CHECK(refused.status() == AMQP_STATUS_SOCKET_ERROR);
  CHECK(refused.socket_cause() == SocketCause::kRefused);
  CHECK(error.rfind("cannot connect to " + kClosed + "/: ", 0) == 0);
  CHECK_MESSAGE(contains(error, "(connection refused)"), error);  // the cause, not only "a socket error"
  CHECK_FALSE(contains(error, "(TLS)"));
  CHECK_FALSE(contains(error, "hunter2"));
}

TEST_CASE("TLS connect failures say (TLS) and the endpoint, never the password") {
  Settings s;
  s.uri = "amqps://relay:hunter2@" + kClosed + "/vh";  // system CA store
  s.connect_timeout_ms = 2000;
  const auto failure = open_failure(s);
  CHECK(failure.socket_cause() == SocketCause::kRefused);  // refused before any TLS
  const std::string error = failure.what();
  CHECK(error.rfind("cannot connect to " + kClosed + "/vh (TLS): ", 0) == 0);
  CHECK_MESSAGE(contains(error, "(connection refused)"), error);
  CHECK_FALSE(contains(error, "hunter2"));
}

TEST_CASE("a broker host that does not resolve is named as such in the connect error") {
  Settings s;
  s.uri = "amqp://relay:hunter2@no-such-host.invalid:5672/";
  s.connect_timeout_ms = 2000;
  const auto failure = open_failure(s);
  CHECK(failure.socket_cause() == SocketCause::kDns);
  CHECK(failure.status() != 0);
  const std::string error = failure.what();
  CHECK_MESSAGE(contains(error, "cannot resolve 'no-such-host.invalid'"), error);
  CHECK_FALSE(contains(error, "hunter2"));
}

TEST_CASE("a client certificate that cannot be loaded names cert_file/key_file, not the key's contents") {
  Settings s;
  s.uri = "amqps://relay:hunter2@" + kClosed + "/";
  s.cert_file = "/nonexistent/client.crt";
  s.key_file = "/nonexistent/client.key";
  const auto failure = open_failure(s);
  CHECK(std::string(failure.what()) ==
        "amqp.cert_file/key_file: cannot load the client certificate '/nonexistent/client.crt' and its key");
  CHECK_MESSAGE(ssl_status(failure.status()), failure.status());
}

TEST_CASE("fields_of keeps the broker's close (scope, code, refused method) and the library's status") {
  amqp_connection_close_t login_refused{};
  login_refused.reply_code = 403;
  login_refused.class_id = 10;  // connection.start-ok: the login
  login_refused.method_id = 11;
  amqp_rpc_reply_t server{};
  server.reply_type = AMQP_RESPONSE_SERVER_EXCEPTION;
  server.reply.id = AMQP_CONNECTION_CLOSE_METHOD;
  server.reply.decoded = &login_refused;
  const auto login = outbox::amqp::fields_of(server);
  CHECK(login.close.scope == CloseScope::kConnection);
  CHECK(login.close.reply_code == 403);
  CHECK(login.close.class_id == 10);
  CHECK(login.close.method_id == 11);
  CHECK(login.status == 0);

  amqp_channel_close_t not_found{};
  not_found.reply_code = 404;
  not_found.class_id = 40;  // exchange.declare
  not_found.method_id = 10;
  server.reply.id = AMQP_CHANNEL_CLOSE_METHOD;
  server.reply.decoded = &not_found;
  const auto channel = outbox::amqp::fields_of(server);
  CHECK(channel.close.scope == CloseScope::kChannel);
  CHECK(channel.close.reply_code == 404);
  CHECK(channel.close.class_id == 40);

  amqp_rpc_reply_t library{};
  library.reply_type = AMQP_RESPONSE_LIBRARY_EXCEPTION;
  library.library_error = AMQP_STATUS_CONNECTION_CLOSED;
  const auto closed = outbox::amqp::fields_of(library);
  CHECK(closed.status == AMQP_STATUS_CONNECTION_CLOSED);
  CHECK(closed.close.scope == CloseScope::kNone);
  CHECK(closed.close.reply_code == 0);
}

TEST_CASE("string_of copes with rabbitmq-c's empty bytes, describe with a missing reply") {
  CHECK(outbox::amqp::string_of(amqp_empty_bytes).empty());
  const std::string text = "a\0b";
  CHECK(outbox::amqp::string_of(outbox::amqp::bytes_of(text)) == text);
  amqp_rpc_reply_t none{};
  none.reply_type = AMQP_RESPONSE_NONE;
  CHECK(outbox::amqp::describe(none) == "missing RPC reply");
  CHECK(outbox::amqp::to_timeval(std::chrono::milliseconds(-5)).tv_sec == 0);
  CHECK(outbox::amqp::to_timeval(std::chrono::milliseconds(2500)).tv_usec == 500000);
}
