#pragma once
/// GEMM cost: the calibration's cuBLAS times at this shape or its measured neighbours, else the GEMM
/// kernel model (gemm_model.hpp: tile, split of K, waves, alignment), times the operand layout's factor.

#include <roofsim/cost/context.hpp>

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
/// A time estimated from measured neighbours, and how far it reached: the ratio (>= 1) between the
/// shape's value and the nearest neighbour's it used, 1 when two neighbours bracket the shape.
struct NeighbourEstimate {
    Seconds time{0};
    double reach = 1;
};

/// A time from measured neighbours along one dimension (value -> measured point): each neighbour's
/// measured time scaled by the model's time ratio, t(x) = t(x0) model(x) / model(x0), interpolated in
/// log time over log x between the two that bracket x, or the nearest one within a factor of 4 of x;
/// `model_x` is the model's time at x, and each point holds its own over the model's at its x
/// (MeasuredPoint), so that the interpolation t_lo^(1-w) t_hi^w, w = log(x / x_lo) / log(x_hi / x_lo),
/// is model(x) exp((1-w) log r_lo + w log r_hi) with r = t(x0) / model(x0); beyond the measured points,
/// the nearest one's r fading to 1 at a factor of 4 from it. Neighbours whose alignment class
/// (`aligned_at`) differs from the shape's are skipped. Nothing when no neighbour qualifies.
template <class AlignedAt>
[[nodiscard]] std::optional<NeighbourEstimate> from_measured_neighbours(const std::map<std::int64_t, MeasuredPoint>& measured,
                                                                        std::int64_t x, Seconds model_x, bool aligned_x,
                                                                        AlignedAt&& aligned_at) {
    const std::map<std::int64_t, MeasuredPoint>::const_iterator none = measured.end();
    auto hi = measured.upper_bound(x);
    auto lo = hi == measured.begin() ? none : std::prev(hi);
    while (lo != none && aligned_at(lo->first) != aligned_x) lo = lo == measured.begin() ? none : std::prev(lo);
    while (hi != none && aligned_at(hi->first) != aligned_x) ++hi;
    const double xd = static_cast<double>(x);
    if (lo != none && hi != none) {
        const MeasuredPoint& a = lo->second;
        const MeasuredPoint& b = hi->second;
        const double w = (std::log(xd) - a.log_x) / (b.log_x - a.log_x);
        return NeighbourEstimate{model_x * std::exp(a.log_over_model + w * (b.log_over_model - a.log_over_model)), 1.0};
    }
    const auto nearest = lo != none ? lo : hi;
    if (nearest == none) return std::nullopt;
    const double x0 = static_cast<double>(nearest->first);
    const double reach = std::max(xd / x0, x0 / xd);
    if (reach > 4.0) return std::nullopt;
    // the neighbour's correction of the model fades with its distance, r^(1 - log reach / log 4): whole
    // at the neighbour, none at a factor of 4 from it, so that the estimate meets the model there
    const double weight = 1 - std::log(reach) / std::log(4.0);
    return NeighbourEstimate{model_x * std::exp(weight * nearest->second.log_over_model), reach};
}

/// A GEMM's time from the cuBLAS sweep: the measured time of its exact shape, or of the sweep's
/// shapes that differ from it in one dimension (m or n, k, or the batch), scaled by the fitted model
/// (from_measured_neighbours; of the dimensions with neighbours, the one whose estimate reaches
/// least far; `model_d` is the model's time of `d`); nothing when the sweep has neither.
[[nodiscard]] inline std::optional<Seconds> gemm_measured_time(const CostContext& ctx, ComputeUnit unit, const GemmDims& d,
                                                              Seconds model_d) {
    if (auto it = ctx.gemm_measured.find(gemm_key(unit, d)); it != ctx.gemm_measured.end()) return it->second;
    const bool aligned = is_aligned(unit, d);
    std::optional<NeighbourEstimate> best;
    const auto along = [&](const auto& table, const auto& key, std::int64_t x, auto with) {
        if (best && best->reach == 1.0) return;  // bracketed already: nothing reaches less far
        auto it = table.find(key);
        if (it == table.end()) return;
        auto e = from_measured_neighbours(it->second, x, model_d, aligned, [&](std::int64_t v) { return is_aligned(unit, with(v)); });
        if (e && (!best || e->reach < best->reach)) best = e;
    };
    const auto lo = std::min(d.m, d.n), hi = std::max(d.m, d.n);
    along(ctx.gemm_measured_along_mn, std::tuple{unit, d.m, d.k, d.batch}, d.n,
          [&](std::int64_t v) { return GemmDims{d.m, v, d.k, d.batch}; });
    along(ctx.gemm_measured_along_mn, std::tuple{unit, d.n, d.k, d.batch}, d.m,
          [&](std::int64_t v) { return GemmDims{v, d.n, d.k, d.batch}; });
    along(ctx.gemm_measured_along_k, std::tuple{unit, lo, hi, d.batch}, d.k,
          [&](std::int64_t v) { return GemmDims{d.m, d.n, v, d.batch}; });
    along(ctx.gemm_measured_along_batch, std::tuple{unit, lo, hi, d.k}, d.batch,
          [&](std::int64_t v) { return GemmDims{d.m, d.n, d.k, v}; });
    if (!best) return std::nullopt;
    return best->time;
}
}  // namespace detail

/// Whether the calibration timed this very GEMM or convolution (unit, shape): the validation's
/// shapes must not be among them (tests/test_accuracy.cpp), so that accuracy is measured on shapes
/// the calibration predicts rather than looks up.
[[nodiscard]] inline bool timed_by_calibration(const Kernel& k, const CostContext& ctx) {
    if (const auto* g = std::get_if<GemmDims>(&k.dims); g && k.kind == KernelKind::gemm) {
        return ctx.gemm_measured.count(detail::gemm_key(k.unit, *g)) != 0;
    }
    if (const auto* c = std::get_if<ConvDims>(&k.dims); c && k.kind == KernelKind::conv) {
        const auto it = ctx.conv_measured_by_batch.find(detail::conv_geometry_key(k.unit, *c));
        return it != ctx.conv_measured_by_batch.end() && it->second.count(c->n) != 0;
    }
    return false;
}

/// A GEMM's time in its layout over its time with both operands as stored (CostContext::gemm_layout_factor);
/// 1 below gemm_layout_sensitive_dim, and for GEMMs outside the 16-byte alignment class (the sweep's
/// pairs are aligned; the unaligned kernels read their operands otherwise).
[[nodiscard]] inline double gemm_layout_factor(const CostContext& ctx, ComputeUnit unit, const GemmDims& d) {
    const auto it = ctx.gemm_layout_factor.find(unit);
    return it == ctx.gemm_layout_factor.end() || !detail::gemm_layout_sensitive(d) || !detail::is_aligned(unit, d)
               ? 1.0
               : it->second[static_cast<std::size_t>(d.layout)];
}

/// GEMM: the cuBLAS sweep's time of its shape in its layout; else of its shape or of its neighbours in
/// one dimension, else the GEMM kernel model, times its layout's factor; never faster than its
/// DRAM traffic at the copy bandwidth.
[[nodiscard]] inline KernelCost gemm_cost(const Kernel& k, const GemmDims& d, const CostContext& ctx) {
    auto model = ctx.gemm.find(k.unit);
    if (model == ctx.gemm.end()) (void)ctx.ceilings.rate(k.unit);  // throws, naming the GPU and unit
    Seconds compute{0};
    if (auto same = ctx.gemm_measured_in_layout.find(detail::gemm_layout_key(k.unit, d)); same != ctx.gemm_measured_in_layout.end()) {
        compute = same->second;  // the sweep timed this very GEMM
    } else {
        const Seconds model_d = detail::gemm_model_time(model->second, d, k.unit);
        const auto measured = detail::gemm_measured_time(ctx, k.unit, d, model_d);
        compute = (measured ? *measured : model_d) * gemm_layout_factor(ctx, k.unit, d);
    }
    const Seconds memory = k.bytes() / ctx.ceilings.rate(MemoryLevel::dram);
    return compute >= memory ? KernelCost{compute, Bound::compute} : KernelCost{memory, Bound::dram};
}

}  // namespace roofsim
