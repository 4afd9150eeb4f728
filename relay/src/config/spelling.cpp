#include "config/spelling.h"

#include <algorithm>
#include <numeric>

namespace relay {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  // Optimal string alignment: Levenshtein plus a swap of two neighbours.
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  std::iota(d[0].begin(), d[0].end(), 0);
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

std::optional<std::string> nearest_name(const std::string& name, const std::vector<std::string>& known) {
  const std::size_t limit = name.size() <= 4 ? 1 : 2;
  std::optional<std::string> best;
  std::size_t best_distance = limit + 1;
  bool tie = false;
  for (const auto& k : known) {
    if (k == name) continue;
    const auto distance = edit_distance(name, k);
    if (distance < best_distance) {
      best = k;
      best_distance = distance;
      tie = false;
    } else if (distance == best_distance && best && *best != k) {
      tie = true;
    }
  }
  if (!best || tie) return std::nullopt;
  return best;
}

}  // namespace relay
