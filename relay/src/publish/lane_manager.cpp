#include "publish/lane_manager.h"

#include <unistd.h>

#include <algorithm>
#include <pqxx/nontransaction>
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

void LaneManager::join(pqxx::connection_base& conn) {
  pqxx::nontransaction tx(conn);
  tx.exec_params("SELECT pg_advisory_lock_shared($1::int4, 0)", member_class_);
  joined_ = true;
}

int LaneManager::count_members(pqxx::connection_base& conn) {
  pqxx::nontransaction tx(conn);
  auto r = tx.exec_params1(
      "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
      "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
      "AND classid = $1::int4::oid AND objid = 0 AND objsubid = 2",
      member_class_);
  return std::max(1, r[0].as<int>());
}

LaneManager::Change LaneManager::rebalance(pqxx::connection_base& conn) {
  Change change;
  change.members = count_members(conn);
  change.fair_share = (lanes_ + change.members - 1) / change.members;
  pqxx::nontransaction tx(conn);
  // Give up the surplus first, highest lanes first, so a newcomer finds work.
  while (static_cast<int>(owned_.size()) > change.fair_share) {
    int lane = owned_.back();
    tx.exec_params("SELECT pg_advisory_unlock($1::int4, $2::int4)", lane_class_, lane);
    owned_.pop_back();
    change.released.push_back(lane);
  }
  // Then take free lanes up to the fair share, starting at this relay's offset.
  for (int i = 0; i < lanes_ && static_cast<int>(owned_.size()) < change.fair_share; ++i) {
    int lane = static_cast<int>((rotation_ + static_cast<unsigned>(i)) % static_cast<unsigned>(lanes_));
    if (std::binary_search(owned_.begin(), owned_.end(), lane)) continue;
    auto r = tx.exec_params1("SELECT pg_try_advisory_lock($1::int4, $2::int4)", lane_class_, lane);
    if (!r[0].as<bool>()) continue;
    owned_.insert(std::upper_bound(owned_.begin(), owned_.end(), lane), lane);
    change.taken.push_back(lane);
  }
  return change;
}

}  // namespace relay
