#pragma once
/// Accuracy against real PyTorch: reads the measurements of tools/validate/measure_pytorch.py
/// (data/validation/*.json), rebuilds each layer case as a one-layer graph and each model case
/// from the zoo, predicts them, and reports the errors. The measurements only check the model.

#include <roofsim/detail/json_file.hpp>
#include <roofsim/detail/json_read.hpp>
#include <roofsim/detail/stats.hpp>
#include <roofsim/predict.hpp>
#include <roofsim/profile/builtin.hpp>
#include <roofsim/zoo/zoo.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace roofsim {

/// A step's phases each timed on its own, as a measurement that synchronizes before and after each
/// does (measure_pytorch.py's forward, forward + backward and optimizer timings of a model case).
struct StandalonePhases {
    Seconds forward{0}, forward_backward{0}, optimizer{0};
};

/// The step's phases each simulated on its own, from an idle GPU: its forward kernels alone, its
/// forward and backward kernels, its optimizer kernels alone (no optimizer: 0); none after a
/// zero_grad(), the optimizer's host time `optimizer_back_to_back` (steps one after another, as the
/// validation times it on its own).
[[nodiscard]] inline StandalonePhases standalone_phases(const KernelList& kernels, const CostContext& ctx, HostCosts host,
                                                        Seconds optimizer_back_to_back) {
    host.zero_grad = Seconds(0);
    HostCosts optimizer_host = host;
    optimizer_host.optimizer_step = optimizer_back_to_back;
    const auto time_of = [&](auto keep, const HostCosts& h) {
        KernelList part;
        part.model = kernels.model;
        part.precision = kernels.precision;
        for (const Kernel& k : kernels.kernels) {
            if (keep(k.phase)) part.kernels.push_back(k);
        }
        return part.kernels.empty() ? Seconds(0) : simulate(part, ctx, h).step_time;
    };
    return {time_of([](Phase p) { return p == Phase::forward; }, host), time_of([](Phase p) { return p != Phase::optimizer; }, host),
            time_of([](Phase p) { return p == Phase::optimizer; }, optimizer_host)};
}

/// A prediction's phases each on its own (standalone_phases): the optimizer's host time the
/// profile's back-to-back figure at the prediction's host scale, or (no profile) the prediction's own.
[[nodiscard]] inline StandalonePhases standalone_phases(const Prediction& p, const CostContext& ctx, const FrameworkProfile* framework,
                                                        const OptimizerOptions& optimizer, double host_time_scale) {
    const Seconds back_to_back =
        framework ? optimizer_step_host_seconds(*framework, optimizer, p.parameter_tensors, OptimizerTiming::back_to_back) * host_time_scale
                  : p.host.optimizer_step;
    return standalone_phases(p.kernels, ctx, p.host, back_to_back);
}

/// One measured case, rebuilt for prediction.
struct ValidationCase {
    std::string id;         ///< "linear/b8x1024x768->3072/fp32"
    std::string family;     ///< the op ("linear") or model ("resnet50")
    std::string precision;  ///< the mode key
    bool model = false;     ///< a whole training step or inference forward (else one layer's forward + backward)
    bool in_zoo = true;     ///< model cases: the zoo builds it (else only an exported IR predicts it)
    Graph graph;
    LoweringOptions options;
    double measured_seconds = 0;           ///< layer: forward + backward; model: the step
    /// Layer cases measured in steady state (repetitions back to back, no synchronize between):
    /// compared with the simulated step's host issue or GPU time, whichever is longer.
    bool steady_state = false;
    std::optional<double> measured_peak_bytes;
    /// The host's speed while the case was measured, seconds per tiny torch.add (the framework probe's
    /// canary, taken before each timed sample), where the measurement recorded it: a condition of the
    /// measurement, like the GPU's clock. HostSpeed::measured predicts the case on that host speed.
    std::optional<double> host_canary_seconds;
    /// Model cases: the medians of the forward, forward + backward and optimizer timings, each phase
    /// on its own between two synchronizes, where the file has them.
    std::optional<StandalonePhases> measured_phases;
    /// Model cases timed in passes over all the models (measure_pytorch.py --model-rounds): each
    /// pass's median step time, in order, where the file says which samples each pass took. Empty
    /// where the case was timed in one pass, or the split of its samples is not known.
    std::vector<double> measured_pass_step_seconds;
    /// Each pass's median canary (host_canary_seconds, one before each step sample, split as the
    /// step's samples are), beside measured_pass_step_seconds; empty where either is not known.
    std::vector<double> measured_pass_canary_seconds;

    /// How far the case's passes, minutes apart in one process, came apart: the slowest pass's median
    /// step over the fastest's, less 1. The measurement's own repeatability, for its error to be read
    /// beside. None with fewer than two passes known.
    [[nodiscard]] std::optional<double> pass_spread() const {
        if (measured_pass_step_seconds.size() < 2) return std::nullopt;
        const auto [fastest, slowest] = std::minmax_element(measured_pass_step_seconds.begin(), measured_pass_step_seconds.end());
        return *slowest / *fastest - 1.0;
    }
};

struct ValidationSet {
    std::string gpu_key;
    std::string origin;                     ///< file, GPU, torch version, date
    std::vector<ValidationCase> cases;      ///< every case the layer-graph path predicts
    std::vector<ValidationCase> exported_only;  ///< model cases only an exported IR predicts (not in the zoo)
    std::vector<std::pair<std::string, std::string>> not_modelled;  ///< (case id, reason)
};

namespace detail {

/// A measured time: positive and at least a nanosecond, below any timer's resolution (5e-324 s would
/// turn the error, predicted / measured - 1, into infinity).
inline double measured_seconds(const JsonCursor& c) {
    const double v = c.positive();
    if (v < 1e-9) c.fail("below a nanosecond, no measured time: " + JsonCursor::format(v));
    return v;
}

inline ValidationCase layer_case(const JsonCursor& c) {
    ValidationCase v;
    v.id = c.at("id").string();
    v.family = c.at("op").string();
    v.precision = c.at("precision").string();
    v.graph = one_layer_graph_from_json(c);
    v.graph.name = v.id;
    if (c.has("implementation") && c.at("implementation").has("call")) {
        // nn.MultiheadAttention called with need_weights=False takes the SDPA path.
        if (c.at("implementation").at("call").string().find("need_weights=False") != std::string::npos) {
            v.graph.layers.front().attrs["need_weights"] = false;
        }
    }
    auto mode = precision_mode_from_key(v.precision);
    if (!mode) c.at("precision").fail("unknown precision mode");
    v.options.batch = 1;  // shapes are fixed in layer cases
    v.options.precision = *mode;
    v.options.optimizer.kind = OptimizerKind::none;
    // Steady state where measured (a layer as inside a training loop); one synchronized repetition
    // in files from before it was.
    v.steady_state = c.has("forward_backward_steady_seconds");
    v.measured_seconds = measured_seconds(c.at(v.steady_state ? "forward_backward_steady_seconds" : "forward_backward_seconds").at("median"));
    if (c.has("host_canary_seconds")) v.host_canary_seconds = c.at("host_canary_seconds").at("median").positive();
    return v;
}

/// How many step samples each pass of a model case timed in `rounds` passes took, in order: as
/// `round_samples` records it; in a file from before it did, `model_repeats` each where every pass
/// took that many (no pass takes more); else not known (empty). Counts that do not fit the samples
/// are an error naming the field.
inline std::vector<std::size_t> pass_sample_counts(const JsonCursor& c, std::optional<std::int64_t> model_repeats) {
    const std::int64_t rounds = c.has("rounds") ? c.at("rounds").positive_integer() : 1;
    if (rounds < 2 || !c.at("step_seconds").has("values")) return {};
    const std::size_t samples = c.at("step_seconds").at("values").array_size();
    std::vector<std::size_t> counts;
    if (c.has("round_samples")) {
        const JsonCursor per_round = c.at("round_samples");
        std::size_t total = 0;
        for (std::size_t i = 0; i < per_round.array_size(); ++i) {
            counts.push_back(static_cast<std::size_t>(per_round.at(i).positive_integer()));
            total += counts.back();
        }
        if (counts.size() != static_cast<std::size_t>(rounds) || total != samples) {
            per_round.fail("expected one sample count per round (" + std::to_string(rounds) + "), summing to step_seconds' " +
                           std::to_string(samples) + " values");
        }
    } else if (model_repeats && samples == static_cast<std::size_t>(rounds * *model_repeats)) {
        counts.assign(static_cast<std::size_t>(rounds), static_cast<std::size_t>(*model_repeats));
    }
    return counts;
}

/// The median of each pass's samples of `timing` (a `{"values": [...]}` of one sample per step sample),
/// pass after pass, `counts` samples each; empty where the counts are not known or `timing` has
/// another number of values.
inline std::vector<double> pass_medians(const JsonCursor& timing, const std::vector<std::size_t>& counts) {
    if (counts.empty() || !timing.has("values")) return {};
    const JsonCursor values = timing.at("values");
    std::size_t samples = 0;
    for (const std::size_t n : counts) samples += n;
    if (values.array_size() != samples) return {};
    std::vector<double> medians;
    std::size_t next = 0;
    for (const std::size_t n : counts) {
        std::vector<double> pass;
        for (std::size_t i = next; i < next + n; ++i) pass.push_back(values.at(i).positive());
        next += n;
        medians.push_back(quantile(std::move(pass), 0.5));
    }
    return medians;
}

inline ValidationCase model_case(const JsonCursor& c, std::optional<std::int64_t> model_repeats = std::nullopt) {
    ValidationCase v;
    v.id = c.at("id").string();
    v.family = c.at("model").string();
    v.precision = c.at("precision").string();
    v.model = true;
    const std::int64_t size = c.has("image_size") ? c.at("image_size").positive_integer()
                                                  : (c.has("seq_len") ? c.at("seq_len").positive_integer() : 0);
    // A model written to a zoo graph's layers under another name says which graph (model_info.layer_graph).
    const bool names_graph = c.has("model_info") && c.at("model_info").has("layer_graph");
    auto graph = zoo::model(names_graph ? c.at("model_info").at("layer_graph").string() : v.family, size);
    if (names_graph && !graph) c.at("model_info").at("layer_graph").fail("not a zoo model");
    if (graph) v.graph = std::move(*graph);
    else v.in_zoo = false;
    auto mode = precision_mode_from_key(v.precision);
    if (!mode) c.at("precision").fail("unknown precision mode");
    v.options.batch = c.at("batch").positive_integer();
    v.options.precision = *mode;
    auto opt = optimizer_from_key(c.at("optimizer").string());
    if (!opt) c.at("optimizer").fail("unknown optimizer");
    v.options.optimizer.kind = *opt;
    if (c.has("mode")) {  // absent: a training step
        const auto step = step_mode_from_key(c.at("mode").string());
        if (!step) c.at("mode").fail("expected training or inference");
        v.options.mode = *step;
        if (*step == StepMode::inference && *opt != OptimizerKind::none) c.at("optimizer").fail("an inference case has no optimizer: expected none");
    }
    if (c.has("optimizer_info") && c.at("optimizer_info").has("implementation")) {
        v.options.optimizer.fused = c.at("optimizer_info").at("implementation").string() == "fused";
    }
    v.measured_seconds = measured_seconds(c.at("step_seconds").at("median"));
    if (c.has("peak_memory_bytes")) v.measured_peak_bytes = c.at("peak_memory_bytes").positive();
    if (c.has("forward_seconds") && c.has("forward_backward_seconds") && c.has("optimizer_seconds")) {
        v.measured_phases = StandalonePhases{Seconds(c.at("forward_seconds").at("median").positive()),
                                             Seconds(c.at("forward_backward_seconds").at("median").positive()),
                                             Seconds(c.at("optimizer_seconds").at("median").non_negative())};
    }
    if (c.has("host_canary_seconds")) v.host_canary_seconds = c.at("host_canary_seconds").at("median").positive();
    const std::vector<std::size_t> counts = pass_sample_counts(c, model_repeats);
    v.measured_pass_step_seconds = pass_medians(c.at("step_seconds"), counts);
    if (c.has("host_canary_seconds")) v.measured_pass_canary_seconds = pass_medians(c.at("host_canary_seconds"), counts);
    return v;
}

}  // namespace detail

/// Reads a validation file; cases whose op or model roofsim does not model are listed, not dropped.
[[nodiscard]] inline ValidationSet load_validation(const std::filesystem::path& path) {
    using detail::JsonCursor;
    const nlohmann::json document = detail::read_json_file(path);
    const JsonCursor root(document, path.filename().string(), "");
    if (root.at("kind").string() != "roofsim-validation") root.at("kind").fail("expected \"roofsim-validation\"");
    ValidationSet set;
    set.gpu_key = root.at("gpu").at("key").string();
    try {
        (void)gpu_or_throw(set.gpu_key);
    } catch (const std::invalid_argument& e) {
        root.at("gpu").at("key").fail(e.what());  // bad data (exit 1), not a bad option
    }
    set.origin = path.filename().string() + ": measured on " + root.at("gpu").at("name").string() + " with torch " +
                 root.at("software").at("torch").string() + ", " + root.at("date_utc").string().substr(0, 10);
    const JsonCursor layers = root.at("layer_cases");
    for (std::size_t i = 0; i < layers.array_size(); ++i) {
        const JsonCursor c = layers.at(i);
        if (detail::known_ops().count(c.at("op").string()) == 0) {
            set.not_modelled.emplace_back(c.at("id").string(), "op not modelled: " + c.at("op").string());
            continue;
        }
        set.cases.push_back(detail::layer_case(c));
    }
    // the most samples a pass of a model case takes (files that do not record each pass's count)
    std::optional<std::int64_t> model_repeats;
    if (root.has("method_settings") && root.at("method_settings").has("model_repeats")) {
        model_repeats = root.at("method_settings").at("model_repeats").positive_integer();
    }
    const JsonCursor models = root.at("model_cases");
    for (std::size_t i = 0; i < models.array_size(); ++i) {
        auto v = detail::model_case(models.at(i), model_repeats);
        if (v.in_zoo) {
            set.cases.push_back(std::move(v));
        } else {
            set.not_modelled.emplace_back(v.id, "model not in the zoo: predicted from an exported IR only");
            set.exported_only.push_back(std::move(v));
        }
    }
    return set;
}

/// The host speed a case is predicted on.
enum class HostSpeed {
    profiled,  ///< the framework profile's (as a user's prediction is, with no canary of their own)
    measured,  ///< the case's own canary against the profile's (host_time_scale); the profile's where either lacks one
};

/// The host time scale of a case on `speed`: its canary over the profile's host speed, or 1.
[[nodiscard]] inline double host_time_scale(const ValidationCase& c, const FrameworkProfile* framework, HostSpeed speed) {
    if (speed == HostSpeed::profiled || !framework || !c.host_canary_seconds) return 1.0;
    const auto reference = framework->host_seconds_per_op();
    return reference ? *c.host_canary_seconds / reference->value() : 1.0;
}

/// How much slower than the profiled one a validation host runs for minutes at a time: the canary
/// (measure_pytorch.py, per tiny add) read 6.3-7.2 us in one run's first round of model steps and
/// 10.0-10.5 us in its second (H200, 2026-12-01). `roofsim validate` prints how much longer each
/// step's prediction is on a host this much slower (CaseError::host_swing_effect): how far the
/// host's swing alone can move it. The accuracy test judges steps by their measured passes instead.
inline constexpr double validation_host_swing = 1.5;
/// The lengthening on a host validation_host_swing times slower from which a model step is checked as
/// host-paced: half the 10 % bound.
inline constexpr double validation_host_swing_bound = 0.05;

/// One pass of a model case timed in passes (ValidationCase::measured_pass_step_seconds): its median
/// step against the prediction at the profile's host speed, and at the host speed its own canary
/// read. Passes minutes apart in one process, on one host, that show how much of a host-paced step's
/// error is the host's moment.
struct PassError {
    std::size_t run = 0;   ///< which of the case's runs (its place in CaseOverRuns::errors); 0 in CaseError
    std::size_t pass = 0;  ///< the pass's place in its run, from 0
    double measured_seconds = 0;   ///< the pass's median step
    double error_at_profiled = 0;  ///< (predicted at the profile's host speed - measured) / measured
    /// The pass's canary over the profile's host speed, and the error of the prediction at that host
    /// speed; none where the pass's canary or the profile's host speed is not known.
    std::optional<double> host_time_scale, error_at_canary;
};

/// One case's prediction against its measurement.
struct CaseError {
    const ValidationCase* c = nullptr;
    double host_time_scale = 1.0;  ///< the host costs' scale it was predicted with
    double predicted_seconds = 0;
    double predicted_host_seconds = 0;  ///< the prediction's host issue time
    double predicted_gpu_seconds = 0;   ///< its GPU time: kernels and the gaps between them
    double error = 0;  ///< (predicted - measured) / measured
    /// A model step predicted on a host validation_host_swing times slower, over its prediction, minus 1
    /// (0 for layer cases, whose steady state takes the longer of the host's and the GPU's time).
    double host_swing_effect = 0;
    std::optional<double> predicted_peak_bytes;
    std::optional<double> memory_error;
    std::optional<StandalonePhases> predicted_phases;  ///< model cases whose measurement has its phases
    std::vector<PassError> passes;  ///< model cases whose passes are known, in order
    /// The prediction's host issue time exceeds its GPU time (kernels and the gaps between them): the
    /// host sets the pace, and the measurement moves with the host's speed at the time.
    [[nodiscard]] bool host_bound() const { return predicted_host_seconds > predicted_gpu_seconds; }
};

/// The fraction by which a step predicted on a host validation_host_swing times slower (`slower`)
/// is longer than its prediction `e`.
[[nodiscard]] inline double host_swing_effect(const CaseError& e, const Prediction& slower) {
    return slower.step_time.value() / e.predicted_seconds - 1.0;
}

/// A case's prediction against its measurement; the peak memory too when `with_memory`. Repeated
/// back to back, a step takes its host issue time or its GPU time, whichever is longer (the host
/// runs ahead of the GPU, or the GPU waits on the host).
[[nodiscard]] inline CaseError case_error(const ValidationCase& c, const Prediction& p, bool with_memory) {
    CaseError e;
    e.c = &c;
    e.predicted_seconds = c.steady_state ? max(p.host_time, p.gpu_time + p.gpu_gap_time).value() : p.step_time.value();
    e.error = (e.predicted_seconds - c.measured_seconds) / c.measured_seconds;
    e.predicted_host_seconds = p.host_time.value();
    e.predicted_gpu_seconds = (p.gpu_time + p.gpu_gap_time).value();
    if (with_memory && c.measured_peak_bytes) {
        e.predicted_peak_bytes = p.memory.peak.value();
        e.memory_error = (*e.predicted_peak_bytes - *c.measured_peak_bytes) / *c.measured_peak_bytes;
    }
    return e;
}

namespace detail {
/// Each pass of a model case against `predicted_step_at(host_time_scale)`, the case's step predicted
/// with its host costs scaled so (PassError); empty where its passes are not known.
template <class PredictedStepAt>
[[nodiscard]] std::vector<PassError> pass_errors(const ValidationCase& c, const FrameworkProfile* framework,
                                                 PredictedStepAt predicted_step_at) {
    std::vector<PassError> out;
    if (c.measured_pass_step_seconds.empty()) return out;
    const std::optional<Seconds> reference = framework ? framework->host_seconds_per_op() : std::nullopt;
    const bool canaries = reference && c.measured_pass_canary_seconds.size() == c.measured_pass_step_seconds.size();
    const double at_profiled = predicted_step_at(1.0);
    for (std::size_t i = 0; i < c.measured_pass_step_seconds.size(); ++i) {
        PassError p;
        p.pass = i;
        p.measured_seconds = c.measured_pass_step_seconds[i];
        p.error_at_profiled = (at_profiled - p.measured_seconds) / p.measured_seconds;
        if (canaries) {
            p.host_time_scale = c.measured_pass_canary_seconds[i] / reference->value();
            p.error_at_canary = (predicted_step_at(*p.host_time_scale) - p.measured_seconds) / p.measured_seconds;
        }
        out.push_back(p);
    }
    return out;
}
}  // namespace detail

/// Predicts every case on `ctx` with host costs from `framework` (or the launch rate), on the host
/// speed `speed`.
[[nodiscard]] inline std::vector<CaseError> evaluate(const ValidationSet& set, const CostContext& ctx,
                                                     const FrameworkProfile* framework, HostSpeed speed) {
    std::vector<CaseError> out;
    for (const auto& c : set.cases) {
        PredictOptions o;
        o.lowering = c.options;
        o.framework = framework;
        o.host_time_scale = host_time_scale(c, framework, speed);
        const Prediction p = predict(c.graph, ctx, o);
        out.push_back(case_error(c, p, c.model));
        if (c.measured_phases) out.back().predicted_phases = standalone_phases(p, ctx, framework, c.options.optimizer, o.host_time_scale);
        out.back().host_time_scale = o.host_time_scale;
        if (c.model) {
            o.host_time_scale *= validation_host_swing;
            out.back().host_swing_effect = host_swing_effect(out.back(), predict(c.graph, ctx, o));
            const CaseError& e = out.back();
            out.back().passes = detail::pass_errors(c, framework, [&](double scale) {
                if (scale == e.host_time_scale) return e.predicted_seconds;  // the step already predicted at this speed
                o.host_time_scale = scale;
                return predict(c.graph, ctx, o).step_time.value();
            });
        }
    }
    return out;
}

/// The file an exported IR of a model case is kept in: its id with '/' as '_' ("resnet50_b32x224_amp-bf16.json").
[[nodiscard]] inline std::string exported_ir_file_name(const ValidationCase& c) {
    std::string name = c.id;
    std::replace(name.begin(), name.end(), '/', '_');
    return name + ".json";
}

/// Predicts every model case that has an exported IR in `dir` (tools/roofsim_export, docs/ir-format.md)
/// from that IR. An IR captured at another batch or precision than its case is an error.
[[nodiscard]] inline std::vector<CaseError> evaluate_exported(const ValidationSet& set, const std::filesystem::path& dir,
                                                              const CostContext& ctx, const FrameworkProfile* framework,
                                                              HostSpeed speed) {
    std::vector<CaseError> out;
    auto one = [&](const ValidationCase& c) {
        if (!c.model) return;
        const std::filesystem::path path = dir / exported_ir_file_name(c);
        if (!std::filesystem::exists(path)) return;
        const KernelIr ir = load_kernel_ir(path);
        if (ir.batch != c.options.batch || ir.list.precision != c.options.precision) {
            throw std::runtime_error(path.filename().string() + ": captured at batch " + std::to_string(ir.batch) + ", " +
                                     std::string(to_string(ir.list.precision)) + "; the case " + c.id + " was measured at batch " +
                                     std::to_string(c.options.batch) + ", " + c.precision);
        }
        const double scale = host_time_scale(c, framework, speed);
        PredictOptions o;
        o.framework = framework;
        o.host_time_scale = scale;
        const Prediction p = predict(ir, ctx, o);
        out.push_back(case_error(c, p, ir.memory.has_value()));
        if (c.measured_phases) out.back().predicted_phases = standalone_phases(p, ctx, framework, ir.optimizer, scale);
        out.back().host_time_scale = scale;
        o.host_time_scale = scale * validation_host_swing;
        out.back().host_swing_effect = host_swing_effect(out.back(), predict(ir, ctx, o));
        const CaseError& e = out.back();
        out.back().passes = detail::pass_errors(c, framework, [&](double at) {
            if (at == e.host_time_scale) return e.predicted_seconds;  // the step already predicted at this speed
            o.host_time_scale = at;
            return predict(ir, ctx, o).step_time.value();
        });
    };
    for (const auto& c : set.cases) one(c);
    for (const auto& c : set.exported_only) one(c);
    return out;
}

/// The q-quantile (0..1) of |error| over the cases `pick` selects.
template <class Pick>
[[nodiscard]] double error_quantile(const std::vector<CaseError>& errors, double q, Pick pick) {
    std::vector<double> v;
    for (const auto& e : errors) {
        if (pick(e)) v.push_back(std::abs(e.error));
    }
    return detail::quantile(std::move(v), q);
}

/// One validation run of data/validation/runs.json: PyTorch measurements, the framework profile
/// measured on the same machine just before them, the GPU calibration they are predicted with
/// (none: the GPU's built-in one) and the exported IRs of their model cases (none: not checked).
struct ValidationRunFiles {
    std::string name;
    std::filesystem::path measurements, framework, calibration, exported;
};

/// Reads a list of validation runs (kind "roofsim-validation-runs"); paths are relative to its folder.
[[nodiscard]] inline std::vector<ValidationRunFiles> load_validation_runs(const std::filesystem::path& manifest) {
    using detail::JsonCursor;
    const nlohmann::json document = detail::read_json_file(manifest);
    const JsonCursor root(document, manifest.filename().string(), "");
    if (root.at("kind").string() != "roofsim-validation-runs") root.at("kind").fail("expected \"roofsim-validation-runs\"");
    if (root.at("schema_version").integer() != 1) root.at("schema_version").fail("unsupported version (expected 1)");
    const std::filesystem::path dir = manifest.parent_path();
    const JsonCursor list = root.at("runs");
    if (list.array_size() == 0) list.fail("expected at least one run");
    std::vector<ValidationRunFiles> runs;
    for (std::size_t i = 0; i < list.array_size(); ++i) {
        const JsonCursor r = list.at(i);
        ValidationRunFiles f;
        f.name = r.at("name").string();
        f.measurements = dir / r.at("measurements").string();
        f.framework = dir / r.at("framework").string();
        if (r.has("calibration")) f.calibration = dir / r.at("calibration").string();
        if (r.has("exported")) {
            f.exported = dir / r.at("exported").string();
            // a missing folder would check no exported IR and say nothing
            if (!std::filesystem::is_directory(f.exported)) r.at("exported").fail("no such folder: " + f.exported.string());
        }
        for (const auto& [key, path] : {std::pair{"measurements", f.measurements}, {"framework", f.framework}}) {
            if (!std::filesystem::exists(path)) r.at(key).fail("no such file: " + path.string());
        }
        runs.push_back(std::move(f));
    }
    return runs;
}

/// A validation run loaded: its cases, its framework profile and the cost context of its calibration.
struct ValidationRun {
    ValidationRunFiles files;
    ValidationSet set;
    FrameworkProfile framework;
    CostContext ctx;
};

/// Loads a run's measurements and profiles (the GPU's built-in calibration where it names none; with
/// `datasheet`, none: the GPU as if it had not been measured).
[[nodiscard]] inline ValidationRun load_validation_run(const ValidationRunFiles& files, bool datasheet = false) {
    ValidationRun run{files, load_validation(files.measurements), load_framework_profile(files.framework), CostContext{}};
    const GpuSpec& spec = gpu_or_throw(run.set.gpu_key);
    std::optional<Calibration> calibration;
    if (!files.calibration.empty()) calibration = load_calibration(files.calibration);
    const Calibration* measured = calibration ? &*calibration : find_builtin_calibration(spec.key);
    if (measured && measured->device.gpu_key != spec.key) {
        throw std::runtime_error(files.name + ": calibration of " + measured->device.gpu_key + ", measurements on " + spec.key);
    }
    run.ctx = make_cost_context(spec, datasheet ? nullptr : measured, &run.framework);
    return run;
}

/// A case over the runs that measured it: its error in each (newest run first) and their median.
struct CaseOverRuns {
    std::string id, family, precision;
    bool model = false;
    std::vector<double> errors;         ///< (predicted - measured) / measured, one per run
    std::vector<double> memory_errors;  ///< peak memory, where compared
    std::vector<double> host_over_gpu;  ///< the prediction's host issue time over its GPU time, one per run
    std::vector<double> host_swing_effect;  ///< CaseError::host_swing_effect, one per run
    /// Each phase on its own, measured and predicted, one per run where both are (newest first).
    std::vector<std::pair<StandalonePhases, StandalonePhases>> phases;
    /// ValidationCase::pass_spread of each run where it is known (newest first).
    std::vector<double> pass_spreads;
    /// Every pass of every run where the passes are known (CaseError::passes; PassError::run says which).
    std::vector<PassError> passes;

    [[nodiscard]] double median_error() const { return detail::quantile(errors, 0.5); }
    /// The median peak-memory error, where any run compared it.
    [[nodiscard]] std::optional<double> median_memory_error() const {
        if (memory_errors.empty()) return std::nullopt;
        return detail::quantile(memory_errors, 0.5);
    }
    /// Paced by the host in the prediction of most runs.
    [[nodiscard]] bool host_bound() const {
        const auto runs = std::count_if(host_over_gpu.begin(), host_over_gpu.end(), [](double r) { return r > 1.0; });
        return 2 * static_cast<std::size_t>(runs) > host_over_gpu.size();
    }
    /// The median over the runs of the prediction's host issue time over its GPU time: near or above 1,
    /// the step's time moves with the host's speed while it runs.
    [[nodiscard]] double median_host_over_gpu() const { return host_over_gpu.empty() ? 0.0 : detail::quantile(host_over_gpu, 0.5); }
    /// The median over the runs of CaseError::host_swing_effect: how far the host's swing moves the step.
    [[nodiscard]] double median_host_swing_effect() const {
        return host_swing_effect.empty() ? 0.0 : detail::quantile(host_swing_effect, 0.5);
    }
    /// The median over the runs of how far the case's passes came apart in each (pass_spreads), where
    /// any run knows it: how far the measurement itself moves within a run.
    [[nodiscard]] std::optional<double> median_pass_spread() const {
        if (pass_spreads.empty()) return std::nullopt;
        return detail::quantile(pass_spreads, 0.5);
    }
    /// Checked as host-paced: the host's swing moves the predicted step by a twentieth or more.
    [[nodiscard]] bool host_sensitive() const { return median_host_swing_effect() >= validation_host_swing_bound; }
};

/// The cases of several runs, each case's errors gathered by its id.
struct RunsEvaluation {
    struct Run {
        std::string name, origin;
        double layer_median = 0, layer_p90 = 0, model_worst = 0;  ///< this run alone, |error|
        /// Its framework profile's host speed (seconds per tiny add) and the 10th and 90th percentiles
        /// of the probe's canaries: how fast and how steady the host was, where the profile says
        std::optional<Seconds> host_canary, host_canary_p10, host_canary_p90;
    };
    std::vector<Run> runs;
    std::vector<CaseOverRuns> cases;     ///< the layer-graph path (layer cases and zoo models)
    std::vector<CaseOverRuns> exported;  ///< model steps from the exported IRs
};

namespace detail {
inline void gather(std::vector<CaseOverRuns>& out, const std::vector<CaseError>& errors) {
    for (const auto& e : errors) {
        auto it = std::find_if(out.begin(), out.end(), [&](const CaseOverRuns& c) { return c.id == e.c->id; });
        if (it == out.end()) {
            out.push_back(CaseOverRuns{e.c->id, e.c->family, e.c->precision, e.c->model, {}, {}, {}, {}, {}, {}, {}});
            it = std::prev(out.end());
        }
        it->errors.push_back(e.error);
        if (e.memory_error) it->memory_errors.push_back(*e.memory_error);
        it->host_over_gpu.push_back(e.predicted_gpu_seconds > 0 ? e.predicted_host_seconds / e.predicted_gpu_seconds
                                                                : std::numeric_limits<double>::infinity());
        it->host_swing_effect.push_back(e.host_swing_effect);
        if (e.c->measured_phases && e.predicted_phases) it->phases.emplace_back(*e.c->measured_phases, *e.predicted_phases);
        if (const auto spread = e.c->pass_spread()) it->pass_spreads.push_back(*spread);
        for (PassError p : e.passes) {
            p.run = it->errors.size() - 1;
            it->passes.push_back(p);
        }
    }
}
}  // namespace detail

/// Predicts every run with its own framework profile and calibration, on the host speed `speed`.
[[nodiscard]] inline RunsEvaluation evaluate_runs(const std::vector<ValidationRunFiles>& runs, HostSpeed speed, bool datasheet = false) {
    RunsEvaluation out;
    for (const auto& files : runs) {
        const ValidationRun run = load_validation_run(files, datasheet);
        const auto errors = evaluate(run.set, run.ctx, &run.framework, speed);
        detail::gather(out.cases, errors);
        if (!files.exported.empty()) {
            detail::gather(out.exported, evaluate_exported(run.set, files.exported, run.ctx, &run.framework, speed));
        }
        const auto layers = [](const CaseError& e) { return !e.c->model; };
        const auto models = [](const CaseError& e) { return e.c->model; };
        out.runs.push_back({files.name, run.set.origin, error_quantile(errors, 0.5, layers), error_quantile(errors, 0.9, layers),
                            error_quantile(errors, 1.0, models), run.framework.host_reference_seconds_per_op,
                            run.framework.host_canary_p10, run.framework.host_canary_p90});
    }
    return out;
}

/// The q-quantile of |median error| over the cases `pick` selects.
template <class Pick>
[[nodiscard]] double median_error_quantile(const std::vector<CaseOverRuns>& cases, double q, Pick pick) {
    std::vector<double> v;
    for (const auto& c : cases) {
        if (pick(c)) v.push_back(std::abs(c.median_error()));
    }
    return detail::quantile(std::move(v), q);
}

}  // namespace roofsim
