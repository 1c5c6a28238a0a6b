#pragma once
/// Per-op efficiencies from a framework profile's op timings: each timed op lowered and costed
/// by the models, its measured GPU time over the modelled one (CostContext::op_factor).

#include <roofsim/cost/kernel_cost.hpp>
#include <roofsim/lower/lower.hpp>
#include <roofsim/profile/framework.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace roofsim {

/// Attention dropout's cost (key "sdpa_dropout"): for each sdpa timing with dropout, its time over the
/// timing without dropout at the same shape, backend, causality, phase and precision class (both points'
/// model is the same, so their factors' ratio is that of the measured times): the Philox random numbers
/// the fused kernels draw for every score, forward and again backward. A fused attention kernel that the
/// kernel model prices (fit without dropout) takes it as its factor (op_factor).
inline void calibrate_attention_dropout(CostContext& ctx) {
    const auto same_shape = [](const AttentionDims& a, const AttentionDims& b) {
        return a.batch == b.batch && a.heads == b.heads && a.seq_q == b.seq_q && a.seq_kv == b.seq_kv &&
               a.head_dim == b.head_dim && a.causal == b.causal && a.backend == b.backend;
    };
    std::map<std::tuple<std::string, Phase, bool>, std::vector<OpFactorPoint>> dropout;
    for (const auto& [key, points] : ctx.op_factor) {
        const auto& [op, phase, low] = key;
        if (op != "sdpa") continue;
        for (const auto& with : points) {
            if (!with.attention || with.attention->dropout <= 0) continue;
            for (const auto& without : points) {
                if (without.attention && without.attention->dropout <= 0 && same_shape(*with.attention, *without.attention) &&
                    without.factor > 0) {
                    dropout[{"sdpa_dropout", phase, low}].push_back({std::nullopt, with.attention, with.factor / without.factor});
                    break;
                }
            }
        }
    }
    for (auto& [key, points] : dropout) ctx.op_factor[key] = std::move(points);
}

/// Fills ctx.op_factor from the profile's op timings: for each op, phase and precision class, the
/// measured GPU time over roofsim's modelled GPU time of the same layer (its kernels' costs summed,
/// with no factor), one point per timing, with the reduction shape of a normalization, the shape
/// of an attention or else the bytes of one of its kernels (op_factor_at picks among them by shape). Ops measured only in float32 or only in
/// 16-bit apply to that class alone. Casts are calibrated first, from the cast op's timings, each
/// phase by its kernel's source dtype; the casts inside another op's timing (autocast's, of its
/// inputs and their gradients) are then charged at that efficiency and the op's factor covers the rest.
/// Adds come second: elementwise loops over mixed dtypes from the timings made of nothing else (a
/// bfloat16 + float32 add), and same-dtype adds, whose efficiency every gradient sum takes; both are
/// charged the same way inside other ops' timings (GPT-2's tanh GELU).
/// The probe times its forward calls inside one autocast context, and autocast casts a float32 leaf
/// that requires grad (each input of a timing, each parameter) to 16 bits once per context and reuses
/// the copy (autocast_mode.cpp, cached_cast): such a forward cast counts once per op_timing_calls calls.
inline void calibrate_op_factors(CostContext& ctx, const FrameworkProfile& f) {
    ctx.op_factor.clear();
    CostContext plain = ctx;  // the cost models alone: no per-op factor, no floor
    plain.kernel_floor = Seconds(0);
    // what a factor scales: a memory-bound kernel's work without its fixed time (kernel_cost)
    CostContext work = plain;
    work.memory_fixed_time = Seconds(0);
    const auto is_16_bit = [](DType d) { return d == DType::bf16 || d == DType::f16; };
    const auto lowered = [](const OpTiming& t) {
        LoweringOptions o;
        o.precision = t.precision;
        o.optimizer.kind = OptimizerKind::none;
        return lower(t.graph, o);
    };
    const auto measured = [](const OpTiming& t, Phase phase) {
        return phase == Phase::forward ? t.forward_seconds : t.backward_seconds;
    };
    // in a one-layer timing every forward float32 -> 16-bit cast (written in fewer bytes than it
    // reads) is of a leaf that requires grad: an input or a parameter
    const auto is_autocast_cached_cast = [](const Kernel& k) {
        return is_cast(k) && k.phase == Phase::forward && k.dtype == DType::f32 && k.bytes_written < k.bytes_read;
    };
    for (const auto& t : f.op_timings) {
        if (t.graph.layers.front().op != "cast") continue;
        for (const Kernel& k : lowered(t).kernels.kernels) {
            if (!is_cast(k) || k.phase == Phase::optimizer) continue;
            const Seconds modelled = kernel_cost(k, work).time;
            const double own = std::max(measured(t, k.phase) - plain.memory_fixed_time.value(), 0.1 * measured(t, k.phase));
            if (modelled.value() > 0) ctx.op_factor[{"cast", k.phase, is_16_bit(k.dtype)}].push_back({std::nullopt, std::nullopt, own / modelled.value()});
        }
    }
    CostContext with_casts = plain;  // the casts' own efficiency (then the adds'), nothing else
    with_casts.op_factor = ctx.op_factor;
    // a timing whose every kernel is a mixed-dtype elementwise loop (the probe's bfloat16 + float32 add)
    const auto all_mixed = [](const LoweredStep& step) {
        bool any = false;
        for (const Kernel& k : step.kernels.kernels) {
            if (k.kind == KernelKind::host_only || k.phase == Phase::optimizer) continue;
            if (!is_mixed_elementwise(k)) return false;
            any = true;
        }
        return any;
    };
    const auto calibrate = [&](const OpTiming& t, const LoweredStep& step) {
        // the op the timing calibrates: the layer's, or for a depthwise convolution or a mixed-dtype
        // loop its own
        std::string op = t.graph.layers.front().op;
        for (const Kernel& k : step.kernels.kernels) {
            if (is_depthwise_conv(k)) op = factor_op(k);  // depthwise_conv2d, or depthwise_conv1d
        }
        if (all_mixed(step)) op = "elementwise_mixed";
        Seconds modelled[2] = {Seconds(0), Seconds(0)}, others[2] = {Seconds(0), Seconds(0)}, fixed[2] = {Seconds(0), Seconds(0)};
        Bytes own_bytes[2] = {Bytes(0), Bytes(0)};
        double own_size[2] = {0, 0};  // factor_size summed over the op's own kernels
        int own_kernels[2] = {0, 0};
        bool low = false;
        std::optional<NormDims> norm;  // the reduction shape it was timed at, for normalizations
        std::optional<AttentionDims> attention;
        for (const Kernel& k : step.kernels.kernels) {
            if (k.kind == KernelKind::host_only || k.phase == Phase::optimizer) continue;
            const int i = k.phase == Phase::forward ? 0 : 1;
            const bool measured_apart = is_cast(k) || is_mixed_elementwise(k) || is_gradient_sum(k);
            const bool own = factor_op(k) == op || (k.source_op == op && !measured_apart);
            // the op's own kernels are modelled plain; the rest (casts, mixed-dtype loops and gradient
            // sums at their measured efficiency, a depthwise layer's bias gradient plain) is what the
            // measurement holds besides them
            if (own) {
                modelled[i] += kernel_cost(k, work).time;
                if (is_memory_bound_kind(k.kind)) fixed[i] += plain.memory_fixed_time;
                own_bytes[i] += k.bytes();
                own_size[i] += factor_size(k);
                ++own_kernels[i];
            } else if (is_autocast_cached_cast(k)) {
                others[i] += kernel_cost(k, with_casts).time / static_cast<double>(f.op_timing_calls);
            } else {
                others[i] += kernel_cost(k, measured_apart ? with_casts : plain).time;
            }
            if (const auto* d = std::get_if<NormDims>(&k.dims); d && own) norm = *d;
            if (const auto* a = std::get_if<AttentionDims>(&k.dims); a && own) attention = *a;
            if ((k.source_op == op || factor_op(k) == op) && is_16_bit(k.dtype)) low = true;
        }
        for (const Phase phase : {Phase::forward, Phase::backward}) {
            const int i = phase == Phase::forward ? 0 : 1;
            if (modelled[i].value() <= 0 || measured(t, phase) <= 0) continue;
            // what the op's own kernels' work took: the measurement less the other kernels and the own
            // kernels' fixed times, at least a tenth of it
            const double own = std::max(measured(t, phase) - others[i].value() - fixed[i].value(), 0.1 * measured(t, phase));
            OpFactorPoint point{norm, attention, own / modelled[i].value()};
            if (op == "sum" && own_bytes[i].value() > 0) point.seconds_per_byte = own / own_bytes[i].value();
            // the size it was timed at, for ops timed at several (op_factor_at)
            if (!norm && !attention && own_kernels[i] > 0) point.size = own_size[i] / own_kernels[i];
            ctx.op_factor[{op, phase, low}].push_back(point);
            // a column sum is timed forward and runs as bias gradients in the backward: the same kernel
            if (op == "sum") ctx.op_factor[{op, Phase::backward, low}].push_back(point);
            // a mixed-dtype loop is the same kernel whichever operand is the 16-bit one (the kernel's
            // dtype is its first operand's), and is looked up forward in either pass (factor_phase)
            if (op == "elementwise_mixed") ctx.op_factor[{op, phase, !low}].push_back(point);
        }
    };
    // the adds (mixed-dtype and not) before the ops whose timings hold such loops
    std::vector<std::pair<const OpTiming*, LoweredStep>> adds, rest;
    for (const auto& t : f.op_timings) {
        if (t.graph.layers.front().op == "cast") continue;
        LoweredStep step = lowered(t);
        const bool an_add = all_mixed(step) || t.graph.layers.front().op == "add";
        (an_add ? adds : rest).emplace_back(&t, std::move(step));
    }
    for (const auto& [t, step] : adds) calibrate(*t, step);
    with_casts.op_factor = ctx.op_factor;
    for (const auto& [t, step] : rest) calibrate(*t, step);
    calibrate_attention_dropout(ctx);
    ctx.op_factor_source = f.provenance() + " (op timings)";
}

/// The cost context of a GPU with its calibration and the framework profile measured with it: the
/// per-op efficiencies and the gap between back-to-back kernels apply only when the profile was
/// measured on this GPU model.
/// A framework profile's figures into `ctx`: the per-op efficiencies of its op timings and the GPU's gap
/// between eager kernels.
inline void apply_framework_profile(CostContext& ctx, const FrameworkProfile& framework) {
    if (framework.op_timings.empty()) {
        throw std::runtime_error("framework profile of " + framework.device_name + " (" + framework.date_utc.substr(0, 10) +
                                 "): no op timings (calibrate/torch_framework_probe.py measures them)");
    }
    calibrate_op_factors(ctx, framework);
    ctx.kernel_gap = framework.required("gpu_kernel_gap");
    ctx.kernel_gap_source = framework.provenance() + " (gpu_kernel_gap)";
}

[[nodiscard]] inline CostContext make_cost_context(const GpuSpec& spec, const Calibration* calibration,
                                                   const FrameworkProfile* framework) {
    CostContext ctx = make_cost_context(spec, calibration);
    if (framework && framework->gpu_key == spec.key) apply_framework_profile(ctx, *framework);
    return ctx;
}

}  // namespace roofsim
