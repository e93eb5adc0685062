# The installed headers (the SDK and the conformance harness) cite what an
# install holds, docs/ of the repository, never the design notes outside it.
# Run by the ctest `sdk_citations`:
#   cmake -DSOURCE_DIR=. -P cmake/check_sdk_citations.cmake
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "usage: cmake -DSOURCE_DIR=<ptrain checkout> -P ${CMAKE_CURRENT_LIST_FILE}")
endif()
file(GLOB_RECURSE headers "${SOURCE_DIR}/sdk/include/*.h" "${SOURCE_DIR}/testing/include/*.h")
set(citing "")
foreach(header ${headers})
  file(STRINGS "${header}" lines REGEX "DESIGN\\.md|\\.\\./shared")
  if(lines)
    file(RELATIVE_PATH relative "${SOURCE_DIR}" "${header}")
    list(APPEND citing "${relative}: ${lines}")
  endif()
endforeach()
if(citing)
  string(REPLACE ";" "\n  " listed "${citing}")
  message(FATAL_ERROR "installed headers cite files an install does not hold; cite docs/ instead:\n  ${listed}")
endif()
