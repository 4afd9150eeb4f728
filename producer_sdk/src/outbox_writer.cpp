#include "outbox/outbox_writer.h"

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "outbox/pg_array.h"
#include "outbox/sql_identifier.h"

namespace outbox {

OutboxWriter::OutboxWriter(WriterOptions options) : options_(std::move(options)) {
  const auto schema = quoted_identifier(options_.schema, "schema");
  // One statement for any number of rows: each column travels as one array.
  insert_sql_ = "INSERT INTO " + schema +
                ".outbox (message_id, exchange, routing_key, message_type, ordering_key, "
                "content_type, headers, correlation_id, payload) "
                "SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], "
                "$5::text[], $6::text[], $7::jsonb[], $8::text[], $9::bytea[])";
}

MessageId OutboxWriter::enqueue(pqxx::transaction_base& tx, const Message& message) const {
  return enqueue_batch(tx, {message}).front();
}

std::vector<MessageId> OutboxWriter::enqueue_batch(pqxx::transaction_base& tx,
                                                   const std::vector<Message>& messages) const {
  for (const auto& m : messages) validate_message(m, options_.limits);
  std::vector<MessageId> ids;
  if (messages.empty()) return ids;
  ids.reserve(messages.size());

  std::vector<std::string> id_text, exchanges, keys, types, ordering, content_types, headers;
  std::vector<std::optional<std::string>> correlation;
  std::vector<std::string_view> payloads;
  for (const auto& m : messages) {
    ids.push_back(m.message_id ? MessageId::parse(*m.message_id) : MessageId::generate_v7());
    id_text.push_back(ids.back().to_string());
    exchanges.push_back(m.exchange.value());
    keys.push_back(m.routing_key.value());
    types.push_back(m.type.value());
    ordering.push_back(m.ordering_key);
    content_types.push_back(m.content_type);
    headers.push_back(nlohmann::json(m.headers).dump());
    correlation.push_back(m.correlation_id);
    payloads.push_back(m.payload);
  }
  tx.exec_params0(insert_sql_, pg::text_array(id_text), pg::text_array(exchanges),
                  pg::text_array(keys), pg::text_array(types), pg::text_array(ordering),
                  pg::text_array(content_types), pg::text_array(headers),
                  pg::text_array(correlation), pg::bytea_array(payloads));
  return ids;
}

}  // namespace outbox
