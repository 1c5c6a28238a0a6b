// DRAM and L2 bandwidth: read-only, write-only, copy and triad kernels with 16-byte accesses, over a
// working-set ramp from a few KiB to several times L2 (BabelStream / nvbandwidth conventions:
// bytes counted = bytes read + bytes written by the kernel).
#include <cmath>
#include <sstream>

#include "common.cuh"
#include <roofsim/detail/fit.hpp>

namespace roofsim::calib {
namespace {


__device__ __forceinline__ float4 add4(float4 a, float4 b) { return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }
__device__ __forceinline__ float4 triad4(float4 b, float4 c, float s) {
    return make_float4(b.x + s * c.x, b.y + s * c.y, b.z + s * c.z, b.w + s * c.w);
}

/// One kernel per pattern. `reps` passes over the working set (for small sets, so that one launch is
/// long enough to time). Loads are ld.global.cg (cached in L2 only, so repeated passes measure L2,
/// not L1) or, with Stream, ld.global.cs / st.global.cs (evict-first streaming hints). The read
/// kernel's sum is stored only if it equals `never` (it never does), so the loads cannot be removed.
/// Layout: strided = grid-stride loop, element i + u*stride per unrolled step; tiled = each block
/// takes contiguous tiles of blockDim*U elements (a grid of one tile per block when gridDim covers n).
template <bool Stream>
__device__ __forceinline__ float4 ld(const float4* p) {
    if constexpr (Stream) return __ldcs(p);
    else return __ldcg(p);
}
template <bool Stream>
__device__ __forceinline__ void st(float4* p, float4 v) {
    if constexpr (Stream) __stcs(p, v);
    else *p = v;
}

template <AccessPattern P, bool Stream>
__device__ __forceinline__ void one(const float4* a, const float4* b, float4* c, std::size_t i, float s, float4 w,
                                    float4& acc) {
    if constexpr (P == AccessPattern::read) acc = add4(acc, ld<Stream>(a + i));
    if constexpr (P == AccessPattern::write) st<Stream>(c + i, w);
    if constexpr (P == AccessPattern::copy) st<Stream>(c + i, ld<Stream>(a + i));
    if constexpr (P == AccessPattern::triad) st<Stream>(c + i, triad4(ld<Stream>(a + i), ld<Stream>(b + i), s));
}

template <AccessPattern P, bool Tiled, bool Stream, int U>
__global__ void __launch_bounds__(1024) bw_kernel(const float4* __restrict__ a, const float4* __restrict__ b,
                                                  float4* __restrict__ c, std::size_t n, int reps, float s,
                                                  float never, float* sink) {
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    const float4 w = make_float4(s, s, s, s);
    // element index of unrolled step u: base + u * step
    const std::size_t step = Tiled ? blockDim.x : static_cast<std::size_t>(gridDim.x) * blockDim.x;
    const std::size_t first = Tiled ? blockIdx.x * static_cast<std::size_t>(blockDim.x) * U + threadIdx.x
                                    : blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
    const std::size_t advance = static_cast<std::size_t>(gridDim.x) * blockDim.x * U;
    for (int r = 0; r < reps; ++r) {
        for (std::size_t base = first; base < n; base += advance) {
            if (base + (U - 1) * step < n) {
                float4 x[U], y[U];
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    if constexpr (P != AccessPattern::write) x[u] = ld<Stream>(a + base + u * step);
                    if constexpr (P == AccessPattern::triad) y[u] = ld<Stream>(b + base + u * step);
                }
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    if constexpr (P == AccessPattern::read) acc = add4(acc, x[u]);
                    if constexpr (P == AccessPattern::write) st<Stream>(c + base + u * step, w);
                    if constexpr (P == AccessPattern::copy) st<Stream>(c + base + u * step, x[u]);
                    if constexpr (P == AccessPattern::triad) st<Stream>(c + base + u * step, triad4(x[u], y[u], s));
                }
            } else {
                for (int u = 0; u < U; ++u)
                    if (base + u * step < n) one<P, Stream>(a, b, c, base + u * step, s, w, acc);
            }
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

/// A kernel variant and launch shape. blocks_per_sm == 0: one tile per block (grid covers n once).
struct Launch {
    bool tiled;
    bool stream;
    int unroll;
    int threads;
    int blocks_per_sm;
};

template <AccessPattern P, bool T, bool S, int U>
void launch_t(dim3 grid, dim3 block, const float4* a, const float4* b, float4* c, std::size_t n, int reps, float* sink) {
    bw_kernel<P, T, S, U><<<grid, block>>>(a, b, c, n, reps, 0.5f, -1.2345e30f, sink);
}

template <AccessPattern P>
void launch_p(Launch cfg, dim3 grid, dim3 block, const float4* a, const float4* b, float4* c, std::size_t n, int reps,
              float* sink) {
#define RS_BW_CASE(T, S, U) \
    if (cfg.tiled == T && cfg.stream == S && cfg.unroll == U) return launch_t<P, T, S, U>(grid, block, a, b, c, n, reps, sink);
    RS_BW_CASE(false, false, 4) RS_BW_CASE(false, true, 4) RS_BW_CASE(false, false, 8) RS_BW_CASE(false, true, 8)
    RS_BW_CASE(true, false, 2) RS_BW_CASE(true, true, 2) RS_BW_CASE(true, false, 4) RS_BW_CASE(true, true, 4)
    RS_BW_CASE(true, false, 8) RS_BW_CASE(true, true, 8)
#undef RS_BW_CASE
    throw std::logic_error("bandwidth: no kernel for this variant");
}

void launch(AccessPattern p, Launch cfg, int sms, const float4* a, const float4* b, float4* c, std::size_t n,
            int reps, float* sink) {
    std::size_t blocks = static_cast<std::size_t>(sms) * cfg.blocks_per_sm;
    if (cfg.blocks_per_sm == 0) {
        const std::size_t tile = static_cast<std::size_t>(cfg.threads) * cfg.unroll;
        blocks = std::max<std::size_t>((n + tile - 1) / tile, 1);
    }
    const dim3 grid(static_cast<unsigned>(std::min<std::size_t>(blocks, 0x7fffffff))), block(static_cast<unsigned>(cfg.threads));
    switch (p) {
        case AccessPattern::read: launch_p<AccessPattern::read>(cfg, grid, block, a, b, c, n, reps, sink); break;
        case AccessPattern::write: launch_p<AccessPattern::write>(cfg, grid, block, a, b, c, n, reps, sink); break;
        case AccessPattern::copy: launch_p<AccessPattern::copy>(cfg, grid, block, a, b, c, n, reps, sink); break;
        case AccessPattern::triad: launch_p<AccessPattern::triad>(cfg, grid, block, a, b, c, n, reps, sink); break;
    }
    RS_CUDA_LAUNCH();
}

std::string cfg_text(Launch cfg, int sms) {
    std::ostringstream o;
    o << (cfg.tiled ? "block-contiguous tiles" : "grid-stride") << ", " << (cfg.stream ? "ld/st.global.cs" : "ld.global.cg")
      << ", " << cfg.unroll << " x 16 B per thread per step, ";
    if (cfg.blocks_per_sm == 0) o << "one tile per block";
    else o << sms * cfg.blocks_per_sm << " blocks";
    o << " x " << cfg.threads << " threads";
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
    std::vector<Launch> cfgs = {{false, false, 4, 256, 8}, {false, true, 4, 1024, 2}, {true, true, 4, 256, 8},
                                 {true, true, 4, 256, 0}, {true, false, 8, 256, 0}, {true, true, 2, 1024, 0}};
    if (!ctx.quick) {
        for (Launch extra : std::vector<Launch>{{false, false, 4, 1024, 2}, {false, true, 8, 256, 8}, {true, false, 4, 256, 8},
                                                {true, true, 8, 256, 8}, {true, false, 4, 512, 4}, {true, true, 4, 512, 0},
                                                {true, true, 8, 512, 0}, {true, false, 2, 256, 0}, {true, true, 4, 1024, 0},
                                                {true, false, 4, 256, 0}})
            cfgs.push_back(extra);
    }
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
            if (ctx.verbose) ctx.log("  " + std::string(to_string(p)) + " " + cfg_text(cfg, d.sm_count) + ": " + std::to_string(m.median / 1e12) + " TB/s");
            if (m.median > best.median) { best = m; best_cfg = cfg; }
        }
        std::ostringstream meth;
        meth << to_string(p) << " kernel, float4 (16-byte) accesses, " << arrays(p) << " array(s) of "
             << arr_bytes / (1 << 20) << " MiB, " << cfg_text(best_cfg, d.sm_count)
             << " (best of " << cfgs.size() << " kernel variants and launch shapes), bytes read + written / CUDA-event time, median of "
             << samples << " after 3 warm-ups";
        best.method = meth.str();
        if (p == AccessPattern::copy) {
            // The driver's device-to-device copy (what torch's Tensor.copy_ of a contiguous tensor runs
            // into) is a copy too: keep whichever is faster, and say which.
            const auto t = time_samples([&] { RS_CUDA(cudaMemcpyAsync(c.get(), a.get(), arr_bytes, cudaMemcpyDeviceToDevice)); },
                                        3, samples);
            std::vector<double> bw;
            for (double s : t) bw.push_back(2.0 * arr_bytes / s);
            Measurement m = summarize(bw);
            ctx.log("dram copy via cudaMemcpyAsync D2D: " + std::to_string(m.median / 1e12) + " TB/s");
            if (m.median > best.median) {
                m.method = "cudaMemcpyAsync device-to-device of " + std::to_string(arr_bytes >> 20) +
                           " MiB (faster than the best copy kernel, " + cfg_text(best_cfg, d.sm_count) + ", at " +
                           std::to_string(best.median / 1e12) + " TB/s), bytes read + written / CUDA-event time, median of " +
                           std::to_string(samples) + " after 3 warm-ups";
                best = m;
            }
        }
        ctx.out.bandwidth[MemoryLevel::dram][p] = best;
        ctx.log("dram " + std::string(to_string(p)) + ": " + std::to_string(best.median / 1e12) + " TB/s");
    }

    // Working-set ramp: from 16 KiB to 8x L2 (or the array size), doubling; small sets repeat passes
    // inside the kernel so that each launch moves at least 256 MiB.
    const Launch ramp_cfg{false, false, 4, 256, 8};
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
