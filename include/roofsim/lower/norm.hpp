#pragma once
/// Lowering rules of the normalizations: batch norm, layer norm (and RMS norm), group norm.

#include <roofsim/lower/lowerer.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace roofsim::detail {

// batchnorm2d in training mode: forward reads x twice (statistics, then normalize) and writes y;
// backward reads x and dY twice (reductions, then dX) and writes dX. PyTorch runs cuDNN's kernels for
// float32 and float16 inputs and its own for bfloat16 (H200, torch.profiler of a ResNet-50 step under
// each autocast dtype, 2026-12-04: bn_fw_tr_1C11 / bn_bw_1C11 against batch_norm_collect_statistics,
// batch_norm_transform_input and batch_norm_backward_kernel).
inline Value Lowerer::batchnorm(const Layer& l, LayerSummary& s) {
    const Value& x = input(l, 0);
    const std::int64_t features = int_attr(l, "num_features");
    if (x.shape.size() != 4 || x.shape[1] != features) throw layer_error(l, "num_features: does not match input channels");
    add_parameter(s, static_cast<double>(features));  // weight
    add_parameter(s, static_cast<double>(features));  // bias
    const double n = numel(x.shape);
    const NormDims per_channel{features, static_cast<std::int64_t>(n) / features};
    const bool native = x.dtype == DType::bf16;
    if (inference_) {
        // eval: one pass normalizing x by the running statistics (cuDNN's inference kernel; PyTorch's
        // batch_norm_elementwise for bfloat16), nothing saved
        kernel(l, Phase::forward, native ? "aten::native_batch_norm" : "aten::cudnn_batch_norm", KernelKind::normalization,
               x.dtype, n, n, 0)
            .dims = per_channel;
        return Value{x.shape, x.dtype, false};
    }
    kernel(l, Phase::forward, native ? "aten::native_batch_norm" : "aten::cudnn_batch_norm", KernelKind::normalization, x.dtype, 2 * n, n, 0)
        .dims = per_channel;
    save_input(s, l, 0, x.dtype);
    kernel(l, Phase::backward, native ? "aten::native_batch_norm_backward" : "aten::cudnn_batch_norm_backward", KernelKind::normalization,
           x.dtype, 4 * n, n, 0)
        .dims = per_channel;
    return Value{x.shape, x.dtype, true};
}

// layernorm / rmsnorm over the trailing dimensions: one forward kernel (Welford per row);
// backward: dX, then the weight (and bias) gradients (aten::native_layer_norm_backward).
inline Value Lowerer::layernorm(const Layer& l, LayerSummary& s) {
    const Value& x = input(l, 0);
    const auto shape = attr_ints(l, "normalized_shape", 0);
    const bool affine = bool_attr(l, "elementwise_affine", true);
    double normalized = 1;
    for (auto d : shape) normalized *= static_cast<double>(d);
    if (shape.empty() || shape.size() > x.shape.size() ||
        !std::equal(shape.rbegin(), shape.rend(), x.shape.rbegin())) {
        throw layer_error(l, "normalized_shape: does not match the input's trailing dimensions");
    }
    const bool rms = l.op == "rmsnorm";
    if (affine) add_parameter(s, normalized);  // weight
    if (affine && !rms) add_parameter(s, normalized);  // bias
    const DType dt = compute_dtype(l, x);
    const double n = numel(x.shape);
    const NormDims per_row{static_cast<std::int64_t>(n / normalized), static_cast<std::int64_t>(normalized)};
    const std::string_view fwd = rms ? "aten::_fused_rms_norm" : "aten::native_layer_norm";
    kernel(l, Phase::forward, fwd, KernelKind::normalization, dt, n, n, 0).dims = per_row;
    save_input(s, l, 0, dt);
    kernel(l, Phase::backward, joined_name(fwd, "_backward"), KernelKind::normalization, dt, 2 * n, n, 0).dims = per_row;
    // the weight (and bias) gradients reduce the same rows: the same reduction shape, so that they
    // take the factor timed at the layer's shape, not the op's first timing
    if (affine) kernel(l, Phase::backward, joined_name(fwd, "_backward"), KernelKind::reduction, dt, 2 * n, normalized).dims = per_row;
    return Value{x.shape, dt, true};
}

// groupnorm: statistics kernel, then normalize (aten::native_group_norm); backward: per-group
// reductions, then dX, then weight/bias gradients.
inline Value Lowerer::groupnorm(const Layer& l, LayerSummary& s) {
    const Value& x = input(l, 0);
    const std::int64_t groups = int_attr(l, "num_groups"), channels = int_attr(l, "num_channels");
    if (x.shape.size() < 2 || x.shape[1] != channels) throw layer_error(l, "num_channels: does not match the input");
    if (groups <= 0 || channels % groups != 0) throw layer_error(l, "num_groups: must divide num_channels");
    add_parameter(s, static_cast<double>(channels));  // weight
    add_parameter(s, static_cast<double>(channels));  // bias
    const DType dt = compute_dtype(l, x);
    const double n = numel(x.shape);
    kernel(l, Phase::forward, "aten::native_group_norm", KernelKind::reduction, dt, n, 0);
    kernel(l, Phase::forward, "aten::native_group_norm", KernelKind::normalization, dt, n, n);
    save_input(s, l, 0, dt);
    kernel(l, Phase::backward, "aten::native_group_norm_backward", KernelKind::reduction, dt, 2 * n, 0);
    kernel(l, Phase::backward, "aten::native_group_norm_backward", KernelKind::normalization, dt, 2 * n, n);
    return Value{x.shape, dt, true};
}

}  // namespace roofsim::detail
