# `cmake --install build --prefix P` lays out a usable ptrain and its SDK:
#   P/bin/ptrain                       the launcher (finds ../lib/ptrain/plugins)
#   P/lib/ptrain/plugins/*.so          the bundled plugins
#   P/lib/libptrain_sdk.so             the SDK's helpers; libptrain_testing.so the conformance harness
#   P/include/ptrain/{sdk,testing}/    headers
#   P/lib/cmake/ptrain/                find_package(ptrain): ptrain::sdk, ptrain::testing,
#                                      ptrain_add_plugin(), PTRAIN_SDK_VERSION, PTRAIN_SDK_ABI_VERSION
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
include(${PROJECT_SOURCE_DIR}/cmake/ptrain_sdk_version.cmake)
ptrain_read_sdk_version(${PROJECT_SOURCE_DIR}/sdk/include)

set(PTRAIN_PLUGIN_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/ptrain/plugins)
set(PTRAIN_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ptrain)

# Installed binaries find libptrain_sdk.so relative to themselves.
set_target_properties(ptrain PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
set_target_properties(ptrain_testing PROPERTIES INSTALL_RPATH "$ORIGIN")
# Every plugin plugins/ adds with ptrain_add_plugin().
get_property(bundled_plugins GLOBAL PROPERTY PTRAIN_BUNDLED_PLUGINS)
set_target_properties(${bundled_plugins} PROPERTIES INSTALL_RPATH "$ORIGIN/../..")

install(TARGETS ptrain RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ${bundled_plugins} LIBRARY DESTINATION ${PTRAIN_PLUGIN_INSTALL_DIR})
install(TARGETS ptrain_sdk ptrain_testing EXPORT ptrainTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/sdk/include/ptrain ${PROJECT_SOURCE_DIR}/testing/include/ptrain
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT ptrainTargets NAMESPACE ptrain:: DESTINATION ${PTRAIN_CMAKE_INSTALL_DIR})

set(PTRAIN_TORCH_VERSION "${Torch_VERSION}")
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ptrainConfig.cmake.in
  ${CMAKE_BINARY_DIR}/cmake/ptrainConfig.cmake
  INSTALL_DESTINATION ${PTRAIN_CMAKE_INSTALL_DIR}
  PATH_VARS CMAKE_INSTALL_BINDIR PTRAIN_PLUGIN_INSTALL_DIR)
# The package version is the SDK's: a plugin asks for find_package(ptrain 2.1)
# and any 2.x ≥ 2.1 (same ABI) satisfies it.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/ptrainConfigVersion.cmake
  VERSION ${PTRAIN_SDK_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cmake/ptrainConfig.cmake ${CMAKE_BINARY_DIR}/cmake/ptrainConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/ptrain_add_plugin.cmake
        DESTINATION ${PTRAIN_CMAKE_INSTALL_DIR})
