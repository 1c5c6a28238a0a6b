#pragma once
// Shared CUDA helpers of the probes: checked calls, event timing, random fills, in-kernel clock reads.

#include <cuda_runtime.h>

#include <algorithm>
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
