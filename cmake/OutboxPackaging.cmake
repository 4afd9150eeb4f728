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
set(CPACK_PACKAGE_CONTACT "outbox-relay maintainers <outbox-relay@example.com>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# Each package's synopsis is the first line of its CPACK_DEBIAN_<COMPONENT>_DESCRIPTION:
# CPackDeb prepends the project-wide summary unless it is left at CPack's own default.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CMAKE_PROJECT_NAME} built using CMake")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)  # the executable; static archives keep their symbols
set(CPACK_COMPONENTS_ALL relay dev)
set(CPACK_DEB_COMPONENT_INSTALL ON)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # NAME_VERSION-RELEASE_ARCH.deb
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE ${PROJECT_HOMEPAGE_URL})
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)  # quick to build; the archives are small

set(CPACK_DEBIAN_RELAY_PACKAGE_NAME outbox-relay)
set(CPACK_DEBIAN_RELAY_PACKAGE_SECTION net)
set(CPACK_DEBIAN_RELAY_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_RELAY_DESCRIPTION "Transactional outbox relay for PostgreSQL and RabbitMQ
outbox-relay claims committed outbox rows with SELECT ... FOR UPDATE SKIP LOCKED,
publishes them to RabbitMQ with publisher confirms and marks a row published only
after the broker acked it: at-least-once delivery, never an event of a rolled-back
transaction. Includes the systemd unit (not enabled), the schema migrations (also
built into the binary: outbox-relay migrate), least-privilege roles, event schemas
and example configurations under /usr/share/doc/outbox-relay/examples.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME liboutbox-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# What OutboxRelayConfig.cmake finds (and the .pc files require), by Debian name.
set(OUTBOX_DEV_DEPENDS libpqxx-dev librabbitmq-dev libssl-dev libyaml-cpp-dev nlohmann-json3-dev
    libfmt-dev libspdlog-dev libboost-system-dev pkg-config)
list(JOIN OUTBOX_DEV_DEPENDS ", " CPACK_DEBIAN_DEV_PACKAGE_DEPENDS)
if(OUTBOX_BUILD_SHARED)  # the versioned shared libraries ship with the relay package
  string(APPEND CPACK_DEBIAN_DEV_PACKAGE_DEPENDS ", outbox-relay (= ${PROJECT_VERSION}-1)")
  set(CPACK_DEBIAN_DEV_PACKAGE_RECOMMENDS "cmake")
else()
  set(CPACK_DEBIAN_DEV_PACKAGE_RECOMMENDS "cmake, outbox-relay (= ${PROJECT_VERSION}-1)")
endif()
set(CPACK_DEBIAN_DEV_DESCRIPTION "C++ SDK of outbox-relay (producer and consumer)
Headers, static libraries, the CMake package and pkg-config files of the
outbox-relay SDK: outbox::OutboxWriter enqueues events in the application's own
libpqxx transaction; the consumer SDK deduplicates with an inbox and runs an AMQP
consumer with one transaction per message. find_package(OutboxRelay 0.1) and
target_link_libraries(app PRIVATE outbox::producer), or pkg-config outbox-producer.")

include(CPack)
