#include "ledger_check.h"

#include <pqxx/pqxx>

namespace chaos {
namespace {

struct Row {
  std::string type;
  bool published = false, parked = false;
};

void sample(CheckResult& r, const std::string& what, const std::string& id) {
  if (r.samples.size() < 20) r.samples.push_back(what + ": " + id);
}

void require_zero(CheckResult& r, std::uint64_t value, const std::string& what) {
  if (value != 0) r.failures.push_back(what + ": " + std::to_string(value) + " (must be 0)");
}

}  // namespace

CheckResult check_ledger(const std::string& dsn, const std::string& schema, const Ledger& ledger,
                         const std::unordered_set<std::string>& rolled_back,
                         const std::unordered_set<std::string>& deliverable, std::uint64_t max_duplicates) {
  CheckResult r;
  const auto receipts = ledger.snapshot();
  r.deliveries = ledger.deliveries();
  r.received = receipts.size();

  std::unordered_map<std::string, Row> rows;
  pqxx::connection conn(dsn);
  pqxx::read_transaction tx(conn);
  auto result = tx.exec(
      "SELECT message_id::text, message_type, published_at IS NOT NULL, parked_at IS NOT NULL, "
      "coalesce(last_error, '') <> '', deliver_at IS NOT NULL, coalesce(published_at < deliver_at, false) FROM "
      "\"" +
      schema + "\".outbox");
  rows.reserve(result.size());
  for (const auto& f : result) {
    std::string id = f[0].c_str();
    Row row{f[1].c_str(), f[2].as<bool>(), f[3].as<bool>()};
    bool has_reason = f[4].as<bool>();
    r.scheduled += f[5].as<bool>();
    if (f[6].as<bool>()) {
      ++r.early;
      sample(r, "published before its deliver_at", id);
    }
    bool ok_type = deliverable.count(row.type) > 0;
    bool got = receipts.count(id) > 0;
    ++r.rows;
    r.published += row.published;
    r.parked += row.parked;
    if (!row.published && !row.parked) {
      ++r.pending;
      sample(r, "pending", id);
    }
    if (rolled_back.count(id)) {
      ++r.rolled_back_in_table;
      sample(r, "rolled back but in the table", id);
    }
    if (row.parked && !has_reason) {
      ++r.parked_without_reason;
      sample(r, "parked without a reason", id);
    }
    if (ok_type) {
      if (!got) {
        ++r.lost;
        sample(r, "lost (" + row.type + ")", id);
        if (row.published) ++r.published_not_received;
      }
      if (row.parked) {
        ++r.wrongly_parked;
        sample(r, "deliverable but parked (" + row.type + ")", id);
      }
    } else if (row.published) {
      ++r.poison_published;
      sample(r, "poison row marked published (" + row.type + ")", id);
    }
    rows.emplace(std::move(id), std::move(row));
  }

  for (const auto& [id, receipt] : receipts) {
    auto it = rows.find(id);
    if (it == rows.end() || !deliverable.count(it->second.type)) {
      ++r.unexpected;
      sample(r, rolled_back.count(id) ? "received from a rolled-back transaction" : "unexpected", id);
    }
    if (receipt.fresh > 1) {
      r.duplicates += static_cast<std::uint64_t>(receipt.fresh - 1);
      ++r.duplicated_rows;
    }
  }

  require_zero(r, r.lost, "lost (committed, never received)");
  require_zero(r, r.unexpected, "unexpected (received, never committed or poison)");
  require_zero(r, r.pending, "rows neither published nor parked");
  require_zero(r, r.early, "rows published before their deliver_at");
  require_zero(r, r.parked_without_reason, "parked rows without last_error");
  require_zero(r, r.wrongly_parked, "deliverable rows left parked");
  require_zero(r, r.poison_published, "poison rows marked published");
  require_zero(r, r.rolled_back_in_table, "rows of rolled-back transactions in the table");
  if (r.duplicates > max_duplicates)
    r.failures.push_back("duplicates: " + std::to_string(r.duplicates) + " exceed what the faults allow (" +
                         std::to_string(max_duplicates) + ")");
  return r;
}

}  // namespace chaos
