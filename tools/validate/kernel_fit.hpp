#pragma once
/// Fits the GEMM kernel model's parameters (gemm_model.hpp) of each compute unit to the fit half of a
/// kernel corpus: least squares in log time, by coordinate search over each parameter's grid, three
/// rounds. The test half is never read.

#include <validate/kernel_corpus.hpp>

#include <array>
#include <cmath>
#include <map>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

namespace roofsim {

namespace detail {

/// The sum of squared log errors of `params` over one unit's fit-half GEMMs (the model's time times the
/// operand layout's factor of `ctx`, against the measured time).
inline double gemm_fit_error(const GemmModel& base, const GemmKernelParams& params, ComputeUnit unit,
                             const std::vector<std::pair<GemmDims, double>>& cases, const CostContext& ctx) {
    GemmModel g = base;
    g.set_params(params);
    double sum = 0;
    for (const auto& [d, seconds] : cases) {
        const double t = gemm_model_time(g, d, unit).value() * gemm_layout_factor(ctx, unit, d);
        const double e = std::log(t / seconds);
        sum += e * e;
    }
    return sum;
}

/// A timed call priced as t = other + t0 + max(f x compute, memory): the rest of the call as predicted,
/// the GEMM model's waves of its equivalent GEMM, its bytes at DRAM bandwidth, and the measured time.
struct ScaledGemmPoint {
    double other, compute, memory, seconds;
};

/// t0 (0 to 30 µs by 0.5) and f (0.01 to 10, steps of 4 %) with the least sum of squared log errors.
inline ScaledGemmParams fit_scaled_gemm(const std::vector<ScaledGemmPoint>& points) {
    ScaledGemmParams best;
    double best_error = 1e300;
    for (double f = 0.01; f <= 10; f *= 1.04) {
        for (int half_us = 0; half_us <= 60; ++half_us) {
            const double t0_us = half_us * 0.5;
            double sum = 0;
            for (const auto& p : points) {
                const double e = std::log((p.other + t0_us * 1e-6 + std::max(p.compute * f, p.memory)) / p.seconds);
                sum += e * e;
            }
            if (sum < best_error) { best_error = sum; best = {f, Seconds(t0_us * 1e-6)}; }
        }
    }
    return best;
}

/// A convolution pass's parameters, by coordinate search: t0 and f as fit_scaled_gemm finds them with the
/// transposes' DRAM time (tau x memory) part of `other`, then tau (0 to 6 by 0.25: up to each tensor read and written three times) with t0 and f held,
/// three rounds from tau = 0.
inline ConvKernelParams fit_conv(const std::vector<ScaledGemmPoint>& base) {
    ConvKernelParams best;
    std::vector<ScaledGemmPoint> points = base;
    const auto with_tau = [&](double tau) {
        for (std::size_t i = 0; i < points.size(); ++i) points[i].other = base[i].other + tau * base[i].memory;
    };
    for (int round = 0; round < 3; ++round) {
        with_tau(best.transposes);
        best.scaled = fit_scaled_gemm(points);
        double best_error = 1e300;
        for (int quarter = 0; quarter <= 24; ++quarter) {
            double sum = 0;
            for (const auto& q : base) {
                const double t = q.other + best.scaled.fixed_time.value() + std::max(q.compute * best.scaled.factor, q.memory) +
                                 quarter * 0.25 * q.memory;
                sum += std::log(t / q.seconds) * std::log(t / q.seconds);
            }
            if (sum < best_error) { best_error = sum; best.transposes = quarter * 0.25; }
        }
    }
    return best;
}

}  // namespace detail

/// The kernel-model profile fitted to the fit half of `corpus` (its GPU's chip; every unit it timed).
[[nodiscard]] inline KernelModelProfile fit_kernel_model(const KernelCorpus& corpus, const std::string& corpus_name) {
    const GpuSpec& spec = gpu_or_throw(corpus.gpu_key);
    // the context without a kernel model: ceilings, DRAM and layout factors of the GPU's calibration
    const CostContext ctx = make_cost_context(spec, find_builtin_calibration(spec.key), static_cast<const KernelModelProfile*>(nullptr));
    std::map<ComputeUnit, std::vector<std::pair<GemmDims, double>>> by_unit;
    for (const auto& c : corpus.cases) {
        if (c.family != "gemm" || c.half != "fit") continue;
        const Kernel& k = c.kernels.front();
        by_unit[k.unit].push_back({std::get<GemmDims>(k.dims), c.measured.value()});
    }
    KernelModelProfile out;
    out.chip = spec.chip.value;
    std::string counts;
    for (const auto& [unit, cases] : by_unit) {
        const GemmModel& base = ctx.gemm.at(unit);
        GemmKernelParams p;
        p.aligned_efficiency = 0.8;
        p.unaligned_efficiency = 0.3;
        p.fixed_time = Seconds(3e-6);
        p.split_time = Seconds(2e-6);
        using Field = std::pair<double*, std::vector<double>>;
        std::vector<double> efficiencies, intensities{8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 85, 96, 110, 128};
        for (int i = 2; i <= 48; ++i) efficiencies.push_back(i * 0.025);
        double fixed_us = 3, split_us = 2;
        std::vector<double> fixed_grid, split_grid{0, 0.5, 1, 1.5, 2, 3, 4, 6, 8};  // microseconds
        for (int i = 2; i <= 32; ++i) fixed_grid.push_back(i * 0.25);
        const std::array<Field, 7> fields{Field{&p.aligned_efficiency, efficiencies},
                                          Field{&p.unaligned_efficiency, efficiencies},
                                          Field{&p.saturating_intensity, intensities},
                                          Field{&p.k_half, {0, 8, 16, 32, 48, 64, 96, 128, 192, 256}},
                                          Field{&p.min_split_depth, {8, 16, 32, 64, 128, 192, 256, 384, 512, 768, 1024, 2048}},
                                          Field{&fixed_us, fixed_grid},
                                          Field{&split_us, split_grid}};
        const auto error = [&] {
            GemmKernelParams q = p;
            q.fixed_time = Seconds(fixed_us * 1e-6);
            q.split_time = Seconds(split_us * 1e-6);
            return detail::gemm_fit_error(base, q, unit, cases, ctx);
        };
        for (int round = 0; round < 3; ++round) {
            for (const auto& [value, grid] : fields) {
                double best = *value, best_error = error();
                for (double v : grid) {
                    *value = v;
                    const double e = error();
                    if (e < best_error) { best_error = e; best = v; }
                }
                *value = best;
            }
        }
        p.fixed_time = Seconds(fixed_us * 1e-6);
        p.split_time = Seconds(split_us * 1e-6);
        out.gemm[unit] = p;
        counts += (counts.empty() ? "" : ", ") + std::to_string(cases.size()) + " " + std::string(to_string(unit));
    }
    // Convolutions: per unit, pass and class, t0, f and tau of t = t0 + max(f x the implicit GEMM's waves
    // under the fitted GEMM model, the tensors' bytes B at DRAM bandwidth) + tau B / DRAM, over a grid.
    std::map<std::tuple<ComputeUnit, ConvPass, ConvClass>, std::vector<detail::ScaledGemmPoint>> conv_cases;
    for (const auto& c : corpus.cases) {
        if (c.family != "conv" || c.half != "fit") continue;
        const Kernel& k = c.kernels.front();
        const auto it = out.gemm.find(k.unit);
        if (it == out.gemm.end()) continue;
        GemmModel g = ctx.gemm.at(k.unit);
        g.set_params(it->second);
        const auto& d = std::get<ConvDims>(k.dims);
        const GemmChoice choice = gemm_choice(g, detail::implicit_gemm(d), detail::gemm_element_bytes(k.unit));
        conv_cases[{k.unit, d.pass, conv_class(d)}].push_back(
            {0, choice.compute.value(), (detail::conv_tensor_bytes(d, detail::gemm_element_bytes(k.unit)) / g.dram).value(),
             c.measured.value()});
    }
    std::size_t conv_count = 0;
    for (const auto& [key, points] : conv_cases) {
        out.conv[key] = detail::fit_conv(points);
        conv_count += points.size();
    }
    // Memory-bound kernels: t0, 0 to 4 µs by 0.05, with the least sum of squared log errors over the
    // elementwise family (one pass over their bytes and nothing else: norms and pooling add their own
    // reductions and index work), each t0 priced in a context built with it (the framework profile's
    // per-op efficiencies are measured against the model with that t0).
    std::size_t memory_count = 0;
    {
        double best_error = 1e300;
        for (int step = 0; step <= 80; ++step) {
            KernelModelProfile trial = out;
            trial.memory_fixed_time = Seconds(step * 0.05e-6);
            const CostContext t = kernel_corpus_context(corpus, &trial);
            double sum = 0;
            memory_count = 0;
            for (const auto& c : corpus.cases) {
                if (c.half != "fit" || c.family != "elementwise") continue;
                const double e = std::log(predicted_time(c, t) / c.measured);
                sum += e * e;
                ++memory_count;
            }
            if (memory_count == 0) break;
            if (sum < best_error) { best_error = sum; out.memory_fixed_time = trial.memory_fixed_time; }
        }
    }
    // Fused attention: per unit, backend and phase, t0 and f of the attention kernel's t = t0 + max(f x
    // the waves of its tile products under the fitted GEMM model, its bytes at DRAM bandwidth); the
    // case's other kernels (the backward's preprocessing pass) and the gaps as predicted.
    const CostContext full = kernel_corpus_context(corpus, &out);
    std::map<std::tuple<ComputeUnit, AttentionBackend, bool>, std::vector<detail::ScaledGemmPoint>> attention_cases;
    for (const auto& c : corpus.cases) {
        if (c.family != "attention" || c.half != "fit") continue;
        double other = predicted_time(c, full).value();
        for (const Kernel& k : c.kernels) {
            const auto* a = std::get_if<AttentionDims>(&k.dims);
            if (!a || k.kind != KernelKind::attention) continue;
            const auto it = out.gemm.find(k.unit);
            if (it == out.gemm.end()) continue;
            other -= kernel_cost(k, full).time.value();
            GemmModel g = ctx.gemm.at(k.unit);
            g.set_params(it->second);
            const auto [gemm, count] = detail::attention_gemms(*a, k.backward_pass);
            const GemmChoice one = gemm_choice(g, gemm, detail::gemm_element_bytes(k.unit));
            attention_cases[{k.unit, a->backend, k.backward_pass}].push_back(
                {other, one.compute.value() * count, (k.bytes() / g.dram).value(), c.measured.value()});
        }
    }
    std::size_t attention_count = 0;
    for (const auto& [key, points] : attention_cases) {
        out.attention[key] = detail::fit_scaled_gemm(points);
        attention_count += points.size();
    }
    // A unit the corpus did not time whose ceiling agrees with a timed one's within 5 % runs the same
    // kernels (fp16 and bf16 tensor cores on Ampere and Hopper): what the corpus did not time of it
    // (GEMMs, a convolution class, an attention backend) takes that unit's parameters.
    const auto same_rate = [&](ComputeUnit a, ComputeUnit b) {
        return ctx.ceilings.has(a) && ctx.ceilings.has(b) && std::abs(ctx.ceilings.rate(a) / ctx.ceilings.rate(b) - 1) < 0.05;
    };
    std::string borrowed;
    if (same_rate(ComputeUnit::fp16_tensor, ComputeUnit::bf16_tensor)) {
        std::size_t taken = 0;
        if (out.gemm.count(ComputeUnit::bf16_tensor) != 0) taken += out.gemm.emplace(ComputeUnit::fp16_tensor, out.gemm.at(ComputeUnit::bf16_tensor)).second;
        for (const auto& [key, params] : std::map(out.conv)) {
            if (std::get<0>(key) == ComputeUnit::bf16_tensor) taken += out.conv.emplace(std::tuple{ComputeUnit::fp16_tensor, std::get<1>(key), std::get<2>(key)}, params).second;
        }
        for (const auto& [key, params] : std::map(out.attention)) {
            if (std::get<0>(key) == ComputeUnit::bf16_tensor) {
                taken += out.attention.emplace(std::tuple{ComputeUnit::fp16_tensor, std::get<1>(key), std::get<2>(key)}, params).second;
            }
        }
        if (taken > 0) borrowed = "; fp16-tensor takes bf16-tensor's where the corpus did not time it (their ceilings agree within 5 %)";
    }
    out.provenance = "fitted by `roofsim fit-kernels` to the fit half of " + corpus_name + " (" + corpus.provenance + "; GEMM calls: " +
                     counts + "; convolution calls: " + std::to_string(conv_count) +
                     "; attention calls: " + std::to_string(attention_count) + "; elementwise calls: " +
                     std::to_string(memory_count) + "), least squares in log time" + borrowed;
    return out;
}

}  // namespace roofsim
