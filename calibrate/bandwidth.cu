// DRAM and L2 bandwidth: read-only, write-only, copy and triad kernels with 16-byte accesses, over a
// working-set ramp from a few KiB to several times L2 (BabelStream / nvbandwidth conventions:
// bytes counted = bytes read + bytes written by the kernel).
#include <cmath>
#include <sstream>

#include "common.cuh"
#include "roofsim/detail/fit.hpp"

namespace roofsim::calib {
namespace {

constexpr int kUnroll = 4;

__device__ __forceinline__ float4 add4(float4 a, float4 b) { return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }
__device__ __forceinline__ float4 triad4(float4 b, float4 c, float s) {
    return make_float4(b.x + s * c.x, b.y + s * c.y, b.z + s * c.z, b.w + s * c.w);
}

/// One kernel per pattern. `reps` passes over the working set (for small sets, so that one launch is
/// long enough to time); loads use ld.global.cg (cached in L2 only) so that repeated passes measure
/// L2, not L1. The read kernel's sum is stored only if it equals `never` (it never does), so the
/// loads cannot be removed.
template <AccessPattern P>
__global__ void __launch_bounds__(1024) bw_kernel(const float4* __restrict__ a, const float4* __restrict__ b,
                                                  float4* __restrict__ c, std::size_t n, int reps, float s,
                                                  float never, float* sink) {
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    const std::size_t tid = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    const float4 w = make_float4(s, s, s, s);
    for (int r = 0; r < reps; ++r) {
        std::size_t i = tid;
        for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
            float4 x[kUnroll], y[kUnroll];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                if constexpr (P != AccessPattern::write) x[u] = __ldcg(a + i + u * stride);
                if constexpr (P == AccessPattern::triad) y[u] = __ldcg(b + i + u * stride);
            }
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                if constexpr (P == AccessPattern::read) acc = add4(acc, x[u]);
                if constexpr (P == AccessPattern::write) c[i + u * stride] = w;
                if constexpr (P == AccessPattern::copy) c[i + u * stride] = x[u];
                if constexpr (P == AccessPattern::triad) c[i + u * stride] = triad4(x[u], y[u], s);
            }
        }
        for (; i < n; i += stride) {
            if constexpr (P == AccessPattern::read) acc = add4(acc, __ldcg(a + i));
            if constexpr (P == AccessPattern::write) c[i] = w;
            if constexpr (P == AccessPattern::copy) c[i] = __ldcg(a + i);
            if constexpr (P == AccessPattern::triad) c[i] = triad4(__ldcg(a + i), __ldcg(b + i), s);
        }
    }
    if constexpr (P == AccessPattern::read) {
        const float t = acc.x + acc.y + acc.z + acc.w;
        if (t == never) sink[0] = t;
    }
}

/// Arrays read and written per element: bytes per float4 element moved per pass.
constexpr int arrays(AccessPattern p) {
    switch (p) {
        case AccessPattern::read: return 1;
        case AccessPattern::write: return 1;
        case AccessPattern::copy: return 2;
        case AccessPattern::triad: return 3;
    }
    return 1;
}

struct Launch {
    int threads;
    int blocks_per_sm;
};

void launch(AccessPattern p, Launch cfg, int sms, const float4* a, const float4* b, float4* c, std::size_t n,
            int reps, float* sink) {
    const dim3 grid(static_cast<unsigned>(sms * cfg.blocks_per_sm)), block(static_cast<unsigned>(cfg.threads));
    const float s = 0.5f, never = -1.2345e30f;
    switch (p) {
        case AccessPattern::read: bw_kernel<AccessPattern::read><<<grid, block>>>(a, b, c, n, reps, s, never, sink); break;
        case AccessPattern::write: bw_kernel<AccessPattern::write><<<grid, block>>>(a, b, c, n, reps, s, never, sink); break;
        case AccessPattern::copy: bw_kernel<AccessPattern::copy><<<grid, block>>>(a, b, c, n, reps, s, never, sink); break;
        case AccessPattern::triad: bw_kernel<AccessPattern::triad><<<grid, block>>>(a, b, c, n, reps, s, never, sink); break;
    }
    RS_CUDA_LAUNCH();
}

std::string cfg_text(Launch cfg, int sms) {
    std::ostringstream o;
    o << sms * cfg.blocks_per_sm << " blocks x " << cfg.threads << " threads";
    return o.str();
}

void run_bandwidth(ProbeContext& ctx) {
    const DeviceInfo& d = ctx.device;
    const int samples = ctx.quick ? 7 : 15;
    // Arrays for the DRAM figure: 1 GiB each (quick) or 2 GiB (full, as BabelStream's 2^28 doubles),
    // at least 16x L2, and at most an eighth of the free memory for the three arrays together.
    std::size_t arr_bytes = ctx.quick ? (1ull << 30) : (2ull << 30);
    arr_bytes = std::min(arr_bytes, d.free_bytes / 8);
    arr_bytes = std::max<std::size_t>(arr_bytes & ~std::size_t(0xFFFF), 1 << 20);
    const std::size_t n_max = arr_bytes / sizeof(float4);
    DeviceBuffer<float4> a(n_max), b(n_max), c(n_max);
    DeviceBuffer<float> sink(1);
    fill_random(reinterpret_cast<float*>(a.get()), n_max * 4, 1);
    fill_random(reinterpret_cast<float*>(b.get()), n_max * 4, 2);
    fill_random(reinterpret_cast<float*>(c.get()), n_max * 4, 3);
    RS_CUDA(cudaDeviceSynchronize());

    // DRAM: the best of a few launch shapes per pattern (all grids sized from the SM count).
    const std::vector<Launch> cfgs = ctx.quick ? std::vector<Launch>{{256, 8}, {1024, 2}}
                                               : std::vector<Launch>{{256, 8}, {512, 4}, {1024, 2}, {256, 16}};
    for (AccessPattern p : all_access_patterns) {
        ctx.check_deadline("dram " + std::string(to_string(p)));
        Measurement best;
        Launch best_cfg{};
        for (Launch cfg : cfgs) {
            const auto t = time_samples([&] { launch(p, cfg, d.sm_count, a.get(), b.get(), c.get(), n_max, 1, sink.get()); },
                                        3, samples);
            std::vector<double> bw;
            for (double s : t) bw.push_back(static_cast<double>(arrays(p)) * arr_bytes / s);
            Measurement m = summarize(bw);
            if (m.median > best.median) { best = m; best_cfg = cfg; }
        }
        std::ostringstream meth;
        meth << to_string(p) << " kernel, float4 (16-byte) accesses, " << arrays(p) << " array(s) of "
             << arr_bytes / (1 << 20) << " MiB, " << cfg_text(best_cfg, d.sm_count)
             << " (best of " << cfgs.size() << " launch shapes), bytes read + written / CUDA-event time, median of "
             << samples << " after 3 warm-ups";
        best.method = meth.str();
        ctx.out.bandwidth[MemoryLevel::dram][p] = best;
        ctx.log("dram " + std::string(to_string(p)) + ": " + std::to_string(best.median / 1e12) + " TB/s");
    }

    // Working-set ramp: from 16 KiB to 8x L2 (or the array size), doubling; small sets repeat passes
    // inside the kernel so that each launch moves at least 256 MiB.
    const Launch ramp_cfg{256, 8};
    const int ramp_samples = ctx.quick ? 3 : 5;
    const std::size_t top = std::min<std::size_t>(8 * std::max<std::size_t>(d.l2_bytes, 1 << 20), 3 * arr_bytes);
    for (AccessPattern p : all_access_patterns) {
        std::vector<BandwidthPoint> curve;
        const std::size_t step = ctx.quick ? 4 : 2;
        for (std::size_t ws = 16 << 10; ws <= top; ws *= step) {
            ctx.check_deadline("ramp " + std::string(to_string(p)));
            const std::size_t n = std::max<std::size_t>(ws / arrays(p) / sizeof(float4), 1);
            const double moved = static_cast<double>(n * sizeof(float4) * arrays(p));
            const int reps = static_cast<int>(std::clamp(256.0 * (1 << 20) / moved, 1.0, 4096.0));
            const auto t = time_samples(
                [&] { launch(p, ramp_cfg, d.sm_count, a.get(), b.get(), c.get(), n, reps, sink.get()); }, 1, ramp_samples);
            std::vector<double> bw;
            for (double s : t) bw.push_back(moved * reps / s);
            curve.push_back({moved, summarize(bw).median});
        }
        // L2 figure: the best point whose working set fits in half the L2.
        double best_bw = 0.0, best_ws = 0.0;
        for (const auto& pt : curve)
            if (pt.working_set_bytes <= 0.5 * static_cast<double>(d.l2_bytes) && pt.bytes_per_second > best_bw) {
                best_bw = pt.bytes_per_second;
                best_ws = pt.working_set_bytes;
            }
        if (best_ws > 0.0) {
            // Re-measure the best L2 point with full sample count for a proper spread.
            const std::size_t n = std::max<std::size_t>(static_cast<std::size_t>(best_ws) / arrays(p) / sizeof(float4), 1);
            const double moved = static_cast<double>(n * sizeof(float4) * arrays(p));
            const int reps = static_cast<int>(std::clamp(1024.0 * (1 << 20) / moved, 1.0, 4096.0));
            const auto t = time_samples(
                [&] { launch(p, ramp_cfg, d.sm_count, a.get(), b.get(), c.get(), n, reps, sink.get()); }, 2, samples);
            std::vector<double> bw;
            for (double s : t) bw.push_back(moved * reps / s);
            Measurement m = summarize(bw);
            std::ostringstream meth;
            meth << to_string(p) << " kernel, float4 ld.global.cg, working set " << best_ws / 1024 << " KiB (best ramp point <= L2/2), "
                 << reps << " passes per launch, " << cfg_text(ramp_cfg, d.sm_count) << ", median of " << samples;
            m.method = meth.str();
            ctx.out.bandwidth[MemoryLevel::l2][p] = m;
            ctx.log("l2 " + std::string(to_string(p)) + ": " + std::to_string(m.median / 1e12) + " TB/s at " +
                    std::to_string(best_ws / 1024) + " KiB");
        } else {
            ctx.missing("bandwidth/l2/" + std::string(to_string(p)), MissingReason::failed, "no ramp point fits in L2/2");
        }
        if (p == AccessPattern::read) {
            const double step_bytes = detail::find_cache_step(curve, static_cast<double>(d.l2_bytes));
            if (step_bytes > 0.0) ctx.out.l2_to_dram_step_bytes = step_bytes;
        }
        ctx.out.bandwidth_curve[p] = std::move(curve);
    }
}

}  // namespace

Probe make_bandwidth_probe() {
    return Probe{"bandwidth",
                 "DRAM and L2 bandwidth: read, write, copy, triad (16-byte accesses) over a working-set ramp",
                 4.0, 8.0, [](const DeviceInfo&) { return std::string(); }, run_bandwidth};
}

}  // namespace roofsim::calib
