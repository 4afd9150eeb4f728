#include "outbox/outbox_writer.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "outbox/crypto_errors.h"
#include "outbox/error_text.h"
#include "outbox/field_encryptor.h"
#include "outbox/payload_json.h"
#include "outbox/pg_array.h"
#include "outbox/pqxx_compat.h"
#include "outbox/schema_registry.h"
#include "outbox/sql_identifier.h"

namespace outbox {
namespace {

// The row's headers: the application's, plus the W3C trace context, which the
// relay sends on like any other header.
std::string headers_json(const Message& m) {
  if (!m.traceparent) return nlohmann::json(m.headers).dump();
  auto all = m.headers;
  all["traceparent"] = *m.traceparent;
  if (m.tracestate) all["tracestate"] = *m.tracestate;
  return nlohmann::json(all).dump();
}

// One id given to two messages of a batch: the unique index would refuse the INSERT
// and abort the caller's transaction, after any subject keys were written.
void refuse_repeated_ids(const std::vector<Message>& messages, const std::vector<MessageId>& ids) {
  std::map<MessageId, std::size_t> first;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    if (!messages[i].message_id) continue;  // generated: distinct
    const auto [at, fresh] = first.emplace(ids[i], i);
    if (!fresh)
      throw ValidationError("message_id", "messages " + std::to_string(at->second) + " and " + std::to_string(i) +
                                              " of the batch both carry " + quoted_value(ids[i].to_string()) +
                                              ": one id names one message");
  }
}

}  // namespace

OutboxWriter::OutboxWriter(WriterOptions options) : options_(std::move(options)) {
  const auto schema = quoted_identifier(options_.schema, "schema");
  // Schemas decide what is checked and which fields are encrypted: a writer asked to
  // require them or to encrypt, but given none, would write every payload unchecked
  // and in clear.
  if (!options_.event_schemas && (options_.require_event_schema || options_.encryptor)) {
    std::string asked = options_.require_event_schema ? "require_event_schema is true" : "";
    if (options_.encryptor) asked += std::string(asked.empty() ? "" : " and ") + "an encryptor is set";
    throw ValidationError("event_schemas", "not set, but " + asked +
                                               ": without event schemas no payload would be checked and no field "
                                               "encrypted (load them with SchemaRegistry::load_directory)");
  }
  // One statement for any number of rows: each column travels as one array.
  insert_sql_ = "INSERT INTO " + schema +
                ".outbox (message_id, exchange, routing_key, message_type, ordering_key, "
                "content_type, headers, correlation_id, payload) "
                "SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], "
                "$5::text[], $6::text[], $7::jsonb[], $8::text[], $9::bytea[])";
  // Only a batch with a scheduled message names deliver_at (migration 0018): the
  // others insert as before, into a schema of any version.
  insert_scheduled_sql_ =
      "INSERT INTO " + schema +
      ".outbox (message_id, exchange, routing_key, message_type, ordering_key, "
      "content_type, headers, correlation_id, payload, deliver_at) "
      "SELECT m, e, r, t, o, c, h, k, p, CASE WHEN a IS NOT NULL THEN 'epoch'::timestamptz + a * interval '1 "
      "microsecond' WHEN d IS NOT NULL THEN statement_timestamp() + d * interval '1 microsecond' END "
      "FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::jsonb[], "
      "$8::text[], $9::bytea[], $10::bigint[], $11::bigint[]) AS u(m, e, r, t, o, c, h, k, p, a, d)";
}

MessageId OutboxWriter::enqueue(pqxx::transaction_base& tx, const Message& message) const {
  return enqueue_batch(tx, {message}).front();
}

std::vector<MessageId> OutboxWriter::enqueue_batch(pqxx::transaction_base& tx,
                                                   const std::vector<Message>& messages) const {
  // A nontransaction commits each statement on its own: the event would commit
  // whatever becomes of the business rows around it (and a subject key without it),
  // the dual write the outbox exists to avoid.
  if (dynamic_cast<pqxx::nontransaction*>(&tx) != nullptr)
    throw ValidationError("transaction",
                          "a pqxx::nontransaction commits each statement alone: enqueue in the "
                          "transaction (pqxx::work, or a subtransaction of it) that writes the "
                          "business rows");
  for (const auto& m : messages) validate_message(m, options_.limits);
  std::vector<MessageId> ids;
  if (messages.empty()) return ids;
  ids.reserve(messages.size());
  // Fixed before encryption: the AAD binds each sensitive field to its message id.
  for (const auto& m : messages)
    ids.push_back(m.message_id ? MessageId::parse(*m.message_id) : MessageId::generate_v7());
  refuse_repeated_ids(messages, ids);
  const auto prepared = prepare_payloads(tx, messages, ids);

  std::vector<std::string> id_text, exchanges, keys, types, ordering, content_types, headers;
  std::vector<std::optional<std::string>> correlation;
  std::vector<std::string_view> payloads;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    id_text.push_back(ids[i].to_string());
    exchanges.push_back(m.exchange.value());
    keys.push_back(m.routing_key.value());
    types.push_back(m.type.value());
    ordering.push_back(m.ordering_key);
    content_types.push_back(m.content_type);
    headers.push_back(headers_json(m));
    correlation.push_back(m.correlation_id);
    payloads.push_back(prepared[i] ? std::string_view(*prepared[i]) : std::string_view(m.payload));
  }
  std::vector<std::optional<std::string>> at_us, after_us;
  for (const auto& m : messages) {
    at_us.push_back(
        m.deliver_at
            ? std::optional<std::string>(std::to_string(
                  std::chrono::duration_cast<std::chrono::microseconds>(m.deliver_at->time_since_epoch()).count()))
            : std::nullopt);
    after_us.push_back(m.deliver_after ? std::optional<std::string>(std::to_string(m.deliver_after->count()))
                                       : std::nullopt);
  }
  const bool scheduled = std::any_of(messages.begin(), messages.end(),
                                     [](const Message& m) { return m.deliver_at || m.deliver_after; });
  if (scheduled)
    outbox::pgx::exec_params0(tx, insert_scheduled_sql_, pg::text_array(id_text), pg::text_array(exchanges),
                              pg::text_array(keys), pg::text_array(types), pg::text_array(ordering),
                              pg::text_array(content_types), pg::text_array(headers), pg::text_array(correlation),
                              pg::bytea_array(payloads), pg::text_array(at_us), pg::text_array(after_us));
  else
    outbox::pgx::exec_params0(tx, insert_sql_, pg::text_array(id_text), pg::text_array(exchanges), pg::text_array(keys),
                              pg::text_array(types), pg::text_array(ordering), pg::text_array(content_types),
                              pg::text_array(headers), pg::text_array(correlation), pg::bytea_array(payloads));
  return ids;
}

std::vector<std::optional<std::string>> OutboxWriter::prepare_payloads(pqxx::transaction_base& tx,
                                                                       const std::vector<Message>& messages,
                                                                       const std::vector<MessageId>& ids) const {
  std::vector<std::optional<std::string>> out(messages.size());
  if (!options_.event_schemas) return out;
  struct ToEncrypt {
    std::size_t index;
    const EventSchema* schema;
    nlohmann::json payload;
    std::string subject;
  };
  std::vector<ToEncrypt> work;
  std::vector<std::string> subjects;
  // 1. Validate every payload: a bad one throws before anything is written.
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const auto& type = messages[i].type.value();
    const EventSchema* schema = options_.event_schemas->find(type);
    if (!schema) {
      if (options_.require_event_schema)
        throw ValidationError("type",
                              "no event schema describes " + quoted_value(type) + " (event schemas are required)");
      continue;
    }
    // A payload with sensitive fields is serialised again after encryption.
    PayloadJson parsed(messages[i].payload, /*exact_numbers=*/schema->has_sensitive_fields());
    if (!parsed.ok())  // named by the schema's rule: never a key inside a sensitive value
      throw SchemaValidationError(schema->error_path(parsed),
                                  "the payload of a " + quoted_value(type) + " event: " + parsed.problem());
    auto json = std::move(parsed.value());
    schema->validate(json);
    if (!schema->has_sensitive_fields()) continue;
    if (!options_.encryptor)
      throw ValidationError("encryptor", "event type " + quoted_value(type) +
                                             " has sensitive fields but the writer has no encryptor; "
                                             "refusing to write them in clear");
    options_.encryptor->check(*schema);
    std::string subject = schema->subject_field().empty() ? "" : schema->subject_of(json);
    if (!subject.empty()) subjects.push_back(subject);
    work.push_back({i, schema, std::move(json), std::move(subject)});
  }
  // 2. Subject keys: erased subjects are refused before any row is written.
  std::map<std::string, SubjectKeyStore::DataKey> subject_keys;
  if (!subjects.empty()) subject_keys = options_.encryptor->subject_keys()->acquire(tx, subjects);
  // 3. Encrypt with the final message ids.
  for (auto& w : work) {
    const SubjectKeyStore::DataKey* key = w.subject.empty() ? nullptr : &subject_keys.at(w.subject);
    options_.encryptor->encrypt(*w.schema, w.payload, ids[w.index], key);
    out[w.index] = w.payload.dump();
    if (out[w.index]->size() > options_.limits.max_payload_bytes)
      throw ValidationError("payload", "is " + std::to_string(out[w.index]->size()) +
                                           " bytes after encryption, above the maximum of " +
                                           std::to_string(options_.limits.max_payload_bytes));
  }
  return out;
}

}  // namespace outbox
