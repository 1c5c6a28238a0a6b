#pragma once
/// Convolution cost: the cuDNN sweep's times at this geometry (other batch sizes), else the implicit
/// GEMM's model time times the measured cuDNN/GEMM ratio of its pass.

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

/// Convolution: the implicit GEMM's model time times the measured cuDNN/GEMM ratio of its pass;
/// depthwise and other thin-channel convolutions are bounded by their bytes.
[[nodiscard]] inline KernelCost conv_cost(const Kernel& k, const ConvDims& d, const CostContext& ctx) {
    // The sweep timed this geometry at other batch sizes: the measured times at the batches that
    // bracket N, each scaled by the implicit GEMM model's time ratio, t(N) = t(N0) model(N) / model(N0)
    // (the work and its wave quantization change with N, the algorithm's efficiency on the geometry
    // is kept), interpolated in log time over log N (from_measured_neighbours).
    if (auto it = ctx.conv_measured_by_batch.find(detail::conv_geometry_key(k.unit, d)); it != ctx.conv_measured_by_batch.end()) {
        if (auto same = it->second.find(d.n); same != it->second.end()) {
            return {same->second.seconds, Bound::compute};  // the calibration timed this very shape
        }
        if (auto model = ctx.gemm.find(k.unit); model != ctx.gemm.end()) {
            const Seconds model_n = detail::gemm_model_time(model->second, detail::implicit_gemm(d));
            if (auto e = detail::from_measured_neighbours(it->second, d.n, model_n, true, [](std::int64_t) { return true; })) {
                return {e->time, Bound::compute};
            }
        }
    }
    KernelCost c = gemm_cost(k, detail::implicit_gemm(d), ctx);
    const bool depthwise = d.groups > 1 && d.groups == d.c;
    if (auto it = ctx.conv.find({k.unit, d.pass, depthwise}); it != ctx.conv.end()) c.time *= it->second.factor;
    const Seconds memory = k.bytes() / ctx.ceilings.rate(MemoryLevel::dram);
    if (memory > c.time) c = {memory, Bound::dram};
    return c;
}

}  // namespace roofsim
