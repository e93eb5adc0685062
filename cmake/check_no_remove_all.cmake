# No std::filesystem::remove_all in ptrain's sources: with PyPI's LibTorch, libtorch.so's exported
# copy of remove_all jumps to address 0 inside any non-empty directory
# (core/checkpoint/remove_tree.h). CI builds against Debian's LibTorch, where
# nothing would show it; the ctest `no_filesystem_remove_all` runs this:
#   cmake -DSOURCE_DIR=<checkout> -P cmake/check_no_remove_all.cmake
cmake_minimum_required(VERSION 3.18)
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "check_no_remove_all: give -DSOURCE_DIR=<checkout>")
endif()
set(listing "")
foreach(top core sdk plugins testing tests bench examples fuzz)
  file(GLOB_RECURSE sources "${SOURCE_DIR}/${top}/*.cpp" "${SOURCE_DIR}/${top}/*.h" "${SOURCE_DIR}/${top}/*.hpp")
  foreach(source IN LISTS sources)
    file(READ "${source}" content)
    string(REGEX MATCH "remove_all[ ]*\\(" hit "${content}")
    if(hit)
      file(RELATIVE_PATH relative "${SOURCE_DIR}" "${source}")
      string(APPEND listing "\n  ${relative}")
    endif()
  endforeach()
endforeach()
if(listing)
  message(FATAL_ERROR "std::filesystem::remove_all in these sources; use "
                      "ptrain::checkpoint::remove_tree (core/checkpoint/remove_tree.h says why):${listing}")
endif()
