#include "catch.hpp"

#include <roofsim/units.hpp>

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
