// Compute ceilings on CUDA cores (mixbench-style: one templated kernel whose compile-time parameter
// sets FLOPs per byte) and on tensor cores through hand-written mma.sync kernels. Each launch records
// clock64() cycles over %globaltimer nanoseconds per block, so the SM clock during the probe is known.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <sstream>

#include "common.cuh"

namespace roofsim::calib {
namespace {

constexpr int kGranularity = 8;  // independent elements (FMA chains) per thread

template <typename T> struct Ops;
template <> struct Ops<float> {
    __device__ static float fma(float a, float b, float c) { return fmaf(a, b, c); }
    __device__ static float seed(float s) { return s; }
    __device__ static bool is(float a, float b) { return a == b; }
    static constexpr int flops_per_fma = 2;
};
template <> struct Ops<double> {
    __device__ static double fma(double a, double b, double c) { return ::fma(a, b, c); }
    __device__ static double seed(float s) { return s; }
    __device__ static bool is(double a, double b) { return a == b; }
    static constexpr int flops_per_fma = 2;
};
template <> struct Ops<__half2> {
    __device__ static __half2 fma(__half2 a, __half2 b, __half2 c) { return __hfma2(a, b, c); }
    __device__ static __half2 seed(float s) { return __float2half2_rn(s); }
    __device__ static bool is(__half2 a, __half2 b) { return __hbeq2(a, b); }
    static constexpr int flops_per_fma = 4;  // two lanes, FMA = 2 FLOPs each
};
template <> struct Ops<__nv_bfloat162> {
    __device__ static __nv_bfloat162 fma(__nv_bfloat162 a, __nv_bfloat162 b, __nv_bfloat162 c) { return __hfma2(a, b, c); }
    __device__ static __nv_bfloat162 seed(float s) { return __float2bfloat162_rn(s); }
    __device__ static bool is(__nv_bfloat162 a, __nv_bfloat162 b) { return __hbeq2(a, b); }
    static constexpr int flops_per_fma = 4;
};

/// Mixbench-style kernel: each thread loads kGranularity elements, applies `Iters` dependent FMAs to
/// each (x = x*x + seed; the chains are independent across elements) `reps` times, and writes the
/// elements back when `write_back` is set, otherwise only if a result equals `never` (it never does),
/// which keeps the arithmetic alive without memory traffic.
/// FLOPs = n * Iters * reps * flops_per_fma; bytes = 2 * n * sizeof(T) when writing back.
template <typename T, int Iters>
__global__ void mix_kernel(T* data, std::size_t n, int reps, float seed_f, bool write_back, ClockRecord* clocks) {
    const long long c0 = clock64();
    const unsigned long long t0 = global_ns();
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    const T seed = Ops<T>::seed(seed_f);
    const T never = Ops<T>::seed(-3.0e4f);
    for (std::size_t base = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; base < n;
         base += stride * kGranularity) {
        T x[kGranularity];
#pragma unroll
        for (int j = 0; j < kGranularity; ++j) {
            const std::size_t i = base + j * stride;
            x[j] = i < n ? data[i] : seed;
        }
        for (int r = 0; r < reps; ++r) {
#pragma unroll
            for (int it = 0; it < Iters; ++it) {
#pragma unroll
                for (int j = 0; j < kGranularity; ++j) x[j] = Ops<T>::fma(x[j], x[j], seed);
            }
        }
#pragma unroll
        for (int j = 0; j < kGranularity; ++j) {
            const std::size_t i = base + j * stride;
            if (i < n && (write_back || Ops<T>::is(x[j], never))) data[i] = x[j];
        }
    }
    __syncthreads();
    if (threadIdx.x == 0 && clocks) clocks[blockIdx.x] = ClockRecord{c0, clock64(), t0, global_ns()};
}

struct UnitSpec {
    ComputeUnit unit;
    const char* instruction;
};

/// FMA issue rate per SM per clock (lanes), where known from the architecture: FP32 and FP64 only.
double fma_lanes_per_sm(ComputeUnit u, int cc) {
    if (u == ComputeUnit::fp32) return cc == 80 ? 64.0 : 128.0;
    if (u == ComputeUnit::fp64) return cc == 80 ? 32.0 : cc == 90 ? 64.0 : 2.0;
    return 0.0;
}

template <typename T>
struct MixRunner {
    ProbeContext& ctx;
    ComputeUnit unit;
    const char* instruction;

    template <int Iters>
    double time_point(T* data, std::size_t n, int samples, std::vector<double>* clocks_hz, int reps, bool write_back,
                      std::vector<double>* times) {
        const int threads = 256;
        const int blocks = static_cast<int>(std::min<std::size_t>(
            static_cast<std::size_t>(ctx.device.sm_count) * (ctx.device.max_threads_per_sm / threads),
            (n + threads * kGranularity - 1) / (threads * kGranularity)));
        DeviceBuffer<ClockRecord> rec(static_cast<std::size_t>(blocks));
        auto work = [&] {
            mix_kernel<T, Iters><<<blocks, threads>>>(data, n, reps, 1.0001f, write_back, rec.get());
            RS_CUDA_LAUNCH();
        };
        std::vector<double> t = time_samples(work, 1, samples);
        if (clocks_hz) {
            std::vector<ClockRecord> h(static_cast<std::size_t>(blocks));
            RS_CUDA(cudaMemcpy(h.data(), rec.get(), h.size() * sizeof(ClockRecord), cudaMemcpyDeviceToHost));
            clocks_hz->push_back(median_clock_hz(h));
        }
        if (times) *times = t;
        return summarize(t).median;
    }

    template <int Iters>
    void curve_point(T* data, std::size_t n, std::vector<IntensityPoint>& curve) {
        ctx.check_deadline(std::string(to_string(unit)) + " curve");
        const double s = time_point<Iters>(data, n, ctx.quick ? 3 : 5, nullptr, 1, true, nullptr);
        const double flops = static_cast<double>(n) * Iters * Ops<T>::flops_per_fma;
        const double bytes = 2.0 * static_cast<double>(n) * sizeof(T);
        curve.push_back({flops / bytes, flops / s, bytes / s});
    }

    void run() {
        const DeviceInfo& d = ctx.device;
        // Curve: 64 Mi elements (>= 4x L2 on every supported GPU), read and written once per launch.
        const std::size_t n_curve = std::min<std::size_t>(std::size_t(1) << 26, d.free_bytes / 4 / sizeof(T));
        DeviceBuffer<T> buf(n_curve);
        fill_random(reinterpret_cast<float*>(buf.get()), n_curve * sizeof(T) / sizeof(float), 7);
        RS_CUDA(cudaDeviceSynchronize());
        std::vector<IntensityPoint> curve;
        curve_point<1>(buf.get(), n_curve, curve);
        if (!ctx.quick) curve_point<2>(buf.get(), n_curve, curve);
        curve_point<4>(buf.get(), n_curve, curve);
        if (!ctx.quick) curve_point<8>(buf.get(), n_curve, curve);
        curve_point<16>(buf.get(), n_curve, curve);
        if (!ctx.quick) curve_point<32>(buf.get(), n_curve, curve);
        curve_point<64>(buf.get(), n_curve, curve);
        if (!ctx.quick) curve_point<128>(buf.get(), n_curve, curve);
        curve_point<256>(buf.get(), n_curve, curve);

        // Peak: one resident wave (every block runs the whole time), no memory traffic, ~target time.
        const std::size_t n_peak = static_cast<std::size_t>(d.sm_count) * d.max_threads_per_sm * kGranularity;
        const double target = ctx.quick ? 0.01 : 0.02;
        int reps = 8;
        const double t0 = time_point<256>(buf.get(), std::min(n_peak, n_curve), 1, nullptr, reps, false, nullptr);
        reps = scale_reps(reps, t0, target);
        std::vector<double> clocks, times;
        const int samples = ctx.quick ? 5 : 11;
        time_point<256>(buf.get(), std::min(n_peak, n_curve), samples, &clocks, reps, false, &times);
        // the clock of each sample is not read separately: one clock figure per probe (last launch)
        const double flops = static_cast<double>(std::min(n_peak, n_curve)) * 256.0 * reps * Ops<T>::flops_per_fma;
        std::vector<double> rates;
        for (double s : times) rates.push_back(flops / s);
        ComputeCeiling c;
        c.flops_per_second = summarize(rates);
        std::ostringstream m;
        m << "mixbench-style kernel, " << kGranularity << " independent " << instruction << " chains per thread, "
          << d.sm_count * (d.max_threads_per_sm / 256) << " blocks x 256 threads (one resident wave), "
          << 256 * reps << " FMAs per element, results stored only under a never-true condition; FLOPs / CUDA-event time, median of "
          << samples << " after 1 warm-up; SM clock = clock64() cycles / %globaltimer ns, median over blocks";
        c.flops_per_second.method = m.str();
        c.instruction = instruction;
        c.sm_clock_hz = clocks.back();
        const double lanes = fma_lanes_per_sm(unit, d.cc());
        if (lanes > 0.0) c.issue_peak_flops_per_second = 2.0 * lanes * d.sm_count * *c.sm_clock_hz;
        ctx.out.probe_ceilings[unit] = c;
        ctx.out.intensity_curves[unit] = curve;
        std::ostringstream l;
        l << to_string(unit) << ": " << c.flops_per_second.median / 1e12 << " TFLOP/s at " << *c.sm_clock_hz / 1e6 << " MHz";
        if (c.issue_peak_flops_per_second)
            l << " (" << 100.0 * c.flops_per_second.median / *c.issue_peak_flops_per_second << "% of issue peak at that clock)";
        ctx.log(l.str());
        if (unit == ComputeUnit::fp32) {
            Measurement clk = summarize(clocks);
            clk.method = "clock64() cycles / %globaltimer ns per block over the FP32 peak kernel (~" +
                         std::to_string(static_cast<int>(target * 1000)) + " ms), median over blocks";
            ctx.out.device.sm_clock_measured_hz = clk;
        }
    }
};

void run_cuda_cores(ProbeContext& ctx) {
    MixRunner<float>{ctx, ComputeUnit::fp32, "FFMA"}.run();
    MixRunner<double>{ctx, ComputeUnit::fp64, "DFMA"}.run();
    MixRunner<__half2>{ctx, ComputeUnit::fp16, "HFMA2"}.run();
    if (ctx.device.cc() >= 80) MixRunner<__nv_bfloat162>{ctx, ComputeUnit::bf16, "HFMA2.BF16"}.run();
    else ctx.missing("compute/probe/bf16", MissingReason::unsupported, "bf16 arithmetic needs compute capability 8.0");
}

// ------------------------------------------------------------------------------------------------
// Tensor cores: mma.sync from registers. Hopper's full tensor rate needs wgmma (sm_90a, operands in
// shared memory); mma.sync runs on Hopper at a fraction of it. Each warp keeps kChains independent
// accumulators, so the probe measures issue throughput, not latency.

constexpr int kChains = 8;

enum class MmaKind { f16_f32, f16_f16, bf16_f32, tf32_f32, s8_s32, e4m3_f32 };

struct MmaShape {
    int m, n, k;
    const char* ptx;
};

constexpr MmaShape mma_shape(MmaKind k) {
    switch (k) {
        case MmaKind::f16_f32: return {16, 8, 16, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"};
        case MmaKind::f16_f16: return {16, 8, 16, "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"};
        case MmaKind::bf16_f32: return {16, 8, 16, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"};
        case MmaKind::tf32_f32: return {16, 8, 8, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"};
        case MmaKind::s8_s32: return {16, 8, 32, "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"};
        case MmaKind::e4m3_f32: return {16, 8, 32, "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"};
    }
    return {0, 0, 0, ""};
}

template <MmaKind K>
__device__ __forceinline__ void mma(unsigned (&acc)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (K == MmaKind::f16_f32) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    } else if constexpr (K == MmaKind::f16_f16) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};"
                     : "+r"(acc[0]), "+r"(acc[1])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    } else if constexpr (K == MmaKind::bf16_f32) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    } else if constexpr (K == MmaKind::tf32_f32) {
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    } else if constexpr (K == MmaKind::s8_s32) {
        asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    } else if constexpr (K == MmaKind::e4m3_f32) {
#if __CUDA_ARCH__ >= 890
        asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
        __trap();  // never launched: the host checks compute capability 8.9 first
#endif
    }
#else
    (void)acc; (void)a; (void)b;
#endif
}

template <MmaKind K>
__global__ void mma_kernel(int reps, unsigned seed, unsigned* sink, ClockRecord* clocks) {
    const long long c0 = clock64();
    const unsigned long long t0 = global_ns();
    // Operand bits: small positive numbers in every format used (0x3c00 = 1.0 in fp16, 0x3f80 = 1.0 in
    // bf16 and the top half of 1.0f in fp32/tf32, 0x38 = 1.0 in e4m3), varied per thread.
    const unsigned v = 0x3c003c00u ^ ((threadIdx.x * 2654435761u + seed) & 0x00ff00ffu);
    unsigned a[4] = {v, v ^ 0x10001u, v ^ 0x20002u, v ^ 0x30003u};
    unsigned b[2] = {v ^ 0x40004u, v ^ 0x50005u};
    if constexpr (K == MmaKind::e4m3_f32 || K == MmaKind::s8_s32) {
        for (auto& x : a) x = 0x38383838u ^ (x & 0x03030303u);
        for (auto& x : b) x = 0x38383838u ^ (x & 0x03030303u);
    }
    if constexpr (K == MmaKind::tf32_f32) {
        for (auto& x : a) x = 0x3f800000u ^ (x & 0x007fe000u);
        for (auto& x : b) x = 0x3f800000u ^ (x & 0x007fe000u);
    }
    unsigned acc[kChains][4] = {};
    for (int r = 0; r < reps; ++r) {
#pragma unroll
        for (int c = 0; c < kChains; ++c) mma<K>(acc[c], a, b);
    }
    unsigned x = 0;
#pragma unroll
    for (int c = 0; c < kChains; ++c) x ^= acc[c][0] ^ acc[c][1] ^ acc[c][2] ^ acc[c][3];
    if (x == 0x7fbadbadu) sink[0] = x;  // never true in practice; keeps the mma chains alive
    __syncthreads();
    if (threadIdx.x == 0) clocks[blockIdx.x] = ClockRecord{c0, clock64(), t0, global_ns()};
}

template <MmaKind K>
void run_mma(ProbeContext& ctx, ComputeUnit unit) {
    ctx.check_deadline(std::string("mma ") + std::string(to_string(unit)));
    const DeviceInfo& d = ctx.device;
    const int threads = 256;
    const int blocks = d.sm_count * (d.max_threads_per_sm / threads);
    DeviceBuffer<unsigned> sink(1);
    DeviceBuffer<ClockRecord> rec(static_cast<std::size_t>(blocks));
    auto launch = [&](int reps) {
        mma_kernel<K><<<blocks, threads>>>(reps, 12345u, sink.get(), rec.get());
        RS_CUDA_LAUNCH();
    };
    int reps = 256;
    const double t0 = summarize(time_samples([&] { launch(reps); }, 1, 1)).median;
    reps = scale_reps(reps, t0, ctx.quick ? 0.01 : 0.02);
    const int samples = ctx.quick ? 5 : 11;
    const auto times = time_samples([&] { launch(reps); }, 1, samples);
    std::vector<ClockRecord> h(static_cast<std::size_t>(blocks));
    RS_CUDA(cudaMemcpy(h.data(), rec.get(), h.size() * sizeof(ClockRecord), cudaMemcpyDeviceToHost));
    const MmaShape sh = mma_shape(K);
    const double flops = 2.0 * sh.m * sh.n * sh.k * kChains * static_cast<double>(reps) * (blocks * threads / 32);
    std::vector<double> rates;
    for (double s : times) rates.push_back(flops / s);
    ComputeCeiling c;
    c.flops_per_second = summarize(rates);
    c.instruction = sh.ptx;
    c.sm_clock_hz = median_clock_hz(h);
    std::ostringstream m;
    m << "hand-written " << sh.ptx << " from registers, " << kChains << " independent accumulators per warp, "
      << blocks << " blocks x " << threads << " threads, " << reps << " iterations; FLOPs (2*m*n*k per mma) / CUDA-event time, median of "
      << samples << " after 1 warm-up"
      << (d.cc() >= 90 ? "; mma.sync is not Hopper's full-rate path (wgmma, sm_90a, is), so this is below the cuBLAS ceiling" : "");
    c.flops_per_second.method = m.str();
    ctx.out.probe_ceilings[unit] = c;
    std::ostringstream l;
    l << "mma " << to_string(unit) << ": " << c.flops_per_second.median / 1e12 << " TFLOP/s at " << *c.sm_clock_hz / 1e6 << " MHz";
    ctx.log(l.str());
}

void run_tensor_mma(ProbeContext& ctx) {
    auto guarded = [&](ComputeUnit u, auto fn) {
        try {
            fn();
        } catch (const ProbeTimeout&) {
            throw;
        } catch (const std::exception& e) {
            ctx.missing("compute/probe/" + std::string(to_string(u)), MissingReason::failed, e.what());
        }
    };
    guarded(ComputeUnit::fp16_tensor, [&] { run_mma<MmaKind::f16_f32>(ctx, ComputeUnit::fp16_tensor); });
    guarded(ComputeUnit::fp16_fp16acc_tensor, [&] { run_mma<MmaKind::f16_f16>(ctx, ComputeUnit::fp16_fp16acc_tensor); });
    guarded(ComputeUnit::bf16_tensor, [&] { run_mma<MmaKind::bf16_f32>(ctx, ComputeUnit::bf16_tensor); });
    guarded(ComputeUnit::tf32_tensor, [&] { run_mma<MmaKind::tf32_f32>(ctx, ComputeUnit::tf32_tensor); });
    guarded(ComputeUnit::int8_tensor, [&] { run_mma<MmaKind::s8_s32>(ctx, ComputeUnit::int8_tensor); });
    // The e4m3 mma.sync kernel (MmaKind::e4m3_f32) measured a rate above the cuBLASLt FP8 ceiling and
    // its SASS showed no FP8 MMA instruction, so it is not trusted and its result is not recorded.
    ctx.missing("compute/probe/fp8-tensor", MissingReason::unsupported, "unsupported: no fp8 mma.sync path verified");
}

}  // namespace

Probe make_cuda_core_probe() {
    return Probe{"compute", "CUDA-core FMA ceilings and rate vs arithmetic intensity: fp32, fp64, fp16x2, bf16x2",
                 3.0, 6.0, [](const DeviceInfo&) { return std::string(); }, run_cuda_cores};
}

Probe make_tensor_mma_probe() {
    return Probe{"tensor_mma", "tensor-core ceilings with hand-written mma.sync: fp16, bf16, tf32, int8 (fp8 not verified, listed as missing)",
                 1.0, 2.0,
                 [](const DeviceInfo& d) {
                     return d.cc() >= 80 ? std::string() : std::string("mma.sync probes need compute capability 8.0");
                 },
                 run_tensor_mma};
}

}  // namespace roofsim::calib
