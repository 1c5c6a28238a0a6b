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

/// Convolution: the convolution model of its pass (conv_model_time: the implicit GEMM's waves times
/// the pass's factor, or its tensors' bytes, plus the pass's fixed time); where the calibration's cuDNN
/// sweep timed the same geometry at other batch sizes, the measured times scaled by the model's ratio.
[[nodiscard]] inline KernelCost conv_cost(const Kernel& k, const ConvDims& d, const CostContext& ctx) {
    const auto model = ctx.gemm.find(k.unit);
    if (model == ctx.gemm.end()) (void)ctx.ceilings.rate(k.unit);  // throws, naming the GPU and unit
    const auto measured = ctx.conv_measured_by_batch.find(detail::conv_geometry_key(k.unit, d));
    if (measured != ctx.conv_measured_by_batch.end()) {
        if (auto same = measured->second.find(d.n); same != measured->second.end()) {
            return {same->second.seconds, Bound::compute};  // the calibration timed this very shape
        }
    }
    const ConvModel* pass = detail::find_conv_params(ctx.conv, k.unit, d);
    const ConvKernelParams params = pass ? pass->params : ConvKernelParams{ScaledGemmParams{1, model->second.params().fixed_time}, 0};
    // the model's time at this shape, with the tensors' bytes the context prepared its neighbours with
    const Seconds t = detail::conv_model_time(model->second, params, d, k.unit, detail::conv_tensor_bytes(d, detail::gemm_element_bytes(k.unit)));
    // The sweep timed this geometry at other batch sizes: the measured times at the batches that
    // bracket N, each scaled by the model's time ratio, t(N) = t(N0) model(N) / model(N0) (the work and
    // its wave quantization change with N, the algorithm's efficiency on the geometry is kept),
    // interpolated in log time over log N (from_measured_neighbours).
    if (measured != ctx.conv_measured_by_batch.end()) {
        if (auto e = detail::from_measured_neighbours(measured->second, d.n, t, true, [](std::int64_t) { return true; })) {
            return {e->time, Bound::compute};
        }
    }
    const Seconds memory = k.bytes() / ctx.ceilings.rate(MemoryLevel::dram);
    return {t, params.scaled.fixed_time + memory * (1 + params.transposes) >= t ? Bound::dram : Bound::compute};
}

}  // namespace roofsim
