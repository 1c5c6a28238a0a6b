#pragma once
/// The framework profile: PyTorch's host-side costs measured on one machine by
/// calibrate/torch_framework_probe.py (per-layer forward and backward dispatch, the fixed cost of
/// backward(), optimizer steps), and its GPU op timings; its type and its loader.

#include <roofsim/detail/json_file.hpp>
#include <roofsim/detail/json_read.hpp>
#include <roofsim/detail/stats.hpp>
#include <roofsim/graph.hpp>
#include <roofsim/optimizer.hpp>
#include <roofsim/precision_mode.hpp>
#include <roofsim/units.hpp>

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
#include <nlohmann/json.hpp>

namespace roofsim {

/// Where a foreach optimizer's step launches one of its ops' kernels: the op ("aten::_foreach_lerp_")
/// and the fraction of optimizer.step()'s host time before its first launch.
struct OptimizerLaunch {
    std::string op;
    double fraction = 0;
};

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
    PrecisionMode precision = PrecisionMode::fp32;  ///< the mode it ran under
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
    /// (its run's median; "host_speed" in the document). None where the probe could take no canary
    /// (host_speed null): its figures are as measured.
    std::optional<Seconds> host_reference_seconds_per_op;
    /// The speed of autograd's device thread the layers' backward figures are put on: seconds per node
    /// of the probe's backward canary (the backward() of a chain of 100 tiny multiplications; its
    /// run's median). A model's backward() follows it, not the canary: over seven processes of
    /// BERT-base b32 on the H200 (2026-12-01), correlation 0.91 with it, 0.34 with the canary.
    /// None where the probe took no backward canaries.
    std::optional<Seconds> host_backward_reference_seconds_per_node;
    /// The 10th and 90th percentiles of the probe's canaries over its run ("canary_p10_seconds",
    /// "canary_p90_seconds"): how steady the host was while it measured. Absent where not recorded.
    std::optional<Seconds> host_canary_p10, host_canary_p90;

    /// The host speed the host figures describe, seconds per tiny add: the canary's reference, where
    /// the probe took canaries.
    [[nodiscard]] std::optional<Seconds> host_seconds_per_op() const { return host_reference_seconds_per_op; }

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

    /// A figure the prediction cannot do without: an error naming it and the profile where it is missing.
    [[nodiscard]] Seconds required(std::string_view key) const {
        if (const auto s = seconds(key)) return *s;
        throw std::runtime_error("framework profile of " + device_name + " (" + date_utc.substr(0, 10) + "): no figure '" +
                                 std::string(key) + "' (calibrate/torch_framework_probe.py measures it)");
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
/// 90th percentile. Nothing where the figure has no canary (GPU-paced figures).
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
        // the figure is a time (>= 0); its spread is finite (number() refuses others) but may reach
        // below 0, where a fit's intercept comes out below 0 in a pass by its noise
        x.min = fig.at("min").number();
        x.measured_min = x.min;
        x.max = fig.at("max").number();
        x.samples = fig.at("samples").positive_int32();
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
        f.op_timing_calls = root.at("settings").at("op_timing_calls").positive_int32();
    }
    if (root.has("op_timings")) {
        const JsonCursor list = root.at("op_timings");
        for (std::size_t i = 0; i < list.array_size(); ++i) {
            const JsonCursor t = list.at(i);
            OpTiming o;
            o.graph = detail::one_layer_graph_from_json(t);
            const auto mode = precision_mode_from_key(t.at("precision").string());
            if (!mode) t.at("precision").fail("unknown precision mode");
            o.precision = *mode;
            o.forward_seconds = t.at("forward_gpu_seconds").at("seconds").positive();
            o.backward_seconds = t.at("backward_gpu_seconds").at("seconds").non_negative();  // a view's: none
            f.op_timings.push_back(std::move(o));
        }
    }
    // a profile is its measurements: without figures or op timings it would price every host cost at zero
    if (f.figures.empty() && f.op_timings.empty()) {
        figures.fail("no figures and no op_timings (a framework profile holds what the framework probe measured)");
    }
    return f;
}

[[nodiscard]] inline FrameworkProfile load_framework_profile(const std::filesystem::path& path) {
    return framework_profile_from_json(detail::read_json_file(path), path.filename().string());
}

}  // namespace roofsim
