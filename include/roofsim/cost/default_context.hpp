#pragma once
/// The cost context roofsim predicts with by default for a GPU: its built-in measured calibration where
/// there is one; else a profile derived from a measured one by the written rules of profile/derive.hpp,
/// with the kernel model of its family or, without one, the reference family's (rule K1), and the
/// reference's framework figures (rule F1); else, with no measured profile at all, its datasheet.

#include <roofsim/cost/op_factor_calibration.hpp>
#include <roofsim/gpu.hpp>
#include <roofsim/profile/builtin.hpp>
#include <roofsim/profile/derive.hpp>
#include <roofsim/profile/framework.hpp>

#include <optional>

namespace roofsim {

/// The measured profile a GPU without one is derived from: among `measured`, one of the same
/// architecture, else the first; nullptr when there is none.
[[nodiscard]] inline const Calibration* derivation_reference(const GpuSpec& spec, const std::vector<Calibration>& measured) {
    const Calibration* first = nullptr;
    for (const auto& c : measured) {
        const GpuSpec* s = find_gpu(c.device.gpu_key);
        if (!s || c.derivation) continue;
        if (!first) first = &c;
        if (s->architecture.value == spec.architecture.value) return &c;
    }
    return first;
}

/// The cost context of `spec` derived from `reference` (a measured calibration of another GPU): rules
/// D1-D7 for the calibration, K1 for the kernel model where the family has none of its own, and F1:
/// the framework profile's per-op efficiencies apply when it was measured with the reference's GPU.
[[nodiscard]] inline CostContext make_derived_cost_context(const GpuSpec& spec, const Calibration& reference,
                                                           const FrameworkProfile* framework) {
    const GpuSpec& reference_spec = gpu_or_throw(reference.device.gpu_key);
    Calibration derived = derive_calibration(spec, reference_spec, reference);
    const KernelModelProfile* kernels = find_builtin_kernel_model(spec.chip.value);
    std::optional<KernelModelProfile> carried;
    if (!kernels) {
        if (const KernelModelProfile* ref = find_builtin_kernel_model(reference_spec.chip.value)) {
            carried = derive_kernel_model(spec, *ref);
            kernels = &*carried;
            derived.derivation->rules.push_back(derivation_rule::kernel_model);
        }
    }
    const bool framework_carries = framework && framework->gpu_key == reference_spec.key;
    if (framework_carries) derived.derivation->rules.push_back(derivation_rule::framework);
    CostContext ctx = make_cost_context(spec, &derived, kernels);
    if (framework && framework->gpu_key == spec.key) {
        apply_framework_profile(ctx, *framework);
    } else if (framework_carries) {
        // F1: each op's measured / modelled time f is taken on the reference's own context, where it
        // was measured. An op slower than its bytes at the reference's bandwidth (f > 1) is held back by
        // the SMs (reductions, index math, occupancy), not by DRAM: its time scales with SMs x clock, and
        // on the target it is the longer of that and its bytes at the target's bandwidth,
        // f' = max(1, f x (DRAM ratio / SM ratio)). A column sum's measured seconds per byte scales
        // with SMs x clock the same way.
        CostContext at_reference = make_cost_context(reference_spec, &reference, find_builtin_kernel_model(reference_spec.chip.value));
        apply_framework_profile(at_reference, *framework);
        const DerivationRatios k = derivation_ratios(spec, reference_spec);
        ctx.op_factor = std::move(at_reference.op_factor);
        for (auto& [key, points] : ctx.op_factor) {
            for (auto& point : points) {
                if (point.factor > 1) point.factor = std::max(1.0, point.factor * k.dram / k.l2);
                point.seconds_per_byte /= k.l2;
            }
        }
        ctx.op_factor_source = "derived (F1) from " + at_reference.op_factor_source;
        ctx.kernel_gap = at_reference.kernel_gap;
        ctx.kernel_gap_source = "derived (F1) from " + at_reference.kernel_gap_source;
    }
    return ctx;
}

/// The default cost context of `spec` with the framework profile `framework` (may be null): measured,
/// else derived from the built-in measured profile of derivation_reference, else the datasheet's.
[[nodiscard]] inline CostContext make_default_cost_context(const GpuSpec& spec, const FrameworkProfile* framework) {
    if (const Calibration* measured = find_builtin_calibration(spec.key)) return make_cost_context(spec, measured, framework);
    if (const Calibration* reference = derivation_reference(spec, builtin_calibrations())) {
        return make_derived_cost_context(spec, *reference, framework);
    }
    return make_cost_context(spec, nullptr, framework);
}

}  // namespace roofsim
