# Debian packages (cpack -G DEB in the build folder), one per install component:
#   outbox-relay   the relay, its systemd unit, schema files and example configs
#   liboutbox-dev  headers, libraries, the CMake package and pkg-config files
# Installed under /usr. The relay's Depends come from dpkg-shlibdeps (the shared
# libraries it really loads); the dev package depends on the -dev packages an
# application needs to compile and link against the SDK (what OutboxRelayConfig.cmake
# and the .pc files look for). tests/package/ builds, installs and uses them.
# With OUTBOX_BUILD_SHARED the versioned shared libraries go into outbox-relay (its
# binary needs them) and liboutbox-dev depends on it; package_rmqtest checks the
# default, static configuration only.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME outbox-relay)
set(CPACK_PACKAGE_VENDOR "outbox-relay")
set(CPACK_PACKAGE_CONTACT "${OUTBOX_MAINTAINER}")  # cmake/OutboxDebianFiles.cmake
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# Each package's synopsis is the first line of its CPACK_DEBIAN_<COMPONENT>_DESCRIPTION:
# CPackDeb prepends the project-wide summary unless it is left at CPack's own default.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CMAKE_PROJECT_NAME} built using CMake")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)  # the executable; static archives keep their symbols
set(CPACK_COMPONENTS_ALL relay dev)
set(CPACK_DEB_COMPONENT_INSTALL ON)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # NAME_VERSION-RELEASE_ARCH.deb
set(CPACK_DEBIAN_PACKAGE_RELEASE ${OUTBOX_DEBIAN_REVISION})  # packaging/changelog's
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)  # quick to build; the archives are small

set(CPACK_DEBIAN_RELAY_PACKAGE_NAME outbox-relay)
set(CPACK_DEBIAN_RELAY_PACKAGE_SECTION net)
set(CPACK_DEBIAN_RELAY_PACKAGE_SHLIBDEPS ON)
# Descriptions: a synopsis (no article, no final full stop) and lines of at most 79
# characters (lintian: extended-description-line-too-long); package_rmqtest checks both.
set(CPACK_DEBIAN_RELAY_DESCRIPTION "transactional outbox relay from PostgreSQL to RabbitMQ
outbox-relay claims committed rows of an outbox table (SELECT ... FOR UPDATE
SKIP LOCKED), publishes them to RabbitMQ with publisher confirms and marks a
row published only after the broker acked it: at-least-once delivery, never
an event of a rolled-back transaction. outbox-keys rotates the master keys of
field encryption.
.
This package holds both programs and their man pages, the systemd unit (not
enabled), the schema migrations (also built into the binary: outbox-relay
migrate), least-privilege roles, event schemas, the operator's documents and
example configurations under /usr/share/doc/outbox-relay.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME liboutbox-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# What OutboxRelayConfig.cmake finds (and the .pc files require), by Debian name, each
# with how its ABI moves: the static SDK libraries in liboutbox-dev hold calls into the
# libraries this build compiled against, so the -dev packages must be of that release's
# series. "minor": the library's soname changes with the minor version (libpqxx-6.4 on
# Debian 12, libpqxx-7.10 on Debian 13; libspdlog1.10 / 1.15; libyaml-cpp0.7 / 0.8);
# "major": with the major version (libfmt9 / libfmt10); "any": a stable ABI (lower bound
# only); "-": headers or a tool, no bound. The bounds come from the versions installed on
# the machine that builds (dpkg-query), so a package made on Debian 13 asks for Debian
# 13's libpqxx-dev (>= 7.10.0, << 7.11~) and one made on Debian 12 for 6.4's; without
# dpkg-query, or for a library not installed from a package, the bare name.
# (The relay's own Depends come from dpkg-shlibdeps: the runtime packages of the
# shared libraries its binary loads, libpqxx-6.4 or libpqxx-7.10 and so on.)
set(OUTBOX_DEV_DEPENDS
  libpqxx-dev=minor librabbitmq-dev=any libssl-dev=any libyaml-cpp-dev=minor nlohmann-json3-dev=-
  libfmt-dev=major libspdlog-dev=minor libboost-system-dev=- pkgconf=-)
find_program(OUTBOX_DPKG_QUERY dpkg-query)
mark_as_advanced(OUTBOX_DPKG_QUERY)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "")
foreach(entry IN LISTS OUTBOX_DEV_DEPENDS)
  string(REPLACE "=" ";" entry "${entry}")
  list(GET entry 0 package)
  list(GET entry 1 series)
  set(depends "${package}")
  set(installed "")
  if(OUTBOX_DPKG_QUERY AND NOT series STREQUAL "-")
    execute_process(COMMAND ${OUTBOX_DPKG_QUERY} -W --showformat=\${db:Status-Abbrev}\${Version}\n ${package}
                    OUTPUT_VARIABLE installed ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    # "ii 7.10.0-2": installed (one line per architecture of a multi-arch package)
    if(installed MATCHES "^ii +([^\n]+)")
      set(installed "${CMAKE_MATCH_1}")
    else()
      set(installed "")
    endif()
  endif()
  if(installed)
    string(REGEX REPLACE "-[^-]*$" "" upstream "${installed}")  # without the Debian revision
    set(depends "${package} (>= ${upstream})")
    # epoch:major.minor... -> the first version of the next series, "~" sorting before
    # any release of it: 7.10.0-2 -> << 7.11~, 1:1.15.2+ds-2 -> << 1:1.16~, 10.1.1 -> << 11~
    if(installed MATCHES "^(([0-9]+):)?([0-9]+)\\.([0-9]+)" AND NOT series STREQUAL "any")
      set(epoch "${CMAKE_MATCH_1}")
      if(series STREQUAL "minor")
        math(EXPR next "${CMAKE_MATCH_4} + 1")
        set(next "${CMAKE_MATCH_3}.${next}")
      else()
        math(EXPR next "${CMAKE_MATCH_3} + 1")
      endif()
      string(APPEND depends ", ${package} (<< ${epoch}${next}~)")
    endif()
  endif()
  if(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS)
    string(APPEND CPACK_DEBIAN_DEV_PACKAGE_DEPENDS ", ")
  endif()
  string(APPEND CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${depends}")
endforeach()
# The headers are C++20 (include/outbox/cxx20.h stops an older mode with #error): GCC 12
# (Debian 12's g++) is the oldest compiler the SDK is built and tested with; any other
# C++ compiler (c++-compiler) must be run in C++20 mode.
set(OUTBOX_DEV_RECOMMENDS "cmake, g++ (>= 4:12) | c++-compiler")
set(OUTBOX_DEBIAN_VERSION "${PROJECT_VERSION}-${OUTBOX_DEBIAN_REVISION}")
if(OUTBOX_BUILD_SHARED)  # the versioned shared libraries ship with the relay package
  string(APPEND CPACK_DEBIAN_DEV_PACKAGE_DEPENDS ", outbox-relay (= ${OUTBOX_DEBIAN_VERSION})")
  set(CPACK_DEBIAN_DEV_PACKAGE_RECOMMENDS "${OUTBOX_DEV_RECOMMENDS}")
else()
  set(CPACK_DEBIAN_DEV_PACKAGE_RECOMMENDS "${OUTBOX_DEV_RECOMMENDS}, outbox-relay (= ${OUTBOX_DEBIAN_VERSION})")
endif()
set(CPACK_DEBIAN_DEV_DESCRIPTION "C++20 SDK of outbox-relay (producer and consumer)
Headers, static libraries, the CMake package and pkg-config files of the
outbox-relay SDK: outbox::OutboxWriter enqueues events in the application's
own libpqxx transaction; the consumer SDK deduplicates with an inbox and runs
an AMQP consumer with one transaction per message.
.
Use it with find_package(OutboxRelay 0.1) and target_link_libraries(app
PRIVATE outbox::producer), or with pkg-config outbox-producer. The headers
need a C++20 compiler (-std=c++20); they say so in older modes.")

include(CPack)
