#pragma once
// LedgerCheck: compares what the consumers received with the outbox table.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ledger.h"

namespace chaos {

struct CheckResult {
  std::uint64_t rows = 0;             // committed outbox rows (the table is the truth)
  std::uint64_t published = 0;        // rows with published_at
  std::uint64_t parked = 0;           // rows with parked_at
  std::uint64_t pending = 0;          // neither: must be 0 at the end
  std::uint64_t received = 0;         // distinct message ids received
  std::uint64_t deliveries = 0;       // all deliveries, redeliveries included
  std::uint64_t lost = 0;             // committed, deliverable, never received
  std::uint64_t unexpected = 0;       // received but not committed, rolled back, or poison
  std::uint64_t duplicates = 0;       // extra copies the relay published (sum of fresh - 1)
  std::uint64_t duplicated_rows = 0;  // rows received more than once
  std::uint64_t parked_without_reason = 0;
  std::uint64_t wrongly_parked = 0;    // deliverable rows left parked
  std::uint64_t poison_published = 0;  // unroutable/missing-exchange rows marked published
  std::uint64_t rolled_back_in_table = 0;
  std::uint64_t published_not_received = 0;
  std::uint64_t scheduled = 0;        // rows with a deliver_at (scheduled delivery)
  std::uint64_t early = 0;            // published before their deliver_at: must be 0
  std::vector<std::string> failures;  // one line each; empty when every check passed
  std::vector<std::string> samples;   // a few offending ids, for debugging
};

// `deliverable`: message types that must reach the consumers; every other type is
// poison (must end parked, never received). `max_duplicates`: the bound allowed by
// the faults of the run.
// REQUIRES: the relays are stopped and the consumers idle.
CheckResult check_ledger(const std::string& dsn, const std::string& schema, const Ledger& ledger,
                         const std::unordered_set<std::string>& rolled_back,
                         const std::unordered_set<std::string>& deliverable, std::uint64_t max_duplicates);

}  // namespace chaos
