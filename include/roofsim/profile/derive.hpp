#pragma once
/// Derived profiles: what roofsim assumes of a GPU it has no measurement of. A derived calibration is
/// built from a measured calibration of another GPU (the reference) and both GPUs' datasheets by the
/// written rules below (docs/derivation.md gives each rule's reasoning); the kernel model of a family
/// without one is the reference family's, carried over. Every derived figure names its rule, the
/// profile lists the rules it used (Calibration::derivation), and provenance() says "derived".

#include <roofsim/gpu.hpp>
#include <roofsim/profile/calibration.hpp>
#include <roofsim/profile/kernel_model.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace roofsim {

/// The rules, one line each, by their tag (docs/derivation.md).
namespace derivation_rule {
inline constexpr const char* dram =
    "D1 DRAM: each access pattern's bandwidth is the target's datasheet bandwidth x the fraction of its datasheet bandwidth "
    "the reference reached (the same fraction for every memory type: no GDDR6/6X or HBM2/2e GPU is measured)";
inline constexpr const char* l2 =
    "D2 L2: the reference's measured L2 bandwidth x (SMs x boost clock) of the target over the reference's (L2 slices "
    "feed SMs at a fixed width per clock)";
inline constexpr const char* curves =
    "D3 bandwidth curves: each point's working set x the L2 size ratio; its bandwidth x D1's ratio beyond the reference's "
    "L2-to-DRAM step, x D2's below it";
inline constexpr const char* compute =
    "D4 compute: each unit's ceiling is the target's datasheet peak x the fraction of its datasheet peak the reference "
    "measured for that unit (library or probe, the better); a unit the reference did not measure has none";
inline constexpr const char* launch =
    "D5 launch: the reference's launch latency, interval and GPU interval, unchanged (the same driver and host assumed)";
inline constexpr const char* memcpy =
    "D6 host-device copies: the reference's curves x the PCIe datasheet bandwidth ratio";
inline constexpr const char* not_carried =
    "D7 not carried: the GEMM and convolution sweeps, intensity curves and collectives (their times are the reference "
    "GPU's own); the kernel model prices every GEMM and convolution";
inline constexpr const char* kernel_model =
    "K1 kernel model: a family without its own takes the reference family's parameters unchanged (efficiencies are "
    "fractions of the unit's ceiling; fixed times in seconds)";
inline constexpr const char* framework =
    "F1 framework: an op the reference ran slower than its bytes at its bandwidth (measured / modelled f > 1) is held "
    "back by its SMs: on the target f' = max(1, f x DRAM ratio / SMs x clock ratio); the kernel gap and host costs are "
    "the reference's";
}  // namespace derivation_rule

namespace detail {
/// A datasheet figure a rule needs, checked: an error naming the GPU, the figure and the rule.
inline double required_figure(double value, const GpuSpec& spec, const std::string& figure, const std::string& rule) {
    if (!(value > 0) || !std::isfinite(value)) {
        throw std::runtime_error("cannot derive a profile for " + spec.key + ": its datasheet has no " + figure + " (rule " +
                                 rule + " needs it)");
    }
    return value;
}

inline Measurement scaled(const Measurement& m, double factor, const std::string& rule) {
    return Measurement{m.median * factor, m.min * factor, m.max * factor, m.samples, "derived by " + rule + " from: " + m.method};
}

inline std::vector<BandwidthPoint> scaled_curve(const std::vector<BandwidthPoint>& curve, double size_ratio, double step,
                                                double below_step, double beyond_step) {
    std::vector<BandwidthPoint> out;
    out.reserve(curve.size());
    for (const auto& p : curve) {
        out.push_back({p.working_set_bytes * size_ratio, p.bytes_per_second * (p.working_set_bytes < step ? below_step : beyond_step)});
    }
    return out;
}
}  // namespace detail

/// The ratios the rules scale the reference by (target over reference), each from the datasheets.
struct DerivationRatios {
    double dram = 1;     ///< D1: datasheet DRAM bandwidth
    double l2 = 1;       ///< D2: SMs x boost clock
    double l2_size = 1;  ///< D3: L2 size
    double pcie = 1;     ///< D6: PCIe bandwidth
};

[[nodiscard]] inline DerivationRatios derivation_ratios(const GpuSpec& target, const GpuSpec& reference) {
    const auto figure = [](const GpuSpec& s, double v, const char* name, const char* rule) {
        return detail::required_figure(v, s, name, rule);
    };
    DerivationRatios r;
    r.dram = figure(target, target.memory_bandwidth.value.value(), "memory bandwidth", "D1") /
             figure(reference, reference.memory_bandwidth.value.value(), "memory bandwidth", "D1");
    r.l2 = figure(target, target.sm_count.value * target.boost_clock.value.value(), "SM count x boost clock", "D2") /
           figure(reference, reference.sm_count.value * reference.boost_clock.value.value(), "SM count x boost clock", "D2");
    r.l2_size = figure(target, target.l2_size.value.value(), "L2 size", "D3") /
                figure(reference, reference.l2_size.value.value(), "L2 size", "D3");
    r.pcie = figure(target, target.pcie_bandwidth.value.value(), "PCIe bandwidth", "D6") /
             figure(reference, reference.pcie_bandwidth.value.value(), "PCIe bandwidth", "D6");
    return r;
}

/// The calibration roofsim assumes for `target`, derived from `reference` (measured on a GPU whose
/// datasheet is `reference_spec`) by rules D1-D7. Throws where a rule needs a datasheet figure that
/// is missing, or where `reference` is itself derived.
[[nodiscard]] inline Calibration derive_calibration(const GpuSpec& target, const GpuSpec& reference_spec, const Calibration& reference) {
    namespace rule = derivation_rule;
    if (reference.derivation) throw std::invalid_argument("derive_calibration: the reference profile is itself derived");
    if (reference.device.gpu_key != reference_spec.key) {
        throw std::invalid_argument("derive_calibration: the reference profile was measured on " + reference.device.gpu_key +
                                    ", not " + reference_spec.key);
    }
    const DerivationRatios k = derivation_ratios(target, reference_spec);
    Calibration c;
    c.device.name = target.name;
    c.device.gpu_key = target.key;
    c.device.sm_count = target.sm_count.value;
    c.device.l2_bytes = target.l2_size.value.value();
    c.device.sm_clock_max_hz = target.boost_clock.value.value();
    c.device.date_utc = reference.device.date_utc;
    c.device.tool_version = reference.device.tool_version;
    c.device.command_line = "derived from " + reference_spec.key;
    Derivation& d = c.derivation.emplace();
    d.reference_key = reference_spec.key;
    d.reference = provenance(reference);

    // D1, D2: the ceilings of each memory level
    for (const auto& [level, patterns] : reference.bandwidth) {
        if (level != MemoryLevel::dram && level != MemoryLevel::l2) continue;
        const bool dram = level == MemoryLevel::dram;
        for (const auto& [pattern, m] : patterns) {
            c.bandwidth[level][pattern] = detail::scaled(m, dram ? k.dram : k.l2, dram ? "D1" : "D2");
        }
    }
    // D3: the ramps, and the step between their L2 and DRAM parts
    if (reference.l2_to_dram_step_bytes) {
        const double step = *reference.l2_to_dram_step_bytes;
        for (const auto& [pattern, curve] : reference.bandwidth_curve) {
            c.bandwidth_curve[pattern] = detail::scaled_curve(curve, k.l2_size, step, k.l2, k.dram);
        }
        c.l2_to_dram_step_bytes = step * k.l2_size;
    }
    // D4: compute ceilings, each unit by the fraction of its datasheet peak the reference reached
    for (const auto& [unit, peak] : target.peak_compute) {
        const auto reached = compute_ceiling(reference, unit);
        const auto sheet = reference_spec.peak(unit);
        if (!reached || !sheet) continue;
        const double fraction = reached->value() / sheet->value();
        const auto* table = &reference.library_ceilings;
        auto it = table->find(unit);
        if (it == table->end() || it->second.flops_per_second.median != reached->value()) {
            table = &reference.probe_ceilings;
            it = table->find(unit);
        }
        ComputeCeiling ceiling;
        ceiling.flops_per_second = detail::scaled(it->second.flops_per_second, peak.value.value() / sheet->value(), "D4");
        ceiling.instruction = "derived (D4): " + std::to_string(fraction).substr(0, 5) + " of the datasheet peak, as " +
                              it->second.instruction + " reached on " + reference_spec.key;
        c.library_ceilings[unit] = ceiling;
    }
    // D5: launch figures
    c.launch_latency_seconds = reference.launch_latency_seconds;
    c.launch_interval_seconds = reference.launch_interval_seconds;
    c.launch_gpu_interval_seconds = reference.launch_gpu_interval_seconds;
    // D6: host-device copies
    for (const auto& [kind, figure] : reference.memcpy) {
        MemcpyFigure f;
        f.bytes_per_second = detail::scaled(figure.bytes_per_second, k.pcie, "D6");
        for (const auto& p : figure.curve) f.curve.push_back({p.working_set_bytes, p.bytes_per_second * k.pcie});
        c.memcpy[kind] = f;
    }
    d.rules = {rule::dram, rule::l2, rule::curves, rule::compute, rule::launch, rule::memcpy, rule::not_carried};
    validate(c);
    return c;
}

/// The kernel model `target`'s family runs with when it has none of its own: `reference`'s parameters,
/// carried over unchanged by rule K1, under the target's chip.
[[nodiscard]] inline KernelModelProfile derive_kernel_model(const GpuSpec& target, const KernelModelProfile& reference) {
    KernelModelProfile k = reference;
    k.chip = target.chip.value;
    k.provenance = "derived (K1): " + reference.chip + "'s parameters carried over unchanged; " + reference.provenance;
    return k;
}

}  // namespace roofsim
