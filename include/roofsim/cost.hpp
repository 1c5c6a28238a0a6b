#pragma once
/// Cost models: the GPU time of one kernel of the IR on one GPU. Each kind has a small function
/// naming the equation it implements. Rates come from a CostContext: datasheet ceilings, refined
/// by a calibration profile where one is given (measured ceilings, the bandwidth-vs-size curve, the
/// cuBLAS GEMM sweep, the cuDNN convolution sweep). Nothing here reads a file.

#include <roofsim/calibration.hpp>
#include <roofsim/gpu.hpp>
#include <roofsim/ir.hpp>
#include <roofsim/roofline.hpp>

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

/// GEMM time model of one compute unit, t = t0 + F / (R · u_wave(m, n) · k / (k + k0)), with
/// u_wave the wave-quantization utilization of 128 x 128 output tiles over the SMs. R is the unit's
/// ceiling; t0 and k0 are fitted to the calibration's cuBLAS sweep (least squares in log time).
struct GemmModel {
    FlopsPerSecond rate{0};
    Seconds fixed_time{0};   ///< t0
    double k_half = 0;       ///< k0: the depth at which the main loop reaches half efficiency
    int sm_count = 1;
    double unaligned_factor = 1;  ///< time multiplier when m, n or k is not a multiple of 8 (fitted)
    std::string source;           ///< where R, t0, k0 came from
};

/// Convolution time relative to the GEMM model of its implicit GEMM, per pass: the median ratio of
/// measured cuDNN time to the GEMM model's time over the calibration's convolution sweep.
struct ConvModel {
    double factor = 1.0;
    std::string source;
};

/// One op timing's per-op efficiency: measured / modelled GPU time, at the reduction shape it was
/// timed at where the op is a normalization.
struct OpFactorPoint {
    std::optional<NormDims> norm;
    std::optional<AttentionDims> attention;  ///< the attention shape and backend it ran at, for sdpa
    double factor = 1;
    double seconds_per_byte = 0;  ///< a column sum's measured time over its bytes (0: not recorded)
    double size = 0;              ///< the size it was timed at, as factor_size measures one of the op's own kernels (0: not recorded)
};

namespace detail {
/// A hash of a tuple of enums and integers (the shape keys of measured library calls).
struct TupleHash {
    template <class... T>
    [[nodiscard]] std::size_t operator()(const std::tuple<T...>& t) const {
        std::uint64_t h = 0x9e3779b97f4a7c15ull;
        std::apply([&h](const auto&... v) { ((h = (h ^ static_cast<std::uint64_t>(v)) * 0x100000001b3ull), ...); }, t);
        return static_cast<std::size_t>(h ^ (h >> 29));
    }
};
/// The order of per-op efficiency keys (op, phase, 16-bit), found by a key with the op as any string
/// (a std::string_view): compared element by element as views, which clang's tuple comparison of
/// std::string with std::string_view (libstdc++ 12, C++20) does not do.
struct OpFactorKeyLess {
    using is_transparent = void;
    template <class A, class B>
    [[nodiscard]] bool operator()(const A& a, const B& b) const {
        const auto view = [](const auto& key) {
            return std::tuple<std::string_view, Phase, bool>(std::get<0>(key), std::get<1>(key), std::get<2>(key));
        };
        return view(a) < view(b);
    }
};
}  // namespace detail

/// A time the calibration measured at one value x of a shape's varying dimension (a GEMM's n, a
/// convolution's batch), with what an estimate from measured neighbours reads of it, prepared once
/// when the context is made: log x, and the measured time over the context's model time at x (the
/// fitted GEMM model of its unit; a convolution's implicit GEMM's), and that ratio's log
/// (detail::from_measured_neighbours).
struct MeasuredPoint {
    Seconds seconds{0};
    double log_x = 0;
    double over_model = 1;      ///< seconds / the model's time at x
    double log_over_model = 0;  ///< log(over_model)
};

/// Everything the cost models read, prepared once per GPU and calibration.
struct CostContext {
    Ceilings ceilings;
    int sm_count = 1;
    std::map<ComputeUnit, GemmModel> gemm;
    /// cuBLAS GPU times the calibration measured, by exact shape (unit, min(m, n), max(m, n), k,
    /// batch): the median over the operand layouts measured for that shape.
    std::unordered_map<std::tuple<ComputeUnit, std::int64_t, std::int64_t, std::int64_t, std::int64_t>, Seconds, detail::TupleHash>
        gemm_measured;
    /// The same times along one dimension, for shapes that differ from measured ones in that
    /// dimension only (a layer's GEMMs at another token count or batch): keyed by the unit and the
    /// three other dimensions, the varying one -> its measured point (with the unit's model time in
    /// `gemm` at it). Along m or n: (unit, the other of m and n, k, batch); along k: (unit, min(m, n),
    /// max(m, n), batch); along the batch: (unit, min, max, k).
    std::unordered_map<std::tuple<ComputeUnit, std::int64_t, std::int64_t, std::int64_t>, std::map<std::int64_t, MeasuredPoint>,
                       detail::TupleHash>
        gemm_measured_along_mn, gemm_measured_along_k, gemm_measured_along_batch;
    /// The same times by layout too, as measured (not divided by the layout factor): a GEMM whose
    /// shape the sweep timed in its own layout takes that time.
    std::unordered_map<std::tuple<ComputeUnit, std::int64_t, std::int64_t, std::int64_t, std::int64_t, GemmLayout>, Seconds,
                       detail::TupleHash>
        gemm_measured_in_layout;
    /// A GEMM's time in each operand layout (GemmDims::layout) over its time with both operands as
    /// stored (nn), per unit, from the cuBLAS sweep (gemm_layout_factors); 1 for unknown, for the
    /// layouts the sweep has no pair for, and below gemm_layout_sensitive_dim. The sweep's times above
    /// are divided by it (times "as nn"); gemm_cost multiplies by the kernel's.
    std::map<ComputeUnit, std::array<double, 5>> gemm_layout_factor;
    std::string gemm_layout_factor_source;
    /// Keyed by (unit, pass, depthwise): depthwise convolutions run other kernels than dense ones.
    std::map<std::tuple<ComputeUnit, ConvPass, bool>, ConvModel> conv;
    /// cuDNN times the calibration measured (NCHW, PyTorch's default layout), by shape less the batch:
    /// every batch size the sweep measured for a convolution geometry (N -> its measured point, with
    /// the implicit GEMM's model time in `gemm` at N).
    std::unordered_map<std::tuple<ComputeUnit, ConvPass, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                                  std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                                  std::int64_t, std::int64_t>,
                       std::map<std::int64_t, MeasuredPoint>, detail::TupleHash>
        conv_measured_by_batch;
    std::vector<BandwidthPoint> copy_curve;  ///< bytes/s vs working set, read + written (calibration)
    std::vector<BandwidthPoint> read_curve;  ///< read-only
    Seconds kernel_floor{0};                 ///< the least GPU time of any kernel
    std::string kernel_floor_source;
    /// The GPU's own time between back-to-back kernels of a stream, added after each kernel whose time
    /// comes from kernel durations or bandwidth (GEMM and convolution sweeps, timed back to back,
    /// include it; a kernel at the floor too)
    Seconds kernel_gap{0};
    std::string kernel_gap_source;
    /// Measured / modelled GPU time of PyTorch's own kernels for a graph op, by (op, phase, 16-bit):
    /// the efficiency of its implementation against the byte and FLOP counts (framework.hpp), one
    /// point per op timing (normalizations at several reduction shapes). Looked up by
    /// (std::string_view, Phase, bool) without a copy of the op.
    std::map<std::tuple<std::string, Phase, bool>, std::vector<OpFactorPoint>, detail::OpFactorKeyLess> op_factor;
    std::string op_factor_source;
};

namespace detail {

/// cuBLAS picks its fastest (tensor-core, vectorized) kernels only for dimensions that are
/// multiples of 8 elements (16-byte aligned rows for 16-bit types).
[[nodiscard]] inline bool is_aligned(const GemmDims& d) { return d.m % 8 == 0 && d.n % 8 == 0 && d.k % 8 == 0; }

/// The GEMM model: t = t0 + F / (R e), e = u k / (k + k0), where u = tiles / (waves SMs) is the share
/// of SM slots busy when the output's 128 x 128 tiles run in waves (wave quantization; 1 without
/// tiles); written as t0 + F (waves SMs) (k + k0) / (R tiles k), two divisions where the plain form
/// has four (the model runs for every GEMM and every measured neighbour of one); times the unaligned
/// factor.
[[nodiscard]] inline Seconds gemm_model_time(const GemmModel& g, const GemmDims& d) {
    const auto tiles_along = [](std::int64_t x) { return x > 0 ? (x + 127) / 128 : 0; };  // ceil(x / 128)
    const double tiles = static_cast<double>(tiles_along(d.m)) * static_cast<double>(tiles_along(d.n)) *
                         static_cast<double>(d.batch);
    const double k = static_cast<double>(d.k);
    const double sm_count = static_cast<double>(g.sm_count);
    const double waves = std::ceil(tiles / sm_count);
    const double work = gemm_flops(d).value() * (k + g.k_half);
    const double rate = g.rate.value() * k;
    const Seconds t = g.fixed_time + Seconds(waves > 0 ? work * (waves * sm_count) / (rate * tiles) : work / rate);
    return is_aligned(d) ? t : t * g.unaligned_factor;
}

/// Bandwidth at a working set, interpolated in log-log between curve points; the end values beyond.
[[nodiscard]] inline std::optional<BytesPerSecond> curve_bandwidth(const std::vector<BandwidthPoint>& curve, Bytes working_set) {
    if (curve.empty()) return std::nullopt;
    const double x = working_set.value();
    if (x <= curve.front().working_set_bytes) return BytesPerSecond(curve.front().bytes_per_second);
    if (x >= curve.back().working_set_bytes) return BytesPerSecond(curve.back().bytes_per_second);
    auto hi = std::upper_bound(curve.begin(), curve.end(), x,
                               [](double v, const BandwidthPoint& p) { return v < p.working_set_bytes; });
    auto lo = hi - 1;
    const double t = std::log(x / lo->working_set_bytes) / std::log(hi->working_set_bytes / lo->working_set_bytes);
    return BytesPerSecond(std::exp(std::log(lo->bytes_per_second) * (1 - t) + std::log(hi->bytes_per_second) * t));
}

/// Fits t0 and k0 of a GEMM model to measured (dims, seconds) pairs by a grid search that
/// minimizes the squared log error; returns the model with the smallest error.
[[nodiscard]] inline GemmModel fit_gemm_model(FlopsPerSecond rate, int sm_count,
                                              const std::vector<std::pair<GemmDims, double>>& measured) {
    GemmModel best{rate, Seconds(0), 0, sm_count, 1, {}};
    double best_error = 1e300;
    for (double t0_us = 0.5; t0_us <= 40; t0_us *= 1.08) {
        for (double k0 = 0; k0 <= 2048; k0 = k0 < 4 ? k0 + 4 : k0 * 1.15) {
            GemmModel g{rate, Seconds(t0_us * 1e-6), k0, sm_count, 1, {}};
            double error = 0;
            for (const auto& [d, seconds] : measured) {
                if (!is_aligned(d)) continue;
                const double e = std::log(gemm_model_time(g, d).value() / seconds);
                error += e * e;
            }
            if (error < best_error) { best_error = error; best = g; }
        }
    }
    // Unaligned shapes: the median ratio of measured to aligned-model time.
    std::vector<double> ratios;
    for (const auto& [d, seconds] : measured) {
        if (!is_aligned(d)) ratios.push_back(seconds / gemm_model_time(best, d).value());
    }
    if (!ratios.empty()) {
        std::sort(ratios.begin(), ratios.end());
        best.unaligned_factor = std::max(1.0, ratios[ratios.size() / 2]);
    }
    return best;
}

[[nodiscard]] inline GemmDims implicit_gemm(const ConvDims& c) {
    // forward: M = N P Q, N = K, K = C R S / groups; backward-data: M = N H W, N = C, K = K R S / groups;
    // backward-filter: M = K, N = C R S / groups, K = N P Q. Grouped convolutions run `groups` GEMMs.
    const std::int64_t npq = c.n * c.p() * c.q(), crs = c.c / c.groups * c.r * c.s;
    switch (c.pass) {
        case ConvPass::forward: return {npq, c.k / c.groups, crs, c.groups};
        case ConvPass::backward_data: return {c.n * c.h * c.w, c.c / c.groups, c.k / c.groups * c.r * c.s, c.groups};
        case ConvPass::backward_filter: return {c.k / c.groups, crs, npq, c.groups};
    }
    return {};
}

}  // namespace detail

namespace detail {
/// The exact-shape key of a GEMM: C and its transpose are the same work, so (m, n) is unordered.
[[nodiscard]] inline auto gemm_key(ComputeUnit unit, const GemmDims& d) {
    return std::tuple{unit, std::min(d.m, d.n), std::max(d.m, d.n), d.k, d.batch};
}

/// The exact-shape key of a GEMM in its layout.
[[nodiscard]] inline auto gemm_layout_key(ComputeUnit unit, const GemmDims& d) {
    return std::tuple{unit, std::min(d.m, d.n), std::max(d.m, d.n), d.k, d.batch, d.layout};
}

/// The smallest dimension from which a GEMM's operand layout moves its time: below it, a GEMM is bound
/// by its operands' traffic and cuBLAS's layouts time alike (the H200 sweep's TF32 pairs: 0.6-1.0
/// with a dimension of 8 to 64, 1.3-2.5 from 768 up).
inline constexpr std::int64_t gemm_layout_sensitive_dim = 256;

/// Whether `d`'s layout factor applies to it: every dimension at least gemm_layout_sensitive_dim.
[[nodiscard]] inline bool gemm_layout_sensitive(const GemmDims& d) {
    return std::min({d.m, d.n, d.k}) >= gemm_layout_sensitive_dim;
}

/// The layout factors of one unit's sweep points (dims with their row-major layout, seconds): for each
/// layout but nn, the median over pairs of a point in it and an nn point with the same batch and the
/// same three dimensions in any order, all at least gemm_layout_sensitive_dim, of their time ratio
/// (equal work: the sweep times a linear layer's forward, input-gradient and weight-gradient GEMMs,
/// each in its own layout). Hopper's TF32 tensor cores read only K-major operands (PTX ISA, wgmma:
/// transposed operands for 16-bit types only), so a TF32 GEMM with an operand stored otherwise runs
/// slower; 16-bit GEMMs do not care.
[[nodiscard]] inline std::array<double, 5> gemm_layout_factors(const std::vector<std::pair<GemmDims, double>>& points) {
    std::array<double, 5> factors{1, 1, 1, 1, 1};
    const auto sorted_dims = [](const GemmDims& d) {
        std::array<std::int64_t, 3> a{d.m, d.n, d.k};
        std::sort(a.begin(), a.end());
        return a;
    };
    for (GemmLayout layout : {GemmLayout::nt, GemmLayout::tn, GemmLayout::tt}) {
        std::vector<double> ratios;
        for (const auto& [d, seconds] : points) {
            if (d.layout != layout || !gemm_layout_sensitive(d)) continue;
            for (const auto& [e, nn_seconds] : points) {
                if (e.layout == GemmLayout::nn && e.batch == d.batch && sorted_dims(e) == sorted_dims(d)) ratios.push_back(seconds / nn_seconds);
            }
        }
        if (ratios.empty()) continue;
        std::sort(ratios.begin(), ratios.end());
        factors[static_cast<std::size_t>(layout)] = ratios[ratios.size() / 2];
    }
    return factors;
}

/// The point measured at `x` in `seconds` where the model gives `model_seconds` (MeasuredPoint).
[[nodiscard]] inline MeasuredPoint measured_point(std::int64_t x, Seconds seconds, Seconds model_seconds) {
    const double over_model = seconds / model_seconds;
    return {seconds, std::log(static_cast<double>(x)), over_model, std::log(over_model)};
}

/// The key of a convolution's geometry: its shape less the batch size N (unit, pass, C, H, W, K, R, S,
/// stride, padding and dilation in each dimension, groups).
[[nodiscard]] inline auto conv_geometry_key(ComputeUnit unit, const ConvDims& d) {
    return std::tuple{unit, d.pass, d.c, d.h, d.w, d.k, d.r, d.s, d.stride_h, d.stride_w, d.pad_h, d.pad_w,
                      d.dilation_h, d.dilation_w, d.groups};
}
}  // namespace detail

/// The cost context of a GPU from its datasheet alone: roofline ceilings, GEMMs at the peak rate.
[[nodiscard]] inline CostContext make_cost_context(const GpuSpec& spec, const Calibration* calibration = nullptr) {
    CostContext ctx;
    ctx.sm_count = spec.sm_count.value;
    ctx.ceilings = calibration ? ceilings_from_calibration(*calibration, spec) : ceilings_from_spec(spec);
    for (const auto& [unit, ceiling] : ctx.ceilings.compute) {
        ctx.gemm[unit] = GemmModel{ceiling.value, Seconds(0), 0, ctx.sm_count, 1, ceiling.source};
    }
    if (!calibration) return ctx;

    const Calibration& cal = *calibration;
    if (cal.device.sm_count > 0) ctx.sm_count = cal.device.sm_count;
    const std::string measured = provenance(cal);
    // GEMM: the layout factors per unit; then fit t0 and k0 per unit to the cuBLAS sweep's times as nn
    // (each over its layout's factor), against the unit's library ceiling.
    std::map<ComputeUnit, std::vector<std::pair<GemmDims, double>>> sweep;
    for (const auto& r : cal.gemm_sweep) {
        GemmDims d{r.m, r.n, r.k, r.batch};
        d.layout = gemm_layout_from_cublas(r.layout).value_or(GemmLayout::unknown);
        sweep[r.unit].push_back({d, r.seconds.median});
    }
    for (const auto& [unit, points] : sweep) {
        for (const auto& [d, seconds] : points) {
            if (d.layout != GemmLayout::unknown) ctx.gemm_measured_in_layout[detail::gemm_layout_key(unit, d)] = Seconds(seconds);
        }
    }
    for (auto& [unit, points] : sweep) {
        if (!ctx.ceilings.has(unit) || points.size() < 4) continue;
        const auto factors = detail::gemm_layout_factors(points);
        ctx.gemm_layout_factor[unit] = factors;
        for (auto& [d, seconds] : points) {
            if (detail::gemm_layout_sensitive(d)) seconds /= factors[static_cast<std::size_t>(d.layout)];
        }
    }
    if (!ctx.gemm_layout_factor.empty()) {
        ctx.gemm_layout_factor_source = measured + " (cuBLAS sweep: each layout's time over nn's, pairs of equal work)";
    }
    for (auto& [unit, points] : sweep) {
        if (!ctx.ceilings.has(unit) || points.size() < 4) continue;
        GemmModel g = detail::fit_gemm_model(ctx.ceilings.rate(unit), ctx.sm_count, points);
        g.source = measured + " (cuBLAS sweep of " + std::to_string(points.size()) + " shapes, fitted t0 and k0)";
        ctx.gemm[unit] = g;
    }
    std::map<std::tuple<ComputeUnit, std::int64_t, std::int64_t, std::int64_t, std::int64_t>, std::vector<double>> by_shape;
    for (const auto& [unit, points] : sweep) {
        for (const auto& [d, seconds] : points) by_shape[detail::gemm_key(unit, d)].push_back(seconds);
    }
    for (auto& [key, times] : by_shape) {
        std::sort(times.begin(), times.end());
        const Seconds t(times[times.size() / 2]);
        ctx.gemm_measured[key] = t;
        const auto& [unit, lo, hi, k, batch] = key;
        const auto model = ctx.gemm.find(unit);
        if (model == ctx.gemm.end()) continue;  // a unit the GPU lacks: no GEMM of it is costed
        // the shape's model time, the same in each table (the model is symmetric in m and n)
        const Seconds model_t = detail::gemm_model_time(model->second, GemmDims{lo, hi, k, batch});
        ctx.gemm_measured_along_mn[{unit, lo, k, batch}][hi] = detail::measured_point(hi, t, model_t);
        ctx.gemm_measured_along_mn[{unit, hi, k, batch}][lo] = detail::measured_point(lo, t, model_t);
        ctx.gemm_measured_along_k[{unit, lo, hi, batch}][k] = detail::measured_point(k, t, model_t);
        ctx.gemm_measured_along_batch[{unit, lo, hi, k}][batch] = detail::measured_point(batch, t, model_t);
    }
    // Convolution, NCHW records only (PyTorch's default layout): the measured time by exact shape, and
    // the median ratio of cuDNN time to the GEMM model of the implicit GEMM, per unit, pass and
    // depthwise-or-dense, for shapes the sweep did not measure. A GPU whose fp16 and bf16 tensor rates
    // agree within 5 % as measured (every Ampere and Hopper part roofsim covers) runs cuDNN's fp16
    // convolutions as its bf16 ones: where the sweep timed no fp16 convolution, they take the bf16
    // records (each record counted once per unit it stands for).
    const auto has_records = [&cal](ComputeUnit u) {
        return std::any_of(cal.conv_sweep.begin(), cal.conv_sweep.end(), [u](const auto& r) { return r.unit == u; });
    };
    const bool fp16_as_bf16 = !has_records(ComputeUnit::fp16_tensor) && has_records(ComputeUnit::bf16_tensor) &&
                              ctx.ceilings.has(ComputeUnit::fp16_tensor) && ctx.ceilings.has(ComputeUnit::bf16_tensor) &&
                              std::abs(ctx.ceilings.rate(ComputeUnit::fp16_tensor) / ctx.ceilings.rate(ComputeUnit::bf16_tensor) - 1) < 0.05 &&
                              ctx.gemm.count(ComputeUnit::fp16_tensor) != 0;
    std::vector<ConvRecord> records = cal.conv_sweep;
    if (fp16_as_bf16) {
        for (const auto& r : cal.conv_sweep) {
            if (r.unit != ComputeUnit::bf16_tensor) continue;
            records.push_back(r);
            records.back().unit = ComputeUnit::fp16_tensor;
        }
    }
    std::map<std::tuple<ComputeUnit, ConvPass, bool>, std::vector<double>> ratios;
    for (const auto& r : records) {
        auto g = ctx.gemm.find(r.unit);
        if (g == ctx.gemm.end() || r.layout != "NCHW") continue;
        ConvDims d;
        d.pass = r.pass;
        d.n = r.n; d.c = r.c; d.h = r.h; d.w = r.w; d.k = r.k; d.r = r.r; d.s = r.s;
        d.stride_w = r.stride;
        d.pad_w = r.pad;
        d.dilation_w = r.dilation;
        d.stride_h = r.stride_along_h();
        d.pad_h = r.pad_along_h();
        d.dilation_h = r.dilation_along_h();
        d.groups = r.groups;
        const bool depthwise = r.groups > 1 && r.groups == r.c;
        const Seconds model_t = detail::gemm_model_time(g->second, detail::implicit_gemm(d));
        ratios[{r.unit, r.pass, depthwise}].push_back(r.seconds.median / model_t.value());
        ctx.conv_measured_by_batch[detail::conv_geometry_key(r.unit, d)][d.n] = detail::measured_point(d.n, Seconds(r.seconds.median), model_t);
    }
    for (auto& [key, v] : ratios) {
        std::sort(v.begin(), v.end());
        ctx.conv[key] = ConvModel{v[v.size() / 2], measured + " (cuDNN sweep, median of " + std::to_string(v.size()) + " shapes)"};
    }
    if (auto it = cal.bandwidth_curve.find(AccessPattern::copy); it != cal.bandwidth_curve.end()) ctx.copy_curve = it->second;
    if (auto it = cal.bandwidth_curve.find(AccessPattern::read); it != cal.bandwidth_curve.end()) ctx.read_curve = it->second;
    if (ctx.ceilings.launch_latency) {
        ctx.kernel_floor = ctx.ceilings.launch_latency->value;
        ctx.kernel_floor_source = ctx.ceilings.launch_latency->source;
    }
    return ctx;
}

/// The time of one kernel and which limit set it.
struct KernelCost {
    Seconds time{0};
    Bound bound = Bound::compute;
};

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
/// is model(x) exp((1-w) log r_lo + w log r_hi) with r = t(x0) / model(x0). Neighbours whose alignment
/// class (`aligned_at`) differs from the shape's are skipped. Nothing when no neighbour qualifies.
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
    return NeighbourEstimate{model_x * nearest->second.over_model, reach};
}

/// A GEMM's time from the cuBLAS sweep: the measured time of its exact shape, or of the sweep's
/// shapes that differ from it in one dimension (m or n, k, or the batch), scaled by the fitted model
/// (from_measured_neighbours; of the dimensions with neighbours, the one whose estimate reaches
/// least far; `model_d` is the model's time of `d`); nothing when the sweep has neither.
[[nodiscard]] inline std::optional<Seconds> gemm_measured_time(const CostContext& ctx, ComputeUnit unit, const GemmDims& d,
                                                              Seconds model_d) {
    if (auto it = ctx.gemm_measured.find(gemm_key(unit, d)); it != ctx.gemm_measured.end()) return it->second;
    const bool aligned = is_aligned(d);
    std::optional<NeighbourEstimate> best;
    const auto along = [&](const auto& table, const auto& key, std::int64_t x, auto with) {
        if (best && best->reach == 1.0) return;  // bracketed already: nothing reaches less far
        auto it = table.find(key);
        if (it == table.end()) return;
        auto e = from_measured_neighbours(it->second, x, model_d, aligned, [&](std::int64_t v) { return is_aligned(with(v)); });
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
/// 1 below gemm_layout_sensitive_dim.
[[nodiscard]] inline double gemm_layout_factor(const CostContext& ctx, ComputeUnit unit, const GemmDims& d) {
    const auto it = ctx.gemm_layout_factor.find(unit);
    return it == ctx.gemm_layout_factor.end() || !detail::gemm_layout_sensitive(d) ? 1.0 : it->second[static_cast<std::size_t>(d.layout)];
}

/// GEMM: the cuBLAS sweep's time of its shape in its layout; else of its shape or of its neighbours in
/// one dimension, else the fitted wave/depth model, times its layout's factor; never faster than its
/// DRAM traffic at the copy bandwidth.
[[nodiscard]] inline KernelCost gemm_cost(const Kernel& k, const GemmDims& d, const CostContext& ctx) {
    auto model = ctx.gemm.find(k.unit);
    if (model == ctx.gemm.end()) (void)ctx.ceilings.rate(k.unit);  // throws, naming the GPU and unit
    Seconds compute{0};
    if (auto same = ctx.gemm_measured_in_layout.find(detail::gemm_layout_key(k.unit, d)); same != ctx.gemm_measured_in_layout.end()) {
        compute = same->second;  // the sweep timed this very GEMM
    } else {
        const Seconds model_d = detail::gemm_model_time(model->second, d);
        const auto measured = detail::gemm_measured_time(ctx, k.unit, d, model_d);
        compute = (measured ? *measured : model_d) * gemm_layout_factor(ctx, k.unit, d);
    }
    const Seconds memory = k.bytes() / ctx.ceilings.rate(MemoryLevel::dram);
    return compute >= memory ? KernelCost{compute, Bound::compute} : KernelCost{memory, Bound::dram};
}

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

/// The GPU time after a kernel before the next one of its stream can start: ctx.kernel_gap, except
/// after GEMMs and convolutions (their sweep timings include it) and kernels at the latency floor.
[[nodiscard]] inline Seconds gap_after(const Kernel& k, const KernelCost& c, const CostContext& ctx) {
    if (k.kind == KernelKind::host_only || k.kind == KernelKind::gemm || k.kind == KernelKind::conv ||
        c.bound == Bound::latency) {
        return Seconds(0);
    }
    return ctx.kernel_gap;
}

namespace detail {

/// Values remembered by key in `slots` slots, the slot picked by the key's hash(); a key that lands
/// on a slot another holds replaces it (recomputed when that one comes back). For the few dozen
/// distinct keys a step's kernels repeat, with no allocation. A memo is made once per prediction:
/// only its slots' filled bits are cleared then, not the slots (some 20 KB for a step's memos).
template <class Key, class Value, std::size_t slots>
class SlotMemo {
    static_assert(std::is_trivially_copyable_v<Key> && std::is_trivially_destructible_v<Key> &&
                      std::is_trivially_copyable_v<Value> && std::is_trivially_destructible_v<Value>,
                  "slots are written over in place, never destroyed");

public:
    /// No slot filled. (User-provided, so that a memo value-initialized, `SlotMemo<...> m{}`, is not
    /// zero-filled whole first.)
    SlotMemo() noexcept {}

    /// The value remembered for `key`, or compute()'s, remembered.
    template <class Compute>
    [[nodiscard]] Value get(const Key& key, Compute&& compute) {
        const std::size_t i = key.hash() % slots;
        std::uint64_t& word = filled_[i / 64];
        const std::uint64_t bit = std::uint64_t{1} << (i % 64);
        if ((word & bit) != 0) {
            const Slot& slot = *std::launder(reinterpret_cast<const Slot*>(storage_ + i * sizeof(Slot)));
            if (slot.key == key) return slot.value;
        }
        const Slot* slot = ::new (storage_ + i * sizeof(Slot)) Slot{key, compute()};
        word |= bit;
        return slot->value;
    }

private:
    struct Slot {
        Key key;
        Value value;
    };
    std::array<std::uint64_t, (slots + 63) / 64> filled_{};  ///< bit i: slot i holds a key
    alignas(Slot) std::byte storage_[slots * sizeof(Slot)];  ///< the slots, each made when first filled
};

/// The bandwidths of a context's curves while the kernels of a step are costed: curve_bandwidth,
/// each working set's taken once (a step has a few dozen distinct tensor sizes).
class BandwidthMemo {
public:
    explicit BandwidthMemo(const CostContext& ctx) : ctx_(ctx) {}

    /// curve_bandwidth of the read-only or the copy curve.
    [[nodiscard]] std::optional<BytesPerSecond> bandwidth(bool read_mostly, Bytes working_set) {
        const auto& curve = read_mostly ? ctx_.read_curve : ctx_.copy_curve;
        if (curve.empty()) return std::nullopt;
        return BytesPerSecond(slots_.get(Key{working_set.value(), read_mostly},
                                         [&] { return curve_bandwidth(curve, working_set)->value(); }));
    }

    /// The DRAM ceiling (ctx.ceilings.rate(MemoryLevel::dram)), looked up once.
    [[nodiscard]] BytesPerSecond dram() {
        if (!dram_) dram_ = ctx_.ceilings.rate(MemoryLevel::dram);
        return *dram_;
    }

private:
    struct Key {
        double working_set = 0;
        bool read_mostly = false;
        friend bool operator==(const Key&, const Key&) = default;

        [[nodiscard]] std::size_t hash() const {
            const std::uint64_t key = std::bit_cast<std::uint64_t>(working_set) ^ (read_mostly ? 1 : 0);
            return static_cast<std::size_t>((key * 0x9e3779b97f4a7c15) >> 58);
        }
    };
    const CostContext& ctx_;
    SlotMemo<Key, double, 64> slots_;  ///< bytes per second by working set and curve
    std::optional<BytesPerSecond> dram_;
};

/// The costs of GEMMs and convolutions already costed in one prediction, by unit, shape and bytes (a
/// network repeats a few shapes many times; their neighbour lookups are the costliest part of a cost).
class ShapeMemo {
public:
    template <class Dims, class Compute>
    [[nodiscard]] KernelCost cost(const Kernel& k, const Dims& d, Compute&& compute) {
        return std::get<SlotMemo<Key<Dims>, KernelCost, 64>>(slots_).get(Key<Dims>{k.unit, k.bytes().value(), d},
                                                                          std::forward<Compute>(compute));
    }

private:
    template <class Dims>
    struct Key {
        ComputeUnit unit{};
        double bytes = 0;
        Dims dims{};
        friend bool operator==(const Key&, const Key&) = default;

        [[nodiscard]] std::size_t hash() const {
            std::uint64_t h = static_cast<std::uint64_t>(unit) * 0x9e3779b97f4a7c15ull ^ std::bit_cast<std::uint64_t>(bytes);
            const auto mix = [&h](std::int64_t v) { h = (h ^ static_cast<std::uint64_t>(v)) * 0x100000001b3ull; };
            const Dims& d = dims;
            if constexpr (std::is_same_v<Dims, GemmDims>) {
                for (auto v : {d.m, d.n, d.k, d.batch}) mix(v);
            } else {
                for (auto v : {static_cast<std::int64_t>(d.pass), d.n, d.c, d.h, d.w, d.k, d.r, d.s, d.stride_h, d.pad_h, d.groups}) mix(v);
            }
            return static_cast<std::size_t>((h * 0x9e3779b97f4a7c15ull) >> 58);
        }
    };
    /// The GEMM shapes' costs and the convolution shapes' (a collision recomputes).
    std::tuple<SlotMemo<Key<GemmDims>, KernelCost, 64>, SlotMemo<Key<ConvDims>, KernelCost, 64>> slots_{};
};

}  // namespace detail

/// Memory-bound kernels: bytes / bandwidth at that working set (the calibration's curve for the
/// pattern; the DRAM ceiling without one). `memo`, where given, remembers the curves' bandwidths.
[[nodiscard]] inline KernelCost streaming_cost(const Kernel& k, const CostContext& ctx, bool read_mostly,
                                               detail::BandwidthMemo* memo = nullptr) {
    const auto& curve = read_mostly ? ctx.read_curve : ctx.copy_curve;
    const std::optional<BytesPerSecond> measured =
        memo ? memo->bandwidth(read_mostly, k.bytes()) : detail::curve_bandwidth(curve, k.bytes());
    const BytesPerSecond bw = measured.value_or(memo ? memo->dram() : ctx.ceilings.rate(MemoryLevel::dram));
    KernelCost c{k.bytes() / bw, Bound::dram};
    if (k.flops.value() > 0 && k.unit != ComputeUnit::fp32) c.time = max(c.time, k.flops / ctx.ceilings.rate(k.unit));
    return c;
}

/// Whether a kernel is a dtype conversion (aten::_to_copy, or copy_ between dtypes: written as an
/// elementwise kernel; a same-dtype copy is a `copy` kernel).
[[nodiscard]] inline bool is_cast(const Kernel& k) {
    return k.kind == KernelKind::elementwise && (k.op == "aten::_to_copy" || k.op == "aten::copy_");
}

/// Whether a kernel is a layout copy (aten::clone: what .contiguous() runs on a transposed or
/// permuted view, as attention's heads are split and merged; a contiguous tensor's .contiguous()
/// copies nothing). Such copies read with strides: on an H200 a float32 one ran at 2.5 TB/s and a
/// bfloat16 one at 1.55 TB/s where a contiguous clone ran at 3.8 (tools/validate/copy_speed.py,
/// 2026-11-30), so they take the probe's transposed copy's efficiency (factor_op).
[[nodiscard]] inline bool is_layout_copy(const Kernel& k) {
    return k.kind == KernelKind::copy && k.op == "aten::clone";
}

/// Whether a kernel is an elementwise op over floating operands of different dtypes (a bfloat16
/// activation added to a float32 residual under autocast): PyTorch's TensorIterator then runs its
/// unrolled loop that casts each operand on load (LoadWithCast), not the vectorized one; on an H200
/// it ran at 2.4-2.5 TB/s where the same op on one dtype ran at about 4 (kernel profiles of BERT-base
/// and GPT-2 small, 2026-11-30), so such kernels take the probe's mixed-dtype add's efficiency.
[[nodiscard]] inline bool is_mixed_elementwise(const Kernel& k) {
    return k.kind == KernelKind::elementwise && k.mixed_dtypes && !is_cast(k);
}

/// Whether a kernel is an elementwise op of one dtype over a strided or broadcast operand (a bias
/// added apart to a transposed tensor: `linear` on a strided input runs `matmul` and a broadcast
/// `add_`): TensorIterator cannot run its vectorized loop and computes each element's offsets, as a
/// transposing copy does; on an H200 ViT-B/16's bfloat16 bias adds ran at 1.5 TB/s and the probe's
/// bfloat16 transposed copy at 1.4 TB/s (2026-12-01), so such kernels take the transposed copy's
/// efficiency. A mixed-dtype loop keeps its own (is_mixed_elementwise), as does a cast.
[[nodiscard]] inline bool is_strided_elementwise(const Kernel& k) {
    return k.kind == KernelKind::elementwise && k.strided && !k.mixed_dtypes && !is_cast(k);
}

/// Whether a kernel is a backward add of one dtype: autograd summing the gradients of a tensor that
/// several paths read (a residual connection, q/k/v's shared input, tied weights). The autograd engine
/// runs it where the paths meet, inside whichever layer's backward is running (an exported IR gives it
/// that layer's op: GPT-2's residual sums ran inside LayerNorm's), so it takes the add's own
/// efficiency: on an H200 GPT-2 small b16's float32 sums of 151 MB ran at 35.6 µs (4.2 TB/s), the
/// probe's add at 4.2 TB/s, where layer norm's backward efficiency made them 128 µs.
[[nodiscard]] inline bool is_gradient_sum(const Kernel& k) {
    return k.kind == KernelKind::elementwise && k.phase == Phase::backward && (k.op == "aten::add" || k.op == "aten::add_") &&
           !k.mixed_dtypes && !k.strided;
}

/// The phase whose per-op efficiency a kernel takes: its own, but a layout copy's (and a strided
/// elementwise loop's) is the same copy either way and takes the forward's (the probe's transposed
/// copy launches none backward), and a mixed-dtype elementwise kernel or a gradient sum is the same
/// loop either way (the probe times mixed-dtype and same-dtype adds forward).
[[nodiscard]] inline Phase factor_phase(const Kernel& k) {
    return is_layout_copy(k) || is_strided_elementwise(k) || is_mixed_elementwise(k) || is_gradient_sum(k) ? Phase::forward
                                                                                                              : k.phase;
}

/// Whether a kernel is a sum over the leading dimensions that keeps the last (aten::sum carrying its
/// reduction shape as NormDims: columns, rows), as bias gradients are.
[[nodiscard]] inline bool is_column_sum(const Kernel& k) {
    return k.kind == KernelKind::reduction && std::holds_alternative<NormDims>(k.dims) && k.op == "aten::sum";
}

/// Whether a kernel is a depthwise convolution (groups == input channels > 1): PyTorch runs its own
/// depthwise kernels for many of these, which the cuDNN sweep's ratio does not describe.
[[nodiscard]] inline bool is_depthwise_conv(const Kernel& k) {
    const auto* d = std::get_if<ConvDims>(&k.dims);
    return k.kind == KernelKind::conv && d && d->groups > 1 && d->groups == d->c;
}

/// A depthwise convolution over one spatial dimension (a conv1d: height 1, a 1 x S kernel), which
/// PyTorch runs as a 2-D one of height 1: S taps an output where the timed 3x3 takes 9.
[[nodiscard]] inline bool is_depthwise_conv1d(const Kernel& k) {
    if (!is_depthwise_conv(k)) return false;
    const auto& d = std::get<ConvDims>(k.dims);
    return d.h == 1 && d.r == 1;
}

/// Whether a kernel's time takes a measured per-op efficiency: the memory-bound and attention
/// kernels a graph op lowered to, every cast, every column sum and every depthwise convolution,
/// where the context has per-op efficiencies.
[[nodiscard]] inline bool takes_op_factor(const Kernel& k, const CostContext& ctx) {
    if (ctx.op_factor.empty() || k.kind == KernelKind::gemm) return false;
    if (k.kind == KernelKind::conv) return is_depthwise_conv(k);
    return !k.source_op.empty() || is_cast(k) || is_column_sum(k) || is_mixed_elementwise(k) || is_strided_elementwise(k) ||
           is_gradient_sum(k);
}

/// The op whose timings a kernel's efficiency comes from: its graph op, but for a fused attention
/// kernel sdpa's, whichever module runs it (nn.MultiheadAttention and sdpa call the same kernels),
/// for a cast the cast op's, whichever layer casts (its precision class is the source dtype's), for
/// a column sum (a bias gradient, with its reduction shape) the sum op's, for a depthwise
/// convolution's passes the depthwise timing's (conv2d with groups = channels; a conv1d's its own,
/// find_op_factor_points), for a layout copy or an elementwise kernel over strided operands the
/// transposed copy's, and for an
/// elementwise kernel on mixed dtypes the mixed-dtype add's, and for a gradient sum the add's,
/// whichever op it belongs to.
[[nodiscard]] inline std::string_view factor_op(const Kernel& k) {
    if (k.kind == KernelKind::attention && std::holds_alternative<AttentionDims>(k.dims)) return "sdpa";
    if (is_layout_copy(k) || is_strided_elementwise(k)) return "transpose_contiguous";
    if (is_cast(k)) return "cast";
    if (is_mixed_elementwise(k)) return "elementwise_mixed";
    if (is_gradient_sum(k)) return "add";
    if (is_column_sum(k)) return "sum";
    if (is_depthwise_conv(k)) return is_depthwise_conv1d(k) ? "depthwise_conv1d" : "depthwise_conv2d";
    return k.source_op;
}

/// The points of a per-op efficiency key in `op_factor`, or nullptr: a depthwise conv1d without
/// timings of its own takes the depthwise conv2d's (profiles before the sixty-second run of
/// 2026-12-01 time depthwise in 2-D alone).
template <class Map, class Key>
[[nodiscard]] inline const std::vector<OpFactorPoint>* find_op_factor_points(const Map& op_factor, const Key& key) {
    auto it = op_factor.find(key);
    if (it == op_factor.end() && std::get<0>(key) == "depthwise_conv1d") {
        it = op_factor.find(std::tuple<std::string_view, Phase, bool>{"depthwise_conv2d", std::get<1>(key), std::get<2>(key)});
    }
    return it != op_factor.end() ? &it->second : nullptr;
}

namespace detail {

/// The log-log interpolation of (x, factor) points at x: between the two that bracket it, the end
/// point's beyond them. `for_each_point(visit)` calls visit(x, factor) for each point (at least one).
/// Where points share an x, each end takes the one the points sorted by (x, factor) would put there,
/// found in one pass without sorting (no allocation).
template <class ForEachPoint>
[[nodiscard]] double interpolate_log_log(ForEachPoint&& for_each_point, double x) {
    using Point = std::pair<double, double>;
    // the first and last of the sorted points, the last below x and the first at or above it
    std::optional<Point> first, last, below, above;
    for_each_point([&](double point_x, double factor) {
        const Point p{point_x, factor};
        if (!first || p < *first) first = p;
        if (!last || *last < p) last = p;
        if (point_x < x && (!below || *below < p)) below = p;
        if (point_x >= x && (!above || p < *above)) above = p;
    });
    if (x <= first->first) return first->second;
    if (!above) return last->second;
    const auto [x0, f0] = *below;  // x0 < x <= x1
    const auto [x1, f1] = *above;
    if (x1 == x0) return f0;
    const double t = std::log(x / x0) / std::log(x1 / x0);
    return std::exp(std::log(f0) * (1 - t) + std::log(f1) * t);
}

}  // namespace detail

/// The size by which an op's efficiency is read among the sizes it was timed at (op_factor_at): a
/// depthwise convolution's output positions per channel (N x P x Q: its weight gradient reduces each
/// channel's in one block, so few channels of many positions run far below many of few), any other
/// kernel's bytes (an elementwise op below and beyond the L2 cache).
[[nodiscard]] inline double factor_size(const Kernel& k) {
    if (is_depthwise_conv(k)) {
        const auto& d = std::get<ConvDims>(k.dims);
        return static_cast<double>(d.n) * static_cast<double>(d.p()) * static_cast<double>(d.q());
    }
    return k.bytes().value();
}

/// The op factor at a kernel's shape among an op's points: an attention kernel takes the points of its
/// backend (cuDNN's, where there is none, flash's: the same tiling), of its causality and of its
/// dropout (with or without) where such points exist, interpolated in log factor over log key length
/// between the two that bracket it (the end point's beyond); a normalization kernel with its reduction
/// shape, the points timed at the nearest group count (log scale), interpolated likewise over log group
/// length; any other kernel, among points timed at two sizes or more, interpolated likewise over its
/// log factor_size; otherwise the op's first op timing.
[[nodiscard]] inline double op_factor_at(const std::vector<OpFactorPoint>& points, const Kernel& k) {
    if (points.empty()) return 1.0;
    const auto distance = [](double a, double b) { return a > b ? a / b : b / a; };  // |log(a/b)|, ordered alike
    if (const auto* a = std::get_if<AttentionDims>(&k.dims)) {
        std::vector<const OpFactorPoint*> of_backend;
        for (const AttentionBackend backend : {a->backend, AttentionBackend::flash}) {
            for (const auto& p : points) {
                if (p.attention && p.attention->backend == backend) of_backend.push_back(&p);
            }
            if (!of_backend.empty() || a->backend != AttentionBackend::cudnn) break;
        }
        if (of_backend.empty()) return points.front().factor;
        // keep the points that match the kernel in `same`, where any do
        const auto keep_matching = [](std::vector<const OpFactorPoint*>& list, auto same) {
            std::vector<const OpFactorPoint*> matching;
            for (const auto* p : list) {
                if (same(*p->attention)) matching.push_back(p);
            }
            if (!matching.empty()) list = std::move(matching);
        };
        keep_matching(of_backend, [&](const AttentionDims& p) { return p.causal == a->causal; });
        keep_matching(of_backend, [&](const AttentionDims& p) { return (p.dropout > 0) == (a->dropout > 0); });
        const auto by_length = [&of_backend](auto&& visit) {
            for (const auto* p : of_backend) visit(static_cast<double>(p->attention->seq_kv), p->factor);
        };
        return detail::interpolate_log_log(by_length, static_cast<double>(a->seq_kv));
    }
    const auto* norm = std::get_if<NormDims>(&k.dims);
    if (const double size = factor_size(k); !norm && points.size() > 1 && size > 0) {
        // the timed sizes that bracket the kernel's (no allocation: this runs for every kernel)
        const OpFactorPoint *below = nullptr, *above = nullptr;
        int sized = 0;
        for (const auto& p : points) {
            if (p.size <= 0) continue;
            ++sized;
            if (p.size <= size && (!below || p.size > below->size)) below = &p;
            if (p.size >= size && (!above || p.size < above->size)) above = &p;
        }
        if (sized > 1) {
            if (!below) return above->factor;
            if (!above || above->size == below->size) return below->factor;
            const double t = std::log(size / below->size) / std::log(above->size / below->size);
            return std::exp(std::log(below->factor) * (1 - t) + std::log(above->factor) * t);
        }
    }
    if (!norm || points.size() == 1) return points.front().factor;
    const double groups = static_cast<double>(norm->groups), length = static_cast<double>(norm->group_elements);
    const OpFactorPoint* nearest = nullptr;
    for (const auto& p : points) {
        if (p.norm && (!nearest || distance(static_cast<double>(p.norm->groups), groups) <
                                       distance(static_cast<double>(nearest->norm->groups), groups))) {
            nearest = &p;
        }
    }
    if (!nearest) return points.front().factor;
    const auto nearest_groups = [&points, nearest](auto&& visit) {  // the nearest group count's points, by length
        for (const auto& p : points) {
            if (p.norm && p.norm->groups == nearest->norm->groups) visit(static_cast<double>(p.norm->group_elements), p.factor);
        }
    };
    return detail::interpolate_log_log(nearest_groups, length);
}

/// op_factor_at, but a column sum (a bias gradient) among points that carry their measured seconds
/// per byte takes those, interpolated in log over log rows at each timed column count and then over
/// log columns (clamped at the grid's edges), as a factor on its modelled time. PyTorch's column
/// reduction is far from the bandwidth curve at these sizes (0.6-3.6 TB/s on an H200, where the curve,
/// measured on L2-resident data below 50 MB, reads 7): its time follows the shape smoothly, while
/// measured / modelled jumps where the curve leaves the L2, so the time, not the ratio, is what
/// carries from the probe's shapes to a model's (BERT-base's 16384 x 768 bias gradients: 13.9 µs
/// by the nearest column count's ratio, about 2.3 times the measured rate of its neighbours).
[[nodiscard]] inline double op_factor_at(const std::vector<OpFactorPoint>& points, const Kernel& k, const CostContext& ctx) {
    const auto* shape = std::get_if<NormDims>(&k.dims);
    if (!shape || !is_column_sum(k) || k.bytes().value() <= 0) return op_factor_at(points, k);
    const auto timed = [](const OpFactorPoint& p) { return p.norm && p.seconds_per_byte > 0; };
    if (std::none_of(points.begin(), points.end(), timed)) return op_factor_at(points, k);
    // at each timed column count, the seconds per byte at the kernel's rows (the points of that count, by rows)
    const auto at_rows = [&](auto&& visit) {
        for (auto p = points.begin(); p != points.end(); ++p) {
            const bool first_of_its_columns = timed(*p) && std::none_of(points.begin(), p, [&](const OpFactorPoint& q) {
                return timed(q) && q.norm->groups == p->norm->groups;
            });
            if (!first_of_its_columns) continue;
            const auto along_rows = [&](auto&& visit_row) {
                for (const auto& q : points) {
                    if (timed(q) && q.norm->groups == p->norm->groups) visit_row(static_cast<double>(q.norm->group_elements), q.seconds_per_byte);
                }
            };
            visit(static_cast<double>(p->norm->groups), detail::interpolate_log_log(along_rows, static_cast<double>(shape->group_elements)));
        }
    };
    const double seconds_per_byte = detail::interpolate_log_log(at_rows, static_cast<double>(shape->groups));
    const Seconds modelled = streaming_cost(k, ctx, true, nullptr).time;
    return modelled.value() > 0 ? k.bytes().value() * seconds_per_byte / modelled.value() : 1.0;
}

/// The key of a kernel's per-op efficiency in CostContext::op_factor: its op, phase and precision
/// class (16-bit or not).
[[nodiscard]] inline std::tuple<std::string_view, Phase, bool> op_factor_key(const Kernel& k) {
    return {factor_op(k), factor_phase(k), k.dtype == DType::bf16 || k.dtype == DType::f16};
}

/// The per-op efficiency that multiplies a kernel's time: the factor of its op, phase and precision
/// class at its shape (op_factor_at), 1 where there is none.
[[nodiscard]] inline double op_factor(const Kernel& k, const CostContext& ctx) {
    if (!takes_op_factor(k, ctx)) return 1.0;
    const std::vector<OpFactorPoint>* points = find_op_factor_points(ctx.op_factor, op_factor_key(k));
    return points ? op_factor_at(*points, k, ctx) : 1.0;
}

namespace detail {

/// kernel_cost, for a caller costing many kernels: with the kernel's per-op efficiency `factor`
/// (op_factor) looked up beforehand, and the curves' bandwidths and the GEMM and convolution shapes'
/// costs remembered where `memo` and `shapes` are given.
[[nodiscard]] inline KernelCost kernel_cost(const Kernel& k, const CostContext& ctx, double factor, BandwidthMemo* memo,
                                            ShapeMemo* shapes = nullptr) {
    KernelCost c;
    switch (k.kind) {
        case KernelKind::host_only: return {Seconds(0), Bound::latency};
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
        case KernelKind::reduction: c = streaming_cost(k, ctx, true, memo); break;
        case KernelKind::unknown: {
            KernelWork w{k.flops, k.unit, k.bytes(), std::nullopt};
            const RooflineTime r = roofline_time(w, ctx.ceilings);
            c = {r.time, r.bound};
            break;
        }
        default: c = streaming_cost(k, ctx, false, memo); break;
    }
    c.time *= factor;
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
