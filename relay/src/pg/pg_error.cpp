#include "pg/pg_error.h"

#include <utility>

namespace relay {

PgError::PgError(Kind kind, const std::string& what, std::string sqlstate, bool session_open)
    : std::runtime_error(what), kind_(kind), sqlstate_(std::move(sqlstate)), session_open_(session_open) {}

const char* PgError::name(Kind kind) {
  switch (kind) {
    case Kind::kSessionLost: return "session lost";
    case Kind::kStatement: return "statement refused";
    case Kind::kInDoubt: return "in doubt";
    case Kind::kUsage: return "usage";
  }
  return "?";
}

}  // namespace relay
