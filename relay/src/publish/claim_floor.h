#pragma once
// ClaimFloor: where the next unordered claim starts in the pending index.

#include <cstdint>
#include <limits>
#include <optional>

namespace relay {

// A claim made while other batches are in flight (pipeline_depth > 1, a backlog)
// steps, under FOR UPDATE SKIP LOCKED, over every row those batches hold, and over
// the rows the batches before them deleted or marked: dead, but not yet removable
// while a batch's transaction is open. In a delete-mode drain that was 2-5 µs of
// PostgreSQL CPU per message, a third of it (docs/PERFORMANCE.md, "Round four").
// Such a claim starts after the highest id in flight instead.
//
// Rows below that floor that became due meanwhile (a producer transaction that
// committed after a higher id, a retry whose backoff ran out, the rows of a relay
// that died) are taken by the next claim from the start: every `full_every`-th
// claim made behind a batch in flight, and every claim made with nothing in flight.
// Only a backlog uses floors (the relay claims behind a batch only when its claim
// was full), so they wait a few batches there, and not at all when the relay is
// caught up. A floored claim that finds nothing is followed at once by one from
// the start (RelayLoop::claim_batch), so a floor never makes a relay idle.
//
// Pure policy; not thread-safe (the relay loop's thread).
class ClaimFloor {
 public:
  // No floor: the claim starts at the lowest pending id, whatever it is (a row
  // written by hand may carry any bigint).
  static constexpr std::int64_t kFromStart = std::numeric_limits<std::int64_t>::min();

  // REQUIRES: full_every >= 1 (1: every claim from the start, no floors at all).
  explicit ClaimFloor(int full_every);

  // The lowest id the next claim may take. `highest_in_flight`: the highest id of
  // the batches in flight, nullopt when none is.
  std::int64_t next(std::optional<std::int64_t> highest_in_flight);

 private:
  int full_every_;
  int floored_in_a_row_ = 0;
};

}  // namespace relay
