#pragma once
// How the bench prints a figure: fixed decimals, no locale. Pure.

#include <cstdio>
#include <string>

namespace bench {

inline std::string fmt(double v, int decimals = 0) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace bench
