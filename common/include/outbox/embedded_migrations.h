#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// The schema migrations compiled into the library (from schema/migrations/).

#include <string_view>
#include <vector>

namespace outbox {

struct EmbeddedMigration {
  int version;            // NNNN of the file name; applied in ascending order
  std::string_view name;  // the description part of the file name
  std::string_view sql;   // with {{schema}} placeholders
};

// All migrations, ordered by version.
const std::vector<EmbeddedMigration>& embedded_migrations();

}  // namespace outbox
