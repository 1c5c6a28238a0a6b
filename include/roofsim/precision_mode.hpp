#pragma once
/// PyTorch's precision modes and the rules they imply: which compute unit matmuls and convolutions
/// run on, which dtype activations and parameters have, and whether autocast inserts casts.

#include <roofsim/compute_unit.hpp>
#include <roofsim/dtype.hpp>

#include <array>
#include <optional>
#include <string_view>

namespace roofsim {

/// How a training step is run, as a PyTorch user sets it.
enum class PrecisionMode {
    fp32,         ///< PyTorch defaults: matmul TF32 off, cuDNN convolution TF32 on
    fp32_strict,  ///< torch.backends.cuda.matmul.allow_tf32 = cudnn.allow_tf32 = False
    tf32,         ///< both TF32 flags on
    amp_bf16,     ///< fp32 parameters, forward under torch.autocast(dtype=torch.bfloat16)
    amp_fp16,     ///< fp32 parameters, forward under torch.autocast(dtype=torch.float16)
    bf16,         ///< model and inputs converted to bfloat16, no autocast
    /// Model and inputs in float16, float32 master weights in the optimizer: apex amp's opt_level O2
    /// (as NVIDIA's DeepLearningExamples train BERT with --fp16).
    fp16_master,
};

inline constexpr std::array<PrecisionMode, 7> all_precision_modes = {
    PrecisionMode::fp32, PrecisionMode::fp32_strict, PrecisionMode::tf32,
    PrecisionMode::amp_bf16, PrecisionMode::amp_fp16, PrecisionMode::bf16, PrecisionMode::fp16_master};

[[nodiscard]] constexpr std::string_view to_string(PrecisionMode m) {
    switch (m) {
        case PrecisionMode::fp32: return "fp32";
        case PrecisionMode::fp32_strict: return "fp32-strict";
        case PrecisionMode::tf32: return "tf32";
        case PrecisionMode::amp_bf16: return "amp-bf16";
        case PrecisionMode::amp_fp16: return "amp-fp16";
        case PrecisionMode::bf16: return "bf16";
        case PrecisionMode::fp16_master: return "fp16-master";
    }
    return "?";
}

[[nodiscard]] inline std::optional<PrecisionMode> precision_mode_from_key(std::string_view key) {
    for (PrecisionMode m : all_precision_modes) {
        if (to_string(m) == key) return m;
    }
    return std::nullopt;
}

/// What a precision mode means for the kernels PyTorch runs.
struct PrecisionRules {
    ComputeUnit matmul_unit;  ///< linear / matmul / bmm / baddbmm (cuBLAS) on float32 operands
    ComputeUnit conv_unit;    ///< convolutions (cuDNN) on float32 operands
    DType parameter_dtype;    ///< dtype of parameters, gradients and optimizer state
    DType input_dtype;        ///< dtype of floating-point graph inputs
    bool autocast;            ///< autocast casts inputs of its op lists (and back for the fp32 list)
    DType low_dtype;          ///< autocast's lower precision (f32 when autocast is off)
};

/// The rules of each mode. Sources: torch.backends docs ("TensorFloat-32 (TF32) on Ampere (and later)
/// devices": matmul TF32 off and cuDNN TF32 on by default since PyTorch 1.12); torch.amp docs
/// ("CUDA Ops that can autocast to float16 / to float32").
[[nodiscard]] constexpr PrecisionRules rules_for(PrecisionMode m) {
    switch (m) {
        case PrecisionMode::fp32:
            return {ComputeUnit::fp32, ComputeUnit::tf32_tensor, DType::f32, DType::f32, false, DType::f32};
        case PrecisionMode::fp32_strict:
            return {ComputeUnit::fp32, ComputeUnit::fp32, DType::f32, DType::f32, false, DType::f32};
        case PrecisionMode::tf32:
            return {ComputeUnit::tf32_tensor, ComputeUnit::tf32_tensor, DType::f32, DType::f32, false, DType::f32};
        // 16-bit operands take the 16-bit tensor cores (tensor_unit_for); float32 operands left in
        // float32 (autocast's fp32 list, the math attention path) keep PyTorch's TF32 defaults.
        case PrecisionMode::amp_bf16:
            return {ComputeUnit::fp32, ComputeUnit::tf32_tensor, DType::f32, DType::f32, true, DType::bf16};
        case PrecisionMode::amp_fp16:
            return {ComputeUnit::fp32, ComputeUnit::tf32_tensor, DType::f32, DType::f32, true, DType::f16};
        case PrecisionMode::bf16:
            return {ComputeUnit::fp32, ComputeUnit::tf32_tensor, DType::bf16, DType::bf16, false, DType::bf16};
        case PrecisionMode::fp16_master:
            return {ComputeUnit::fp32, ComputeUnit::tf32_tensor, DType::f16, DType::f16, false, DType::f16};
    }
    return {ComputeUnit::fp32, ComputeUnit::fp32, DType::f32, DType::f32, false, DType::f32};
}

/// Whether the optimizer steps float32 master copies of the parameters (apex amp O2): the model's
/// float16 gradients are copied up into them, the step runs on them, and the result is copied back.
[[nodiscard]] constexpr bool has_master_weights(PrecisionMode m) { return m == PrecisionMode::fp16_master; }

/// The compute unit of a GEMM or convolution whose operands are `dtype`, under `rules`.
[[nodiscard]] constexpr ComputeUnit tensor_unit_for(DType dtype, ComputeUnit fp32_unit) {
    switch (dtype) {
        case DType::bf16: return ComputeUnit::bf16_tensor;
        case DType::f16: return ComputeUnit::fp16_tensor;
        case DType::f64: return ComputeUnit::fp64;
        default: return fp32_unit;
    }
}

}  // namespace roofsim
