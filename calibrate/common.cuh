#pragma once
// Shared CUDA helpers of the probes: checked calls, event timing, random fills, in-kernel clock reads.

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "probe.hpp"

namespace roofsim::calib {

/// Throws std::runtime_error("<call> failed: <CUDA error string> at file:line").
inline void cuda_check(cudaError_t e, const char* call, const char* file, int line) {
    if (e != cudaSuccess)
        throw std::runtime_error(std::string(call) + " failed: " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e) +
                                 " (" + file + ":" + std::to_string(line) + ")");
}
#define RS_CUDA(call) ::roofsim::calib::cuda_check((call), #call, __FILE__, __LINE__)
/// After a kernel launch: launch-configuration errors now, execution errors at the next sync.
#define RS_CUDA_LAUNCH() RS_CUDA(cudaGetLastError())

/// A device buffer freed on scope exit (plain cudaMalloc, never managed memory).
template <typename T>
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(std::size_t count) : count_(count) {
        if (count > 0) RS_CUDA(cudaMalloc(&ptr_, count * sizeof(T)));
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), count_(o.count_) { o.ptr_ = nullptr; o.count_ = 0; }
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
        std::swap(ptr_, o.ptr_);
        std::swap(count_, o.count_);
        return *this;
    }
    ~DeviceBuffer() { if (ptr_) cudaFree(ptr_); }
    [[nodiscard]] T* get() const { return ptr_; }
    [[nodiscard]] std::size_t size() const { return count_; }
    [[nodiscard]] std::size_t bytes() const { return count_ * sizeof(T); }

private:
    T* ptr_ = nullptr;
    std::size_t count_ = 0;
};

/// A pair of CUDA events; `elapsed_s` after `stop`.
class EventTimer {
public:
    EventTimer() {
        RS_CUDA(cudaEventCreate(&start_));
        RS_CUDA(cudaEventCreate(&stop_));
    }
    EventTimer(const EventTimer&) = delete;
    EventTimer& operator=(const EventTimer&) = delete;
    ~EventTimer() {
        cudaEventDestroy(start_);
        cudaEventDestroy(stop_);
    }
    void start(cudaStream_t s = nullptr) { RS_CUDA(cudaEventRecord(start_, s)); }
    [[nodiscard]] double stop(cudaStream_t s = nullptr) {
        RS_CUDA(cudaEventRecord(stop_, s));
        RS_CUDA(cudaEventSynchronize(stop_));
        float ms = 0.0f;
        RS_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
        return static_cast<double>(ms) * 1e-3;
    }

private:
    cudaEvent_t start_{}, stop_{};
};

/// Times `work` (which enqueues `per_sample` repetitions on the default stream): `warmup` untimed
/// calls, then `samples` timed ones; returns seconds per repetition for each sample.
inline std::vector<double> time_samples(const std::function<void()>& work, int warmup, int samples,
                                        int per_sample = 1) {
    EventTimer t;
    for (int i = 0; i < warmup; ++i) work();
    RS_CUDA(cudaDeviceSynchronize());
    std::vector<double> out;
    out.reserve(static_cast<std::size_t>(samples));
    for (int i = 0; i < samples; ++i) {
        t.start();
        work();
        out.push_back(t.stop() / per_sample);
    }
    RS_CUDA(cudaDeviceSynchronize());
    return out;
}

/// A non-default stream for graph capture, destroyed on scope exit.
class Stream {
public:
    Stream() { RS_CUDA(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    ~Stream() { cudaStreamDestroy(s_); }
    [[nodiscard]] cudaStream_t get() const { return s_; }

private:
    cudaStream_t s_{};
};

/// GPU time per call from CUDA-graph replay (see docs/calibration.md, "GPU time of library calls").
struct GraphTiming {
    std::vector<double> seconds_per_call;  ///< one entry per timed sample
    int calls_per_graph = 0;               ///< N calls captured back to back into one graph
    int replays_per_sample = 0;            ///< graph replays between the two events of one sample
    /// The method sentence of a measurement built from this timing.
    [[nodiscard]] std::string method(const std::string& what) const {
        return "GPU time: " + std::to_string(calls_per_graph) + " back-to-back " + what +
               " captured into one CUDA graph (stream capture on a non-default stream), 2 warm-up replays, then CUDA events around " +
               std::to_string(replays_per_sample) + " replay(s) per sample; seconds per call = sample time / (" +
               std::to_string(replays_per_sample) + " x " + std::to_string(calls_per_graph) + "), median of " +
               std::to_string(seconds_per_call.size()) + " samples";
    }
};

/// Number of calls N to capture into one graph: one replay should last about `target_s` of GPU time,
/// N >= `min_calls` (e.g. the operand sets rotated through), 2 <= N <= `max_calls`. `pilot_s` is an
/// estimate of one call (events around a few calls; an over-estimate when the host is the bottleneck).
inline int graph_calls(double pilot_s, int min_calls, double target_s = 2e-3, int max_calls = 200) {
    const double n = std::ceil(target_s / std::max(pilot_s, 1e-7));
    return static_cast<int>(std::clamp(std::max(n, static_cast<double>(min_calls)), 2.0, static_cast<double>(max_calls)));
}

/// Seconds per call of `call(i)`, i = 0..n-1 (each enqueues one call on `stream`), by events around
/// `calls` back-to-back calls after `warmup` ones. Used as a pilot to size the graph.
inline double pilot_seconds(cudaStream_t stream, const std::function<void(int)>& call, int calls = 3, int warmup = 2) {
    for (int i = 0; i < warmup; ++i) call(i);
    RS_CUDA(cudaStreamSynchronize(stream));
    EventTimer t;
    t.start(stream);
    for (int i = 0; i < calls; ++i) call(i);
    return t.stop(stream) / calls;
}

/// Captures `n` calls `call(0..n-1)` on `stream` into one CUDA graph, replays it twice untimed, then
/// times `samples` samples of R back-to-back replays with CUDA events (R so that a sample lasts about
/// `target_s`). The result is GPU time: the host enqueues a whole graph per replay, so the GPU never
/// waits on the host between calls. Throws with the CUDA error text if capture is not supported.
inline GraphTiming time_graph(cudaStream_t stream, const std::function<void(int)>& call, int n, int samples,
                              double target_s = 2e-3) {
    cudaGraph_t graph{};
    RS_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
        for (int i = 0; i < n; ++i) call(i);
    } catch (...) {
        cudaGraph_t g{};
        (void)cudaStreamEndCapture(stream, &g);  // ends the (invalidated) capture; the first error is rethrown
        if (g) (void)cudaGraphDestroy(g);
        (void)cudaGetLastError();
        throw;
    }
    RS_CUDA(cudaStreamEndCapture(stream, &graph));
    struct Guard {
        cudaGraph_t g;
        cudaGraphExec_t e{};
        ~Guard() {
            if (e) cudaGraphExecDestroy(e);
            if (g) cudaGraphDestroy(g);
        }
    } guard{graph};
    RS_CUDA(cudaGraphInstantiate(&guard.e, graph, 0));
    for (int i = 0; i < 2; ++i) RS_CUDA(cudaGraphLaunch(guard.e, stream));
    RS_CUDA(cudaStreamSynchronize(stream));
    EventTimer t;
    t.start(stream);
    RS_CUDA(cudaGraphLaunch(guard.e, stream));
    const double one_replay = t.stop(stream);
    GraphTiming out;
    out.calls_per_graph = n;
    out.replays_per_sample = static_cast<int>(std::clamp(std::ceil(target_s / std::max(one_replay, 1e-7)), 1.0, 50.0));
    out.seconds_per_call.reserve(static_cast<std::size_t>(samples));
    for (int s = 0; s < samples; ++s) {
        t.start(stream);
        for (int r = 0; r < out.replays_per_sample; ++r) RS_CUDA(cudaGraphLaunch(guard.e, stream));
        out.seconds_per_call.push_back(t.stop(stream) / (static_cast<double>(out.replays_per_sample) * n));
    }
    return out;
}

/// Operand sets to rotate through so that a call does not find its operands in L2 from an earlier
/// call: enough sets to span 2 x L2, at least 2 when one set fits in L2, 1 when it does not.
inline int rotation_sets(std::size_t set_bytes, std::size_t l2_bytes, int max_sets = 200) {
    if (set_bytes >= l2_bytes) return 1;
    const double r = std::ceil(2.0 * static_cast<double>(l2_bytes) / static_cast<double>(std::max<std::size_t>(set_bytes, 1)));
    return static_cast<int>(std::clamp(r, 2.0, static_cast<double>(max_sets)));
}

/// Rounds a byte count up to a multiple of 256 (alignment of each operand in a rotation pool).
inline std::size_t align256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

/// Fills `n` elements with deterministic pseudo-random values in [-1, 1] (never zeros: zeros run
/// faster than real data on some tensor-core paths).
void fill_random(float* p, std::size_t n, std::uint32_t seed);
void fill_random(double* p, std::size_t n, std::uint32_t seed);
void fill_random_half(void* p, std::size_t n, std::uint32_t seed);
void fill_random_bf16(void* p, std::size_t n, std::uint32_t seed);
void fill_random_fp8e4m3(void* p, std::size_t n, std::uint32_t seed);
void fill_random_int8(void* p, std::size_t n, std::uint32_t seed);

/// Per-block clock record: SM cycles (clock64) and global nanoseconds (%globaltimer) at start and end.
struct ClockRecord {
    long long cycles_start, cycles_end;
    unsigned long long ns_start, ns_end;
};

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/// Median SM clock (Hz) over the blocks' records: cycles / ns of each block.
double median_clock_hz(const std::vector<ClockRecord>& recs);

/// Number of repetitions so that one launch lasts about `target_s`, given one timed at `reps0`.
inline int scale_reps(int reps0, double seconds0, double target_s, int max_reps = 1 << 24) {
    const double r = reps0 * target_s / std::max(seconds0, 1e-7);
    return static_cast<int>(std::clamp(r, 1.0, static_cast<double>(max_reps)));
}

}  // namespace roofsim::calib
