// Catch2 include for the tests, whichever major version is installed.
#pragma once

// Debian's c10 is built with glog, whose CHECK(condition) would silently
// replace Catch's CHECK in any test that includes ATen after this header: the
// assertion would stop being counted or reported. Pull glog in first and drop
// its macro, so Catch's definition is the one that stays.
#include <c10/util/Logging.h>
#undef CHECK

#if PTRAIN_CATCH2_MAJOR >= 3
// Catch2 3.x split the single header into per-feature headers.
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
using Catch::Approx;
namespace Catch {
// Catch2 2.x spellings, used by the tests: 3.0 renamed the substring matcher
// (Contains now matches ranges) and stopped exporting Matchers into Catch.
inline Matchers::StringContainsMatcher Contains(const std::string& text) { return Matchers::ContainsSubstring(text); }
using Matchers::EndsWith;
using Matchers::StartsWith;
}  // namespace Catch
#else
#include <catch2/catch.hpp>
#endif
