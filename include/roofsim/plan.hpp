#pragma once
/// Capacity planning over predictions: the largest batch of a model that fits a GPU, one model
/// compared over several GPUs, and its data-parallel scaling over GPU counts.

#include <roofsim/predict.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>
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

/// One GPU's row of a comparison.
struct Comparison {
    std::string gpu_key;
    std::string profile;  ///< "measured" (a calibration of that GPU), "derived" (profile/derive.hpp) or "datasheet"
    Prediction prediction;  ///< at the asked batch, or at the GPU's largest that fits
    std::optional<std::int64_t> largest_batch;  ///< the largest batch that fits; none where batch 1 does not
    double speedup = 1;  ///< samples per second over the first row's
    /// Of the step: GPU time in compute-bound kernels, in memory- (and latency-) bound ones, and the
    /// rest, where the GPU waits on the host (or on communication).
    double compute_share = 0, memory_share = 0, idle_share = 0;
};

/// A GPU to compare on: its cost context, and the framework profile of the host it is taken with
/// (none: PredictOptions::framework).
struct ComparedGpu {
    const CostContext* ctx = nullptr;
    const FrameworkProfile* framework = nullptr;
};

/// `graph` on each GPU of `gpus` with `options`; with `at_largest_batch`, each GPU at its own largest
/// batch that fits (a GPU where batch 1 does not fit gets the asked batch, marked by no largest_batch).
[[nodiscard]] inline std::vector<Comparison> compare(const Graph& graph, const std::vector<ComparedGpu>& gpus,
                                                     PredictOptions options, bool at_largest_batch) {
    std::vector<Comparison> rows;
    const FrameworkProfile* default_framework = options.framework;
    for (const ComparedGpu& gpu : gpus) {
        const CostContext* ctx = gpu.ctx;
        options.framework = gpu.framework ? gpu.framework : default_framework;
        Comparison r;
        r.gpu_key = ctx->ceilings.gpu_key;
        r.profile = ctx->ceilings.kind;
        try {
            MaxBatch m = max_batch(graph, *ctx, options);
            r.largest_batch = m.batch;
            if (at_largest_batch) r.prediction = std::move(m.prediction);
        } catch (const std::runtime_error&) {  // batch 1 does not fit: no largest batch
        }
        if (!at_largest_batch || !r.largest_batch) r.prediction = predict(graph, *ctx, options);
        const Prediction& p = r.prediction;
        Seconds compute{0};
        for (std::size_t i = 0; i < p.kernels.kernels.size(); ++i) {
            const KernelKind kind = p.kernels.kernels[i].kind;
            if (kind != KernelKind::host_only && kind != KernelKind::collective && p.timeline.kernels[i].bound == Bound::compute) {
                compute += p.timeline.kernels[i].gpu_time;
            }
        }
        const double step = p.step_time.value();
        r.compute_share = compute.value() / step;
        r.memory_share = (p.gpu_time + p.gpu_gap_time - compute).value() / step;
        r.idle_share = std::max(0.0, 1.0 - r.compute_share - r.memory_share);
        rows.push_back(std::move(r));
    }
    if (!rows.empty()) {
        auto rate = [](const Prediction& p) { return static_cast<double>(p.batch) * p.gpus / p.step_time.value(); };
        const double first = rate(rows.front().prediction);
        for (auto& r : rows) r.speedup = rate(r.prediction) / first;
    }
    return rows;
}

/// One GPU count of a scaling curve.
struct ScalingPoint {
    int gpus = 1;
    Prediction prediction;  ///< per GPU at the curve's batch, or at its largest that fits with DDP's buckets
    double speedup = 1;     ///< samples/s over all GPUs over one GPU's at the same batch per GPU
    double efficiency = 1;  ///< speedup / gpus
};

/// `graph` trained data-parallel (DDP) on each count of `gpu_counts` GPUs of `ctx`'s kind at
/// `options`' batch per GPU; where that batch does not fit beside DDP's gradient buckets, at the
/// largest that does. Speedup against one GPU at the batch each count ran (weak scaling: the global
/// batch grows with the GPUs).
[[nodiscard]] inline std::vector<ScalingPoint> scale(const Graph& graph, const CostContext& ctx, PredictOptions options,
                                                     const std::vector<int>& gpu_counts) {
    std::vector<ScalingPoint> points;
    for (const int n : gpu_counts) {
        if (n < 1) throw std::invalid_argument("scale: a GPU count must be positive, got " + std::to_string(n));
        PredictOptions at = options;
        at.data_parallel.gpus = n;
        ScalingPoint point;
        point.gpus = n;
        point.prediction = predict(graph, ctx, at);
        if (!point.prediction.memory_fit.fits()) point.prediction = max_batch(graph, ctx, at).prediction;
        PredictOptions one = options;
        one.data_parallel.gpus = 1;
        one.lowering.batch = point.prediction.batch;
        const Prediction single = predict(graph, ctx, one);
        const auto rate = [](const Prediction& p) { return static_cast<double>(p.batch) * p.gpus / p.step_time.value(); };
        point.speedup = rate(point.prediction) / rate(single);
        point.efficiency = point.speedup / n;
        points.push_back(std::move(point));
    }
    return points;
}

/// One point of throughput over batch size.
struct BatchPoint {
    std::int64_t batch = 0;
    double samples_per_second = 0;
};

/// Samples per second over all GPUs of a prediction.
[[nodiscard]] inline double samples_per_second(const Prediction& p) {
    return static_cast<double>(p.batch) * p.gpus / p.step_time.value();
}

/// `graph`'s throughput at batches 1, 2, 4, ... below `largest`, and at `largest` itself (the
/// largest batch that fits: max_batch), with `options`' other settings.
[[nodiscard]] inline std::vector<BatchPoint> throughput_over_batch(const Graph& graph, const CostContext& ctx, PredictOptions options,
                                                                   std::int64_t largest) {
    if (largest < 1) throw std::invalid_argument("throughput_over_batch: the largest batch must be positive, got " + std::to_string(largest));
    std::vector<BatchPoint> points;
    for (std::int64_t b = 1;; b = b > largest / 2 ? largest : b * 2) {
        options.lowering.batch = b;
        points.push_back({b, samples_per_second(predict(graph, ctx, options))});
        if (b == largest) break;
    }
    return points;
}

}  // namespace roofsim
