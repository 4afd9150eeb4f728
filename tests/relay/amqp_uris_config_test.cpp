// amqp.uris and amqp.endpoint_order: a broker cluster's nodes as a list, checked at load.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "config/config.h"
#include "test_text.h"

using relay::ConfigError;
using relay::parse_config;

namespace {

std::string config(const std::string& amqp_lines) {
  return "postgres:\n  dsn: host=db user=relay\namqp:\n" + amqp_lines;
}

std::string config_error(const std::string& yaml) {
  return testenv::error_of<ConfigError>([&] { parse_config(yaml, "relay.yaml"); }, "(accepted)");
}

using testenv::contains;

}  // namespace

TEST_CASE("a list of broker nodes is read in order, ${ENV} expanded per node") {
  setenv("TEST_MQ_PASSWORD", "pw-node", 1);
  auto c = parse_config(config("  uris:\n"
                               "    - amqp://relay:${TEST_MQ_PASSWORD}@mq-0:5672/%2f\n"
                               "    - amqp://relay:${TEST_MQ_PASSWORD}@mq-1:5672/%2f\n"
                               "    - amqp://relay:${TEST_MQ_PASSWORD}@mq-2:5672/%2f\n"
                               "  endpoint_order: shuffled\n"),
                        "relay.yaml");
  unsetenv("TEST_MQ_PASSWORD");
  REQUIRE(c.amqp.uris.size() == 3);
  CHECK(c.amqp.uris[1] == "amqp://relay:pw-node@mq-1:5672/%2f");
  CHECK(c.amqp.uri == c.amqp.uris[0]);  // TLS checks read the (shared) scheme from it
  CHECK(c.amqp.endpoint_order == outbox::amqp::EndpointOrder::kShuffled);
  for (const auto& w : c.warnings) CHECK_FALSE(contains(w, "inline"));  // ${ENV}: not inline
}

TEST_CASE("the one-node form still works and keeps the list empty, in order by default") {
  auto c = parse_config(config("  uri: amqp://relay@mq:5672/%2f\n"), "relay.yaml");
  CHECK(c.amqp.uri == "amqp://relay@mq:5672/%2f");
  CHECK(c.amqp.uris.empty());
  CHECK(c.amqp.endpoint_order == outbox::amqp::EndpointOrder::kInOrder);
}

TEST_CASE("uri and uris together are refused, naming both keys") {
  auto e = config_error(config("  uri: amqp://relay@mq:5672/%2f\n  uris: [amqp://relay@mq:5672/%2f]\n"));
  CHECK(contains(e, "amqp.uris"));
  CHECK(contains(e, "amqp.uri and amqp.uris are both given"));
}

TEST_CASE("neither uri nor uris is refused") {
  CHECK(contains(config_error(config("  heartbeat_s: 10\n")), "amqp.uri: is required"));
}

TEST_CASE("an empty list, a non-list and a non-string node are refused, naming the key") {
  CHECK(contains(config_error(config("  uris: []\n")),
                 "amqp.uris: expected a non-empty list of strings, got an empty list"));
  CHECK(contains(config_error(config("  uris: amqp://relay@mq:5672/%2f\n")), "amqp.uris: expected a non-empty list"));
  CHECK(contains(config_error(config("  uris:\n    - amqp://relay@mq:5672/%2f\n    - {a: b}\n")),
                 "amqp.uris[1]: expected a string"));
}

TEST_CASE("a bad node names its index and never shows its password") {
  auto e =
      config_error(config("  uris:\n    - amqp://relay:hunter2@mq-0:5672/%2f\n    - http://relay:hunter2@mq-1/\n"));
  CHECK(contains(e, "relay.yaml:6: amqp.uris[1]: must start with amqp:// or amqps://"));
  CHECK_FALSE(contains(e, "hunter2"));
  e = config_error(
      config("  uris:\n    - amqp://relay:hunter2@mq-0:5672/%2f\n    - amqp://relay:hun@ter2@mq-1:99999/\n"));
  CHECK(contains(e, "amqp.uris[1]: not a valid amqp://"));
  CHECK_FALSE(contains(e, "hunter2"));
  CHECK_FALSE(contains(e, "ter2"));
}

TEST_CASE("nodes mixing amqp:// and amqps:// are refused: TLS settings apply to every node") {
  auto e = config_error(config("  uris:\n    - amqps://relay@mq-0:5671/%2f\n    - amqp://relay@mq-1:5672/%2f\n"));
  CHECK(contains(e, "amqp.uris[1]: mixes amqp:// and amqps://"));
}

TEST_CASE("require_tls reads the list's scheme") {
  auto e = config_error(config("  uris:\n    - amqp://relay@mq-0:5672/%2f\n  require_tls: true\n"));
  CHECK(contains(e, "amqp.require_tls"));
  CHECK(contains(config_error(config("  uris: [amqp://relay@mq:5672/%2f]\n  ca_file: /etc/hosts\n")),
                 "amqp.uris: ca_file, cert_file and key_file need an amqps:// URI"));
}

TEST_CASE("an unknown endpoint order is refused with the choices") {
  auto e = config_error(config("  uris: [amqp://relay@mq:5672/%2f]\n  endpoint_order: random\n"));
  CHECK(contains(e, "amqp.endpoint_order: must be one of in_order, shuffled, got 'random'"));
}

TEST_CASE("a password written inline in a node draws a warning naming the node, not the password") {
  auto c = parse_config(config("  uris:\n    - amqp://relay@mq-0:5672/%2f\n    - amqp://relay:hunter2@mq-1:5672/%2f\n"),
                        "relay.yaml");
  REQUIRE(c.warnings.size() >= 1);
  CHECK(contains(c.warnings[0], "relay.yaml:6: amqp.uris[1]: a password is written inline"));
  CHECK_FALSE(contains(c.warnings[0], "hunter2"));
}

TEST_CASE("a node URI written as a single value instead of a list is refused without showing its password") {
  auto e = config_error(config("  uris: amqp://relay:hunter2@mq-0:5672/%2f\n"));
  CHECK_MESSAGE(contains(e,
                         "relay.yaml:4: amqp.uris: expected a non-empty list of strings, got a single value "
                         "(not shown: it may hold a password)"),
                e);
  CHECK_FALSE_MESSAGE(contains(e, "hunter2"), e);
  CHECK_FALSE_MESSAGE(contains(e, "mq-0"), e);
}
