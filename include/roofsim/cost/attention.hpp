#pragma once
/// Fused attention cost: its FLOPs as the batched GEMMs of its tiles at the GEMM model's rate, or its bytes.

#include <roofsim/cost/gemm.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace roofsim {

/// Fused attention: its FLOPs as batched GEMMs of the same size (Q K^T and P V forward; five
/// GEMMs backward), at the GEMM model's rate.
[[nodiscard]] inline KernelCost attention_cost(const Kernel& k, const AttentionDims& a, const CostContext& ctx) {
    // Fused attention works on blocks of 64 query and key rows (FlashAttention-2; cuDNN's H200 kernels
    // are 64 x 64 and 64 x 128 tiles): a sequence length is padded up to a multiple of 64, and an odd
    // length costs that padding, not cuBLAS's slow path for unaligned GEMMs.
    const auto blocks_of_64 = [](std::int64_t n) { return (n + 63) / 64 * 64; };
    const GemmDims g{blocks_of_64(a.seq_q), blocks_of_64(a.seq_kv), a.head_dim, a.batch * a.heads};
    auto model = ctx.gemm.find(k.unit);
    if (model == ctx.gemm.end()) (void)ctx.ceilings.rate(k.unit);
    const Seconds one = detail::gemm_model_time(model->second, g) - model->second.fixed_time;
    const double gemms = (a.causal ? 0.5 : 1.0) * (k.backward_pass ? 5.0 : 2.0);
    const Seconds compute = model->second.fixed_time + one * gemms;
    const Seconds memory = k.bytes() / ctx.ceilings.rate(MemoryLevel::dram);
    return compute >= memory ? KernelCost{compute, Bound::compute} : KernelCost{memory, Bound::dram};
}

}  // namespace roofsim
