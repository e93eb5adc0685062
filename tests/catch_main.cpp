// The Catch2 runner shared by the test executables.
#if __has_include(<catch2/catch_test_macros.hpp>)
// Catch2 3.x links its own main (Catch2::Catch2WithMain); nothing to define.
#else
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#endif
