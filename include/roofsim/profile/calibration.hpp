#pragma once
/// The calibration profile: ceilings and efficiency curves *measured* on one GPU by `roofsim-calibrate`,
/// with the identity of the device and software they were measured on. One schema, written and read by
/// this header (the calibrate program saves through `save_calibration`); the format is documented in
/// docs/calibration-format.md. All stored values are SI (bytes, seconds, FLOP, hertz).

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>


#include <roofsim/ir.hpp>
#include <roofsim/compute_unit.hpp>
#include <roofsim/units.hpp>

namespace roofsim {

/// The schema version written by this header; loading any other version is an error.
inline constexpr int calibration_schema_version = 2;

/// One measured figure: the median of `samples` timed repetitions after warm-up, with min and max.
/// The unit is fixed by where the figure sits (documented per field) and written beside it in JSON.
struct Measurement {
    double median = 0.0;  ///< SI units of the field
    double min = 0.0;
    double max = 0.0;
    int samples = 0;      ///< timed repetitions behind median/min/max
    std::string method;   ///< how it was measured (kernel, sizes, timer)
};

/// Median/min/max of a sample set; `method` is left for the caller. Throws on an empty set.
[[nodiscard]] inline Measurement summarize(std::vector<double> samples, std::string method = {}) {
    if (samples.empty()) throw std::invalid_argument("summarize: no samples");
    std::sort(samples.begin(), samples.end());
    const std::size_t n = samples.size();
    const double median = n % 2 == 1 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
    return Measurement{median, samples.front(), samples.back(), static_cast<int>(n), std::move(method)};
}

/// Who measured what, on which device and software.
struct DeviceIdentity {
    std::string name;                 ///< as the driver reports it ("NVIDIA H200")
    std::string gpu_key;              ///< datasheet key ("h200-sxm"), empty when unknown
    int compute_capability_major = 0;
    int compute_capability_minor = 0;
    int sm_count = 0;
    double l2_bytes = 0.0;
    double memory_bytes = 0.0;
    double sm_clock_max_hz = 0.0;     ///< the driver's maximum SM clock
    double memory_clock_max_hz = 0.0;
    int memory_bus_width_bits = 0;
    std::optional<Measurement> sm_clock_measured_hz;  ///< clock64() cycles over %globaltimer during the compute probes
    int device_count = 0;             ///< GPUs visible to the program
    std::string driver_version;       ///< e.g. "580.159.04" (empty if NVML is not read)
    int cuda_driver_version = 0;      ///< cudaDriverGetVersion, e.g. 13000
    int cuda_runtime_version = 0;     ///< cudaRuntimeGetVersion
    std::string cublas_version;       ///< "13.1.0", empty when not used
    std::string cudnn_version;        ///< empty when not built with cuDNN
    std::string nccl_version;         ///< empty when not built with NCCL
    std::string date_utc;             ///< ISO-8601, e.g. "2026-11-29T10:04:05Z"
    std::string tool_version;         ///< roofsim-calibrate version
    std::string command_line;         ///< the exact command that produced the profile
};

/// Memory access pattern of a bandwidth kernel. Bytes counted: read = bytes read; write = bytes written;
/// copy = read + written (b[i] = a[i]); triad = 2 read + 1 written (a[i] = b[i] + s*c[i]).
enum class AccessPattern { read, write, copy, triad };
inline constexpr std::array<AccessPattern, 4> all_access_patterns = {
    AccessPattern::read, AccessPattern::write, AccessPattern::copy, AccessPattern::triad};

[[nodiscard]] constexpr std::string_view to_string(AccessPattern p) {
    switch (p) {
        case AccessPattern::read: return "read";
        case AccessPattern::write: return "write";
        case AccessPattern::copy: return "copy";
        case AccessPattern::triad: return "triad";
    }
    return "?";
}
[[nodiscard]] inline std::optional<AccessPattern> access_pattern_from_key(std::string_view k) {
    for (AccessPattern p : all_access_patterns)
        if (to_string(p) == k) return p;
    return std::nullopt;
}

/// One point of the bandwidth-vs-working-set ramp (bytes/s at a working set of `working_set_bytes`).
struct BandwidthPoint {
    double working_set_bytes = 0.0;  ///< bytes touched by one pass (all arrays together)
    double bytes_per_second = 0.0;   ///< median over the timed repetitions
};

/// Time = overhead + amount / rate, fitted by least squares (Eigen) over a sweep; r2 of the fit in time.
struct AffineFit {
    double overhead_seconds = 0.0;   ///< intercept
    double rate_per_second = 0.0;    ///< 1 / slope, in the x unit per second (bytes/s or FLOP/s)
    double r2 = 0.0;
    int points = 0;
};

/// A compute ceiling from a probe: rate plus how it was obtained.
struct ComputeCeiling {
    Measurement flops_per_second;             ///< FLOP/s (integer ops for INT8)
    std::string instruction;                  ///< the instruction / library call measured ("FFMA", "mma.sync m16n8k16", "cublasGemmEx")
    std::optional<double> sm_clock_hz;        ///< SM clock measured during this probe
    std::optional<double> issue_peak_flops_per_second;  ///< per-SM rate x SMs x measured clock, where the rate is known
};

/// One point of a mixbench-style intensity sweep: rate achieved at an arithmetic intensity.
struct IntensityPoint {
    double flops_per_byte = 0.0;
    double flops_per_second = 0.0;
    double bytes_per_second = 0.0;
};

/// One cuBLAS GEMM in cuBLAS's column-major terms: C (m x n) = op(A) (m x k) op(B) (k x n), `batch`
/// such products per call (cublasGemmStridedBatchedEx when batch > 1). A row-major PyTorch
/// `y[M,N] = x[M,K] W[N,K]^T` is the cuBLAS call (m, n, k) = (N, M, K) with layout "TN".
struct GemmRecord {
    std::int64_t m = 0, n = 0, k = 0;
    ComputeUnit unit = ComputeUnit::bf16_tensor;  ///< precision / compute mode
    Measurement seconds;             ///< GPU time per call (all `batch` products)
    double flops_per_second = 0.0;   ///< 2mnk x batch / median seconds
    double efficiency = 0.0;         ///< flops_per_second / best rate of this unit (sweep or ceiling), in (0, 1]
    std::string layout = "NN";       ///< op(A) op(B) as passed to cuBLAS: "NN", "NT", "TN" or "TT"
    std::int64_t batch = 1;          ///< independent products per call (strided batched GEMM)
};

/// True for the four cuBLAS operand layouts "NN", "NT", "TN", "TT".
[[nodiscard]] inline bool is_gemm_layout(std::string_view l) {
    return l == "NN" || l == "NT" || l == "TN" || l == "TT";
}

/// One cuDNN convolution, FLOPs = 2 N K P Q (C / groups) R S, P x Q the output size.
struct ConvRecord {
    ConvPass pass = ConvPass::forward;
    std::int64_t n = 0, c = 0, h = 0, w = 0, k = 0, r = 0, s = 0;
    std::int64_t stride = 1, pad = 0;
    ComputeUnit unit = ComputeUnit::bf16_tensor;
    std::string algorithm;           ///< cuDNN algorithm chosen by the heuristic (as PyTorch does without benchmark mode)
    Measurement seconds;
    double flops_per_second = 0.0;
    double efficiency = 0.0;         ///< against the library GEMM ceiling of the unit, capped at 1
    std::int64_t groups = 1;         ///< C / groups input channels per group (groups = C: depthwise)
    std::int64_t dilation = 1;       ///< filter dilation, both spatial dimensions
    std::string layout = "NCHW";     ///< tensor and filter layout: "NCHW" or "NHWC"
    /// The H dimension's stride, padding and dilation where they differ from W's (`stride`, `pad`,
    /// `dilation`): a 1-D convolution runs as H = R = 1 with stride 1, no padding, dilation 1 in H.
    std::optional<std::int64_t> stride_h{}, pad_h{}, dilation_h{};

    [[nodiscard]] std::int64_t stride_along_h() const { return stride_h.value_or(stride); }
    [[nodiscard]] std::int64_t pad_along_h() const { return pad_h.value_or(pad); }
    [[nodiscard]] std::int64_t dilation_along_h() const { return dilation_h.value_or(dilation); }
};

/// Output extent of a convolution along one spatial dimension (cuDNN's formula).
[[nodiscard]] constexpr std::int64_t conv_out_extent(std::int64_t in, std::int64_t filter, std::int64_t pad,
                                                     std::int64_t stride, std::int64_t dilation) {
    return (in + 2 * pad - ((filter - 1) * dilation + 1)) / stride + 1;
}

/// Host-device copy direction and host memory kind.
enum class MemcpyKind { h2d_pinned, d2h_pinned, h2d_pageable, d2h_pageable };
inline constexpr std::array<MemcpyKind, 4> all_memcpy_kinds = {
    MemcpyKind::h2d_pinned, MemcpyKind::d2h_pinned, MemcpyKind::h2d_pageable, MemcpyKind::d2h_pageable};
[[nodiscard]] constexpr std::string_view to_string(MemcpyKind k) {
    switch (k) {
        case MemcpyKind::h2d_pinned: return "h2d-pinned";
        case MemcpyKind::d2h_pinned: return "d2h-pinned";
        case MemcpyKind::h2d_pageable: return "h2d-pageable";
        case MemcpyKind::d2h_pageable: return "d2h-pageable";
    }
    return "?";
}
[[nodiscard]] inline std::optional<MemcpyKind> memcpy_kind_from_key(std::string_view k) {
    for (MemcpyKind m : all_memcpy_kinds)
        if (to_string(m) == k) return m;
    return std::nullopt;
}

/// Host-device copy: bandwidth at the largest size plus the size sweep and its latency + bytes/rate fit.
struct MemcpyFigure {
    Measurement bytes_per_second;                 ///< at the largest size
    std::vector<BandwidthPoint> curve;            ///< bytes per copy -> bytes/s
    std::optional<AffineFit> fit;                 ///< seconds = overhead + bytes / rate
};

/// One NCCL collective measurement (nccl-tests conventions for algorithm and bus bandwidth).
struct CollectiveRecord {
    std::string op;                  ///< "all-reduce", "all-gather", "reduce-scatter"
    int gpus = 0;
    double bytes = 0.0;              ///< message size per rank (all-reduce: buffer size)
    Measurement seconds;
    double algorithm_bytes_per_second = 0.0;
    double bus_bytes_per_second = 0.0;
};

/// Why a figure is absent from a profile. not_run: the calibration stopped (interrupted, or at a
/// probe that hung) before this probe's turn; only a partial profile lists it.
enum class MissingReason { failed, unsupported, skipped, not_built, timed_out, not_run };
[[nodiscard]] constexpr std::string_view to_string(MissingReason r) {
    switch (r) {
        case MissingReason::failed: return "failed";
        case MissingReason::unsupported: return "unsupported";
        case MissingReason::skipped: return "skipped";
        case MissingReason::not_built: return "not-built";
        case MissingReason::timed_out: return "timed-out";
        case MissingReason::not_run: return "not-run";
    }
    return "?";
}
[[nodiscard]] inline std::optional<MissingReason> missing_reason_from_key(std::string_view k) {
    for (MissingReason r : {MissingReason::failed, MissingReason::unsupported, MissingReason::skipped,
                            MissingReason::not_built, MissingReason::timed_out, MissingReason::not_run})
        if (to_string(r) == k) return r;
    return std::nullopt;
}

/// A figure (or a whole probe's figures) that the profile does not hold, and why.
struct MissingFigure {
    std::string figure;    ///< probe key or figure path, e.g. "nccl" or "library/fp8-tensor"
    MissingReason reason = MissingReason::failed;
    std::string detail;    ///< the error text or the capability that is lacking
};

/// Where a derived profile came from (profile/derive.hpp): the measured profile it was derived from and
/// the rules it used, one line each.
struct Derivation {
    std::string reference_key;       ///< the measured GPU's datasheet key
    std::string reference;           ///< that profile's provenance line
    std::vector<std::string> rules;  ///< "D1 DRAM: ...", one per rule
};

/// A measured calibration profile of one GPU. Every member is optional in the sense that a probe may
/// not have run; what did not run is listed in `missing`.
struct Calibration {
    int schema_version = calibration_schema_version;
    DeviceIdentity device;

    /// Bandwidth ceilings in bytes/s per level and access pattern (bytes read + written).
    std::map<MemoryLevel, std::map<AccessPattern, Measurement>> bandwidth;
    /// Bandwidth vs working-set size per pattern (few KiB to several times L2), sorted by size.
    std::map<AccessPattern, std::vector<BandwidthPoint>> bandwidth_curve;
    /// The working-set size (bytes) at which the ramp drops from L2 to DRAM bandwidth (half-way point).
    std::optional<double> l2_to_dram_step_bytes;

    /// Hand-written probe ceilings (CUDA-core FMA kernels, mma.sync tensor kernels), FLOP/s.
    std::map<ComputeUnit, ComputeCeiling> probe_ceilings;
    /// Library ceilings: cuBLAS/cuBLASLt at 8192^3 (what PyTorch calls), FLOP/s.
    std::map<ComputeUnit, ComputeCeiling> library_ceilings;
    /// Mixbench-style rate vs arithmetic intensity, per CUDA-core unit, sorted by intensity.
    std::map<ComputeUnit, std::vector<IntensityPoint>> intensity_curves;

    std::vector<GemmRecord> gemm_sweep;
    /// Per unit: GEMM seconds = overhead + 2mnk / rate over the sweep.
    std::map<ComputeUnit, AffineFit> gemm_fits;
    std::vector<ConvRecord> conv_sweep;

    std::optional<Measurement> launch_latency_seconds;    ///< launch + synchronize of an empty kernel
    std::optional<Measurement> launch_interval_seconds;   ///< back-to-back launches: time per launch
    /// The least GPU time a kernel occupies in a stream: empty kernels back to back in one CUDA
    /// graph, GPU time per kernel (no host issue cost in it).
    std::optional<Measurement> launch_gpu_interval_seconds;

    std::map<MemcpyKind, MemcpyFigure> memcpy;

    std::vector<CollectiveRecord> collectives;

    std::vector<MissingFigure> missing;

    /// True for what a calibration that stopped before all its probes ran wrote (interrupted by a
    /// signal, or stopped at a probe that hung): the probes it did not run are in `missing` as
    /// not_run. Loaders refuse such a profile unless asked to accept it (PartialProfile).
    bool partial = false;

    /// Set for a profile derived by rules rather than measured (profile/derive.hpp).
    std::optional<Derivation> derivation;
};

// ---------------------------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------------------------

namespace detail {

inline void require(bool ok, const std::string& where, const std::string& what) {
    if (!ok) throw std::runtime_error("invalid calibration: " + where + ": " + what);
}

inline void validate_measurement(const Measurement& m, const std::string& where) {
    require(m.samples > 0, where, "samples must be positive");
    require(m.min > 0.0 && m.median > 0.0 && m.max > 0.0, where, "values must be positive");
    require(m.min <= m.median && m.median <= m.max, where, "requires min <= median <= max");
}

inline void validate_fit(const AffineFit& f, const std::string& where) {
    require(f.rate_per_second > 0.0, where, "rate must be positive");
    require(f.overhead_seconds >= 0.0, where, "overhead must not be negative");
    require(f.points >= 2, where, "a fit needs at least 2 points");
}

inline void validate_curve(const std::vector<BandwidthPoint>& c, const std::string& where) {
    for (std::size_t i = 0; i < c.size(); ++i) {
        const std::string w = where + "/" + std::to_string(i);
        require(c[i].working_set_bytes > 0.0, w, "bytes must be positive");
        require(c[i].bytes_per_second > 0.0, w, "bandwidth must be positive");
        if (i > 0) require(c[i].working_set_bytes > c[i - 1].working_set_bytes, w, "sizes must increase");
    }
}

inline void validate_efficiency(double e, const std::string& where) {
    require(e > 0.0 && e <= 1.0, where, "efficiency must be in (0, 1]");
}

}  // namespace detail

/// Throws std::runtime_error naming the offending field when the profile is not physically sane:
/// positive values, min <= median <= max, efficiencies in (0, 1], curves sorted by their x value.
inline void validate(const Calibration& c) {
    using detail::require;
    require(c.schema_version == calibration_schema_version, "schema_version",
            "unsupported version " + std::to_string(c.schema_version));
    require(!c.device.name.empty(), "device/name", "must not be empty");
    require(c.device.sm_count > 0, "device/sm_count", "must be positive");
    if (c.device.sm_clock_measured_hz)
        detail::validate_measurement(*c.device.sm_clock_measured_hz, "device/sm_clock_measured_hz");
    for (const auto& [level, patterns] : c.bandwidth)
        for (const auto& [pattern, m] : patterns)
            detail::validate_measurement(m, "bandwidth/" + std::string(to_string(level)) + "/" +
                                                std::string(to_string(pattern)));
    for (const auto& [pattern, curve] : c.bandwidth_curve)
        detail::validate_curve(curve, "bandwidth_curve/" + std::string(to_string(pattern)));
    if (c.l2_to_dram_step_bytes) require(*c.l2_to_dram_step_bytes > 0.0, "l2_to_dram_step_bytes", "must be positive");
    for (const auto* table : {&c.probe_ceilings, &c.library_ceilings}) {
        const std::string base = table == &c.probe_ceilings ? "compute/probe/" : "compute/library/";
        for (const auto& [unit, ceiling] : *table) {
            const std::string w = base + std::string(to_string(unit));
            detail::validate_measurement(ceiling.flops_per_second, w);
            if (ceiling.sm_clock_hz) require(*ceiling.sm_clock_hz > 0.0, w, "clock must be positive");
            if (ceiling.issue_peak_flops_per_second)
                require(*ceiling.issue_peak_flops_per_second > 0.0, w, "issue peak must be positive");
        }
    }
    for (const auto& [unit, curve] : c.intensity_curves) {
        const std::string w = "intensity_curves/" + std::string(to_string(unit));
        for (std::size_t i = 0; i < curve.size(); ++i) {
            require(curve[i].flops_per_byte > 0.0 && curve[i].flops_per_second > 0.0 &&
                        curve[i].bytes_per_second > 0.0,
                    w + "/" + std::to_string(i), "values must be positive");
            if (i > 0) require(curve[i].flops_per_byte > curve[i - 1].flops_per_byte, w + "/" + std::to_string(i),
                               "intensities must increase");
        }
    }
    for (std::size_t i = 0; i < c.gemm_sweep.size(); ++i) {
        const auto& g = c.gemm_sweep[i];
        const std::string w = "gemm_sweep/" + std::to_string(i);
        require(g.m > 0 && g.n > 0 && g.k > 0 && g.batch > 0, w, "shape must be positive");
        require(is_gemm_layout(g.layout), w + "/layout", "must be NN, NT, TN or TT");
        detail::validate_measurement(g.seconds, w + "/seconds");
        require(g.flops_per_second > 0.0, w, "rate must be positive");
        detail::validate_efficiency(g.efficiency, w + "/efficiency");
    }
    for (const auto& [unit, fit] : c.gemm_fits) detail::validate_fit(fit, "gemm_fits/" + std::string(to_string(unit)));
    for (std::size_t i = 0; i < c.conv_sweep.size(); ++i) {
        const auto& v = c.conv_sweep[i];
        const std::string w = "conv_sweep/" + std::to_string(i);
        require(v.n > 0 && v.c > 0 && v.h > 0 && v.w > 0 && v.k > 0 && v.r > 0 && v.s > 0 && v.stride > 0 &&
                    v.pad >= 0 && v.groups > 0 && v.dilation > 0 && v.stride_along_h() > 0 && v.pad_along_h() >= 0 &&
                    v.dilation_along_h() > 0,
                w, "shape must be positive");
        require(v.c % v.groups == 0 && v.k % v.groups == 0, w + "/groups", "must divide c and k");
        require(v.layout == "NCHW" || v.layout == "NHWC", w + "/layout", "must be NCHW or NHWC");
        detail::validate_measurement(v.seconds, w + "/seconds");
        require(v.flops_per_second > 0.0, w, "rate must be positive");
        detail::validate_efficiency(v.efficiency, w + "/efficiency");
    }
    if (c.launch_latency_seconds) detail::validate_measurement(*c.launch_latency_seconds, "launch/latency");
    if (c.launch_interval_seconds) detail::validate_measurement(*c.launch_interval_seconds, "launch/interval");
    if (c.launch_gpu_interval_seconds)
        detail::validate_measurement(*c.launch_gpu_interval_seconds, "launch/gpu_interval");
    for (const auto& [kind, f] : c.memcpy) {
        const std::string w = "memcpy/" + std::string(to_string(kind));
        detail::validate_measurement(f.bytes_per_second, w);
        detail::validate_curve(f.curve, w + "/curve");
        if (f.fit) detail::validate_fit(*f.fit, w + "/fit");
    }
    for (std::size_t i = 0; i < c.collectives.size(); ++i) {
        const auto& r = c.collectives[i];
        const std::string w = "collectives/" + std::to_string(i);
        require(r.gpus >= 2, w, "a collective needs at least 2 GPUs");
        require(r.bytes > 0.0 && r.algorithm_bytes_per_second > 0.0 && r.bus_bytes_per_second > 0.0, w,
                "values must be positive");
        detail::validate_measurement(r.seconds, w + "/seconds");
    }
    bool not_run = false;
    for (std::size_t i = 0; i < c.missing.size(); ++i) {
        require(!c.missing[i].figure.empty(), "missing/" + std::to_string(i), "figure must be named");
        if (c.missing[i].reason == MissingReason::not_run) {
            require(c.partial, "missing/" + std::to_string(i) + "/reason", "not-run is listed only by a partial profile");
            not_run = true;
        }
    }
    require(!c.partial || not_run, "partial", "a partial profile lists the probes it did not run (reason not-run)");
}

// ---------------------------------------------------------------------------------------------
// JSON: writing
// ---------------------------------------------------------------------------------------------

/// The compute ceiling of a unit: the better of the hand-written probe's and the library's medians;
/// nullopt when neither was measured.
[[nodiscard]] inline std::optional<FlopsPerSecond> compute_ceiling(const Calibration& c, ComputeUnit u) {
    std::optional<double> best;
    for (const auto* table : {&c.probe_ceilings, &c.library_ceilings}) {
        auto it = table->find(u);
        if (it != table->end()) best = std::max(best.value_or(0.0), it->second.flops_per_second.median);
    }
    if (!best) return std::nullopt;
    return FlopsPerSecond(*best);
}

/// The bandwidth ceiling of a memory level: the best access pattern's median (bytes read + written
/// per second); nullopt when the level was not measured.
[[nodiscard]] inline std::optional<BytesPerSecond> bandwidth_ceiling(const Calibration& c, MemoryLevel level) {
    auto it = c.bandwidth.find(level);
    if (it == c.bandwidth.end() || it->second.empty()) return std::nullopt;
    double best = 0.0;
    for (const auto& [p, m] : it->second) best = std::max(best, m.median);
    return BytesPerSecond(best);
}

/// The bandwidth of one access pattern at one level, if measured.
[[nodiscard]] inline std::optional<BytesPerSecond> bandwidth_of(const Calibration& c, MemoryLevel level,
                                                                AccessPattern p) {
    auto it = c.bandwidth.find(level);
    if (it == c.bandwidth.end()) return std::nullopt;
    auto jt = it->second.find(p);
    if (jt == it->second.end()) return std::nullopt;
    return BytesPerSecond(jt->second.median);
}

/// Kernel launch latency (launch + completion of an empty kernel, median), if measured.
[[nodiscard]] inline std::optional<Seconds> launch_latency(const Calibration& c) {
    if (!c.launch_latency_seconds) return std::nullopt;
    return Seconds(c.launch_latency_seconds->median);
}

/// Time per launch when kernels are issued back to back (the host-issue floor), if measured.
[[nodiscard]] inline std::optional<Seconds> launch_interval(const Calibration& c) {
    if (!c.launch_interval_seconds) return std::nullopt;
    return Seconds(c.launch_interval_seconds->median);
}

/// The least GPU time a kernel occupies in a stream (empty kernels replayed from a CUDA graph), if measured.
[[nodiscard]] inline std::optional<Seconds> launch_gpu_interval(const Calibration& c) {
    if (!c.launch_gpu_interval_seconds) return std::nullopt;
    return Seconds(c.launch_gpu_interval_seconds->median);
}

/// Host-device copy bandwidth at the largest size measured, if measured.
[[nodiscard]] inline std::optional<BytesPerSecond> memcpy_bandwidth(const Calibration& c, MemcpyKind k) {
    auto it = c.memcpy.find(k);
    if (it == c.memcpy.end()) return std::nullopt;
    return BytesPerSecond(it->second.bytes_per_second.median);
}

/// True when the profile lists `figure` (a probe key or figure path) as missing.
[[nodiscard]] inline bool is_missing(const Calibration& c, std::string_view figure) {
    return std::any_of(c.missing.begin(), c.missing.end(), [&](const MissingFigure& m) { return m.figure == figure; });
}

/// The probes a partial profile did not run (its not_run entries), in the order it lists them.
[[nodiscard]] inline std::vector<std::string> probes_not_run(const Calibration& c) {
    std::vector<std::string> out;
    for (const auto& m : c.missing)
        if (m.reason == MissingReason::not_run) out.push_back(m.figure);
    return out;
}

/// probes_not_run joined by ", ": "gemm_sweep, conv_sweep".
[[nodiscard]] inline std::string probes_not_run_text(const Calibration& c) {
    std::string s;
    for (const auto& p : probes_not_run(c)) s += (s.empty() ? "" : ", ") + p;
    return s;
}

/// One line of provenance: "measured on NVIDIA H200, 2026-11-29, roofsim-calibrate 0.1.0", with
/// " (partial; not run: gemm_sweep, conv_sweep)" after it for a partial profile.
/// A derived profile's: "derived from <the reference's line> by rules D1-D7".
[[nodiscard]] inline std::string provenance(const Calibration& c) {
    if (c.derivation) {
        std::string tags;
        for (const auto& r : c.derivation->rules) {
            if (!tags.empty()) tags += ',';
            tags.append(r, 0, r.find(' '));
        }
        return "derived from " + c.derivation->reference_key + " (" + c.derivation->reference + ") by rules " + tags;
    }
    const std::string date = c.device.date_utc.substr(0, std::min<std::size_t>(10, c.device.date_utc.size()));
    std::string s = "measured on " + c.device.name;
    if (!date.empty()) s += ", " + date;
    s += ", roofsim-calibrate " + (c.device.tool_version.empty() ? std::string("?") : c.device.tool_version);
    if (c.partial) s += " (partial; not run: " + probes_not_run_text(c) + ")";
    return s;
}

}  // namespace roofsim
