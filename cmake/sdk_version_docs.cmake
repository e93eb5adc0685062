# The SDK version where a plugin author copies it from: docs/plugins.md
# (find_package(ptrain MAJOR.MINOR) in "Building" and the loader's ABI error)
# and examples/plugin_template/CMakeLists.txt. sdk/include/ptrain/sdk/version.h
# and plugin.h are the only source; this script writes their numbers into
# those files, or (ctest `sdk_version_docs`) fails when a file has others:
#   cmake -DSOURCE_DIR=. -DMODE=write -P cmake/sdk_version_docs.cmake   # after raising the version
#   cmake -DSOURCE_DIR=. -DMODE=check -P cmake/sdk_version_docs.cmake
if(NOT SOURCE_DIR OR NOT MODE MATCHES "^(check|write)$")
  message(FATAL_ERROR "usage: cmake -DSOURCE_DIR=<ptrain checkout> -DMODE=check|write -P ${CMAKE_CURRENT_LIST_FILE}")
endif()
include(${CMAKE_CURRENT_LIST_DIR}/ptrain_sdk_version.cmake)
ptrain_read_sdk_version(${SOURCE_DIR}/sdk/include)
string(REGEX MATCH "^[0-9]+\\.[0-9]+" major_minor "${PTRAIN_SDK_VERSION}")
math(EXPR previous_abi "${PTRAIN_SDK_ABI_VERSION} - 1")

set(stale "")
foreach(relative docs/plugins.md examples/plugin_template/CMakeLists.txt)
  set(path "${SOURCE_DIR}/${relative}")
  file(READ "${path}" text)
  string(REGEX REPLACE "find_package\\(ptrain [0-9]+\\.[0-9]+" "find_package(ptrain ${major_minor}" updated "${text}")
  # The loader's message for a plugin one ABI version behind (core/plugin/plugin_loader.cpp).
  string(REGEX REPLACE
         "built for SDK ABI version [0-9]+, this ptrain supports ABI version [0-9]+;\nrebuild the plugin against SDK [0-9]+\\.[0-9]+\\.[0-9]+"
         "built for SDK ABI version ${previous_abi}, this ptrain supports ABI version ${PTRAIN_SDK_ABI_VERSION};\nrebuild the plugin against SDK ${PTRAIN_SDK_VERSION}"
         updated "${updated}")
  if(NOT updated STREQUAL text)
    if(MODE STREQUAL "write")
      file(WRITE "${path}" "${updated}")
      message(STATUS "wrote SDK ${PTRAIN_SDK_VERSION} (ABI ${PTRAIN_SDK_ABI_VERSION}) into ${relative}")
    else()
      list(APPEND stale "${relative}")
    endif()
  endif()
endforeach()
if(stale)
  message(FATAL_ERROR "${stale}: not the SDK version of sdk/include/ptrain/sdk/version.h (${PTRAIN_SDK_VERSION}, "
                      "ABI ${PTRAIN_SDK_ABI_VERSION}); run cmake -DSOURCE_DIR=. -DMODE=write -P cmake/sdk_version_docs.cmake")
endif()
