#pragma once
/// Checked 64-bit integer arithmetic for shapes and sizes: a result int64 cannot hold is reported,
/// never wrapped or saturated (PyTorch's sizes are int64: a tensor whose element count overflows it
/// cannot exist).

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace roofsim::detail {

/// a * b, or nullopt where int64 cannot hold it.
[[nodiscard]] constexpr std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
    std::int64_t r = 0;
    if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
    return r;
}

/// a + b, or nullopt where int64 cannot hold it.
[[nodiscard]] constexpr std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) {
    std::int64_t r = 0;
    if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
    return r;
}

/// a - b, or nullopt where int64 cannot hold it.
[[nodiscard]] constexpr std::optional<std::int64_t> checked_sub(std::int64_t a, std::int64_t b) {
    std::int64_t r = 0;
    if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
    return r;
}

/// The product of `factors` (1 when none), or nullopt where int64 cannot hold it or a partial product.
[[nodiscard]] constexpr std::optional<std::int64_t> checked_product(std::initializer_list<std::int64_t> factors) {
    std::int64_t r = 1;
    for (const std::int64_t f : factors) {
        if (__builtin_mul_overflow(r, f, &r)) return std::nullopt;
    }
    return r;
}

/// n (>= 0) rounded up to a multiple of `multiple` (> 0), or nullopt where int64 cannot hold it.
[[nodiscard]] constexpr std::optional<std::int64_t> checked_round_up(std::int64_t n, std::int64_t multiple) {
    const auto bumped = checked_add(n, multiple - 1);
    if (!bumped) return std::nullopt;
    return *bumped / multiple * multiple;
}

/// The value of a checked computation, or std::overflow_error "<what>: overflows a 64-bit integer":
/// for code past the loaders, which refuse such sizes naming the field first.
[[nodiscard]] inline std::int64_t value_or_overflow(std::optional<std::int64_t> v, std::string_view what) {
    if (!v) throw std::overflow_error(std::string(what) + ": overflows a 64-bit integer");
    return *v;
}

}  // namespace roofsim::detail
