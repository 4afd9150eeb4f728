#pragma once
// ClaimFloorPolicy: where a claim made behind batches in flight starts.

#include <cstddef>

namespace relay {

// A claim made while other batches of this relay are in flight leaves out their id
// range (OutboxStore::claim_around): it claims below the range first (late commits,
// retries that came due), then above it. Deep in a backlog the part below is mostly
// the rows the last batch deleted or marked: dead, but still visited in the index
// and the heap by every claim while another batch's transaction is open. A claim that
// starts above the range instead (a "floor") costs PostgreSQL less per message, but
// used at every claim it makes a row that commits late, below the range, wait while
// the relay is caught up (both measured: docs/perf/NOTEBOOK.md, rounds four and nine).
//
// So floors are used only deep in a backlog: after kDeepAfter full claims in a row
// (a caught-up relay's claims are not full, and keep starting from the lowest id),
// and even then one claim in kFromLowestEvery starts from the lowest pending id, so
// a row committed late, or a retry that came due, below the range waits at most
// kFromLowestEvery claims (relay_scale_rmqtest checks it goes out).
//
// Thread safety: none; the relay loop's thread owns it.
class ClaimFloorPolicy {
 public:
  // Full claims in a row after which a claim behind batches in flight may start above them.
  static constexpr int kDeepAfter = 3;
  // Deep in a backlog, one claim in this many still starts from the lowest id.
  static constexpr int kFromLowestEvery = 4;

  enum class Start {
    kLowest,       // from the lowest due id (no batch in flight)
    kAroundRange,  // below the batches in flight, then above them
    kAboveRange,   // above the batches in flight only
  };

  // Where the next claim starts; `behind_batches`: batches of this relay are in flight.
  Start next_claim(bool behind_batches);
  // After every claim: the rows it returned and the limit it asked for (a failed
  // claim counts as 0 rows).
  void claimed(std::size_t rows, std::size_t limit);

 private:
  int full_claims_in_a_row_ = 0;
  int since_lowest_ = 0;  // claims since the last that started from the lowest id
};

}  // namespace relay
