// The test runner's main() for Catch2 v2; with Catch2 v3 Catch2::Catch2WithMain provides it.
#if !__has_include(<catch2/catch_all.hpp>)
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#endif
