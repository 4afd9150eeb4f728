#include "pg/pg_session.h"

#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include <functional>
#include <optional>

#include "outbox/one_line.h"
#include "outbox/pg_conninfo.h"
#include "outbox/secret_scrubber.h"
#include "pg/pg_error.h"

namespace relay {
namespace {

using ResultPtr = std::unique_ptr<PGresult, void (*)(PGresult*)>;

// The server's notices (a WARNING from a function, "there is no transaction in
// progress") would go to stderr by libpq's default; the relay logs instead.
void log_notice(void*, const char* message) { spdlog::debug("PostgreSQL notice: {}", outbox::one_line(message)); }

std::vector<const char*> c_strings(const PgSession::Params& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p.c_str());
  return values;
}

// Throws as PgSession's contract says unless `res` succeeded.
void check_result(PGconn* pg, const PGresult* res) {
  const auto status = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) return;
  const std::string message = outbox::one_line(res ? PQresultErrorMessage(res) : PQerrorMessage(pg));
  if (!res || PQstatus(pg) != CONNECTION_OK) throw PgError(PgError::Kind::kSessionLost, message);
  const char* state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
  throw PgError(PgError::Kind::kStatement, message, state ? state : "", true);
}

PGconn* open_session(PGconn* pg) {
  if (!pg || PQstatus(pg) != CONNECTION_OK)
    throw PgError(PgError::Kind::kSessionLost, "PostgreSQL session is not open");
  return pg;
}

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
  if (PQenterPipelineMode(pg) != 1) throw PgError(PgError::Kind::kSessionLost, outbox::one_line(PQerrorMessage(pg)));
  std::size_t queued = 0;
  for (const auto& send : sends) {
    if (send() != 1) return queued;
    ++queued;
  }
  return PQpipelineSync(pg) == 1 ? queued + 1 : queued;
}

}  // namespace

PgSession::PgSession(const std::string& dsn) {
  const auto info = outbox::PgConnInfo::parse(dsn);
  conn_ = PQconnectdb(info.to_string().c_str());
  if (!conn_) throw PgError(PgError::Kind::kSessionLost, "out of memory opening a PostgreSQL session");
  if (PQstatus(conn_) != CONNECTION_OK) {
    // libpq's text may quote parts of the connection string: never the password.
    const outbox::SecretScrubber scrubber({info.get("password").value_or("")});
    const std::string message = outbox::one_line(scrubber.scrub(PQerrorMessage(conn_)));
    PQfinish(conn_);
    conn_ = nullptr;
    throw PgError(PgError::Kind::kSessionLost, message);
  }
  PQsetNoticeProcessor(conn_, log_notice, nullptr);
}

PgSession::~PgSession() { PQfinish(conn_); }

bool PgSession::is_open() const { return conn_ && PQstatus(conn_) == CONNECTION_OK; }

bool PgSession::ssl_in_use() const { return conn_ && PQsslInUse(conn_) == 1; }

int PgSession::backend_pid() const { return conn_ ? PQbackendPID(conn_) : 0; }

std::string PgSession::endpoint() const {
  if (!conn_) return "(not connected)";
  auto text = [](const char* s) { return std::string(s && *s ? s : "?"); };
  return text(PQhost(conn_)) + ":" + text(PQport(conn_)) + "/" + text(PQdb(conn_));
}

namespace {

// Checks `raw` (PgSession's contract) and hands it to a PgResult.
PgResult checked(PGconn* pg, PGresult* raw) {
  ResultPtr res(raw, PQclear);
  check_result(pg, res.get());
  return PgResult(res.release());
}

}  // namespace

PgResult PgSession::exec(const std::string& sql, const Params& params, Format format) {
  PGconn* pg = open_session(conn_);
  const auto values = c_strings(params);
  return checked(pg, PQexecParams(pg, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                                  nullptr, static_cast<int>(format)));
}

PgResult PgSession::exec_prepared(const std::string& name, const Params& params, Format format) {
  PGconn* pg = open_session(conn_);
  const auto values = c_strings(params);
  return checked(pg, PQexecPrepared(pg, name.c_str(), static_cast<int>(values.size()), values.data(), nullptr, nullptr,
                                    static_cast<int>(format)));
}

void PgSession::prepare(const std::string& name, const std::string& sql) {
  PGconn* pg = open_session(conn_);
  checked(pg, PQprepare(pg, name.c_str(), sql.c_str(), 0, nullptr));
}

PgResult PgSession::begin_then(const std::string& name, const Params& params) {
  PGconn* pg = open_session(conn_);
  const auto values = c_strings(params);
  const bool sent =
      3 == send_pipeline(pg, {[&] { return PQsendQueryParams(pg, "BEGIN", 0, nullptr, nullptr, nullptr, nullptr, 0); },
                              [&] {
                                return PQsendQueryPrepared(pg, name.c_str(), static_cast<int>(values.size()),
                                                           values.data(), nullptr, nullptr, /*resultFormat=*/1);
                              }});
  auto results = sent ? pipeline_results(pg) : std::nullopt;
  if (!results || results->size() != 3 || PQexitPipelineMode(pg) != 1)
    throw PgError(PgError::Kind::kSessionLost, "PostgreSQL session lost in a BEGIN + " + name +
                                                   " pipeline: " + outbox::one_line(PQerrorMessage(pg)));
  check_result(pg, (*results)[0].get());  // BEGIN
  return checked(pg, (*results)[1].release());
}

std::size_t PgSession::exec_then_commit(const std::string& name, const Params& params) {
  PGconn* pg = open_session(conn_);
  const auto values = c_strings(params);
  const std::size_t queued =
      send_pipeline(pg, {[&] {
                           return PQsendQueryPrepared(pg, name.c_str(), static_cast<int>(values.size()), values.data(),
                                                      nullptr, nullptr, 0);
                         },
                         [&] { return PQsendQueryParams(pg, "COMMIT", 0, nullptr, nullptr, nullptr, nullptr, 0); }});
  // COMMIT never queued: nothing can have committed, and the session is unusable.
  if (queued < 2) throw PgError(PgError::Kind::kSessionLost, outbox::one_line(PQerrorMessage(pg)));
  auto results = pipeline_results(pg);
  if (!results || results->size() != 3 || PQexitPipelineMode(pg) != 1) {
    // COMMIT was on its way: it may or may not have reached the server and run.
    throw PgError(PgError::Kind::kInDoubt,
                  "PostgreSQL session lost during " + name + " + COMMIT: " + outbox::one_line(PQerrorMessage(pg)));
  }
  check_result(pg, (*results)[0].get());  // COMMIT was not run: the transaction is aborted
  check_result(pg, (*results)[1].get());  // COMMIT: the server ended the transaction without committing
  return PgResult((*results)[0].release()).affected_rows();
}

}  // namespace relay
