#include "outbox/sequence_guard.h"

#include <charconv>
#include <pqxx/pqxx>

#include "outbox/amqp_wire.h"
#include "outbox/errors.h"
#include "outbox/one_line.h"
#include "outbox/pqxx_compat.h"
#include "outbox/sql_identifier.h"

namespace outbox {

std::optional<KeySequence> key_sequence_of(const Delivery& d) {
  auto key = d.headers.find(kKeyHeader);
  auto seq = d.headers.find(kKeySeqHeader);
  if (key == d.headers.end() && seq == d.headers.end()) return std::nullopt;
  if (key == d.headers.end())
    throw ValidationError(std::string("header ") + kKeyHeader,
                          std::string("is missing, though ") + kKeySeqHeader + " is " + one_line(seq->second, 30));
  if (seq == d.headers.end())
    throw ValidationError(std::string("header ") + kKeySeqHeader,
                          std::string("is missing, though ") + kKeyHeader + " is set");
  if (key->second.empty()) throw ValidationError(std::string("header ") + kKeyHeader, "is empty");
  KeySequence ks{key->second, 0};
  const std::string& text = seq->second;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ks.seq);
  if (ec != std::errc() || end != text.data() + text.size() || ks.seq < 1)
    throw ValidationError(std::string("header ") + kKeySeqHeader,
                          "'" + one_line(text, 30) + "' is not a sequence number (a whole number from 1)");
  return ks;
}

SequenceGuard::SequenceGuard(SequenceGuardOptions options) : options_(std::move(options)) {
  std::string schema = quoted_identifier(options_.schema, "schema");
  validate_consumer_name(options_.consumer);
  check_sql_ = "SELECT outcome, last_applied, extract(epoch FROM waiting_since)::float8, next_held FROM " + schema +
               ".inbox_sequence($1, $2, $3::bigint)";
}

SequenceCheck SequenceGuard::check(pqxx::transaction_base& tx, const KeySequence& ks) const {
  if (ks.key.empty()) throw ValidationError("ordering key", "is empty");
  if (ks.seq < 1) throw ValidationError("sequence", std::to_string(ks.seq) + " is below 1");
  auto row = outbox::pgx::exec_params1(tx, check_sql_, options_.consumer.value(), ks.key, ks.seq);
  SequenceCheck out;
  const std::string outcome = row[0].c_str();
  out.outcome = outcome == "apply"       ? SequenceOutcome::kApply
                : outcome == "duplicate" ? SequenceOutcome::kDuplicate
                                         : SequenceOutcome::kGap;
  out.last_applied = row[1].as<std::int64_t>();
  if (!row[2].is_null())
    out.waiting_since =
        std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::duration<double>(row[2].as<double>())));
  out.next_held = row[3].as<bool>();
  return out;
}

}  // namespace outbox
