#include "outbox/state_transition.h"

#include "outbox/errors.h"
#include "outbox/pg_array.h"
#include "outbox/sql_identifier.h"

namespace outbox {

StateTransition::StateTransition(const std::string& schema, const std::string& table, const std::string& key_column,
                                 const std::string& state_column) {
  std::string target = quoted_identifier(schema, "schema") + "." + quoted_identifier(table, "table");
  std::string key = quoted_identifier(key_column, "key_column");
  std::string state = quoted_identifier(state_column, "state_column");
  // $3 is untyped, so PostgreSQL casts it to the column's type (text or an enum).
  sql_ = "UPDATE " + target + " SET " + state + " = $3 WHERE " + key + " = $1 AND " + state +
         "::text = ANY($2::text[])";
}

std::string StateTransition::encode_states(const std::vector<std::string>& from) {
  if (from.empty()) throw ValidationError("from", "at least one expected state is needed");
  return pg::text_array(from);
}

}  // namespace outbox
