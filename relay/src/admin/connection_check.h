#pragma once
// One-shot connection checks for `check-config --connect`.

#include <ostream>

#include "config/config.h"

namespace relay {

// Connects once to PostgreSQL (and runs the start-up preflight: the outbox table
// exists, the role's privileges, TLS when required) and once to the broker (login,
// a confirm-mode channel), each within its configured connect timeout and without
// retrying, unlike `run`, which waits for servers that are not up yet. Prints one
// line per server to `out` (with amqp.uris, one per node and a count), errors on one
// line and without secrets. Returns true when PostgreSQL passed and at least one
// broker node did (a cluster with a node down still serves the relay).
bool check_connections(const RelayConfig& config, std::ostream& out);

}  // namespace relay
