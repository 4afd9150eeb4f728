# outbox_sdk_library(TARGET EXPORT_NAME [HEADERS_DIR DIR] SOURCES ...)
#
# One library of the SDK: what an application links through find_package(OutboxRelay)
# as outbox::EXPORT_NAME (the same alias inside the tree). Static or shared after
# OUTBOX_BUILD_SHARED (shared: SONAME liboutbox_X.so.MAJOR.MINOR, since a 0.x minor
# release may break the ABI); position-independent either way, so the static archives
# link into an application's own shared libraries too. HEADERS_DIR is the public
# include tree (every *.h under it is installed with the same path below include/);
# private headers stay next to the sources and are never installed.
function(outbox_sdk_library target export_name)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "HEADERS_DIR" "SOURCES")
  add_library(${target} ${OUTBOX_LIBRARY_TYPE} ${arg_SOURCES})
  add_library(outbox::${export_name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES
    EXPORT_NAME ${export_name}
    POSITION_INDEPENDENT_CODE ON
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
  target_compile_features(${target} PUBLIC cxx_std_20)
  if(arg_HEADERS_DIR)
    file(GLOB_RECURSE headers CONFIGURE_DEPENDS ${arg_HEADERS_DIR}/*.h)
    target_sources(${target} PUBLIC FILE_SET HEADERS BASE_DIRS ${arg_HEADERS_DIR} FILES ${headers})
  endif()
  set_property(GLOBAL APPEND PROPERTY OUTBOX_SDK_TARGETS ${target})
endfunction()
