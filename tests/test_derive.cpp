// Derived profiles (profile/derive.hpp, cost/default_context.hpp): a GPU without a measured profile
// takes one derived from a measured GPU's by the written rules; each figure below is recomputed here
// from the two datasheets and the reference's measured figures, by the rule's own arithmetic.
#include "catch.hpp"
#include "thrown.hpp"

#include <roofsim/roofsim.hpp>

#include <algorithm>
#include <string>
#include <vector>

using namespace roofsim;
using Catch::Approx;

namespace {
const Calibration& h200() { return *find_builtin_calibration("h200-sxm"); }
const GpuSpec& spec(const char* key) { return gpu_or_throw(key); }
}  // namespace

TEST_CASE("D1-D4: bandwidths, curves and compute ceilings scale by the datasheets' ratios") {
    const GpuSpec& a100 = spec("a100-80gb-sxm");
    const GpuSpec& ref = spec("h200-sxm");
    const Calibration d = derive_calibration(a100, ref, h200());
    const double dram = 2039e9 / 4800e9;                       // the two datasheets' DRAM bandwidth (GB/s)
    const double sm_clock = (108 * 1410e6) / (132 * 1980e6);  // SMs x boost clock
    REQUIRE(a100.memory_bandwidth.value.value() == Approx(2039e9));
    REQUIRE(ref.memory_bandwidth.value.value() == Approx(4800e9));
    REQUIRE(a100.sm_count.value == 108);
    REQUIRE(a100.boost_clock.value.value() == Approx(1410e6));
    REQUIRE(ref.boost_clock.value.value() == Approx(1980e6));
    const auto& measured = h200().bandwidth.at(MemoryLevel::dram).at(AccessPattern::copy);
    CHECK(d.bandwidth.at(MemoryLevel::dram).at(AccessPattern::copy).median == Approx(measured.median * dram));
    CHECK(d.bandwidth.at(MemoryLevel::dram).at(AccessPattern::copy).samples == measured.samples);
    CHECK(d.bandwidth.at(MemoryLevel::l2).at(AccessPattern::read).median ==
          Approx(h200().bandwidth.at(MemoryLevel::l2).at(AccessPattern::read).median * sm_clock));

    // D3: the step moves with the L2 size; points beyond it take the DRAM ratio, below it the L2 one
    const double l2 = a100.l2_size.value.value() / ref.l2_size.value.value();
    REQUIRE(d.l2_to_dram_step_bytes);
    CHECK(*d.l2_to_dram_step_bytes == Approx(*h200().l2_to_dram_step_bytes * l2));
    const auto& curve = h200().bandwidth_curve.at(AccessPattern::copy);
    const auto& derived_curve = d.bandwidth_curve.at(AccessPattern::copy);
    REQUIRE(derived_curve.size() == curve.size());
    CHECK(derived_curve.front().working_set_bytes == Approx(curve.front().working_set_bytes * l2));
    CHECK(derived_curve.front().bytes_per_second == Approx(curve.front().bytes_per_second * sm_clock));
    CHECK(derived_curve.back().bytes_per_second == Approx(curve.back().bytes_per_second * dram));

    // D4: bf16 at 312 TFLOPS x the fraction of 989 the H200 reached (cuBLAS, its better figure)
    const double reached = compute_ceiling(h200(), ComputeUnit::bf16_tensor)->value();
    REQUIRE(ref.peak(ComputeUnit::bf16_tensor)->value() == Approx(989e12).epsilon(0.01));
    CHECK(compute_ceiling(d, ComputeUnit::bf16_tensor)->value() ==
          Approx(a100.peak(ComputeUnit::bf16_tensor)->value() * reached / ref.peak(ComputeUnit::bf16_tensor)->value()));
    CHECK(compute_ceiling(d, ComputeUnit::bf16_tensor)->value() < a100.peak(ComputeUnit::bf16_tensor)->value());
    // a unit the target's datasheet lacks is not derived (A100: no FP8)
    CHECK_FALSE(compute_ceiling(d, ComputeUnit::fp8_tensor));

    // D5-D7: launch figures carried, no sweeps
    CHECK(d.launch_interval_seconds->median == h200().launch_interval_seconds->median);
    CHECK(d.gemm_sweep.empty());
    CHECK(d.conv_sweep.empty());
    CHECK(d.collectives.empty());
    CHECK(d.device.gpu_key == "a100-80gb-sxm");
    CHECK(d.device.sm_count == 108);
}

TEST_CASE("a derived profile says so: its provenance, its rules, and a JSON round trip") {
    const Calibration d = derive_calibration(spec("rtx-a6000"), spec("h200-sxm"), h200());
    REQUIRE(d.derivation);
    CHECK(d.derivation->reference_key == "h200-sxm");
    CHECK(d.derivation->rules.size() == 7);
    CHECK(provenance(d).rfind("derived from h200-sxm (measured on NVIDIA H200", 0) == 0);
    CHECK(has(provenance(d), "by rules D1,D2,D3,D4,D5,D6,D7"));
    CHECK_FALSE(h200().derivation);
    CHECK(provenance(h200()).rfind("measured on", 0) == 0);

    const Calibration back = calibration_from_json(to_json(d), "derived.json");
    REQUIRE(back.derivation);
    CHECK(back.derivation->rules == d.derivation->rules);
    CHECK(back.derivation->reference == d.derivation->reference);
    CHECK(compute_ceiling(back, ComputeUnit::tf32_tensor)->value() == Approx(compute_ceiling(d, ComputeUnit::tf32_tensor)->value()));

    auto json = to_json(d);
    json["derivation"]["rules"] = nlohmann::json::array();
    CHECK(has(thrown_by([&] { (void)calibration_from_json(json, "derived.json"); }), "derived.json"));
    CHECK(has(thrown_by([&] { (void)calibration_from_json(json, "derived.json"); }), "at least one rule"));
}

TEST_CASE("derivation refuses a figure a rule needs and cannot find, and a derived reference") {
    GpuSpec no_l2 = spec("rtx-3090");
    no_l2.l2_size.value = Bytes(0);
    const std::string message = thrown_by([&] { (void)derive_calibration(no_l2, spec("h200-sxm"), h200()); });
    CHECK(has(message, "rtx-3090"));
    CHECK(has(message, "L2 size"));
    CHECK(has(message, "D3"));

    const Calibration d = derive_calibration(spec("rtx-3090"), spec("h200-sxm"), h200());
    CHECK(has(thrown_by([&] { (void)derive_calibration(spec("a10"), spec("rtx-3090"), d); }), "itself derived"));
    CHECK(has(thrown_by([&] { (void)derive_calibration(spec("a10"), spec("a100-80gb-sxm"), h200()); }), "measured on h200-sxm"));
}

TEST_CASE("the default context: measured where built in, else derived; kernel model and per-op efficiencies carried") {
    const FrameworkProfile* framework = find_builtin_framework_profile("h200-sxm");
    REQUIRE(framework);
    const CostContext measured = make_default_cost_context(spec("h200-sxm"), framework);
    CHECK(measured.ceilings.kind == "measured");
    const CostContext derived = make_default_cost_context(spec("rtx-a6000"), framework);
    CHECK(derived.ceilings.kind == "derived");
    CHECK(has(derived.ceilings.origin, "K1"));
    CHECK(has(derived.ceilings.origin, "F1"));
    const CostContext bare = make_cost_context(spec("rtx-a6000"), nullptr, framework);
    CHECK(bare.ceilings.kind == "datasheet");

    // K1: GA102 has no kernel model of its own: GH100's parameters, unchanged
    const KernelModelProfile* gh100 = find_builtin_kernel_model("GH100");
    REQUIRE(gh100);
    REQUIRE_FALSE(find_builtin_kernel_model("GA102"));
    CHECK(derived.conv.size() == gh100->conv.size());
    CHECK(derived.attention.size() == gh100->attention.size());
    CHECK(derived.memory_fixed_time == gh100->memory_fixed_time);

    // F1: f' = max(1, f x DRAM ratio / (SMs x clock) ratio) for every op slower than its bytes on the H200
    const double dram = 768e9 / 4800e9, sm_clock = (84 * 1800e6) / (132 * 1980e6);
    int slower = 0;
    for (const auto& [key, points] : measured.op_factor) {
        const auto it = derived.op_factor.find(key);
        REQUIRE(it != derived.op_factor.end());
        REQUIRE(it->second.size() == points.size());
        for (std::size_t i = 0; i < points.size(); ++i) {
            if (points[i].factor > 1) {
                ++slower;
                CHECK(it->second[i].factor == Approx(std::max(1.0, points[i].factor * dram / sm_clock)));
            } else {
                CHECK(it->second[i].factor == points[i].factor);
            }
        }
    }
    CHECK(slower > 10);
    CHECK(derived.kernel_gap == measured.kernel_gap);
}

TEST_CASE("the reference of a derivation: a measured profile of the same architecture, else the first") {
    std::vector<Calibration> measured{h200()};
    CHECK(derivation_reference(spec("a100-40gb-pcie"), measured) == &measured[0]);
    Calibration ampere = h200();
    ampere.device.gpu_key = "a100-80gb-sxm";
    measured.push_back(ampere);
    CHECK(derivation_reference(spec("a100-40gb-pcie"), measured) == &measured[1]);
    CHECK(derivation_reference(spec("h100-pcie"), measured) == &measured[0]);
    CHECK(derivation_reference(spec("h100-pcie"), {}) == nullptr);
}

TEST_CASE("a derived GPU predicts a step slower than its bare datasheet, and says which profile it used") {
    const FrameworkProfile* framework = find_builtin_framework_profile("h200-sxm");
    PredictOptions o;
    o.lowering.batch = 64;
    o.lowering.precision = PrecisionMode::amp_bf16;
    o.framework = framework;
    const Graph g = *zoo::model("resnet50", 224);
    const Prediction derived = predict(g, make_default_cost_context(spec("a100-80gb-sxm"), framework), o);
    const Prediction bare = predict(g, make_cost_context(spec("a100-80gb-sxm"), nullptr, framework), o);
    CHECK(derived.profile_kind == "derived");
    CHECK(bare.profile_kind == "datasheet");
    CHECK(derived.step_time.value() > bare.step_time.value());
}

TEST_CASE("a GPU without TF32 tensor cores runs the float32 mode's TF32 convolutions in float32") {
    const FrameworkProfile* framework = find_builtin_framework_profile("h200-sxm");
    const GpuSpec& v100 = spec("v100-sxm2-32gb");
    REQUIRE_FALSE(v100.peak(ComputeUnit::tf32_tensor));
    const CostContext ctx = make_default_cost_context(v100, framework);
    CHECK(ctx.tf32_as_fp32);
    CHECK_FALSE(make_default_cost_context(spec("a100-80gb-sxm"), framework).tf32_as_fp32);
    PredictOptions o;
    o.lowering.batch = 32;
    o.framework = framework;
    const Graph g = *zoo::model("resnet50", 224);
    o.lowering.precision = PrecisionMode::fp32;  // PyTorch's default: cuDNN may use TF32
    const Prediction defaults = predict(g, ctx, o);
    o.lowering.precision = PrecisionMode::fp32_strict;
    const Prediction strict = predict(g, ctx, o);
    CHECK(defaults.gpu_time.value() == Approx(strict.gpu_time.value()));
    o.lowering.precision = PrecisionMode::tf32;
    CHECK(predict(g, ctx, o).gpu_time.value() == Approx(strict.gpu_time.value()));
}
