# ptrain_include_alone(<target> <name> <include dir>)
#
# Puts the header directory <include dir>/<name> (e.g. fmt, gloo) on
# <target>'s include path, ahead of every other and alone: through a
# build-tree directory that holds nothing but a link to it. For headers that
# lie beside others the compiler must not find there first: /usr/include
# cannot be moved ahead of LibTorch's include directory, and the unpacked
# .gpu-deps/usr/include holds another fmt than LibTorch's (docs/devices.md).
function(ptrain_include_alone target name include_dir)
  if(NOT EXISTS ${include_dir}/${name})
    message(FATAL_ERROR "ptrain_include_alone: ${include_dir}/${name} does not exist")
  endif()
  set(alone ${CMAKE_CURRENT_BINARY_DIR}/${target}_${name}_alone)
  file(MAKE_DIRECTORY ${alone})
  file(CREATE_LINK ${include_dir}/${name} ${alone}/${name} SYMBOLIC)
  target_include_directories(${target} SYSTEM BEFORE PRIVATE ${alone})
endfunction()
