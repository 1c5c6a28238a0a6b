// Accuracy against real PyTorch: every validation run of data/validation/runs.json (measurements,
// the framework profile measured with them, the calibration they are predicted with) is predicted
// and compared. A shared host's speed moves a host-paced step by a third between runs, so the
// accuracy of a case is the median of its errors over the runs, checked against the targets
// (layers: median 10%, 90th percentile 25%; models: 10% each, host-paced ones within their measured
// spread; peak memory 15%). Known misses are listed by case with their reason (docs/validation.md).
#include "catch.hpp"
#include "framework_figures.hpp"

#include <roofsim/profile/builtin.hpp>
#include <validate/validation.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

using namespace roofsim;

namespace {
const std::filesystem::path runs_manifest = std::filesystem::path(ROOFSIM_SOURCE_DIR) / "data" / "validation" / "runs.json";

/// Every run of data/validation/runs.json predicted at the profiles' host speed, once for all the tests.
const RunsEvaluation& evaluated_runs() {
    static const RunsEvaluation v = evaluate_runs(load_validation_runs(runs_manifest), HostSpeed::profiled);
    return v;
}

/// Every run of data/validation/runs.json, loaded; `with_set(run)` for each.
template <class F>
int for_each_measured_set(F&& with_set) {
    int sets = 0;
    for (const auto& files : load_validation_runs(runs_manifest)) {
        ++sets;
        with_set(load_validation_run(files));
    }
    return sets;
}
/// A validation file of `text`, written to a temporary file named `name`, read back and removed
/// (also where reading it throws).
ValidationSet load_validation_text(const std::string& name, const std::string& text) {
    const auto path = std::filesystem::temp_directory_path() / name;
    std::ofstream(path) << text;
    struct Removed {
        std::filesystem::path p;
        ~Removed() { std::filesystem::remove(p); }
    } removed{path};
    return load_validation(path);
}

/// A validation file of two ResNet-50 model cases, b32 (with `b32_fields` added: JSON members after a
/// comma) and b128 (step time only), written, read back and removed.
ValidationSet two_model_cases(const std::string& name, const std::string& b32_fields) {
    return load_validation_text(name, R"({"kind": "roofsim-validation", "gpu": {"key": "h200-sxm", "name": "NVIDIA H200"},
                 "software": {"torch": "2.11.0"}, "date_utc": "2026-11-30T00:00:00+00:00", "layer_cases": [],
                 "model_cases": [
                   {"id": "resnet50/b32x224/amp-bf16", "model": "resnet50", "image_size": 224, "precision": "amp-bf16",
                    "batch": 32, "optimizer": "sgd", "step_seconds": {"median": 0.021}, )" +
                                          b32_fields + R"(},
                   {"id": "resnet50/b128x224/amp-bf16", "model": "resnet50", "image_size": 224, "precision": "amp-bf16",
                    "batch": 128, "optimizer": "sgd", "step_seconds": {"median": 0.056}}]})");
}
// The targets (docs/validation.md): one layer's forward + backward, median 10 % and 90th percentile
// 25 % over the cases; a model step 10 % each; peak memory 15 %.
constexpr double layer_median_bound = 0.10, layer_p90_bound = 0.25, model_step_bound = 0.10, memory_bound = 0.15;
/// A step whose passes in one run come apart by this much or more moves with the host (measured).
constexpr double host_paced_pass_spread = 0.02;

/// A model step that misses its bound, and why (docs/validation.md, "Known misses").
struct KnownMiss {
    const char* path;  ///< "zoo" (the layer graph) or "exported" (the IR roofsim_export captured)
    const char* id;
    const char* reason;
};
constexpr const char* host_short = "near the host/GPU balance and predicted short on every run: the host's share of the step "
                                   "ran slower on the validation host than the framework probe's figures say";
constexpr KnownMiss known_misses[] = {
    {"zoo", "bert-base/b128xs128/amp-bf16", host_short},
    {"zoo", "bert-encoder/b128xs128/amp-bf16", host_short},
    {"exported", "bert-base/b128xs128/amp-bf16", host_short},
};
const KnownMiss* known_miss(const std::string& path, const std::string& id) {
    for (const KnownMiss& m : known_misses) {
        if (path == m.path && id == m.id) return &m;
    }
    return nullptr;
}
}  // namespace

TEST_CASE("over the validation runs, each case's median error stays within the issue's bounds", "[accuracy]") {
    const RunsEvaluation& v = evaluated_runs();
    REQUIRE(v.runs.size() >= 3);
    const auto layers = [](const CaseOverRuns& c) { return !c.model; };
    const double median = median_error_quantile(v.cases, 0.5, layers);
    const double p90 = median_error_quantile(v.cases, 0.9, layers);
    // Model steps: the issue's 10 % each, judged as measured. A step whose passes within one run
    // came apart by host_paced_pass_spread or more (measured: the GPU-paced steps' passes lie within
    // 1 %, the host-paced ones' 3-16 %) is judged against its own measured spread: its prediction
    // within the 10th-90th percentile of its passes' errors, or within the 10 %, whichever is wider.
    // Nothing here reads the prediction to choose a case's bound. A step that misses is listed by
    // case in known_misses with its reason; a listed case that meets its bound fails too, so that the
    // list stays true.
    const auto model_bounds = [](const std::vector<CaseOverRuns>& cases, const char* path) {
        std::size_t checked = 0;
        for (const auto& c : cases) {
            if (!c.model) continue;
            ++checked;
            const std::optional<double> spread = c.median_pass_spread();
            REQUIRE(spread.has_value());
            const bool host_paced = *spread >= host_paced_pass_spread;
            std::vector<double> pass_errors;
            for (const auto& pass : c.passes) pass_errors.push_back(pass.error_at_profiled);
            const double low = detail::quantile(pass_errors, 0.1), high = detail::quantile(pass_errors, 0.9);
            const bool within_spread = host_paced && !pass_errors.empty() && low <= 0 && 0 <= high;
            const bool met = std::abs(c.median_error()) <= model_step_bound || within_spread;
            const KnownMiss* miss = known_miss(path, c.id);
            std::printf("  %-8s %-32s median error %+6.1f%% over %zu runs; passes apart %4.1f%% (%s), pass errors p10..p90 %+.1f..%+.1f%%: %s\n",
                        path, c.id.c_str(), 100 * c.median_error(), c.errors.size(), 100 * *spread, host_paced ? "host-paced" : "GPU-paced",
                        100 * low, 100 * high, met ? "met" : miss ? "known miss" : "MISSED");
            INFO(path << " " << c.id << " median error " << c.median_error() << ", pass errors " << low << ".." << high);
            if (miss) {
                INFO("listed as a known miss (" << miss->reason << "): it meets its bound now, take it off the list");
                CHECK_FALSE(met);
            } else {
                CHECK(met);
            }
            if (const auto memory = c.median_memory_error()) CHECK(std::abs(*memory) <= memory_bound);
        }
        CHECK(checked >= 8);
    };
    std::size_t layer_cases = 0;
    for (const auto& c : v.cases) layer_cases += c.model ? 0 : 1;
    std::printf("over %zu runs: %zu layer cases, median |median error| %.1f%%, 90th percentile %.1f%%\n", v.runs.size(), layer_cases,
                100 * median, 100 * p90);
    CHECK(layer_cases >= 60);
    CHECK(median <= layer_median_bound);
    CHECK(p90 <= layer_p90_bound);
    model_bounds(v.cases, "zoo");
    REQUIRE_FALSE(v.exported.empty());
    model_bounds(v.exported, "exported");
    // The exported IRs hold every model case, those the zoo has and those it does not (ViT-B/16).
    CHECK(std::count_if(v.exported.begin(), v.exported.end(), [](const CaseOverRuns& c) { return c.id.rfind("vit-b-16/", 0) == 0; }) >= 2);
}

TEST_CASE("each validation run says how fast and how steady its probe's host was", "[accuracy][validation]") {
    const RunsEvaluation& v = evaluated_runs();
    for (const auto& r : v.runs) {
        INFO(r.name << ": " << r.origin);
        REQUIRE(r.host_canary.has_value());
        REQUIRE(r.host_canary_p10.has_value());
        REQUIRE(r.host_canary_p90.has_value());
        CHECK(*r.host_canary_p10 <= *r.host_canary);
        CHECK(*r.host_canary <= *r.host_canary_p90);
    }
}

TEST_CASE("every validation run's framework profile holds every figure the probe measures", "[accuracy][validation]") {
    // A run enters data/validation/runs.json only when its probe measured all that roofsim reads now:
    // runs from an older probe would be predicted with figures missing (docs/validation.md).
    const FrameworkProfile* current = find_builtin_framework_profile("h200-sxm");
    REQUIRE(current != nullptr);
    for_each_measured_set([&](const ValidationRun& m) {
        std::vector<std::string> missing;
        for (const auto& [key, figure] : current->figures) {
            if (m.framework.figures.count(key) == 0) missing.push_back(key);
        }
        INFO(m.files.name << ": " << missing.size() << " figures missing; first: " << (missing.empty() ? std::string("none") : missing.front()));
        CHECK(missing.empty());
    });
}

TEST_CASE("a list of validation runs is read with its paths, and refused with a clear message", "[accuracy][validation]") {
    const auto dir = std::filesystem::temp_directory_path() / "roofsim-runs-test";
    std::filesystem::create_directories(dir / "ir");  // a run's exported folder must exist
    const auto manifest = dir / "runs.json";
    const auto write = [&](const std::string& text) { std::ofstream(manifest) << text; };
    std::ofstream(dir / "m.json") << "{}";
    std::ofstream(dir / "f.json") << "{}";
    write(R"({"kind": "roofsim-validation-runs", "schema_version": 1,
              "runs": [{"name": "one", "measurements": "m.json", "framework": "f.json", "exported": "ir"}]})");
    const auto runs = load_validation_runs(manifest);
    REQUIRE(runs.size() == 1);
    CHECK(runs[0].measurements == dir / "m.json");
    CHECK(runs[0].exported == dir / "ir");
    CHECK(runs[0].calibration.empty());
    write(R"({"kind": "roofsim-validation-runs", "schema_version": 1,
              "runs": [{"name": "one", "measurements": "gone.json", "framework": "f.json"}]})");
    CHECK_THROWS_WITH(load_validation_runs(manifest), Catch::Contains("/runs/0/measurements") && Catch::Contains("no such file"));
    write(R"({"kind": "roofsim-validation-runs", "schema_version": 1, "runs": []})");
    CHECK_THROWS_WITH(load_validation_runs(manifest), Catch::Contains("at least one run"));
    write(R"({"kind": "roofsim-validation", "schema_version": 1, "runs": []})");
    CHECK_THROWS_WITH(load_validation_runs(manifest), Catch::Contains("roofsim-validation-runs"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("the calibration never timed a GEMM or convolution shape of the validation cases", "[accuracy][held-out]") {
    // The cuBLAS and cuDNN sweeps keep their shapes apart from tools/validate's cases, so that the
    // accuracy above is what a user's own shapes get: predicted from measured neighbours and the
    // fitted models, not looked up. A sweep that grows to include a validation shape fails here.
    int sets = 0;
    for_each_measured_set([&](const ValidationRun& m) {
        ++sets;
        std::vector<std::string> timed;
        std::size_t checked = 0;
        const auto check = [&](const std::string& id, const KernelList& list) {
            for (const auto& k : list.kernels) {
                if (k.kind != KernelKind::gemm && k.kind != KernelKind::conv) continue;
                ++checked;
                if (timed_by_calibration(k, m.ctx)) timed.push_back(id + ": " + k.op.str() + " in " + k.layer.str());
            }
        };
        for (const auto& c : m.set.cases) check(c.id, lower(c.graph, c.options).kernels);
        if (!m.files.exported.empty()) {
            for (const auto& entry : std::filesystem::directory_iterator(m.files.exported)) {
                if (entry.path().extension() == ".json") check(entry.path().filename().string(), load_kernel_ir(entry.path()).list);
            }
        }
        INFO(m.set.origin << ": " << timed.size() << " of " << checked << " GEMM and convolution kernels timed by the calibration; first: "
                          << (timed.empty() ? std::string("none") : timed.front()));
        CHECK(checked > 1000);
        CHECK(timed.empty());
    });
    CHECK(sets >= 1);
}

TEST_CASE("a model case's host canary is read where the measurement recorded it", "[accuracy][validation]") {
    const ValidationSet set = two_model_cases("roofsim-canary-test.json",
                                              R"("host_canary_seconds": {"median": 7.5e-6, "min": 7e-6, "max": 8e-6, "samples": 5})");
    REQUIRE(set.cases.size() == 2);
    REQUIRE(set.cases[0].host_canary_seconds.has_value());
    CHECK(*set.cases[0].host_canary_seconds == Catch::Approx(7.5e-6));
    CHECK_FALSE(set.cases[1].host_canary_seconds.has_value());

    // The canary sets a case's host scale only when asked, against the profile's host speed.
    FrameworkProfile f;
    f.figures["eager_op_add"] = FrameworkFigure{10e-6, 10e-6, 10e-6, 1, "set by the test", std::nullopt};
    f.host_reference_seconds_per_op = Seconds(15e-6);
    test::add_missing_step_figures(f);
    CHECK(host_time_scale(set.cases[0], &f, HostSpeed::measured) == Catch::Approx(0.5));
    CHECK(host_time_scale(set.cases[0], &f, HostSpeed::profiled) == 1.0);
    CHECK(host_time_scale(set.cases[1], &f, HostSpeed::measured) == 1.0);  // no canary
    CHECK(host_time_scale(set.cases[0], nullptr, HostSpeed::measured) == 1.0);
    FrameworkProfile no_canary = f;
    no_canary.host_reference_seconds_per_op.reset();  // a probe that took no canary: no host speed to scale by
    CHECK(host_time_scale(set.cases[0], &no_canary, HostSpeed::measured) == 1.0);
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"));
    const auto measured = evaluate(set, ctx, &f, HostSpeed::measured);
    const auto profiled = evaluate(set, ctx, &f, HostSpeed::profiled);
    CHECK(measured[0].host_time_scale == Catch::Approx(0.5));
    CHECK(profiled[0].host_time_scale == 1.0);
    // On a slower host a model step takes longer: a host-paced one (b32, every op 60 us of host time
    // forward and backward) by nearly the swing, a GPU-paced one (b128) by less.
    for (const char* figure : {"layer_forward_add_autocast", "layer_backward_add_autocast"}) {
        f.figures[figure] = FrameworkFigure{60e-6, 60e-6, 60e-6, 1, "set by the test", std::nullopt};
    }
    const auto slow = evaluate(set, ctx, &f, HostSpeed::profiled);
    INFO("b32 " << slow[0].host_swing_effect << ", b128 " << slow[1].host_swing_effect);
    CHECK(slow[0].host_swing_effect > 0.8 * (validation_host_swing - 1.0));
    CHECK(slow[0].host_swing_effect <= validation_host_swing - 1.0 + 1e-9);
    CHECK(slow[1].host_swing_effect >= 0.0);
    CHECK(slow[1].host_swing_effect < slow[0].host_swing_effect);
}

TEST_CASE("a model written to a zoo graph's layers under its own name is predicted from that graph", "[accuracy][validation]") {
    const auto read = [](const std::string& model_info) {
        return load_validation_text("roofsim-layer-graph-test.json",
                                    R"({"kind": "roofsim-validation", "gpu": {"key": "h200-sxm", "name": "NVIDIA H200"},
                     "software": {"torch": "2.11.0"}, "date_utc": "2026-12-01T00:00:00+00:00", "layer_cases": [],
                     "model_cases": [{"id": "bert-encoder/b32xs128/amp-bf16", "model": "bert-encoder", "seq_len": 128,
                                      "precision": "amp-bf16", "batch": 32, "optimizer": "adamw",
                                      "step_seconds": {"median": 0.03})" +
                                        model_info + "}]}");
    };
    const ValidationSet named = read(R"(, "model_info": {"layer_graph": "bert-base"})");
    REQUIRE(named.cases.size() == 1);
    CHECK(named.cases[0].in_zoo);
    CHECK(named.cases[0].graph.name == "bert-base");
    CHECK(named.cases[0].graph.layers.size() == zoo::bert_base(128).layers.size());
    // Without the field, a name the zoo lacks is predicted from an exported IR only.
    const ValidationSet unnamed = read("");
    REQUIRE(unnamed.exported_only.size() == 1);
    CHECK_FALSE(unnamed.exported_only[0].in_zoo);
    // A graph the zoo lacks is an error naming the field, not a silent fallback.
    CHECK_THROWS_WITH(read(R"(, "model_info": {"layer_graph": "bert-huge"})"),
                      Catch::Contains("layer_graph") && Catch::Contains("not a zoo model"));
}

TEST_CASE("a model case's phases, each timed on its own, are read and predicted each on its own", "[accuracy][validation]") {
    const ValidationSet set = two_model_cases("roofsim-phases-test.json",
                                              R"("forward_seconds": {"median": 0.007}, "forward_backward_seconds": {"median": 0.019},
                                                 "optimizer_seconds": {"median": 0.002})");
    REQUIRE(set.cases.size() == 2);
    REQUIRE(set.cases[0].measured_phases.has_value());
    CHECK(set.cases[0].measured_phases->forward.value() == Catch::Approx(0.007));
    CHECK(set.cases[0].measured_phases->forward_backward.value() == Catch::Approx(0.019));
    CHECK(set.cases[0].measured_phases->optimizer.value() == Catch::Approx(0.002));
    CHECK_FALSE(set.cases[1].measured_phases.has_value());
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"));
    const auto errors = evaluate(set, ctx, nullptr, HostSpeed::profiled);
    REQUIRE(errors[0].predicted_phases.has_value());
    CHECK_FALSE(errors[1].predicted_phases.has_value());  // nothing measured to compare with
    // Each phase simulated on its own: the forward alone, then with the backward, the optimizer alone.
    PredictOptions o;
    o.lowering = set.cases[0].options;
    const Prediction whole = predict(set.cases[0].graph, ctx, o);
    const auto only = [&](auto keep) {
        KernelList part;
        for (const Kernel& k : whole.kernels.kernels) {
            if (keep(k.phase)) part.kernels.push_back(k);
        }
        return simulate(part, ctx, host_costs_from_launch_rate(ctx)).step_time.value();
    };
    const StandalonePhases& p = *errors[0].predicted_phases;
    CHECK(p.forward.value() == Catch::Approx(only([](Phase ph) { return ph == Phase::forward; })));
    CHECK(p.forward_backward.value() == Catch::Approx(only([](Phase ph) { return ph != Phase::optimizer; })));
    CHECK(p.optimizer.value() == Catch::Approx(only([](Phase ph) { return ph == Phase::optimizer; })));
    CHECK(p.forward < p.forward_backward);
    CHECK(p.optimizer.value() > 0);
    INFO("forward+backward " << p.forward_backward.value() << " optimizer " << p.optimizer.value() << " step " << whole.step_time.value());
    // on its own, no phase overlaps another (equal where the whole step's optimizer waits for nothing)
    CHECK((p.forward_backward + p.optimizer).value() >= whole.step_time.value() * (1 - 1e-12));
    // Without an optimizer, its phase takes nothing.
    o.lowering.optimizer.kind = OptimizerKind::none;
    CHECK(standalone_phases(predict(set.cases[0].graph, ctx, o), ctx, nullptr, o.lowering.optimizer, 1.0).optimizer.value() == 0.0);
}

TEST_CASE("a case's error keeps the prediction's host and GPU times; over runs, their median ratio", "[accuracy][validation]") {
    ValidationCase c;
    c.id = "linear/b8x256->256/fp32";
    c.measured_seconds = 200e-6;
    c.steady_state = true;
    Prediction p;
    p.host_time = Seconds(150e-6);
    p.gpu_time = Seconds(90e-6);
    p.gpu_gap_time = Seconds(10e-6);
    p.step_time = Seconds(400e-6);  // a steady-state case is compared with max(host, GPU), not the step
    const CaseError host_paced = case_error(c, p, false);
    CHECK(host_paced.predicted_host_seconds == Catch::Approx(150e-6));
    CHECK(host_paced.predicted_gpu_seconds == Catch::Approx(100e-6));
    CHECK(host_paced.predicted_seconds == Catch::Approx(150e-6));
    CHECK(host_paced.error == Catch::Approx(-0.25));
    CHECK(host_paced.host_bound());
    p.host_time = Seconds(50e-6);
    const CaseError gpu_paced = case_error(c, p, false);
    CHECK(gpu_paced.predicted_seconds == Catch::Approx(100e-6));
    CHECK_FALSE(gpu_paced.host_bound());
    p.host_time = Seconds(80e-6);
    const CaseError third = case_error(c, p, false);

    std::vector<CaseOverRuns> runs;
    detail::gather(runs, {host_paced, gpu_paced, third});  // three runs of one case
    REQUIRE(runs.size() == 1);
    CHECK(runs[0].host_over_gpu.size() == 3);
    CHECK(runs[0].median_host_over_gpu() == Catch::Approx(0.8));  // of 1.5, 0.5 and 0.8
    CHECK_FALSE(runs[0].host_bound());                             // one run of three

    // Checked as host-paced where the host's swing moves the step by a twentieth or more, in the median run.
    CaseError swing_a = host_paced, swing_b = gpu_paced, swing_c = third;
    swing_a.host_swing_effect = 0.20;
    swing_b.host_swing_effect = 0.01;
    swing_c.host_swing_effect = 0.04;
    std::vector<CaseOverRuns> swung;
    detail::gather(swung, {swing_a, swing_b, swing_c});
    CHECK(swung[0].median_host_swing_effect() == Catch::Approx(0.04));
    CHECK_FALSE(swung[0].host_sensitive());
    swing_c.host_swing_effect = 0.06;
    swung.clear();
    detail::gather(swung, {swing_a, swing_b, swing_c});
    CHECK(swung[0].host_sensitive());

    // A layer with no GPU work (a view): host-paced, its ratio infinite, never NaN.
    p.gpu_time = Seconds(0);
    p.gpu_gap_time = Seconds(0);
    const CaseError view = case_error(c, p, false);
    std::vector<CaseOverRuns> views;
    detail::gather(views, {view, view, gpu_paced});
    CHECK(views[0].host_bound());
    CHECK(std::isinf(views[0].median_host_over_gpu()));
    CHECK(detail::quantile({1.0, 2.0}, 0.5) == Catch::Approx(1.5));
    CHECK(std::isinf(detail::quantile({1.0, 2.0, std::numeric_limits<double>::infinity()}, 0.9)));
}

TEST_CASE("a model case timed in passes keeps each pass's median step, split as the file says", "[accuracy][validation]") {
    // One ResNet-50 b32 case: its step's six samples, three passes of two (a fast pass, a slow one,
    // a middle one), with `fields` added to the case and `settings` at the top of the file.
    const auto read = [](const std::string& fields, const std::string& settings) {
        return load_validation_text("roofsim-passes-test.json",
                                    R"({"kind": "roofsim-validation", "gpu": {"key": "h200-sxm", "name": "NVIDIA H200"},
                     "software": {"torch": "2.11.0"}, "date_utc": "2026-12-03T00:00:00+00:00", "layer_cases": [])" +
                                        settings + R"(, "model_cases": [
                       {"id": "resnet50/b32x224/amp-bf16", "model": "resnet50", "image_size": 224, "precision": "amp-bf16",
                        "batch": 32, "optimizer": "sgd",
                        "step_seconds": {"median": 0.022, "values": [0.020, 0.021, 0.030, 0.026, 0.022, 0.024]})" +
                                        fields + "}]}");
    };
    // Each pass's count recorded: medians 20.5, 28 and 23 ms; the slowest pass over the fastest, less 1.
    const ValidationSet counted = read(R"(, "rounds": 3, "round_samples": [2, 2, 2])", "");
    REQUIRE(counted.cases.size() == 1);
    const ValidationCase& c = counted.cases[0];
    REQUIRE(c.measured_pass_step_seconds.size() == 3);
    CHECK(c.measured_pass_step_seconds[0] == Catch::Approx(0.0205));
    CHECK(c.measured_pass_step_seconds[1] == Catch::Approx(0.028));
    CHECK(c.measured_pass_step_seconds[2] == Catch::Approx(0.023));
    REQUIRE(c.pass_spread().has_value());
    CHECK(*c.pass_spread() == Catch::Approx(0.028 / 0.0205 - 1));
    // Uneven passes, split where the counts say: [20, 21, 30] and [26, 22, 24] ms.
    const ValidationSet uneven = read(R"(, "rounds": 2, "round_samples": [3, 3])", "");
    REQUIRE(uneven.cases[0].measured_pass_step_seconds.size() == 2);
    CHECK(uneven.cases[0].measured_pass_step_seconds[0] == Catch::Approx(0.021));
    CHECK(uneven.cases[0].measured_pass_step_seconds[1] == Catch::Approx(0.024));
    const ValidationSet lopsided = read(R"(, "rounds": 2, "round_samples": [1, 5])", "");
    CHECK(lopsided.cases[0].measured_pass_step_seconds[0] == Catch::Approx(0.020));
    CHECK(lopsided.cases[0].measured_pass_step_seconds[1] == Catch::Approx(0.024));
    // A file from before the counts: split evenly only where every pass took the most a pass takes.
    const std::string at_most_two = R"(, "method_settings": {"model_repeats": 2})";
    const ValidationSet full = read(R"(, "rounds": 3)", at_most_two);
    CHECK(full.cases[0].measured_pass_step_seconds == c.measured_pass_step_seconds);
    const ValidationSet short_passes = read(R"(, "rounds": 2)", at_most_two);  // 6 samples, not 2 x 2
    CHECK(short_passes.cases[0].measured_pass_step_seconds.empty());
    CHECK_FALSE(short_passes.cases[0].pass_spread().has_value());
    CHECK(read(R"(, "rounds": 3)", "").cases[0].measured_pass_step_seconds.empty());  // no limit recorded
    CHECK(read("", at_most_two).cases[0].measured_pass_step_seconds.empty());         // one pass
    // Counts that do not fit the samples are an error naming the field, not a guess.
    CHECK_THROWS_WITH(read(R"(, "rounds": 2, "round_samples": [2, 2])", ""),
                      Catch::Contains("round_samples") && Catch::Contains("summing to step_seconds' 6 values"));
    CHECK_THROWS_WITH(read(R"(, "rounds": 3, "round_samples": [3, 3])", ""),
                      Catch::Contains("round_samples") && Catch::Contains("one sample count per round (3)"));
    CHECK_THROWS_WITH(read(R"(, "rounds": 2, "round_samples": [6, 0])", ""), Catch::Contains("round_samples"));

    // Each pass's canary, split as the step's samples are: medians 8, 11 and 9 us.
    const std::string canaries = R"(, "host_canary_seconds": {"median": 9e-6, "values": [7e-6, 9e-6, 11e-6, 11e-6, 9e-6, 9e-6]})";
    const ValidationSet with_canaries = read(R"(, "rounds": 3, "round_samples": [2, 2, 2])" + canaries, "");
    const ValidationCase& cc = with_canaries.cases[0];
    REQUIRE(cc.measured_pass_canary_seconds.size() == 3);
    CHECK(cc.measured_pass_canary_seconds[0] == Catch::Approx(8e-6));
    CHECK(cc.measured_pass_canary_seconds[1] == Catch::Approx(11e-6));
    CHECK(cc.measured_pass_canary_seconds[2] == Catch::Approx(9e-6));
    CHECK(cc.measured_pass_step_seconds == c.measured_pass_step_seconds);
    CHECK(c.measured_pass_canary_seconds.empty());  // no canary recorded
    // A canary that is not one per step sample is not split (the step still is).
    const ValidationSet odd_canaries =
        read(R"(, "rounds": 3, "round_samples": [2, 2, 2], "host_canary_seconds": {"median": 9e-6, "values": [7e-6, 9e-6]})", "");
    CHECK(odd_canaries.cases[0].measured_pass_canary_seconds.empty());
    CHECK(odd_canaries.cases[0].measured_pass_step_seconds.size() == 3);

    // Each pass against a prediction of 24 ms at the profile's host speed (10 us per add), 2 ms longer
    // per tenth slower: passes of 20.5, 28 and 23 ms at canaries of 8, 11 and 9 us.
    FrameworkProfile profile;
    profile.host_reference_seconds_per_op = Seconds(10e-6);
    std::vector<double> scales_asked;
    const auto predicted = [&](double scale) {
        scales_asked.push_back(scale);
        return 0.024 + 0.020 * (scale - 1.0);
    };
    const std::vector<PassError> passes = detail::pass_errors(cc, &profile, predicted);
    REQUIRE(passes.size() == 3);
    CHECK(passes[1].pass == 1);
    CHECK(passes[1].measured_seconds == Catch::Approx(0.028));
    CHECK(passes[0].error_at_profiled == Catch::Approx(0.024 / 0.0205 - 1));
    CHECK(passes[1].error_at_profiled == Catch::Approx(0.024 / 0.028 - 1));
    REQUIRE(passes[1].host_time_scale.has_value());
    CHECK(*passes[1].host_time_scale == Catch::Approx(1.1));
    CHECK(*passes[0].error_at_canary == Catch::Approx(0.020 / 0.0205 - 1));
    CHECK(*passes[1].error_at_canary == Catch::Approx(0.026 / 0.028 - 1));
    CHECK(*passes[2].error_at_canary == Catch::Approx(0.022 / 0.023 - 1));
    CHECK(scales_asked.size() == 4);  // the profile's speed once, then each pass's
    // Without the passes' canaries, or without the profile's host speed: no error at the canary.
    const std::vector<PassError> no_canary = detail::pass_errors(c, &profile, predicted);
    REQUIRE(no_canary.size() == 3);
    CHECK_FALSE(no_canary[0].error_at_canary.has_value());
    CHECK_FALSE(detail::pass_errors(cc, nullptr, predicted)[2].host_time_scale.has_value());
    CHECK(detail::pass_errors(short_passes.cases[0], &profile, predicted).empty());

    // Over runs, the median of the runs' spreads where known.
    CaseError first, second, unknown;
    first.c = &c;  // 0.366
    ValidationCase flat = c;
    flat.measured_pass_step_seconds = {0.020, 0.021};
    second.c = &flat;  // 0.05
    ValidationCase one_pass = c;
    one_pass.measured_pass_step_seconds.clear();
    unknown.c = &one_pass;
    std::vector<CaseOverRuns> runs;
    second.passes = passes;
    detail::gather(runs, {first, second, unknown});
    REQUIRE(runs.size() == 1);
    CHECK(runs[0].pass_spreads.size() == 2);
    CHECK(*runs[0].median_pass_spread() == Catch::Approx((0.028 / 0.0205 - 1 + 0.05) / 2));
    // Each pass keeps which of the case's runs it came from.
    REQUIRE(runs[0].passes.size() == 3);
    CHECK(runs[0].passes[0].run == 1);
    CHECK(runs[0].passes[2].run == 1);
    CHECK(runs[0].passes[2].pass == 2);
}

// The H200 as if it had not been measured: its datasheet ceilings (and the kernel models of its
// family, which its own kernel corpus fitted) with each run's measured host costs, against the same
// validation runs. The bound: a median of 10 % on the corpus. Layers: 6.7 % (5.6 % on the measured
// profile); model steps: median 12.9 % (10.3 % measured), over the bound (docs/validation.md).
TEST_CASE("the H200 from its datasheet alone: layers within the 10 % median, model steps not yet", "[accuracy]") {
    const RunsEvaluation v = evaluate_runs(load_validation_runs(runs_manifest), HostSpeed::profiled, true);
    const RunsEvaluation& measured = evaluated_runs();
    const auto layers = [](const CaseOverRuns& c) { return !c.model; };
    const auto models = [](const CaseOverRuns& c) { return c.model; };
    const double layer_median = median_error_quantile(v.cases, 0.5, layers);
    CHECK(layer_median <= 0.10);   // the bound
    CHECK(layer_median <= 0.068);  // 6.7 %
    CHECK(layer_median > median_error_quantile(measured.cases, 0.5, layers));  // the measured profile does better
    CHECK(median_error_quantile(v.cases, 0.5, models) <= 0.13);  // 12.9 %: a known miss of the 10 %
}
