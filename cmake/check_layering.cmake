# The layering rule, checked against every #include of the sources:
#   - a file in core/<component>/ includes "core/<other>/..." only when <other>
#     is one of the component's declared dependencies (DEPENDS in its
#     CMakeLists.txt, transitively);
#   - nothing under sdk/, plugins/ or examples/ includes "core/": plugins
#     compile against the SDK alone.
# The graph comes from the file ptrain_write_component_graph() writes at
# configure time. core/CMakeLists.txt runs the check while configuring; the
# ctest `layering` runs it again as a script, so an include added since the
# last configure is caught too:
#   cmake -DSOURCE_DIR=<checkout> -DGRAPH=<build>/cmake/ptrain_components.cmake -P cmake/check_layering.cmake
if(CMAKE_SCRIPT_MODE_FILE)
  cmake_minimum_required(VERSION 3.18)  # the project's policies (IN_LIST) in script mode too
endif()

# `out`: the components `component` may include, itself first.
function(ptrain_allowed_components component out)
  set(allowed ${component})
  set(pending ${PTRAIN_COMPONENT_DEPENDS_${component}})
  while(pending)
    list(POP_FRONT pending dependency)
    if(NOT dependency IN_LIST allowed)
      list(APPEND allowed ${dependency})
      list(APPEND pending ${PTRAIN_COMPONENT_DEPENDS_${dependency}})
    endif()
  endwhile()
  set(${out} ${allowed} PARENT_SCOPE)
endfunction()

# The 1-based number of the first line of `file` that is `line`.
function(ptrain_line_number file line out)
  file(READ "${file}" content)
  string(FIND "${content}" "${line}" offset)
  string(SUBSTRING "${content}" 0 ${offset} before)
  string(REGEX MATCHALL "\n" newlines "${before}")
  list(LENGTH newlines count)
  math(EXPR number "${count} + 1")
  set(${out} ${number} PARENT_SCOPE)
endfunction()

# Appends "path:line: #include ...: <why>" to the list named `result` for
# every include of "core/<c>/" in `files` whose <c> is not in `allowed`.
function(ptrain_scan_includes source_dir files allowed why result)
  set(found ${${result}})
  foreach(file IN LISTS files)
    file(STRINGS "${file}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]core/")
    foreach(include IN LISTS includes)
      string(REGEX MATCH "[\"<]core/([A-Za-z0-9_]+)/" _ "${include}")
      if(NOT CMAKE_MATCH_1 IN_LIST allowed)
        ptrain_line_number("${file}" "${include}" line)
        file(RELATIVE_PATH relative "${source_dir}" "${file}")
        string(STRIP "${include}" include)
        list(APPEND found "${relative}:${line}: ${include}: ${why}")
      endif()
    endforeach()
  endforeach()
  set(${result} ${found} PARENT_SCOPE)
endfunction()

function(ptrain_check_layering source_dir graph_file)
  include("${graph_file}")
  set(violations)
  foreach(component IN LISTS PTRAIN_COMPONENTS)
    ptrain_allowed_components(${component} allowed)
    list(JOIN allowed ", " allowed_text)
    file(GLOB_RECURSE files "${source_dir}/core/${component}/*.h" "${source_dir}/core/${component}/*.cpp")
    ptrain_scan_includes("${source_dir}" "${files}" "${allowed}"
      "${component} may include core/{${allowed_text}} only (DEPENDS in core/${component}/CMakeLists.txt)" violations)
  endforeach()
  foreach(area sdk plugins examples)
    file(GLOB_RECURSE files "${source_dir}/${area}/*.h" "${source_dir}/${area}/*.cpp")
    ptrain_scan_includes("${source_dir}" "${files}" "" "${area}/ must not include core/ (plugins build against the SDK alone)"
      violations)
  endforeach()
  if(violations)
    list(JOIN violations "\n  " text)
    message(FATAL_ERROR "layering: an #include crosses the component graph (docs/architecture.md):\n  ${text}\n")
  endif()
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  if(NOT SOURCE_DIR OR NOT GRAPH)
    message(FATAL_ERROR "usage: cmake -DSOURCE_DIR=<checkout> -DGRAPH=<build>/cmake/ptrain_components.cmake -P ${CMAKE_CURRENT_LIST_FILE}")
  endif()
  ptrain_check_layering("${SOURCE_DIR}" "${GRAPH}")
  message(STATUS "layering: every #include follows the component graph")
endif()
