#include "publish/pg_binary_query.h"

#include <libpq-fe.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>

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

namespace {

PGconn* open_session(pqxx::connection_base& conn) {
  PGconn* pg = raw(conn);
  if (!pg || PQstatus(pg) != CONNECTION_OK) throw pqxx::broken_connection("PostgreSQL session is not open");
  return pg;
}

std::vector<const char*> c_strings(const std::vector<std::string>& params) {
  std::vector<const char*> values;
  for (const auto& p : params) values.push_back(p.c_str());
  return values;
}

// Big-endian bytes of a fixed-size binary field, as an unsigned number.
std::uint64_t network_order(std::string_view b) {
  std::uint64_t v = 0;
  for (unsigned char c : b) v = v << 8 | c;
  return v;
}

// Throws as libpqxx would when the statement did not succeed.
void check_result(PGconn* pg, PGresult* res, const std::string& what) {
  const auto status = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) return;
  const std::string message = outbox::one_line(res ? PQresultErrorMessage(res) : PQerrorMessage(pg));
  if (!res || PQstatus(pg) != CONNECTION_OK) throw pqxx::broken_connection(message);
  const char* state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
  throw pqxx::sql_error(message, what, state ? state : nullptr);
}

}  // namespace

PgBinaryQuery::PgBinaryQuery(pqxx::connection_base& conn, const std::string& sql,
                             const std::vector<std::string>& params)
    : result_(std::make_unique<Result>()) {
  PGconn* pg = open_session(conn);
  const auto values = c_strings(params);
  result_->res = PQexecParams(pg, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                              nullptr, /*resultFormat=*/1);
  check(conn, sql);
}

PgBinaryQuery::PgBinaryQuery(pqxx::connection_base& conn, const Prepared& statement,
                             const std::vector<std::string>& params)
    : result_(std::make_unique<Result>()) {
  PGconn* pg = open_session(conn);
  const auto values = c_strings(params);
  result_->res = PQexecPrepared(pg, statement.name.c_str(), static_cast<int>(values.size()), values.data(), nullptr,
                                nullptr, /*resultFormat=*/1);
  check(conn, statement.name);
}

namespace {

using ResultPtr = std::unique_ptr<PGresult, void (*)(PGresult*)>;

// Reads a pipeline's results up to its sync, so that the session is idle again
// (each statement's result is followed by a NULL; several NULLs in a row mean nothing
// more will come). Returns them, the sync's last; nullopt if the sync never came.
std::optional<std::vector<ResultPtr>> pipeline_results(PGconn* pg) {
  std::vector<ResultPtr> results;
  for (int nulls = 0; nulls < 3 && PQstatus(pg) == CONNECTION_OK;) {
    PGresult* res = PQgetResult(pg);
    nulls = res ? 0 : nulls + 1;
    if (!res) continue;
    results.emplace_back(res, PQclear);
    if (PQresultStatus(res) == PGRES_PIPELINE_SYNC) return results;
  }
  return std::nullopt;
}

// Queues `sends` in one pipeline and sends it with its sync. Returns how many were
// queued; all of them and the sync went out if it returns sends.size() + 1.
std::size_t send_pipeline(PGconn* pg, const std::vector<std::function<int()>>& sends) {
  if (PQenterPipelineMode(pg) != 1) throw pqxx::broken_connection(outbox::one_line(PQerrorMessage(pg)));
  std::size_t queued = 0;
  for (const auto& send : sends) {
    if (send() != 1) return queued;
    ++queued;
  }
  return PQpipelineSync(pg) == 1 ? queued + 1 : queued;
}

}  // namespace

PgBinaryQuery::PgBinaryQuery(pqxx::connection_base& conn, const Prepared& statement,
                             const std::vector<std::string>& params, BeginFirst)
    : result_(std::make_unique<Result>()) {
  PGconn* pg = open_session(conn);
  const auto values = c_strings(params);
  const bool sent = 3 == send_pipeline(
      pg, {[&] { return PQsendQueryParams(pg, "BEGIN", 0, nullptr, nullptr, nullptr, nullptr, 0); },
           [&] {
             return PQsendQueryPrepared(pg, statement.name.c_str(), static_cast<int>(values.size()), values.data(),
                                        nullptr, nullptr, /*resultFormat=*/1);
           }});
  auto results = sent ? pipeline_results(pg) : std::nullopt;
  if (!results || results->size() != 3 || PQexitPipelineMode(pg) != 1)
    throw pqxx::broken_connection("PostgreSQL session lost in a BEGIN + claim pipeline: " +
                                  outbox::one_line(PQerrorMessage(pg)));
  check_result(pg, (*results)[0].get(), "BEGIN");
  result_->res = (*results)[1].release();
  check(conn, statement.name);
}

std::size_t PgBinaryQuery::exec_then_commit(pqxx::connection_base& conn, const Prepared& statement,
                                            const std::vector<std::string>& params) {
  PGconn* pg = open_session(conn);
  const auto values = c_strings(params);
  const std::size_t queued = send_pipeline(
      pg, {[&] {
             return PQsendQueryPrepared(pg, statement.name.c_str(), static_cast<int>(values.size()), values.data(),
                                        nullptr, nullptr, 0);
           },
           [&] { return PQsendQueryParams(pg, "COMMIT", 0, nullptr, nullptr, nullptr, nullptr, 0); }});
  // COMMIT never queued: nothing can have committed, and the session is unusable.
  if (queued < 2) throw pqxx::broken_connection(outbox::one_line(PQerrorMessage(pg)));
  auto results = pipeline_results(pg);
  if (!results || results->size() != 3 || PQexitPipelineMode(pg) != 1) {
    // COMMIT was on its way: it may or may not have reached the server and run.
    throw pqxx::in_doubt_error("PostgreSQL session lost during " + statement.name + " + COMMIT: " +
                               outbox::one_line(PQerrorMessage(pg)));
  }
  check_result(pg, (*results)[0].get(), statement.name);  // COMMIT was not run: the transaction is aborted
  check_result(pg, (*results)[1].get(), "COMMIT");       // the server ended the transaction without committing
  return static_cast<std::size_t>(std::strtoull(PQcmdTuples((*results)[0].get()), nullptr, 10));
}

void PgBinaryQuery::prepare(pqxx::connection_base& conn, const std::string& name, const std::string& sql) {
  PGconn* pg = open_session(conn);
  const std::unique_ptr<PGresult, void (*)(PGresult*)> res(PQprepare(pg, name.c_str(), sql.c_str(), 0, nullptr),
                                                           PQclear);
  check_result(pg, res.get(), sql);
}

void PgBinaryQuery::check(pqxx::connection_base& conn, const std::string& what) {
  check_result(raw(conn), result_->res, what);
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
  return static_cast<std::int64_t>(network_order(b));
}

std::int32_t PgBinaryQuery::int4(int row, int column) const {
  const auto b = bytes(row, column);
  if (b.size() != 4 || is_null(row, column))
    throw pqxx::conversion_error("column " + std::to_string(column) + ": not a binary integer");
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(network_order(b)));
}

double PgBinaryQuery::float8(int row, int column) const {
  const auto b = bytes(row, column);
  if (b.size() != 8 || is_null(row, column))
    throw pqxx::conversion_error("column " + std::to_string(column) + ": not a binary double precision");
  const std::uint64_t bits = network_order(b);
  double v;
  std::memcpy(&v, &bits, sizeof v);  // IEEE 754 binary64, as PostgreSQL sends it
  return v;
}

bool PgBinaryQuery::boolean(int row, int column) const {
  const auto b = bytes(row, column);
  if (b.size() != 1 || is_null(row, column))
    throw pqxx::conversion_error("column " + std::to_string(column) + ": not a binary boolean");
  return b[0] != 0;
}

std::string PgBinaryQuery::tid(int row, int column) const {
  const auto b = bytes(row, column);
  if (b.size() != 6 || is_null(row, column))
    throw pqxx::conversion_error("column " + std::to_string(column) + ": not a binary tid");
  const auto block = static_cast<std::uint32_t>(network_order(b.substr(0, 4)));
  const auto offset = static_cast<std::uint16_t>(network_order(b.substr(4, 2)));
  return "(" + std::to_string(block) + "," + std::to_string(offset) + ")";
}

int PgBinaryQuery::column(const char* name) const {
  const int n = PQfnumber(result_->res, name);
  if (n < 0) throw pqxx::usage_error(std::string("no column named ") + name + " in the result");
  return n;
}

}  // namespace relay
