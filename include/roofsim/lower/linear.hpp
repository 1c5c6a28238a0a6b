#pragma once
/// Lowering rules of linear layers and matrix products (cuBLAS GEMMs, their weight and input gradients).

#include <roofsim/lower/lowerer.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace roofsim::detail {

// linear: y = x W^T + b as one GEMM with the bias in its epilogue (aten::addmm on the flattened
// input); backward dX = dY W, dW = dY^T X, db = sum(dY) (aten::linear / addmm derivatives).
inline Value Lowerer::linear(const Layer& l, LayerSummary& s) {
    const Value& x = input(l, 0);
    const std::int64_t in_f = int_attr(l, "in_features"), out_f = int_attr(l, "out_features");
    const bool bias = bool_attr(l, "bias", true);
    if (!bias) cost_markers_as(host_op_without_bias(l.op), true, true);
    if (x.shape.empty() || x.shape.back() != in_f) {
        throw layer_error(l, "in_features: " + std::to_string(in_f) + " does not match the input's last dimension");
    }
    const std::int64_t weights = product(l, "in_features * out_features (weight elements)", {in_f, out_f});
    const double m = numel(x.shape) / static_cast<double>(in_f);
    const auto rows = static_cast<std::int64_t>(m);
    // tied: the weight is another layer's (GPT-2's lm_head shares the token embedding); its
    // gradient is summed into that parameter's gradient.
    const bool tied = bool_attr(l, "tied", false);
    if (!tied) add_parameter(s, static_cast<double>(weights));
    if (bias) add_parameter(s, static_cast<double>(out_f));
    const DType dt = compute_dtype(l, x);
    weight_cast(l, static_cast<double>(weights) + (bias ? static_cast<double>(out_f) : 0.0), dt);
    if (tied) kernel(l, Phase::backward, "aten::add_", KernelKind::elementwise, rules_.parameter_dtype,
                     2.0 * static_cast<double>(weights), static_cast<double>(weights));
    // y = x W^T (W read transposed); dX = dY W; dW = dY^T X (dY read transposed)
    gemm(l, Phase::forward, bias ? "aten::addmm" : "aten::mm", dt, {rows, out_f, in_f, 1, GemmLayout::nt}, dt);
    save_input(s, l, 0, dt);
    if (x.needs_grad) gemm(l, Phase::backward, "aten::mm", dt, {rows, in_f, out_f, 1, GemmLayout::nn}, dt);
    gemm(l, Phase::backward, "aten::mm", dt, {out_f, in_f, rows, 1, GemmLayout::tn}, dt);
    if (bias) column_sum(l, dt, rows, out_f);
    Value y{x.shape, dt, true};
    y.shape.back() = out_f;
    return y;
}

// matmul / bmm: C = A B over leading batch dimensions; backward dA = dC B^T, dB = A^T dC.
inline Value Lowerer::matmul(const Layer& l, LayerSummary& s) {
    const Value& a = input(l, 0);
    const Value& b = input(l, 1);
    if (a.shape.size() < 2 || b.shape.size() < 2) throw layer_error(l, "inputs must have at least 2 dimensions");
    const std::int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back();
    const std::int64_t k2 = b.shape[b.shape.size() - 2], n = b.shape.back();
    if (k != k2) throw layer_error(l, "inner dimensions differ: " + std::to_string(k) + " vs " + std::to_string(k2));
    const double batch_a = numel(a.shape) / static_cast<double>(m) / static_cast<double>(k);
    const double batch_b = numel(b.shape) / static_cast<double>(k) / static_cast<double>(n);
    if (batch_a != batch_b) throw layer_error(l, "batch dimensions differ (broadcasting is not modelled)");
    const auto batch = static_cast<std::int64_t>(batch_a);
    const DType dt = compute_dtype(l, a);
    compute_dtype(l, b);  // autocast casts each input, and each one's gradient back
    const std::string_view name = batch > 1 ? "aten::bmm" : "aten::mm";
    // the inputs taken as stored (a graph says nothing of strides): C = A B; dA = dC B^T; dB = A^T dC
    gemm(l, Phase::forward, name, dt, {m, n, k, batch, GemmLayout::nn}, dt);
    save_input(s, l, 0, dt);
    save_input(s, l, 1, dt);
    if (a.needs_grad) gemm(l, Phase::backward, name, dt, {m, k, n, batch, GemmLayout::nt}, dt);
    if (b.needs_grad) gemm(l, Phase::backward, name, dt, {k, n, m, batch, GemmLayout::tn}, dt);
    Value c{a.shape, dt, a.needs_grad || b.needs_grad};
    c.shape.back() = n;
    return c;
}

}  // namespace roofsim::detail
