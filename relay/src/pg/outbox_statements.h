#pragma once
// OutboxStatements: the SQL of the relay's claims, marks and counts, named.

#include <cstddef>
#include <string>
#include <vector>

#include "config/config.h"

namespace relay {

// How a store claims and marks, fixed at construction (from relay.*).
struct StoreOptions {
  // relay.ordering per_key: the number of lanes keys hash to; 0 = unordered claims
  // (claim_key_heads() needs it > 0).
  int key_lanes = 0;
  // per_key, relay.key_failure_policy park_key: a parked head holds its key back.
  bool park_key = true;
  // relay.on_publish delete: mark_published() deletes the rows instead of marking them.
  bool delete_on_publish = false;
  // relay.max_payload_bytes: larger payloads are not fetched; their rows are invalid.
  std::size_t max_payload_bytes = 16 * 1024 * 1024;

  // The options relay.* asks for.
  static StoreOptions of(const RelaySettings& relay);
};

// The statements an OutboxStore prepares on its session, as text: pure, so that
// what the relay asks PostgreSQL is read (and tested) in one place. The outbox's
// schema comes quoted ("\"orders\""); every table is called `o` in the claims.
// Thread safety: stateless.
class OutboxStatements {
 public:
  struct Statement {
    std::string name, sql;
  };
  // Every statement of a store with `options` on the outbox of `schema` (quoted):
  // outbox_claim, outbox_claim_below/above/above_ready, with key_lanes the
  // outbox_key_heads_* and outbox_key_walk_end_* walks, the marks, outbox_due,
  // outbox_next_scheduled, outbox_mark_failed, outbox_stats.
  static std::vector<Statement> define(const std::string& schema, const StoreOptions& options);
  // The mark by id ($1 bigint[]): a statement of its own after a commit, as text.
  static std::string mark_by_id(const std::string& schema, const StoreOptions& options);

  // The one spelling of "pending": neither published nor parked. `alias` is a
  // table alias with its dot ("o.") or empty.
  static std::string pending_sql(const std::string& alias = "");
  // The claim's columns, named: the SELECT list and the decoder use the same names.
  static std::string claim_select_list();
  // Larger payloads are not sent with the claim (see ClaimedRow::payload).
  static constexpr std::size_t kInlinePayloadBytes = 2 * 1024;
};

}  // namespace relay
