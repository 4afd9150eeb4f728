#pragma once
// Spelling: which known name a mistyped one probably meant.

#include <optional>
#include <string>
#include <vector>

namespace relay {

// The edit distance between `a` and `b`: insertions, deletions, substitutions and
// swaps of two neighbours each count 1 ("batch_sise" -> "batch_size" is 1, "dns" ->
// "dsn" is 1). Pure.
std::size_t edit_distance(const std::string& a, const std::string& b);

// The name of `known` nearest to `name`, when it is near enough to be a misspelling
// of it: at most 1 edit for names of up to 4 characters, 2 for longer ones, and
// unique at that distance (no guess between two). Pure.
std::optional<std::string> nearest_name(const std::string& name, const std::vector<std::string>& known);

}  // namespace relay
