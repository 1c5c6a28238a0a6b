#pragma once
/// Lowering rule of convolutions (cuDNN: forward, data gradient, weight gradient; depthwise and grouped).

#include <roofsim/lower/lowerer.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace roofsim::detail {

// conv: cuDNN forward; backward-data (when the input needs a gradient), backward-filter, and a
// bias reduction (aten::convolution_backward).
inline Value Lowerer::conv(const Layer& l, LayerSummary& s, std::size_t rank) {
    const Value& x = input(l, 0);
    if (x.shape.size() != rank + 2) throw layer_error(l, "input must be N x C x spatial (" + std::to_string(rank + 2) + " dimensions)");
    const auto [in_channels, out_channels, kernel_size, stride, padding, dilation, groups_attr, bias_attr] =
        find_attrs(l, std::array<std::string_view, 8>{"in_channels", "out_channels", "kernel_size", "stride", "padding",
                                                      "dilation", "groups", "bias"});
    const std::int64_t c = int_attr(l, "in_channels", in_channels), k = int_attr(l, "out_channels", out_channels);
    const auto ks = dims_attr(l, "kernel_size", kernel_size, rank), st = dims_attr(l, "stride", stride, rank, 1);
    const auto pad = dims_attr(l, "padding", padding, rank, 0), dil = dims_attr(l, "dilation", dilation, rank, 1);
    const std::int64_t groups = int_attr(l, "groups", groups_attr, 1);
    const bool bias = bool_attr(l, "bias", bias_attr, true);
    if (!bias) cost_markers_as(host_op_without_bias(l.op), true, true);
    // PyTorch's checks (ConvNd's constructor, ConvParams::check_input_shape_forward), before any division
    if (x.shape[1] != c) throw layer_error(l, "in_channels: " + std::to_string(c) + " does not match the input");
    if (k <= 0) throw layer_error(l, "out_channels: expected a positive integer, got " + std::to_string(k));
    check_dims_at_least(l, "kernel_size", ks, 1);
    check_dims_at_least(l, "stride", st, 1);
    check_dims_at_least(l, "padding", pad, 0);
    check_dims_at_least(l, "dilation", dil, 1);
    if (groups <= 0) throw layer_error(l, "groups: expected a positive integer, got " + std::to_string(groups));
    if (c % groups != 0 || k % groups != 0) {
        throw layer_error(l, "groups: " + std::to_string(groups) + " does not divide in_channels " + std::to_string(c) +
                                 " and out_channels " + std::to_string(k));
    }
    ConvDims d;
    d.n = x.shape[0];
    d.c = c;
    d.k = k;
    d.groups = groups;
    if (rank == 2) {
        d.h = x.shape[2]; d.w = x.shape[3]; d.r = ks[0]; d.s = ks[1];
        d.stride_h = st[0]; d.stride_w = st[1]; d.pad_h = pad[0]; d.pad_w = pad[1];
        d.dilation_h = dil[0]; d.dilation_w = dil[1];
    } else {
        d.h = 1; d.w = x.shape[2]; d.r = 1; d.s = ks[0];
        d.stride_w = st[0]; d.pad_w = pad[0]; d.dilation_w = dil[0];
    }
    // PyTorch's sizes are int64: an output size whose arithmetic overflows it is no shape
    if (!ConvDims::output_size(d.h, d.pad_h, d.dilation_h, d.r, d.stride_h) || !ConvDims::output_size(d.w, d.pad_w, d.dilation_w, d.s, d.stride_w)) {
        throw layer_error(l, "input + 2 * padding - dilation * (kernel_size - 1) (output size): overflows a 64-bit integer");
    }
    const std::int64_t out_h = d.p(), out_w = d.q();
    if (out_h <= 0 || out_w <= 0) throw layer_error(l, "kernel_size: larger than the padded input");
    const double weights = static_cast<double>(product(l, "out_channels * in_channels / groups * kernel_size (weight elements)", {k, c / groups, d.r, d.s}));
    add_parameter(s, weights);
    if (bias) add_parameter(s, static_cast<double>(k));
    const DType dt = compute_dtype(l, x);
    check_sizes(l, d, dt);
    weight_cast(l, weights + (bias ? static_cast<double>(k) : 0.0), dt);
    const double in_el = numel(x.shape);
    const double out_el = static_cast<double>(d.n) * static_cast<double>(k) * static_cast<double>(out_h) * static_cast<double>(out_w);
    const double flops = conv_flops(d).value();  // the same for the three passes
    auto pass = [&](Phase ph, ConvPass p, double read_el, double write_el) {
        Kernel& kk = kernel(l, ph, p == ConvPass::forward ? "aten::convolution" : "aten::convolution_backward", KernelKind::conv,
                            dt, read_el, write_el, flops, conv_unit(dt));
        kk.dims = d;
        std::get<ConvDims>(kk.dims).pass = p;
    };
    pass(Phase::forward, ConvPass::forward, in_el + weights, out_el);
    save_input(s, l, 0, dt);
    if (x.needs_grad) pass(Phase::backward, ConvPass::backward_data, out_el + weights, in_el);
    pass(Phase::backward, ConvPass::backward_filter, out_el + in_el, weights);
    if (bias) kernel(l, Phase::backward, "aten::convolution_backward", KernelKind::reduction, dt, out_el, static_cast<double>(k));
    Value y{x.shape, dt, true};
    y.shape[1] = k;
    if (rank == 2) { y.shape[2] = out_h; y.shape[3] = out_w; }
    else y.shape[2] = out_w;
    return y;
}

}  // namespace roofsim::detail
