#include "pg/lane_manager.h"

#include <unistd.h>

#include <algorithm>
#include <random>

namespace relay {
namespace {

std::int32_t class_id(const std::string& text) {
  std::uint32_t h = 2166136261u;
  for (unsigned char c : text) h = (h ^ c) * 16777619u;
  return static_cast<std::int32_t>(h & 0x7fffffffu);
}

}  // namespace

LaneManager::LaneManager(const std::string& schema, int lanes)
    : lanes_(lanes),
      lane_class_(class_id("outbox-lane:" + schema)),
      member_class_(class_id("outbox-member:" + schema)),
      rotation_(std::random_device{}()) {}

std::string LaneManager::lane_sql(const std::string& key_expr, const std::string& lanes_param) {
  return "((hashtext(" + key_expr + ") & 2147483647) % " + lanes_param + ")";
}

void LaneManager::join(PgSession& session) {
  session.exec("SELECT pg_advisory_lock_shared($1::int4, 0)", {std::to_string(member_class_)});
  joined_ = true;
}

int LaneManager::count_members(PgSession& session) {
  const auto r = session.exec(
      "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
      "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
      "AND classid = $1::int4::oid AND objid = 0 AND objsubid = 2",
      {std::to_string(member_class_)});
  return static_cast<int>(std::max<std::int64_t>(1, r.int8(0, 0)));
}

LaneManager::Change LaneManager::rebalance(PgSession& session) {
  Change change;
  change.members = count_members(session);
  change.fair_share = (lanes_ + change.members - 1) / change.members;
  // Give up the surplus first, highest lanes first, so a newcomer finds work.
  while (static_cast<int>(owned_.size()) > change.fair_share) {
    int lane = owned_.back();
    session.exec("SELECT pg_advisory_unlock($1::int4, $2::int4)", {std::to_string(lane_class_), std::to_string(lane)});
    owned_.pop_back();
    change.released.push_back(lane);
  }
  // Then take free lanes up to the fair share, starting at this relay's offset.
  for (int i = 0; i < lanes_ && static_cast<int>(owned_.size()) < change.fair_share; ++i) {
    int lane = static_cast<int>((rotation_ + static_cast<unsigned>(i)) % static_cast<unsigned>(lanes_));
    if (std::binary_search(owned_.begin(), owned_.end(), lane)) continue;
    const auto r = session.exec("SELECT pg_try_advisory_lock($1::int4, $2::int4)",
                                {std::to_string(lane_class_), std::to_string(lane)});
    if (!r.boolean(0, 0)) continue;
    owned_.insert(std::upper_bound(owned_.begin(), owned_.end(), lane), lane);
    change.taken.push_back(lane);
  }
  return change;
}

}  // namespace relay
