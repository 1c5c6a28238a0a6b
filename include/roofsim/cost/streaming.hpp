#pragma once
/// Memory-bound kernel cost: bytes over the bandwidth the calibration measured at that working set.

#include <roofsim/cost/context.hpp>
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

/// Memory-bound kernels: t0 + bytes / bandwidth at that working set (the calibration's curve for the
/// pattern; the DRAM ceiling without one), t0 `fixed` (CostContext::memory_fixed_time for PyTorch's
/// memory-bound kernels). `memo`, where given, remembers the curves' bandwidths.
[[nodiscard]] inline KernelCost streaming_cost(const Kernel& k, const CostContext& ctx, bool read_mostly,
                                               detail::BandwidthMemo* memo = nullptr, Seconds fixed = Seconds(0)) {
    const auto& curve = read_mostly ? ctx.read_curve : ctx.copy_curve;
    const std::optional<BytesPerSecond> measured =
        memo ? memo->bandwidth(read_mostly, k.bytes()) : detail::curve_bandwidth(curve, k.bytes());
    const BytesPerSecond bw = measured.value_or(memo ? memo->dram() : ctx.ceilings.rate(MemoryLevel::dram));
    KernelCost c{k.bytes() / bw, Bound::dram};
    if (k.flops.value() > 0 && k.unit != ComputeUnit::fp32) c.time = max(c.time, k.flops / ctx.ceilings.rate(k.unit));
    c.time += fixed;
    return c;
}

}  // namespace roofsim
