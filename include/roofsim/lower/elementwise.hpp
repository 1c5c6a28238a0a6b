#pragma once
/// Lowering rules of elementwise layers: activations, dropout, binary ops, tanh-GELU as composite ops, casts.

#include <roofsim/lower/lowerer.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace roofsim::detail {

// activations: one elementwise pass forward; backward reads dY and the saved input (gelu, silu)
// or output (relu, tanh, sigmoid) and writes dX.
inline Value Lowerer::activation(const Layer& l, LayerSummary& s) {
    const Value& x = input(l, 0);
    if (l.op == "gelu") {  // F.gelu's approximate: "none" (erf) or "tanh", the same kernel either way
        const std::string approximate = attr_string(l, "approximate", "none");
        if (approximate != "none" && approximate != "tanh") {
            throw layer_error(l, "approximate: expected \"none\" or \"tanh\", got \"" + approximate + "\"");
        }
    }
    const double n = numel(x.shape);
    kernel(l, Phase::forward, joined_name("aten::", l.op), KernelKind::elementwise, x.dtype, n, n);
    // relu, tanh and sigmoid save their output; gelu and silu their input. inplace=True (torchvision's
    // ReLU) writes the output over the input: no new tensor.
    if (bool_attr(l, "inplace", false)) tensor_[own_id()] = tensor_[input_id(0)];
    const bool saves_output = l.op == "relu" || l.op == "tanh" || l.op == "sigmoid";
    save_value(s, saves_output ? own_id() : input_id(0), tensor_bytes(n, x.dtype));
    kernel(l, Phase::backward, joined_name("aten::", l.op, "_backward"), KernelKind::elementwise, x.dtype, 2 * n, n);
    return Value{x.shape, x.dtype, x.needs_grad};
}

// dropout (training): writes the output and a one-byte mask; backward multiplies dY by the mask.
// With p = 0, or in eval (inference), PyTorch returns the input itself (ATen's dropout: no kernel, no
// autograd node): the module call's host cost alone, at its own figures (dropout_identity_host_op).
inline Value Lowerer::dropout(const Layer& l, LayerSummary& s) {
    const Value& x = input(l, 0);
    const double p = attr_real(l, "p", 0.5);
    if (p < 0 || p >= 1) throw layer_error(l, "p: must be in [0, 1)");
    if (p == 0 || inference_) {
        tensor_[own_id()] = tensor_[input_id(0)];
        cost_markers_as(dropout_identity_host_op, true, true);
        return x;
    }
    const double n = numel(x.shape);
    Kernel& f = kernel(l, Phase::forward, "aten::native_dropout", KernelKind::elementwise, x.dtype, n, n);
    f.bytes_written += tensor_bytes(n, DType::boolean);
    save(s, SavedPart::mask, tensor_bytes(n, DType::boolean));
    Kernel& b = kernel(l, Phase::backward, "aten::native_dropout_backward", KernelKind::elementwise, x.dtype, n, n);
    b.bytes_read += tensor_bytes(n, DType::boolean);
    return Value{x.shape, x.dtype, x.needs_grad};
}

// scale: x * factor by a Python number (`scores / math.sqrt(d)`): one pass, nothing saved; backward
// one pass (dY * factor). PyTorch's mul / div with a scalar operand.
inline Value Lowerer::scale(const Layer& l, LayerSummary&) {
    const Value& x = input(l, 0);
    const double factor = attr_real(l, "factor", 1.0);
    if (!std::isfinite(factor)) throw layer_error(l, "factor: expected a finite number");
    const double n = numel(x.shape);
    kernel(l, Phase::forward, "aten::mul", KernelKind::elementwise, x.dtype, n, n);
    if (x.needs_grad) kernel(l, Phase::backward, "aten::mul", KernelKind::elementwise, x.dtype, n, n);
    return Value{x.shape, x.dtype, x.needs_grad};
}

// add: one pass; its gradient passes through with no kernel (but a cast into an input of another
// dtype than the result's). mul: one pass; backward computes dA = dY * B and dB = dY * A.
inline Value Lowerer::binary(const Layer& l, LayerSummary& s) {
    const Value& a = input(l, 0);
    const Value& b = input(l, 1);
    // The second input may broadcast over leading dimensions (b's shape a suffix of a's, leading 1s
    // allowed): its gradient is then reduced over them.
    std::size_t ones = 0;  // b's leading 1s, all but its last dimension
    while (ones + 1 < b.shape.size() && b.shape[ones] == 1) ++ones;
    const std::size_t b_core = b.shape.size() - ones;
    const bool broadcast = a.shape != b.shape;
    if (broadcast && (b_core > a.shape.size() ||
                      !std::equal(b.shape.rbegin(), b.shape.rbegin() + static_cast<std::ptrdiff_t>(b_core), a.shape.rbegin()))) {
        throw layer_error(l, "inputs: the second must have the first's shape or broadcast over its leading dimensions");
    }
    const DType dt = (a.dtype == DType::f32 || b.dtype == DType::f32) ? DType::f32 : a.dtype;  // type promotion
    const double n = numel(a.shape);
    // operands of two floating dtypes (a bfloat16 activation and a float32 residual under
    // autocast): each read in its own dtype, by PyTorch's casting loop (is_mixed_elementwise)
    const auto mixed = [](DType x, DType y) { return x != y && is_floating(x) && is_floating(y); };
    Kernel& forward = kernel(l, Phase::forward, joined_name("aten::", l.op), KernelKind::elementwise, dt, n + numel(b.shape), n);
    if (mixed(a.dtype, b.dtype)) read_mixed(forward, n, a.dtype, numel(b.shape), b.dtype);
    if (broadcast && b.needs_grad) kernel(l, Phase::backward, "aten::sum", KernelKind::reduction, dt, n, numel(b.shape));
    if (l.op == "mul") {
        save_input(s, l, 0, dt);
        save_input(s, l, 1, dt);
        // dA = dY * B, dB = dY * A: dY in the result's dtype, the other factor in its own
        for (const auto& [grad_of, other] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
            if (!grad_of->needs_grad) continue;
            Kernel& k = kernel(l, Phase::backward, "aten::mul", KernelKind::elementwise, dt, 2 * n, n);
            if (mixed(dt, other->dtype)) read_mixed(k, n, dt, n, other->dtype);
        }
    }
    // autograd hands each input its gradient in the input's dtype: a 16-bit input of a float32
    // result gets a cast of dY (or of dA, dB)
    for (const Value* in : {&a, &b}) {
        if (in->needs_grad && mixed(in->dtype, dt)) cast(l, Phase::backward, numel(in->shape), dt, in->dtype);
    }
    return Value{a.shape, dt, a.needs_grad || b.needs_grad};
}

// GPT-2's "gelu_new" written out in Python (transformers NewGELUActivation):
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): eight elementwise kernels forward (pow, mul,
// add, mul, tanh, add, mul, mul) and eleven backward (the autograd of each, plus the sums of the
// three gradient paths into x). Under autocast torch.pow is on the float32 list: x is cast up
// for it, and type promotion carries every later product into float32, so a 16-bit x comes out
// as a float32 activation (as an H200 kernel trace of GPT-2 shows: float32 pow, tanh and muls).
//
// Under autocast (the exported trace of GPT-2 small on an H200): 0.5 x stays 16-bit, x is cast
// up for pow, x + 0.044715 x^3 and the last product read one 16-bit and one float32 operand
// (mixed-dtype loops); backward, dY x 0.5 x is mixed, and the gradients that reach the 16-bit
// tensors (0.5 x, x through the add, x through the cast) are cast down and summed in 16 bits.
inline Value Lowerer::gelu_tanh_composite(const Layer& l, LayerSummary& s) {
    const Value& x = input(l, 0);
    const double n = numel(x.shape);
    const bool upcast = rules_.autocast && (x.dtype == DType::bf16 || x.dtype == DType::f16);
    const DType dt = upcast ? DType::f32 : x.dtype;
    save(s, SavedPart::internals, tensor_bytes(4 * n, dt));
    if (!upcast) {
        const int forward_reads[] = {1, 1, 2, 1, 1, 1, 1, 2};
        for (int r : forward_reads) kernel(l, Phase::forward, "aten::elementwise", KernelKind::elementwise, dt, r * n, n);
        const int backward_reads[] = {2, 2, 1, 2, 1, 2, 1, 1, 1, 2, 2};
        for (int r : backward_reads) kernel(l, Phase::backward, "aten::elementwise", KernelKind::elementwise, dt, r * n, n);
        return Value{x.shape, dt, x.needs_grad};
    }
    const DType low = x.dtype;
    const auto plain = [&](Phase phase, DType d, int reads, std::string_view op = "aten::elementwise") {
        kernel(l, phase, op, KernelKind::elementwise, d, reads * n, n);
    };
    const auto mixed = [&](Phase phase) {  // one 16-bit and one float32 operand, a float32 result
        read_mixed(kernel(l, phase, "aten::elementwise", KernelKind::elementwise, dt, 0, n), n, low, n, dt);
    };
    plain(Phase::forward, low, 1);  // 0.5 x
    cast(l, Phase::forward, n, low, dt);
    for (int i = 0; i < 2; ++i) plain(Phase::forward, dt, 1);  // x^3, 0.044715 x^3
    mixed(Phase::forward);                                      // x + 0.044715 x^3
    for (int i = 0; i < 3; ++i) plain(Phase::forward, dt, 1);  // sqrt(2/pi) (...), tanh, 1 + tanh
    mixed(Phase::forward);                                      // 0.5 x (1 + tanh)
    if (!x.needs_grad) return Value{x.shape, dt, false};
    mixed(Phase::backward);        // dY 0.5 x
    plain(Phase::backward, dt, 2);  // dY (1 + tanh)
    cast(l, Phase::backward, n, dt, low);
    plain(Phase::backward, dt, 2);  // tanh_backward
    plain(Phase::backward, dt, 1);  // sqrt(2/pi)
    cast(l, Phase::backward, n, dt, low);
    for (int i = 0; i < 4; ++i) plain(Phase::backward, dt, i == 3 ? 2 : 1);  // 0.044715, x^2, 3 x^2, dY 3 x^2
    cast(l, Phase::backward, n, dt, low);
    plain(Phase::backward, low, 2, "aten::add");  // the gradients into x summed in 16 bits, 0.5 of one
    plain(Phase::backward, low, 1);
    plain(Phase::backward, low, 2, "aten::add");
    return Value{x.shape, dt, true};
}

// x.to(dtype) (x.float(), x.bfloat16()): one elementwise cast forward and the gradient's cast
// back (ToCopyBackward); nothing saved. A cast to the dtype x has is a no-op, as in PyTorch.
inline Value Lowerer::cast_layer(const Layer& l, LayerSummary&) {
    const Value& x = input(l, 0);
    // the floating dtypes the cost models price (an integer or float8 cast has no gradient to cast back)
    const std::string key = attr_string(l, "dtype");
    const auto to = dtype_from_key(key);
    if (!to || !(*to == DType::f32 || *to == DType::bf16 || *to == DType::f16)) {
        throw layer_error(l, "dtype: expected float32, bfloat16 or float16, got '" + key + "'");
    }
    Value y = x;
    if (*to == x.dtype) return y;
    const double n = numel(x.shape);
    cast(l, Phase::forward, n, x.dtype, *to);
    if (x.needs_grad) cast(l, Phase::backward, n, *to, x.dtype);
    y.dtype = *to;
    return y;
}

}  // namespace roofsim::detail
