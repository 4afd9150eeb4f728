# Hardening of everything this build compiles and links: what Debian's
# dpkg-buildflags gives a package (hardening=+all minus what glibc and GCC already
# default to), set here so a plain `cmake -B build` makes the same binaries as a
# package build and lintian finds nothing to report (hardening-no-fortify-functions,
# hardening-no-bindnow, hardening-no-pie):
#   -fstack-protector-strong    canaries in functions with arrays or address-taken locals
#   -D_FORTIFY_SOURCE=2         glibc's checked memcpy/snprintf/read... (__*_chk); it needs
#                               optimisation, so not in Debug (glibc warns there)
#   -Wl,-z,relro -Wl,-z,now     relocations read-only after start-up, resolved at load (BIND_NOW)
#   PIE                         CMAKE_POSITION_INDEPENDENT_CODE, checked with check_pie_supported
# The SDK's static archives get the same compile flags: their code ends up in the
# relay, and in the applications that link them.
# Flags the caller already chose win: a build that passes dpkg-buildflags' CXXFLAGS
# (with its own -D_FORTIFY_SOURCE, or -fstack-protector-strong) is not given a second,
# conflicting definition. OUTBOX_HARDENING=OFF leaves all of it out (e.g. for a
# sanitizer build, which does not mix with _FORTIFY_SOURCE).
option(OUTBOX_HARDENING "Build with Debian's hardening flags (fortify, stack protector, PIE, relro, bindnow)" ON)
if(NOT OUTBOX_HARDENING)
  return()
endif()
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "^(GNU|Clang)$")
  message(STATUS "OUTBOX_HARDENING: ${CMAKE_CXX_COMPILER_ID} is not GCC or Clang; no hardening flags added")
  return()
endif()

include(CheckPIESupported)
check_pie_supported(OUTPUT_VARIABLE outbox_pie_output LANGUAGES CXX)
if(NOT CMAKE_CXX_LINK_PIE_SUPPORTED)
  message(FATAL_ERROR "OUTBOX_HARDENING: the linker cannot make position-independent executables "
                      "(set OUTBOX_HARDENING=OFF to build without): ${outbox_pie_output}")
endif()
set(CMAKE_POSITION_INDEPENDENT_CODE ON)

string(TOUPPER "${CMAKE_BUILD_TYPE}" outbox_build_type)
set(outbox_caller_flags "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${outbox_build_type}}")
if(NOT outbox_caller_flags MATCHES "-fstack-protector")
  add_compile_options(-fstack-protector-strong)
endif()
if(NOT outbox_caller_flags MATCHES "_FORTIFY_SOURCE")
  # Any optimised configuration (a multi-config generator chooses at build time).
  add_compile_options($<$<NOT:$<CONFIG:Debug>>:-D_FORTIFY_SOURCE=2>)
endif()
add_link_options(LINKER:-z,relro LINKER:-z,now)
