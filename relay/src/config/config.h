#pragma once
// RelayConfig: the relay's YAML configuration, one plain struct per section.

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "outbox/amqp/endpoint_rotation.h"

namespace relay {

struct PostgresConfig {
  // libpq connection string or URI. Required. Put the password in ${ENV} or a
  // .pgpass file, not inline; it is never logged.
  std::string dsn;
  // Schema holding the outbox table; a plain identifier ([a-z_][a-z0-9_]*).
  std::string schema = "outbox";
  // Server-side cap on any one statement of the relay's session.
  int statement_timeout_ms = 30000;
  // The server ends a relay session idle inside a transaction this long, freeing
  // its row locks. Must exceed amqp.confirm_timeout_ms: the relay waits for
  // confirms while its claim transaction is open.
  int idle_in_transaction_timeout_ms = 120000;
  int connect_timeout_s = 5;
  // TCP keepalive idle time, so a dead server (or relay) is noticed in seconds.
  int keepalives_idle_s = 10;
  // libpq tcp_user_timeout: how long bytes the relay sent may stay unacknowledged
  // (a blackholed route, a frozen VM, a NAT that lost the connection) before the
  // kernel ends the session. Without it a statement sent into such a link waits out
  // TCP's retransmissions (about 15 min), and the relay with it. With the keepalives
  // above, a half-open session is noticed within max(this, keepalives_idle_s + 5 s).
  // 0: the kernel's default (no limit).
  int tcp_user_timeout_ms = 10000;
  // Refuse to start unless libpq will use sslmode=verify-full (the DSN's last
  // sslmode, else PGSSLMODE; verify-ca does not check the host name), pin that
  // sslmode in the connection string, and check after connecting that the session
  // really is encrypted. Off: check-config and run warn that the server is not verified.
  bool require_tls = false;
  // synchronous_commit of the relay's own sessions. Off: a batch's COMMIT does not
  // wait for its WAL flush (a disk flush less per batch, on the latency path). A
  // server crash may then lose the marks of the last fraction of a second; those
  // rows are published again, as after a relay crash (consumers deduplicate).
  // Producers' transactions are not affected.
  bool synchronous_commit = false;
};

struct AmqpConfig {
  // amqp://user:password@host:port/vhost: the one-node form. Exactly one of uri and
  // uris is required; the password is never logged. With uris, this holds the first
  // of them (all share one scheme, so TLS checks read it).
  std::string uri;
  // The nodes of a cluster, each a URI as above, all amqp:// or all amqps:// (the
  // TLS settings apply to every one). The relay connects to one; when the connection
  // is lost or a node refuses it, it tries the next (one node per attempt, with the
  // reconnect backoff between attempts). Empty when the config used `uri`.
  std::vector<std::string> uris;
  // The order in which uris are tried: "in_order" (as listed; the node just lost
  // goes last) or "shuffled" (a random order per round, so relays spread over nodes).
  outbox::amqp::EndpointOrder endpoint_order = outbox::amqp::EndpointOrder::kInOrder;
  // AMQP heartbeat; 0 turns heartbeats off (not recommended).
  int heartbeat_s = 30;
  // How long a published row may wait for its ack/nack. At least the heartbeat.
  int confirm_timeout_ms = 30000;
  // Most unconfirmed messages on the channel at once. Also the bound on the extra
  // copies of innocent messages one poison message can cause (see RelayLoop).
  int publish_window = 1024;
  // Most payload bytes unconfirmed on the channel at once: a burst of big rows must
  // not push gigabytes at a broker (its memory alarm blocks every publisher on it,
  // other services' too). A message that would pass it waits for acks, unless nothing
  // is outstanding: a larger message then goes with nothing else unconfirmed.
  int publish_window_bytes = 64 * 1024 * 1024;
  // The largest AMQP frame the relay asks for at login (the broker may grant less:
  // the negotiated value is what counts). A message's whole content header
  // (properties and header table) must fit in one frame; the producer SDK checks
  // messages against the same value (MessageLimits::frame_max).
  int frame_max = 131072;
  int connect_timeout_ms = 5000;
  // Refuse to start with an amqp:// (plain) URI or with verify_hostname off.
  bool require_tls = false;
  // amqps:// only. PEM file of the CA(s) the broker's certificate must chain to;
  // empty: the system's default CA store. The peer is always verified.
  std::string ca_file;
  // amqps:// only: client certificate and key (PEM) for brokers that ask for one.
  std::string cert_file, key_file;
  // amqps:// only: the certificate must name the URI's host. False is refused when
  // require_tls is on, and warned about otherwise.
  bool verify_hostname = true;
  // What the relay sends beyond the contract (message id, content type, persistent
  // delivery, the row's headers and correlation id). Each optional part costs the
  // broker part of its ceiling (docs/perf/NOTEBOOK.md, "The wire"); consumers that do
  // not read it can do without it.
  bool send_row_id = true;  // header x-outbox-id: the row's id (for `replay`, dead-letter triage)
  // Headers x-outbox-key and x-outbox-seq on a keyed row: its ordering key and the
  // key's sequence number (migration 0016), for consumers' order and gap checks.
  bool send_sequence = true;
  bool send_type = true;       // property `type`: the row's message_type
  bool send_timestamp = true;  // property `timestamp`: the row's created_at (seconds)
  // Empty: messages are published `mandatory` and an unroutable one comes back
  // (basic.return) and is charged to its row. A name: messages are published
  // without `mandatory`; every exchange the relay publishes to must have this
  // exchange as its alternate-exchange (argument or policy), which the broker
  // cannot be asked about; the relay checks that the exchange exists at start and
  // at every connect. An exchange without one drops unroutable messages silently.
  std::string alternate_exchange;
};

// relay.on_publish, parsed at load.
enum class OnPublish {
  kMark,    // "mark": set published_at (history, `replay`, retention deletes later)
  kDelete,  // "delete": delete the row in the transaction that would have marked it
};

// relay.ordering, parsed at load.
enum class Ordering {
  kUnordered,  // "unordered": any relay publishes any due row (fastest)
  kPerKey,     // "per_key": a key's messages one at a time, in id order
};

// relay.key_failure_policy (per_key), parsed at load.
enum class KeyFailurePolicy {
  kParkKey,      // "park_key": a parked message blocks its key until requeued
  kParkMessage,  // "park_message": it is parked and the key goes on
};

struct RelaySettings {
  // Rows claimed (and locked) per transaction.
  int batch_size = 500;
  // Batches in flight at once, each in its own transaction on its own PostgreSQL
  // connection: the next batch is claimed and published while the broker confirms
  // the previous one. 1 = claim, publish, confirm, commit, strictly one after another.
  int pipeline_depth = 2;
  // Sleep between claims when the last claim found nothing (relay.listen off, or
  // while a producer transaction that did not notify stays open).
  int poll_interval_ms = 200;
  // Wake on the NOTIFY of migration 0004 as soon as a producer inserts, instead of
  // polling; producers notify only while a relay waits (so a busy relay costs them
  // nothing). Turn off behind a pooler that does not keep sessions (LISTEN needs one).
  bool listen = true;
  // While listening, poll this often anyway: rows that become due later (retries
  // other relays scheduled) send no notification. The relay's own retries wake it
  // when due.
  int listen_poll_interval_ms = 5000;
  // After this many failed attempts a row is parked: never claimed again until requeued.
  int max_attempts = 10;
  // A row whose payload is larger is not fetched or sent: it fails as its own fault
  // (an attempt; parked after max_attempts). Bounds the relay's memory against a row
  // written by hand (a bytea may hold 1 GiB): fetching one costs twice its size.
  // The producer SDK's own limit is 1 MiB; RabbitMQ refuses messages over its
  // max_message_size (128 MiB by default) anyway.
  int max_payload_bytes = 16 * 1024 * 1024;
  // Retry delay: initial * factor^(attempts-1), capped at max, with +/-20% jitter.
  int backoff_initial_ms = 1000;
  int backoff_max_ms = 300000;
  double backoff_factor = 2.0;
  // Period of the info-level summary (published, failed, pending, oldest age).
  int summary_interval_s = 30;
  // "unordered": any relay publishes any due row (fastest). "per_key": rows that
  // share an ordering key are published one at a time in id order (a key's next
  // message goes out only after the previous one is marked published), and each
  // key's lane is owned by exactly one relay (advisory locks; see LaneManager).
  Ordering ordering = Ordering::kUnordered;
  // per_key: number of lanes keys hash to. More lanes spread keys more evenly over
  // relays; every relay of a group must use the same number.
  int lanes = 64;
  // per_key: how often a relay recounts the live relays and takes or gives up lanes.
  // Bounds the time a new relay waits for work and a dead relay's keys wait.
  int rebalance_interval_ms = 1000;
  // per_key, after max_attempts: "park_key" parks the message and blocks its key
  // until an operator requeues it; "park_message" parks it and lets the key go on.
  KeyFailurePolicy key_failure_policy = KeyFailurePolicy::kParkKey;
  // Rows are due but nothing was published (acked and marked) for this long: the
  // relay logs it once, /readyz fails with the reason, and the gauge
  // outbox_relay_publish_stalled is 1 until a row is published again.
  int stall_after_s = 60;
  // What a row becomes once the broker acked it: marked published (kept for
  // history and `replay` until retention deletes it) or deleted at once (no
  // history, nothing to replay, no retention work; needs DELETE on the table).
  OnPublish on_publish = OnPublish::kMark;
};

// log.level, parsed at load.
enum class LogLevel {
  kTrace,  // "trace"
  kDebug,  // "debug": one line per batch
  kInfo,   // "info"
  kWarn,   // "warn"
  kError,  // "error"
};

// log.format, parsed at load.
enum class LogFormat {
  kText,  // "text"
  kJson,  // "json": one JSON object per line
};

struct LogConfig {
  LogLevel level = LogLevel::kInfo;
  LogFormat format = LogFormat::kText;
};

struct HttpConfig {
  // "host:port" of /metrics, /healthz and /readyz; empty turns the endpoint off.
  // Port 0 picks a free port (logged at start).
  std::string listen;
  // How often the backlog gauges (pending, parked, oldest age) are refreshed.
  int stats_interval_s = 10;
  // /readyz fails when no claim completed and the broker acked no row for this long.
  int ready_max_claim_age_s = 60;
  // /healthz fails when the relay loop made no progress for this long.
  int live_stall_s = 300;
  // /healthz also fails when PostgreSQL or RabbitMQ has not been connected for this
  // long (since start, or since the connection was lost), so an orchestrator
  // restarts a relay that cannot reach them (a stale DNS answer, a broken route).
  // 0, the default: never (the relay keeps retrying and /readyz says why).
  int live_max_disconnected_s = 0;
};

struct RetentionConfig {
  // Delete published rows older than `keep` in the relay itself. Needs DELETE on
  // the outbox. At most one relay runs it at a time (an advisory lock).
  bool enabled = false;
  // How long published rows are kept, in seconds (YAML: "7d", "12h", ...).
  long long keep_s = 7 * 86400;
  // Rows per DELETE statement (one short transaction each).
  int batch_size = 5000;
  // Pause between batches, so retention never hogs the server.
  int pause_ms = 100;
  // How often a retention run starts.
  int interval_s = 300;
};

struct RelayConfig {
  PostgresConfig postgres;
  AmqpConfig amqp;
  RelaySettings relay;
  LogConfig log;
  HttpConfig http;
  RetentionConfig retention;
  // Valid but risky settings (e.g. a password written inline), one line each,
  // naming the key and line, never the secret. check-config prints them; run logs them.
  std::vector<std::string> warnings;
};

// A configuration error: names the file, line and key path at fault. Never holds
// the value of a secret (dsn, uri).
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses YAML text. `origin` names the source in messages (a file name).
// ${NAME} in string values is replaced by the environment variable NAME, and
// ${file:PATH} by the contents of the file PATH (without a trailing newline).
// Rejects unknown keys, wrong types, out-of-range values and broken cross-field
// rules, naming the key path and its line. Throws ConfigError.
RelayConfig parse_config(const std::string& yaml_text, const std::string& origin);

// The largest configuration file read. A real one is a few KiB; a log file given by
// mistake is refused at this size rather than read until memory runs out (a FIFO or
// a device is refused by type before any read: outbox/bounded_read.h).
constexpr std::size_t kMaxConfigFileBytes = 1024 * 1024;
// The largest ${file:PATH}. A password, URI or DSN is under 1 KiB and a token a few
// KiB; 64 KiB leaves room for those and keeps a file of the wrong kind (a backup, a
// dump) from being read whole, and a file referenced many times from costing much.
constexpr std::size_t kMaxSecretFileBytes = 64 * 1024;

// Reads and parses a file. Throws ConfigError (also when it cannot be read, or holds
// more than kMaxConfigFileBytes).
RelayConfig load_config(const std::string& path);

}  // namespace relay
