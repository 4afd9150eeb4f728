// Order statistics for the report.
#include <algorithm>
#include <cmath>

#include "measurements.h"

namespace bench {
namespace {

// Nearest-rank percentile of sorted values.
double rank(const std::vector<double>& sorted, double p) {
  auto n = sorted.size();
  auto i = static_cast<std::size_t>(std::ceil(p * static_cast<double>(n)));
  return sorted[std::min(n, std::max<std::size_t>(i, 1)) - 1];
}

}  // namespace

Percentiles percentiles(std::vector<double> values) {
  Percentiles p;
  p.count = values.size();
  if (values.empty()) return p;
  std::sort(values.begin(), values.end());
  p.p50 = rank(values, 0.50);
  p.p99 = rank(values, 0.99);
  p.p999 = rank(values, 0.999);
  p.max = values.back();
  return p;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  auto n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace bench
