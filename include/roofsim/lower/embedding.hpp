#pragma once
/// Lowering rule of embeddings, and the kernels of PyTorch's sorted embedding backward.

#include <roofsim/lower/lowerer.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace roofsim::detail {

/// One kernel of PyTorch's sorted embedding backward, with the bytes it moves.
struct EmbeddingSortKernel {
    KernelKind kind;
    double read_bytes;
    double write_bytes;
};

/// The kernels aten::embedding_dense_backward runs after zero-filling dW when it has more than 3072
/// indices (PyTorch's Embedding.cu, EmbeddingBackwardKernel.cu; launches as in the H200 trace of an
/// 8192-index backward): `lookups` indices of `index_dtype`, `row_elements` = lookups x embedding
/// dim of dY's `grad_dtype`, partial row sums in float32.
[[nodiscard]] inline std::vector<EmbeddingSortKernel> embedding_sort_kernels(double lookups, double row_elements,
                                                                           DType index_dtype, DType grad_dtype) {
    const double ib = bytes_per_element(index_dtype), gb = bytes_per_element(grad_dtype);
    const double pairs = lookups * (ib + 8);  // (index, int64 position) pairs
    std::vector<EmbeddingSortKernel> v;
    for (int i = 0; i < 10; ++i) v.push_back({KernelKind::elementwise, 0, 0});  // memsets of cub's temporary storage
    v.push_back({KernelKind::elementwise, 0, lookups * 8});                      // positions: arange
    v.push_back({KernelKind::copy, lookups * ib, 0});                            // radix sort: histogram
    v.push_back({KernelKind::copy, 0, 0});                                       // its exclusive sum
    for (int pass = 0; pass < static_cast<int>(ib); ++pass) v.push_back({KernelKind::copy, pairs, pairs});  // a pass per key byte
    v.push_back({KernelKind::copy, 0, 0});                                       // unique-by-key: tile state
    v.push_back({KernelKind::copy, lookups * ib, lookups * (ib + 8)});           // segment starts
    v.push_back({KernelKind::copy, 0, 0});                                       // scan: tile state
    v.push_back({KernelKind::copy, lookups * 8, lookups * 8});                   // segment offsets
    v.push_back({KernelKind::copy, lookups * 8, 8});                             // compute_num_of_partial_segments
    v.push_back({KernelKind::copy, lookups * 8, lookups * 8});                   // krn_partials_per_segment
    v.push_back({KernelKind::copy, lookups * 8, lookups * 8});                   // krn_partial_segment_offset
    v.push_back({KernelKind::embedding, row_elements * gb + lookups * 8, row_elements * 4});  // compute_grad_weight
    v.push_back({KernelKind::embedding, row_elements * 4, row_elements * gb});                // sum_and_scatter into dW
    return v;
}

// embedding: gather rows forward. Backward (aten::embedding_dense_backward, PyTorch's
// Embedding.cu) zero-fills the weight gradient, then up to 3072 indices accumulates the rows in
// one atomic kernel; beyond that it sorts the (index, position) pairs with cub's radix sort (one
// pass per index byte), finds the segments of equal indices and sums each segment's rows: about
// 30 launches, as the H200 trace of the 8192-index case shows (torch.profiler, 2026-12-01; in git history).
inline Value Lowerer::embedding(const Layer& l, LayerSummary& s) {
    const Value& idx = input(l, 0);
    const std::int64_t rows = int_attr(l, "num_embeddings"), dim = int_attr(l, "embedding_dim");
    const double lookups = numel(idx.shape);
    const double weights = static_cast<double>(product(l, "num_embeddings * embedding_dim (weight elements)", {rows, dim}));
    // F.embedding takes integer indices into at least one row
    if (rows < 1 || dim < 1) throw layer_error(l, "num_embeddings, embedding_dim: expected positive integers");
    if (is_floating(idx.dtype)) throw layer_error(l, "input: expected integer indices, got " + std::string(to_string(idx.dtype)));
    add_parameter(s, weights);
    const DType dt = rules_.parameter_dtype;
    const double row_elements = lookups * static_cast<double>(dim);
    Kernel& f = kernel(l, Phase::forward, "aten::embedding", KernelKind::embedding, dt, row_elements, row_elements);
    f.bytes_read += tensor_bytes(lookups, idx.dtype);
    save_value(s, input_id(0), tensor_bytes(lookups, idx.dtype));
    constexpr std::string_view op = "aten::embedding_dense_backward";
    kernel(l, Phase::backward, op, KernelKind::elementwise, dt, 0, weights);  // zero-fill dW
    if (lookups <= 3072) {
        Kernel& a = kernel(l, Phase::backward, op, KernelKind::embedding, dt, row_elements, row_elements);
        a.bytes_read += tensor_bytes(lookups, idx.dtype);
        cost_markers_as("embedding_atomic", false, true);  // the atomic path's host cost (framework probe)
    } else {
        for (const auto& k : detail::embedding_sort_kernels(lookups, row_elements, idx.dtype, dt)) {
            Kernel& b = kernel(l, Phase::backward, op, k.kind, DType::i64, 0, 0);
            b.dtype = k.kind == KernelKind::embedding ? dt : idx.dtype;
            b.bytes_read = Bytes(k.read_bytes);
            b.bytes_written = Bytes(k.write_bytes);
        }
    }
    Value y{idx.shape, dt, true};
    y.shape.push_back(dim);
    return y;
}

}  // namespace roofsim::detail
