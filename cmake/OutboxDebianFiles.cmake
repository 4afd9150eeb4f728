# The files Debian policy asks of every binary package, made at build time (target
# outbox-debian-files, part of `all`) into BUILD/debian and installed by component:
#   /usr/share/doc/PACKAGE/copyright             DEP-5 (machine-readable), from LICENSE
#   /usr/share/doc/PACKAGE/changelog.Debian.gz   packaging/changelog, gzip -9n
#   /usr/share/doc/PACKAGE/changelog.gz          CHANGELOG.md (the upstream changes)
#   /usr/share/doc/outbox-relay/*.md.gz          the operator's documents the relay, its
#                                                unit and its examples cite
#   /usr/share/doc/liboutbox-dev/*.md.gz         the SDK's documents
#   /usr/share/man/man1/outbox-{relay,keys}.1.gz from --help (help2man), with each
#                                                command's --help
#   /usr/share/lintian/overrides/PACKAGE         packaging/lintian/PACKAGE: the tags that
#                                                hold outside Debian, each with its reason
# Documents are compressed as debhelper's dh_compress would (policy 12.3: larger than
# 4 kB); messages and the unit name them by folder ("OPERATIONS.md in
# /usr/share/doc/outbox-relay"), which holds either way. tests/package/ checks them
# all, and lintian --pedantic on both packages.
set(OUTBOX_MAINTAINER "outbox-relay maintainers <outbox-relay@example.com>")  # packages, changelog, copyright
set(OUTBOX_DEBIAN_REVISION 1)  # the -1 of 0.1.0-1 (CPACK_DEBIAN_PACKAGE_RELEASE)
set(OUTBOX_DEB_DIR ${PROJECT_BINARY_DIR}/debian)
set(OUTBOX_MAN_DIR ${OUTBOX_DEB_DIR}/man)  # a MANPATH folder (deploy_files_test: the unit's man: page)
set(OUTBOX_RELAY_DOCS ARCHITECTURE CONFIGURATION ENCRYPTION OPERATIONS SECURITY SQL-CONTRACT UPGRADING)
set(OUTBOX_DEV_DOCS CONSUMER EMBEDDING SQL-CONTRACT)

# packaging/changelog names the version the packages carry: the two must agree (a
# release bumps both), or dpkg and lintian would see a changelog of another version.
file(STRINGS ${PROJECT_SOURCE_DIR}/packaging/changelog changelog_head LIMIT_COUNT 1)
set(wanted_version "${PROJECT_VERSION}-${OUTBOX_DEBIAN_REVISION}")
if(NOT changelog_head MATCHES "^outbox-relay \\(([^)]+)\\) ")
  message(FATAL_ERROR "packaging/changelog: the first line '${changelog_head}' is not "
                      "'outbox-relay (VERSION) DISTRIBUTION; urgency=...'")
elseif(NOT CMAKE_MATCH_1 STREQUAL wanted_version)
  message(FATAL_ERROR "packaging/changelog: the latest entry is version ${CMAKE_MATCH_1}, the packages are "
                      "${wanted_version} (project(VERSION) ${PROJECT_VERSION}): add an entry for ${wanted_version}")
endif()

find_program(OUTBOX_GZIP gzip REQUIRED)
find_program(OUTBOX_HELP2MAN help2man)
mark_as_advanced(OUTBOX_GZIP OUTBOX_HELP2MAN)

# copyright: DEP-5, one Files paragraph, the text of LICENSE (its own copyright line
# is the Copyright field; MIT is "Expat" in Debian's license names).
file(READ ${PROJECT_SOURCE_DIR}/LICENSE license_text)
if(NOT license_text MATCHES "^MIT License\n+Copyright \\(c\\) ([^\n]+)\n+(.*[^\n])\n*$")
  message(FATAL_ERROR "LICENSE: not the MIT License text with one 'Copyright (c) ...' line: "
                      "cmake/OutboxDebianFiles.cmake writes the Debian copyright file from it")
endif()
set(license_holder "${CMAKE_MATCH_1}")
set(license_body "${CMAKE_MATCH_2}")
string(REGEX REPLACE "\n\n" "\n.\n" license_body "${license_body}")  # DEP-5: an empty line is " ."
string(REPLACE "\n" "\n " license_body "${license_body}")
file(WRITE ${OUTBOX_DEB_DIR}/copyright
  "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
  "Upstream-Name: outbox-relay\n"
  "Upstream-Contact: ${OUTBOX_MAINTAINER}\n"
  "\n"
  "Files: *\n"
  "Copyright: ${license_holder}\n"
  "License: Expat\n"
  " ${license_body}\n")

set(outbox_debian_outputs "")
function(outbox_gzip in out)
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DGZIP=${OUTBOX_GZIP} -DIN=${in} -DOUT=${out} -P ${PROJECT_SOURCE_DIR}/cmake/OutboxGzip.cmake
    DEPENDS ${in} ${PROJECT_SOURCE_DIR}/cmake/OutboxGzip.cmake
    COMMENT "gzip -9n ${in}" VERBATIM)
  set(outbox_debian_outputs ${outbox_debian_outputs} ${out} PARENT_SCOPE)
endfunction()
outbox_gzip(${PROJECT_SOURCE_DIR}/packaging/changelog ${OUTBOX_DEB_DIR}/changelog.Debian.gz)
outbox_gzip(${PROJECT_SOURCE_DIR}/CHANGELOG.md ${OUTBOX_DEB_DIR}/changelog.gz)
set(outbox_doc_sources "")
foreach(doc IN LISTS OUTBOX_RELAY_DOCS OUTBOX_DEV_DOCS)
  if(NOT ${PROJECT_SOURCE_DIR}/docs/${doc}.md IN_LIST outbox_doc_sources)
    list(APPEND outbox_doc_sources ${PROJECT_SOURCE_DIR}/docs/${doc}.md)
    outbox_gzip(${PROJECT_SOURCE_DIR}/docs/${doc}.md ${OUTBOX_DEB_DIR}/doc/${doc}.md.gz)
  endif()
endforeach()

# Man pages. Their date is the changelog's (SOURCE_DATE_EPOCH, as dpkg-buildpackage
# sets it), so a rebuild gives the same page; without help2man there are none (a
# warning here; package_rmqtest fails).
file(READ ${PROJECT_SOURCE_DIR}/packaging/changelog changelog_text)
string(REGEX MATCH "\n -- [^\n]+" changelog_trailer "${changelog_text}")  # the latest entry's
string(STRIP "${changelog_trailer}" changelog_trailer)
string(FIND "${changelog_trailer}" "-- ${OUTBOX_MAINTAINER}  " at)
if(NOT at EQUAL 0 OR NOT changelog_trailer MATCHES "  [A-Z][a-z][a-z], ([0-9]+) ([A-Z][a-z][a-z]) ([0-9]+) ")
  message(FATAL_ERROR "packaging/changelog: the latest entry's trailer '${changelog_trailer}' is not "
                      "' -- ${OUTBOX_MAINTAINER}  DAY, DD MON YYYY HH:MM:SS +ZZZZ'")
endif()
set(day ${CMAKE_MATCH_1})
set(year ${CMAKE_MATCH_3})
set(months Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec)
list(FIND months ${CMAKE_MATCH_2} month)
# Noon of that day in seconds since 1970 (days_from_civil, H. Hinnant; month 0 = Jan).
if(month LESS 2)
  math(EXPR year "${year} - 1")
  math(EXPR month "${month} + 10")
else()
  math(EXPR month "${month} - 2")
endif()
math(EXPR era "${year} / 400")
math(EXPR yoe "${year} - ${era} * 400")
math(EXPR doe "${yoe} * 365 + ${yoe} / 4 - ${yoe} / 100 + (153 * ${month} + 2) / 5 + ${day} - 1")
math(EXPR OUTBOX_SOURCE_DATE_EPOCH "(${era} * 146097 + ${doe} - 719468) * 86400 + 43200")
if(DEFINED ENV{SOURCE_DATE_EPOCH})
  set(OUTBOX_SOURCE_DATE_EPOCH $ENV{SOURCE_DATE_EPOCH})
endif()

set(outbox_man_pages "")
if(OUTBOX_HELP2MAN)
  function(outbox_man_page target summary commands extra)
    set(out ${OUTBOX_MAN_DIR}/man1/${target}.1.gz)
    add_custom_command(OUTPUT ${out}
      COMMAND ${CMAKE_COMMAND} -E env SOURCE_DATE_EPOCH=${OUTBOX_SOURCE_DATE_EPOCH}
              ${CMAKE_COMMAND} -DPROGRAM=$<TARGET_FILE:${target}> -DNAME=${target} -DSUMMARY=${summary}
              -DVERSION=${PROJECT_VERSION} -DCOMMANDS=${commands} -DEXTRA=${extra}
              -DHELP2MAN=${OUTBOX_HELP2MAN} -DGZIP=${OUTBOX_GZIP} -DOUT=${out}
              -P ${PROJECT_SOURCE_DIR}/cmake/OutboxManPage.cmake
      DEPENDS ${target} ${extra} ${PROJECT_SOURCE_DIR}/cmake/OutboxManPage.cmake
      COMMENT "help2man ${target} -> ${target}.1.gz" VERBATIM)
    set(outbox_man_pages ${outbox_man_pages} ${out} PARENT_SCOPE)
  endfunction()
  file(MAKE_DIRECTORY ${OUTBOX_MAN_DIR}/man1)
  outbox_man_page(outbox-relay "publish committed outbox rows to RabbitMQ"
                  "run,migrate,check-config,status,replay,cleanup,dead,sequence-audit" ${PROJECT_SOURCE_DIR}/packaging/outbox-relay.h2m)
  outbox_man_page(outbox-keys "field-encryption master keys: check, rotate (rewrap), erase"
                  "check,status,rewrap,erase" ${PROJECT_SOURCE_DIR}/packaging/outbox-keys.h2m)
else()
  message(WARNING "help2man not found: no man pages for outbox-relay and outbox-keys, and the outbox-relay "
                  "package lacks them (apt-get install help2man; deploy/local/install-deps.sh does)")
endif()
add_custom_target(outbox-debian-files ALL DEPENDS ${outbox_debian_outputs} ${outbox_man_pages})

# --- installed by component ---
set(components relay dev)
set(packages outbox-relay liboutbox-dev)
foreach(component package IN ZIP_LISTS components packages)
  install(FILES ${OUTBOX_DEB_DIR}/copyright ${OUTBOX_DEB_DIR}/changelog.Debian.gz ${OUTBOX_DEB_DIR}/changelog.gz
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${package} COMPONENT ${component})
  # the few lintian tags that hold for a package made outside Debian, each with its reason
  install(FILES ${PROJECT_SOURCE_DIR}/packaging/lintian/${package}
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides COMPONENT ${component})
endforeach()
list(TRANSFORM OUTBOX_RELAY_DOCS REPLACE "(.+)" "${OUTBOX_DEB_DIR}/doc/\\1.md.gz" OUTPUT_VARIABLE relay_docs)
list(TRANSFORM OUTBOX_DEV_DOCS REPLACE "(.+)" "${OUTBOX_DEB_DIR}/doc/\\1.md.gz" OUTPUT_VARIABLE dev_docs)
install(FILES ${relay_docs} DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/outbox-relay COMPONENT relay)
install(FILES ${dev_docs} DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/liboutbox-dev COMPONENT dev)
if(outbox_man_pages)
  install(FILES ${outbox_man_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT relay)
endif()
