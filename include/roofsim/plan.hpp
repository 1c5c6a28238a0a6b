#pragma once
/// Capacity planning over predictions: the largest batch of a model that fits a GPU.

#include <roofsim/predict.hpp>

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

namespace roofsim {

/// The largest batch whose predicted step fits (MemoryFit::fits), and its prediction.
struct MaxBatch {
    std::int64_t batch = 0;
    Prediction prediction;  ///< at that batch
};

/// The largest batch (per GPU) of `graph` whose step fits the GPU of `ctx`, with `options`' other
/// settings: batches doubled from 1 until one does not fit, then bisected. Throws where batch 1 does
/// not fit, saying by how much.
[[nodiscard]] inline MaxBatch max_batch(const Graph& graph, const CostContext& ctx, PredictOptions options) {
    auto at = [&](std::int64_t b) {
        options.lowering.batch = b;
        return predict(graph, ctx, options);
    };
    Prediction low = at(1);
    if (!low.memory_fit.fits()) {
        std::ostringstream why;
        why.precision(3);
        why << graph.name << " does not fit " << ctx.ceilings.gpu_key << " even at batch 1: its peak "
            << to_gib(low.memory_fit.peak) << " GiB is " << to_gib(low.memory_fit.peak - low.memory_fit.usable())
            << " GiB over the " << to_gib(low.memory_fit.usable()) << " GiB usable";
        throw std::runtime_error(why.str());
    }
    std::int64_t lo = 1, hi = 2;
    constexpr std::int64_t limit = std::int64_t(1) << 40;
    for (;;) {
        Prediction p = at(hi);
        if (!p.memory_fit.fits()) break;
        lo = hi;
        low = std::move(p);
        if (hi >= limit) throw std::runtime_error("max_batch: " + graph.name + " fits at every batch up to 2^40 (no memory grows with the batch?)");
        hi *= 2;
    }
    while (hi - lo > 1) {
        const std::int64_t mid = lo + (hi - lo) / 2;
        Prediction p = at(mid);
        if (p.memory_fit.fits()) {
            lo = mid;
            low = std::move(p);
        } else {
            hi = mid;
        }
    }
    return {lo, std::move(low)};
}

}  // namespace roofsim
