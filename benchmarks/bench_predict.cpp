// Speed of the predictor: one kernel's cost, lowering ResNet-50, and full training-step predictions
// (lower + cost + simulate + memory) of ResNet-50, BERT-base and GPT-2 small, on the built-in H200
// profiles; and fixed CPU workloads (cpu_canary_*) that tell the core's speed at the moment.
// Run: build/benchmarks/bench_predict
#include <roofsim/roofsim.hpp>
#include <roofsim/sweep.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <vector>

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

/// roofsim sweep's engine on 10,080 ResNet-50 configurations: the 14 built-in GPUs (each with its
/// default profile) x batches 8-187 x fp32, fp32-strict, tf32 and amp-fp16 (720 lowerings; the V100 has no bf16), on every core.
void sweep_resnet50_10k(benchmark::State& state) {
    const roofsim::Graph g = roofsim::zoo::resnet50();
    static const std::vector<roofsim::CostContext> contexts = [] {
        std::vector<roofsim::CostContext> out;
        for (const auto& spec : roofsim::builtin_gpus()) out.push_back(roofsim::make_default_cost_context(spec, framework()));
        return out;
    }();
    roofsim::SweepGrid grid;
    for (const auto& c : contexts) grid.gpus.push_back({&c, framework()});
    for (std::int64_t b = 8; b < 188; ++b) grid.batches.push_back(b);
    grid.precisions = {roofsim::PrecisionMode::fp32, roofsim::PrecisionMode::fp32_strict, roofsim::PrecisionMode::tf32,
                       roofsim::PrecisionMode::amp_fp16};
    roofsim::PredictOptions o;
    o.framework = framework();
    for (auto _ : state) {
        auto rows = roofsim::sweep(g, grid, o);
        benchmark::DoNotOptimize(rows.data());
        state.counters["configurations"] = static_cast<double>(rows.size());
    }
}
BENCHMARK(sweep_resnet50_10k)->Unit(benchmark::kMillisecond)->UseRealTime();

/// Fixed pieces of CPU work, beside the predictions, to tell the core's speed at the moment: a
/// shared host's cores run at two speeds, a process's samples all at one (docs/NOTES.md).
/// Sorting a copy of 4 Ki pseudo-random integers: branchy, in the L1 cache.
void cpu_canary_sort(benchmark::State& state) {
    std::vector<std::uint32_t> values(4 * 1024);
    std::uint64_t x = 88172645463325252ull;  // xorshift64
    for (auto& v : values) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v = static_cast<std::uint32_t>(x);
    }
    std::vector<std::uint32_t> work(values.size());
    for (auto _ : state) {
        std::copy(values.begin(), values.end(), work.begin());
        std::sort(work.begin(), work.end());
        benchmark::DoNotOptimize(work.data());
        benchmark::ClobberMemory();
    }
}
BENCHMARK(cpu_canary_sort)->Unit(benchmark::kMicrosecond);

/// Copying 384 KiB (a thousand records of a step's kernel list) between two buffers, in the L2 cache.
void cpu_canary_copy(benchmark::State& state) {
    std::vector<char> from(384 * 1024, 1), to(from.size());
    for (auto _ : state) {
        std::copy(from.begin(), from.end(), to.begin());
        benchmark::DoNotOptimize(to.data());
        benchmark::ClobberMemory();
    }
}
BENCHMARK(cpu_canary_copy)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
