#include "catch.hpp"
#include "framework_figures.hpp"

#include <roofsim/profile/builtin.hpp>
#include <roofsim/predict.hpp>
#include <roofsim/report/json.hpp>
#include <roofsim/report/operators.hpp>
#include <roofsim/zoo/zoo.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

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

/// Sets one figure of `f`, as measured once.
void set_figure(FrameworkProfile& f, const std::string& key, double seconds) {
    FrameworkFigure x{seconds, seconds, seconds, 1, "set by the test", std::nullopt};
    x.measured_min = seconds;
    f.figures[key] = x;
}

/// An H200 framework profile with the figures a test sets, each as measured once.
FrameworkProfile h200_test_framework(const std::map<std::string, double>& seconds_by_figure) {
    FrameworkProfile f;
    f.device_name = "NVIDIA H200";
    f.gpu_key = "h200-sxm";
    f.torch_version = "2.11.0";
    f.date_utc = "2026-11-30T00:00:00+00:00";
    for (const auto& [key, seconds] : seconds_by_figure) set_figure(f, key, seconds);
    test::add_missing_step_figures(f);
    return f;
}

/// Options predicting a batch of 2 with no optimizer, the host costs from `f`.
PredictOptions host_cost_options(const FrameworkProfile& f) {
    PredictOptions o;
    o.lowering.batch = 2;
    o.lowering.optimizer.kind = OptimizerKind::none;
    o.framework = &f;
    return o;
}

/// A framework profile document of the H200 with these figures and op timings, as the probe writes one.
nlohmann::json framework_doc(const nlohmann::json& figures, const nlohmann::json& op_timings = nlohmann::json::array()) {
    nlohmann::json doc = {{"schema_version", 1},
                          {"kind", "roofsim-framework-profile"},
                          {"device", {{"name", "NVIDIA H200"}, {"key", "h200-sxm"}}},
                          {"software", {{"torch", "2.11.0"}}},
                          {"date_utc", "2026-11-30T00:00:00+00:00"},
                          {"figures", figures}};
    if (!op_timings.empty()) doc["op_timings"] = op_timings;
    return doc;
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
    CHECK((p.zero_grad_time + p.forward_time + p.backward_time + p.optimizer_time).value() == Catch::Approx(p.step_time.value()));
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

TEST_CASE("a time from measured neighbours scales each by the model and interpolates in log-log", "[predict][cost]") {
    // t(x) = t(x0) model(x) / model(x0), here with model(x) = x seconds.
    const auto model_at = [](std::int64_t v) { return Seconds(static_cast<double>(v)); };
    const auto any = [](std::int64_t) { return true; };
    const auto points = [&](const std::map<std::int64_t, Seconds>& measured) {
        std::map<std::int64_t, MeasuredPoint> p;
        for (const auto& [x, t] : measured) p[x] = detail::measured_point(x, t, model_at(x));
        return p;
    };
    const auto at = [&](const std::map<std::int64_t, Seconds>& measured, std::int64_t x) {
        return detail::from_measured_neighbours(points(measured), x, model_at(x), true, any);
    };
    // Neighbours that follow the model give the model.
    CHECK(at({{2, Seconds(2)}, {8, Seconds(8)}}, 4)->time.value() == Catch::Approx(4.0));
    // Bracketed: scaled 4 * 4 / 2 = 8 and 8 * 4 / 8 = 4, halfway in log x: sqrt(8 * 4).
    const auto bracketed = at({{2, Seconds(4)}, {8, Seconds(8)}}, 4);
    REQUIRE(bracketed);
    CHECK(bracketed->time.value() == Catch::Approx(std::sqrt(32.0)));
    CHECK(bracketed->reach == 1.0);
    // One side only: the nearest one's ratio to the model (here 2), fading with its distance to none
    // at a factor of 4: 6 x 2^(1 - log 3 / log 4); the model itself at 8; nothing beyond.
    CHECK(at({{2, Seconds(4)}}, 6)->time.value() == Catch::Approx(6.0 * std::pow(2.0, 1 - std::log(3.0) / std::log(4.0))));
    CHECK(at({{2, Seconds(4)}}, 8)->time.value() == Catch::Approx(8.0));
    CHECK(at({{2, Seconds(4)}}, 2)->time.value() == Catch::Approx(4.0));
    CHECK_FALSE(at({{2, Seconds(4)}}, 9));
    CHECK_FALSE(at({}, 4));
    // Neighbours of another alignment class are skipped: only 8 is even like 4.
    const auto even = [](std::int64_t v) { return v % 2 == 0; };
    const auto aligned = detail::from_measured_neighbours(points({{3, Seconds(30)}, {8, Seconds(16)}}), 4, model_at(4), true, even);
    REQUIRE(aligned);
    CHECK(aligned->time.value() == Catch::Approx(4.0 * std::sqrt(2.0)));  // 8's ratio 2, at half weight (a factor of 2 away)
}

TEST_CASE("a GEMM the sweep timed at other token counts comes from those measurements", "[predict][cost]") {
    const Calibration* cal = find_builtin_calibration("h200-sxm");
    REQUIRE(cal != nullptr);
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"), cal);
    // the sweep's record of a cuBLAS call (m, n, k) in cuBLAS's layout
    const auto record = [&](std::int64_t m, std::int64_t n, std::int64_t k, std::string_view cublas_layout) -> std::optional<double> {
        for (const auto& r : cal->gemm_sweep) {
            if (r.unit == ComputeUnit::bf16_tensor && r.batch == 1 && r.m == m && r.n == n && r.k == k && r.layout == cublas_layout) {
                return r.seconds.median;
            }
        }
        return std::nullopt;
    };
    const auto measured = [&](std::int64_t m, std::int64_t n, std::int64_t k) {
        const auto t = record(m, n, k, "TN");
        REQUIRE(t);
        return *t;
    };
    // an nn.Linear forward: row-major layout nt, cuBLAS's "TN"; cuBLAS's column-major (m, n) are the
    // row-major product's (n, m): (tokens, N_out)
    const auto gemm_at = [&](std::int64_t m, std::int64_t n, std::int64_t k, GemmLayout layout = GemmLayout::nt) {
        Kernel g;
        g.kind = KernelKind::gemm;
        g.unit = ComputeUnit::bf16_tensor;
        g.dtype = DType::bf16;
        g.dims = GemmDims{n, m, k, 1, layout};
        g.flops = gemm_flops(std::get<GemmDims>(g.dims));
        return kernel_cost(g, ctx).time.value();
    };
    // nn.Linear forwards (N_out, tokens, K_in) "TN", swept at 2048 and 6144 tokens; 4096 tokens lies between.
    // At a swept shape a GEMM in a layout the sweep timed takes that record.
    for (const auto& [n_out, k_in] : std::vector<std::pair<std::int64_t, std::int64_t>>{{3072, 768}, {768, 3072}, {50257, 768}}) {
        INFO(n_out << " x " << k_in);
        const double t2048 = measured(n_out, 2048, k_in), t6144 = measured(n_out, 6144, k_in);
        CHECK(gemm_at(n_out, 2048, k_in) == Catch::Approx(t2048));
        if (const auto nn = record(n_out, 2048, k_in, "NN")) CHECK(gemm_at(n_out, 2048, k_in, GemmLayout::nn) == Catch::Approx(*nn));
        const double t4096 = gemm_at(n_out, 4096, k_in);
        CHECK(t4096 > t2048);
        CHECK(t4096 < t6144);
    }
    // The vocabulary GEMM (N = 50257, unaligned) keeps its measured slow path: about the 2048-token time
    // doubled, far above an aligned GEMM of the same work.
    const double lm_head = gemm_at(50257, 4096, 768);
    CHECK(lm_head / measured(50257, 2048, 768) > 1.5);
    CHECK(lm_head / measured(50257, 2048, 768) < 2.5);
    CHECK(lm_head > 2.0 * gemm_at(50256, 4096, 768));
}

TEST_CASE("a layout's factor is the median time ratio of the sweep's equal-work pairs with nn", "[predict][cost]") {
    // (dims with layout, seconds): three nt points at 1.5, 1.6 and 1.7 times their nn pair (the same
    // dimensions in another order), one small pair at half (below gemm_layout_sensitive_dim: not
    // counted), a tn point with no nn pair.
    std::vector<std::pair<GemmDims, double>> points;
    const auto pair = [&](std::int64_t a, std::int64_t b, std::int64_t c, double ratio) {
        points.push_back({GemmDims{a, b, c, 1, GemmLayout::nn}, 1e-3});
        points.push_back({GemmDims{c, a, b, 1, GemmLayout::nt}, ratio * 1e-3});
    };
    pair(768, 2048, 3072, 1.5);
    pair(3072, 2048, 768, 1.7);
    pair(768, 6144, 3072, 1.6);
    pair(768, 4096, 64, 0.5);
    points.push_back({GemmDims{1024, 1024, 1024, 1, GemmLayout::tn}, 1e-3});
    const auto f = detail::gemm_layout_factors(points);
    CHECK(f[static_cast<std::size_t>(GemmLayout::nt)] == Catch::Approx(1.6));
    CHECK(f[static_cast<std::size_t>(GemmLayout::tn)] == 1.0);
    CHECK(f[static_cast<std::size_t>(GemmLayout::nn)] == 1.0);
    CHECK(f[static_cast<std::size_t>(GemmLayout::unknown)] == 1.0);
}

TEST_CASE("a TF32 GEMM costs more with an operand stored transposed; a 16-bit one does not", "[predict][cost]") {
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"), find_builtin_calibration("h200-sxm"));
    const auto time = [&](ComputeUnit unit, GemmDims d) {
        Kernel g;
        g.kind = KernelKind::gemm;
        g.unit = unit;
        g.dtype = unit == ComputeUnit::tf32_tensor ? DType::f32 : DType::bf16;
        g.dims = d;
        g.flops = gemm_flops(d);
        return kernel_cost(g, ctx).time.value();
    };
    const auto ratio = [&](ComputeUnit unit, std::int64_t m, std::int64_t n, std::int64_t k, GemmLayout layout) {
        return time(unit, GemmDims{m, n, k, 1, layout}) / time(unit, GemmDims{m, n, k, 1, GemmLayout::nn});
    };
    // A weight gradient (dY^T X: tn, both operands read across K) in TF32: the sweep's pairs of a
    // layer's GEMMs from 768 up took 1.3 to 2.5 times their nn partner.
    CHECK(ratio(ComputeUnit::tf32_tensor, 4096, 4096, 4096, GemmLayout::tn) > 1.3);
    CHECK(ratio(ComputeUnit::tf32_tensor, 4096, 4096, 4096, GemmLayout::tn) < 2.0);
    CHECK(ratio(ComputeUnit::tf32_tensor, 4096, 4096, 4096, GemmLayout::tn) > ratio(ComputeUnit::tf32_tensor, 4096, 4096, 4096, GemmLayout::nt));
    for (GemmLayout layout : {GemmLayout::nt, GemmLayout::tn}) {
        INFO(to_string(layout));
        CHECK(std::abs(ratio(ComputeUnit::bf16_tensor, 4096, 4096, 4096, layout) - 1.0) < 0.1);
        // a dimension below gemm_layout_sensitive_dim: bound by its operands' traffic, any layout
        CHECK(ratio(ComputeUnit::tf32_tensor, 3584, 3584, 48, layout) == 1.0);  // a shape the sweep did not time
    }
    // A GEMM whose layout is not said (an IR from before layouts) is costed as nn.
    CHECK(time(ComputeUnit::tf32_tensor, GemmDims{4096, 4096, 4096, 1}) == time(ComputeUnit::tf32_tensor, GemmDims{4096, 4096, 4096, 1, GemmLayout::nn}));
    // Datasheet ceilings alone know no layout.
    const CostContext datasheet = make_cost_context(gpu_or_throw("h200-sxm"));
    CHECK(datasheet.gemm_layout_factor.empty());
}

TEST_CASE("a convolution the sweep timed at other batch sizes scales from those measurements", "[predict][cost][conv]") {
    const Calibration* cal = find_builtin_calibration("h200-sxm");
    REQUIRE(cal != nullptr);
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"), cal);
    // A ResNet-50 3x3 convolution (64 -> 64 channels, 56 x 56) that the cuDNN sweep measured at N = 24 and 96.
    const auto record_at = [&](std::int64_t n) -> const ConvRecord* {
        for (const auto& r : cal->conv_sweep) {
            if (r.unit == ComputeUnit::bf16_tensor && r.layout == "NCHW" && r.pass == ConvPass::forward && r.n == n &&
                r.c == 64 && r.h == 56 && r.k == 64 && r.r == 3 && r.stride == 1 && r.groups == 1 && r.dilation == 1) {
                return &r;
            }
        }
        return nullptr;
    };
    const ConvRecord* small = record_at(24);
    const ConvRecord* large = record_at(96);
    REQUIRE(small != nullptr);
    REQUIRE(large != nullptr);
    auto conv_at = [&](std::int64_t n) {
        Kernel k;
        k.kind = KernelKind::conv;
        k.unit = ComputeUnit::bf16_tensor;
        k.dtype = DType::bf16;
        ConvDims d;
        d.n = n; d.c = 64; d.h = d.w = 56; d.k = 64; d.r = d.s = 3;
        d.pad_h = d.pad_w = small->pad;
        k.dims = d;
        k.flops = conv_flops(d);
        return kernel_cost(k, ctx).time.value();
    };
    CHECK(conv_at(24) == Catch::Approx(small->seconds.median));  // the measured shapes themselves
    CHECK(conv_at(96) == Catch::Approx(large->seconds.median));
    // Twice the batch is about twice the work (wave quantization aside), and more images never take less time.
    CHECK(conv_at(48) / small->seconds.median > 1.6);
    CHECK(conv_at(48) / small->seconds.median < 2.4);
    CHECK(conv_at(192) / large->seconds.median > 1.6);
    CHECK(conv_at(192) / large->seconds.median < 2.4);
    double previous = 0;
    for (std::int64_t n : {8, 16, 24, 32, 48, 64, 96, 128, 192, 256}) {
        INFO("N = " << n);
        CHECK(conv_at(n) > previous);
        previous = conv_at(n);
    }
}

TEST_CASE("a 1-D convolution takes the sweep's 1-D timings, by its padding in each dimension", "[predict][cost][conv]") {
    const Calibration* builtin = find_builtin_calibration("h200-sxm");
    REQUIRE(builtin != nullptr);
    Calibration cal = *builtin;
    cal.conv_sweep.erase(std::remove_if(cal.conv_sweep.begin(), cal.conv_sweep.end(), [](const ConvRecord& r) { return r.pad_h.has_value(); }),
                         cal.conv_sweep.end());
    // conv1d 256 -> 256 channels over 1024 steps, kernel 3, padding 1, as cuDNN runs it: H = R = 1, no padding in H.
    for (const auto& [n, seconds] : std::vector<std::pair<std::int64_t, double>>{{16, 1e-4}, {64, 4e-4}}) {
        ConvRecord r;
        r.pass = ConvPass::forward;
        r.n = n; r.c = 256; r.h = 1; r.w = 1024; r.k = 256; r.r = 1; r.s = 3; r.stride = 1; r.pad = 1;
        r.stride_h = 1; r.pad_h = 0; r.dilation_h = 1;
        r.unit = ComputeUnit::bf16_tensor;
        r.layout = "NCHW";
        r.seconds.median = seconds;
        r.flops_per_second = 1e14;
        cal.conv_sweep.push_back(r);
    }
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"), &cal);
    auto conv_at = [&](std::int64_t n, std::int64_t pad_h) {
        Kernel k;
        k.kind = KernelKind::conv;
        k.unit = ComputeUnit::bf16_tensor;
        k.dtype = DType::bf16;
        ConvDims d;
        d.n = n; d.c = 256; d.h = 1; d.w = 1024; d.k = 256; d.r = 1; d.s = 3;
        d.pad_w = 1;
        d.pad_h = pad_h;
        k.dims = d;
        k.flops = conv_flops(d);
        return kernel_cost(k, ctx).time.value();
    };
    CHECK(conv_at(16, 0) == Catch::Approx(1e-4));
    CHECK(conv_at(32, 0) > 1.4e-4);  // between its measured neighbours, about twice the smaller one
    CHECK(conv_at(32, 0) < 2.8e-4);
    // Padded in H too (an output of height 3), it is another geometry: not these timings.
    CHECK(conv_at(16, 1) != Catch::Approx(1e-4).epsilon(0.05));
}

TEST_CASE("fp16 convolutions take the bf16 sweep where the tensor rates are equal", "[predict][cost][conv]") {
    const Calibration* cal = find_builtin_calibration("h200-sxm");
    REQUIRE(cal != nullptr);
    REQUIRE(std::none_of(cal->conv_sweep.begin(), cal->conv_sweep.end(),
                         [](const ConvRecord& r) { return r.unit == ComputeUnit::fp16_tensor; }));
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"), cal);
    // the backward-filter pass of a 1x1 convolution: a GEMM with a huge K that cuDNN splits, which
    // the GEMM model alone (no sweep) puts at a fraction of the measured speed
    Kernel k;
    k.kind = KernelKind::conv;
    ConvDims d;
    d.pass = ConvPass::backward_filter;
    d.n = 48; d.c = 256; d.h = d.w = 56; d.k = 64; d.r = d.s = 1;
    k.dims = d;
    k.unit = ComputeUnit::bf16_tensor;
    const Seconds bf16 = kernel_cost(k, ctx).time;
    k.unit = ComputeUnit::fp16_tensor;
    // the same records, scaled by each unit's own kernel-model fit (fp16 fitted to its own corpus rows)
    CHECK(kernel_cost(k, ctx).time.value() == Catch::Approx(bf16.value()).epsilon(0.05));
}

TEST_CASE("a normalization's op efficiency follows its reduction shape", "[predict][cost]") {
    const auto point = [](std::int64_t groups, std::int64_t length, double factor) {
        return OpFactorPoint{NormDims{groups, length}, std::nullopt, factor};
    };
    // Timed at 64 and 512 channels, two lengths each; a plain point first (no shape).
    const std::vector<OpFactorPoint> points = {OpFactorPoint{std::nullopt, std::nullopt, 1.5}, point(64, 1000, 2.0),
                                               point(64, 100000, 8.0), point(512, 1000, 1.0), point(512, 100000, 1.2)};
    const auto at = [&](std::int64_t groups, std::int64_t length) {
        Kernel k;
        k.kind = KernelKind::normalization;
        k.dims = NormDims{groups, length};
        return op_factor_at(points, k);
    };
    CHECK(at(64, 1000) == Catch::Approx(2.0));          // a timed shape: its own factor
    CHECK(at(64, 10000) == Catch::Approx(4.0));         // halfway in log length: geometric mean of 2 and 8
    CHECK(at(64, 10) == Catch::Approx(2.0));            // beyond the shortest: the end point
    CHECK(at(64, 10000000) == Catch::Approx(8.0));      // beyond the longest
    CHECK(at(100, 100000) == Catch::Approx(8.0));       // 100 channels are nearer 64 than 512 (log scale)
    CHECK(at(300, 1000) == Catch::Approx(1.0));         // 300 nearer 512
    Kernel plain;
    plain.kind = KernelKind::normalization;  // no reduction shape (an IR written without one)
    CHECK(op_factor_at(points, plain) == Catch::Approx(1.5));
}

TEST_CASE("a column sum's time follows the timed sums' seconds per byte over rows and columns", "[predict][cost]") {
    // A 2 x 2 grid of timed column sums (columns 100 and 400, rows 1000 and 4000) with their measured
    // seconds per byte; between them, the log-log interpolation over rows then columns.
    const auto point = [](std::int64_t columns, std::int64_t rows, double seconds_per_byte) {
        OpFactorPoint p{NormDims{columns, rows}, std::nullopt, 1.0};
        p.seconds_per_byte = seconds_per_byte;
        return p;
    };
    const double a = 4e-11, b = 1e-11, c = 2e-11, d = 0.5e-11;
    CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"), find_builtin_calibration("h200-sxm"));
    ctx.kernel_floor = Seconds(0);
    ctx.memory_fixed_time = Seconds(0);  // the sums' own seconds per byte alone
    ctx.op_factor[{"sum", Phase::backward, true}] = {point(100, 1000, a), point(100, 4000, b), point(400, 1000, c),
                                                     point(400, 4000, d)};
    const auto bias_gradient = [](std::int64_t columns, std::int64_t rows) {  // bfloat16 dY summed over its rows
        Kernel k;
        k.op = "aten::sum";
        k.kind = KernelKind::reduction;
        k.phase = Phase::backward;
        k.dtype = DType::bf16;
        k.source_op = "linear";
        k.bytes_read = Bytes(2.0 * static_cast<double>(rows * columns));
        k.bytes_written = Bytes(2.0 * static_cast<double>(columns));
        k.dims = NormDims{columns, rows};
        return k;
    };
    const auto seconds = [&](std::int64_t columns, std::int64_t rows) {
        const Kernel k = bias_gradient(columns, rows);
        return std::pair{kernel_cost(k, ctx).time.value(), k.bytes().value()};
    };
    const auto [timed, timed_bytes] = seconds(400, 1000);
    CHECK(timed == Catch::Approx(timed_bytes * c));  // a timed shape: its own measurement
    const auto [between, between_bytes] = seconds(200, 2000);
    CHECK(between == Catch::Approx(between_bytes * std::pow(a * b * c * d, 0.25)));  // the middle in log both ways
    const auto [beyond, beyond_bytes] = seconds(800, 16000);
    CHECK(beyond == Catch::Approx(beyond_bytes * d));  // beyond the grid: its corner
    // points without seconds per byte (a profile's other ops) keep the ratio's interpolation
    ctx.op_factor[{"sum", Phase::backward, true}] = {OpFactorPoint{NormDims{100, 1000}, std::nullopt, 3.0}};
    CHECK(op_factor(bias_gradient(200, 2000), ctx) == Catch::Approx(3.0));
}

TEST_CASE("casts and column sums take their own op's efficiency whatever layer runs them", "[predict][cost]") {
    Kernel cast;
    cast.kind = KernelKind::elementwise;
    cast.op = "aten::_to_copy";
    cast.source_op = "linear";
    CHECK(factor_op(cast) == "cast");
    Kernel bias;
    bias.kind = KernelKind::reduction;
    bias.op = "aten::sum";
    bias.source_op = "linear";
    CHECK(factor_op(bias) == "linear");  // no reduction shape: not known to be a column sum
    bias.dims = NormDims{768, 4096};
    CHECK(factor_op(bias) == "sum");
    Kernel copy = cast;
    copy.kind = KernelKind::copy;  // a same-dtype copy is no cast
    CHECK(factor_op(copy) == "linear");
    // a layout copy (.contiguous() of a transposed view: aten::clone) takes the transposed copy's
    // efficiency, the forward's in either phase
    Kernel clone = copy;
    clone.op = "aten::clone";
    clone.source_op = "mha";
    clone.phase = Phase::backward;
    CHECK(factor_op(clone) == "transpose_contiguous");
    CHECK(factor_phase(clone) == Phase::forward);
    CHECK(factor_phase(copy) == copy.phase);
    // a backward add of one dtype sums two gradients of a tensor, inside whichever layer's backward
    // is running: the add's efficiency, the forward's; a forward add stays its layer's
    Kernel sum;
    sum.kind = KernelKind::elementwise;
    sum.op = "aten::add";
    sum.source_op = "layernorm";
    sum.phase = Phase::backward;
    CHECK(factor_op(sum) == "add");
    CHECK(factor_phase(sum) == Phase::forward);
    sum.op = "aten::add_";
    CHECK(factor_op(sum) == "add");
    sum.mixed_dtypes = true;  // a 16-bit and a float32 operand: the mixed loop's
    CHECK(factor_op(sum) == "elementwise_mixed");
    sum.mixed_dtypes = false;
    sum.phase = Phase::forward;
    CHECK(factor_op(sum) == "layernorm");
    sum.phase = Phase::backward;
    sum.op = "aten::mul";
    CHECK(factor_op(sum) == "layernorm");
}

TEST_CASE("an attention kernel takes its backend's op efficiency, interpolated over the sequence length", "[predict][cost]") {
    const auto timed = [](AttentionBackend backend, std::int64_t seq, bool causal, double factor, double dropout = 0) {
        AttentionDims a{8, 12, seq, seq, 64, causal, backend, dropout};
        return OpFactorPoint{std::nullopt, a, factor};
    };
    const std::vector<OpFactorPoint> points = {timed(AttentionBackend::flash, 2048, false, 0.9),
                                               timed(AttentionBackend::efficient, 2048, false, 2.1),
                                               timed(AttentionBackend::cudnn, 256, false, 1.6),
                                               timed(AttentionBackend::cudnn, 2048, false, 1.1),
                                               timed(AttentionBackend::cudnn, 2048, true, 1.3),
                                               timed(AttentionBackend::cudnn, 256, false, 2.4, 0.1)};
    const auto at = [&](AttentionBackend backend, std::int64_t seq, bool causal, double dropout = 0) {
        Kernel k;
        k.kind = KernelKind::attention;
        k.dims = AttentionDims{32, 12, seq, seq, 64, causal, backend, dropout};
        return op_factor_at(points, k);
    };
    CHECK(at(AttentionBackend::efficient, 1024, false) == Catch::Approx(2.1));  // its own backend, wherever listed
    CHECK(at(AttentionBackend::cudnn, 128, false) == Catch::Approx(1.6));       // below the shortest: its factor
    CHECK(at(AttentionBackend::cudnn, 4096, false) == Catch::Approx(1.1));      // beyond the longest: its factor
    // 1024 lies two thirds of the way from 256 to 2048 in log length: 1.6^(1/3) x 1.1^(2/3)
    CHECK(at(AttentionBackend::cudnn, 1024, false) == Catch::Approx(1.24631).epsilon(1e-4));
    CHECK(at(AttentionBackend::cudnn, 128, true) == Catch::Approx(1.3));   // causality first, then length
    CHECK(at(AttentionBackend::cudnn, 1024, false, 0.1) == Catch::Approx(2.4));  // with dropout: the dropout point
    CHECK(at(AttentionBackend::cudnn, 128, true, 0.1) == Catch::Approx(1.3));    // none causal with dropout: causal's
    const std::vector<OpFactorPoint> no_cudnn(points.begin(), points.begin() + 2);
    Kernel k;
    k.kind = KernelKind::attention;
    k.dims = AttentionDims{32, 12, 128, 128, 64, false, AttentionBackend::cudnn};
    CHECK(op_factor_at(no_cudnn, k) == Catch::Approx(0.9));  // no cuDNN timing: flash's (the same tiling)
}

TEST_CASE("attention dropout costs what the profile's timings with and without it differ by", "[predict][cost]") {
    // The H200's profile times float32 memory-efficient attention at [16, 12, 512, 64] (causal) with
    // and without dropout; the kernel model prices both alike, and dropout's measured ratio scales it.
    const FrameworkProfile* f = find_builtin_framework_profile("h200-sxm");
    REQUIRE(f != nullptr);
    const auto timed = [&](double dropout) -> const OpTiming* {
        for (const auto& t : f->op_timings) {
            const Layer& l = t.graph.layers.front();
            const auto p = l.attrs.find("dropout_p");
            const double d = p == l.attrs.end() ? 0.0 : std::get<double>(p->second);
            const auto backend = l.attrs.find("backend");
            if (l.op == "sdpa" && t.precision == PrecisionMode::fp32 && d == dropout && backend != l.attrs.end() &&
                std::get<std::string>(backend->second) == "efficient" && t.graph.inputs.front().shape == std::vector<Dim>{16, 12, 512, 64}) {
                return &t;
            }
        }
        return nullptr;
    };
    const OpTiming* with = timed(0.1);
    const OpTiming* without = timed(0.0);
    REQUIRE(with != nullptr);
    REQUIRE(without != nullptr);
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"), find_builtin_calibration("h200-sxm"), f);
    Kernel k;
    k.kind = KernelKind::attention;
    k.unit = ComputeUnit::fp32;
    k.dtype = DType::f32;
    k.dims = AttentionDims{16, 12, 512, 512, 64, true, AttentionBackend::efficient, 0.0};
    REQUIRE(priced_by_kernel_model(k, ctx));
    const double plain = kernel_cost(k, ctx).time.value();
    k.dims = AttentionDims{16, 12, 512, 512, 64, true, AttentionBackend::efficient, 0.1};
    const double dropped = kernel_cost(k, ctx).time.value();
    CHECK(dropped / plain == Catch::Approx(with->forward_seconds / without->forward_seconds).epsilon(1e-9));
    CHECK(dropped > 1.1 * plain);  // Philox numbers for every score: not free
}

TEST_CASE("the part of backward()'s cost after its last kernel overlaps the GPU's tail", "[predict][sim]") {
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"));
    KernelList list;
    Kernel forward;
    forward.kind = KernelKind::elementwise;
    forward.bytes_read = forward.bytes_written = Bytes(1e9);  // a long kernel: ~0.5 ms on the GPU
    forward.host_dispatch = true;
    Kernel backward = forward;
    backward.phase = Phase::backward;
    list.kernels = {forward, backward};
    HostCosts all_before;
    all_before.per_kernel = Seconds(10e-6);
    all_before.backward_call = Seconds(100e-6);
    HostCosts split = all_before;
    split.backward_call = Seconds(40e-6);
    split.backward_call_end = Seconds(60e-6);
    const Timeline a = simulate(list, ctx, all_before), b = simulate(list, ctx, split);
    // The GPU is busy with the forward kernel while the host enters backward(): the cost before the
    // first backward kernel hides behind it either way, and the cost after the last one behind the
    // backward kernel, so both come to GPU time plus the first dispatch.
    const double gpu = a.gpu_time.value();
    CHECK(a.step_time.value() == Catch::Approx(10e-6 + gpu));
    CHECK(b.step_time.value() == Catch::Approx(10e-6 + gpu));
    CHECK(b.host_time.value() == Catch::Approx(a.host_time.value()));
    // With no GPU work to hide behind, all of it shows, wherever it falls.
    list.kernels[0].bytes_read = list.kernels[0].bytes_written = list.kernels[1].bytes_read = list.kernels[1].bytes_written = Bytes(0);
    list.kernels[0].kind = list.kernels[1].kind = KernelKind::host_only;
    const Timeline c = simulate(list, ctx, split);
    CHECK(c.step_time.value() == Catch::Approx(10e-6 + 10e-6 + 100e-6));
}

TEST_CASE("a view's backward node costs the chain-measured view node, not a one-at-a-time difference", "[predict][sim]") {
    FrameworkProfile f;
    f.gpu_key = "h200-sxm";
    const auto figure = [&f](const std::string& key, double seconds) {
        f.figures[key] = FrameworkFigure{seconds, seconds, seconds, 1, "test", std::nullopt};
    };
    figure("layer_backward_reshape", 0.0);  // (forward + backward) - forward of one tiny view: noise
    figure("layer_backward_add", 30e-6);
    figure("backward_node_view", 5e-6);
    test::add_missing_step_figures(f);  // eager_op_add among them, at zero
    const HostCosts amp = host_costs_from_framework(f, PrecisionMode::amp_bf16, OptimizerOptions{}, 0);
    const HostCosts fp32 = host_costs_from_framework(f, PrecisionMode::fp32, OptimizerOptions{}, 0);
    CHECK(fp32.backward.at("reshape").value() == Catch::Approx(5e-6));
    CHECK(fp32.backward.at("flatten").value() == Catch::Approx(5e-6));
    CHECK(amp.backward.at("reshape").value() == Catch::Approx(5e-6));  // views ignore autocast
    CHECK(fp32.backward.at("add").value() == Catch::Approx(30e-6));
    CHECK(fp32.backward.at(std::string(accumulate_grad_clone_host_op)).value() == 0.0);
    figure("eager_op_add", 9e-6);  // a gradient's copy by AccumulateGrad: one eager op, in either mode
    CHECK(host_costs_from_framework(f, PrecisionMode::fp32, OptimizerOptions{}, 0)
              .backward.at(std::string(accumulate_grad_clone_host_op)).value() == Catch::Approx(9e-6));
    CHECK(host_costs_from_framework(f, PrecisionMode::amp_bf16, OptimizerOptions{}, 0)
              .backward.at(std::string(accumulate_grad_clone_host_op)).value() == Catch::Approx(9e-6));
}

TEST_CASE("a synchronizing host op waits for the GPU, and back-to-back kernels leave a gap", "[predict][sim]") {
    CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"));
    Kernel big;
    big.kind = KernelKind::elementwise;
    big.bytes_read = big.bytes_written = Bytes(1e9);  // ~0.5 ms on the GPU
    Kernel item;
    item.kind = KernelKind::host_only;
    item.host_sync = true;
    KernelList list;
    list.kernels = {big, item, big};
    HostCosts h;
    h.per_kernel = Seconds(10e-6);
    h.synchronize = Seconds(5e-6);
    const Timeline t = simulate(list, ctx, h);
    const double first_end = (t.kernels[0].start + t.kernels[0].gpu_time).value();
    // the host issues the last kernel only after the first has finished and the wait has returned
    CHECK(t.kernels[2].issued.value() == Catch::Approx(first_end + 5e-6 + 10e-6));
    CHECK(t.step_time.value() == Catch::Approx(first_end + 15e-6 + t.kernels[2].gpu_time.value()));
    list.kernels[1].host_sync = false;
    const Timeline free = simulate(list, ctx, h);
    CHECK(free.step_time.value() == Catch::Approx(10e-6 + free.gpu_time.value()));  // the host ran ahead
    // a gap between back-to-back kernels adds after each bandwidth-costed kernel, not after a GEMM
    ctx.kernel_gap = Seconds(2e-6);
    const Timeline gapped = simulate(list, ctx, h);
    CHECK(gapped.gpu_gap_time.value() == Catch::Approx(4e-6));  // after each of the two: the last one's ends nothing
    CHECK(gapped.step_time.value() == Catch::Approx(10e-6 + gapped.gpu_time.value() + 2e-6));
}

TEST_CASE("a layer on its own pays the per-call host cost that its steady-state figure measured", "[predict][sim]") {
    FrameworkProfile f = h200_test_framework({{"layer_forward_relu", 10e-6}, {"layer_backward_relu", 20e-6}, {"layer_forward_add", 4e-6},
                                              {"layer_backward_add", 6e-6}, {"backward_call", 50e-6}, {"layer_steady_relu", 130e-6}});
    const auto figure = [&f](const std::string& key, double seconds) { set_figure(f, key, seconds); };
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"));
    PredictOptions o = host_cost_options(f);
    Graph g;
    g.name = "relu";
    g.inputs.push_back(GraphInput{"x", {GraphBuilder::batch, 16}, DType::f32, true});
    g.layers.push_back(Layer{"act", "relu", {"x"}, {}});
    const Prediction alone = predict(g, ctx, o);
    CHECK(alone.host_time.value() == Catch::Approx(130e-6));  // the steady figure, all of it
    g.layers.push_back(Layer{"act2", "relu", {"act"}, {}});
    const Prediction two = predict(g, ctx, o);
    CHECK(two.host_time.value() == Catch::Approx(2 * (10e-6 + 20e-6) + 50e-6));  // slopes and one backward() call
    // The split of the per-call cost moves none of it out of the host total.
    figure("backward_call_before_first_kernel", 30e-6);
    figure("backward_call_after_last_kernel", 10e-6);
    CHECK(predict(g, ctx, o).host_time.value() == Catch::Approx(two.host_time.value()));
    // A host twice as slow: every host cost doubles, the GPU's work stays.
    o.host_time_scale = 2.0;
    const Prediction slow = predict(g, ctx, o);
    CHECK(slow.host_time.value() == Catch::Approx(2 * two.host_time.value()));
    CHECK(slow.gpu_time.value() == Catch::Approx(two.gpu_time.value()));
    o.host_time_scale = 0.0;
    CHECK_THROWS_AS(predict(g, ctx, o), std::invalid_argument);
}

TEST_CASE("backward() walks every layer's nodes before its first kernel: the walk moves there from the layers' figures", "[predict][sim]") {
    FrameworkProfile f = h200_test_framework({{"layer_forward_relu", 10e-6}, {"layer_backward_relu", 20e-6}, {"layer_forward_add", 4e-6},
                                              {"layer_backward_add", 6e-6}, {"backward_call", 50e-6}});
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"));
    const PredictOptions o = host_cost_options(f);
    Graph g;
    g.name = "relus";
    g.inputs.push_back(GraphInput{"x", {GraphBuilder::batch, 16}, DType::f32, true});
    for (const char* name : {"a", "b", "c"}) g.layers.push_back(Layer{name, "relu", {g.layers.empty() ? "x" : g.layers.back().name}, {}});
    const auto first_backward = [](const Prediction& p) {
        for (std::size_t i = 0; i < p.kernels.kernels.size(); ++i) {
            if (p.kernels.kernels[i].phase == Phase::backward) return i;
        }
        return p.kernels.kernels.size();
    };
    const Prediction before = predict(g, ctx, o);
    // 4 nodes a relu layer at 2 us a node: 8 of its 20 us move to the backward's start, for all three layers
    f.figures["layer_backward_relu"].backward_nodes_per_layer = 4.0;
    set_figure(f, "backward_walk_node", 2e-6);
    const Prediction after = predict(g, ctx, o);
    CHECK(after.host_time.value() == Catch::Approx(before.host_time.value()));  // moved, not added
    const std::size_t i = first_backward(after);
    REQUIRE(i < after.kernels.kernels.size());
    REQUIRE(i == first_backward(before));
    CHECK(after.timeline.kernels[i].host_time.value() - before.timeline.kernels[i].host_time.value() ==
          Catch::Approx(3 * 8e-6 - (after.kernels.kernels[i].kind == KernelKind::host_only ? 8e-6 : 0.0)));
    Seconds marker_host{0};
    int markers = 0;
    for (std::size_t k = i + 1; k < after.kernels.kernels.size(); ++k) {
        const Kernel& kernel = after.kernels.kernels[k];
        if (kernel.phase == Phase::backward && kernel.kind == KernelKind::host_only && kernel.host_op == "relu") {
            marker_host += after.timeline.kernels[k].host_time;
            ++markers;
        }
    }
    CHECK(marker_host.value() == Catch::Approx(markers * 12e-6));  // 20 us less the walk of its 4 nodes
    // A walk longer than a figure takes the figure, no more: nothing goes negative.
    set_figure(f, "backward_walk_node", 10e-6);
    const Prediction capped = predict(g, ctx, o);
    CHECK(capped.host_time.value() == Catch::Approx(before.host_time.value()));
    for (const SimulatedKernel& k : capped.timeline.kernels) CHECK(k.host_time.value() >= 0);
    // The figure's node count is read from a profile document.
    nlohmann::json figures = {{"layer_backward_relu", {{"seconds", 20e-6}, {"min", 20e-6}, {"max", 20e-6}, {"samples", 1},
                                                        {"method", "chain"}, {"backward_nodes_per_layer", 4}}}};
    CHECK(framework_profile_from_json(framework_doc(figures), "test").figures.at("layer_backward_relu").backward_nodes_per_layer == 4.0);
    figures["layer_backward_relu"]["backward_nodes_per_layer"] = -1;
    CHECK_THROWS_AS(framework_profile_from_json(framework_doc(figures), "test"), std::exception);
}

TEST_CASE("a layer without a bias costs its op's bias-free host figures, or the op's where none was measured", "[predict][sim]") {
    FrameworkProfile f = h200_test_framework({{"layer_forward_conv2d", 30e-6}, {"layer_backward_conv2d", 70e-6}, {"layer_forward_add", 4e-6},
                                              {"layer_backward_add", 6e-6}, {"backward_call", 50e-6}});
    const auto figure = [&f](const std::string& key, double seconds) { set_figure(f, key, seconds); };
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"));
    const PredictOptions o = host_cost_options(f);
    Graph g;
    g.name = "convs";
    g.inputs.push_back(GraphInput{"x", {GraphBuilder::batch, 4, 8, 8}, DType::f32, true});
    const std::map<std::string, AttrValue> attrs = {{"in_channels", AttrValue(std::int64_t{4})},
                                                    {"out_channels", AttrValue(std::int64_t{4})},
                                                    {"kernel_size", AttrValue(std::vector<std::int64_t>{3, 3})},
                                                    {"padding", AttrValue(std::vector<std::int64_t>{1, 1})}};
    auto without_bias = attrs;
    without_bias["bias"] = AttrValue(false);
    g.layers.push_back(Layer{"biased", "conv2d", {"x"}, attrs});
    g.layers.push_back(Layer{"plain", "conv2d", {"biased"}, without_bias});
    // The lowering names the bias-free layer's two markers after its figures; its rows stay conv2d.
    const LoweredStep step = lower(g, o.lowering);
    std::vector<std::string> host_ops;
    for (const Kernel& k : step.kernels.kernels) {
        if (k.kind == KernelKind::host_only && k.layer == "plain") host_ops.push_back(k.host_op.str());
    }
    CHECK(host_ops == std::vector<std::string>{"conv2d_nobias", "conv2d_nobias"});
    // No bias-free figures in the profile: both layers cost the op's.
    const Prediction fallback = predict(g, ctx, o);
    CHECK(fallback.host_time.value() == Catch::Approx(2 * (30e-6 + 70e-6) + 50e-6));
    REQUIRE(fallback.layers.size() >= 2);
    CHECK(fallback.layers[1].op == "conv2d");
    // With them, the bias-free layer costs its own.
    figure("layer_forward_conv2d_nobias", 20e-6);
    figure("layer_backward_conv2d_nobias", 40e-6);
    const Prediction own = predict(g, ctx, o);
    CHECK(own.host_time.value() == Catch::Approx((30e-6 + 70e-6) + (20e-6 + 40e-6) + 50e-6));
    // A bias-free layer on its own: its bias-free steady figure, else the op's.
    g.layers.erase(g.layers.begin());
    g.layers[0].inputs = {"x"};
    figure("layer_steady_conv2d", 200e-6);
    CHECK(predict(g, ctx, o).host_time.value() == Catch::Approx(200e-6));
    figure("layer_steady_conv2d_nobias", 150e-6);
    CHECK(predict(g, ctx, o).host_time.value() == Catch::Approx(150e-6));
}

TEST_CASE("attention costs the host figures of the backend it runs on, or the op's where none was measured", "[predict][sim]") {
    CHECK(graph_op_of_host_op("sdpa_cudnn") == "sdpa");
    CHECK(graph_op_of_host_op("mha_no_weights") == "mha");
    CHECK(graph_op_of_host_op("linear_nobias") == "linear");
    CHECK(graph_op_of_host_op("layernorm") == "layernorm");
    FrameworkProfile f = h200_test_framework({{"layer_forward_sdpa_autocast", 30e-6}, {"layer_backward_sdpa_autocast", 70e-6},
                                              {"layer_forward_mha_autocast", 300e-6}, {"layer_backward_mha_autocast", 500e-6},
                                              {"layer_forward_add_autocast", 4e-6}, {"layer_backward_add_autocast", 6e-6},
                                              {"backward_call", 50e-6}});
    const auto figure = [&f](const std::string& key, double seconds) { set_figure(f, key, seconds); };
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"));
    PredictOptions o = host_cost_options(f);
    o.lowering.precision = PrecisionMode::amp_bf16;
    Graph g;
    g.name = "attention";
    // bfloat16 inputs, as an autocast model's projections hand them on: no casts (a test below has those)
    for (const char* name : {"q", "k", "v"}) g.inputs.push_back(GraphInput{name, {GraphBuilder::batch, 2, 16, 64}, DType::bf16, true});
    const auto sdpa = [](const char* name, const char* backend) {
        return Layer{name, "sdpa", {"q", "k", "v"}, {{"backend", AttrValue(std::string(backend))}}};
    };
    g.layers = {sdpa("on_cudnn", "cudnn"), sdpa("on_flash", "flash")};
    const LoweredStep step = lower(g, o.lowering);
    std::vector<std::string> host_ops;
    for (const Kernel& k : step.kernels.kernels) {
        if (k.kind == KernelKind::host_only && k.host_dispatch) host_ops.push_back(k.host_op.str());
    }
    CHECK(host_ops == std::vector<std::string>{"sdpa_cudnn", "sdpa_flash", "sdpa_flash", "sdpa_cudnn"});
    // No figures of either backend: both cost the sdpa layer's.
    CHECK(predict(g, ctx, o).host_time.value() == Catch::Approx(2 * (30e-6 + 70e-6) + 50e-6));
    // cuDNN's measured: that layer costs them, flash's keeps the op's; the rows stay sdpa.
    figure("layer_forward_sdpa_cudnn_autocast", 60e-6);
    figure("layer_backward_sdpa_cudnn_autocast", 90e-6);
    const Prediction cudnn = predict(g, ctx, o);
    CHECK(cudnn.host_time.value() == Catch::Approx((60e-6 + 90e-6) + (30e-6 + 70e-6) + 50e-6));
    REQUIRE(cudnn.layers.size() == 2);
    CHECK(cudnn.layers[0].op == "sdpa");
    // The figures of the other precision class stay out.
    figure("layer_forward_sdpa_flash", 1e-3);
    CHECK(predict(g, ctx, o).host_time.value() == Catch::Approx(cudnn.host_time.value()));

    // nn.MultiheadAttention called with need_weights=False: its own figures where measured.
    Graph m;
    m.name = "mha";
    m.inputs.push_back(GraphInput{"x", {GraphBuilder::batch, 16, 64}, DType::bf16, true});
    const std::map<std::string, AttrValue> mha_attrs = {{"embed_dim", AttrValue(std::int64_t{64})},
                                                        {"num_heads", AttrValue(std::int64_t{1})}};
    auto no_weights = mha_attrs;
    no_weights["need_weights"] = AttrValue(false);
    m.layers = {Layer{"weights", "mha", {"x"}, mha_attrs}, Layer{"no_weights", "mha", {"weights"}, no_weights}};
    CHECK(predict(m, ctx, o).host_time.value() == Catch::Approx(2 * (300e-6 + 500e-6) + 50e-6));
    figure("layer_forward_mha_no_weights_autocast", 100e-6);
    figure("layer_backward_mha_no_weights_autocast", 200e-6);
    const Prediction own = predict(m, ctx, o);
    CHECK(own.host_time.value() == Catch::Approx((300e-6 + 500e-6) + (100e-6 + 200e-6) + 50e-6));
    REQUIRE(own.layers.size() == 2);
    CHECK(own.layers[1].op == "mha");
}

TEST_CASE("autocast's casts of activations cost the cast layer's host figures; weights' casts and a layer alone cost none", "[predict][sim]") {
    FrameworkProfile f = h200_test_framework({{"layer_forward_layernorm_autocast", 20e-6}, {"layer_backward_layernorm_autocast", 40e-6},
                                              {"layer_forward_linear_autocast", 30e-6}, {"layer_backward_linear_autocast", 70e-6},
                                              {"layer_forward_add_autocast", 4e-6}, {"layer_backward_add_autocast", 6e-6},
                                              {"backward_call", 50e-6}});
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"));
    PredictOptions o = host_cost_options(f);
    o.lowering.precision = PrecisionMode::amp_bf16;
    // A float32 layer norm's output into a linear layer: autocast casts it to bfloat16 (and its
    // gradient back); the linear layer's bfloat16 output into a second linear layer: no cast.
    Graph g;
    g.name = "cast";
    g.inputs.push_back(GraphInput{"x", {GraphBuilder::batch, 16, 64}, DType::f32, true});
    const std::map<std::string, AttrValue> linear = {{"in_features", AttrValue(std::int64_t{64})},
                                                     {"out_features", AttrValue(std::int64_t{64})}};
    g.layers = {Layer{"norm", "layernorm", {"x"}, {{"normalized_shape", AttrValue(std::vector<std::int64_t>{64})}}},
                Layer{"fc1", "linear", {"norm"}, linear}, Layer{"fc2", "linear", {"fc1"}, linear}};
    const LoweredStep step = lower(g, o.lowering);
    std::vector<std::string> markers;  // layer:host op, forward then backward
    for (const Kernel& k : step.kernels.kernels) {
        if (k.kind == KernelKind::host_only && k.host_dispatch) markers.push_back(k.layer.str() + ":" + k.host_op.str());
    }
    CHECK(markers == std::vector<std::string>{"norm:layernorm", "fc1:linear", "fc1:cast", "fc2:linear", "fc2:linear",
                                              "fc1:linear", "fc1:cast", "norm:layernorm"});
    // Without a cast figure in the profile the casts cost an add's, as any op without figures.
    const double layers = (20e-6 + 40e-6) + 2 * (30e-6 + 70e-6) + 50e-6;
    CHECK(predict(g, ctx, o).host_time.value() == Catch::Approx(layers + 4e-6 + 6e-6));
    set_figure(f, "layer_forward_cast_autocast", 15e-6);
    set_figure(f, "layer_backward_cast_autocast", 25e-6);
    CHECK(predict(g, ctx, o).host_time.value() == Catch::Approx(layers + 15e-6 + 25e-6));
    // The same graph in float32: no autocast, no casts.
    o.lowering.precision = PrecisionMode::fp32;
    set_figure(f, "layer_forward_layernorm", 20e-6);
    set_figure(f, "layer_backward_layernorm", 40e-6);
    set_figure(f, "layer_forward_linear", 30e-6);
    set_figure(f, "layer_backward_linear", 70e-6);
    CHECK(predict(g, ctx, o).host_time.value() == Catch::Approx(layers));
    // A linear layer alone on a float32 input: its steady figure holds its input's cast.
    o.lowering.precision = PrecisionMode::amp_bf16;
    set_figure(f, "layer_steady_linear_autocast", 300e-6);
    Graph one;
    one.name = "one";
    one.inputs = g.inputs;
    one.layers = {Layer{"fc", "linear", {"x"}, linear}};
    CHECK(predict(one, ctx, o).host_time.value() == Catch::Approx(300e-6));
}

TEST_CASE("a convolution's host cost grows with its size as the profile's conv_host figures measured it", "[predict][sim]") {
    nlohmann::json figures = nlohmann::json::object();
    // One size of a family and precision class: its forward and its forward + backward figure.
    const auto conv_size = [&figures](const std::string& family, const std::string& mode, double flops, double forward_seconds,
                                      double forward_backward_seconds) {
        for (const auto& [part, seconds] : {std::pair{std::string("forward"), forward_seconds},
                                            std::pair{std::string("forward_backward"), forward_backward_seconds}}) {
            figures["conv_host_" + family + "_" + mode + "_" + std::to_string(static_cast<long long>(flops)) + "_" + part] = {
                {"seconds", seconds}, {"min", seconds}, {"max", seconds}, {"samples", 1}, {"method", "test"},
                {"conv_host", {{"family", family}, {"mode", mode}, {"part", part}, {"flops", flops}}}};
        }
    };
    // 3x3 under autocast at 1e4, 1e8 and 1e10 FLOPs: forward 100, 150, 140 us; forward + backward
    // 300, 420, 600 us. Growth over the tiny size: forward 0, 50, 40 (never below 0); backward
    // (200, 270, 460) - 200 = 0, 70, 260 us.
    conv_size("k3", "autocast", 1e4, 100e-6, 300e-6);
    conv_size("k3", "autocast", 1e8, 150e-6, 420e-6);
    conv_size("k3", "autocast", 1e10, 140e-6, 600e-6);
    // 1x1 under autocast: forward 80 -> 60 us (no growth), forward + backward 200 -> 300 us.
    conv_size("k1", "autocast", 1e4, 80e-6, 200e-6);
    conv_size("k1", "autocast", 1e9, 60e-6, 300e-6);
    // float32 without TF32: one size only, no curve.
    conv_size("k3", "fp32_strict", 1e4, 30e-6, 90e-6);
    const nlohmann::json doc = framework_doc(figures);
    const FrameworkProfile f = framework_profile_from_json(doc, "test");
    CHECK(f.conv_host.size() == 12);
    const ConvHostGrowth amp = conv_host_growth_from_framework(f, PrecisionMode::amp_fp16);
    REQUIRE(amp.other.size() == 3);
    CHECK(amp.other[1].forward.value() == Catch::Approx(50e-6));
    CHECK(amp.other[2].forward.value() == Catch::Approx(40e-6));
    CHECK(amp.other[1].backward.value() == Catch::Approx(70e-6));
    CHECK(amp.other[2].backward.value() == Catch::Approx(260e-6));
    REQUIRE(amp.kernel_1x1.size() == 2);
    CHECK(amp.kernel_1x1[1].forward.value() == 0);
    CHECK(amp.kernel_1x1[1].backward.value() == Catch::Approx(120e-6));
    CHECK(conv_host_growth_from_framework(f, PrecisionMode::fp32_strict).other.empty());  // one size: no growth known
    CHECK(conv_host_growth_from_framework(f, PrecisionMode::fp32).other.empty());         // another precision class

    // A pass between two sizes: linear in log FLOPs (1e9 is halfway from 1e8 to 1e10); beyond the
    // largest, the largest's; the data-gradient pass and a depthwise convolution grow by nothing.
    Kernel k;
    k.kind = KernelKind::conv;
    ConvDims d;  // 2 N K P Q C R S = 2 x 100 x 50 x 10 x 10 x 100 x 3 x 3 = 9e8 FLOPs
    d.n = 100; d.k = 50; d.c = 100; d.h = d.w = 10; d.r = d.s = 3; d.pad_h = d.pad_w = 1;
    const auto growth_at = [&](ConvPass pass, const ConvDims& dims) {
        ConvDims with = dims;
        with.pass = pass;
        k.dims = with;
        return conv_host_growth(k, amp).value();
    };
    const double t = std::log(9e8 / 1e8) / std::log(1e10 / 1e8);
    CHECK(growth_at(ConvPass::forward, d) == Catch::Approx(50e-6 + (40e-6 - 50e-6) * t));
    CHECK(growth_at(ConvPass::backward_filter, d) == Catch::Approx(70e-6 + (260e-6 - 70e-6) * t));
    CHECK(growth_at(ConvPass::backward_data, d) == 0);
    ConvDims big = d;
    big.n = 10000;  // 9e10 FLOPs
    CHECK(growth_at(ConvPass::backward_filter, big) == Catch::Approx(260e-6));
    ConvDims depthwise = d;
    depthwise.k = depthwise.groups = 100;
    CHECK(growth_at(ConvPass::forward, depthwise) == 0);
    ConvDims pointwise = d;
    pointwise.r = pointwise.s = 1;
    pointwise.pad_h = pointwise.pad_w = 0;
    pointwise.n = 1000;  // 1e9 FLOPs: the 1x1 curve's largest size
    CHECK(growth_at(ConvPass::backward_filter, pointwise) == Catch::Approx(120e-6));

    // In a prediction: a convolution layer costs its tiny figures plus its growth.
    FrameworkProfile with_layers = f;
    for (const auto& [key, seconds] : std::map<std::string, double>{{"layer_forward_conv2d_nobias_autocast", 20e-6},
                                                                     {"layer_backward_conv2d_nobias_autocast", 40e-6},
                                                                     {"backward_call", 50e-6}}) {
        set_figure(with_layers, key, seconds);
    }
    test::add_missing_step_figures(with_layers);
    PredictOptions o = host_cost_options(with_layers);
    o.lowering.precision = PrecisionMode::amp_bf16;
    o.lowering.batch = 100;
    Graph g;
    g.name = "conv";
    g.inputs.push_back(GraphInput{"x", {GraphBuilder::batch, 100, 10, 10}, DType::f32, true});
    g.layers.push_back(Layer{"conv", "conv2d", {"x"},
                             {{"in_channels", AttrValue(std::int64_t{100})}, {"out_channels", AttrValue(std::int64_t{50})},
                              {"kernel_size", AttrValue(std::vector<std::int64_t>{3, 3})},
                              {"padding", AttrValue(std::vector<std::int64_t>{1, 1})}, {"bias", AttrValue(false)}}});
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"));
    const double growth = growth_at(ConvPass::forward, d) + growth_at(ConvPass::backward_filter, d);
    CHECK(predict(g, ctx, o).host_time.value() == Catch::Approx(20e-6 + 40e-6 + 50e-6 + growth));
    CHECK(scaled(host_costs_from_framework(with_layers, PrecisionMode::amp_bf16, o.lowering.optimizer, 1), 2.0)
              .conv_growth.other[2].backward.value() == Catch::Approx(520e-6));

    nlohmann::json bad = doc;
    bad["figures"].begin()->at("conv_host")["family"] = "k5";
    CHECK_THROWS_WITH(framework_profile_from_json(bad, "test"), Catch::Contains("family") && Catch::Contains("k3"));
}

TEST_CASE("optimizer.step() costs the figures of the optimizer as it runs: in a step the cold-cache ones, alone the back-to-back ones", "[predict][sim]") {
    FrameworkProfile f = h200_test_framework({{"optimizer_sgd_foreach_cold_per_step", 100e-6}, {"optimizer_sgd_foreach_cold_per_param", 2e-6},
                                              {"optimizer_sgd_wd_foreach_cold_per_step", 250e-6}, {"optimizer_sgd_wd_foreach_cold_per_param", 4e-6},
                                              {"optimizer_sgd_wd_foreach_per_step", 150e-6}, {"optimizer_sgd_wd_foreach_per_param", 3e-6},
                                              {"optimizer_adamw_foreach_cold_per_step", 400e-6}, {"optimizer_adamw_foreach_cold_per_param", 12e-6},
                                              {"optimizer_adamw_foreach_per_step", 300e-6}, {"optimizer_adamw_foreach_per_param", 10e-6}});
    OptimizerOptions sgd;
    sgd.kind = OptimizerKind::sgd;
    sgd.weight_decay = true;
    OptimizerOptions sgd_plain = sgd;
    sgd_plain.weight_decay = false;
    OptimizerOptions adamw;
    adamw.kind = OptimizerKind::adamw;
    OptimizerOptions adam = adamw;
    adam.kind = OptimizerKind::adam;
    const std::size_t tensors = 161;
    const auto step = [&f, tensors](const OptimizerOptions& o) { return optimizer_step_host_seconds(f, o, tensors).value(); };
    CHECK(step(sgd) == Catch::Approx(250e-6 + 161 * 4e-6));  // weight decay runs its own figures
    CHECK(step(sgd_plain) == Catch::Approx(100e-6 + 161 * 2e-6));
    CHECK(step(adamw) == Catch::Approx(400e-6 + 161 * 12e-6));
    CHECK(step(adam) == step(adamw));  // Adam reads AdamW's figures
    // steps timed one after another: the back-to-back figures
    CHECK(optimizer_step_host_seconds(f, adamw, tensors, OptimizerTiming::back_to_back).value() == Catch::Approx(300e-6 + 161 * 10e-6));
    CHECK(optimizer_step_host_seconds(f, sgd, tensors, OptimizerTiming::back_to_back).value() == Catch::Approx(150e-6 + 161 * 3e-6));
    const HostCosts h = host_costs_from_framework(f, PrecisionMode::amp_bf16, adamw, tensors);
    CHECK(h.optimizer_step.value() == Catch::Approx(400e-6 + 161 * 12e-6));
    // a figure the profile lacks is an error naming it, never a zero
    f.figures.erase("optimizer_sgd_wd_foreach_cold_per_param");
    CHECK_THROWS_WITH(step(sgd), Catch::Contains("no figure 'optimizer_sgd_wd_foreach_cold_per_param'"));
    OptimizerOptions none;
    none.kind = OptimizerKind::none;
    CHECK(step(none) == 0);
    OptimizerOptions fused = sgd;
    fused.fused = true;
    CHECK(step(fused) == 0);  // no fused figures measured: no host cost known
}

TEST_CASE("a foreach optimizer's kernels are issued where its host work reaches their ops, as the profile's launches measured", "[predict][sim]") {
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"), find_builtin_calibration("h200-sxm"));
    const auto optimizer_kernel = [](const char* op) {
        Kernel k;
        k.kind = KernelKind::optimizer;
        k.phase = Phase::optimizer;
        k.op = op;
        k.host_dispatch = false;
        k.bytes_read = Bytes(4e6);
        k.bytes_written = Bytes(4e6);
        k.flops = Flops(1e6);
        return k;
    };
    KernelList list;
    Kernel marker;
    marker.kind = KernelKind::host_only;
    marker.phase = Phase::optimizer;
    marker.op = "dispatch optimizer";
    marker.host_op = "optimizer";
    list.kernels = {marker, optimizer_kernel("aten::_foreach_mul_"), optimizer_kernel("aten::_foreach_mul_"),
                    optimizer_kernel("aten::_foreach_lerp_"), optimizer_kernel("aten::_foreach_norm"),
                    optimizer_kernel("aten::_foreach_add_")};
    HostCosts h;
    h.optimizer_step = Seconds(1e-3);
    const double step = 1e-3;
    const auto issued = [&](const Timeline& t) {
        std::vector<double> at;
        for (const auto& s : t.kernels) at.push_back(s.issued.value());
        return at;
    };
    // Without launches: every kernel after all of optimizer.step()'s host time.
    const Timeline before = simulate(list, ctx, h);
    CHECK(before.kernels[1].issued.value() == Catch::Approx(step));
    CHECK(before.host_time.value() == Catch::Approx(step));

    h.optimizer_launches = {{"aten::_foreach_mul_", 0.2}, {"aten::_foreach_lerp_", 0.5}, {"aten::_foreach_add_", 0.9}};
    const Timeline t = simulate(list, ctx, h);
    const std::vector<double> at = issued(t);
    CHECK(at[0] == Catch::Approx(0).margin(1e-15));  // the marker keeps none of it
    CHECK(at[1] == Catch::Approx(0.2 * step));       // an op's first kernel at its fraction,
    CHECK(at[2] == Catch::Approx(0.2 * step));       // its others with it
    CHECK(at[3] == Catch::Approx(0.5 * step));
    CHECK(at[4] == Catch::Approx(0.5 * step));       // an op not listed: with the one before it
    CHECK(at[5] == Catch::Approx(0.9 * step));
    // the host's work after the last launch still counts: the host's total and the step's end
    CHECK(t.host_time.value() == Catch::Approx(step));
    double host_sum = 0;
    for (const auto& s : t.kernels) host_sum += s.host_time.value();
    CHECK(host_sum == Catch::Approx(step));
    CHECK(t.step_time.value() >= step);
    // the kernels overlap the host's work: the step ends sooner than with all of it before them
    CHECK(t.step_time.value() < before.step_time.value());
    CHECK(t.step_time.value() == Catch::Approx(std::max(step, t.kernels[5].start.value() + t.kernels[5].gpu_time.value())));

    // Two consecutive ops of one name: their kernels are one run, issued at the first's place.
    h.optimizer_launches = {{"aten::_foreach_mul_", 0.3}, {"aten::_foreach_mul_", 0.6}, {"aten::_foreach_add_", 0.9}};
    const std::vector<double> same = issued(simulate(list, ctx, h));
    CHECK(same[2] == Catch::Approx(0.3 * step));
    CHECK(same[5] == Catch::Approx(0.9 * step));
    // Launches that name none of the kernels: as without launches.
    h.optimizer_launches = {{"aten::_fused_adamw_", 0.95}};
    CHECK(issued(simulate(list, ctx, h)) == issued(before));
}

TEST_CASE("a profile's host speed is read with the spread of its canaries", "[predict][framework]") {
    nlohmann::json doc = framework_doc({{"step", {{"seconds", 1e-5}, {"min", 1e-5}, {"max", 1e-5}, {"samples", 1}, {"method", "m"}}}});
    doc["host_speed"] = {{"reference_seconds_per_op", 5e-6}, {"canary_p10_seconds", 4.8e-6}, {"canary_p90_seconds", 5.1e-6}};
    const FrameworkProfile f = framework_profile_from_json(doc, "test");
    REQUIRE(f.host_canary_p10.has_value());
    REQUIRE(f.host_canary_p90.has_value());
    CHECK(f.host_canary_p10->value() == Catch::Approx(4.8e-6));
    CHECK(f.host_canary_p90->value() == Catch::Approx(5.1e-6));
    doc["host_speed"]["canary_p90_seconds"] = 4.7e-6;
    CHECK_THROWS_WITH(framework_profile_from_json(doc, "test"), Catch::Contains("canary_p90_seconds"));
    doc["host_speed"].erase("canary_p90_seconds");  // both or neither
    CHECK_FALSE(framework_profile_from_json(doc, "test").host_canary_p10.has_value());
}

TEST_CASE("a framework profile without measurements, or with a time that is not one, is refused naming the file", "[predict][framework]") {
    CHECK_THROWS_WITH(framework_profile_from_json(framework_doc(nlohmann::json::object()), "empty.json"),
                      "empty.json: /figures: no figures and no op_timings (a framework profile holds what the framework probe measured)");
    const nlohmann::json figure = {{"seconds", 1e-5}, {"min", 1e-5}, {"max", 1e-5}, {"samples", 1}, {"method", "m"}};
    CHECK_NOTHROW(framework_profile_from_json(framework_doc({{"step", figure}}), "one.json"));
    nlohmann::json negative = figure;
    negative["seconds"] = -1e-5;
    CHECK_THROWS_WITH(framework_profile_from_json(framework_doc({{"step", negative}}), "neg.json"),
                      "neg.json: /figures/step/seconds: must not be negative, got -1e-05");
    // a fit's intercept may fall below 0 in a pass, by its noise: the spread may reach below 0, the figure not
    negative["seconds"] = 1e-5;
    negative["min"] = -1e-5;
    CHECK_NOTHROW(framework_profile_from_json(framework_doc({{"zero_grad_per_step", negative}}), "fit.json"));
}

TEST_CASE("a profile's optimizer launches are read in launch order, for the optimizer as it runs", "[predict][framework]") {
    const nlohmann::json ops = {{{"op", "aten::_foreach_lerp_"}, {"fraction", 0.3}}, {{"op", "aten::_foreach_addcdiv_"}, {"fraction", 0.9}}};
    const auto launches_figure = [](const nlohmann::json& o) {
        return nlohmann::json{{"seconds", 1e-3}, {"min", 1e-3}, {"max", 1e-3}, {"samples", 9}, {"method", "set by the test"}, {"ops", o}};
    };
    const FrameworkProfile f = framework_profile_from_json(
        framework_doc({{"optimizer_adamw_foreach_launches", launches_figure(ops)},
                       {"optimizer_sgd_wd_foreach_launches", launches_figure({{{"op", "aten::_foreach_add"}, {"fraction", 0.6}}})}}),
        "test");
    OptimizerOptions o;
    o.kind = OptimizerKind::adamw;
    const auto names = [&f](const OptimizerOptions& opt) {
        std::vector<std::pair<std::string, double>> out;
        for (const auto& l : optimizer_launches(f, opt)) out.emplace_back(l.op, l.fraction);
        return out;
    };
    const std::vector<std::pair<std::string, double>> adamw = {{"aten::_foreach_lerp_", 0.3}, {"aten::_foreach_addcdiv_", 0.9}};
    CHECK(names(o) == adamw);
    o.kind = OptimizerKind::adam;  // Adam runs AdamW's ops less the decay's multiply
    CHECK(names(o) == adamw);
    FrameworkProfile full = f;
    test::add_missing_step_figures(full);
    CHECK(host_costs_from_framework(full, PrecisionMode::amp_bf16, o, 10).optimizer_launches.size() == 2);
    o.fused = true;  // fused: not measured
    CHECK(names(o).empty());
    o = OptimizerOptions{};
    o.kind = OptimizerKind::sgd;
    o.weight_decay = true;
    CHECK(names(o) == std::vector<std::pair<std::string, double>>{{"aten::_foreach_add", 0.6}});
    o.weight_decay = false;  // SGD without weight decay: its own figure, which this profile lacks: an error
    CHECK_THROWS_WITH(names(o), Catch::Contains("no figure 'optimizer_sgd_foreach_launches'"));
    // fractions of the step's host time, in launch order
    CHECK_THROWS_WITH(framework_profile_from_json(framework_doc({{"optimizer_adamw_foreach_launches",
                                                                  launches_figure({{{"op", "a"}, {"fraction", 1.5}}})}}), "test"),
                      Catch::Contains("fraction"));
    CHECK_THROWS_WITH(framework_profile_from_json(framework_doc({{"optimizer_adamw_foreach_launches",
                                                                  launches_figure({{{"op", "a"}, {"fraction", 0.5}}, {{"op", "b"}, {"fraction", 0.4}}})}}),
                                                  "test"),
                      Catch::Contains("launch order"));
}

TEST_CASE("optimizer.zero_grad() is charged on the host before a step's first kernel, and in no phase timed alone", "[predict][sim]") {
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"), find_builtin_calibration("h200-sxm"));
    FrameworkProfile f = h200_test_framework({{"layer_forward_add", 5e-6}, {"layer_backward_add", 5e-6},
                                              {"optimizer_sgd_foreach_cold_per_step", 100e-6}, {"optimizer_sgd_foreach_cold_per_param", 2e-6},
                                              {"optimizer_sgd_foreach_per_step", 50e-6}, {"optimizer_sgd_foreach_per_param", 1e-6}});
    const Graph g = *zoo::model("resnet50");
    PredictOptions o;
    o.lowering.batch = 8;
    o.lowering.precision = PrecisionMode::fp32;
    o.lowering.optimizer.kind = OptimizerKind::sgd;
    o.lowering.optimizer.weight_decay = false;
    o.framework = &f;
    const Prediction without = predict(g, ctx, o);
    CHECK(without.zero_grad_time.value() == 0);  // figures of zero charge nothing

    set_figure(f, "zero_grad_per_step", 40e-6);
    set_figure(f, "zero_grad_per_param", 3e-6);
    const Prediction with = predict(g, ctx, o);
    const double tensors = static_cast<double>(lower(g, o.lowering).parameter_tensors.size());
    REQUIRE(tensors > 0);
    const double zero_grad = 40e-6 + tensors * 3e-6;
    CHECK(with.zero_grad_time.value() == Catch::Approx(zero_grad));
    // every kernel waits for it: the whole step moves by it, host time grows by it, the phases do not
    CHECK(with.step_time.value() == Catch::Approx(without.step_time.value() + zero_grad));
    CHECK(with.host_time.value() == Catch::Approx(without.host_time.value() + zero_grad));
    CHECK(with.forward_time.value() == Catch::Approx(without.forward_time.value()));
    CHECK(with.timeline.kernels.front().issued.value() == Catch::Approx(without.timeline.kernels.front().issued.value() + zero_grad));
    // inside the step the optimizer costs the host the cold-cache figures, alone the back-to-back ones
    set_figure(f, "optimizer_sgd_foreach_cold_per_step", 900e-6);
    set_figure(f, "optimizer_sgd_foreach_cold_per_param", 9e-6);
    const Prediction cold = predict(g, ctx, o);
    CHECK(optimizer_step_host_seconds(f, o.lowering.optimizer, static_cast<std::size_t>(tensors), OptimizerTiming::back_to_back).value() ==
          Catch::Approx(50e-6 + tensors * 1e-6));
    CHECK(cold.host_time.value() == Catch::Approx(with.host_time.value() + (900e-6 + tensors * 9e-6) - (100e-6 + tensors * 2e-6)));
    CHECK(to_json(with).at("zero_grad_seconds").get<double>() == Catch::Approx(zero_grad));
    CHECK(to_json(with).at("kind") == "roofsim-prediction");
    CHECK(to_json(with).at("schema_version") == 2);

    // no optimizer: no zero_grad()
    o.lowering.optimizer.kind = OptimizerKind::none;
    CHECK(predict(g, ctx, o).zero_grad_time.value() == 0);
    // a slower host: scaled with every other host figure
    o.lowering.optimizer.kind = OptimizerKind::sgd;
    o.host_time_scale = 2;
    CHECK(predict(g, ctx, o).zero_grad_time.value() == Catch::Approx(2 * zero_grad));
}

TEST_CASE("a host figure table reads and writes as a map of op names", "[predict][sim]") {
    HostFigureTable<Seconds> t;
    CHECK(t.empty());
    CHECK(t.find("linear") == t.end());
    CHECK_THROWS_AS(t.at("linear"), std::out_of_range);
    CHECK(t.emplace("linear", Seconds(1e-6)).second);
    CHECK_FALSE(t.emplace("linear", Seconds(2e-6)).second);  // keeps the first, as std::map::emplace
    CHECK(t.at("linear").value() == 1e-6);
    t["linear"] = Seconds(3e-6);  // operator[] overwrites
    CHECK(t.at("linear").value() == 3e-6);
    CHECK(t["conv2d"].value() == 0);  // and adds a zero
    // names past the in-place length are found by their characters
    const std::string long_op = "an_op_name_longer_than_thirty_one_characters";
    t[long_op] = Seconds(4e-6);
    CHECK(t.at(std::string(long_op)).value() == 4e-6);
    CHECK(t.count("linear_nobias") == 0);
    CHECK(t.count("linea") == 0);
    CHECK(t.size() == 3);
    double sum = 0;
    for (const auto& [op, seconds] : t) sum += seconds.value();
    CHECK(sum == Catch::Approx(7e-6));
}

TEST_CASE("host costs scale as a whole, and the profile names the host speed they were measured at", "[predict][sim]") {
    HostCosts h;
    h.forward["linear"] = Seconds(10e-6);
    h.backward["linear"] = Seconds(20e-6);
    h.default_forward = Seconds(1e-6);
    h.default_backward = Seconds(2e-6);
    h.backward_call = Seconds(3e-6);
    h.backward_call_end = Seconds(4e-6);
    h.optimizer_step = Seconds(5e-6);
    h.per_kernel = Seconds(6e-6);
    h.synchronize = Seconds(7e-6);
    const HostCosts s = scaled(h, 1.5);
    CHECK(s.forward.at("linear").value() == Catch::Approx(15e-6));
    CHECK(s.backward.at("linear").value() == Catch::Approx(30e-6));
    for (const auto& [got, was] : std::vector<std::pair<Seconds, Seconds>>{{s.default_forward, h.default_forward},
                                                                           {s.default_backward, h.default_backward},
                                                                           {s.backward_call, h.backward_call},
                                                                           {s.backward_call_end, h.backward_call_end},
                                                                           {s.optimizer_step, h.optimizer_step},
                                                                           {s.per_kernel, h.per_kernel},
                                                                           {s.synchronize, h.synchronize}}) {
        CHECK(got.value() == Catch::Approx(1.5 * was.value()));
    }
    CHECK(s.source.find("x1.500") != std::string::npos);
    CHECK_THROWS_AS(scaled(h, -1.0), std::invalid_argument);
    CHECK_THROWS_AS(scaled(h, std::nan("")), std::invalid_argument);

    nlohmann::json doc =
        framework_doc({{"eager_op_add", {{"seconds", 8e-6}, {"min", 7e-6}, {"max", 9e-6}, {"samples", 3}, {"method", "test"}}}});
    // No canary, no host speed (never the eager_op_add figure in its place).
    CHECK_FALSE(framework_profile_from_json(doc, "test").host_seconds_per_op().has_value());
    doc["host_speed"] = nullptr;  // a run on which no canary could be taken
    CHECK_FALSE(framework_profile_from_json(doc, "test").host_seconds_per_op().has_value());
    doc["host_speed"] = {{"reference_seconds_per_op", 10e-6}};
    CHECK(framework_profile_from_json(doc, "test").host_seconds_per_op()->value() == Catch::Approx(10e-6));
    doc["host_speed"]["reference_seconds_per_op"] = -1.0;
    CHECK_THROWS_WITH(framework_profile_from_json(doc, "test"), Catch::Contains("reference_seconds_per_op"));

    // Each pass's figure is read at the run's host speed (x reference / its canary), then the median.
    doc["host_speed"]["reference_seconds_per_op"] = 10e-6;
    doc["figures"]["layer_forward_relu"] = {{"seconds", 20e-6}, {"min", 10e-6}, {"max", 30e-6}, {"samples", 3}, {"method", "test"},
                                            {"pass_seconds", {10e-6, 20e-6, 30e-6}},
                                            {"pass_host_canary_seconds", {5e-6, 20e-6, 10e-6}}};
    doc["figures"]["gpu_kernel_gap"] = {{"seconds", 1e-6}, {"min", 1e-6}, {"max", 1e-6}, {"samples", 3}, {"method", "GPU-paced"}};
    const FrameworkProfile read = framework_profile_from_json(doc, "test");
    // 10 x 10/5 = 20, 20 x 10/20 = 10, 30 x 10/10 = 30: median 20 us; as measured, 20 us too
    const FrameworkFigure& relu = read.figures.at("layer_forward_relu");
    CHECK(relu.seconds == Catch::Approx(20e-6));
    CHECK(relu.measured_seconds == Catch::Approx(20e-6));
    doc["figures"]["layer_forward_relu"]["pass_host_canary_seconds"] = {20e-6, 20e-6, 20e-6};  // a host twice as slow
    CHECK(framework_profile_from_json(doc, "test").figures.at("layer_forward_relu").seconds == Catch::Approx(10e-6));
    CHECK_FALSE(read.figures.at("gpu_kernel_gap").measured_seconds.has_value());  // no canary: as measured
    CHECK(read.figures.at("gpu_kernel_gap").seconds == Catch::Approx(1e-6));
    // a fit's intercept may come out below 0 in one pass: read as it is (x 10/20: -5, 10, 15 us, median
    // 10); a median below 0 reads as 0
    doc["figures"]["layer_forward_relu"]["pass_seconds"] = {-10e-6, 20e-6, 30e-6};
    doc["figures"]["layer_forward_relu"]["min"] = -10e-6;
    CHECK(framework_profile_from_json(doc, "test").figures.at("layer_forward_relu").seconds == Catch::Approx(10e-6));
    doc["figures"]["layer_forward_relu"]["pass_seconds"] = {-10e-6, -20e-6, 30e-6};
    doc["figures"]["layer_forward_relu"]["min"] = -20e-6;
    CHECK(framework_profile_from_json(doc, "test").figures.at("layer_forward_relu").seconds == 0.0);
    doc["figures"]["layer_forward_relu"]["pass_host_canary_seconds"] = {20e-6, 20e-6};
    CHECK_THROWS_WITH(framework_profile_from_json(doc, "test"), Catch::Contains("one canary per pass"));

    // A layer's backward figure runs on autograd's device thread: at the backward canary's speed where
    // the profile has it, at the canary's where it has not.
    doc["figures"]["layer_forward_relu"]["pass_host_canary_seconds"] = {10e-6, 10e-6, 10e-6};
    doc["figures"]["layer_forward_relu"]["pass_seconds"] = {10e-6, 20e-6, 30e-6};
    doc["figures"]["layer_forward_relu"]["min"] = 10e-6;
    for (const char* key : {"layer_forward_relu", "layer_backward_relu"}) {
        doc["figures"][key] = doc["figures"]["layer_forward_relu"];
        doc["figures"][key]["pass_host_backward_canary_seconds"] = {40e-6, 40e-6, 40e-6};  // autograd's thread twice as slow
    }
    const auto figure = [&doc](const char* key) { return framework_profile_from_json(doc, "test").figures.at(key).seconds; };
    CHECK(figure("layer_backward_relu") == Catch::Approx(20e-6));  // no backward reference: the canary's
    doc["host_speed"]["backward_reference_seconds_per_node"] = 20e-6;
    CHECK(framework_profile_from_json(doc, "test").host_backward_reference_seconds_per_node->value() == Catch::Approx(20e-6));
    CHECK(figure("layer_backward_relu") == Catch::Approx(10e-6));  // 20 us x 20/40
    CHECK(figure("layer_forward_relu") == Catch::Approx(20e-6));   // the forward's stays on the canary
    doc["figures"]["layer_backward_relu"].erase("pass_host_backward_canary_seconds");  // a figure without it: the canary's
    CHECK(figure("layer_backward_relu") == Catch::Approx(20e-6));
    doc["host_speed"]["backward_reference_seconds_per_node"] = 0.0;
    CHECK_THROWS_WITH(framework_profile_from_json(doc, "test"), Catch::Contains("backward_reference_seconds_per_node"));
}

TEST_CASE("fused attention pads sequences to blocks of 64 and takes sdpa's timings whoever calls it", "[predict][cost]") {
    const FrameworkProfile* framework = find_builtin_framework_profile("h200-sxm");
    REQUIRE(framework != nullptr);
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"), find_builtin_calibration("h200-sxm"), framework);
    const auto attention = [](std::int64_t seq, const std::string& source_op) {
        Kernel k;
        k.kind = KernelKind::attention;
        k.unit = ComputeUnit::bf16_tensor;
        k.dtype = DType::bf16;
        k.source_op = source_op;
        AttentionDims a;
        a.batch = 128;
        a.heads = 12;
        a.seq_q = a.seq_kv = seq;
        a.head_dim = 64;
        k.dims = a;
        k.flops = attention_flops(a, false);
        return k;
    };
    // ViT-B/16's 197 tokens run as 256 (four blocks of 64): the time of 256, more than 192's, and
    // far from cuBLAS's unaligned slow path (several times slower).
    const double t197 = kernel_cost(attention(197, "sdpa"), ctx).time.value();
    CHECK(t197 == Catch::Approx(kernel_cost(attention(256, "sdpa"), ctx).time.value()).epsilon(0.01));
    CHECK(t197 > kernel_cost(attention(192, "sdpa"), ctx).time.value());
    // The kernel model prices the H200's fused attention (data/kernel_models/gh100.json): no sdpa
    // efficiency on top of it.
    REQUIRE(!ctx.attention.empty());
    CHECK(op_factor(attention(197, "sdpa"), ctx) == 1.0);
    // Without a kernel model's entry, nn.MultiheadAttention's fused kernel takes sdpa's timings: the same efficiency.
    CostContext bare = ctx;
    bare.attention.clear();
    CHECK(op_factor(attention(197, "mha"), bare) == op_factor(attention(197, "sdpa"), bare));
    CHECK(op_factor(attention(197, "sdpa"), bare) != 1.0);
    Kernel copy;
    copy.kind = KernelKind::copy;
    copy.source_op = "mha";
    copy.dtype = DType::bf16;
    CHECK(op_factor(copy, ctx) == 1.0);  // mha's other kernels keep mha's own (none timed)
    copy.op = "aten::clone";              // but its layout copies are transposed copies
    copy.phase = Phase::backward;
    CHECK(op_factor(copy, ctx) != 1.0);
    copy.phase = Phase::forward;
    const double forward_factor = op_factor(copy, ctx);
    copy.phase = Phase::backward;
    CHECK(op_factor(copy, ctx) == forward_factor);
}

TEST_CASE("an op timing's forward casts of leaves count once per autocast context", "[predict][framework]") {
    // The probe times ten forward calls inside one torch.autocast context: autocast casts each float32
    // input that requires grad once and reuses the copy, so the timing holds a tenth of the casts.
    const nlohmann::json input = {{"shape", {64, 12, 256, 64}}, {"dtype", "float32"}, {"requires_grad", true}};
    const nlohmann::json timing = {{"op", "sdpa"},
                                   {"params", {{"is_causal", false}, {"backend", "cudnn"}}},
                                   {"precision", "amp-bf16"},
                                   {"inputs", {input, input, input}},
                                   {"forward_gpu_seconds", {{"seconds", 1e-4}}},
                                   {"backward_gpu_seconds", {{"seconds", 5e-4}}}};
    nlohmann::json doc = framework_doc(nlohmann::json::object(), nlohmann::json::array({timing}));
    const FrameworkProfile parsed = framework_profile_from_json(doc, "test");
    REQUIRE(parsed.op_timings.size() == 1);
    CHECK(parsed.op_timing_calls == 1);  // no settings: one call per measurement
    doc["settings"] = {{"op_timing_calls", 10}};
    CHECK(framework_profile_from_json(doc, "test").op_timing_calls == 10);
    doc["settings"] = {{"op_timing_calls", 0}};
    CHECK_THROWS_WITH(framework_profile_from_json(doc, "test"), Catch::Contains("op_timing_calls"));
    // the attention kernel's modelled time and the three casts', no factor, no floor
    CostContext plain = make_cost_context(gpu_or_throw("h200-sxm"), find_builtin_calibration("h200-sxm"));
    plain.kernel_floor = Seconds(0);
    LoweringOptions o;
    o.precision = PrecisionMode::amp_bf16;
    o.optimizer.kind = OptimizerKind::none;
    double attention = 0, casts = 0;
    std::optional<Kernel> attention_kernel;
    const LoweredStep step = lower(parsed.op_timings.front().graph, o);
    for (const Kernel& k : step.kernels.kernels) {
        if (k.phase != Phase::forward) continue;
        if (k.kind == KernelKind::attention) attention += kernel_cost(k, plain).time.value(), attention_kernel = k;
        if (is_cast(k)) casts += kernel_cost(k, plain).time.value();
    }
    REQUIRE(attention_kernel.has_value());
    REQUIRE(casts > attention / 2);  // at this size the casts are a large part of the forward
    // a forward that took the attention's modelled time plus a tenth of the casts: factor 1 over ten calls
    FrameworkProfile f = parsed;
    f.op_timings.front().forward_seconds = attention + casts / 10;
    f.op_timing_calls = 10;
    CostContext ctx = plain;
    calibrate_op_factors(ctx, f);
    const auto forward_factor = [&] {
        return op_factor_at(ctx.op_factor.at(std::tuple<std::string, Phase, bool>{"sdpa", Phase::forward, true}), *attention_kernel);
    };
    CHECK(forward_factor() == Catch::Approx(1.0));
    // read as one call per measurement, the casts would take more than the measurement leaves
    f.op_timing_calls = 1;
    calibrate_op_factors(ctx, f);
    CHECK(forward_factor() < 0.5);
}

TEST_CASE("an elementwise loop over strided or broadcast operands takes the transposed copy's efficiency", "[predict][framework]") {
    const FrameworkProfile* f = find_builtin_framework_profile("h200-sxm");
    REQUIRE(f != nullptr);
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"), find_builtin_calibration("h200-sxm"), f);
    // a bias added apart to a transposed bfloat16 tensor (ViT-B/16's in-projection at batch 128): the
    // same bytes as the add layer's loop, which runs vectorized on dense operands
    Kernel add;
    add.op = "aten::add";
    add.kind = KernelKind::elementwise;
    add.dtype = DType::bf16;
    add.bytes_read = Bytes(116199936);
    add.bytes_written = Bytes(116195328);
    add.source_op = "add";
    Kernel copy = add;
    copy.op = "aten::clone";
    copy.kind = KernelKind::copy;
    const Seconds plain_add = kernel_cost(add, ctx).time;
    add.strided = true;
    CHECK(factor_op(add) == "transpose_contiguous");
    CHECK(op_factor(add, ctx) == Catch::Approx(op_factor(copy, ctx)));
    CHECK(kernel_cost(add, ctx).time.value() > plain_add.value());
    // the same loop backward (the probe's transposed copy is timed forward); not a gradient sum
    add.phase = Phase::backward;
    CHECK_FALSE(is_gradient_sum(add));
    CHECK(op_factor(add, ctx) == Catch::Approx(op_factor(copy, ctx)));
    // a mixed-dtype loop keeps the mixed-dtype add's efficiency, strided or not
    add.mixed_dtypes = true;
    CHECK(factor_op(add) == "elementwise_mixed");
}

TEST_CASE("elementwise loops over mixed dtypes take the mixed-dtype add's timing, in any op", "[predict][framework]") {
    // The probe times add(bfloat16, float32) (PyTorch's casting loop) apart from the same-dtype ops,
    // and GPT-2's tanh GELU, two of whose forward loops and one backward are such loops.
    const auto tensor = [](const char* dtype, bool grad) {
        return nlohmann::json{{"shape", {4096, 1024}}, {"dtype", dtype}, {"requires_grad", grad}};
    };
    const nlohmann::json mixed_add = {{"op", "add"},
                                      {"params", nlohmann::json::object()},
                                      {"precision", "fp32"},
                                      {"inputs", {tensor("bfloat16", false), tensor("float32", false)}},
                                      {"forward_gpu_seconds", {{"seconds", 1.0}}},
                                      {"backward_gpu_seconds", {{"seconds", 0.0}}}};
    const nlohmann::json gelu = {{"op", "gelu_tanh_composite"},
                                 {"params", nlohmann::json::object()},
                                 {"precision", "amp-bf16"},
                                 {"inputs", {tensor("bfloat16", true)}},
                                 {"forward_gpu_seconds", {{"seconds", 1.0}}},
                                 {"backward_gpu_seconds", {{"seconds", 1.0}}}};
    const nlohmann::json doc = framework_doc(nlohmann::json::object(), nlohmann::json::array({mixed_add, gelu}));
    FrameworkProfile f = framework_profile_from_json(doc, "test");
    REQUIRE(f.op_timings.size() == 2);
    CostContext plain = make_cost_context(gpu_or_throw("h200-sxm"), find_builtin_calibration("h200-sxm"));
    plain.kernel_floor = Seconds(0);
    plain.memory_fixed_time = Seconds(0);  // timings set at multiples of the modelled work alone
    const auto lowered = [](const OpTiming& t) {
        LoweringOptions o;
        o.precision = t.precision;
        o.optimizer.kind = OptimizerKind::none;
        return lower(t.graph, o);
    };
    // the add at twice its modelled time; the GELU at its modelled time, but with its mixed loops
    // taking twice theirs, forward and backward
    double add_modelled = 0;
    for (const Kernel& k : lowered(f.op_timings[0]).kernels.kernels) {
        if (k.phase == Phase::forward && k.kind == KernelKind::elementwise) {
            REQUIRE(k.mixed_dtypes);
            add_modelled += kernel_cost(k, plain).time.value();
        }
    }
    REQUIRE(add_modelled > 0);
    f.op_timings[0].forward_seconds = 2 * add_modelled;
    double gelu_time[2] = {0, 0};
    std::optional<Kernel> mixed_backward, gelu_forward;
    for (const Kernel& k : lowered(f.op_timings[1]).kernels.kernels) {
        if (k.kind == KernelKind::host_only) continue;
        const double t = kernel_cost(k, plain).time.value();
        gelu_time[k.phase == Phase::forward ? 0 : 1] += k.mixed_dtypes ? 2 * t : t;
        if (k.mixed_dtypes && k.phase == Phase::backward) mixed_backward = k;
        if (!k.mixed_dtypes && !is_cast(k) && k.phase == Phase::forward && k.dtype == DType::bf16) gelu_forward = k;  // 0.5 x
    }
    REQUIRE(mixed_backward.has_value());
    REQUIRE(gelu_forward.has_value());
    f.op_timings[1].forward_seconds = gelu_time[0];
    f.op_timings[1].backward_seconds = gelu_time[1];
    CostContext ctx = plain;
    calibrate_op_factors(ctx, f);
    // the mixed loop's factor, in either pass and whichever operand's dtype the kernel carries
    CHECK(factor_op(*mixed_backward) == "elementwise_mixed");
    CHECK(op_factor(*mixed_backward, ctx) == Catch::Approx(2.0));
    mixed_backward->dtype = DType::bf16;
    CHECK(op_factor(*mixed_backward, ctx) == Catch::Approx(2.0));
    // the GELU's own kernels: what its measurement leaves once its mixed loops are charged at theirs
    CHECK(op_factor(*gelu_forward, ctx) == Catch::Approx(1.0));
    gelu_forward->phase = Phase::backward;
    CHECK(op_factor(*gelu_forward, ctx) == Catch::Approx(1.0));
    // the add's timing calibrates no same-dtype add
    CHECK(ctx.op_factor.count(std::tuple<std::string, Phase, bool>{"add", Phase::forward, false}) == 0);
}

TEST_CASE("a depthwise convolution takes its efficiency by its output positions per channel, not its bytes", "[predict][cost]") {
    // Its weight gradient reduces each channel's N x P x Q positions in one block: two timings, many
    // channels of few positions and few channels of many, bracket a kernel by that count.
    const auto depthwise = [](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t r, std::int64_t s) {
        Kernel k;
        k.kind = KernelKind::conv;
        ConvDims d;
        d.pass = ConvPass::backward_filter;
        d.n = n;
        d.c = d.k = d.groups = c;
        d.h = h;
        d.w = w;
        d.r = r;
        d.s = s;
        d.pad_h = r / 2;
        d.pad_w = s / 2;
        k.dims = d;
        k.bytes_read = Bytes(2.0 * static_cast<double>(n * c * h * w) * 4);
        return k;
    };
    const Kernel late = depthwise(32, 512, 28, 28, 3, 3), early = depthwise(16, 96, 112, 112, 3, 3);
    CHECK(factor_size(late) == Catch::Approx(32.0 * 28 * 28));
    CHECK(factor_size(early) == Catch::Approx(16.0 * 112 * 112));
    OpFactorPoint late_point, early_point;
    late_point.factor = 1.0;
    late_point.size = factor_size(late);
    early_point.factor = 4.0;
    early_point.size = factor_size(early);
    const std::vector<OpFactorPoint> points = {late_point, early_point};
    // a depthwise conv1d of 1024 channels of 16 x 2048 positions: more bytes than either timing, but
    // per channel near the late stage's
    const Kernel conv1d = depthwise(16, 1024, 1, 2048, 1, 3);
    CHECK(conv1d.bytes().value() > early.bytes().value());
    const double t = std::log(16.0 * 2048 / late_point.size) / std::log(early_point.size / late_point.size);
    CHECK(op_factor_at(points, conv1d) == Catch::Approx(std::pow(4.0, t)));
    CHECK(op_factor_at(points, conv1d) < 1.5);
    CHECK(op_factor_at(points, depthwise(64, 256, 56, 56, 3, 3)) == Catch::Approx(4.0));  // beyond the early stage's
    // any other kernel is read by its bytes
    Kernel relu;
    relu.kind = KernelKind::elementwise;
    relu.bytes_read = Bytes(1e6);
    CHECK(factor_size(relu) == Catch::Approx(1e6));
}

TEST_CASE("a depthwise conv1d takes its own timing's efficiency, the depthwise conv2d's where it has none", "[predict][framework]") {
    const auto depthwise = [](const char* op, std::vector<std::int64_t> shape, double forward_seconds, double backward_seconds) {
        const std::size_t rank = shape.size() - 2;
        const std::int64_t c = shape[1];
        return nlohmann::json{{"op", op},
                              {"params", {{"in_channels", c}, {"out_channels", c}, {"kernel_size", std::vector<std::int64_t>(rank, 3)},
                                          {"stride", std::vector<std::int64_t>(rank, 1)}, {"padding", std::vector<std::int64_t>(rank, 1)},
                                          {"groups", c}, {"bias", false}}},
                              {"precision", "fp32"},
                              {"inputs", {{{"shape", shape}, {"dtype", "float32"}, {"requires_grad", true}}}},
                              {"forward_gpu_seconds", {{"seconds", forward_seconds}}},
                              {"backward_gpu_seconds", {{"seconds", backward_seconds}}}};
    };
    CostContext plain = make_cost_context(gpu_or_throw("h200-sxm"), find_builtin_calibration("h200-sxm"));
    plain.kernel_floor = Seconds(0);
    plain.memory_fixed_time = Seconds(0);  // timings set at multiples of the modelled work alone
    // the forward depthwise kernel of a timing's layer, and its modelled time
    const auto forward_kernel = [&](const nlohmann::json& timing) {
        const FrameworkProfile one = framework_profile_from_json(framework_doc(nlohmann::json::object(), nlohmann::json::array({timing})), "test");
        LoweringOptions o;
        o.optimizer.kind = OptimizerKind::none;
        for (const Kernel& k : lower(one.op_timings.front().graph, o).kernels.kernels) {
            if (k.phase == Phase::forward && is_depthwise_conv(k)) return k;
        }
        FAIL("no forward depthwise kernel");
        return Kernel{};
    };
    const nlohmann::json conv2d_shape = depthwise("conv2d", {32, 512, 28, 28}, 1.0, 1.0), conv1d_shape = depthwise("conv1d", {16, 768, 1536}, 1.0, 1.0);
    const Kernel k2 = forward_kernel(conv2d_shape), k1 = forward_kernel(conv1d_shape);
    CHECK(factor_op(k2) == "depthwise_conv2d");
    CHECK(factor_op(k1) == "depthwise_conv1d");
    const double modelled2 = kernel_cost(k2, plain).time.value(), modelled1 = kernel_cost(k1, plain).time.value();
    // the conv2d timed at three times its modelled forward, the conv1d at half
    const nlohmann::json conv2d = depthwise("conv2d", {32, 512, 28, 28}, 3 * modelled2, 0.0);
    const nlohmann::json conv1d = depthwise("conv1d", {16, 768, 1536}, 0.5 * modelled1, 0.0);
    CostContext ctx = plain;
    calibrate_op_factors(ctx, framework_profile_from_json(framework_doc(nlohmann::json::object(), nlohmann::json::array({conv2d})), "test"));
    CHECK(op_factor(k2, ctx) == Catch::Approx(3.0));
    CHECK(op_factor(k1, ctx) == 1.0);  // no conv1d timing: no efficiency of its own, never another op's
    calibrate_op_factors(ctx, framework_profile_from_json(framework_doc(nlohmann::json::object(), nlohmann::json::array({conv2d, conv1d})), "test"));
    CHECK(op_factor(k2, ctx) == Catch::Approx(3.0));
    CHECK(op_factor(k1, ctx) == Catch::Approx(0.5));  // its own
    // the step simulation's per-op lookups take the same
    const Prediction p = predict_kernels(KernelList{"dw", PrecisionMode::fp32, "test", {k1}}, ctx, HostCosts{});
    CHECK(p.gpu_time.value() == Catch::Approx(kernel_cost(k1, ctx).time.value()));
}

TEST_CASE("an elementwise op timed at two sizes takes its efficiency by its kernel's bytes between them", "[predict][framework]") {
    // The probe times an elementwise op near the L2 cache's size and well beyond it; a model's kernel
    // between the two takes the factor interpolated in log over log bytes, the end points' beyond.
    const auto relu = [](std::int64_t rows, double forward_seconds) {
        return nlohmann::json{{"op", "relu"},
                              {"params", nlohmann::json::object()},
                              {"precision", "fp32"},
                              {"inputs", {{{"shape", {rows, 1024}}, {"dtype", "float32"}, {"requires_grad", true}}}},
                              {"forward_gpu_seconds", {{"seconds", forward_seconds}}},
                              {"backward_gpu_seconds", {{"seconds", 0.0}}}};
    };
    CostContext plain = make_cost_context(gpu_or_throw("h200-sxm"), find_builtin_calibration("h200-sxm"));
    plain.kernel_floor = Seconds(0);
    plain.memory_fixed_time = Seconds(0);  // timings set at multiples of the modelled work alone
    // a relu forward kernel over `rows` x 1024 float32 elements, and its modelled time
    const auto forward_kernel = [&](std::int64_t rows) {
        const FrameworkProfile one = framework_profile_from_json(framework_doc(nlohmann::json::object(), nlohmann::json::array({relu(rows, 1.0)})), "test");
        LoweringOptions o;
        o.optimizer.kind = OptimizerKind::none;
        for (const Kernel& k : lower(one.op_timings.front().graph, o).kernels.kernels) {
            if (k.phase == Phase::forward && k.kind == KernelKind::elementwise) return k;
        }
        FAIL("no forward elementwise kernel");
        return Kernel{};
    };
    const Kernel small = forward_kernel(16384), large = forward_kernel(65536), between = forward_kernel(32768);
    const double small_modelled = kernel_cost(small, plain).time.value(), large_modelled = kernel_cost(large, plain).time.value();
    // timed at twice and at half their modelled times
    const nlohmann::json doc =
        framework_doc(nlohmann::json::object(), nlohmann::json::array({relu(16384, 2 * small_modelled), relu(65536, 0.5 * large_modelled)}));
    CostContext ctx = plain;
    calibrate_op_factors(ctx, framework_profile_from_json(doc, "test"));
    CHECK(op_factor(small, ctx) == Catch::Approx(2.0));
    CHECK(op_factor(large, ctx) == Catch::Approx(0.5));
    CHECK(op_factor(between, ctx) == Catch::Approx(1.0));  // halfway in log bytes: the geometric mean
    CHECK(op_factor(forward_kernel(4096), ctx) == Catch::Approx(2.0));     // below the smaller: its factor
    CHECK(op_factor(forward_kernel(262144), ctx) == Catch::Approx(0.5));  // beyond the larger
    // timed at one size only: that timing's factor at any size, as before
    nlohmann::json one_size = doc;
    one_size["op_timings"] = nlohmann::json::array({relu(16384, 2 * small_modelled)});
    calibrate_op_factors(ctx, framework_profile_from_json(one_size, "test"));
    CHECK(op_factor(large, ctx) == Catch::Approx(2.0));
}

TEST_CASE("an exported IR's model code costs its time at export, scaled by the Python reference calls: this host's fastest over the exporting host's while it timed the code", "[predict][ir]") {
    // a forward of one relu, with 300 us of model code before it and a view in model code; the
    // reference: the exporting host's fastest call (an earlier exporter's median of the moment with
    // `median`)
    const auto ir_doc = [](bool with_code, std::optional<double> reference_seconds, bool median = false) {
        nlohmann::json kernels = nlohmann::json::array();
        if (with_code) {
            kernels.push_back({{"op", "model code"}, {"kind", "host-only"}, {"phase", "forward"}, {"layer", "block"},
                               {"host_dispatch", false}, {"python_seconds", 300e-6}});
        }
        kernels.push_back({{"op", "aten::view"}, {"kind", "host-only"}, {"phase", "forward"}, {"layer", "block"},
                           {"host_op", "view_chain"}, {"source_op", "reshape"}});
        kernels.push_back({{"op", "dispatch relu"}, {"kind", "host-only"}, {"phase", "forward"}, {"layer", "relu"}, {"host_op", "relu"}});
        kernels.push_back({{"op", "aten::relu"}, {"kind", "elementwise"}, {"phase", "forward"}, {"layer", "relu"}, {"dtype", "float32"},
                           {"unit", "fp32"}, {"bytes_read", 4096}, {"bytes_written", 4096}, {"host_dispatch", false}, {"source_op", "relu"}});
        nlohmann::json doc = {{"schema_version", 1}, {"kind", "roofsim-kernel-ir"}, {"model", "m"}, {"precision", "fp32"}, {"batch", 1},
                              {"kernels", kernels}};
        if (reference_seconds) {
            doc["model_code"] = {{median ? "reference_seconds" : "fastest_reference_seconds", *reference_seconds},
                                 {"method", "set by the test"}};
        }
        return kernel_ir_from_json(doc, "ir.json");
    };
    FrameworkProfile f = h200_test_framework({{"layer_forward_relu", 10e-6}, {"layer_forward_add", 4e-6},
                                              {"layer_forward_reshape", 30e-6}, {"layer_forward_view_chain", 3e-6}});
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"));
    const Prediction plain = predict(ir_doc(false, std::nullopt), ctx, framework_options(&f));
    CHECK(plain.host_time.value() == Catch::Approx(13e-6));  // a view in model code: the chain's 3 us, not a reshape layer's 30
    // no python_reference in the profile: an error naming it, never the code unscaled
    f.figures.erase("python_reference");
    CHECK_THROWS_WITH(predict(ir_doc(true, 1e-3), ctx, framework_options(&f)), Catch::Contains("no figure 'python_reference'"));
    // this host's fastest call of the reference work takes half the exporting host's: the code takes
    // half as long, whatever the figure's median (a swing of this host's speed while the probe ran)
    set_figure(f, "python_reference", 1.8e-3);
    f.figures["python_reference"].min = f.figures["python_reference"].measured_min = 0.5e-3;
    const Prediction scaled = predict(ir_doc(true, 1e-3), ctx, framework_options(&f));
    CHECK(scaled.host_time.value() - plain.host_time.value() == Catch::Approx(150e-6));
    // the exporting host timed the code while its reference calls took 2 ms (their median), twice its
    // fastest: the code ran at that speed, and takes a quarter of its timed length here
    nlohmann::json slow_export = to_json(ir_doc(true, 1e-3));
    slow_export["model_code"]["timed_reference_seconds"] = 2e-3;
    const KernelIr slow_ir = kernel_ir_from_json(slow_export, "ir.json");
    CHECK(predict(slow_ir, ctx, framework_options(&f)).host_time.value() - plain.host_time.value() == Catch::Approx(75e-6));
    CHECK(to_json(slow_ir)["model_code"]["timed_reference_seconds"] == 2e-3);  // written back
    slow_export["model_code"]["timed_reference_seconds"] = 0.5e-3;  // a median faster than the fastest call
    CHECK_THROWS_WITH(kernel_ir_from_json(slow_export, "ir.json"), Catch::Contains("/model_code/timed_reference_seconds"));
    // an earlier exporter's reference (reference_seconds, a median of the moment) is refused, and so
    // is a model_code without the fastest call
    CHECK_THROWS_WITH(ir_doc(true, 1e-3, true), Catch::Contains("/model_code/reference_seconds: unknown field"));
    nlohmann::json none = to_json(ir_doc(true, 1e-3));
    none["model_code"].erase("fastest_reference_seconds");
    CHECK_THROWS_WITH(kernel_ir_from_json(none, "ir.json"), Catch::Contains("fastest_reference_seconds"));
    // and with every host cost (PredictOptions::host_time_scale, the validation's canary): twice as slow
    const Prediction slower = predict(ir_doc(true, 1e-3), ctx, framework_options(&f, 2.0));
    CHECK(slower.host_time.value() == Catch::Approx(2 * scaled.host_time.value()));
    // a profile without the view chain figure: the reshape layer's, as before
    f.figures.erase("layer_forward_view_chain");
    CHECK(predict(ir_doc(false, std::nullopt), ctx, framework_options(&f)).host_time.value() == Catch::Approx(40e-6));
    // model code on a GPU kernel is refused, naming the field
    nlohmann::json bad = to_json(ir_doc(false, std::nullopt));
    bad["kernels"][2]["python_seconds"] = 1e-6;
    CHECK_THROWS_WITH(kernel_ir_from_json(bad, "ir.json"), Catch::Contains("/kernels/2/python_seconds"));
}

TEST_CASE("a framework profile of this GPU without its op timings or kernel gap is refused, naming what is missing", "[predict][framework]") {
    const GpuSpec& h200 = gpu_or_throw("h200-sxm");
    FrameworkProfile f = *find_builtin_framework_profile("h200-sxm");
    f.figures.erase("gpu_kernel_gap");
    CHECK_THROWS_WITH(make_cost_context(h200, find_builtin_calibration("h200-sxm"), &f), Catch::Contains("no figure 'gpu_kernel_gap'"));
    f.op_timings.clear();
    CHECK_THROWS_WITH(make_cost_context(h200, find_builtin_calibration("h200-sxm"), &f), Catch::Contains("no op timings"));
    // measured with another GPU, the profile gives host costs only: neither is read
    CHECK_NOTHROW(make_cost_context(gpu_or_throw("a100-80gb-sxm"), nullptr, &f));
}

TEST_CASE("a memory-bound kernel pays the kernel model's fixed time once, and its per-op efficiency scales only its work", "[predict][cost]") {
    CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"), find_builtin_calibration("h200-sxm"));
    ctx.kernel_floor = Seconds(0);
    REQUIRE(ctx.memory_fixed_time.value() > 0);  // the GH100 kernel model's, fitted to the corpus's elementwise calls
    Kernel k;
    k.kind = KernelKind::elementwise;
    k.op = "aten::relu";
    k.dtype = DType::f32;
    k.bytes_read = Bytes(64e6);
    k.bytes_written = Bytes(64e6);
    CostContext none = ctx;
    none.memory_fixed_time = Seconds(0);
    const double work = detail::kernel_cost(k, none, 1.0, nullptr).time.value();
    CHECK(detail::kernel_cost(k, ctx, 1.0, nullptr).time.value() == Catch::Approx(ctx.memory_fixed_time.value() + work));
    CHECK(detail::kernel_cost(k, ctx, 2.0, nullptr).time.value() == Catch::Approx(ctx.memory_fixed_time.value() + 2 * work));
    // a GEMM takes none of it
    Kernel g;
    g.kind = KernelKind::gemm;
    g.op = "aten::mm";
    g.unit = ComputeUnit::bf16_tensor;
    g.dtype = DType::bf16;
    g.dims = GemmDims{4096, 4096, 4096, 1, GemmLayout::nn};
    g.flops = gemm_flops(std::get<GemmDims>(g.dims));
    CHECK(detail::kernel_cost(g, ctx, 1.0, nullptr).time.value() == Catch::Approx(detail::kernel_cost(g, none, 1.0, nullptr).time.value()));
}

TEST_CASE("an inference forward's host costs: each layer's layer_inference_ figure, else its training forward's, said so",
          "[predict][sim][inference]") {
    FrameworkProfile f;
    f.gpu_key = "h200-sxm";
    const auto figure = [&f](const std::string& key, double seconds) {
        f.figures[key] = FrameworkFigure{seconds, seconds, seconds, 1, "test", std::nullopt};
    };
    figure("layer_forward_linear", 30e-6);
    figure("layer_inference_linear", 20e-6);
    figure("layer_forward_relu", 15e-6);
    figure("layer_forward_add", 12e-6);
    figure("layer_inference_add", 8e-6);
    test::add_missing_step_figures(f);
    const std::vector<std::string_view> ops = {"linear", "relu"};
    for (const bool scan : {false, true}) {
        INFO((scan ? "every op of the profile" : "the graph's ops"));
        const HostCosts h = scan ? host_costs_from_framework(f, PrecisionMode::fp32, OptimizerOptions{}, 0, StepMode::inference)
                                 : detail::host_costs_from_framework(f, PrecisionMode::fp32, OptimizerOptions{}, 0, &ops, false,
                                                                     StepMode::inference);
        CHECK(h.forward.at("linear").value() == Catch::Approx(20e-6));
        CHECK(h.forward.at("relu").value() == Catch::Approx(15e-6));  // no inference figure: training's
        CHECK(h.default_forward.value() == Catch::Approx(8e-6));
        CHECK_THAT(h.source, Catch::Matchers::Contains("takes its training forward's"));
        const HostCosts t = scan ? host_costs_from_framework(f, PrecisionMode::fp32, OptimizerOptions{}, 0)
                                 : detail::host_costs_from_framework(f, PrecisionMode::fp32, OptimizerOptions{}, 0, &ops);
        CHECK(t.forward.at("linear").value() == Catch::Approx(30e-6));
        CHECK(t.default_forward.value() == Catch::Approx(12e-6));
        CHECK_THAT(t.source, !Catch::Matchers::Contains("inference"));
    }
    figure("layer_inference_relu", 10e-6);  // now every forward figure has its inference one
    const HostCosts all = host_costs_from_framework(f, PrecisionMode::fp32, OptimizerOptions{}, 0, StepMode::inference);
    CHECK(all.forward.at("relu").value() == Catch::Approx(10e-6));
    CHECK_THAT(all.source, !Catch::Matchers::Contains("inference"));
}

TEST_CASE("an inference forward is the forward alone: no zero_grad, backward or optimizer, rows of the layers run",
          "[predict][inference]") {
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"), find_builtin_calibration("h200-sxm"),
                                              find_builtin_framework_profile("h200-sxm"));
    const Graph g = *zoo::model("resnet50", 224);
    PredictOptions o = framework_options(find_builtin_framework_profile("h200-sxm"));
    o.lowering.batch = 8;
    o.lowering.precision = PrecisionMode::amp_bf16;
    const Prediction training = predict(g, ctx, o);
    o.lowering.mode = StepMode::inference;
    const Prediction p = predict(g, ctx, o);
    CHECK(p.mode == StepMode::inference);
    CHECK(p.zero_grad_time.value() == 0);
    CHECK(p.backward_time.value() == 0);
    CHECK(p.optimizer_time.value() == 0);
    CHECK(p.step_time.value() == Catch::Approx(p.forward_time.value()));
    CHECK(p.memory.gradients.value() == 0);
    CHECK(p.memory.optimizer_state.value() == 0);
    CHECK(p.parameters == training.parameters);
    // no autograd recording, batchnorm in one pass: less GPU time than training's forward kernels
    Seconds training_forward_gpu{0};
    for (const auto& r : training.layers) training_forward_gpu += r.forward_gpu;
    CHECK(p.gpu_time < training_forward_gpu);
    // a row per layer run (the loss is not), each with its layer's op
    REQUIRE(p.layers.size() == g.layers.size() - 1);
    for (std::size_t i = 0; i < p.layers.size(); ++i) {
        CHECK(p.layers[i].layer.str() == g.layers[i].name);
        CHECK(p.layers[i].op.str() == g.layers[i].op);
    }
    CHECK(to_json(p).at("mode") == "inference");
    o.data_parallel.gpus = 2;
    CHECK_THROWS_AS(predict(g, ctx, o), std::invalid_argument);
}
