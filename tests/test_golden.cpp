// Refactoring guard: the predictions of the zoo models, the optimizer variants, the shipped graph and
// IR files and every validation case, bit for bit as recorded in tests/data/golden/predictions.json
// (last written when the GEMM kernel model of data/kernel_models/ replaced the fitted wave/depth model).
// A change that is meant to move predictions (a named fix or a better cost model) writes the file
// anew with `ROOFSIM_WRITE_GOLDEN=1 test_golden` and names the change in its commit; any other change
// keeps it.
#include "catch.hpp"

#include <roofsim/roofsim.hpp>
#include <validate/validation.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

using namespace roofsim;
using nlohmann::json;

namespace {
const std::filesystem::path root = ROOFSIM_SOURCE_DIR;
const std::filesystem::path golden_path = root / "tests" / "data" / "golden" / "predictions.json";

json step_numbers(const Prediction& p, bool with_layers) {
    json j = {{"step", p.step_time.value()}, {"zero_grad", p.zero_grad_time.value()}, {"forward", p.forward_time.value()},
              {"backward", p.backward_time.value()}, {"optimizer", p.optimizer_time.value()}, {"gpu", p.gpu_time.value()},
              {"gpu_gap", p.gpu_gap_time.value()}, {"host", p.host_time.value()}, {"parameters", p.parameters},
              {"peak_bytes", p.memory.peak.value()}, {"activation_bytes", p.memory.activations.value()},
              {"flagged", p.flagged_kernels}, {"kernels", p.kernels.kernels.size()}};
    if (with_layers) {
        json layers = json::array();
        for (const auto& r : p.layers) {
            layers.push_back({std::string(r.layer), r.forward_gpu.value(), r.backward_gpu.value(), r.forward_host.value(),
                              r.backward_host.value(), r.flops.value(), r.bytes.value()});
        }
        j["layers"] = layers;
    }
    return j;
}

json zoo_predictions() {
    json zoo = json::array();
    struct Gpu {
        const char* key;
        const char* profile;  ///< measured, datasheet or derived
    };
    const FrameworkProfile* fw = find_builtin_framework_profile("h200-sxm");
    for (const Gpu& g : {Gpu{"h200-sxm", "measured"}, Gpu{"h200-sxm", "datasheet"}, Gpu{"a100-80gb-sxm", "derived"},
                         Gpu{"rtx-3090", "derived"}}) {
        const std::string_view profile = g.profile;
        const GpuSpec& spec = gpu_or_throw(g.key);
        const CostContext ctx = profile == "derived"  ? make_default_cost_context(spec, fw)
                                : profile == "measured" ? make_cost_context(spec, find_builtin_calibration(g.key), fw)
                                                        : make_cost_context(spec, nullptr, fw);
        REQUIRE(ctx.ceilings.kind == profile);
        for (std::string_view model : zoo::model_names) {
            for (PrecisionMode mode : all_precision_modes) {
                PredictOptions o;
                o.lowering.batch = model == "resnet50" ? 64 : model == "bert-base" ? 32 : 4;
                o.lowering.precision = mode;
                o.lowering.optimizer.kind = model == "resnet50" ? OptimizerKind::sgd : OptimizerKind::adamw;
                o.framework = fw;
                const Prediction p = predict(*zoo::model(model), ctx, o);
                zoo.push_back({{"model", model}, {"gpu", g.key}, {"profile", g.profile}, {"precision", to_string(mode)},
                               {"batch", o.lowering.batch},
                               {"optimizer", o.lowering.optimizer.kind == OptimizerKind::sgd ? "sgd" : "adamw"},
                               {"prediction", step_numbers(p, profile == "measured" && model != "bert-large-squad")}});
            }
        }
    }
    return zoo;
}

json optimizer_variants(const CostContext& ctx, const FrameworkProfile* fw) {
    json variants = json::array();
    for (auto kind : {OptimizerKind::none, OptimizerKind::sgd, OptimizerKind::adam, OptimizerKind::adamw}) {
        for (bool fused : {false, true}) {
            for (bool wd : {true, false}) {
                for (double scale : {1.0, 1.5}) {
                    PredictOptions o;
                    o.lowering.batch = 16;
                    o.lowering.precision = PrecisionMode::amp_bf16;
                    o.lowering.optimizer.kind = kind;
                    o.lowering.optimizer.fused = fused;
                    o.lowering.optimizer.weight_decay = wd;
                    o.framework = fw;
                    o.host_time_scale = scale;
                    const Prediction p = predict(*zoo::model("bert-base", 128), ctx, o);
                    variants.push_back({{"model", "bert-base"}, {"optimizer", static_cast<int>(kind)}, {"fused", fused},
                                        {"weight_decay", wd}, {"host_time_scale", scale}, {"prediction", step_numbers(p, false)}});
                }
            }
        }
    }
    return variants;
}

json file_predictions(const CostContext& ctx, const FrameworkProfile* fw) {
    json files = json::array();
    {
        PredictOptions o;
        o.lowering.batch = 256;
        o.framework = fw;
        const Prediction p = predict(load_graph(root / "data/models/mlp.json"), ctx, o);
        files.push_back({{"file", "data/models/mlp.json"}, {"prediction", step_numbers(p, true)}});
    }
    std::vector<std::string> irs = {"tests/data/ir-small.json"};
    for (const auto& e : std::filesystem::directory_iterator(root / "data/validation/exported/h200-sxm-2026-12-03")) {
        if (e.path().extension() == ".json") irs.push_back("data/validation/exported/h200-sxm-2026-12-03/" + e.path().filename().string());
    }
    for (const std::string& f : irs) {
        const KernelIr ir = load_kernel_ir(root / f);
        files.push_back({{"file", f}, {"prediction", step_numbers(predict(ir, ctx, framework_options(fw)), true)}});
    }
    std::sort(files.begin(), files.end(), [](const json& a, const json& b) { return a["file"] < b["file"]; });
    return files;
}

json validation_predictions() {
    json cases = json::array();
    for (const auto& files : load_validation_runs(root / "data/validation/runs.json")) {
        const ValidationRun run = load_validation_run(files);
        const auto add = [&](const std::vector<CaseError>& errors, const char* path) {
            for (const auto& e : errors) {
                json c = {{"run", files.name}, {"path", path}, {"host_speed", "profiled"}, {"id", e.c->id},
                          {"predicted", e.predicted_seconds}, {"host", e.predicted_host_seconds},
                          {"gpu", e.predicted_gpu_seconds}, {"swing", e.host_swing_effect}};
                if (e.predicted_peak_bytes) c["peak_bytes"] = *e.predicted_peak_bytes;
                if (e.predicted_phases) {
                    c["phases"] = {e.predicted_phases->forward.value(), e.predicted_phases->forward_backward.value(),
                                   e.predicted_phases->optimizer.value()};
                }
                cases.push_back(c);
            }
        };
        add(evaluate(run.set, run.ctx, &run.framework, HostSpeed::profiled), "graph");
        if (!files.exported.empty()) {
            add(evaluate_exported(run.set, files.exported, run.ctx, &run.framework, HostSpeed::profiled), "exported");
        }
    }
    return cases;
}

json all_predictions() {
    const FrameworkProfile* fw = find_builtin_framework_profile("h200-sxm");
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"), find_builtin_calibration("h200-sxm"), fw);
    return {{"kind", "roofsim-golden-predictions"},
            {"schema_version", 1},
            {"optimizer_variants", optimizer_variants(ctx, fw)},
            {"files", file_predictions(ctx, fw)},
            {"zoo", zoo_predictions()},
            {"validation", validation_predictions()}};
}

/// The first place where two documents differ, as a JSON pointer with both values; empty where equal.
std::string first_difference(const json& expected, const json& actual, const std::string& at = "") {
    if (expected.is_number() && actual.is_number()) {
        const bool same = expected.is_number_float() || actual.is_number_float()
                              ? expected.get<double>() == actual.get<double>()
                              : expected.get<std::int64_t>() == actual.get<std::int64_t>();
        return same ? std::string() : at + ": expected " + expected.dump() + ", got " + actual.dump();
    }
    if (expected.type() != actual.type() || expected.size() != actual.size()) {
        return at + ": expected " + expected.dump().substr(0, 200) + ", got " + actual.dump().substr(0, 200);
    }
    if (expected.is_object()) {
        for (auto it = expected.begin(); it != expected.end(); ++it) {
            if (!actual.contains(it.key())) return at + "/" + it.key() + ": missing";
            if (auto d = first_difference(it.value(), actual[it.key()], at + "/" + it.key()); !d.empty()) return d;
        }
        return {};
    }
    if (expected.is_array()) {
        for (std::size_t i = 0; i < expected.size(); ++i) {
            if (auto d = first_difference(expected[i], actual[i], at + "/" + std::to_string(i)); !d.empty()) return d;
        }
        return {};
    }
    return expected == actual ? std::string() : at + ": expected " + expected.dump() + ", got " + actual.dump();
}
}  // namespace

TEST_CASE("predictions are bit for bit the recorded ones", "[golden]") {
    const json actual = all_predictions();
    if (std::getenv("ROOFSIM_WRITE_GOLDEN")) {
        std::ofstream(golden_path) << actual.dump(0) << "\n";
        WARN("wrote " << golden_path.string());
        return;
    }
    std::ifstream in(golden_path);
    REQUIRE(in.good());
    const json expected = json::parse(in);
    for (const char* section : {"zoo", "optimizer_variants", "files", "validation"}) {
        INFO(section);
        REQUIRE(expected.at(section).size() > 0);
        CHECK(first_difference(expected.at(section), actual.at(section), std::string("/") + section) == "");
    }
}
