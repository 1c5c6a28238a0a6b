#pragma once
/// Lowering rules of pooling layers.

#include <roofsim/lower/lowerer.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace roofsim::detail {

// max / avg pooling: one pass forward (max also writes int64 indices); backward writes dX
// reading dY (and the indices).
inline Value Lowerer::pool(const Layer& l, LayerSummary& s) {
    const Value& x = input(l, 0);
    if (x.shape.size() != 4) throw layer_error(l, "input: expected N x C x H x W");
    const auto ks = dims_attr(l, "kernel_size", 2), st = dims_attr(l, "stride", 2, ks[0]), pad = dims_attr(l, "padding", 2, 0);
    // PyTorch's checks (pool2d_shape_check): positive kernel and stride, padding 0 to half the kernel
    check_dims_at_least(l, "kernel_size", ks, 1);
    check_dims_at_least(l, "stride", st, 1);
    check_dims_at_least(l, "padding", pad, 0);
    for (std::size_t i = 0; i < 2; ++i) {
        if (pad[i] > ks[i] / 2) {  // 2 pad > kernel, without 2 pad's overflow
            throw layer_error(l, "padding: expected at most half of kernel_size " + std::to_string(ks[i]) + ", got " +
                                     std::to_string(pad[i]));
        }
    }
    Value y = x;
    for (std::size_t i = 0; i < 2; ++i) {
        // (in + 2 pad - kernel) / stride + 1: a convolution's output size without dilation, int64 like PyTorch's
        const auto out = ConvDims::output_size(x.shape[2 + i], pad[i], 1, ks[i], st[i]);
        if (!out) throw layer_error(l, "input + 2 * padding - kernel_size (output size): overflows a 64-bit integer");
        y.shape[2 + i] = *out;
    }
    const double n_in = numel(x.shape), n_out = numel(y.shape);
    const bool max = l.op == "maxpool2d";
    Kernel& f = kernel(l, Phase::forward, max ? "aten::max_pool2d_with_indices" : "aten::avg_pool2d",
                       KernelKind::elementwise, x.dtype, n_in, n_out);
    if (max) f.bytes_written += tensor_bytes(n_out, DType::i64);
    save_value(s, input_id(0), tensor_bytes(n_in, x.dtype));
    if (max) save(s, SavedPart::indices, tensor_bytes(n_out, DType::i64));
    Kernel& b = kernel(l, Phase::backward, max ? "aten::max_pool2d_with_indices_backward" : "aten::avg_pool2d_backward",
                       KernelKind::elementwise, x.dtype, n_out, n_in);
    if (max) b.bytes_read += tensor_bytes(n_out, DType::i64);
    return y;
}

// adaptive average pooling to output_size: a reduction forward, an expanding pass backward.
inline Value Lowerer::adaptive_pool(const Layer& l, LayerSummary& s) {
    const Value& x = input(l, 0);
    if (x.shape.size() != 4) throw layer_error(l, "input: expected N x C x H x W");
    const auto out = dims_attr(l, "output_size", 2);
    check_dims_at_least(l, "output_size", out, 1);
    Value y = x;
    y.shape[2] = out[0];
    y.shape[3] = out[1];
    const double n_in = numel(x.shape), n_out = numel(y.shape);
    kernel(l, Phase::forward, "aten::_adaptive_avg_pool2d", KernelKind::reduction, x.dtype, n_in, n_out);
    (void)s;
    kernel(l, Phase::backward, "aten::_adaptive_avg_pool2d_backward", KernelKind::elementwise, x.dtype, n_out, n_in);
    return y;
}

}  // namespace roofsim::detail
