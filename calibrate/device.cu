// Device identity, library versions, random fills and clock summaries shared by the probes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cublas_v2.h>
#include <dlfcn.h>

#include <ctime>

#include "common.cuh"

#ifdef ROOFSIM_HAVE_CUDNN
#include <cudnn.h>
#endif
#ifdef ROOFSIM_HAVE_NCCL
#include <nccl.h>
#endif

namespace roofsim::calib {

namespace {

__device__ __forceinline__ float hash_unit(std::size_t i, std::uint32_t seed) {
    // splitmix-style integer hash to a float in [-1, 1], never exactly 0
    unsigned long long x = (static_cast<unsigned long long>(i) + 0x9E3779B97F4A7C15ull) ^ (seed * 0xBF58476D1CE4E5B9ull);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    const float u = static_cast<float>(x >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    return 2.0f * u - 1.0f + (1.0f / 33554432.0f);
}

template <typename T, typename Conv>
__global__ void fill_kernel(T* p, std::size_t n, std::uint32_t seed, Conv conv) {
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
        p[i] = conv(hash_unit(i, seed));
}

template <typename T, typename Conv>
void launch_fill(T* p, std::size_t n, std::uint32_t seed, Conv conv) {
    if (n == 0) return;
    fill_kernel<<<1024, 256>>>(p, n, seed, conv);
    RS_CUDA_LAUNCH();
}

struct ToFloat { __device__ float operator()(float v) const { return v; } };
struct ToDouble { __device__ double operator()(float v) const { return static_cast<double>(v); } };
struct ToHalf { __device__ __half operator()(float v) const { return __float2half(v); } };
struct ToBf16 { __device__ __nv_bfloat16 operator()(float v) const { return __float2bfloat16(v); } };
struct ToFp8 { __device__ __nv_fp8_e4m3 operator()(float v) const { return __nv_fp8_e4m3(v); } };
struct ToInt8 { __device__ signed char operator()(float v) const { return static_cast<signed char>(v * 100.0f); } };

[[maybe_unused]] std::string version_string(int code, int major_div, int minor_div) {
    return std::to_string(code / major_div) + "." + std::to_string((code % major_div) / minor_div) + "." +
           std::to_string(code % minor_div);
}

/// The driver version string through NVML, loaded at run time so that no NVML link is needed.
std::string nvml_driver_version() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return {};
    using InitFn = int (*)();
    using VerFn = int (*)(char*, unsigned);
    auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
    auto ver = reinterpret_cast<VerFn>(dlsym(lib, "nvmlSystemGetDriverVersion"));
    auto shut = reinterpret_cast<InitFn>(dlsym(lib, "nvmlShutdown"));
    std::string out;
    if (init && ver && shut && init() == 0) {
        char buf[96] = {};
        if (ver(buf, sizeof buf) == 0) out = buf;
        shut();
    }
    dlclose(lib);
    return out;
}

}  // namespace

void fill_random(float* p, std::size_t n, std::uint32_t seed) { launch_fill(p, n, seed, ToFloat{}); }
void fill_random(double* p, std::size_t n, std::uint32_t seed) { launch_fill(p, n, seed, ToDouble{}); }
void fill_random_half(void* p, std::size_t n, std::uint32_t seed) { launch_fill(static_cast<__half*>(p), n, seed, ToHalf{}); }
void fill_random_bf16(void* p, std::size_t n, std::uint32_t seed) {
    launch_fill(static_cast<__nv_bfloat16*>(p), n, seed, ToBf16{});
}
void fill_random_fp8e4m3(void* p, std::size_t n, std::uint32_t seed) {
    launch_fill(static_cast<__nv_fp8_e4m3*>(p), n, seed, ToFp8{});
}
void fill_random_int8(void* p, std::size_t n, std::uint32_t seed) {
    launch_fill(static_cast<signed char*>(p), n, seed, ToInt8{});
}

double median_clock_hz(const std::vector<ClockRecord>& recs) {
    std::vector<double> hz;
    for (const auto& r : recs) {
        const double ns = static_cast<double>(r.ns_end - r.ns_start);
        const double cyc = static_cast<double>(r.cycles_end - r.cycles_start);
        if (ns > 0.0 && cyc > 0.0) hz.push_back(cyc / ns * 1e9);
    }
    if (hz.empty()) throw std::runtime_error("no usable clock records");
    return summarize(hz).median;
}

int visible_device_count() {
    int n = 0;
    RS_CUDA(cudaGetDeviceCount(&n));
    if (n == 0) throw std::runtime_error("no CUDA device visible");
    return n;
}

DeviceInfo query_device(int ordinal) {
    DeviceInfo d;
    d.device_count = visible_device_count();
    if (ordinal < 0 || ordinal >= d.device_count)
        throw std::runtime_error("device " + std::to_string(ordinal) + " requested but " +
                                 std::to_string(d.device_count) + " visible");
    RS_CUDA(cudaSetDevice(ordinal));
    cudaDeviceProp p{};
    RS_CUDA(cudaGetDeviceProperties(&p, ordinal));
    d.ordinal = ordinal;
    d.name = p.name;
    d.cc_major = p.major;
    d.cc_minor = p.minor;
    d.sm_count = p.multiProcessorCount;
    d.max_threads_per_sm = p.maxThreadsPerMultiProcessor;
    d.l2_bytes = static_cast<std::size_t>(p.l2CacheSize);
    d.memory_bytes = p.totalGlobalMem;
    d.memory_bus_width_bits = p.memoryBusWidth;
    int khz = 0;
    RS_CUDA(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, ordinal));
    d.sm_clock_max_hz = khz * 1e3;
    RS_CUDA(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, ordinal));
    d.memory_clock_max_hz = khz * 1e3;
    std::size_t free_b = 0, total_b = 0;
    RS_CUDA(cudaMemGetInfo(&free_b, &total_b));
    d.free_bytes = free_b;
    RS_CUDA(cudaDriverGetVersion(&d.driver_version));
    RS_CUDA(cudaRuntimeGetVersion(&d.runtime_version));
    return d;
}

void fill_identity(DeviceIdentity& id, const DeviceInfo& d) {
    id.name = d.name;
    id.compute_capability_major = d.cc_major;
    id.compute_capability_minor = d.cc_minor;
    id.sm_count = d.sm_count;
    id.l2_bytes = static_cast<double>(d.l2_bytes);
    id.memory_bytes = static_cast<double>(d.memory_bytes);
    id.sm_clock_max_hz = d.sm_clock_max_hz;
    id.memory_clock_max_hz = d.memory_clock_max_hz;
    id.memory_bus_width_bits = d.memory_bus_width_bits;
    id.device_count = d.device_count;
    id.cuda_driver_version = d.driver_version;
    id.cuda_runtime_version = d.runtime_version;
    id.driver_version = nvml_driver_version();
    int maj = 0, min = 0, pat = 0;
    if (cublasGetProperty(MAJOR_VERSION, &maj) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(MINOR_VERSION, &min) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(PATCH_LEVEL, &pat) == CUBLAS_STATUS_SUCCESS)
        id.cublas_version = std::to_string(maj) + "." + std::to_string(min) + "." + std::to_string(pat);
#ifdef ROOFSIM_HAVE_CUDNN
    id.cudnn_version = version_string(static_cast<int>(cudnnGetVersion()), 10000, 100);
#endif
#ifdef ROOFSIM_HAVE_NCCL
    int v = 0;
    if (ncclGetVersion(&v) == ncclSuccess) id.nccl_version = version_string(v, 10000, 100);
#endif
    char buf[32];
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    id.date_utc = buf;
    id.tool_version = tool_version;
}

}  // namespace roofsim::calib
