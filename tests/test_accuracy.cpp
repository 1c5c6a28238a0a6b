// Accuracy against real PyTorch: every stored measurement set under data/validation/ whose GPU has a
// built-in calibration is predicted and compared. The bounds below are regression bounds at the
// accuracy measured when they were set (docs/NOTES.md); the issue's targets are tighter (layers:
// median 10%, 90th percentile 25%; models: 10% each; peak memory 15%) and are reported, not yet met.
#include "catch.hpp"

#include <roofsim/builtin_profiles.hpp>
#include <roofsim/validation.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace roofsim;

namespace {
struct Bounds {
    double layer_median, layer_p90, model_worst, memory_worst;
};
// Regression bounds (2026-11-30, H200 validation set): measured accuracy plus a margin. Model steps
// the prediction finds paced by the GPU have their own bound; those paced by the host move with the
// host's speed when they were measured (by up to a third between runs: docs/NOTES.md) and have a
// wide one.
constexpr Bounds regression_bounds{ROOFSIM_ACC_LAYER_MEDIAN, ROOFSIM_ACC_LAYER_P90, ROOFSIM_ACC_MODEL_WORST, ROOFSIM_ACC_MEMORY_WORST};

/// A stored measurement set with the built-in profiles of its GPU (calibration and framework).
struct MeasuredSet {
    ValidationSet set;
    const FrameworkProfile* framework;
    CostContext ctx;
};

/// Every data/validation/*.json whose GPU has a built-in calibration; `with_set(path, measured)` for each.
template <class F>
int for_each_measured_set(F&& with_set) {
    const auto dir = std::filesystem::path(ROOFSIM_SOURCE_DIR) / "data" / "validation";
    int sets = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        if (entry.path().extension() != ".json") continue;
        ValidationSet set = load_validation(entry.path());
        const Calibration* calibration = find_builtin_calibration(set.gpu_key);
        if (!calibration) continue;
        ++sets;
        const FrameworkProfile* framework = find_builtin_framework_profile(set.gpu_key);
        CostContext ctx = make_cost_context(gpu_or_throw(set.gpu_key), calibration, framework);
        const MeasuredSet m{std::move(set), framework, std::move(ctx)};
        with_set(entry.path(), m);
    }
    return sets;
}
}  // namespace

TEST_CASE("predictions stay within the accuracy bounds of the stored PyTorch measurements", "[accuracy]") {
    const int sets = for_each_measured_set([](const std::filesystem::path&, const MeasuredSet& m) {
        const ValidationSet& set = m.set;
        const auto errors = evaluate(set, m.ctx, m.framework, HostSpeed::profiled);
        auto layers = [](const CaseError& e) { return !e.c->model; };
        const double median = error_quantile(errors, 0.5, layers);
        const double p90 = error_quantile(errors, 0.9, layers);
        std::size_t layer_cases = 0, gpu_paced = 0;
        double gpu_worst = 0, host_worst = 0, memory_worst = 0;
        for (const auto& e : errors) {
            if (!e.c->model) { ++layer_cases; continue; }
            (e.host_bound ? host_worst : gpu_worst) = std::max(e.host_bound ? host_worst : gpu_worst, std::abs(e.error));
            gpu_paced += e.host_bound ? 0 : 1;
            if (e.memory_error) memory_worst = std::max(memory_worst, std::abs(*e.memory_error));
            std::printf("  %-32s measured %9.3f ms predicted %9.3f ms (%+.1f%%, paced by the %s)\n", e.c->id.c_str(),
                        e.c->measured_seconds * 1e3, e.predicted_seconds * 1e3, 100 * e.error, e.host_bound ? "host" : "GPU");
        }
        std::printf("%s: %zu layer cases, median |error| %.1f%%, p90 %.1f%%; models worst %.1f%% (GPU-paced), %.1f%% (host-paced); "
                    "peak memory worst %.1f%%\n",
                    set.origin.c_str(), layer_cases, 100 * median, 100 * p90, 100 * gpu_worst, 100 * host_worst, 100 * memory_worst);
        INFO(set.origin);
        CHECK(layer_cases >= 60);
        CHECK(gpu_paced >= 3);
        CHECK(median <= regression_bounds.layer_median);
        CHECK(p90 <= regression_bounds.layer_p90);
        CHECK(gpu_worst <= regression_bounds.model_worst);
        CHECK(host_worst <= ROOFSIM_ACC_MODEL_WORST_HOST);
        CHECK(memory_worst <= regression_bounds.memory_worst);
    });
    CHECK(sets >= 1);
}

TEST_CASE("model steps predicted from IRs exported from the measured models stay within their bounds", "[accuracy][export]") {
    // data/validation/exported/<set>/: the validation models exported by tools/roofsim_export on the
    // machine of the measurements (tools/validate/device-validate.sh), one IR per model case.
    int sets = 0;
    for_each_measured_set([&](const std::filesystem::path& path, const MeasuredSet& m) {
        const auto exported = path.parent_path() / "exported" / path.stem();
        if (!std::filesystem::is_directory(exported)) return;
        ++sets;
        const ValidationSet& set = m.set;
        const auto errors = evaluate_exported(set, exported, m.ctx, m.framework, HostSpeed::profiled);
        double gpu_worst = 0, host_worst = 0, memory_worst = 0;
        for (const auto& e : errors) {
            (e.host_bound ? host_worst : gpu_worst) = std::max(e.host_bound ? host_worst : gpu_worst, std::abs(e.error));
            REQUIRE(e.memory_error);
            memory_worst = std::max(memory_worst, std::abs(*e.memory_error));
            std::printf("  exported %-32s measured %9.3f ms predicted %9.3f ms (%+.1f%%, paced by the %s), peak memory %+.1f%%\n",
                        e.c->id.c_str(), e.c->measured_seconds * 1e3, e.predicted_seconds * 1e3, 100 * e.error,
                        e.host_bound ? "host" : "GPU", 100 * *e.memory_error);
        }
        INFO(set.origin);
        CHECK(errors.size() == set.exported_only.size() + static_cast<std::size_t>(std::count_if(
                                   set.cases.begin(), set.cases.end(), [](const ValidationCase& c) { return c.model; })));
        CHECK(gpu_worst <= ROOFSIM_ACC_EXPORT_MODEL_WORST);
        CHECK(host_worst <= ROOFSIM_ACC_EXPORT_MODEL_WORST_HOST);
        CHECK(memory_worst <= ROOFSIM_ACC_EXPORT_MEMORY_WORST);
    });
    CHECK(sets >= 1);
}

TEST_CASE("the calibration never timed a GEMM or convolution shape of the validation cases", "[accuracy][held-out]") {
    // The cuBLAS and cuDNN sweeps keep their shapes apart from tools/validate's cases, so that the
    // accuracy above is what a user's own shapes get: predicted from measured neighbours and the
    // fitted models, not looked up. A sweep that grows to include a validation shape fails here.
    int sets = 0;
    for_each_measured_set([&](const std::filesystem::path& path, const MeasuredSet& m) {
        ++sets;
        std::vector<std::string> timed;
        std::size_t checked = 0;
        const auto check = [&](const std::string& id, const KernelList& list) {
            for (const auto& k : list.kernels) {
                if (k.kind != KernelKind::gemm && k.kind != KernelKind::conv) continue;
                ++checked;
                if (timed_by_calibration(k, m.ctx)) timed.push_back(id + ": " + k.op + " in " + k.layer);
            }
        };
        for (const auto& c : m.set.cases) check(c.id, lower(c.graph, c.options).kernels);
        const auto exported = path.parent_path() / "exported" / path.stem();
        if (std::filesystem::is_directory(exported)) {
            for (const auto& entry : std::filesystem::directory_iterator(exported)) {
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
    const auto path = std::filesystem::temp_directory_path() / "roofsim-canary-test.json";
    {
        std::ofstream f(path);
        f << R"({"kind": "roofsim-validation", "gpu": {"key": "h200-sxm", "name": "NVIDIA H200"},
                 "software": {"torch": "2.11.0"}, "date_utc": "2026-11-30T00:00:00+00:00", "layer_cases": [],
                 "model_cases": [
                   {"id": "resnet50/b32x224/amp-bf16", "model": "resnet50", "image_size": 224, "precision": "amp-bf16",
                    "batch": 32, "optimizer": "sgd", "step_seconds": {"median": 0.021},
                    "host_canary_seconds": {"median": 7.5e-6, "min": 7e-6, "max": 8e-6, "samples": 5}},
                   {"id": "resnet50/b128x224/amp-bf16", "model": "resnet50", "image_size": 224, "precision": "amp-bf16",
                    "batch": 128, "optimizer": "sgd", "step_seconds": {"median": 0.056}}]})";
    }
    const ValidationSet set = load_validation(path);
    std::filesystem::remove(path);
    REQUIRE(set.cases.size() == 2);
    REQUIRE(set.cases[0].host_canary_seconds.has_value());
    CHECK(*set.cases[0].host_canary_seconds == Catch::Approx(7.5e-6));
    CHECK_FALSE(set.cases[1].host_canary_seconds.has_value());

    // The canary sets a case's host scale only when asked, against the profile's host speed.
    FrameworkProfile f;
    f.figures["eager_op_add"] = FrameworkFigure{10e-6, 10e-6, 10e-6, 1, "set by the test", std::nullopt};
    f.host_reference_seconds_per_op = Seconds(15e-6);
    CHECK(host_time_scale(set.cases[0], &f, HostSpeed::measured) == Catch::Approx(0.5));
    CHECK(host_time_scale(set.cases[0], &f, HostSpeed::profiled) == 1.0);
    CHECK(host_time_scale(set.cases[1], &f, HostSpeed::measured) == 1.0);  // no canary
    CHECK(host_time_scale(set.cases[0], nullptr, HostSpeed::measured) == 1.0);
    f.host_reference_seconds_per_op.reset();  // a profile from before the canary: its eager_op_add
    CHECK(host_time_scale(set.cases[0], &f, HostSpeed::measured) == Catch::Approx(0.75));
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"));
    const auto measured = evaluate(set, ctx, &f, HostSpeed::measured);
    const auto profiled = evaluate(set, ctx, &f, HostSpeed::profiled);
    CHECK(measured[0].host_time_scale == Catch::Approx(0.75));
    CHECK(profiled[0].host_time_scale == 1.0);
}
