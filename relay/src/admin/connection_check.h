#pragma once
// One-shot connection checks for `check-config --connect`.

#include <ostream>

#include "config/config.h"

namespace relay {

// Connects once to PostgreSQL (and runs the start-up preflight: the outbox table
// exists, the role's privileges, TLS when required) and once to the broker (login,
// a confirm-mode channel), each within its configured connect timeout and without
// retrying, unlike `run`, which waits for servers that are not up yet. Prints one
// line per server to `out`, errors on one line and without secrets. Returns true
// when both checks passed.
bool check_connections(const RelayConfig& config, std::ostream& out);

}  // namespace relay
