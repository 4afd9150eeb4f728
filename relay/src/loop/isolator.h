#pragma once
// Isolator: which rows go out alone, and how many suspects go out per probe.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "pg/outbox_store.h"

namespace relay {

// When the broker closes the channel over one of several outstanding rows without
// saying which (FailurePolicy's kIsolate), those rows become suspects and go out
// again in probe groups, nothing else on the channel until a group is settled: a
// group acked in full is clean, a group that closes the channel is halved again
// (split()), until the row at fault closes it alone and is charged. n suspects cost
// at most 2n extra publishes of innocent rows and about 2 log2(n) round trips.
//
// Some rows go alone from the start (must_go_alone): a row refused before (the
// column refused_by_broker), a row bound for an exchange the broker refused lately
// (404, 403: each then costs one channel close instead of an isolation that
// republishes the innocent rows around it), and a suspect of an isolation that its
// batch's time limit cut short. The last two are remembered for 30 s, at most 1024
// of each (rows written by hand may name any number; past it the memory starts
// again).
//
// Pure: the caller passes the time. Thread safety: none; the loop's thread owns it.
class Isolator {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kMemory{30};
  static constexpr std::size_t kMaxRemembered = 1024;

  // Whether `row` goes alone; sets row.refused_before when it does.
  bool must_go_alone(ClaimedRow& row, Clock::time_point now);
  void exchange_refused(const std::string& exchange, Clock::time_point now);
  void isolation_cut_short(std::int64_t row_id, Clock::time_point now);

  // A probe (suspects, or a row that goes alone) is outstanding: nothing else goes
  // out until the broker settles it, so a channel close then points into it.
  bool solo() const { return solo_; }
  void set_solo(bool solo) { solo_ = solo; }
  // Suspects per probe group.
  std::size_t probe_size() const { return probe_size_; }
  // A close with `outstanding` rows out: the next groups are half that many.
  void split(std::size_t outstanding) { probe_size_ = (outstanding + 1) / 2; }
  // A row that goes alone makes a group of one.
  void alone() { probe_size_ = 1; }

  // Whether a refusal with this reason is the first of a run (log it at warn; a
  // missing exchange charges every row sent to it, once each).
  bool new_refusal(const std::string& reason);

 private:
  template <class Key>
  static void remember(std::map<Key, Clock::time_point>& memory, const Key& key, Clock::time_point now);
  template <class Key>
  static bool remembered(std::map<Key, Clock::time_point>& memory, const Key& key, Clock::time_point now);

  bool solo_ = false;
  std::size_t probe_size_ = 1;
  std::map<std::string, Clock::time_point> refusing_exchanges_;  // until when
  std::map<std::int64_t, Clock::time_point> lone_rows_;          // until when
  std::string last_refusal_;
};

}  // namespace relay
