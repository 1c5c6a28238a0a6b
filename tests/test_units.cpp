#include "catch.hpp"

#include <roofsim/units.hpp>

#include <cmath>
#include <compare>
#include <limits>
#include <type_traits>

using namespace roofsim;

// Dimensional analysis is checked by the compiler: these are the only legal combinations.
static_assert(std::is_same_v<decltype(Flops(1) / FlopsPerSecond(1)), Seconds>);
static_assert(std::is_same_v<decltype(Bytes(1) / BytesPerSecond(1)), Seconds>);
static_assert(std::is_same_v<decltype(Bytes(1) / Seconds(1)), BytesPerSecond>);
static_assert(std::is_same_v<decltype(Flops(1) / Bytes(1)), FlopsPerByte>);
static_assert(std::is_same_v<decltype(FlopsPerByte(1) * BytesPerSecond(1)), FlopsPerSecond>);
static_assert(std::is_same_v<decltype(FlopsPerSecond(1) / BytesPerSecond(1)), FlopsPerByte>);
static_assert(std::is_same_v<decltype(Seconds(1) / Seconds(1)), double>);
static_assert(std::is_same_v<decltype(1.0 / Seconds(1)), Hertz>);
// The bug strong types exist to catch: an element count (a plain number) is not a byte count.
static_assert(!std::is_convertible_v<double, Bytes>);
static_assert(!std::is_convertible_v<Flops, Bytes>);

TEST_CASE("quantities keep SI values through arithmetic", "[units]") {
    const Flops work(2e12);
    const FlopsPerSecond rate = units::tflops_per_second(1.0);
    CHECK((work / rate).value() == Catch::Approx(2.0));
    CHECK(units::gib(1).value() == 1073741824.0);
    CHECK(units::kib(4).value() == 4096.0);
    CHECK(units::microseconds(3).value() == Catch::Approx(3e-6));
    CHECK(to_gb_per_second(units::tb_per_second(4.8)) == Catch::Approx(4800.0));
    CHECK(to_microseconds(Seconds(2.5e-6)) == Catch::Approx(2.5));

    SECTION("ordering and min/max") {
        CHECK(Seconds(1) < Seconds(2));
        CHECK(max(Seconds(1), Seconds(2)) == Seconds(2));
        CHECK(min(Bytes(5), Bytes(3)) == Bytes(3));
    }
    SECTION("compound assignment") {
        Seconds t(1);
        t += Seconds(2);
        t *= 2.0;
        CHECK(t.value() == 6.0);
    }
}

TEST_CASE("quantities order as their values do, NaN unordered, and max/min keep the first of equals", "[units]") {
    const Seconds one(1), two(2), nan(std::numeric_limits<double>::quiet_NaN());
    CHECK(one < two);
    CHECK(two > one);
    CHECK(one <= one);
    CHECK(one >= one);
    CHECK_FALSE(two < one);
    CHECK_FALSE(one > two);
    CHECK_FALSE(one < one);
    CHECK_FALSE(one > one);
    CHECK_FALSE(two <= one);
    CHECK_FALSE(one >= two);
    // NaN compares false every way, as the three-way ordering has it (unordered)
    CHECK_FALSE(nan < one);
    CHECK_FALSE(nan > one);
    CHECK_FALSE(nan <= one);
    CHECK_FALSE(nan >= one);
    CHECK(std::is_eq(one <=> one));
    CHECK_FALSE(std::is_lt(nan <=> one));
    CHECK(max(one, two) == two);
    CHECK(max(two, one) == two);
    CHECK(min(one, two) == one);
    CHECK(min(two, one) == one);
    // of equals, the first: +0 and -0 are equal, and keep their signs
    CHECK_FALSE(std::signbit(max(Seconds(0.0), Seconds(-0.0)).value()));
    CHECK(std::signbit(max(Seconds(-0.0), Seconds(0.0)).value()));
    CHECK_FALSE(std::signbit(min(Seconds(0.0), Seconds(-0.0)).value()));
    CHECK(std::signbit(min(Seconds(-0.0), Seconds(0.0)).value()));
    // max(a, b) is a < b ? b : a: b only where a < b holds, so a NaN first stays
    CHECK(std::isnan(max(nan, one).value()));
    CHECK(max(one, nan) == one);
    CHECK(std::isnan(min(nan, one).value()));
    CHECK(min(one, nan) == one);
}
