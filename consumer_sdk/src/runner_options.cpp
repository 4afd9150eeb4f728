#include "outbox/runner_options.h"

#include "outbox/amqp/amqp_error.h"
#include "outbox/amqp/amqp_uri.h"
#include "outbox/errors.h"
#include "outbox/one_line.h"
#include "outbox/pg_dsn_check.h"
#include "outbox/sql_identifier.h"

namespace outbox {
namespace {

void require_range(const std::string& field, long long value, long long lo, long long hi) {
  if (value < lo || value > hi)
    throw ValidationError(field,
                          std::to_string(value) + " is outside " + std::to_string(lo) + "-" + std::to_string(hi));
}

void require_amqp_name(const std::string& field, const std::string& value) {
  if (value.empty()) throw ValidationError(field, "is required");
  if (value.size() > 255) throw ValidationError(field, "'" + one_line(value, 80) + "' is longer than 255 bytes");
}

// rabbitmq-c's own parse, so a malformed URI is refused here, naming its field,
// rather than at start() as a connection error. The text never holds the URI.
void require_amqp_uri(const std::string& field, const std::string& uri) {
  try {
    outbox::amqp::AmqpUri::parse(uri, field);
  } catch (const outbox::amqp::AmqpError&) {
    throw ValidationError(field,
                          "not a valid amqp://user:password@host:port/vhost URI (percent-encode @, :, / and % "
                          "in the user name and password)");
  }
}

}  // namespace

void validate_runner_options(const RunnerOptions& o) {
  if (o.pg_dsn.empty()) throw ValidationError("pg_dsn", "is required");
  // The relay's check of postgres.dsn (libpq's own parser); it names no value.
  if (auto why = pg_dsn_syntax_error(o.pg_dsn)) throw ValidationError("pg_dsn", *why);
  if (!o.amqp_uri.empty() && !o.amqp_uris.empty())
    throw ValidationError("amqp_uris", "amqp_uri and amqp_uris are both set: one node or a list, not both");
  if (o.amqp_uri.empty() && o.amqp_uris.empty()) throw ValidationError("amqp_uri", "is required (or amqp_uris)");
  const std::string& first = o.amqp_uris.empty() ? o.amqp_uri : o.amqp_uris.front();
  const bool tls = first.rfind("amqps://", 0) == 0;
  if (o.amqp_uris.empty() && !tls && first.rfind("amqp://", 0) != 0)
    throw ValidationError("amqp_uri", "must start with amqp:// or amqps://");
  if (o.amqp_uris.empty()) require_amqp_uri("amqp_uri", o.amqp_uri);
  for (std::size_t i = 0; i < o.amqp_uris.size(); ++i) {
    const std::string& u = o.amqp_uris[i];
    const std::string field = "amqp_uris[" + std::to_string(i) + "]";
    if (u.rfind("amqp://", 0) != 0 && u.rfind("amqps://", 0) != 0)
      throw ValidationError(field, "must start with amqp:// or amqps://");
    if ((u.rfind("amqps://", 0) == 0) != tls)
      throw ValidationError(field, "mixes amqp:// and amqps:// with amqp_uris[0]: every node must use the same scheme");
    require_amqp_uri(field, u);
  }
  if (!tls && (!o.amqp_ca_file.empty() || !o.amqp_cert_file.empty() || !o.amqp_key_file.empty()))
    throw ValidationError("amqp_uri", "amqp_ca_file, amqp_cert_file and amqp_key_file need an amqps:// URI");
  if (o.amqp_cert_file.empty() != o.amqp_key_file.empty())
    throw ValidationError(o.amqp_cert_file.empty() ? "amqp_key_file" : "amqp_cert_file",
                          "amqp_cert_file and amqp_key_file go together");
  quoted_identifier(o.schema, "schema");
  validate_consumer_name(o.consumer);
  require_amqp_name("queue", o.queue);
  require_amqp_name("dead_letter_exchange", o.dead_letter_exchange);
  if (!o.dead_letter_queue.empty()) require_amqp_name("dead_letter_queue", o.dead_letter_queue);
  else if (o.queue.size() + kDeadLetterQueueSuffix.size() > 255)
    throw ValidationError("dead_letter_queue", "is empty, and its default '<queue>" +
                                                   std::string(kDeadLetterQueueSuffix) +
                                                   "' would be longer than 255 bytes: name it");
  for (std::size_t i = 0; i < o.bindings.size(); ++i) {
    const auto& b = o.bindings[i];
    const std::string field = "bindings[" + std::to_string(i) + "]";
    require_amqp_name(field + ".exchange", b.exchange);
    if (b.routing_key.size() > 255)
      throw ValidationError(field + ".routing_key", "'" + one_line(b.routing_key, 80) + "' is longer than 255 bytes");
    if (b.exchange_type != "direct" && b.exchange_type != "topic" && b.exchange_type != "fanout" &&
        b.exchange_type != "headers")
      throw ValidationError(field + ".exchange_type",
                            "'" + one_line(b.exchange_type, 80) + "' is not one of direct, topic, fanout, headers");
  }
  require_range("concurrency", o.concurrency, 1, 256);
  require_range("prefetch", o.prefetch, 1, 1000);
  require_range("max_attempts", o.max_attempts, 1, 1000);
  if (o.delivery_limit != 0) {
    if (o.queue_type != QueueType::kQuorum)
      throw ValidationError("delivery_limit", "needs queue_type kQuorum (x-delivery-limit is a quorum queue argument)");
    if (o.delivery_limit < o.max_attempts || o.delivery_limit > 1000000)
      throw ValidationError("delivery_limit", "must be 0 or between max_attempts (" + std::to_string(o.max_attempts) +
                                                  ") and 1000000, got " + std::to_string(o.delivery_limit));
  }
  require_range("retry_delay_ms", o.retry_delay.count(), 0, 3600000);
  require_range("retry_delay_max_ms", o.retry_delay_max.count(), o.retry_delay.count(), 3600000);
  if (o.retry_order == RetryOrder::kSetAside && o.prefetch < 2)
    throw ValidationError("retry_order",
                          "kSetAside needs a prefetch of at least 2 (a delivery slot stays free for "
                          "new messages), got prefetch " +
                              std::to_string(o.prefetch));
  require_range("heartbeat_s", o.heartbeat_s, 0, 3600);
  require_range("connect_timeout_ms", o.connect_timeout.count(), 100, 600000);
  require_range("poll_interval_ms", o.poll_interval.count(), 10, 10000);
  if (o.retention) validate_retention_policy(*o.retention);
  require_range("sequence_gap_alert_ms", o.sequence_gap_alert.count(), 100, 7LL * 24 * 3600 * 1000);
}

}  // namespace outbox
