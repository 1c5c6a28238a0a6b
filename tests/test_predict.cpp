#include "catch.hpp"

#include <roofsim/builtin_profiles.hpp>
#include <roofsim/predict.hpp>
#include <roofsim/zoo/zoo.hpp>

using namespace roofsim;

namespace {
Prediction run(const std::string& model, std::int64_t batch, PrecisionMode mode, const CostContext& ctx,
               const FrameworkProfile* framework) {
    PredictOptions o;
    o.lowering.batch = batch;
    o.lowering.precision = mode;
    o.framework = framework;
    return predict(*zoo::model(model), ctx, o);
}
}  // namespace

TEST_CASE("the simulated step is bounded by GPU work and host issue", "[predict][sim]") {
    const GpuSpec& spec = gpu_or_throw("h200-sxm");
    const FrameworkProfile* framework = find_builtin_framework_profile("h200-sxm");
    REQUIRE(framework != nullptr);
    const CostContext ctx = make_cost_context(spec, find_builtin_calibration("h200-sxm"), framework);
    const std::string model = GENERATE("resnet50", "bert-base");
    const std::int64_t batch = GENERATE(1, 16, 64);
    const Prediction p = run(model, batch, PrecisionMode::amp_bf16, ctx, framework);
    INFO(model << " batch " << batch);
    CHECK(p.step_time >= p.gpu_time);
    CHECK(p.step_time >= p.host_time);
    CHECK(p.step_time.value() <= (p.gpu_time + p.host_time).value() * 1.000001);
    CHECK((p.forward_time + p.backward_time + p.optimizer_time).value() == Catch::Approx(p.step_time.value()));
    double layer_gpu = 0;
    for (const auto& l : p.layers) layer_gpu += (l.forward_gpu + l.backward_gpu).value();
    CHECK(layer_gpu == Catch::Approx(p.gpu_time.value()));
    CHECK(p.memory.peak >= p.memory.parameters + p.memory.optimizer_state + p.memory.activations);
}

TEST_CASE("more work never predicts less time", "[predict]") {
    const CostContext ctx = make_cost_context(gpu_or_throw("a100-80gb-sxm"));
    double previous = 0, previous_memory = 0;
    for (std::int64_t batch : {1, 2, 8, 32, 128}) {
        const Prediction p = run("resnet50", batch, PrecisionMode::fp32, ctx, nullptr);
        CHECK(p.step_time.value() >= previous);
        CHECK(p.memory.peak.value() > previous_memory);
        previous = p.step_time.value();
        previous_memory = p.memory.peak.value();
    }
}

TEST_CASE("datasheet predictions rank the seed GPUs by their tensor rates for a compute-bound step", "[predict]") {
    // With datasheet ceilings only, a large-batch BF16 step follows the dense BF16 tensor rate:
    // A100 312 > A6000 154.8 > RTX 3090 71 TFLOP/s.
    auto step = [](const char* key) {
        return run("resnet50", 256, PrecisionMode::amp_bf16, make_cost_context(gpu_or_throw(key)), nullptr).step_time.value();
    };
    CHECK(step("a100-80gb-sxm") < step("rtx-a6000"));
    CHECK(step("rtx-a6000") < step("rtx-3090"));
}

TEST_CASE("prediction JSON carries totals, memory and every layer", "[predict][json]") {
    const CostContext ctx = make_cost_context(gpu_or_throw("rtx-3090"));
    const Prediction p = run("bert-base", 8, PrecisionMode::amp_fp16, ctx, nullptr);
    const nlohmann::json j = to_json(p);
    CHECK(j.at("gpu") == "rtx-3090");
    CHECK(j.at("layers").size() == p.layers.size());
    CHECK(j.at("step_seconds").get<double>() == p.step_time.value());
    CHECK(j.at("memory_bytes").at("peak").get<double>() > 0);
}

TEST_CASE("a convolution the sweep timed at another batch size scales from that measurement", "[predict][cost][conv]") {
    const Calibration* cal = find_builtin_calibration("h200-sxm");
    REQUIRE(cal != nullptr);
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"), cal);
    // A ResNet-50 3x3 convolution (64 -> 64 channels, 56 x 56) that the cuDNN sweep measured at N = 32.
    const ConvRecord* record = nullptr;
    for (const auto& r : cal->conv_sweep) {
        if (r.unit == ComputeUnit::bf16_tensor && r.layout == "NCHW" && r.pass == ConvPass::forward && r.n == 32 &&
            r.c == 64 && r.h == 56 && r.k == 64 && r.r == 3 && r.stride == 1 && r.groups == 1 && r.dilation == 1) {
            record = &r;
        }
    }
    REQUIRE(record != nullptr);
    auto conv_at = [&](std::int64_t n) {
        Kernel k;
        k.kind = KernelKind::conv;
        k.unit = ComputeUnit::bf16_tensor;
        k.dtype = DType::bf16;
        ConvDims d;
        d.n = n; d.c = 64; d.h = d.w = 56; d.k = 64; d.r = d.s = 3;
        d.pad_h = d.pad_w = record->pad;
        k.dims = d;
        k.flops = conv_flops(d);
        return kernel_cost(k, ctx).time.value();
    };
    CHECK(conv_at(32) == Catch::Approx(record->seconds.median));  // the measured shape itself
    // Twice the batch is twice the work: between 1.7x and 2.3x the measured time (wave quantization aside),
    // and never less time for more images.
    CHECK(conv_at(64) / record->seconds.median > 1.7);
    CHECK(conv_at(64) / record->seconds.median < 2.3);
    CHECK(conv_at(48) < conv_at(64));
    CHECK(conv_at(24) < conv_at(32));
}
