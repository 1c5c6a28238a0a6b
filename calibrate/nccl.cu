// NCCL collectives across every visible GPU (one process, one communicator per GPU via
// ncclCommInitAll): all-reduce, all-gather, reduce-scatter bus bandwidth over message sizes, with
// nccl-tests' definitions (busbw = algbw x 2(n-1)/n for all-reduce, x (n-1)/n for the others).
#include "common.cuh"

#ifdef ROOFSIM_HAVE_NCCL
#include <nccl.h>

#include <algorithm>
#include <chrono>

namespace roofsim::calib {
namespace {

void nccl_check(ncclResult_t r, const char* call, const char* file, int line) {
    if (r != ncclSuccess)
        throw std::runtime_error(std::string(call) + " failed: " + ncclGetErrorString(r) + " (" + file + ":" + std::to_string(line) + ")");
}
#define RS_NCCL(call) nccl_check((call), #call, __FILE__, __LINE__)

void run_nccl(ProbeContext& ctx) {
    const int n = ctx.device.device_count;
    std::vector<ncclComm_t> comms(static_cast<std::size_t>(n));
    RS_NCCL(ncclCommInitAll(comms.data(), n, nullptr));
    struct Cleanup {
        std::vector<ncclComm_t>& c;
        std::vector<float*> bufs;
        std::vector<cudaStream_t> streams;
        int dev0;
        ~Cleanup() {
            for (std::size_t i = 0; i < bufs.size(); ++i) { cudaSetDevice(static_cast<int>(i / 2)); cudaFree(bufs[i]); }
            for (std::size_t i = 0; i < streams.size(); ++i) { cudaSetDevice(static_cast<int>(i)); cudaStreamDestroy(streams[i]); }
            for (auto comm : c) ncclCommDestroy(comm);
            cudaSetDevice(dev0);
        }
    } cleanup{comms, {}, {}, ctx.device.ordinal};
    const std::size_t max_bytes = std::size_t(ctx.quick ? 64 : 1024) << 20;
    for (int g = 0; g < n; ++g) {
        RS_CUDA(cudaSetDevice(g));
        float* send = nullptr;
        float* recv = nullptr;
        RS_CUDA(cudaMalloc(&send, max_bytes));
        cleanup.bufs.push_back(send);
        RS_CUDA(cudaMalloc(&recv, max_bytes));
        cleanup.bufs.push_back(recv);
        fill_random(send, max_bytes / 4, static_cast<std::uint32_t>(50 + g));
        cudaStream_t s{};
        RS_CUDA(cudaStreamCreate(&s));
        cleanup.streams.push_back(s);
    }
    const int samples = ctx.quick ? 3 : 7;
    // From a buffer that gives every GPU at least one float (latency) to max_bytes (bandwidth), by
    // powers of 4 from 16 B, so that the ladder ends on max_bytes (a power of 2^10).
    std::size_t min_bytes = 16;
    while (min_bytes < 4 * static_cast<std::size_t>(n)) min_bytes *= 4;
    for (const char* op : {"all-reduce", "all-gather", "reduce-scatter"}) {
        for (std::size_t bytes = min_bytes; bytes <= max_bytes; bytes *= (ctx.quick ? 16 : 4)) {
            ctx.check_deadline(std::string("nccl ") + op);
            const std::string o = op;
            auto issue = [&](int calls) {
                for (int c = 0; c < calls; ++c) {
                    RS_NCCL(ncclGroupStart());
                    for (int g = 0; g < n; ++g) {
                        float* send = cleanup.bufs[2 * g];
                        float* recv = cleanup.bufs[2 * g + 1];
                        const std::size_t count = bytes / 4;
                        if (o == "all-reduce") RS_NCCL(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comms[g], cleanup.streams[g]));
                        else if (o == "all-gather") RS_NCCL(ncclAllGather(send, recv, count / n, ncclFloat, comms[g], cleanup.streams[g]));
                        else RS_NCCL(ncclReduceScatter(send, recv, count / n, ncclFloat, ncclSum, comms[g], cleanup.streams[g]));
                    }
                    RS_NCCL(ncclGroupEnd());
                }
                for (int g = 0; g < n; ++g) {
                    RS_CUDA(cudaSetDevice(g));
                    RS_CUDA(cudaStreamSynchronize(cleanup.streams[g]));
                }
            };
            issue(1);
            const auto w0 = std::chrono::steady_clock::now();
            issue(1);
            const double one = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
            // Small collectives take microseconds: time a batch of calls (about 2 ms) per sample.
            const int calls = static_cast<int>(std::clamp(2e-3 / std::max(one, 1e-9), 1.0, 200.0));
            std::vector<double> t;
            for (int i = 0; i < samples; ++i) {
                const auto t0 = std::chrono::steady_clock::now();
                issue(calls);
                t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls);
            }
            CollectiveRecord r;
            r.op = op;
            r.gpus = n;
            r.bytes = static_cast<double>(bytes);
            r.seconds = summarize(t);
            r.seconds.method = "one process, ncclCommInitAll over all visible GPUs, grouped launches, " + std::to_string(calls) +
                               " back to back then a sync of every GPU's stream, per call, host steady_clock, median of " +
                               std::to_string(samples) + " after 2 warm-ups; bytes = total buffer size (nccl-tests convention)";
            r.algorithm_bytes_per_second = r.bytes / r.seconds.median;
            const double factor = o == "all-reduce" ? 2.0 * (n - 1) / n : double(n - 1) / n;
            r.bus_bytes_per_second = r.algorithm_bytes_per_second * factor;
            ctx.out.collectives.push_back(r);
        }
        ctx.log(std::string("nccl ") + op + " done");
    }
}

}  // namespace

Probe make_nccl_probe() {
    return Probe{"nccl", "NCCL all-reduce / all-gather / reduce-scatter bus bandwidth over message sizes", 3.0, 10.0,
                 [](const DeviceInfo& d) { return d.device_count >= 2 ? std::string() : std::string("one GPU visible"); },
                 run_nccl};
}

}  // namespace roofsim::calib

#else

namespace roofsim::calib {
Probe make_nccl_probe() {
    return Probe{"nccl", "NCCL collectives (not built: NCCL was not found at configure time)", 0.0, 0.0,
                 [](const DeviceInfo&) { return std::string("not built with NCCL"); }, [](ProbeContext&) {}};
}
}  // namespace roofsim::calib

#endif
