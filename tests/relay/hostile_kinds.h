#pragma once
// The hostile rows of tests/relay/hostile_rows_rmqtest.cpp: rows a producer in
// another language or a psql hand fix can store, each of which the relay must fail
// on its own (attempt counted, parked after relay.max_attempts) while every other
// row goes on.

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace pqxx {
class transaction_base;
}

namespace hostile {

// Names a hostile row may point at, all on the suite's private broker.
struct Targets {
  std::string exchange;           // the test's exchange (bound to its queue)
  std::string routing_key;        // bound to the test's queue
  std::string missing_exchange;   // never declared: 404
  std::string internal_exchange;  // declared internal: 403
};

// The columns of one hand-inserted row (SQL text, as a producer would write them).
struct HostileRow {
  std::string exchange, routing_key;
  std::string type = "Hostile";
  std::string content_type = "application/json";
  std::string headers = "{}";  // jsonb text
  std::string correlation_id;  // empty: NULL
  std::size_t payload_bytes = 16;
  std::string created_at;  // empty: now()
};

// How the relay meets a kind, which bounds the copies of innocent rows it may cause.
enum class Failure {
  kBeforeSending,  // decode or client encode: nothing sent, no innocent row sent twice
  kReturned,       // basic.return: the rest of the window is confirmed normally
  kChannelClosed,  // the broker closes the channel: the unconfirmed window is resent once
};

struct HostileKind {
  std::string name;
  // The row's last_error must contain one of these (the column, code or limit at fault).
  std::vector<std::string> error_mentions;
  Failure failure;
  HostileRow row;
  // The CHECK constraint of migration 0007 that refuses this row at INSERT when it
  // carries no relay state; empty when no CHECK can know (the broker decides).
  std::string check_constraint = {};
};

// Every kind, built for `t`. Pure.
std::vector<HostileKind> all_kinds(const Targets& t);
// The kind named `name`; throws std::out_of_range when there is none.
HostileKind kind_named(const Targets& t, const std::string& name);

// Inserts `row` by hand (no SDK), with ordering key `key`, in `tx`; returns its id and
// message id. `legacy`: with last_error 'legacy row' (attempts 0), the relay state
// migration 0007's CHECK constraints exempt, i.e. a row as stored before them.
std::pair<long long, std::string> insert_row(pqxx::transaction_base& tx, const std::string& schema,
                                             const HostileRow& row, const std::string& key, bool legacy);

}  // namespace hostile
