// Library ceilings and efficiency sweeps through cuBLAS / cuBLASLt, the libraries PyTorch calls for
// matmul. Ceiling: 8192^3 per precision. Sweep: a grid of (M, N, K) including small and skinny shapes.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <sstream>

#include "common.cuh"
#include <roofsim/detail/fit.hpp>

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

/// One GEMM call in cuBLAS's column-major terms; batch > 1 uses cublasGemmStridedBatchedEx.
struct Shape {
    int m, n, k;
    cublasOperation_t opa = CUBLAS_OP_N, opb = CUBLAS_OP_N;
    int batch = 1;
};

std::string layout_of(const Shape& s) {
    return std::string(s.opa == CUBLAS_OP_T ? "T" : "N") + (s.opb == CUBLAS_OP_T ? "T" : "N");
}

/// Elements of A, B, C for one call of `s` (all `batch` products).
std::size_t a_elems(const Shape& s) { return std::size_t(s.m) * s.k * s.batch; }
std::size_t b_elems(const Shape& s) { return std::size_t(s.k) * s.n * s.batch; }
std::size_t c_elems(const Shape& s) { return std::size_t(s.m) * s.n * s.batch; }

/// Bytes of one operand set (A, B and C, each 256-byte aligned) of `s` with type `t`.
std::size_t set_bytes(const Shape& s, const GemmType& t) {
    return align256(a_elems(s) * t.elem_bytes) + align256(b_elems(s) * t.elem_bytes) + align256(c_elems(s) * t.c_bytes);
}

/// A cuBLAS handle bound to a non-default stream with a fixed workspace, so that calls can be
/// captured into a CUDA graph (cuBLAS must not allocate during capture).
struct CapturableHandle {
    Handle h;
    Stream stream;
    static constexpr std::size_t workspace_bytes = std::size_t(32) << 20;  // NVIDIA's recommendation for Hopper
    DeviceBuffer<char> workspace{workspace_bytes};
    CapturableHandle() {
        RS_CUBLAS(cublasSetStream(h.get(), stream.get()));  // resets the workspace: set it after
        RS_CUBLAS(cublasSetWorkspace(h.get(), workspace.get(), workspace_bytes));
    }
};

/// Enqueues one call of `s` with the unit's types on the handle's stream, operands at `a`, `b`, `c`.
void gemm(cublasHandle_t h, const GemmType& t, const Shape& s, const void* a, const void* b, void* c) {
    const float alpha_f = 1.0f, beta_f = 0.0f;
    const double alpha_d = 1.0, beta_d = 0.0;
    const __half alpha_h = __float2half(1.0f), beta_h = __float2half(0.0f);
    const int alpha_i = 1, beta_i = 0;
    const void* alpha = &alpha_f;
    const void* beta = &beta_f;
    if (t.compute == CUBLAS_COMPUTE_64F) { alpha = &alpha_d; beta = &beta_d; }
    if (t.compute == CUBLAS_COMPUTE_16F) { alpha = &alpha_h; beta = &beta_h; }
    if (t.compute == CUBLAS_COMPUTE_32I) { alpha = &alpha_i; beta = &beta_i; }
    // Leading dimensions of tightly packed column-major operands: op(A) is m x k, op(B) is k x n.
    const int lda = s.opa == CUBLAS_OP_N ? s.m : s.k;
    const int ldb = s.opb == CUBLAS_OP_N ? s.k : s.n;
    if (s.batch == 1) {
        RS_CUBLAS(cublasGemmEx(h, s.opa, s.opb, s.m, s.n, s.k, alpha, a, t.ab, lda, b, t.ab, ldb, beta, c, t.c, s.m,
                               t.compute, CUBLAS_GEMM_DEFAULT));
    } else {
        RS_CUBLAS(cublasGemmStridedBatchedEx(h, s.opa, s.opb, s.m, s.n, s.k, alpha, a, t.ab, lda,
                                             static_cast<long long>(s.m) * s.k, b, t.ab, ldb,
                                             static_cast<long long>(s.k) * s.n, beta, c, t.c, s.m,
                                             static_cast<long long>(s.m) * s.n, s.batch, t.compute, CUBLAS_GEMM_DEFAULT));
    }
}

/// GPU seconds per call of `call(i)` (operand set i mod `sets`), by CUDA-graph replay; `what` names
/// the call in the method text.
Measurement time_gpu_calls(cudaStream_t stream, const std::function<void(int)>& call, int sets, int samples,
                           const std::string& what) {
    const double pilot = pilot_seconds(stream, call);
    const GraphTiming g = time_graph(stream, call, graph_calls(pilot, sets), samples);
    Measurement m = summarize(g.seconds_per_call);
    m.method = g.method(what);
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
    Stream stream;
    auto call = [&](int) {
        RS_LT(cublasLtMatmul(lt, g.op, &alpha, A.get(), g.a, B.get(), g.b, &beta, C.get(), g.c, C.get(), g.c, &heur.algo,
                             ws.get(), ws_bytes, stream.get()));
    };
    algo_text = "cublasLtMatmul e4m3 x e4m3 -> bf16, fp32 compute, op(A)=T, first heuristic algorithm, 64 MiB workspace";
    return time_gpu_calls(stream.get(), call, 1, samples, "cublasLtMatmul calls");
}

// ------------------------------------------------------------------------------------------------

void run_cublas_peak(ProbeContext& ctx) {
    const int s = 8192;
    const int samples = ctx.quick ? 5 : 10;
    CapturableHandle h;
    // 8192^3 operands (>= 3 x 64 MiB) exceed the L2, so one operand set is used.
    DeviceBuffer<char> a(std::size_t(s) * s * 8), b(std::size_t(s) * s * 8), cbuf(std::size_t(s) * s * 8);
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
            fill(a.get(), std::size_t(s) * s, t.ab, 21);
            fill(b.get(), std::size_t(s) * s, t.ab, 22);
            const Shape sh{s, s, s, t.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, 1};
            Measurement sec = time_gpu_calls(
                h.stream.get(), [&](int) { gemm(h.h.get(), t, sh, a.get(), b.get(), cbuf.get()); }, 1, samples,
                "cublasGemmEx calls (" + layout_of(sh) + ")");
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

/// PyTorch nn.Linear in training on row-major tensors x[M,K], W[N,K], y[M,N] (M tokens), as cuBLAS
/// column-major calls: forward y = x W^T is (m,n,k) = (N,M,K) "TN"; backward-data dX = dY W is
/// (K,M,N) "NN"; backward-weight dW = dY^T X is (K,N,M) "NT".
void add_linear(std::vector<Shape>& v, int tokens, int n_out, int k_in) {
    v.push_back({n_out, tokens, k_in, CUBLAS_OP_T, CUBLAS_OP_N, 1});
    v.push_back({k_in, tokens, n_out, CUBLAS_OP_N, CUBLAS_OP_N, 1});
    v.push_back({k_in, n_out, tokens, CUBLAS_OP_N, CUBLAS_OP_T, 1});
}

std::vector<Shape> sweep_shapes(bool quick, ComputeUnit u) {
    std::vector<Shape> s;
    if (quick) {
        for (int x : {128, 512, 1024, 2048}) s.push_back({x, x, x});
        add_linear(s, 6144, 3072, 768);
        s.push_back({768, 24, 768, CUBLAS_OP_T, CUBLAS_OP_N, 1});
        s.push_back({1024, 1024, 64, CUBLAS_OP_T, CUBLAS_OP_N, 192});
        return s;
    }
    // The shapes are kept apart from tools/validate's layer and model cases (docs/validation.md): a
    // validation GEMM is predicted from its measured neighbours here, never looked up
    // (tests/test_accuracy.cpp checks it). Validation token counts are 4096, 6304, 8192, 16384 and 25216.
    for (int x : {96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 6144, 8192}) s.push_back({x, x, x});
    for (int x : {96, 128, 256, 512}) s.push_back({x, x, x, CUBLAS_OP_T, CUBLAS_OP_N, 1});  // small, forward layout
    for (int x : {1000, 2000, 4100}) s.push_back({x, x, x});                  // not multiples of the tile
    for (int m : {1, 8, 16, 32, 64, 128, 256, 512}) s.push_back({m, 4096, 4096}); // skinny, column-major M
    for (int k : {64, 128, 256, 512, 2048}) s.push_back({4096, 4096, k});     // small inner dimension
    for (int n : {1024, 3072, 11008}) s.push_back({8192, n, 4096});           // transformer projections
    s.push_back({4096, 4096, 16384});                                          // large K
    // nn.Linear training GEMMs (GPT-2 small widths), all three of forward / backward-data / backward-weight
    std::vector<std::pair<int, int>> nk = {{768, 768}, {3072, 768}, {768, 3072}, {2304, 768}};
    if (u == ComputeUnit::bf16_tensor) nk.push_back({50257, 768});            // LM head (vocabulary)
    for (int tokens : {2048, 6144, 12288, 32768})
        for (const auto& [n_out, k_in] : nk) add_linear(s, tokens, n_out, k_in);
    // skinny: few tokens (inference-like, small micro-batches)
    for (int tokens : {8, 24, 64})
        for (const auto& [n_out, k_in] : std::vector<std::pair<int, int>>{{768, 768}, {3072, 768}, {768, 3072}, {4096, 4096}})
            add_linear(s, tokens, n_out, k_in);
    // attention-like strided batched GEMMs: batch = sequences x heads
    for (int batch : {48, 192, 768})
        for (const Shape& b : {Shape{128, 128, 64}, Shape{128, 64, 128}, Shape{1024, 1024, 64}, Shape{1024, 64, 1024}})
            for (cublasOperation_t opa : {CUBLAS_OP_T, CUBLAS_OP_N})
                s.push_back({b.m, b.n, b.k, opa, CUBLAS_OP_N, batch});
    return s;
}

void run_gemm_sweep(ProbeContext& ctx) {
    const std::vector<ComputeUnit> units = ctx.quick ? std::vector<ComputeUnit>{ComputeUnit::bf16_tensor}
                                                     : std::vector<ComputeUnit>{ComputeUnit::bf16_tensor, ComputeUnit::fp16_tensor,
                                                                                ComputeUnit::tf32_tensor, ComputeUnit::fp32};
    const std::size_t l2 = ctx.device.l2_bytes > 0 ? ctx.device.l2_bytes : (std::size_t(50) << 20);
    CapturableHandle h;
    const int samples = ctx.quick ? 3 : 5;
    // One pool per run, sized for the largest (sets x set bytes) over all units and shapes.
    std::size_t pool_bytes = 0;
    for (ComputeUnit u : units)
        for (const auto& sh : sweep_shapes(ctx.quick, u)) {
            const std::size_t b = set_bytes(sh, type_of(u));
            pool_bytes = std::max(pool_bytes, b * static_cast<std::size_t>(rotation_sets(b, l2)));
        }
    DeviceBuffer<char> pool(pool_bytes);
    for (ComputeUnit u : units) {
        const GemmType& t = type_of(u);
        const auto shapes = sweep_shapes(ctx.quick, u);
        fill(pool.get(), pool_bytes / t.elem_bytes, t.ab, 31);  // every set's A and B (C is overwritten)
        std::vector<double> flops_v, secs_v;
        for (const auto& sh : shapes) {
            ctx.check_deadline("gemm sweep " + std::string(to_string(u)));
            const std::size_t sb = set_bytes(sh, t);
            const int sets = rotation_sets(sb, l2);
            const std::size_t a_off = 0, b_off = align256(a_elems(sh) * t.elem_bytes),
                              c_off = b_off + align256(b_elems(sh) * t.elem_bytes);
            auto call = [&](int i) {
                char* base = pool.get() + static_cast<std::size_t>(i % sets) * sb;
                gemm(h.h.get(), t, sh, base + a_off, base + b_off, base + c_off);
            };
            GemmRecord r;
            r.m = sh.m; r.n = sh.n; r.k = sh.k; r.unit = u;
            r.layout = layout_of(sh);
            r.batch = sh.batch;
            const std::string fn = sh.batch > 1 ? "cublasGemmStridedBatchedEx" : "cublasGemmEx";
            r.seconds = time_gpu_calls(h.stream.get(), call, sets, samples, fn + " calls");
            r.seconds.method = fn + " " + r.layout + ", " + t.text + ", random inputs in [-1, 1], operands rotated over " +
                               std::to_string(sets) + (sets > 1 ? " sets (to span 2 x L2, at most 200)" : " set (larger than L2)") +
                               ", 32 MiB cuBLAS workspace; " + r.seconds.method;
            const double flops = 2.0 * sh.m * double(sh.n) * sh.k * sh.batch;
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
    return Probe{"gemm_sweep", "cuBLAS GEMM GPU time (CUDA-graph replay) over square, skinny, nn.Linear training and batched attention shapes, per precision",
                 3.0, 40.0,
                 [](const DeviceInfo& d) { return d.cc() >= 80 ? std::string() : std::string("needs compute capability 8.0"); },
                 run_gemm_sweep};
}

}  // namespace roofsim::calib
