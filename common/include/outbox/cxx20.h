#pragma once
// The first include of every public header of the SDK: an application compiled in
// an older language mode stops here, saying what to do, instead of at the first
// C++20 construct it meets (GCC 12 in C++17 mode: "types.h: declaration of
// 'operator<=' as non-function"). find_package(OutboxRelay) asks for C++20 by itself
// (the targets' INTERFACE_COMPILE_FEATURES hold cxx_std_20); pkg-config cannot.

#if !defined(__cplusplus) || __cplusplus < 202002L
#error "outbox-relay's SDK needs C++20: compile with -std=c++20 (or set CMAKE_CXX_STANDARD 20)"
#endif
