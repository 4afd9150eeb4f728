#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// Settings: what it takes to open one AMQP connection (plain or TLS).

#include <cstdint>
#include <string>
#include <vector>

#include "outbox/amqp/endpoint_rotation.h"

namespace outbox::amqp {

// A plain value: the relay's AmqpConfig, the consumer's RunnerOptions and the
// bench map onto it. Only `uri` is required; everything else has the relay's
// defaults. Thread safety: a value.
struct Settings {
  // amqp://user:password@host:port/vhost or amqps://...; never logged. Special
  // characters in the user name or password must be percent-encoded (%40 for @).
  std::string uri;
  // The nodes of a cluster, each a URI like `uri` (same scheme, TLS settings apply
  // to every one). When not empty it replaces `uri`: each open() tries one of them,
  // in `order` (see EndpointRotation). Errors name key_prefix + "uris[i]".
  std::vector<std::string> uris;
  EndpointOrder order = EndpointOrder::kInOrder;
  // Seeds the shuffled order (give each client its own, e.g. its pid).
  std::uint64_t order_seed = 0;
  // How errors name the settings: key_prefix + "uri", key_prefix + "ca_file", ...
  // ("amqp." for the relay's YAML, "amqp_" for the consumer's RunnerOptions).
  std::string key_prefix = "amqp.";
  // The URI's name in errors when it is not key_prefix + "uri" (an environment
  // variable, say).
  std::string uri_key;
  int heartbeat_s = 30;           // 0: no heartbeats
  int connect_timeout_ms = 5000;  // TCP connect, TLS handshake, and every RPC
  // How long bytes written may stay unacknowledged by the broker's TCP (a broker
  // that stopped reading: hung, SIGSTOPped, a zero window) before the kernel ends
  // the connection (TCP_USER_TIMEOUT). rabbitmq-c 0.11 sends without a time limit,
  // so without this a publish into a full socket waits forever. 0: no limit.
  int send_timeout_ms = 0;
  int frame_max = 131072;  // asked for at login; the broker may grant less
  // amqps:// only. PEM CA file the broker's certificate must chain to; empty: the
  // system's CA store. The peer is always verified.
  std::string ca_file;
  // amqps:// only: client certificate and key (PEM), both or neither.
  std::string cert_file, key_file;
  // amqps:// only: the certificate must name the URI's host.
  bool verify_hostname = true;
  // Shown in the broker's management UI; empty: not sent.
  std::string connection_name;
  // Client capabilities announced as true at login (e.g. "connection.blocked").
  std::vector<std::string> capabilities;
};

}  // namespace outbox::amqp
