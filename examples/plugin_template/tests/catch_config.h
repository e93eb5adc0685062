// Catch2 for these tests. LibTorch's c10 brings glog, whose CHECK macro would
// silently replace Catch's: include it first and drop its CHECK.
#pragma once

#include <c10/util/Logging.h>
#undef CHECK

#include <catch2/catch.hpp>
