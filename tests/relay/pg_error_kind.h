#pragma once
// The kind of PgError a call throws, for tests of the relay's own PostgreSQL session.

#include <optional>

#include "pg/pg_error.h"

namespace relaytest {

// The kind of the PgError `call` throws; none when it throws nothing (any other
// exception escapes, and fails the test).
template <class Call>
std::optional<relay::PgError::Kind> pg_error_kind(Call&& call) {
  try {
    call();
  } catch (const relay::PgError& e) {
    return e.kind();
  }
  return std::nullopt;
}

}  // namespace relaytest
