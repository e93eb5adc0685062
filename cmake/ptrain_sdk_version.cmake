# Reads the SDK's semantic version and ABI version from the headers, which are
# their only source (ptrain/sdk/version.h, ptrain/sdk/plugin.h):
#   PTRAIN_SDK_VERSION      "MAJOR.MINOR.PATCH"
#   PTRAIN_SDK_ABI_VERSION  the integer the plugin loader checks
function(ptrain_read_sdk_version include_dir)
  file(STRINGS "${include_dir}/ptrain/sdk/version.h" version_lines REGEX "^#define PTRAIN_SDK_VERSION_(MAJOR|MINOR|PATCH) ")
  foreach(part MAJOR MINOR PATCH)
    string(REGEX MATCH "PTRAIN_SDK_VERSION_${part} ([0-9]+)" _ "${version_lines}")
    set(${part} ${CMAKE_MATCH_1})
  endforeach()
  file(STRINGS "${include_dir}/ptrain/sdk/plugin.h" abi_line REGEX "kAbiVersion = [0-9]+;")
  string(REGEX MATCH "kAbiVersion = ([0-9]+)" _ "${abi_line}")
  if(NOT DEFINED MAJOR OR "${CMAKE_MATCH_1}" STREQUAL "")
    message(FATAL_ERROR "cannot read the SDK version from ${include_dir}/ptrain/sdk/version.h and plugin.h")
  endif()
  set(PTRAIN_SDK_VERSION "${MAJOR}.${MINOR}.${PATCH}" PARENT_SCOPE)
  set(PTRAIN_SDK_ABI_VERSION "${CMAKE_MATCH_1}" PARENT_SCOPE)
endfunction()
