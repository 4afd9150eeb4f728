#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// Encoders for PostgreSQL array literals, so a batch travels as one parameter per
// column (`unnest($1::text[], ...)`) instead of one statement per row.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace outbox::pg {

// {"a","b\"c",NULL}: every element quoted; backslashes and quotes escaped.
std::string text_array(const std::vector<std::optional<std::string>>& items);
std::string text_array(const std::vector<std::string>& items);
// {1,2,3}
std::string bigint_array(const std::vector<std::int64_t>& items);
// One bytea[] element per item, in hex form ("\\x0a1b").
std::string bytea_array(const std::vector<std::string_view>& items);

}  // namespace outbox::pg
