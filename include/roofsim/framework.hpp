#pragma once
/// The framework profile: PyTorch's host-side costs measured on one machine by
/// calibrate/torch_framework_probe.py (per-layer forward and backward dispatch, the fixed cost of
/// backward(), optimizer steps), and the host costs of a step derived from it.

#include <roofsim/detail/json_file.hpp>
#include <roofsim/detail/json_read.hpp>
#include <roofsim/detail/stats.hpp>
#include <roofsim/cost.hpp>
#include <roofsim/lower.hpp>
#include <roofsim/sim.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace roofsim {

/// Which of a profile's optimizer.step() figures: inside a training step (measured with the CPU's
/// caches flushed before each step, where the profile has such figures), or steps back to back.
enum class OptimizerTiming { in_training_step, back_to_back };

/// One measured host cost, in seconds, with its spread and method.
struct FrameworkFigure {
    double seconds = 0, min = 0, max = 0;
    int samples = 0;
    std::string method;
    /// The figure as measured, where `seconds` was put on the profile's host speed (at_host_speed).
    std::optional<double> measured_seconds{};
    /// The fastest sample as measured (`min` in the document; `min` above may be lowered to `seconds`).
    double measured_min = 0;
    /// A layer's backward chain figure: the autograd nodes one layer adds (backward_walk_node).
    std::optional<double> backward_nodes_per_layer{};
    /// An optimizer_*_foreach_launches figure: each foreach op that launches kernels, in order, and
    /// the fraction of optimizer.step()'s host time before its first launch.
    std::vector<OptimizerLaunch> launches{};
};

/// GPU time of one PyTorch op at a calibration shape (forward, and backward through autograd.grad).
struct OpTiming {
    Graph graph;            ///< the op as a one-layer graph
    std::string precision;  ///< the mode key it ran under
    double forward_seconds = 0;
    double backward_seconds = 0;
};

/// A convolution layer's host cost at one size (a conv_host_* figure): its family ("k3", "k1"), the
/// precision class it ran in ("fp32", "fp32_strict", "bf16", "autocast"), the part ("forward",
/// "forward_backward"), the FLOPs of one pass, and the figure on the profile's host speed.
struct ConvHostFigure {
    std::string family, mode, part;
    double flops = 0;
    Seconds seconds{0};
};

struct FrameworkProfile {
    std::string device_name;  ///< "NVIDIA H200"
    std::string gpu_key;      ///< "h200-sxm"
    std::string torch_version;
    std::string date_utc;
    std::map<std::string, FrameworkFigure, std::less<>> figures;  ///< by key, found by any string
    std::vector<OpTiming> op_timings;
    /// Calls per op-timing measurement (settings.op_timing_calls): the probe times that many forward
    /// calls inside one torch.autocast context, 1 where the profile does not say.
    int op_timing_calls = 1;
    std::vector<ConvHostFigure> conv_host;  ///< the conv_host_* figures, by size
    /// The host speed every host figure is put on: seconds per tiny torch.add of the probe's canary
    /// (its run's median; "host_speed" in the document). Profiles from before the canary have none,
    /// and their figures are as measured.
    std::optional<Seconds> host_reference_seconds_per_op;
    /// The speed of autograd's device thread the layers' backward figures are put on: seconds per node
    /// of the probe's backward canary (the backward() of a chain of 100 tiny multiplications; its
    /// run's median). A model's backward() follows it, not the canary: over seven processes of
    /// BERT-base b32 on the H200 (2026-12-01), correlation 0.91 with it, 0.34 with the canary.
    /// Profiles from before the fifty-ninth run of 2026-12-01 have none.
    std::optional<Seconds> host_backward_reference_seconds_per_node;
    /// The 10th and 90th percentiles of the probe's canaries over its run ("canary_p10_seconds",
    /// "canary_p90_seconds"): how steady the host was while it measured. Absent where not recorded.
    std::optional<Seconds> host_canary_p10, host_canary_p90;

    /// The host speed the host figures describe, seconds per tiny add: the canary's reference, else the
    /// eager_op_add figure (the same loop, longer), else nothing.
    [[nodiscard]] std::optional<Seconds> host_seconds_per_op() const {
        if (host_reference_seconds_per_op) return host_reference_seconds_per_op;
        return seconds("eager_op_add");
    }

    /// "measured on NVIDIA H200 with torch 2.11.0+cu130, 2026-11-29, torch_framework_probe.py"
    [[nodiscard]] std::string provenance() const {
        return "measured on " + device_name + " with torch " + torch_version + ", " + date_utc.substr(0, 10) +
               ", calibrate/torch_framework_probe.py";
    }

    [[nodiscard]] std::optional<Seconds> seconds(std::string_view key) const {
        auto it = figures.find(key);
        if (it == figures.end()) return std::nullopt;
        return Seconds(it->second.seconds);
    }

    /// A figure's fastest sample as measured, not put on the host speed (FrameworkFigure::measured_min).
    [[nodiscard]] std::optional<Seconds> fastest_seconds(std::string_view key) const {
        auto it = figures.find(key);
        if (it == figures.end()) return std::nullopt;
        return Seconds(it->second.measured_min);
    }
};

namespace detail {
/// A figure on the profile's host speed: each pass's figure x reference / the canary of its
/// measurement (the host's speed then, seconds per tiny add), the median over the passes. The probe
/// records each figure's canary per pass; a shared host's speed changes by a third or more within a
/// probe's run, and on one H200 run (2026-11-30) this put the passes' figures closer together: their
/// spread (max - min over median) fell from 0.36 to 0.30 at the median figure, 0.89 to 0.73 at the
/// 90th percentile. Nothing where the figure has no canary (GPU-paced figures, older profiles).
/// `canary_key` names the passes' canaries of the speed `reference_seconds_per_op` is of: the
/// backward canary's (pass_host_backward_canary_seconds) for a layer's backward figure.
[[nodiscard]] inline std::optional<double> at_host_speed(const JsonCursor& fig, double reference_seconds_per_op,
                                                         const char* canary_key = "pass_host_canary_seconds") {
    std::vector<double> values;
    if (fig.has("pass_seconds") && fig.has(canary_key)) {
        const JsonCursor passes = fig.at("pass_seconds"), canaries = fig.at(canary_key);
        if (passes.array_size() != canaries.array_size()) canaries.fail("expected one canary per pass");
        for (std::size_t i = 0; i < passes.array_size(); ++i) {
            // a pass of a fit's intercept (..._per_step) may come out below 0 by its noise
            values.push_back(passes.at(i).number() * reference_seconds_per_op / canaries.at(i).positive());
        }
    } else if (canary_key == std::string_view("pass_host_canary_seconds") && fig.has("host_canary_seconds") && !fig.has("pass_seconds")) {
        values.push_back(fig.at("seconds").non_negative() * reference_seconds_per_op / fig.at("host_canary_seconds").positive());
    }
    if (values.empty()) return std::nullopt;
    return std::max(0.0, quantile(std::move(values), 0.5));
}
}  // namespace detail

/// Parses a framework profile (kind "roofsim-framework-profile", schema_version 1). Host figures
/// with canaries are put on the run's host speed (detail::at_host_speed).
[[nodiscard]] inline FrameworkProfile framework_profile_from_json(const nlohmann::json& document, std::string_view origin) {
    using detail::JsonCursor;
    const JsonCursor root(document, std::string(origin), "");
    if (root.at("schema_version").integer() != 1) root.at("schema_version").fail("unsupported version (expected 1)");
    if (root.at("kind").string() != "roofsim-framework-profile") root.at("kind").fail("expected \"roofsim-framework-profile\"");
    FrameworkProfile f;
    f.device_name = root.at("device").at("name").string();
    f.gpu_key = root.at("device").at("key").string();
    f.torch_version = root.at("software").at("torch").string();
    f.date_utc = root.at("date_utc").string();
    if (root.has("host_speed") && !root.at("host_speed").json().is_null()) {
        const JsonCursor speed = root.at("host_speed");
        f.host_reference_seconds_per_op = Seconds(speed.at("reference_seconds_per_op").positive());
        if (speed.has("canary_p10_seconds") && speed.has("canary_p90_seconds")) {
            f.host_canary_p10 = Seconds(speed.at("canary_p10_seconds").positive());
            f.host_canary_p90 = Seconds(speed.at("canary_p90_seconds").positive());
            if (*f.host_canary_p90 < *f.host_canary_p10) speed.at("canary_p90_seconds").fail("expected at least canary_p10_seconds");
        }
        if (speed.has("backward_reference_seconds_per_node")) {
            f.host_backward_reference_seconds_per_node = Seconds(speed.at("backward_reference_seconds_per_node").positive());
        }
    }
    const JsonCursor figures = root.at("figures");
    for (const auto& item : figures.object().items()) {
        const std::string& key = item.key();
        const JsonCursor fig = figures.at(key);
        FrameworkFigure x;
        x.seconds = fig.at("seconds").non_negative();
        x.min = fig.at("min").number();
        x.measured_min = x.min;
        x.max = fig.at("max").number();
        x.samples = static_cast<int>(fig.at("samples").positive_integer());
        x.method = fig.at("method").string();
        if (!(x.min <= x.seconds && x.seconds <= x.max)) fig.fail("expected min <= seconds <= max");
        if (f.host_reference_seconds_per_op) {
            // a layer's backward figure runs on autograd's device thread: on that thread's speed, the
            // backward canary's, where the profile has it; any other on the canary's
            std::optional<double> at_speed;
            if (f.host_backward_reference_seconds_per_node && key.starts_with("layer_backward_")) {
                at_speed = detail::at_host_speed(fig, f.host_backward_reference_seconds_per_node->value(),
                                                 "pass_host_backward_canary_seconds");
            }
            if (!at_speed) at_speed = detail::at_host_speed(fig, f.host_reference_seconds_per_op->value());
            if (at_speed) {
                x.measured_seconds = x.seconds;
                x.seconds = *at_speed;
                x.min = std::min(x.min, x.seconds);
                x.max = std::max(x.max, x.seconds);
            }
        }
        if (fig.has("backward_nodes_per_layer")) x.backward_nodes_per_layer = fig.at("backward_nodes_per_layer").non_negative();
        if (key.ends_with("_launches") && fig.has("ops")) {
            const JsonCursor ops = fig.at("ops");
            for (std::size_t i = 0; i < ops.array_size(); ++i) {
                const JsonCursor op = ops.at(i);
                const double fraction = op.at("fraction").non_negative();
                if (fraction > 1) op.at("fraction").fail("expected a fraction of the step's host time (0 to 1)");
                if (!x.launches.empty() && fraction < x.launches.back().fraction) op.at("fraction").fail("expected the ops in launch order");
                x.launches.push_back(OptimizerLaunch{op.at("op").string(), fraction});
            }
        }
        if (fig.has("conv_host")) {
            const JsonCursor c = fig.at("conv_host");
            ConvHostFigure h{c.at("family").string(), c.at("mode").string(), c.at("part").string(), c.at("flops").positive(),
                             Seconds(x.seconds)};
            if (h.family != "k3" && h.family != "k1") c.at("family").fail("expected \"k3\" or \"k1\"");
            if (h.part != "forward" && h.part != "forward_backward") c.at("part").fail("expected \"forward\" or \"forward_backward\"");
            f.conv_host.push_back(std::move(h));
        }
        f.figures[key] = x;
    }
    if (root.has("settings") && root.at("settings").has("op_timing_calls")) {
        f.op_timing_calls = static_cast<int>(root.at("settings").at("op_timing_calls").positive_integer());
    }
    if (root.has("op_timings")) {
        const JsonCursor list = root.at("op_timings");
        for (std::size_t i = 0; i < list.array_size(); ++i) {
            const JsonCursor t = list.at(i);
            OpTiming o;
            o.graph = detail::one_layer_graph_from_json(t);
            o.precision = t.at("precision").string();
            if (!precision_mode_from_key(o.precision)) t.at("precision").fail("unknown precision mode");
            o.forward_seconds = t.at("forward_gpu_seconds").at("seconds").positive();
            o.backward_seconds = t.at("backward_gpu_seconds").at("seconds").non_negative();  // a view's: none
            f.op_timings.push_back(std::move(o));
        }
    }
    return f;
}

[[nodiscard]] inline FrameworkProfile load_framework_profile(const std::filesystem::path& path) {
    return framework_profile_from_json(detail::read_json_file(path), path.filename().string());
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
    const auto is_16_bit = [](DType d) { return d == DType::bf16 || d == DType::f16; };
    const auto lowered = [](const OpTiming& t) {
        LoweringOptions o;
        o.precision = *precision_mode_from_key(t.precision);
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
            const Seconds modelled = kernel_cost(k, plain).time;
            if (modelled.value() > 0) ctx.op_factor[{"cast", k.phase, is_16_bit(k.dtype)}].push_back({std::nullopt, std::nullopt, measured(t, k.phase) / modelled.value()});
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
        Seconds modelled[2] = {Seconds(0), Seconds(0)}, others[2] = {Seconds(0), Seconds(0)};
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
                modelled[i] += kernel_cost(k, plain).time;
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
            // what the op's own kernels took: the measurement less the other kernels, at least a tenth of it
            const double own = std::max(measured(t, phase) - others[i].value(), 0.1 * measured(t, phase));
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
    ctx.op_factor_source = f.provenance() + " (op timings)";
}

/// The cost context of a GPU with its calibration and the framework profile measured with it: the
/// per-op efficiencies and the gap between back-to-back kernels apply only when the profile was
/// measured on this GPU model.
[[nodiscard]] inline CostContext make_cost_context(const GpuSpec& spec, const Calibration* calibration,
                                                   const FrameworkProfile* framework) {
    CostContext ctx = make_cost_context(spec, calibration);
    if (framework && framework->gpu_key == spec.key && !framework->op_timings.empty()) calibrate_op_factors(ctx, *framework);
    if (framework && framework->gpu_key == spec.key) {
        if (const auto gap = framework->seconds("gpu_kernel_gap")) {
            ctx.kernel_gap = *gap;
            ctx.kernel_gap_source = framework->provenance() + " (gpu_kernel_gap)";
        }
    }
    return ctx;
}

/// Host time of one optimizer.step() over `parameter_tensors` tensors: per_step + tensors x per_param
/// (the probe's fit over 64 and 512 tiny parameters), for the optimizer as it runs (SGD with weight
/// decay runs one more foreach op, which allocates a new gradient list), measured with the CPU's
/// caches flushed before each step (`_cold`: in a training step the forward and backward run between
/// two optimizer steps). A profile without those figures (before the twenty-third run of 2026-11-30)
/// gives the back-to-back ones, then SGD's without weight decay. Adam reads AdamW's figures.
/// OptimizerTiming::back_to_back: the back-to-back figures alone (steps timed one after another).
[[nodiscard]] inline Seconds optimizer_step_host_seconds(const FrameworkProfile& f, const OptimizerOptions& optimizer,
                                                         std::size_t parameter_tensors,
                                                         OptimizerTiming timing = OptimizerTiming::in_training_step) {
    if (optimizer.kind == OptimizerKind::none) return Seconds(0);
    const bool sgd = optimizer.kind == OptimizerKind::sgd;
    const std::string_view impl = optimizer.fused ? "_fused" : "_foreach";
    const std::string_view sgd_kinds[] = {"optimizer_sgd_wd", "optimizer_sgd"}, adamw_kinds[] = {"optimizer_adamw"};
    const std::span<const std::string_view> kinds =
        !sgd ? std::span<const std::string_view>(adamw_kinds)
             : std::span<const std::string_view>(sgd_kinds).subspan(optimizer.weight_decay ? 0 : 1);
    std::string key;  // "<kind><impl><when>_per_step", then "..._per_param": one buffer, no allocation per key
    key.reserve(64);
    for (const std::string_view kind : kinds) {
        for (const std::string_view when : {std::string_view("_cold"), std::string_view()}) {
            if (timing == OptimizerTiming::back_to_back && !when.empty()) continue;
            key.assign(kind).append(impl).append(when);
            const std::size_t base = key.size();
            const auto per_step = f.seconds(key.append("_per_step"));
            key.resize(base);
            const auto per_param = f.seconds(key.append("_per_param"));
            if (per_step && per_param) return *per_step + static_cast<double>(parameter_tensors) * *per_param;
        }
    }
    return Seconds(0);
}

/// Where optimizer.step() launches each foreach op's kernels within its host time, from the profile's
/// optimizer_<kind>_foreach_launches figure (the probe's, on 512 tiny parameters under torch.profiler):
/// SGD with or without weight decay as it runs, Adam on AdamW's (the same ops less the decay's
/// multiply). Empty for the fused optimizers (one kernel per launch at the end of their host work,
/// not measured) and for a profile without the figure (before the eighty-seventh run of 2026-12-03).
[[nodiscard]] inline std::vector<OptimizerLaunch> optimizer_launches(const FrameworkProfile& f, const OptimizerOptions& optimizer) {
    if (optimizer.kind == OptimizerKind::none || optimizer.fused) return {};
    const std::string_view key = optimizer.kind != OptimizerKind::sgd ? "optimizer_adamw_foreach_launches"
                                 : optimizer.weight_decay            ? "optimizer_sgd_wd_foreach_launches"
                                                                     : "optimizer_sgd_foreach_launches";
    const auto it = f.figures.find(key);
    return it != f.figures.end() ? it->second.launches : std::vector<OptimizerLaunch>{};
}

/// Host time of optimizer.zero_grad(set_to_none=True) over `parameter_tensors` tensors, as a training
/// step calls it before its forward: per_step + tensors x per_param (the probe's fit over 64 and 512
/// parameters holding gradients of 256 and 1 Mi elements alternately; it launches nothing: each
/// gradient is dropped and the caching allocator takes its block back), with the CPU's caches as the
/// previous step's optimizer.step() leaves them (the back-to-back figures). Zero without an optimizer,
/// or from a profile without the figures (before the eightieth run of 2026-12-02).
[[nodiscard]] inline Seconds zero_grad_host_seconds(const FrameworkProfile& f, const OptimizerOptions& optimizer,
                                                    std::size_t parameter_tensors) {
    if (optimizer.kind == OptimizerKind::none) return Seconds(0);
    const auto per_step = f.seconds("zero_grad_per_step");
    const auto per_param = f.seconds("zero_grad_per_param");
    if (!per_step || !per_param) return Seconds(0);
    return max(Seconds(0), *per_step + static_cast<double>(parameter_tensors) * *per_param);
}

/// The precision class a convolution's host path differs by in `mode` (the conv_host figures' "mode"):
/// PyTorch's default flags (cuDNN may use TF32: fp32 and tf32), TF32 off, bfloat16 weights, autocast.
[[nodiscard]] constexpr std::string_view conv_host_mode(PrecisionMode mode) {
    switch (mode) {
        case PrecisionMode::fp32:
        case PrecisionMode::tf32: return "fp32";
        case PrecisionMode::fp32_strict: return "fp32_strict";
        case PrecisionMode::bf16: return "bf16";
        case PrecisionMode::amp_bf16:
        case PrecisionMode::amp_fp16: return "autocast";
    }
    return "fp32";
}

/// How a convolution's host cost grows with its size in `mode`, from the profile's conv_host figures:
/// at each size, forward(size) - forward(tiny) for the forward, and the same of (forward + backward
/// - forward) for the backward, the tiny size being the family's smallest; a negative growth (the
/// figures' noise) counts as none. Empty where the profile has no such figures (before 2026-12).
[[nodiscard]] inline ConvHostGrowth conv_host_growth_from_framework(const FrameworkProfile& f, PrecisionMode mode) {
    ConvHostGrowth growth;
    const std::string_view wanted = conv_host_mode(mode);
    struct Size {
        double flops = 0;
        std::optional<Seconds> forward, forward_backward;
    };
    std::vector<Size> sizes[2];  // k1, k3: the profile's few sizes of each, in the order met
    for (const ConvHostFigure& c : f.conv_host) {
        if (c.mode != wanted) continue;
        const int family = c.family == "k1" ? 0 : c.family == "k3" ? 1 : -1;
        if (family < 0) continue;
        auto& of_family = sizes[family];
        auto size = std::find_if(of_family.begin(), of_family.end(), [&c](const Size& s) { return s.flops == c.flops; });
        if (size == of_family.end()) size = of_family.insert(of_family.end(), Size{c.flops, {}, {}});
        (c.part == "forward" ? size->forward : size->forward_backward) = c.seconds;
    }
    for (int family = 0; family < 2; ++family) {
        auto& of_family = sizes[family];
        std::sort(of_family.begin(), of_family.end(), [](const Size& a, const Size& b) { return a.flops < b.flops; });
        std::vector<ConvHostGrowth::Point> points;
        std::optional<std::pair<Seconds, Seconds>> tiny;  // forward, backward
        for (const Size& s : of_family) {
            if (!s.forward || !s.forward_backward) continue;
            const Seconds forward = *s.forward, backward = *s.forward_backward - *s.forward;
            if (!tiny) tiny = std::pair{forward, backward};
            points.push_back({s.flops, max(Seconds(0), forward - tiny->first), max(Seconds(0), backward - tiny->second)});
        }
        if (points.size() >= 2) (family == 0 ? growth.kernel_1x1 : growth.other) = std::move(points);
    }
    return growth;
}

namespace detail {

/// host_costs_from_framework, with the per-op figures of `ops` alone where given (all a prediction
/// of a graph of those ops looks up, the lowering's ops(); the add layer's give the defaults);
/// `single_layer`: the graph is one layer, of the first op in `ops`.
[[nodiscard]] inline HostCosts host_costs_from_framework(const FrameworkProfile& f, PrecisionMode mode,
                                                         const OptimizerOptions& optimizer, std::size_t parameter_tensors,
                                                         const std::vector<std::string_view>* ops, bool single_layer = false) {
    HostCosts h;
    const bool amp = rules_for(mode).autocast;
    constexpr std::string_view suffix = "_autocast", forward_prefix = "layer_forward_", backward_prefix = "layer_backward_";
    const auto wanted = [ops](std::string_view op) { return !ops || op == "add" || std::find(ops->begin(), ops->end(), op) != ops->end(); };
    if (ops) {
        // The few ops wanted: each one's figures found by their keys, layer_forward_<op>[_autocast] and
        // layer_backward_<op>[_autocast] (the same figures the scan below takes of them).
        std::string key;
        const auto add_figures_of = [&](std::string_view op) {
            if (!amp && op.ends_with(suffix)) return;  // its keys would be autocast figures
            for (const auto& [prefix, table] : {std::pair{forward_prefix, &h.forward}, std::pair{backward_prefix, &h.backward}}) {
                key.assign(prefix).append(op).append(amp ? suffix : std::string_view());
                if (auto it = f.figures.find(key); it != f.figures.end()) {
                    table->emplace(op, Seconds(it->second.seconds));
                    if (table == &h.backward && it->second.backward_nodes_per_layer) {
                        h.backward_nodes.emplace(op, *it->second.backward_nodes_per_layer);
                    }
                }
            }
        };
        add_figures_of("add");
        for (const std::string_view op : *ops) add_figures_of(op);
    } else {
        for (auto it = f.figures.lower_bound("layer_"); it != f.figures.end() && it->first.starts_with("layer_"); ++it) {
            std::string_view base = it->first;
            if (base.ends_with(suffix) != amp) continue;
            if (amp) base.remove_suffix(suffix.size());
            const Seconds seconds(it->second.seconds);
            // the profile's keys are distinct, so are the ops taken from them
            if (base.starts_with(forward_prefix)) h.forward.add_new(base.substr(forward_prefix.size()), seconds);
            if (base.starts_with(backward_prefix)) {
                const std::string_view op = base.substr(backward_prefix.size());
                h.backward.add_new(op, seconds);
                if (it->second.backward_nodes_per_layer) h.backward_nodes.add_new(op, *it->second.backward_nodes_per_layer);
            }
        }
    }
    // A view's backward node launches nothing: its one-at-a-time figure is the difference of two
    // noisy times (often 0); the chain slope of view nodes measures it (the engine's cost of a node
    // plus one view op), whatever the autocast state.
    if (const auto view = f.seconds("backward_node_view")) {
        for (const std::string_view op : {"reshape", "flatten"}) {
            if (!wanted(op)) continue;
            h.backward[op] = *view;
            h.backward_nodes[op] = 1;  // the chain of view nodes: one a view
        }
    }
    // backward() walks its whole graph before it runs a node: the walk per node, which the chain
    // figures hold spread over their nodes, is charged before the first backward kernel
    // (simulate: backward_walk_share)
    h.backward_walk_per_node = f.seconds("backward_walk_node").value_or(Seconds(0));
    // A copy AccumulateGrad dispatches and launches on its own: one eager op (a tiny add, back to back).
    if (const auto eager = f.seconds("eager_op_add"); eager && wanted(accumulate_grad_clone_host_op)) {
        h.backward[accumulate_grad_clone_host_op] = *eager;
    }
    h.default_forward = h.forward.count("add") ? h.forward.at("add") : Seconds(0);
    h.default_backward = h.backward.count("add") ? h.backward.at("add") : Seconds(0);
    h.backward_call = f.seconds("backward_call").value_or(Seconds(0));
    h.synchronize = f.seconds("cuda_synchronize_idle").value_or(Seconds(0));
    const std::string_view amp_suffix = amp ? suffix : std::string_view();
    // A graph of one op (a layer on its own) pays the per-call costs that the per-layer figures, chain
    // slopes, leave out: the op's steady-state figure is the whole host cost of one forward + backward,
    // and what the per-layer figures do not account for is this step's per-call cost.
    // (A layer without a bias is looked up by its bias-free figures, which the lowering lists among the ops.)
    if (single_layer && ops && !ops->empty()) {
        // the layer's markers cost another host op's figures where the lowering lists one of its
        // variants (a layer without a bias, attention on a named backend)
        const std::string_view graph_op = ops->front();
        const auto variant = std::find_if(ops->begin() + 1, ops->end(), [graph_op](std::string_view op) {
            return op != graph_op && graph_op_of_host_op(op) == graph_op;
        });
        const std::string_view host_op = variant != ops->end() ? *variant : graph_op;
        auto steady = f.seconds(concat("layer_steady_", host_op, amp_suffix));
        if (!steady) steady = f.seconds(concat("layer_steady_", graph_op, amp_suffix));
        if (steady) {
            // the steady figure holds the layer's autocast input casts too (its input is float32)
            if (graph_op != autocast_cast_host_op) {
                h.forward[autocast_cast_host_op] = Seconds(0);
                h.backward[autocast_cast_host_op] = Seconds(0);
            }
            const auto figure = [host_op](const auto& table, Seconds fallback) {
                const Seconds* s = find_host_figure(table, host_op);
                return s ? *s : fallback;
            };
            const Seconds layer = figure(h.forward, h.default_forward) + figure(h.backward, h.default_backward);
            h.backward_call = max(Seconds(0), *steady - layer);
        }
    }
    // Where the per-call cost falls: before the first backward kernel (host ahead of the GPU) or
    // after the last one (overlapping the GPU's tail), in the shares measured on an idle GPU.
    const auto before = f.seconds(concat("backward_call_before_first_kernel", amp_suffix));
    const auto after = f.seconds(concat("backward_call_after_last_kernel", amp_suffix));
    if (before && after && (*before + *after).value() > 0) {
        const double share_before = *before / (*before + *after);
        h.backward_call_end = h.backward_call * (1 - share_before);
        h.backward_call = h.backward_call * share_before;
    }
    h.optimizer_step = optimizer_step_host_seconds(f, optimizer, parameter_tensors);
    h.optimizer_launches = optimizer_launches(f, optimizer);
    h.zero_grad = zero_grad_host_seconds(f, optimizer, parameter_tensors);
    h.conv_growth = conv_host_growth_from_framework(f, mode);
    h.per_kernel = Seconds(0);
    h.source = f.provenance();
    return h;
}

}  // namespace detail

/// Host costs of a step from a framework profile: each layer's forward and backward dispatch by
/// its graph op (the autocast figures under amp modes), one backward() call (split into the part
/// before its first kernel and the part after its last), optimizer.zero_grad() before the step and
/// optimizer.step() each as its fixed cost plus a cost per parameter tensor (Adam uses AdamW's figures: both run
/// torch.optim.adam's _multi_tensor_adam / _fused_adam). Ops without a figure take the add layer's.
/// A convolution pass adds its growth over the tiny layer by size (conv_host_growth_from_framework).
[[nodiscard]] inline HostCosts host_costs_from_framework(const FrameworkProfile& f, PrecisionMode mode,
                                                         const OptimizerOptions& optimizer, std::size_t parameter_tensors) {
    return detail::host_costs_from_framework(f, mode, optimizer, parameter_tensors, nullptr);
}

/// Host costs measured with another GPU's host are used unchanged; the source says so.
inline void note_host_of_other_gpu(HostCosts& h, const FrameworkProfile& f, const CostContext& ctx) {
    if (f.gpu_key != ctx.ceilings.gpu_key) h.source = "derived: host costs " + h.source + ", taken for this GPU's host unchanged";
}

}  // namespace roofsim
