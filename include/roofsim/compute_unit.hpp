#pragma once
/// Names of the compute ceilings (a number format on an execution unit) and of the memory levels.
/// The string forms are the keys used in every JSON file (GPU specs, calibration profiles).

#include <array>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace roofsim {

/// A compute ceiling: one number format on one kind of execution unit.
/// Tensor-core FP16/BF16 ceilings are the FP32-accumulate rates (what mixed-precision training runs);
/// `fp16_fp16acc_tensor` is the FP16-accumulate rate, twice as high on GeForce parts.
/// INT8 and FP8 count integer/8-bit multiply-adds as 2 operations, like FLOPs.
enum class ComputeUnit {
    fp64,                 ///< FP64 on CUDA cores (FMA = 2 FLOPs)
    fp32,                 ///< FP32 on CUDA cores
    fp16,                 ///< FP16 on CUDA cores (half2 FMA)
    bf16,                 ///< BF16 on CUDA cores (bfloat162 FMA)
    fp64_tensor,          ///< FP64 on tensor cores (GA100, GH100)
    tf32_tensor,          ///< TF32 inputs, FP32 accumulate
    fp16_tensor,          ///< FP16 inputs, FP32 accumulate
    fp16_fp16acc_tensor,  ///< FP16 inputs, FP16 accumulate
    bf16_tensor,          ///< BF16 inputs, FP32 accumulate
    fp8_tensor,           ///< FP8 (E4M3/E5M2) inputs, FP32 accumulate (Hopper, Ada)
    int8_tensor,          ///< INT8 inputs, INT32 accumulate (operations, not FLOPs)
};

inline constexpr std::array<ComputeUnit, 11> all_compute_units = {
    ComputeUnit::fp64,        ComputeUnit::fp32,        ComputeUnit::fp16,
    ComputeUnit::bf16,        ComputeUnit::fp64_tensor, ComputeUnit::tf32_tensor,
    ComputeUnit::fp16_tensor, ComputeUnit::fp16_fp16acc_tensor, ComputeUnit::bf16_tensor,
    ComputeUnit::fp8_tensor,  ComputeUnit::int8_tensor,
};

[[nodiscard]] constexpr std::string_view to_string(ComputeUnit u) {
    switch (u) {
        case ComputeUnit::fp64: return "fp64";
        case ComputeUnit::fp32: return "fp32";
        case ComputeUnit::fp16: return "fp16";
        case ComputeUnit::bf16: return "bf16";
        case ComputeUnit::fp64_tensor: return "fp64-tensor";
        case ComputeUnit::tf32_tensor: return "tf32-tensor";
        case ComputeUnit::fp16_tensor: return "fp16-tensor";
        case ComputeUnit::fp16_fp16acc_tensor: return "fp16-fp16acc-tensor";
        case ComputeUnit::bf16_tensor: return "bf16-tensor";
        case ComputeUnit::fp8_tensor: return "fp8-tensor";
        case ComputeUnit::int8_tensor: return "int8-tensor";
    }
    return "?";
}

[[nodiscard]] constexpr bool is_tensor_core(ComputeUnit u) {
    return u != ComputeUnit::fp64 && u != ComputeUnit::fp32 && u != ComputeUnit::fp16 &&
           u != ComputeUnit::bf16;
}

/// Parses a precision as a user means it: the short names "tf32", "fp16", "bf16", "fp8", "int8" are
/// the tensor-core rates (what PyTorch's matmuls and convolutions use); "fp64" and "fp32" are CUDA
/// cores; "fp16-cuda"/"bf16-cuda" are the CUDA-core half rates; any exact key ("fp16-fp16acc-tensor")
/// is accepted too.
[[nodiscard]] inline std::optional<ComputeUnit> parse_compute_unit(std::string_view text) {
    if (text == "tf32") return ComputeUnit::tf32_tensor;
    if (text == "fp16" || text == "half") return ComputeUnit::fp16_tensor;
    if (text == "bf16") return ComputeUnit::bf16_tensor;
    if (text == "fp8") return ComputeUnit::fp8_tensor;
    if (text == "int8") return ComputeUnit::int8_tensor;
    if (text == "fp16-cuda") return ComputeUnit::fp16;
    if (text == "bf16-cuda") return ComputeUnit::bf16;
    for (ComputeUnit u : all_compute_units) {
        if (to_string(u) == text) return u;
    }
    return std::nullopt;
}

/// Exact key lookup (JSON files use exact keys only; no aliases).
[[nodiscard]] inline std::optional<ComputeUnit> compute_unit_from_key(std::string_view key) {
    for (ComputeUnit u : all_compute_units) {
        if (to_string(u) == key) return u;
    }
    return std::nullopt;
}

/// A level of the memory hierarchy that has its own bandwidth ceiling.
enum class MemoryLevel { dram, l2 };

inline constexpr std::array<MemoryLevel, 2> all_memory_levels = {MemoryLevel::dram, MemoryLevel::l2};

[[nodiscard]] constexpr std::string_view to_string(MemoryLevel m) {
    switch (m) {
        case MemoryLevel::dram: return "dram";
        case MemoryLevel::l2: return "l2";
    }
    return "?";
}

[[nodiscard]] inline std::optional<MemoryLevel> memory_level_from_key(std::string_view key) {
    for (MemoryLevel m : all_memory_levels) {
        if (to_string(m) == key) return m;
    }
    return std::nullopt;
}

}  // namespace roofsim
