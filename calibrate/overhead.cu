// Overheads: kernel launch latency, back-to-back launch throughput, host-device copy bandwidth
// (pinned and pageable) over sizes, with a latency + bytes / bandwidth fit.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>

#include "common.cuh"
#include <roofsim/detail/fit.hpp>

namespace roofsim::calib {
namespace {

__global__ void empty_kernel() {}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void run_launch(ProbeContext& ctx) {
    const int warm = 100;
    const int n_latency = ctx.quick ? 300 : 2000;
    for (int i = 0; i < warm; ++i) empty_kernel<<<1, 32>>>();
    RS_CUDA_LAUNCH();
    RS_CUDA(cudaDeviceSynchronize());
    std::vector<double> lat;
    lat.reserve(n_latency);
    for (int i = 0; i < n_latency; ++i) {
        const double t0 = now_s();
        empty_kernel<<<1, 32>>>();
        RS_CUDA_LAUNCH();
        RS_CUDA(cudaStreamSynchronize(nullptr));
        lat.push_back(now_s() - t0);
    }
    Measurement m = summarize(lat);
    m.method = "host steady_clock around one empty-kernel launch (1 block x 32 threads) + cudaStreamSynchronize, median of " +
               std::to_string(n_latency) + " after " + std::to_string(warm) + " warm-up launches";
    ctx.out.launch_latency_seconds = m;
    ctx.log("launch latency: " + std::to_string(m.median * 1e6) + " us");

    const int per_sample = ctx.quick ? 2000 : 10000;
    const int samples = ctx.quick ? 5 : 11;
    const auto t = time_samples(
        [&] {
            for (int i = 0; i < per_sample; ++i) empty_kernel<<<1, 32>>>();
            RS_CUDA_LAUNCH();
        },
        1, samples, per_sample);
    Measurement b = summarize(t);
    b.method = "CUDA events around " + std::to_string(per_sample) +
               " back-to-back empty-kernel launches on one stream, seconds per launch, median of " + std::to_string(samples);
    ctx.out.launch_interval_seconds = b;
    ctx.log("back-to-back launch: " + std::to_string(b.median * 1e6) + " us per launch");

    // GPU side: empty kernels back to back inside one CUDA graph, so the host issue rate is out of it.
    ctx.check_deadline("launch gpu_interval");
    Stream stream;
    const int kernels = 1000;
    const GraphTiming g = time_graph(
        stream.get(),
        [&](int) {
            empty_kernel<<<1, 32, 0, stream.get()>>>();
            RS_CUDA_LAUNCH();
        },
        kernels, ctx.quick ? 5 : 11);
    Measurement gi = summarize(g.seconds_per_call);
    gi.method = g.method("empty-kernel launches (1 block x 32 threads)") +
                "; the least GPU time a kernel occupies in a stream, without host issue cost";
    ctx.out.launch_gpu_interval_seconds = gi;
    ctx.log("GPU interval of back-to-back kernels (graph): " + std::to_string(gi.median * 1e6) + " us per kernel");
}

struct PinnedDeleter {
    void operator()(void* p) const { if (p) cudaFreeHost(p); }
};

void run_memcpy(ProbeContext& ctx) {
    const std::size_t max_bytes = std::size_t(ctx.quick ? 64 : 256) << 20;
    DeviceBuffer<char> dev(max_bytes);
    void* pinned_raw = nullptr;
    RS_CUDA(cudaMallocHost(&pinned_raw, max_bytes));
    std::unique_ptr<void, PinnedDeleter> pinned(pinned_raw);
    std::unique_ptr<char[]> pageable(new char[max_bytes]);
    std::memset(pageable.get(), 1, max_bytes);  // touch every page before timing
    std::memset(pinned.get(), 1, max_bytes);
    const int samples = ctx.quick ? 5 : 9;
    for (MemcpyKind kind : all_memcpy_kinds) {
        ctx.check_deadline("memcpy " + std::string(to_string(kind)));
        const bool h2d = kind == MemcpyKind::h2d_pinned || kind == MemcpyKind::h2d_pageable;
        const bool pin = kind == MemcpyKind::h2d_pinned || kind == MemcpyKind::d2h_pinned;
        char* host = pin ? static_cast<char*>(pinned.get()) : pageable.get();
        MemcpyFigure f;
        std::vector<double> xs, ys;
        std::vector<double> last;
        for (std::size_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
            auto one = [&] {
                if (h2d) RS_CUDA(cudaMemcpy(dev.get(), host, bytes, cudaMemcpyHostToDevice));
                else RS_CUDA(cudaMemcpy(host, dev.get(), bytes, cudaMemcpyDeviceToHost));
            };
            one();
            std::vector<double> t;
            for (int i = 0; i < samples; ++i) {
                const double t0 = now_s();
                one();
                t.push_back(now_s() - t0);
            }
            const double med = summarize(t).median;
            f.curve.push_back({static_cast<double>(bytes), static_cast<double>(bytes) / med});
            xs.push_back(static_cast<double>(bytes));
            ys.push_back(med);
            last.clear();
            for (double s : t) last.push_back(static_cast<double>(bytes) / s);
        }
        f.bytes_per_second = summarize(last);
        f.bytes_per_second.method = "cudaMemcpy (synchronous) of " + std::to_string(max_bytes >> 20) + " MiB " +
                                    (pin ? "pinned (cudaMallocHost)" : "pageable (new[], pages touched)") +
                                    " host memory, host steady_clock, median of " + std::to_string(samples) + " after 1 warm-up";
        try {
            f.fit = detail::fit_overhead_and_rate(xs, ys);
        } catch (const std::exception& e) {
            ctx.missing("memcpy/" + std::string(to_string(kind)) + "/fit", MissingReason::failed, e.what());
        }
        ctx.log("memcpy " + std::string(to_string(kind)) + ": " + std::to_string(f.bytes_per_second.median / 1e9) + " GB/s");
        ctx.out.memcpy[kind] = std::move(f);
    }
}

}  // namespace

Probe make_launch_probe() {
    return Probe{"launch", "kernel launch latency, back-to-back launch throughput (host) and the GPU interval of graph-replayed kernels", 0.5, 1.0,
                 [](const DeviceInfo&) { return std::string(); }, run_launch};
}

Probe make_memcpy_probe() {
    return Probe{"memcpy", "host-device copy bandwidth, pinned and pageable, 4 KiB to 256 MiB", 1.0, 3.0,
                 [](const DeviceInfo&) { return std::string(); }, run_memcpy};
}

}  // namespace roofsim::calib
