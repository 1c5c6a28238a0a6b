#pragma once
/// The multi-ceiling roofline: compute ceilings per compute unit, bandwidth ceilings per memory
/// level (DRAM, L2), an optional per-kernel latency floor; the time of a kernel from its FLOPs and
/// bytes, and which ceiling bounds it. Ceilings come from a datasheet spec or from a measured
/// calibration profile; every ceiling keeps its provenance.

#include <roofsim/profile/calibration.hpp>
#include <roofsim/gpu.hpp>
#include <roofsim/compute_unit.hpp>
#include <roofsim/units.hpp>

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace roofsim {

/// The ceilings one roofline is drawn from, each with its source.
struct Ceilings {
    std::string gpu_key;   ///< the GPU these ceilings describe ("h200-sxm")
    std::string gpu_name;  ///< its human name
    std::string origin;    ///< "datasheet" or the calibration's provenance line
    std::string kind = "datasheet";  ///< the kind of profile: "datasheet", "measured" or "derived" (profile/derive.hpp)
    std::map<ComputeUnit, Sourced<FlopsPerSecond>> compute;
    std::map<MemoryLevel, Sourced<BytesPerSecond>> bandwidth;
    std::optional<Sourced<Seconds>> launch_latency;  ///< the shortest time any kernel takes

    [[nodiscard]] bool has(ComputeUnit u) const { return compute.count(u) != 0; }
    [[nodiscard]] bool has(MemoryLevel m) const { return bandwidth.count(m) != 0; }

    /// The compute ceiling; throws std::invalid_argument naming the GPU when it has no such unit.
    [[nodiscard]] FlopsPerSecond rate(ComputeUnit u) const {
        auto it = compute.find(u);
        if (it == compute.end()) {
            throw std::invalid_argument(gpu_key + " has no " + std::string(to_string(u)) + " ceiling" +
                                        (is_tensor_core(u) ? " (the GPU lacks this tensor-core format)" : ""));
        }
        return it->second.value;
    }

    /// The bandwidth ceiling; throws std::invalid_argument naming the GPU when none is known.
    [[nodiscard]] BytesPerSecond rate(MemoryLevel m) const {
        auto it = bandwidth.find(m);
        if (it == bandwidth.end()) {
            throw std::invalid_argument(gpu_key + " has no " + std::string(to_string(m)) +
                                        " bandwidth figure (no datasheet states it; a calibration measures it)");
        }
        return it->second.value;
    }
};

/// Ceilings read straight from a datasheet spec: peak rates, DRAM bandwidth, L2 where stated.
/// No latency floor: no datasheet states one.
[[nodiscard]] inline Ceilings ceilings_from_spec(const GpuSpec& spec) {
    Ceilings c;
    c.gpu_key = spec.key;
    c.gpu_name = spec.name;
    c.origin = "datasheet";
    // Short provenance: "datasheet: <citation key>"; `roofsim specs --gpu KEY` prints the full citation.
    auto from_sheet = [](auto figure) {
        figure.source = "datasheet: " + figure.source;
        return figure;
    };
    for (const auto& [unit, peak] : spec.peak_compute) c.compute[unit] = from_sheet(peak);
    c.bandwidth[MemoryLevel::dram] = from_sheet(spec.memory_bandwidth);
    if (spec.l2_bandwidth) c.bandwidth[MemoryLevel::l2] = from_sheet(*spec.l2_bandwidth);
    return c;
}

/// Ceilings from a measured calibration profile; any ceiling the profile lacks (a probe that did not
/// run, a unit not probed) is taken from `spec`, the datasheet of the same GPU, and says so.
/// The latency floor is the measured back-to-back launch interval: the least time a kernel occupies
/// the stream when the host keeps it fed.
[[nodiscard]] inline Ceilings ceilings_from_calibration(const Calibration& cal, const GpuSpec& spec) {
    Ceilings c = ceilings_from_spec(spec);
    const std::string measured = provenance(cal);
    c.origin = measured;
    c.kind = cal.derivation ? "derived" : "measured";
    for (ComputeUnit u : all_compute_units) {
        if (auto rate = compute_ceiling(cal, u)) {
            std::string how;
            for (const auto* table : {&cal.probe_ceilings, &cal.library_ceilings}) {
                auto it = table->find(u);
                if (it != table->end() && it->second.flops_per_second.median == rate->value()) {
                    how = it->second.instruction;
                }
            }
            c.compute[u] = {*rate, measured + (how.empty() ? "" : " (" + how + ")")};
        }
    }
    for (MemoryLevel m : all_memory_levels) {
        if (auto bw = bandwidth_ceiling(cal, m)) c.bandwidth[m] = {*bw, measured + " (best access pattern)"};
    }
    if (auto floor = launch_interval(cal)) {
        c.launch_latency = Sourced<Seconds>{*floor, measured + " (back-to-back launch interval)"};
    }
    for (const auto& [u, s] : c.compute) {
        if (s.source.rfind("datasheet", 0) == 0) c.origin = measured + "; datasheet where not measured";
    }
    return c;
}

/// What a kernel does, as far as the roofline cares.
struct KernelWork {
    Flops flops{0};                        ///< arithmetic work (FMA = 2)
    ComputeUnit unit = ComputeUnit::fp32;  ///< the unit that does it
    Bytes dram_bytes{0};                   ///< bytes read plus bytes written in device memory
    std::optional<Bytes> l2_bytes;         ///< bytes through L2, where known (>= dram_bytes)
};

/// Which ceiling sets a kernel's time.
enum class Bound { compute, dram, l2, latency, communication };

[[nodiscard]] constexpr std::string_view to_string(Bound b) {
    switch (b) {
        case Bound::compute: return "compute";
        case Bound::dram: return "dram";
        case Bound::l2: return "l2";
        case Bound::latency: return "latency";
        case Bound::communication: return "communication";
    }
    return "?";
}

/// A kernel's roofline time and the time each ceiling alone would allow.
struct RooflineTime {
    Seconds time{0};
    Bound bound = Bound::compute;
    Seconds compute_time{0};  ///< flops / compute ceiling
    Seconds dram_time{0};     ///< dram_bytes / DRAM bandwidth
    Seconds l2_time{0};       ///< l2_bytes / L2 bandwidth (0 when not given)
    Seconds latency_time{0};  ///< the latency floor (0 when the ceilings have none)

    /// Achieved rate at that time.
    [[nodiscard]] FlopsPerSecond attained(const KernelWork& k) const {
        return time.value() > 0 ? k.flops / time : FlopsPerSecond(0);
    }
};

/// t = max(F / P_unit, B_dram / BW_dram, B_l2 / BW_l2, t_latency): the roofline with the
/// ceilings overlapping perfectly (Williams, Waterman, Patterson 2009, plus an L2 and a latency term).
[[nodiscard]] inline RooflineTime roofline_time(const KernelWork& k, const Ceilings& c) {
    if (k.flops.value() < 0 || k.dram_bytes.value() < 0 || (k.l2_bytes && k.l2_bytes->value() < 0)) {
        throw std::invalid_argument("kernel FLOPs and bytes must not be negative");
    }
    RooflineTime r;
    r.compute_time = k.flops.value() > 0 ? k.flops / c.rate(k.unit) : Seconds(0);
    r.dram_time = k.dram_bytes.value() > 0 ? k.dram_bytes / c.rate(MemoryLevel::dram) : Seconds(0);
    if (k.l2_bytes && k.l2_bytes->value() > 0) r.l2_time = *k.l2_bytes / c.rate(MemoryLevel::l2);
    if (c.launch_latency) r.latency_time = c.launch_latency->value;

    r.time = r.compute_time;
    r.bound = Bound::compute;
    if (r.dram_time > r.time) { r.time = r.dram_time; r.bound = Bound::dram; }
    if (r.l2_time > r.time) { r.time = r.l2_time; r.bound = Bound::l2; }
    if (r.latency_time > r.time) { r.time = r.latency_time; r.bound = Bound::latency; }
    return r;
}

/// Attainable rate at arithmetic intensity I against one memory level: min(P, I · BW).
[[nodiscard]] inline FlopsPerSecond attainable(FlopsPerByte intensity, ComputeUnit unit, MemoryLevel level,
                                               const Ceilings& c) {
    const FlopsPerSecond memory_roof = intensity * c.rate(level);
    return min(c.rate(unit), memory_roof);
}

/// Ridge point: the intensity where compute and memory ceilings meet, I* = P / BW.
[[nodiscard]] inline FlopsPerByte ridge_point(ComputeUnit unit, MemoryLevel level, const Ceilings& c) {
    return c.rate(unit) / c.rate(level);
}

}  // namespace roofsim
