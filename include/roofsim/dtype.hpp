#pragma once
/// Tensor element types, and the one place where element counts become bytes (tensor_bytes).

#include <roofsim/units.hpp>

#include <array>
#include <optional>
#include <string_view>

namespace roofsim {

/// Storage type of tensor elements.
enum class DType { f64, f32, f16, bf16, f8, i64, i32, i8, u8, boolean };

inline constexpr std::array<DType, 10> all_dtypes = {DType::f64, DType::f32, DType::f16, DType::bf16, DType::f8,
                                                     DType::i64, DType::i32, DType::i8,  DType::u8,   DType::boolean};

/// Whether a dtype holds floating-point numbers.
[[nodiscard]] constexpr bool is_floating(DType d) {
    return d == DType::f64 || d == DType::f32 || d == DType::f16 || d == DType::bf16 || d == DType::f8;
}

[[nodiscard]] constexpr std::string_view to_string(DType d) {
    switch (d) {
        case DType::f64: return "float64";
        case DType::f32: return "float32";
        case DType::f16: return "float16";
        case DType::bf16: return "bfloat16";
        case DType::f8: return "float8";
        case DType::i64: return "int64";
        case DType::i32: return "int32";
        case DType::i8: return "int8";
        case DType::u8: return "uint8";
        case DType::boolean: return "bool";
    }
    return "?";
}

[[nodiscard]] inline std::optional<DType> dtype_from_key(std::string_view key) {
    for (DType d : all_dtypes) {
        if (to_string(d) == key) return d;
    }
    return std::nullopt;
}

/// Bytes of one element: the one place where element counts become bytes.
[[nodiscard]] constexpr double bytes_per_element(DType d) {
    switch (d) {
        case DType::f64: case DType::i64: return 8;
        case DType::f32: case DType::i32: return 4;
        case DType::f16: case DType::bf16: return 2;
        case DType::f8: case DType::i8: case DType::u8: case DType::boolean: return 1;
    }
    return 0;
}

/// `elements` elements of `dtype`, in bytes.
[[nodiscard]] constexpr Bytes tensor_bytes(double elements, DType dtype) {
    return Bytes(elements * bytes_per_element(dtype));
}

}  // namespace roofsim
