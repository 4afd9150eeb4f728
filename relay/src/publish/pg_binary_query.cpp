#include "publish/pg_binary_query.h"

#include <libpq-fe.h>

#include <pqxx/except>

#include "outbox/one_line.h"

namespace relay {
namespace {

// libpqxx 6.4 keeps its PGconn* behind a private accessor (its "gates" let only its
// own classes reach it). An explicit template instantiation may name a private
// member (C++17 [temp.explicit]/14), which is how we reach it without patching the
// library. libpqxx 7 has no such need: it takes a result format per statement.
using RawConnection = pqxx::internal::pq::PGconn* (pqxx::connection_base::*)() const;

RawConnection raw_connection_accessor();

template <RawConnection Member>
struct RawConnectionAccess {
  friend RawConnection raw_connection_accessor() { return Member; }
};
template struct RawConnectionAccess<&pqxx::connection_base::raw_connection>;

PGconn* raw(pqxx::connection_base& conn) { return (conn.*raw_connection_accessor())(); }

}  // namespace

struct PgBinaryQuery::Result {
  PGresult* res = nullptr;
  ~Result() { PQclear(res); }
};

PgBinaryQuery::PgBinaryQuery(pqxx::connection_base& conn, const std::string& sql,
                             const std::vector<std::string>& params)
    : result_(std::make_unique<Result>()) {
  PGconn* pg = raw(conn);
  if (!pg || PQstatus(pg) != CONNECTION_OK) throw pqxx::broken_connection("PostgreSQL session is not open");
  std::vector<const char*> values;
  for (const auto& p : params) values.push_back(p.c_str());
  result_->res = PQexecParams(pg, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                              nullptr, /*resultFormat=*/1);
  if (result_->res && PQresultStatus(result_->res) == PGRES_TUPLES_OK) return;
  const std::string message = outbox::one_line(result_->res ? PQresultErrorMessage(result_->res) : PQerrorMessage(pg));
  if (!result_->res || PQstatus(pg) != CONNECTION_OK) throw pqxx::broken_connection(message);
  const char* state = PQresultErrorField(result_->res, PG_DIAG_SQLSTATE);
  throw pqxx::sql_error(message, sql, state ? state : nullptr);
}

PgBinaryQuery::~PgBinaryQuery() = default;

int PgBinaryQuery::rows() const { return PQntuples(result_->res); }

int PgBinaryQuery::columns() const { return PQnfields(result_->res); }

bool PgBinaryQuery::is_null(int row, int column) const { return PQgetisnull(result_->res, row, column) != 0; }

std::string_view PgBinaryQuery::bytes(int row, int column) const {
  return {PQgetvalue(result_->res, row, column), static_cast<std::size_t>(PQgetlength(result_->res, row, column))};
}

std::int64_t PgBinaryQuery::int8(int row, int column) const {
  const auto b = bytes(row, column);
  if (b.size() != 8 || is_null(row, column))
    throw pqxx::conversion_error("column " + std::to_string(column) + ": not a binary bigint");
  std::uint64_t v = 0;
  for (unsigned char c : b) v = v << 8 | c;
  return static_cast<std::int64_t>(v);
}

}  // namespace relay
