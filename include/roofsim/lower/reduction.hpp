#pragma once
/// Lowering rules of softmax, cross-entropy loss and sums.

#include <roofsim/lower/lowerer.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace roofsim::detail {

// softmax / log_softmax along a dimension: one pass each way; backward reads Y and dY.
inline Value Lowerer::softmax(const Layer& l, LayerSummary& s) {
    const Value& x = input(l, 0);
    // PyTorch's maybe_wrap_dim: dim in [-rank, rank) (a 0-dimensional tensor counts as 1-dimensional)
    const auto rank = static_cast<std::int64_t>(std::max<std::size_t>(x.shape.size(), 1));
    const std::int64_t dim = int_attr(l, "dim", -1);
    if (dim < -rank || dim >= rank) {
        throw layer_error(l, "dim: expected " + std::to_string(-rank) + " to " + std::to_string(rank - 1) + " for a " +
                                 std::to_string(rank) + "-dimensional input, got " + std::to_string(dim));
    }
    const DType dt = compute_dtype(l, x);
    const double n = numel(x.shape);
    kernel(l, Phase::forward, joined_name("aten::_", l.op), KernelKind::softmax, dt, n, n);
    save_value(s, own_id(), tensor_bytes(n, dt));
    kernel(l, Phase::backward, joined_name("aten::_", l.op, "_backward_data"), KernelKind::softmax, dt, 2 * n, n);
    return Value{x.shape, dt, x.needs_grad};
}

// cross_entropy(logits N x C, targets N): log_softmax + nll_loss forward; backward: nll_loss
// backward (zero-fill N x C, scatter) then log_softmax backward.
inline Value Lowerer::cross_entropy(const Layer& l, LayerSummary& s) {
    const Value& x = input(l, 0);
    const Value& t = input(l, 1);
    if (x.shape.size() != 2 || t.shape.size() != 1 || t.shape[0] != x.shape[0]) {
        throw layer_error(l, "inputs: expected logits N x C and integer targets N");
    }
    const DType dt = compute_dtype(l, x);
    const double n = numel(x.shape), rows = static_cast<double>(x.shape[0]);
    kernel(l, Phase::forward, "aten::_log_softmax", KernelKind::softmax, dt, n, n);
    Kernel& nll = kernel(l, Phase::forward, "aten::nll_loss_forward", KernelKind::reduction, dt, rows, 1);
    nll.bytes_read += tensor_bytes(rows, t.dtype);
    save(s, SavedPart::log_softmax, tensor_bytes(n, dt));
    kernel(l, Phase::backward, "aten::nll_loss_backward", KernelKind::elementwise, dt, 0, n);
    kernel(l, Phase::backward, "aten::nll_loss_backward", KernelKind::elementwise, dt, rows, rows);
    kernel(l, Phase::backward, "aten::_log_softmax_backward_data", KernelKind::softmax, dt, 2 * n, n);
    return Value{{1}, dt, x.needs_grad};
}

// x [..., C] summed over every dimension but the last (x.sum(dim=(0, ..., n-2)), what a bias
// gradient is): one column reduction forward; its backward is an expand (a view, no kernel).
inline Value Lowerer::sum_layer(const Layer& l, LayerSummary&) {
    const Value& x = input(l, 0);
    if (x.shape.size() < 2) throw layer_error(l, "input: expected at least 2 dimensions");
    const std::int64_t columns = x.shape.back();
    column_sum(l, x.dtype, static_cast<std::int64_t>(numel(x.shape)) / columns, columns, Phase::forward);
    return Value{{columns}, x.dtype, x.needs_grad};
}

}  // namespace roofsim::detail
