// Speed of the roofline model itself: one kernel's time, a ridge point, and the first lookup of the
// embedded GPU table. Run: build/benchmarks/bench_roofline
#include <roofsim/roofsim.hpp>

#include <benchmark/benchmark.h>

namespace {

void roofline_time_one_kernel(benchmark::State& state) {
    const roofsim::Ceilings c = roofsim::ceilings_from_spec(roofsim::gpu_or_throw("a100-80gb-sxm"));
    roofsim::KernelWork k;
    k.unit = roofsim::ComputeUnit::bf16_tensor;
    k.flops = roofsim::Flops(2.0 * 4096 * 4096 * 4096);
    k.dram_bytes = roofsim::Bytes(3.0 * 4096 * 4096 * 2);
    for (auto _ : state) {
        benchmark::DoNotOptimize(k);
        auto t = roofsim::roofline_time(k, c);
        benchmark::DoNotOptimize(t);
    }
}
BENCHMARK(roofline_time_one_kernel);

void ceilings_from_spec(benchmark::State& state) {
    const roofsim::GpuSpec& spec = roofsim::gpu_or_throw("h200-sxm");
    for (auto _ : state) {
        auto c = roofsim::ceilings_from_spec(spec);
        benchmark::DoNotOptimize(c);
    }
}
BENCHMARK(ceilings_from_spec);

void find_gpu_by_nvidia_smi_name(benchmark::State& state) {
    for (auto _ : state) {
        const auto* g = roofsim::find_gpu_by_name("NVIDIA A100-SXM4-80GB");
        benchmark::DoNotOptimize(g);
    }
}
BENCHMARK(find_gpu_by_nvidia_smi_name);

}  // namespace

BENCHMARK_MAIN();
