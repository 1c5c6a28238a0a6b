#pragma once
/// Lowering rules of attention: scaled_dot_product_attention on its backends, and nn.MultiheadAttention.

#include <roofsim/lower/lowerer.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace roofsim::detail {

inline void Lowerer::attention_kernels(const Layer& l, AttentionDims a, DType dt) {
    check_sizes(l, a, dt);
    const double bh_d = static_cast<double>(a.batch) * static_cast<double>(a.heads);
    const double qkv = bh_d * static_cast<double>(a.head_dim) * (static_cast<double>(a.seq_q) + 2 * static_cast<double>(a.seq_kv));
    const double o = bh_d * static_cast<double>(a.seq_q) * static_cast<double>(a.head_dim);
    const double rows = bh_d * static_cast<double>(a.seq_q);
    if (a.backend == AttentionBackend::math && (dt == DType::bf16 || dt == DType::f16)) {
        // The math path upcasts 16-bit inputs to float32 and computes in float32
        // (torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp, False by default since
        // torch 2.5; an H200 kernel trace of the amp-bf16 case shows fp32 GEMMs): Q, K, V cast
        // up, the output cast down, and their gradients the other way.
        cast(l, Phase::forward, qkv, dt, DType::f32);
        attention_kernels(l, a, DType::f32);
        cast(l, Phase::forward, o, DType::f32, dt);
        cast(l, Phase::backward, o, dt, DType::f32);
        cast(l, Phase::backward, qkv, DType::f32, dt);
        return;
    }
    if (a.backend == AttentionBackend::math) {
        // math path (PyTorch's _scaled_dot_product_attention_math, aten/src/ATen/native/transformers/
        // attention.cpp): Q and K^T each times sqrt(scale); causal: a mask ones(L, S).tril() turned
        // into 0 / -inf and added in place to the scores; _safe_softmax (softmax, then rows all -inf
        // set to zero: eq(-inf), all(dim), where, with two one-element scalar tensors); bmm(P, V).
        // Its elementwise and softmax kernels are plain ones: they take those ops' efficiencies, not
        // the fused attention kernels'.
        const std::int64_t bh = product(l, "batch * heads", {a.batch, a.heads});
        const double scores = static_cast<double>(product(l, "batch * heads * seq_q * seq_kv (attention scores)", {bh, a.seq_q, a.seq_kv}));
        const double k_elements = bh_d * static_cast<double>(a.seq_kv) * static_cast<double>(a.head_dim);
        const double mask = static_cast<double>(a.seq_q) * static_cast<double>(a.seq_kv);
        // a kernel of the path that takes the efficiency of the plain op `efficiency_of`
        const auto plain = [&](Phase ph, std::string_view op, KernelKind kind, DType d, double read, double write,
                               std::string_view efficiency_of) -> Kernel& {
            Kernel& k = kernel(l, ph, op, kind, d, read, write);
            k.source_op = efficiency_of;
            return k;
        };
        constexpr auto elementwise = KernelKind::elementwise;
        plain(Phase::forward, "aten::mul", elementwise, dt, o, o, "mul");                     // q * sqrt(scale)
        plain(Phase::forward, "aten::mul", elementwise, dt, k_elements, k_elements, "mul");   // k^T * sqrt(scale)
        gemm(l, Phase::forward, "aten::bmm", dt, {a.seq_q, a.seq_kv, a.head_dim, bh, GemmLayout::nt}, dt);  // Q K^T
        if (a.causal) {
            plain(Phase::forward, "aten::ones", elementwise, DType::boolean, 0, mask, "add");
            plain(Phase::forward, "aten::tril", elementwise, DType::boolean, mask, mask, "add");
            plain(Phase::forward, "aten::where", elementwise, dt, 0, mask, "add").bytes_read = tensor_bytes(mask, DType::boolean);
            plain(Phase::forward, "aten::add_", elementwise, dt, scores + mask, scores, "add");
        }
        plain(Phase::forward, "aten::_softmax", KernelKind::softmax, dt, scores, scores, "softmax");
        for (int i = 0; i < 2; ++i) plain(Phase::forward, "aten::fill_", elementwise, dt, 0, 1, "add");
        plain(Phase::forward, "aten::eq", elementwise, dt, scores, 0, "add").bytes_written = tensor_bytes(scores, DType::boolean);
        plain(Phase::forward, "aten::all", KernelKind::reduction, DType::boolean, scores, rows, "add");
        plain(Phase::forward, "aten::where", elementwise, dt, scores, scores, "add").bytes_read += tensor_bytes(rows, DType::boolean);
        gemm(l, Phase::forward, "aten::bmm", dt, {a.seq_q, a.head_dim, a.seq_kv, bh, GemmLayout::nn}, dt);  // P V
        gemm(l, Phase::backward, "aten::bmm", dt, {a.seq_q, a.seq_kv, a.head_dim, bh, GemmLayout::nt}, dt);  // dP = dO V^T
        gemm(l, Phase::backward, "aten::bmm", dt, {a.seq_kv, a.head_dim, a.seq_q, bh, GemmLayout::tn}, dt);  // dV = P^T dO
        // _safe_softmax's derivative formula is softmax's (_softmax_backward_data): no kernel for its guard
        plain(Phase::backward, "aten::_softmax_backward_data", KernelKind::softmax, dt, 2 * scores, scores, "softmax");
        gemm(l, Phase::backward, "aten::bmm", dt, {a.seq_q, a.head_dim, a.seq_kv, bh, GemmLayout::nn}, dt);  // dQ = dS K
        gemm(l, Phase::backward, "aten::bmm", dt, {a.seq_kv, a.head_dim, a.seq_q, bh, GemmLayout::tn}, dt);  // dK = dS^T Q
        plain(Phase::backward, "aten::mul", elementwise, dt, o, o, "mul");
        plain(Phase::backward, "aten::mul", elementwise, dt, k_elements, k_elements, "mul");
        return;
    }
    // The fused kernels of float32 inputs (the memory-efficient backend's) run on the CUDA cores
    // whatever the TF32 flags: PyTorch's kernel does not read them (H200 kernel corpus of 2026-12-04:
    // fp32 and tf32 times within 1 % of each other).
    const ComputeUnit unit = tensor_unit_for(dt, ComputeUnit::fp32);
    const std::string_view name = a.backend == AttentionBackend::flash   ? "aten::_scaled_dot_product_flash_attention"
                                  : a.backend == AttentionBackend::cudnn ? "aten::_scaled_dot_product_cudnn_attention"
                                                                         : "aten::_scaled_dot_product_efficient_attention";
    Kernel& f = kernel(l, Phase::forward, name, KernelKind::attention, dt, qkv, o,
                       attention_flops(a, false).value(), unit);
    f.bytes_written += tensor_bytes(rows, DType::f32);  // log-sum-exp per row
    f.dims = a;
    // backward: a preprocessing pass (rowsum(dO * O)) and the fused backward kernel.
    kernel(l, Phase::backward, joined_name(name, "_backward"), KernelKind::reduction, dt, 2 * o, 0);
    Kernel& b = kernel(l, Phase::backward, joined_name(name, "_backward"), KernelKind::attention, dt, qkv + 2 * o, qkv,
                       attention_flops(a, true).value(), unit);
    b.dims = a;
    b.backward_pass = true;
}

// sdpa(q, k, v) with q B x H x L x D: the backend's fused kernels (flash / memory-efficient) or
// the math path.
inline Value Lowerer::sdpa(const Layer& l, LayerSummary& s) {
    const Value& q = input(l, 0);
    const Value& k = input(l, 1);
    const Value& v = input(l, 2);
    if (q.shape.size() != 4 || k.shape.size() != 4 || v.shape.size() != 4) throw layer_error(l, "inputs: expected B x H x L x D tensors");
    // q k^T and its product with v: q and k share the head size, k and v the length (the batch
    // dimensions broadcast, as in matmul)
    if (k.shape[3] != q.shape[3] || v.shape[2] != k.shape[2]) {
        throw layer_error(l, "inputs: q and k must share the head size (D), k and v the length (L)");
    }
    AttentionDims a;
    a.batch = q.shape[0]; a.heads = q.shape[1]; a.seq_q = q.shape[2]; a.head_dim = q.shape[3];
    a.seq_kv = k.shape[2];
    a.causal = bool_attr(l, "is_causal", false);
    const auto backend = attention_backend_from_key(attr_string(l, "backend", "flash"));
    if (!backend) throw layer_error(l, "backend: expected flash, efficient, math or cudnn");
    a.backend = *backend;
    a.dropout = attr_real(l, "dropout_p", 0.0);
    if (!(a.dropout >= 0 && a.dropout < 1)) throw layer_error(l, "dropout_p: expected a probability in [0, 1)");
    if (inference_) a.dropout = 0;  // a module passes dropout_p only while training
    const DType dt = compute_dtype(l, q);
    compute_dtype(l, k);  // autocast casts each input, and each one's gradient back
    compute_dtype(l, input(l, 2));
    // flash attention takes 16-bit inputs only: PyTorch runs float32 on the memory-efficient kernels
    // (sdp_utils.cpp, check_tensor_dtype)
    if (a.backend == AttentionBackend::flash && dt == DType::f32) a.backend = AttentionBackend::efficient;
    attention_kernels(l, a, dt);
    cost_markers_as(host_op_of_attention(a.backend), true, true);
    for (std::size_t i = 0; i < 3; ++i) save_input(s, l, i, dt);
    save_value(s, own_id(), tensor_bytes(numel(q.shape), dt));
    return Value{q.shape, dt, true};
}

/// Backward of nn.MultiheadAttention's output projection (dX, dW, db) and of the copy that
/// merged the heads; `tokens` rows of width `e`.
inline void Lowerer::mha_out_projection_backward(const Layer& l, DType dt, std::int64_t tokens, std::int64_t e) {
    const double te = static_cast<double>(tokens * e);
    gemm(l, Phase::backward, "aten::mm", dt, {tokens, e, e, 1, GemmLayout::nn}, dt);  // dX = dY W
    gemm(l, Phase::backward, "aten::mm", dt, {e, e, tokens, 1, GemmLayout::tn}, dt);  // dW = dY^T X
    column_sum(l, dt, tokens, e);
    kernel(l, Phase::backward, "aten::clone", KernelKind::copy, dt, te, te);
}

/// Backward of the copy that split the heads and of the packed input projection (dX when the
/// input needs it, dW, db).
inline void Lowerer::mha_in_projection_backward(const Layer& l, DType dt, std::int64_t tokens, std::int64_t e, bool input_grad) {
    const double te = static_cast<double>(tokens * e);
    kernel(l, Phase::backward, "aten::clone", KernelKind::copy, dt, 3 * te, 3 * te);
    if (input_grad) gemm(l, Phase::backward, "aten::mm", dt, {tokens, e, 3 * e, 1, GemmLayout::nn}, dt);
    gemm(l, Phase::backward, "aten::mm", dt, {3 * e, e, tokens, 1, GemmLayout::tn}, dt);
    column_sum(l, dt, tokens, 3 * e);
}

// nn.MultiheadAttention(x, x, x) in training (need_weights=True, the default): packed input
// projection, a copy to split heads, scaled Q K^T (baddbmm), softmax, P V (bmm), the head-averaged
// weights, and the output projection (torch.nn.functional.multi_head_attention_forward).
inline Value Lowerer::mha(const Layer& l, LayerSummary& s) {
    const Value& x = input(l, 0);
    if (x.shape.size() != 3) throw layer_error(l, "input: expected B x L x E (batch_first)");
    // PyTorch takes batch_first false too (L x B x E); the lowering models the batch-first layout
    if (!bool_attr(l, "batch_first", true)) throw layer_error(l, "batch_first: only true (B x L x E) is modelled");
    const std::int64_t e = int_attr(l, "embed_dim"), heads = int_attr(l, "num_heads");
    if (x.shape[2] != e) throw layer_error(l, "embed_dim: does not match the input");
    if (heads <= 0 || e % heads != 0) throw layer_error(l, "num_heads: must divide embed_dim");
    const std::int64_t b = x.shape[0], len = x.shape[1], d = e / heads;
    const std::int64_t bh = product(l, "batch * num_heads", {b, heads});
    const double tokens = static_cast<double>(b * len);  // the input's element count fits: so does this
    const double e_squared = static_cast<double>(product(l, "4 * embed_dim * embed_dim (weight elements)", {4, e, e})) / 4;
    add_parameter(s, 3 * e_squared);                   // in_proj_weight
    add_parameter(s, 3 * static_cast<double>(e));      // in_proj_bias
    add_parameter(s, e_squared);                       // out_proj.weight
    add_parameter(s, static_cast<double>(e));          // out_proj.bias
    const DType dt = compute_dtype(l, x);
    weight_cast(l, 4 * e_squared + 4 * static_cast<double>(e), dt);
    const double te = tokens * static_cast<double>(e);
    const double scores = static_cast<double>(product(l, "batch * num_heads * L * L (attention weights)", {bh, len, len}));
    if (!bool_attr(l, "need_weights", true)) {
        // need_weights=False: the packed projection, a copy to split heads, SDPA (flash for 16-bit,
        // memory-efficient for float32), a copy to merge heads, the output projection.
        gemm(l, Phase::forward, "aten::addmm", dt, {b * len, 3 * e, e, 1, GemmLayout::nt}, dt);
        kernel(l, Phase::forward, "aten::clone", KernelKind::copy, dt, 3 * te, 3 * te);
        AttentionDims a{b, heads, len, len, d, false,
                        dt == DType::f32 ? AttentionBackend::efficient : AttentionBackend::flash};
        attention_kernels(l, a, dt);
        kernel(l, Phase::forward, "aten::clone", KernelKind::copy, dt, te, te);
        gemm(l, Phase::forward, "aten::addmm", dt, {b * len, e, e, 1, GemmLayout::nt}, dt);
        save(s, SavedPart::internals, tensor_bytes(6 * te, dt));
        mha_out_projection_backward(l, dt, b * len, e);
        mha_in_projection_backward(l, dt, b * len, e, x.needs_grad);
        cost_markers_as(mha_no_weights_host_op, true, true);
        return Value{x.shape, dt, true};
    }
    // forward
    gemm(l, Phase::forward, "aten::addmm", dt, {b * len, 3 * e, e, 1, GemmLayout::nt}, dt);
    kernel(l, Phase::forward, "aten::clone", KernelKind::copy, dt, 3 * te, 3 * te);  // split heads
    kernel(l, Phase::forward, "aten::mul", KernelKind::elementwise, dt, te, te);        // q * scale
    gemm(l, Phase::forward, "aten::baddbmm", dt, {len, len, d, bh, GemmLayout::nt}, dt);  // Q K^T
    kernel(l, Phase::forward, "aten::_softmax", KernelKind::softmax, dt, scores, scores);
    gemm(l, Phase::forward, "aten::bmm", dt, {len, d, len, bh, GemmLayout::nn}, dt);      // P V
    kernel(l, Phase::forward, "aten::clone", KernelKind::copy, dt, te, te);            // merge heads
    gemm(l, Phase::forward, "aten::addmm", dt, {b * len, e, e, 1, GemmLayout::nt}, dt);
    kernel(l, Phase::forward, "aten::mean", KernelKind::reduction, dt, scores, static_cast<double>(b * len * len));
    save(s, SavedPart::internals, tensor_bytes(4 * te + scores, dt));
    // backward (reverse order)
    mha_out_projection_backward(l, dt, b * len, e);
    gemm(l, Phase::backward, "aten::bmm", dt, {len, len, d, bh, GemmLayout::nt}, dt);  // dP = dO V^T
    gemm(l, Phase::backward, "aten::bmm", dt, {len, d, len, bh, GemmLayout::tn}, dt);  // dV = P^T dO
    kernel(l, Phase::backward, "aten::_softmax_backward_data", KernelKind::softmax, dt, 2 * scores, scores);
    gemm(l, Phase::backward, "aten::bmm", dt, {len, d, len, bh, GemmLayout::nn}, dt);  // dQ = dS K
    gemm(l, Phase::backward, "aten::bmm", dt, {len, d, len, bh, GemmLayout::tn}, dt);  // dK = dS^T Q
    kernel(l, Phase::backward, "aten::mul", KernelKind::elementwise, dt, te, te);
    mha_in_projection_backward(l, dt, b * len, e, x.needs_grad);
    return Value{x.shape, dt, true};
}

}  // namespace roofsim::detail
