# ptrain_add_plugin(NAME LOGIC_SOURCES ... ENTRY_SOURCES ...)
#
# One algorithm plugin: a static logic library `<NAME>_logic` that unit tests
# link directly, and the MODULE `libptrain_plugin_<NAME>.so` that ptrain loads
# (found by name when it sits on the plugin path). Used by the bundled plugins
# (plugins/CMakeLists.txt) and, through find_package(ptrain), by plugins built
# out of tree against the installed SDK.
#
# In ptrain's own tree the module goes to the build's plugin directory, so the
# built `ptrain` finds it; out of tree it stays in the caller's build directory
# unless PTRAIN_PLUGIN_OUTPUT_DIR is set.
function(ptrain_add_plugin name)
  cmake_parse_arguments(ARG "" "" "LOGIC_SOURCES;ENTRY_SOURCES" ${ARGN})
  if(NOT ARG_LOGIC_SOURCES OR NOT ARG_ENTRY_SOURCES)
    message(FATAL_ERROR "ptrain_add_plugin(${name}): give LOGIC_SOURCES and ENTRY_SOURCES")
  endif()
  add_library(${name}_logic STATIC ${ARG_LOGIC_SOURCES})
  target_link_libraries(${name}_logic PUBLIC ptrain::sdk)
  target_include_directories(${name}_logic PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
  # The logic is linked into a shared module.
  set_target_properties(${name}_logic PROPERTIES POSITION_INDEPENDENT_CODE ON)

  add_library(ptrain_plugin_${name} MODULE ${ARG_ENTRY_SOURCES})
  target_link_libraries(ptrain_plugin_${name} PRIVATE ${name}_logic)
  # Only ptrain_plugin_info is exported: two plugins never resolve each other's symbols.
  set_target_properties(ptrain_plugin_${name} PROPERTIES
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(DEFINED PTRAIN_PLUGIN_OUTPUT_DIR)
    set_target_properties(ptrain_plugin_${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${PTRAIN_PLUGIN_OUTPUT_DIR})
  endif()

  # ptrain's own tree: its warnings and precompiled headers, and the list of
  # bundled plugins cmake/install.cmake installs.
  if(TARGET ptrain_warnings)
    target_link_libraries(${name}_logic PRIVATE ptrain_warnings)
    target_link_libraries(ptrain_plugin_${name} PRIVATE ptrain_warnings)
    set_property(GLOBAL APPEND PROPERTY PTRAIN_BUNDLED_PLUGINS ptrain_plugin_${name})
    if(PTRAIN_UNITY_BUILD)
      set_target_properties(${name}_logic PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
    endif()
  endif()
  if(COMMAND ptrain_use_pch)
    ptrain_use_pch(${name}_logic)
  endif()
endfunction()
