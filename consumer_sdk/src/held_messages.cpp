#include "held_messages.h"

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "outbox/pqxx_compat.h"
#include "outbox/sql_identifier.h"

namespace outbox::detail {
namespace {

// Headers as a JSON object; a byte that is no UTF-8 becomes U+FFFD (a header is
// text for every reader of it; the body is kept byte for byte).
std::string headers_json(const Delivery& d) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : d.headers) j[k] = v;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::map<std::string, std::string> headers_of(const std::string& json) {
  std::map<std::string, std::string> out;
  auto j = nlohmann::json::parse(json, nullptr, false);
  if (!j.is_object()) return out;
  for (const auto& [k, v] : j.items())
    if (v.is_string()) out[k] = v.get<std::string>();
  return out;
}

}  // namespace

HeldMessages::HeldMessages(const std::string& schema, const ConsumerName& consumer)
    : schema_(quoted_identifier(schema, "schema")), consumer_(consumer.value()) {}

bool HeldMessages::hold(pqxx::transaction_base& tx, const KeySequence& ks, const Delivery& d) const {
  const long long sent = d.timestamp
                             ? std::chrono::duration_cast<std::chrono::seconds>(d.timestamp->time_since_epoch()).count()
                             : -1;
  auto r = outbox::pgx::exec_params(
      tx,
      "INSERT INTO " + schema_ +
          ".inbox_held (consumer, ordering_key, key_seq, message_id, message_type, exchange, routing_key, "
          "content_type, correlation_id, headers, sent_at, body) "
          "VALUES ($1, $2, $3::bigint, $4::uuid, NULLIF($5, ''), $6, $7, NULLIF($8, ''), "
          "CASE WHEN $9 THEN $10 END, $11, CASE WHEN $12::bigint >= 0 THEN to_timestamp($12::bigint) END, $13) "
          "ON CONFLICT ON CONSTRAINT inbox_held_pkey DO NOTHING",
      consumer_, ks.key, ks.seq, d.message_id.to_string(), d.type, d.exchange, d.routing_key, d.content_type,
      d.correlation_id.has_value(), d.correlation_id.value_or(""), outbox::pgx::bytea(headers_json(d)), sent,
      outbox::pgx::bytea(d.body));
  return r.affected_rows() == 1;
}

std::optional<HeldMessage> HeldMessages::take_next(pqxx::transaction_base& tx, const std::string& key) const {
  auto r = outbox::pgx::exec_params(
      tx,
      "SELECT h.key_seq, h.message_id::text, coalesce(h.message_type, ''), h.exchange, h.routing_key, "
      "coalesce(h.content_type, ''), h.correlation_id, h.headers, extract(epoch FROM h.sent_at)::bigint, h.body, "
      "h.attempts FROM " +
          schema_ + ".inbox_held h JOIN " + schema_ +
          ".inbox_key_sequences s USING (consumer, ordering_key) "
          "WHERE h.consumer = $1 AND h.ordering_key = $2 AND h.key_seq = s.last_seq + 1 AND h.next_try_at <= now() "
          "FOR NO KEY UPDATE OF s SKIP LOCKED",
      consumer_, key);
  if (r.empty()) return std::nullopt;
  const auto& row = r[0];
  HeldMessage m;
  m.ks = {key, row[0].as<std::int64_t>()};
  Delivery& d = m.delivery;
  d.message_id = MessageId::parse(row[1].c_str());
  d.type = row[2].c_str();
  d.exchange = row[3].c_str();
  d.routing_key = row[4].c_str();
  d.content_type = row[5].c_str();
  if (!row[6].is_null()) d.correlation_id = row[6].c_str();
  d.headers = headers_of(outbox::pgx::bytea_of(row[7]));
  if (!row[8].is_null())
    d.timestamp = std::chrono::system_clock::time_point(std::chrono::seconds(row[8].as<long long>()));
  d.body = outbox::pgx::bytea_of(row[9]);
  d.redelivered = true;  // it was delivered once, and acked when it was held
  m.attempts = row[10].as<int>();
  d.attempt = m.attempts + 1;
  return m;
}

void HeldMessages::remove(pqxx::transaction_base& tx, const KeySequence& ks) const {
  outbox::pgx::exec_params0(tx,
                            "DELETE FROM " + schema_ +
                                ".inbox_held WHERE consumer = $1 AND ordering_key = $2 AND key_seq = $3::bigint",
                            consumer_, ks.key, ks.seq);
}

void HeldMessages::record_failure(pqxx::transaction_base& tx, const KeySequence& ks, const std::string& error,
                                  std::chrono::milliseconds delay, bool final) const {
  outbox::pgx::exec_params0(tx,
                            "UPDATE " + schema_ +
                                ".inbox_held SET attempts = attempts + 1, last_error = left($4, 2000), "
                                "next_try_at = CASE WHEN $5 THEN 'infinity'::timestamptz "
                                "ELSE now() + $6::bigint * interval '1 millisecond' END "
                                "WHERE consumer = $1 AND ordering_key = $2 AND key_seq = $3::bigint",
                            consumer_, ks.key, ks.seq, error, final, static_cast<long long>(delay.count()));
}

std::vector<std::string> HeldMessages::ready_keys(pqxx::transaction_base& tx, int limit) const {
  auto r =
      outbox::pgx::exec_params(tx,
                               "SELECT h.ordering_key FROM " + schema_ + ".inbox_held h JOIN " + schema_ +
                                   ".inbox_key_sequences s USING (consumer, ordering_key) "
                                   "WHERE h.consumer = $1 AND h.key_seq = s.last_seq + 1 AND h.next_try_at <= now() "
                                   "ORDER BY h.next_try_at LIMIT $2::int",
                               consumer_, limit);
  std::vector<std::string> keys;
  for (const auto& row : r) keys.emplace_back(row[0].c_str());
  return keys;
}

SequenceStatus HeldMessages::status(pqxx::transaction_base& tx, std::chrono::milliseconds alert_after, int list) const {
  SequenceStatus st;
  st.enabled = true;
  auto totals = outbox::pgx::exec_params1(tx,
                                          "SELECT count(*), count(*) FILTER (WHERE next_try_at = 'infinity') FROM " +
                                              schema_ + ".inbox_held WHERE consumer = $1",
                                          consumer_);
  st.held = totals[0].as<std::int64_t>();
  st.stuck = totals[1].as<std::int64_t>();
  auto gaps = outbox::pgx::exec_params(
      tx,
      "SELECT s.ordering_key, s.last_seq, "
      "(SELECT min(h.key_seq) FROM " +
          schema_ +
          ".inbox_held h WHERE h.consumer = s.consumer AND h.ordering_key = s.ordering_key), "
          "extract(epoch FROM now() - s.gap_since)::float8, count(*) OVER () FROM " +
          schema_ +
          ".inbox_key_sequences s WHERE s.consumer = $1 AND s.gap_since < now() - $2::bigint * interval '1 "
          "millisecond' ORDER BY s.gap_since LIMIT $3::int",
      consumer_, static_cast<long long>(alert_after.count()), list);
  for (const auto& row : gaps) {
    st.keys_gapped = row[4].as<std::int64_t>();
    st.oldest.push_back({row[0].c_str(), row[1].as<std::int64_t>(), row[2].is_null() ? 0 : row[2].as<std::int64_t>(),
                         row[3].as<double>()});
  }
  if (!st.oldest.empty()) st.oldest_gap_s = st.oldest.front().waiting_s;
  return st;
}

}  // namespace outbox::detail
