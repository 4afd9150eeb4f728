#pragma once
// with_session_limits: a consumer-side PostgreSQL connection string with the limits
// a session needs so that a server that hangs cannot hold it for ever.

#include <chrono>
#include <string>

#include "outbox/pg_conninfo.h"

namespace outbox::detail {

// `info` with, where it sets none: application_name `name` (seen in
// pg_stat_activity); connect_timeout from `timeout` (whole seconds, at least 2, as
// libpq wants): a server or pooler that accepts the connection and never answers
// cannot hold the caller longer; and keepalives of 10 s idle, 3 probes 5 s apart
// (the relay's), so a host that vanished is noticed in about 25 s, not the system's
// two hours. Pure.
void set_session_limits(PgConnInfo& info, const std::string& name, std::chrono::milliseconds timeout);

}  // namespace outbox::detail
