// The test runner for Catch2 2 (header-only); Catch2 3 links Catch2WithMain instead.
#define CATCH_CONFIG_MAIN
#include "catch_config.h"
