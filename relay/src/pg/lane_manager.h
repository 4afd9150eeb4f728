#pragma once
// LaneManager: which per-key ordering lanes this relay owns (ordering: per_key).

#include <cstdint>
#include <string>
#include <vector>

#include "pg/pg_session.h"

namespace relay {

// Ordering keys hash to one of `lanes` lanes; each lane is owned by exactly one
// relay at a time through a session-level PostgreSQL advisory lock held on the
// relay's own connection (the one it claims with). Every member also holds a
// shared "membership" advisory lock, so a relay can count the live members and
// take its fair share, ceil(lanes / members): it gives up surplus lanes so that a
// newly started relay gets work, and takes free lanes, including those of a dead
// relay, whose locks the server released with its session.
//
// The locks live and die with the connection: after a reconnect call forget() and
// join() again. Lanes are released only between batches, so rows of a lane are
// never in flight in two relays at once.
//
// Thread safety: none; used by the relay's loop thread only.
// REQUIRES: no transaction open on `conn` during join() and rebalance().
class LaneManager {
 public:
  LaneManager(const std::string& schema, int lanes);

  void join(PgSession& session);

  struct Change {
    int members = 0;     // live relays in the group (this one included)
    int fair_share = 0;  // ceil(lanes / members)
    std::vector<int> taken, released;
  };
  Change rebalance(PgSession& session);

  // The server released every lock with the session: own nothing until join().
  void forget() {
    owned_.clear();
    joined_ = false;
  }

  const std::vector<int>& owned() const { return owned_; }  // ascending
  int lanes() const { return lanes_; }
  bool joined() const { return joined_; }

  // The lane of an ordering key, as SQL computes it: (hashtext(key) & 2^31-1) % lanes.
  static std::string lane_sql(const std::string& key_expr, const std::string& lanes_param);

  // Advisory lock class ids, stable per schema (31-bit FNV-1a), shown in pg_locks.
  std::int32_t lane_class() const { return lane_class_; }
  std::int32_t member_class() const { return member_class_; }

 private:
  int count_members(PgSession& session);

  int lanes_;
  std::int32_t lane_class_, member_class_;
  std::vector<int> owned_;
  bool joined_ = false;
  unsigned rotation_;  // where this relay starts looking for free lanes
};

}  // namespace relay
