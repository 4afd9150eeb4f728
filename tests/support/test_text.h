#pragma once
// Text assertions' helpers: whether a text contains a part, and what a call's
// exception says. Header only; each test file says `using testenv::contains;`.

#include <doctest/doctest.h>

#include <concepts>
#include <string>
#include <string_view>
#include <utility>

namespace testenv {

// Whether `haystack` contains `needle` as bytes (an empty needle is in every text).
inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// what() of the E that `fn()` throws, or `if_none` when it returns normally.
// Exceptions that are not an E pass through (and fail the test case).
template <class E, class Fn>
std::string error_of(Fn&& fn, std::string_view if_none) {
  try {
    std::forward<Fn>(fn)();
  } catch (const E& e) {
    return e.what();
  }
  return std::string(if_none);
}

// what() of the E that `fn()` throws, after `inspect(e)` (further CHECKs on it);
// fails the test case (doctest FAIL) when it throws nothing.
template <class E, class Fn, class Inspect>
requires std::invocable<Inspect&, const E&> std::string error_of(Fn&& fn, Inspect&& inspect) {
  try {
    std::forward<Fn>(fn)();
  } catch (const E& e) {
    inspect(e);
    return e.what();
  }
  FAIL("expected an exception, the call threw none");
  return "";
}

// what() of the E that `fn()` throws; fails the test case when it throws nothing.
template <class E, class Fn>
std::string error_of(Fn&& fn) {
  return error_of<E>(std::forward<Fn>(fn), [](const E&) {});
}

}  // namespace testenv
