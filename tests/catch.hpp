#pragma once
// Builds with Catch2 v2 (Debian 12's `catch2`) and Catch2 v3 alike: write `Catch::Approx` and
// `Catch::Matchers::WithinRel`, which both versions then provide.
#if __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_all.hpp>
#else
#include <catch2/catch.hpp>
namespace Catch {
using Detail::Approx;
}
#endif
