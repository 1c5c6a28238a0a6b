#pragma once
/// Strong unit types: a quantity carries its dimension (FLOP, byte, second exponents) in its type,
/// so `Flops / FlopsPerSecond` is `Seconds` and `Flops / BytesPerSecond` does not compile.
/// Values are stored in SI base units (FLOP, byte, second); conversion happens only at input/output.

#include <cmath>
#include <compare>
#include <ostream>
#include <type_traits>

namespace roofsim {

/// A double tagged with the exponents of its dimensions: FLOP^F · byte^B · second^S.
template <int F, int B, int S>
class Quantity {
public:
    constexpr Quantity() = default;
    constexpr explicit Quantity(double value_in_si) : value_(value_in_si) {}

    /// The value in SI base units (FLOP, byte, second and their quotients).
    [[nodiscard]] constexpr double value() const { return value_; }

    constexpr Quantity& operator+=(Quantity other) { value_ += other.value_; return *this; }
    constexpr Quantity& operator-=(Quantity other) { value_ -= other.value_; return *this; }
    constexpr Quantity& operator*=(double k) { value_ *= k; return *this; }
    constexpr Quantity& operator/=(double k) { value_ /= k; return *this; }

    friend constexpr Quantity operator+(Quantity a, Quantity b) { return Quantity(a.value_ + b.value_); }
    friend constexpr Quantity operator-(Quantity a, Quantity b) { return Quantity(a.value_ - b.value_); }
    friend constexpr Quantity operator-(Quantity a) { return Quantity(-a.value_); }
    friend constexpr Quantity operator*(Quantity a, double k) { return Quantity(a.value_ * k); }
    friend constexpr Quantity operator*(double k, Quantity a) { return Quantity(a.value_ * k); }
    friend constexpr Quantity operator/(Quantity a, double k) { return Quantity(a.value_ / k); }
    friend constexpr auto operator<=>(Quantity a, Quantity b) = default;
    // The orderings as the doubles' own (the same results as <=>'s, NaN included): a comparison and
    // max/min compile to one instruction, not to a three-way ordering's branches on its parity.
    friend constexpr bool operator<(Quantity a, Quantity b) { return a.value_ < b.value_; }
    friend constexpr bool operator>(Quantity a, Quantity b) { return a.value_ > b.value_; }
    friend constexpr bool operator<=(Quantity a, Quantity b) { return a.value_ <= b.value_; }
    friend constexpr bool operator>=(Quantity a, Quantity b) { return a.value_ >= b.value_; }

private:
    double value_ = 0.0;
};

namespace detail {
template <int F, int B, int S>
constexpr auto make_quantity(double v) {
    if constexpr (F == 0 && B == 0 && S == 0) {
        return v;  // a dimensionless ratio is a plain number
    } else {
        return Quantity<F, B, S>(v);
    }
}
}  // namespace detail

template <int F1, int B1, int S1, int F2, int B2, int S2>
constexpr auto operator*(Quantity<F1, B1, S1> a, Quantity<F2, B2, S2> b) {
    return detail::make_quantity<F1 + F2, B1 + B2, S1 + S2>(a.value() * b.value());
}

template <int F1, int B1, int S1, int F2, int B2, int S2>
constexpr auto operator/(Quantity<F1, B1, S1> a, Quantity<F2, B2, S2> b) {
    return detail::make_quantity<F1 - F2, B1 - B2, S1 - S2>(a.value() / b.value());
}

template <int F, int B, int S>
constexpr auto operator/(double k, Quantity<F, B, S> a) {
    return detail::make_quantity<-F, -B, -S>(k / a.value());
}

using Flops = Quantity<1, 0, 0>;            ///< floating-point operations (an FMA counts 2)
using Bytes = Quantity<0, 1, 0>;            ///< bytes moved or stored
using Seconds = Quantity<0, 0, 1>;          ///< time
using Hertz = Quantity<0, 0, -1>;           ///< a rate of events: clocks, launches
using FlopsPerSecond = Quantity<1, 0, -1>;  ///< compute throughput
using BytesPerSecond = Quantity<0, 1, -1>;  ///< memory or link bandwidth
using FlopsPerByte = Quantity<1, -1, 0>;    ///< arithmetic intensity

template <int F, int B, int S>
[[nodiscard]] constexpr Quantity<F, B, S> max(Quantity<F, B, S> a, Quantity<F, B, S> b) {
    return a < b ? b : a;
}
template <int F, int B, int S>
[[nodiscard]] constexpr Quantity<F, B, S> min(Quantity<F, B, S> a, Quantity<F, B, S> b) {
    return b < a ? b : a;
}

/// Literal-style helpers: every conversion from a decimal or binary prefix lives here.
namespace units {
[[nodiscard]] constexpr Bytes bytes(double n) { return Bytes(n); }
[[nodiscard]] constexpr Bytes kib(double n) { return Bytes(n * 1024.0); }
[[nodiscard]] constexpr Bytes mib(double n) { return Bytes(n * 1024.0 * 1024.0); }
[[nodiscard]] constexpr Bytes gib(double n) { return Bytes(n * 1024.0 * 1024.0 * 1024.0); }
[[nodiscard]] constexpr Seconds seconds(double s) { return Seconds(s); }
[[nodiscard]] constexpr Seconds milliseconds(double ms) { return Seconds(ms * 1e-3); }
[[nodiscard]] constexpr Seconds microseconds(double us) { return Seconds(us * 1e-6); }
[[nodiscard]] constexpr Flops flops(double n) { return Flops(n); }
[[nodiscard]] constexpr Hertz megahertz(double mhz) { return Hertz(mhz * 1e6); }
[[nodiscard]] constexpr FlopsPerSecond tflops_per_second(double t) { return FlopsPerSecond(t * 1e12); }
[[nodiscard]] constexpr FlopsPerSecond gflops_per_second(double g) { return FlopsPerSecond(g * 1e9); }
[[nodiscard]] constexpr BytesPerSecond gb_per_second(double gb) { return BytesPerSecond(gb * 1e9); }
[[nodiscard]] constexpr BytesPerSecond tb_per_second(double tb) { return BytesPerSecond(tb * 1e12); }
}  // namespace units

/// Output helpers: value in a named display unit.
[[nodiscard]] constexpr double to_tflops_per_second(FlopsPerSecond r) { return r.value() / 1e12; }
[[nodiscard]] constexpr double to_gb_per_second(BytesPerSecond r) { return r.value() / 1e9; }
[[nodiscard]] constexpr double to_microseconds(Seconds t) { return t.value() * 1e6; }
[[nodiscard]] constexpr double to_milliseconds(Seconds t) { return t.value() * 1e3; }
[[nodiscard]] constexpr double to_gib(Bytes b) { return b.value() / (1024.0 * 1024.0 * 1024.0); }

}  // namespace roofsim
