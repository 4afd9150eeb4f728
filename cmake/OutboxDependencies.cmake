# The libraries outbox-relay builds against, each with the range of versions it
# supports: Debian 12 (bookworm) gives the lower ends, Debian 13 (trixie) the tested
# upper ones. A version outside its range stops the configuration with an error
# naming the library, the version found and the range, instead of thousands of
# compiler errors later. The upper bounds are exclusive: the next major release of
# each (libpqxx 8 changes its API; the others are bounded where an API break is
# announced or untested).

# outbox_require_range(NAME FOUND MIN BELOW): FOUND must satisfy MIN <= FOUND < BELOW.
function(outbox_require_range name found min below)
  if(NOT found)
    message(FATAL_ERROR "${name}: found, but its version is unknown; outbox-relay supports ${min} <= version < ${below}")
  endif()
  if(found VERSION_LESS min OR NOT found VERSION_LESS below)
    message(FATAL_ERROR "${name} ${found} is not supported: outbox-relay needs ${min} <= version < ${below} "
                        "(Debian 12 and 13 ship versions inside it)")
  endif()
  message(STATUS "${name} ${found} (supported: ${min} <= version < ${below})")
endfunction()

find_package(PkgConfig REQUIRED)
pkg_check_modules(PQXX REQUIRED IMPORTED_TARGET libpqxx)
# libpqxx 6.4 (Debian 12) or 7.10 and later 7.x (Debian 13): 7.0-7.9 lack
# connection::seize_raw_connection(), which the consumer's watched connection needs.
if(PQXX_VERSION VERSION_GREATER_EQUAL 7.0 AND PQXX_VERSION VERSION_LESS 7.10)
  message(FATAL_ERROR "libpqxx ${PQXX_VERSION} is not supported: outbox-relay needs 6.4 <= version < 7.0 "
                      "or 7.10 <= version < 8.0 (Debian 12 ships 6.4, Debian 13 ships 7.10)")
endif()
outbox_require_range(libpqxx "${PQXX_VERSION}" 6.4 8.0)
# libpq 14 or later: the relay sends BEGIN with its claim and COMMIT with its mark in
# libpq pipelines (relay/src/pg/pg_session.cpp). Any server version works. Found once,
# here, as PkgConfig::PQ: the name OutboxRelayConfig.cmake.in gives it to the SDKs' users.
pkg_check_modules(PQ REQUIRED IMPORTED_TARGET libpq)
outbox_require_range(libpq "${PQ_VERSION}" 14 100)
pkg_check_modules(RABBITMQ REQUIRED IMPORTED_TARGET librabbitmq)
outbox_require_range(librabbitmq "${RABBITMQ_VERSION}" 0.11 0.16)
find_package(yaml-cpp REQUIRED)
outbox_require_range(yaml-cpp "${yaml-cpp_VERSION}" 0.7 0.9)
find_package(OpenSSL REQUIRED)
outbox_require_range(OpenSSL "${OPENSSL_VERSION}" 3.0 4.0)
find_package(nlohmann_json REQUIRED)
outbox_require_range(nlohmann_json "${nlohmann_json_VERSION}" 3.10 4.0)
find_package(spdlog REQUIRED)
outbox_require_range(spdlog "${spdlog_VERSION}" 1.10 1.16)
find_package(fmt REQUIRED)
outbox_require_range(fmt "${fmt_VERSION}" 9.0 11.0)
if(POLICY CMP0167)  # CMake 3.30+ (Debian 13): Boost's own BoostConfig.cmake, not the removed FindBoost
  cmake_policy(SET CMP0167 NEW)
endif()
find_package(Boost 1.74 REQUIRED COMPONENTS system)
outbox_require_range(Boost "${Boost_VERSION}" 1.74 1.89)
find_package(Threads REQUIRED)
find_package(CLI11 REQUIRED)  # outbox-keys' command line
outbox_require_range(CLI11 "${CLI11_VERSION}" 2.1 3.0)
if(OUTBOX_BUILD_TESTS)
  find_package(doctest REQUIRED)
  outbox_require_range(doctest "${doctest_VERSION}" 2.4 3.0)
endif()
