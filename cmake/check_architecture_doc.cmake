# docs/architecture.md shows the component graph core/*/CMakeLists.txt declare:
# its ```mermaid block must be the diagram ptrain_write_component_graph()
# wrote at configure time. Run by the ctest `architecture_doc`:
#   cmake -DMERMAID=<build>/cmake/ptrain_components.mmd -DDOC=docs/architecture.md -P cmake/check_architecture_doc.cmake
if(NOT MERMAID OR NOT DOC)
  message(FATAL_ERROR "usage: cmake -DMERMAID=<build>/cmake/ptrain_components.mmd -DDOC=<docs/architecture.md> -P ${CMAKE_CURRENT_LIST_FILE}")
endif()
file(READ "${MERMAID}" diagram)
file(READ "${DOC}" doc)
string(FIND "${doc}" "```mermaid\n${diagram}```" found)
if(found EQUAL -1)
  message(FATAL_ERROR "${DOC}: its component graph is not the one core/*/CMakeLists.txt declare; "
                      "make its ```mermaid block this (${MERMAID}):\n${diagram}")
endif()
