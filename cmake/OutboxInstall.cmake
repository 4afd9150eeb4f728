# cmake --install BUILD --prefix P: what goes where (GNUInstallDirs), by component.
#   relay: bin/outbox-relay, bin/outbox-keys, the systemd unit, share/outbox-relay/{migrations,events,
#          roles.sql}, share/doc/outbox-relay/examples/*.yaml, the operator's documents,
#          share/man/man1/outbox-{relay,keys}.1.gz (and, with OUTBOX_BUILD_SHARED, the
#          versioned shared libraries the binary needs)
#   dev:   include/outbox/..., the libraries, lib/cmake/OutboxRelay/ (the CMake
#          package: find_package(OutboxRelay 0.1)), lib/pkgconfig/outbox-*.pc, the
#          SDK's documents
#   both:  share/doc/PACKAGE/{copyright,changelog.Debian.gz,changelog.gz}
#          (cmake/OutboxDebianFiles.cmake)
# The two components are the two Debian packages (cmake/OutboxPackaging.cmake).
include(CMakePackageConfigHelpers)

set(OUTBOX_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/OutboxRelay)
set(OUTBOX_DATA_DIR ${CMAKE_INSTALL_DATADIR}/outbox-relay)
set(OUTBOX_DOC_DIR ${CMAKE_INSTALL_DATAROOTDIR}/doc/outbox-relay)

# --- the relay and its files ---
install(TARGETS outbox-relay outbox-keys RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT relay)
# A stripping install (cmake --install --strip, and cpack: CPACK_STRIP_FILES) also drops
# the .comment section (compiler versions), as Debian's dh_strip does (lintian:
# binary-has-unneeded-section).
install(CODE "
  if(CMAKE_INSTALL_DO_STRIP)
    foreach(program outbox-relay outbox-keys)
      execute_process(COMMAND \"${CMAKE_OBJCOPY}\" --remove-section=.comment
                              \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/\${program}\"
                      COMMAND_ERROR_IS_FATAL ANY)
    endforeach()
  endif()
  " COMPONENT relay)
install(DIRECTORY schema/migrations schema/events DESTINATION ${OUTBOX_DATA_DIR} COMPONENT relay)
install(FILES schema/roles.sql DESTINATION ${OUTBOX_DATA_DIR} COMPONENT relay)
install(FILES deploy/systemd/relay.yaml DESTINATION ${OUTBOX_DOC_DIR}/examples COMPONENT relay)
install(FILES deploy/local/relay.yaml DESTINATION ${OUTBOX_DOC_DIR}/examples RENAME relay-local.yaml
        COMPONENT relay)
# copyright, changelogs, documents and man pages of both packages:
include(${CMAKE_CURRENT_LIST_DIR}/OutboxDebianFiles.cmake)
# The unit runs the relay from where this install put it: deploy/systemd names
# /usr/local/bin (a hand install); the install prefix is only known at install time
# (cpack installs with the prefix /usr).
install(CODE "
  file(READ \"${PROJECT_SOURCE_DIR}/deploy/systemd/outbox-relay.service\" unit)
  string(REPLACE \"/usr/local/bin/outbox-relay\" \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/outbox-relay\"
         unit \"\${unit}\")
  file(WRITE \"${PROJECT_BINARY_DIR}/install/outbox-relay.service\" \"\${unit}\")
  file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/lib/systemd/system\" TYPE FILE
       PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
       FILES \"${PROJECT_BINARY_DIR}/install/outbox-relay.service\")
  " COMPONENT relay)

# --- the SDK: libraries, headers, CMake package ---
get_property(outbox_sdk_targets GLOBAL PROPERTY OUTBOX_SDK_TARGETS)
install(TARGETS ${outbox_sdk_targets} EXPORT OutboxRelayTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT relay NAMELINK_COMPONENT dev
  FILE_SET HEADERS DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
# A stripping install takes the debug information out of the static archives, as
# dh_strip does (lintian: unstripped-static-library); their symbols stay for linking.
if(NOT OUTBOX_BUILD_SHARED)
  foreach(target IN LISTS outbox_sdk_targets)
    install(CODE "
      if(CMAKE_INSTALL_DO_STRIP)
        execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-debug --remove-section=.comment --remove-section=.note
                                --enable-deterministic-archives
                                \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/$<TARGET_FILE_NAME:${target}>\"
                        COMMAND_ERROR_IS_FATAL ANY)
      endif()
      " COMPONENT dev)
  endforeach()
endif()
install(EXPORT OutboxRelayTargets NAMESPACE outbox:: FILE OutboxRelayTargets.cmake
        DESTINATION ${OUTBOX_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(cmake/OutboxRelayConfig.cmake.in
  ${PROJECT_BINARY_DIR}/install/OutboxRelayConfig.cmake INSTALL_DESTINATION ${OUTBOX_CMAKE_DIR})
# 0.x: only the same 0.MINOR is compatible (find_package(OutboxRelay 0.1) takes 0.1.z).
write_basic_package_version_file(${PROJECT_BINARY_DIR}/install/OutboxRelayConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/install/OutboxRelayConfig.cmake
              ${PROJECT_BINARY_DIR}/install/OutboxRelayConfigVersion.cmake
        DESTINATION ${OUTBOX_CMAKE_DIR} COMPONENT dev)

# --- pkg-config files, one per library, for builds without CMake ---
# outbox_pkg_config(NAME LIBS REQUIRES REQUIRES_PRIVATE LIBS_PRIVATE): the private
# parts move into Requires/Libs when the libraries are static archives, since the
# application's link then needs them.
file(RELATIVE_PATH OUTBOX_PC_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
string(REGEX REPLACE "/$" "" OUTBOX_PC_PREFIX "${OUTBOX_PC_PREFIX}")
function(outbox_pkg_config name description libs requires requires_private libs_private)
  if(NOT OUTBOX_BUILD_SHARED)
    string(JOIN " " requires ${requires_private} ${requires})  # dependents before dependencies
    string(JOIN " " libs ${libs} ${libs_private})
    set(requires_private "")
    set(libs_private "")
  endif()
  set(PC_NAME ${name})
  set(PC_DESCRIPTION ${description})
  set(PC_LIBS ${libs})
  set(PC_REQUIRES ${requires})
  set(PC_REQUIRES_PRIVATE ${requires_private})
  set(PC_LIBS_PRIVATE ${libs_private})
  configure_file(${PROJECT_SOURCE_DIR}/cmake/outbox.pc.in ${PROJECT_BINARY_DIR}/install/${name}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/install/${name}.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
endfunction()
outbox_pkg_config(outbox-common "outbox-relay SDK: message ids, identifiers, migrator, embedded schema"
  "-loutbox_common -loutbox_schema_sql" "libpqxx libpq spdlog" "fmt libcrypto" "")
outbox_pkg_config(outbox-crypto "outbox-relay SDK: field encryption and event schemas"
  "-loutbox_crypto" "outbox-common libpqxx nlohmann_json" "libcrypto yaml-cpp" "")
outbox_pkg_config(outbox-amqp "outbox-relay SDK: the rabbitmq-c connection layer"
  "-loutbox_amqp" "librabbitmq" "outbox-common libssl libcrypto" "")
outbox_pkg_config(outbox-producer "outbox-relay producer SDK: enqueue events in your own transaction"
  "-loutbox_producer" "outbox-crypto outbox-common libpqxx nlohmann_json" "" "")
outbox_pkg_config(outbox-consumer "outbox-relay consumer SDK: inbox, idempotent writes, AMQP runner"
  "-loutbox_consumer" "outbox-crypto outbox-common libpqxx" "outbox-amqp librabbitmq spdlog fmt"
  "-lboost_system -pthread")
