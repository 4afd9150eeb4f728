#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// Validated SQL identifiers for the configurable schema name.

#include <string>

namespace outbox {

// Returns `name` double-quoted for SQL after checking it is a plain lower-case
// identifier: [a-z_][a-z0-9_]{0,62}. Anything else (quotes, semicolons, spaces,
// upper case, Unicode) throws ValidationError naming `field` and the value, so a
// hostile name never reaches SQL text.
std::string quoted_identifier(const std::string& name, const std::string& field);

}  // namespace outbox
