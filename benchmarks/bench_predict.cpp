// Speed of the predictor: one kernel's cost, lowering ResNet-50, and full training-step predictions
// (lower + cost + simulate + memory) of ResNet-50, BERT-base and GPT-2 small, on the built-in H200
// profiles.
// Run: build/benchmarks/bench_predict
#include <roofsim/roofsim.hpp>

#include <benchmark/benchmark.h>

namespace {

const roofsim::FrameworkProfile* framework() { return roofsim::find_builtin_framework_profile("h200-sxm"); }

const roofsim::CostContext& h200() {
    static const roofsim::CostContext ctx = roofsim::make_cost_context(
        roofsim::gpu_or_throw("h200-sxm"), roofsim::find_builtin_calibration("h200-sxm"), framework());
    return ctx;
}

roofsim::PredictOptions resnet_options() {
    roofsim::PredictOptions o;
    o.lowering.batch = 128;
    o.lowering.precision = roofsim::PrecisionMode::amp_bf16;
    o.framework = framework();
    return o;
}

void kernel_cost_gemm(benchmark::State& state) {
    roofsim::Kernel k;
    k.kind = roofsim::KernelKind::gemm;
    k.unit = roofsim::ComputeUnit::bf16_tensor;
    k.dims = roofsim::GemmDims{8192, 3072, 768, 1};
    k.flops = roofsim::gemm_flops(std::get<roofsim::GemmDims>(k.dims));
    for (auto _ : state) {
        benchmark::DoNotOptimize(k);
        auto c = roofsim::kernel_cost(k, h200());
        benchmark::DoNotOptimize(c);
    }
}
BENCHMARK(kernel_cost_gemm);

void kernel_cost_elementwise(benchmark::State& state) {
    roofsim::Kernel k;
    k.kind = roofsim::KernelKind::elementwise;
    k.source_op = "relu";
    k.bytes_read = roofsim::Bytes(2e8);
    k.bytes_written = roofsim::Bytes(2e8);
    for (auto _ : state) {
        benchmark::DoNotOptimize(k);
        auto c = roofsim::kernel_cost(k, h200());
        benchmark::DoNotOptimize(c);
    }
}
BENCHMARK(kernel_cost_elementwise);

void lower_resnet50(benchmark::State& state) {
    const roofsim::Graph g = roofsim::zoo::resnet50();
    const auto o = resnet_options();
    for (auto _ : state) {
        auto s = roofsim::lower(g, o.lowering);
        benchmark::DoNotOptimize(s);
    }
}
BENCHMARK(lower_resnet50)->Unit(benchmark::kMicrosecond);

void predict_resnet50_step(benchmark::State& state) {
    const roofsim::Graph g = roofsim::zoo::resnet50();
    const auto o = resnet_options();
    for (auto _ : state) {
        auto p = roofsim::predict(g, h200(), o);
        benchmark::DoNotOptimize(p);
    }
}
BENCHMARK(predict_resnet50_step)->Unit(benchmark::kMicrosecond);

/// A transformer step at batch 32, amp-bf16 (sequence 128 for BERT, 1024 for GPT-2).
void predict_transformer_step(benchmark::State& state, const roofsim::Graph& g) {
    auto o = resnet_options();
    o.lowering.batch = 32;
    for (auto _ : state) {
        auto p = roofsim::predict(g, h200(), o);
        benchmark::DoNotOptimize(p);
    }
}
BENCHMARK_CAPTURE(predict_transformer_step, bert_base, roofsim::zoo::bert_base())->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(predict_transformer_step, gpt2_small, roofsim::zoo::gpt2_small())->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
