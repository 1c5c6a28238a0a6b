#pragma once
/// The GPU time of one kernel of the IR: the cost model of its kind, times its per-op efficiency,
/// never below the launch floor; and the gap after it on its stream.

#include <roofsim/cost/attention.hpp>
#include <roofsim/cost/conv.hpp>
#include <roofsim/cost/gemm.hpp>
#include <roofsim/cost/op_factor.hpp>
#include <roofsim/cost/streaming.hpp>
#include <roofsim/detail/cost_memo.hpp>

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

/// The GPU time after a kernel before the next one of its stream can start: ctx.kernel_gap, except
/// after GEMMs and convolutions (their sweep timings include it) and kernels at the latency floor.
[[nodiscard]] inline Seconds gap_after(const Kernel& k, const KernelCost& c, const CostContext& ctx) {
    if (k.kind == KernelKind::host_only || k.kind == KernelKind::gemm || k.kind == KernelKind::conv ||
        c.bound == Bound::latency) {
        return Seconds(0);
    }
    return ctx.kernel_gap;
}

/// The kinds priced as PyTorch's memory-bound kernels (streaming_cost with the kernel model's fixed time).
[[nodiscard]] constexpr bool is_memory_bound_kind(KernelKind k) {
    return k != KernelKind::gemm && k != KernelKind::conv && k != KernelKind::attention && k != KernelKind::unknown &&
           k != KernelKind::host_only && k != KernelKind::collective;
}

namespace detail {

/// kernel_cost, for a caller costing many kernels: with the kernel's per-op efficiency `factor`
/// (op_factor) looked up beforehand, and the curves' bandwidths and the GEMM and convolution shapes'
/// costs remembered where `memo` and `shapes` are given.
[[nodiscard]] inline KernelCost kernel_cost(const Kernel& k, const CostContext& ctx, double factor, BandwidthMemo* memo,
                                            ShapeMemo* shapes = nullptr) {
    if (ctx.tf32_as_fp32 && k.unit == ComputeUnit::tf32_tensor) {  // no TF32 tensor cores: float32
        Kernel fp32 = k;
        fp32.unit = ComputeUnit::fp32;
        return kernel_cost(fp32, ctx, factor, memo, shapes);
    }
    KernelCost c;
    switch (k.kind) {
        case KernelKind::host_only: return {Seconds(0), Bound::latency};
        case KernelKind::collective:  // on its own stream, at NCCL's measured or link-bound speed; no per-op factor
            return {max(all_reduce_time(k.bytes_read.value(), k.ranks, ctx.collectives), ctx.kernel_floor), Bound::communication};
        case KernelKind::gemm:
            if (const auto* g = std::get_if<GemmDims>(&k.dims)) {
                c = shapes ? shapes->cost(k, *g, [&] { return gemm_cost(k, *g, ctx); }) : gemm_cost(k, *g, ctx);
            } else {
                c = streaming_cost(k, ctx, false, memo);
            }
            break;
        case KernelKind::conv:
            if (const auto* d = std::get_if<ConvDims>(&k.dims)) {
                c = shapes ? shapes->cost(k, *d, [&] { return conv_cost(k, *d, ctx); }) : conv_cost(k, *d, ctx);
            } else {
                c = streaming_cost(k, ctx, false, memo);
            }
            break;
        case KernelKind::attention:
            c = std::holds_alternative<AttentionDims>(k.dims) ? attention_cost(k, std::get<AttentionDims>(k.dims), ctx)
                                                               : streaming_cost(k, ctx, false, memo);
            break;
        case KernelKind::reduction: c = streaming_cost(k, ctx, true, memo, ctx.memory_fixed_time); break;
        case KernelKind::unknown: {
            KernelWork w{k.flops, k.unit, k.bytes(), std::nullopt};
            const RooflineTime r = roofline_time(w, ctx.ceilings);
            c = {r.time, r.bound};
            break;
        }
        default: c = streaming_cost(k, ctx, false, memo, ctx.memory_fixed_time); break;
    }
    // the per-op efficiency scales what the kernel's work costs; a memory-bound kernel's fixed time stays
    const Seconds fixed = is_memory_bound_kind(k.kind) ? ctx.memory_fixed_time : Seconds(0);
    c.time = fixed + (c.time - fixed) * factor;
    if (c.time < ctx.kernel_floor) c = {ctx.kernel_floor, Bound::latency};
    return c;
}

}  // namespace detail

/// The GPU time of one kernel, never below the kernel floor. Host-only ops take no GPU time. Unknown
/// kernels are costed by their bytes and FLOPs on the roofline and stay flagged.
[[nodiscard]] inline KernelCost kernel_cost(const Kernel& k, const CostContext& ctx) {
    return detail::kernel_cost(k, ctx, op_factor(k, ctx), nullptr);
}

}  // namespace roofsim
