// Catch2 for these tests, whichever major version is installed (Debian
// bookworm has 2.13, trixie 3.7). LibTorch's c10 brings glog, whose CHECK macro
// would silently replace Catch's: include it first and drop its CHECK.
#pragma once

#include <c10/util/Logging.h>
#undef CHECK

#if PLUGIN_CATCH2_MAJOR >= 3
// Catch2 3 split the single header; its runner comes from Catch2WithMain.
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
using Catch::Approx;
#else
#include <catch2/catch.hpp>
#endif
