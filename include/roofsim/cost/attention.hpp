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

namespace detail {
/// A fused attention as the batched GEMM its thread blocks run (FlashAttention-2 and cuDNN's fused
/// kernels: one block per 64 or 128 query rows of a head, looping over the key blocks): per head,
/// m = the query rows, n = the head dimension, k = the key rows (padded to blocks of 64, so an odd
/// length costs its padding), batch = batch x heads; its FLOPs that GEMM's two times forward (Q K^T and
/// P V), five times backward. A causal mask skips the key blocks past the diagonal, but each diagonal
/// block runs whole: of nb x nb blocks of 128, nb (nb + 1) / 2 run.
[[nodiscard]] inline std::pair<GemmDims, double> attention_gemms(const AttentionDims& a, bool backward) {
    // the loaders refuse sizes that overflow int64 (ir.hpp, oversized_size); these checks are the last guard
    const auto blocks_of_64 = [](std::int64_t n) { return detail::value_or_overflow(detail::checked_round_up(n, 64), "attention sequence"); };
    const double nb = static_cast<double>(detail::value_or_overflow(detail::checked_round_up(std::max(a.seq_q, a.seq_kv), 128),
                                                                    "attention sequence") / 128);
    const double share = a.causal ? (nb + 1) / (2 * nb) : 1.0;
    return {GemmDims{blocks_of_64(a.seq_q), a.head_dim, blocks_of_64(a.seq_kv), detail::value_or_overflow(detail::checked_mul(a.batch, a.heads), "attention batch * heads"), GemmLayout::nn},
            share * (backward ? 5.0 : 2.0)};
}
}  // namespace detail

/// Fused attention: the GEMM model's waves of its tile products (attention_gemms), times the kernel
/// model's factor of its unit, backend and phase plus its fixed time, or its bytes at DRAM bandwidth;
/// without a kernel-model entry, the products at the GEMM model's time (the framework profile's sdpa
/// efficiency then scales it, op_factor).
[[nodiscard]] inline KernelCost attention_cost(const Kernel& k, const AttentionDims& a, const CostContext& ctx) {
    auto model = ctx.gemm.find(k.unit);
    if (model == ctx.gemm.end()) (void)ctx.ceilings.rate(k.unit);
    const auto [g, gemms] = detail::attention_gemms(a, k.backward_pass);
    const GemmChoice one = gemm_choice(model->second, g, detail::gemm_element_bytes(k.unit));
    const Seconds memory = k.bytes() / ctx.ceilings.rate(MemoryLevel::dram);
    if (const auto it = ctx.attention.find({k.unit, a.backend, k.backward_pass}); it != ctx.attention.end()) {
        const Seconds compute = one.compute * gemms * it->second.factor;
        return {it->second.fixed_time + std::max(compute, memory), compute >= memory ? Bound::compute : Bound::dram};
    }
    const Seconds fixed = model->second.params().fixed_time;
    const Seconds compute = fixed + (one.time - fixed) * gemms;
    return compute >= memory ? KernelCost{compute, Bound::compute} : KernelCost{memory, Bound::dram};
}

}  // namespace roofsim
