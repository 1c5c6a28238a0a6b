#pragma once
/// Lowering rules of layout ops: reshape, slice, transpose, concatenation.

#include <roofsim/lower/lowerer.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace roofsim::detail {

// flatten / reshape of a contiguous tensor: a view, dispatched on the host, no kernel.
inline Value Lowerer::reshape(const Layer& l, LayerSummary&) {
    const Value& x = input(l, 0);
    Value y = x;
    if (l.op == "flatten") {
        const std::int64_t start = int_attr(l, "start_dim", 1);
        if (start < 0 || start >= static_cast<std::int64_t>(x.shape.size())) throw layer_error(l, "start_dim: out of range");
        y.shape.assign(x.shape.begin(), x.shape.begin() + start);
        y.shape.push_back(static_cast<std::int64_t>(numel(x.shape) / numel(y.shape)));
    } else {
        y.shape = Shape(attr_ints(l, "shape", 0));
        std::int64_t known = 1;
        int infer = -1;
        for (std::size_t i = 0; i < y.shape.size(); ++i) {
            if (y.shape[i] == -1) infer = static_cast<int>(i);
            else known = product(l, "shape (its element count)", {known, y.shape[i]});
        }
        if (infer >= 0 && known > 0) y.shape[static_cast<std::size_t>(infer)] = static_cast<std::int64_t>(numel(x.shape)) / known;
        if (numel(y.shape) != numel(x.shape)) throw layer_error(l, "shape: element count differs from the input");
    }
    if (bool_attr(l, "copy", false)) {
        // reshape of a non-contiguous tensor (e.g. heads merged after attention): one copy each way.
        copy_both_ways(l, x);
    }
    return y;
}

/// A contiguous copy of x forward, and of its gradient backward (aten::clone both ways).
inline void Lowerer::copy_both_ways(const Layer& l, const Value& x) {
    const double n = numel(x.shape);
    kernel(l, Phase::forward, "aten::clone", KernelKind::copy, x.dtype, n, n);
    kernel(l, Phase::backward, "aten::clone", KernelKind::copy, x.dtype, n, n);
}

// slice along a dimension (x.narrow / split / chunk): a view; its backward writes the slice's
// gradient into a zero-filled full-size tensor (aten::slice_backward).
inline Value Lowerer::slice(const Layer& l, LayerSummary&) {
    const Value& x = input(l, 0);
    auto dim = int_attr(l, "dim");
    const auto start = int_attr(l, "start"), length = int_attr(l, "length");
    const auto rank = static_cast<std::int64_t>(x.shape.size());
    if (dim < 0) dim += rank;
    if (dim < 0 || dim >= rank) throw layer_error(l, "dim: out of range");
    // PyTorch's narrow takes int64 start and length: their sum must fit it
    if (start < 0 || length <= 0 || sum(l, "start + length", start, length) > x.shape[static_cast<std::size_t>(dim)]) {
        throw layer_error(l, "start/length: outside the input");
    }
    Value y = x;
    y.shape[static_cast<std::size_t>(dim)] = length;
    if (x.needs_grad) kernel(l, Phase::backward, "aten::slice_backward", KernelKind::copy, x.dtype, numel(y.shape), numel(x.shape));
    return y;
}

// x.transpose(d0, d1): a view, costing the host what a view does (as the exporter costs
// aten::transpose); transpose_contiguous, x.transpose(d0, d1).contiguous(): one copy each way.
inline Value Lowerer::transpose(const Layer& l, LayerSummary&) {
    const Value& x = input(l, 0);
    auto d0 = int_attr(l, "dim0"), d1 = int_attr(l, "dim1");
    const auto rank = static_cast<std::int64_t>(x.shape.size());
    if (d0 < 0) d0 += rank;
    if (d1 < 0) d1 += rank;
    if (d0 < 0 || d1 < 0 || d0 >= rank || d1 >= rank) throw layer_error(l, "dim0/dim1: out of range");
    Value y = x;
    std::swap(y.shape[static_cast<std::size_t>(d0)], y.shape[static_cast<std::size_t>(d1)]);
    if (l.op == "transpose") {
        cost_markers_as("reshape", true, x.needs_grad);
    } else {
        copy_both_ways(l, x);
    }
    return y;
}

// cat of two tensors: one copy forward; backward slices dY (views, no kernel). A graph input
// that requires grad (a leaf) takes its slice as its .grad, and where the slice is strided
// unlike the input (cat along a dim after a non-unit one), AccumulateGrad stores a contiguous
// copy (clone_obey_contract, torch/csrc/autograd/functions/accumulate_grad.h): one op
// dispatched and launched on its own (host: accumulate_grad_clone_host_op) and one copy.
inline Value Lowerer::cat(const Layer& l, LayerSummary&) {
    const Value& a = input(l, 0);
    const Value& b = input(l, 1);
    auto dim = int_attr(l, "dim", 0);
    const auto rank = static_cast<std::int64_t>(a.shape.size());
    if (dim < 0) dim += rank;
    if (a.shape.size() != b.shape.size() || dim < 0 || dim >= rank) throw layer_error(l, "dim: out of range or ranks differ");
    for (std::int64_t d = 0; d < rank; ++d) {  // torch.cat: the sizes agree except in `dim`
        const auto i = static_cast<std::size_t>(d);
        if (d != dim && a.shape[i] != b.shape[i]) throw layer_error(l, "inputs: sizes differ in dimension " + std::to_string(d) + " (torch.cat joins along dim only)");
    }
    Value y = a;
    y.shape[static_cast<std::size_t>(dim)] = sum(l, "dim (the sizes joined)", a.shape[static_cast<std::size_t>(dim)], b.shape[static_cast<std::size_t>(dim)]);
    const double n = numel(y.shape);
    kernel(l, Phase::forward, "aten::cat", KernelKind::copy, a.dtype, n, n);
    y.needs_grad = a.needs_grad || b.needs_grad;
    double leading = 1;  // the elements of the dims before `dim`: above 1, each input's slice of dY is strided
    for (std::int64_t d = 0; d < dim; ++d) leading *= static_cast<double>(a.shape[static_cast<std::size_t>(d)]);
    for (std::size_t i = 0; i < 2 && leading > 1; ++i) {
        const Value& x = input(l, i);
        if (!x.needs_grad || input_id(i) >= graph_.inputs.size()) continue;
        const double elements = numel(x.shape);
        marker(backward_.emplace_back(blank_), l.name, accumulate_grad_clone_host_op, Phase::backward);
        note_host_op(accumulate_grad_clone_host_op);
        kernel(l, Phase::backward, "aten::clone", KernelKind::copy, x.dtype, elements, elements);
    }
    return y;
}

}  // namespace roofsim::detail
