#pragma once
/// The kernels of PyTorch's sorted embedding backward (EmbeddingBackwardKernel.cu).

#include <roofsim/ir.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace roofsim {

namespace detail {

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

}  // namespace detail

}  // namespace roofsim
