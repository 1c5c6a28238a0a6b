#pragma once
/// The cost context: everything the cost models read, prepared once per GPU and calibration profile:
/// datasheet ceilings refined by the profile (measured ceilings, the bandwidth-vs-size curves, the GEMM
/// model fitted to the cuBLAS sweep with its layout factors, the cuDNN sweep, the launch floor).

#include <roofsim/cost/collective.hpp>
#include <roofsim/cost/gemm_model.hpp>
#include <roofsim/profile/calibration.hpp>
#include <roofsim/profile/builtin.hpp>
#include <roofsim/profile/kernel_model.hpp>
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

/// Convolution time relative to the GEMM model of its implicit GEMM, per unit, pass and ConvClass: the
/// kernel model's fitted parameters (ConvKernelParams), or without them the median ratio of measured
/// cuDNN time to the GEMM model's waves over the calibration's convolution sweep.
struct ConvModel {
    ConvKernelParams params;
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
    /// Keyed by (unit, pass, class): depthwise, pointwise and general convolutions run other kernels.
    std::map<std::tuple<ComputeUnit, ConvPass, ConvClass>, ConvModel> conv;
    /// Fused attention by (unit, backend, backward), from the kernel model; a kernel without an entry
    /// takes the framework profile's measured sdpa efficiency (op_factor).
    std::map<std::tuple<ComputeUnit, AttentionBackend, bool>, ScaledGemmParams> attention;
    std::string attention_source;
    /// cuDNN times the calibration measured (NCHW, PyTorch's default layout), by shape less the batch:
    /// every batch size the sweep measured for a convolution geometry (N -> its measured point, with
    /// the implicit GEMM's model time in `gemm` at N).
    std::unordered_map<std::tuple<ComputeUnit, ConvPass, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                                  std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                                  std::int64_t, std::int64_t>,
                       std::map<std::int64_t, MeasuredPoint>, detail::TupleHash>
        conv_measured_by_batch;
    /// A GPU without TF32 tensor cores (Volta and older): PyTorch's TF32 switches do nothing there, so
    /// the GEMMs and convolutions its precision rules put on TF32 run in float32 (kernel_cost).
    bool tf32_as_fp32 = false;
    CollectiveModel collectives;             ///< NCCL all-reduce: measured, or the link's datasheet bandwidth
    Bytes memory_capacity{0};                ///< the GPU's memory: as CUDA reports it where measured, else the datasheet's
    std::string memory_capacity_source;
    std::vector<BandwidthPoint> copy_curve;  ///< bytes/s vs working set, read + written (calibration)
    std::vector<BandwidthPoint> read_curve;  ///< read-only
    Seconds kernel_floor{0};                 ///< the least GPU time of any kernel
    std::string kernel_floor_source;
    /// The GPU's own time between back-to-back kernels of a stream, added after each kernel whose time
    /// comes from kernel durations or bandwidth (GEMM and convolution sweeps, timed back to back,
    /// include it; a kernel at the floor too)
    Seconds kernel_gap{0};
    std::string kernel_gap_source;
    /// The fixed time of a memory-bound kernel besides its bytes at the measured bandwidth (the kernel
    /// model's; 0 without one).
    Seconds memory_fixed_time{0};
    /// Measured / modelled GPU time of PyTorch's own kernels for a graph op, by (op, phase, 16-bit):
    /// the efficiency of its implementation against the byte and FLOP counts (framework.hpp), one
    /// point per op timing (normalizations at several reduction shapes). Looked up by
    /// (std::string_view, Phase, bool) without a copy of the op.
    std::map<std::tuple<std::string, Phase, bool>, std::vector<OpFactorPoint>, detail::OpFactorKeyLess> op_factor;
    std::string op_factor_source;
};

namespace detail {

/// The bytes of one element of a GEMM on `unit` (16-bit tensor units 2, fp8 and int8 1, else 4).
[[nodiscard]] constexpr int gemm_element_bytes(ComputeUnit unit) {
    switch (unit) {
        case ComputeUnit::fp16_tensor:
        case ComputeUnit::fp16_fp16acc_tensor:
        case ComputeUnit::bf16_tensor:
        case ComputeUnit::fp16:
        case ComputeUnit::bf16: return 2;
        case ComputeUnit::fp8_tensor:
        case ComputeUnit::int8_tensor: return 1;
        default: return 4;
    }
}

/// Whether a GEMM's rows allow 16-byte vectors on `unit` (gemm_choice's alignment class).
[[nodiscard]] inline bool is_aligned(ComputeUnit unit, const GemmDims& d) { return vector_aligned(d, gemm_element_bytes(unit)); }

/// The GEMM model's time of `d` (gemm_choice).
[[nodiscard]] inline Seconds gemm_model_time(const GemmModel& g, const GemmDims& d, ComputeUnit unit) {
    return gemm_choice(g, d, gemm_element_bytes(unit)).time;
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

/// The bytes a convolution pass reads and writes, each tensor once: forward x, w -> y; backward-data
/// dy, w -> dx; backward-filter dy, x -> dw.
[[nodiscard]] inline Bytes conv_tensor_bytes(const ConvDims& d, int element_bytes) {
    const auto elements = [](std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t e) {  // as doubles: no int64 overflow
        return static_cast<double>(a) * static_cast<double>(b) * static_cast<double>(c) * static_cast<double>(e);
    };
    const double x = elements(d.n, d.c, d.h, d.w), y = elements(d.n, d.k, d.p(), d.q());
    const double w = elements(d.k, d.c / std::max<std::int64_t>(1, d.groups), d.r, d.s);
    return Bytes((x + y + w) * element_bytes);
}

[[nodiscard]] inline GemmDims implicit_gemm(const ConvDims& c) {
    // A pointwise convolution on NCHW tensors is N GEMMs of each sample's matrices, y[n] (K x HW) =
    // W (K x C) x[n] (C x HW) (H200, cuDNN 9.19: one CUTLASS or cuBLAS GEMM kernel, no transposes):
    // forward M = K, N = HW, K = C; backward-data M = C, N = HW, K = K; backward-filter M = K, N = C, K = HW.
    if (conv_class(c) == ConvClass::pointwise) {
        // the loaders refuse sizes that overflow int64 (ir.hpp, oversized_size); these checks are the last guard
        const std::int64_t hw = detail::value_or_overflow(detail::checked_mul(c.h, c.w), "convolution h * w");
        switch (c.pass) {
            case ConvPass::forward: return {c.k, hw, c.c, c.n, GemmLayout::nn};
            case ConvPass::backward_data: return {c.c, hw, c.k, c.n, GemmLayout::tn};
            case ConvPass::backward_filter: return {c.k, c.c, hw, c.n, GemmLayout::nt};
        }
    }
    // forward: M = N P Q, N = K, K = C R S / groups; backward-data: M = N H W, N = C, K = K R S / groups;
    // backward-filter: M = K, N = C R S / groups, K = N P Q. Grouped convolutions run `groups` GEMMs.
    using detail::checked_product, detail::value_or_overflow;
    const std::int64_t npq = value_or_overflow(checked_product({c.n, c.p(), c.q()}), "convolution n * p * q");
    const std::int64_t crs = value_or_overflow(checked_product({c.c / c.groups, c.r, c.s}), "convolution c / groups * r * s");
    switch (c.pass) {
        case ConvPass::forward: return {npq, c.k / c.groups, crs, c.groups};
        case ConvPass::backward_data:
            return {value_or_overflow(checked_product({c.n, c.h, c.w}), "convolution n * h * w"), c.c / c.groups,
                    value_or_overflow(checked_product({c.k / c.groups, c.r, c.s}), "convolution k / groups * r * s"), c.groups};
        case ConvPass::backward_filter: return {c.k / c.groups, crs, npq, c.groups};
    }
    return {};
}

/// The convolution model (ConvKernelParams): t0 + max(f x the waves of its implicit GEMM (gemm_choice),
/// its tensors' `bytes` at DRAM bandwidth) + tau x those bytes' DRAM time (the layout transposes).
[[nodiscard]] inline Seconds conv_model_time(const GemmModel& g, const ConvKernelParams& m, const ConvDims& d, ComputeUnit unit,
                                             Bytes bytes) {
    const GemmChoice c = gemm_choice(g, implicit_gemm(d), gemm_element_bytes(unit));
    const Seconds memory = g.dram.value() > 0 ? bytes / g.dram : Seconds(0);
    return m.scaled.fixed_time + std::max(c.compute * m.scaled.factor, memory) + memory * m.transposes;
}

/// The parameters of a convolution's unit, pass and class in `conv`: a pointwise convolution without
/// its own takes the general ones; null where neither is there.
template <class Map>
[[nodiscard]] auto find_conv_params(const Map& conv, ComputeUnit unit, const ConvDims& d) -> decltype(&conv.begin()->second) {
    const ConvClass kind = conv_class(d);
    auto it = conv.find({unit, d.pass, kind});
    if (it == conv.end() && kind == ConvClass::pointwise) it = conv.find({unit, d.pass, ConvClass::general});
    return it == conv.end() ? nullptr : &it->second;
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

/// Adds a calibration's measured NCCL all-reduce times (roofsim-calibrate's nccl probe, over the
/// GPUs that calibration saw) to the context's collective model.
inline void add_measured_collectives(CostContext& ctx, const Calibration& c) {
    bool any = false;
    for (const auto& r : c.collectives) {
        if (r.op != "all-reduce") continue;
        add_all_reduce_point(ctx.collectives, r.gpus, CollectivePoint{r.bytes, Seconds(r.seconds.median)});
        any = true;
    }
    if (!any) return;
    const std::string source = c.device.name + " x" + std::to_string(c.device.device_count) + ", roofsim-calibrate " +
                               c.device.tool_version + ", " + c.device.date_utc + ", NCCL " + c.device.nccl_version;
    ctx.collectives.measured_source += (ctx.collectives.measured_source.empty() ? "" : "; ") + source;
}

/// Adds the built-in collective profiles measured on GPUs of this key (data/collectives/).
inline void add_builtin_collectives(CostContext& ctx, std::string_view gpu_key) {
    for (const auto& c : builtin_collective_profiles()) {
        if (c.device.gpu_key == gpu_key) add_measured_collectives(ctx, c);
    }
}

/// The cost context of a GPU: its datasheet's ceilings, refined by its calibration where given; the
/// GEMM kernel model of each unit with the parameters of the GPU's architecture family from `kernels`
/// (a kernel-model profile of its chip; without one, every efficiency 1 and no fixed times).
[[nodiscard]] inline CostContext make_cost_context(const GpuSpec& spec, const Calibration* calibration,
                                                   const KernelModelProfile* kernels) {
    CostContext ctx;
    ctx.sm_count = spec.sm_count.value;
    ctx.ceilings = calibration ? ceilings_from_calibration(*calibration, spec) : ceilings_from_spec(spec);
    if (calibration && calibration->device.sm_count > 0) ctx.sm_count = calibration->device.sm_count;
    const BytesPerSecond dram = ctx.ceilings.rate(MemoryLevel::dram);
    if (kernels && kernels->chip != spec.chip.value) {
        throw std::runtime_error("kernel model of " + kernels->chip + " given for " + spec.name + " (" + spec.chip.value + ")");
    }
    for (const auto& [unit, ceiling] : ctx.ceilings.compute) {
        GemmModel g{ceiling.value, ctx.sm_count, dram, GemmKernelParams{}, ceiling.source};
        if (kernels) {
            if (const auto it = kernels->gemm.find(unit); it != kernels->gemm.end()) {
                g.set_params(it->second);
                g.source += "; GEMM kernel model of " + kernels->chip + ": " + kernels->provenance;
            }
        }
        ctx.gemm[unit] = g;
    }
    if (kernels) {
        for (const auto& [key, params] : kernels->conv) {
            if (ctx.gemm.count(std::get<0>(key)) != 0) ctx.conv[key] = ConvModel{params, "kernel model of " + kernels->chip + ": " + kernels->provenance};
        }
        ctx.attention = kernels->attention;
        ctx.memory_fixed_time = kernels->memory_fixed_time;
        if (!ctx.attention.empty()) ctx.attention_source = "kernel model of " + kernels->chip + ": " + kernels->provenance;
    }
    ctx.tf32_as_fp32 = !ctx.ceilings.has(ComputeUnit::tf32_tensor) && ctx.ceilings.has(ComputeUnit::fp32);
    ctx.memory_capacity = spec.memory_size.value;
    ctx.memory_capacity_source = "datasheet (" + spec.memory_size.source + ")";
    if (calibration && calibration->device.memory_bytes > 0) {
        ctx.memory_capacity = Bytes(calibration->device.memory_bytes);
        ctx.memory_capacity_source = "total memory as CUDA reports it, " + provenance(*calibration);
    }
    // A GPU's link to its peers, one way: half the datasheet's bidirectional NVLink, else PCIe, figure.
    // NVLink joins every GPU of an SXM board (NVSwitch, 8 GPUs) but only two PCIe cards (their
    // NVLink bridge); a ring over more of those runs over PCIe.
    if (spec.nvlink_bandwidth) {
        ctx.collectives.link = spec.nvlink_bandwidth->value * 0.5;
        ctx.collectives.link_source = "NVLink, half the datasheet's bidirectional " + spec.nvlink_bandwidth->source;
        ctx.collectives.link_gpus = spec.form_factor.value.starts_with("SXM") ? 8 : 2;
        ctx.collectives.link_is_nvlink = true;
        ctx.collectives.wider_link = spec.pcie_bandwidth.value * 0.5;
        ctx.collectives.wider_link_source = "PCIe (beyond the " + std::to_string(*ctx.collectives.link_gpus) +
                                            " GPUs NVLink joins), half the datasheet's bidirectional " + spec.pcie_bandwidth.source;
    } else {
        ctx.collectives.link = spec.pcie_bandwidth.value * 0.5;
        ctx.collectives.link_source = "PCIe, half the datasheet's bidirectional " + spec.pcie_bandwidth.source;
    }
    if (!calibration) return ctx;

    const Calibration& cal = *calibration;
    add_measured_collectives(ctx, cal);
    const std::string measured = provenance(cal);
    // GEMM: the layout factors per unit, and the measured times by shape and along one dimension.
    std::map<ComputeUnit, std::vector<std::pair<GemmDims, double>>> sweep;
    for (const auto& r : cal.gemm_sweep) {
        // cuBLAS's column-major C (m x n) is the row-major product's (n x m): its rows are m long
        GemmDims d{r.n, r.m, r.k, r.batch};
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
        const Seconds model_t = detail::gemm_model_time(model->second, GemmDims{lo, hi, k, batch}, unit);
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
    // the records as convolutions of the IR
    std::vector<std::pair<ComputeUnit, ConvDims>> convs;
    std::vector<double> seconds;
    for (const auto& r : records) {
        if (ctx.gemm.count(r.unit) == 0 || r.layout != "NCHW") continue;
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
        convs.push_back({r.unit, d});
        seconds.push_back(r.seconds.median);
    }
    // The pass parameters: the kernel model's where it has them, else the sweep's median ratio of
    // measured time to the implicit GEMM's waves.
    std::map<std::tuple<ComputeUnit, ConvPass, ConvClass>, std::vector<double>> ratios;
    for (std::size_t i = 0; i < convs.size(); ++i) {
        const auto& [unit, d] = convs[i];
        const GemmChoice c = gemm_choice(ctx.gemm.at(unit), detail::implicit_gemm(d), detail::gemm_element_bytes(unit));
        ratios[{unit, d.pass, conv_class(d)}].push_back(seconds[i] / c.compute.value());
    }
    for (auto& [key, v] : ratios) {
        std::sort(v.begin(), v.end());
        ctx.conv.emplace(key, ConvModel{ConvKernelParams{ScaledGemmParams{v[v.size() / 2], Seconds(0)}, 0},
                                        measured + " (cuDNN sweep, median of " + std::to_string(v.size()) + " shapes)"});
    }
    for (std::size_t i = 0; i < convs.size(); ++i) {
        const auto& [unit, d] = convs[i];
        const ConvModel* m = detail::find_conv_params(ctx.conv, unit, d);
        const ConvKernelParams params = m ? m->params : ConvKernelParams{};
        const Seconds model_t = detail::conv_model_time(ctx.gemm.at(unit), params, d, unit,
                                                        detail::conv_tensor_bytes(d, detail::gemm_element_bytes(unit)));
        ctx.conv_measured_by_batch[detail::conv_geometry_key(unit, d)][d.n] = detail::measured_point(d.n, Seconds(seconds[i]), model_t);
    }
    if (auto it = cal.bandwidth_curve.find(AccessPattern::copy); it != cal.bandwidth_curve.end()) ctx.copy_curve = it->second;
    if (auto it = cal.bandwidth_curve.find(AccessPattern::read); it != cal.bandwidth_curve.end()) ctx.read_curve = it->second;
    if (ctx.ceilings.launch_latency) {
        ctx.kernel_floor = ctx.ceilings.launch_latency->value;
        ctx.kernel_floor_source = ctx.ceilings.launch_latency->source;
    }
    return ctx;
}

/// The cost context of a GPU with the built-in kernel model of its architecture family, if any.
[[nodiscard]] inline CostContext make_cost_context(const GpuSpec& spec, const Calibration* calibration = nullptr) {
    return make_cost_context(spec, calibration, find_builtin_kernel_model(spec.chip.value));
}

/// The time of one kernel and which limit set it.
struct KernelCost {
    Seconds time{0};
    Bound bound = Bound::compute;
};

}  // namespace roofsim
