#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// RunnerOptions and Handler: what a ConsumerRunner is given (its queue, servers,
// retries, deduplication) and the handler it runs per message. A header of their
// own so that the runner's workers read them without including the runner.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "outbox/amqp/endpoint_rotation.h"
#include "outbox/consumer_name.h"
#include "outbox/delivery.h"
#include "outbox/inbox_retention.h"
#include "outbox/metrics.h"

namespace pqxx {
class transaction_base;
}

namespace outbox {

struct QueueBinding {
  std::string exchange;  // declared durable with exchange_type
  std::string routing_key;
  std::string exchange_type = "topic";  // direct, topic, fanout or headers
};

enum class Deduplication {
  kInbox,  // record (message id, consumer) in the inbox first; duplicates are acked unprocessed
  kNone,   // the handler makes duplicates harmless itself (natural key, state transition)
};

// RunnerOptions::queue_type.
enum class QueueType {
  kClassic,  // a classic queue: lives on one node
  kQuorum,   // x-queue-type: quorum, replicated (Raft) over the cluster's nodes
};

// RunnerOptions::retry_order: what a worker does while a failed message waits for
// its next try (docs/CONSUMER.md, "Retries").
enum class RetryOrder {
  // Holds it: nothing behind it on that worker is handled first, so the queue's order
  // is kept, and a message that always fails costs its worker the sum of its waits.
  kHoldInOrder,
  // Sets it aside, unacked (at most prefetch - 1 at once), and handles the next
  // deliveries meanwhile; it is tried again in the same worker when its wait is over.
  // A stream of failing messages no longer slows the rest; messages may be handled
  // out of the queue's order. Needs prefetch of at least 2.
  kSetAside,
};

// The default dead_letter_queue: "<queue>" followed by this.
inline constexpr std::string_view kDeadLetterQueueSuffix = ".dead-letter";

struct RunnerOptions {
  // libpq connection string; never logged. Each worker's session gets, unless set here:
  // application_name "outbox-consumer <consumer>", connect_timeout (below) and
  // keepalives (10 s idle, 3 probes 5 s apart), as the relay's sessions do.
  std::string pg_dsn;
  std::string schema = "outbox";  // schema of the inbox table (and of any consumer outbox)
  ConsumerName consumer;          // required: the inbox key and the metrics label
  // amqp://user:password@host:port/vhost, or amqps:// for TLS; never logged.
  // Percent-encode @ : / % in the user name and password.
  std::string amqp_uri;
  // The nodes of a broker cluster, each a URI as above (all amqp:// or all amqps://;
  // the TLS settings apply to every one); exactly one of amqp_uri and amqp_uris is
  // set. Each worker connects to one node and, when its connection is lost or a node
  // refuses it, tries the next after its reconnect backoff.
  std::vector<std::string> amqp_uris;
  // kShuffled spreads the workers (each with its own order) over the nodes.
  outbox::amqp::EndpointOrder amqp_endpoint_order = outbox::amqp::EndpointOrder::kInOrder;
  // amqps:// only (like the relay's amqp.ca_file, cert_file, key_file, verify_hostname).
  // The broker's certificate is always verified (TLS 1.2 or later): against this PEM
  // CA file, or the system's CA store when empty.
  std::string amqp_ca_file;
  std::string amqp_cert_file, amqp_key_file;  // client certificate and key (PEM), both or neither
  bool amqp_verify_hostname = true;           // the certificate must name the URI's host
  std::string queue;                          // required; declared durable
  // kQuorum declares the queue (and its dead-letter queue) with x-queue-type quorum:
  // replicated to a majority of a cluster's nodes, so it survives a node failure.
  // kClassic (one node's queue) suits a single development broker. An existing queue
  // must have been declared the same way (the broker refuses a change of type).
  QueueType queue_type = QueueType::kClassic;
  // kQuorum only: x-delivery-limit, 0 for none. The broker dead-letters a message
  // returned this many times, whoever returned it: the backstop for a message whose
  // handler crashes the process (the per-process count of max_attempts starts over
  // with each process). Must be at least max_attempts, so that an ordinary failing
  // handler is dead-lettered by the runner first.
  int delivery_limit = 0;
  std::vector<QueueBinding> bindings;  // declared and bound to the queue
  // Required. Declared (fanout, durable) and set as the queue's x-dead-letter-exchange:
  // rejected messages go there instead of vanishing.
  std::string dead_letter_exchange;
  std::string dead_letter_queue;  // declared and bound to it; empty: "<queue>.dead-letter"
  // Worker threads. Each owns one AMQP connection and ONE PostgreSQL connection,
  // held by an in-flight message for the whole length of its handler: size the
  // database's connection budget to at least this many connections per process.
  int concurrency = 1;  // 1-256
  int prefetch = 1;     // unacked deliveries per worker (1-1000)
  // Tries of a failing handler before the message is dead-lettered (1-1000).
  // Counted per process; a PermanentError is dead-lettered on the first try.
  int max_attempts = 5;
  std::chrono::milliseconds retry_delay{100};  // before the 1st requeue; doubles per try
  std::chrono::milliseconds retry_delay_max{10000};
  RetryOrder retry_order = RetryOrder::kHoldInOrder;
  Deduplication dedup = Deduplication::kInbox;
  // Applies each ordering key's events once and in sequence order (the x-outbox-key
  // and x-outbox-seq headers of migration 0016; docs/CONSUMER.md, "Sequence guard"):
  // an event that arrives before its turn is held in the consumer's database
  // (inbox_held, migration 0017) and applied when the one before it has been; an
  // event at or below the key's last applied sequence is a duplicate. Unkeyed events
  // pass as before. Only for a queue that receives EVERY event of its keys: a binding
  // that takes some of a key's event types sees the others as gaps, for ever.
  bool sequence_guard = false;
  // How long a key may wait for a missing event before the runner reports it (an
  // error log line per key, outbox_consumer_sequence_gaps, sequence_status()). Its
  // later events stay held either way: never applied out of order.
  std::chrono::milliseconds sequence_gap_alert{60000};
  // When set, a message older than policy.retention on arrival is counted as a late
  // delivery and logged (its inbox row may be gone already).
  std::optional<RetentionPolicy> retention;
  int heartbeat_s = 30;  // AMQP heartbeat (0 = off)
  // AMQP connect, TLS handshake and every RPC; also libpq's connect_timeout (whole
  // seconds, at least 2) unless pg_dsn sets one: a server that accepts connections and
  // never answers cannot hold a worker, or stop(), longer than that.
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds poll_interval{200};  // how soon an idle worker notices stop()
  // Where the runner's counters are exported (Prometheus format, labelled
  // {consumer="<consumer>"}): share one registry between several runners and the
  // application's own metrics, so one /metrics page holds them all. Empty: the
  // runner keeps a registry of its own (ConsumerRunner::metrics()).
  std::shared_ptr<metrics::Registry> metrics;
};

// Throws ValidationError naming the first field at fault. Pure; thread-safe.
void validate_runner_options(const RunnerOptions& options);

// The handler runs inside the transaction, after the inbox row was written. Anything
// it does with `tx` (business rows, OutboxWriter::enqueue of follow-up events)
// commits with the inbox row, or not at all. Throw to fail the message: an
// outbox::PermanentError dead-letters it at once, an outbox::EnvironmentError (a
// dependency unreachable for now) requeues it without counting a try, anything else
// is retried up to max_attempts. Side effects outside the database (a payment call) are not undone
// by a rollback: give them an idempotency key.
using Handler = std::function<void(pqxx::transaction_base& tx, const Delivery& delivery)>;

}  // namespace outbox
