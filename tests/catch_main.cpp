// The Catch2 2.x runner shared by the test executables (Catch2 3 links its
// own, Catch2::Catch2WithMain: see tests/CMakeLists.txt).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
