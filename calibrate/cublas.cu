// Library ceilings and efficiency sweeps through cuBLAS / cuBLASLt, the libraries PyTorch calls for
// matmul. Ceiling: 8192^3 per precision. Sweep: a grid of (M, N, K) including small and skinny shapes.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <sstream>

#include "common.cuh"
#include "roofsim/detail/fit.hpp"

namespace roofsim::calib {
namespace {

void cublas_check(cublasStatus_t s, const char* call, const char* file, int line) {
    if (s != CUBLAS_STATUS_SUCCESS)
        throw std::runtime_error(std::string(call) + " failed: " + cublasGetStatusName(s) + ": " + cublasGetStatusString(s) +
                                 " (" + file + ":" + std::to_string(line) + ")");
}
#define RS_CUBLAS(call) cublas_check((call), #call, __FILE__, __LINE__)

class Handle {
public:
    Handle() { RS_CUBLAS(cublasCreate(&h_)); }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle() { cublasDestroy(h_); }
    [[nodiscard]] cublasHandle_t get() const { return h_; }

private:
    cublasHandle_t h_{};
};

/// How one precision is called through cublasGemmEx, as PyTorch calls it.
struct GemmType {
    ComputeUnit unit;
    cudaDataType_t ab, c;
    cublasComputeType_t compute;
    int elem_bytes;      // A/B element size
    int c_bytes;
    bool transpose_a;    // int8 (IMMA) needs the "TN" layout
    const char* text;
};

const GemmType kTypes[] = {
    {ComputeUnit::fp32, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, 4, 4, false, "fp32 in/out, CUBLAS_COMPUTE_32F (torch fp32 matmul, TF32 off)"},
    {ComputeUnit::tf32_tensor, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4, 4, false, "fp32 in/out, CUBLAS_COMPUTE_32F_FAST_TF32"},
    {ComputeUnit::fp16_tensor, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, 2, 2, false, "fp16 in/out, fp32 accumulate"},
    {ComputeUnit::fp16_fp16acc_tensor, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_16F, 2, 2, false, "fp16 in/out, fp16 accumulate"},
    {ComputeUnit::bf16_tensor, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2, 2, false, "bf16 in/out, fp32 accumulate"},
    {ComputeUnit::int8_tensor, CUDA_R_8I, CUDA_R_32I, CUBLAS_COMPUTE_32I, 1, 4, true, "int8 in, int32 out/accumulate, op(A)=T"},
    {ComputeUnit::fp64_tensor, CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F, 8, 8, false, "fp64 in/out, CUBLAS_COMPUTE_64F"},
};

const GemmType& type_of(ComputeUnit u) {
    for (const auto& t : kTypes)
        if (t.unit == u) return t;
    throw std::logic_error("no GEMM type for unit");
}

void fill(void* p, std::size_t n, cudaDataType_t t, std::uint32_t seed) {
    switch (t) {
        case CUDA_R_32F: fill_random(static_cast<float*>(p), n, seed); break;
        case CUDA_R_64F: fill_random(static_cast<double*>(p), n, seed); break;
        case CUDA_R_16F: fill_random_half(p, n, seed); break;
        case CUDA_R_16BF: fill_random_bf16(p, n, seed); break;
        case CUDA_R_8I: fill_random_int8(p, n, seed); break;
        case CUDA_R_8F_E4M3: fill_random_fp8e4m3(p, n, seed); break;
        default: RS_CUDA(cudaMemset(p, 0, n * 4)); break;  // outputs: overwritten by the GEMM
    }
}

/// Buffers for the largest GEMM of a run, reused across shapes.
struct GemmBuffers {
    DeviceBuffer<char> a, b, c;
    GemmBuffers(std::size_t a_bytes, std::size_t b_bytes, std::size_t c_bytes) : a(a_bytes), b(b_bytes), c(c_bytes) {}
};

/// Enqueues one C = op(A) B with the unit's types (column-major, m x n result, inner dimension k).
void gemm(cublasHandle_t h, const GemmType& t, const GemmBuffers& buf, int m, int n, int k) {
    const float alpha_f = 1.0f, beta_f = 0.0f;
    const double alpha_d = 1.0, beta_d = 0.0;
    const __half alpha_h = __float2half(1.0f), beta_h = __float2half(0.0f);
    const int alpha_i = 1, beta_i = 0;
    const void* alpha = &alpha_f;
    const void* beta = &beta_f;
    if (t.compute == CUBLAS_COMPUTE_64F) { alpha = &alpha_d; beta = &beta_d; }
    if (t.compute == CUBLAS_COMPUTE_16F) { alpha = &alpha_h; beta = &beta_h; }
    if (t.compute == CUBLAS_COMPUTE_32I) { alpha = &alpha_i; beta = &beta_i; }
    const cublasOperation_t opa = t.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int lda = t.transpose_a ? k : m;
    RS_CUBLAS(cublasGemmEx(h, opa, CUBLAS_OP_N, m, n, k, alpha, buf.a.get(), t.ab, lda, buf.b.get(), t.ab, k, beta,
                           buf.c.get(), t.c, m, t.compute, CUBLAS_GEMM_DEFAULT));
}

/// Seconds per GEMM: launches are batched so that one timed sample lasts >= ~0.5 ms.
Measurement time_gemm(const std::function<void()>& one, int samples) {
    const double single = summarize(time_samples(one, 2, 3)).median;
    const int batch = std::clamp(static_cast<int>(5e-4 / std::max(single, 1e-7)), 1, 200);
    const auto t = time_samples([&] { for (int i = 0; i < batch; ++i) one(); }, 1, samples, batch);
    Measurement m = summarize(t);
    m.method = "CUDA events around " + std::to_string(batch) + " back-to-back calls, seconds per call, median of " +
               std::to_string(samples) + " after 3 untimed calls";
    return m;
}

bool unit_supported(ComputeUnit u, int cc) {
    if (u == ComputeUnit::fp8_tensor) return cc >= 89;
    return cc >= 80;  // tf32/bf16 tensor ops need Ampere; the probe set targets sm_80+
}

// ------------------------------------------------------------------------------------------------
// FP8 through cuBLASLt (cublasGemmEx has no FP8 path): D(bf16) = A(e4m3)^T B(e4m3), fp32 compute.

void lt_check(cublasStatus_t s, const char* call) {
    if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(call) + " failed: " + cublasGetStatusName(s));
}
#define RS_LT(call) lt_check((call), #call)

Measurement fp8_gemm(int m, int n, int k, int samples, std::string& algo_text) {
    cublasLtHandle_t lt{};
    RS_LT(cublasLtCreate(&lt));
    struct Guard {
        cublasLtHandle_t lt;
        cublasLtMatmulDesc_t op{};
        cublasLtMatrixLayout_t a{}, b{}, c{};
        cublasLtMatmulPreference_t pref{};
        ~Guard() {
            if (pref) cublasLtMatmulPreferenceDestroy(pref);
            if (c) cublasLtMatrixLayoutDestroy(c);
            if (b) cublasLtMatrixLayoutDestroy(b);
            if (a) cublasLtMatrixLayoutDestroy(a);
            if (op) cublasLtMatmulDescDestroy(op);
            cublasLtDestroy(lt);
        }
    } g{lt};
    DeviceBuffer<char> A(static_cast<std::size_t>(m) * k), B(static_cast<std::size_t>(k) * n), C(static_cast<std::size_t>(m) * n * 2);
    const std::size_t ws_bytes = 64u << 20;
    DeviceBuffer<char> ws(ws_bytes);
    fill_random_fp8e4m3(A.get(), A.size(), 11);
    fill_random_fp8e4m3(B.get(), B.size(), 12);
    RS_LT(cublasLtMatmulDescCreate(&g.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    RS_LT(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    RS_LT(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    RS_LT(cublasLtMatrixLayoutCreate(&g.a, CUDA_R_8F_E4M3, k, m, k));
    RS_LT(cublasLtMatrixLayoutCreate(&g.b, CUDA_R_8F_E4M3, k, n, k));
    RS_LT(cublasLtMatrixLayoutCreate(&g.c, CUDA_R_16BF, m, n, m));
    RS_LT(cublasLtMatmulPreferenceCreate(&g.pref));
    RS_LT(cublasLtMatmulPreferenceSetAttribute(g.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes));
    cublasLtMatmulHeuristicResult_t heur{};
    int found = 0;
    RS_LT(cublasLtMatmulAlgoGetHeuristic(lt, g.op, g.a, g.b, g.c, g.c, g.pref, 1, &heur, &found));
    if (found == 0) throw std::runtime_error("cuBLASLt found no FP8 algorithm");
    const float alpha = 1.0f, beta = 0.0f;
    auto one = [&] {
        RS_LT(cublasLtMatmul(lt, g.op, &alpha, A.get(), g.a, B.get(), g.b, &beta, C.get(), g.c, C.get(), g.c, &heur.algo,
                             ws.get(), ws_bytes, nullptr));
    };
    algo_text = "cublasLtMatmul e4m3 x e4m3 -> bf16, fp32 compute, op(A)=T, first heuristic algorithm, 64 MiB workspace";
    return time_gemm(one, samples);
}

// ------------------------------------------------------------------------------------------------

void run_cublas_peak(ProbeContext& ctx) {
    const int s = 8192;
    const int samples = ctx.quick ? 5 : 10;
    Handle h;
    GemmBuffers buf(std::size_t(s) * s * 8, std::size_t(s) * s * 8, std::size_t(s) * s * 8);
    const std::vector<ComputeUnit> units = ctx.quick
        ? std::vector<ComputeUnit>{ComputeUnit::fp32, ComputeUnit::tf32_tensor, ComputeUnit::bf16_tensor, ComputeUnit::fp16_tensor}
        : std::vector<ComputeUnit>{ComputeUnit::fp32, ComputeUnit::tf32_tensor, ComputeUnit::fp16_tensor,
                                   ComputeUnit::fp16_fp16acc_tensor, ComputeUnit::bf16_tensor, ComputeUnit::int8_tensor,
                                   ComputeUnit::fp64_tensor};
    for (ComputeUnit u : units) {
        ctx.check_deadline("cublas " + std::string(to_string(u)));
        const GemmType& t = type_of(u);
        ComputeUnit record_as = u;
        // DGEMM runs on FP64 tensor cores only on GA100 and GH100.
        if (u == ComputeUnit::fp64_tensor && ctx.device.cc() != 80 && ctx.device.cc() != 90) record_as = ComputeUnit::fp64;
        try {
            fill(buf.a.get(), std::size_t(s) * s, t.ab, 21);
            fill(buf.b.get(), std::size_t(s) * s, t.ab, 22);
            Measurement sec = time_gemm([&] { gemm(h.get(), t, buf, s, s, s); }, samples);
            const double flops = 2.0 * s * double(s) * s;
            ComputeCeiling c;
            c.flops_per_second = Measurement{flops / sec.median, flops / sec.max, flops / sec.min, sec.samples,
                                             "cublasGemmEx " + std::to_string(s) + "^3, " + t.text +
                                                 ", random inputs in [-1, 1]; 2*M*N*K / " + sec.method};
            c.instruction = "cublasGemmEx";
            ctx.out.library_ceilings[record_as] = c;
            ctx.log("cublas " + std::string(to_string(record_as)) + ": " + std::to_string(c.flops_per_second.median / 1e12) + " TFLOP/s");
        } catch (const ProbeTimeout&) {
            throw;
        } catch (const std::exception& e) {
            ctx.missing("compute/library/" + std::string(to_string(record_as)), MissingReason::failed, e.what());
        }
    }
    if (ctx.quick) return;
    if (!unit_supported(ComputeUnit::fp8_tensor, ctx.device.cc())) {
        ctx.missing("compute/library/fp8-tensor", MissingReason::unsupported, "FP8 needs compute capability 8.9");
        return;
    }
    try {
        std::string text;
        Measurement sec = fp8_gemm(s, s, s, samples, text);
        const double flops = 2.0 * s * double(s) * s;
        ComputeCeiling c;
        c.flops_per_second = Measurement{flops / sec.median, flops / sec.max, flops / sec.min, sec.samples,
                                         text + ", " + std::to_string(s) + "^3; 2*M*N*K / " + sec.method};
        c.instruction = "cublasLtMatmul";
        ctx.out.library_ceilings[ComputeUnit::fp8_tensor] = c;
        ctx.log("cublasLt fp8: " + std::to_string(c.flops_per_second.median / 1e12) + " TFLOP/s");
    } catch (const std::exception& e) {
        ctx.missing("compute/library/fp8-tensor", MissingReason::failed, e.what());
    }
}

struct Shape {
    int m, n, k;
};

std::vector<Shape> sweep_shapes(bool quick) {
    if (quick) return {{256, 256, 256}, {1024, 1024, 1024}, {4096, 4096, 4096}, {64, 4096, 4096}, {8192, 8192, 8192}};
    std::vector<Shape> s;
    for (int x : {128, 256, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192}) s.push_back({x, x, x});
    for (int x : {1000, 2000, 4100}) s.push_back({x, x, x});                  // not multiples of the tile
    for (int m : {1, 8, 16, 32, 64, 128, 256, 512}) s.push_back({m, 4096, 4096}); // skinny: small token counts
    for (int k : {64, 128, 256, 512, 1024}) s.push_back({4096, 4096, k});     // small inner dimension
    for (int n : {1024, 3072, 11008}) s.push_back({8192, n, 4096});           // transformer projections
    s.push_back({4096, 4096, 16384});                                          // large K (weight gradient-like)
    return s;
}

void run_gemm_sweep(ProbeContext& ctx) {
    const auto shapes = sweep_shapes(ctx.quick);
    const std::vector<ComputeUnit> units = ctx.quick ? std::vector<ComputeUnit>{ComputeUnit::bf16_tensor}
                                                     : std::vector<ComputeUnit>{ComputeUnit::bf16_tensor, ComputeUnit::fp16_tensor,
                                                                                ComputeUnit::tf32_tensor, ComputeUnit::fp32};
    std::size_t max_a = 0, max_b = 0, max_c = 0;
    for (const auto& s : shapes) {
        max_a = std::max(max_a, std::size_t(s.m) * s.k);
        max_b = std::max(max_b, std::size_t(s.k) * s.n);
        max_c = std::max(max_c, std::size_t(s.m) * s.n);
    }
    Handle h;
    GemmBuffers buf(max_a * 4, max_b * 4, max_c * 4);
    const int samples = ctx.quick ? 3 : 5;
    for (ComputeUnit u : units) {
        const GemmType& t = type_of(u);
        fill(buf.a.get(), max_a, t.ab, 31);
        fill(buf.b.get(), max_b, t.ab, 32);
        std::vector<double> flops_v, secs_v;
        for (const auto& s : shapes) {
            ctx.check_deadline("gemm sweep " + std::string(to_string(u)));
            GemmRecord r;
            r.m = s.m; r.n = s.n; r.k = s.k; r.unit = u;
            r.seconds = time_gemm([&] { gemm(h.get(), t, buf, s.m, s.n, s.k); }, samples);
            r.seconds.method = std::string("cublasGemmEx, ") + t.text + ", " + r.seconds.method;
            const double flops = 2.0 * s.m * double(s.n) * s.k;
            r.flops_per_second = flops / r.seconds.median;
            r.efficiency = 1.0;  // set against the unit's best rate once all shapes are in
            ctx.out.gemm_sweep.push_back(r);
            flops_v.push_back(flops);
            secs_v.push_back(r.seconds.median);
        }
        try {
            ctx.out.gemm_fits[u] = detail::fit_overhead_and_rate(flops_v, secs_v);
        } catch (const std::exception& e) {
            ctx.missing("gemm_fits/" + std::string(to_string(u)), MissingReason::failed, e.what());
        }
        double best = 0.0;
        for (const auto& r : ctx.out.gemm_sweep)
            if (r.unit == u) best = std::max(best, r.flops_per_second);
        for (auto& r : ctx.out.gemm_sweep)
            if (r.unit == u) r.efficiency = std::clamp(r.flops_per_second / best, 1e-9, 1.0);
        ctx.log("gemm sweep " + std::string(to_string(u)) + ": " + std::to_string(shapes.size()) + " shapes, best " +
                std::to_string(best / 1e12) + " TFLOP/s");
    }
}

}  // namespace

Probe make_cublas_peak_probe() {
    return Probe{"cublas_peak", "library GEMM ceilings at 8192^3 through cuBLAS/cuBLASLt per precision", 3.0, 8.0,
                 [](const DeviceInfo& d) { return d.cc() >= 80 ? std::string() : std::string("needs compute capability 8.0"); },
                 run_cublas_peak};
}

Probe make_gemm_sweep_probe() {
    return Probe{"gemm_sweep", "cuBLAS GEMM time over a grid of (M, N, K) shapes incl. small and skinny, per precision",
                 2.0, 15.0,
                 [](const DeviceInfo& d) { return d.cc() >= 80 ? std::string() : std::string("needs compute capability 8.0"); },
                 run_gemm_sweep};
}

}  // namespace roofsim::calib
