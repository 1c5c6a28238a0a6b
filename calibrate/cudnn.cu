// cuDNN convolution sweep: forward, backward-data and backward-filter over representative shapes
// (ResNet-50 layers at batch 24 and 96, depthwise, dilated, 1-D), algorithms chosen by cuDNN's heuristic as PyTorch does when
// torch.backends.cudnn.benchmark is off. Built only when cuDNN is found (ROOFSIM_HAVE_CUDNN).
#include "common.cuh"

#ifdef ROOFSIM_HAVE_CUDNN
#include <cudnn.h>

#include <array>
#include <sstream>

namespace roofsim::calib {
namespace {

void cudnn_check(cudnnStatus_t s, const char* call, const char* file, int line) {
    if (s != CUDNN_STATUS_SUCCESS)
        throw std::runtime_error(std::string(call) + " failed: " + cudnnGetErrorString(s) + " (" + file + ":" +
                                 std::to_string(line) + ")");
}
#define RS_CUDNN(call) cudnn_check((call), #call, __FILE__, __LINE__)

struct ConvShape {
    int n, c, h, w, k, r, s, stride, pad, groups = 1, dilation = 1;
    /// A 1-D convolution as PyTorch runs one through cuDNN (N x C x 1 x L, K x C x 1 x S): stride, pad
    /// and dilation apply to W only; H is 1 with stride 1, no padding, dilation 1.
    bool one_d = false;
    [[nodiscard]] int stride_h() const { return one_d ? 1 : stride; }
    [[nodiscard]] int pad_h() const { return one_d ? 0 : pad; }
    [[nodiscard]] int dilation_h() const { return one_d ? 1 : dilation; }
};

/// Distinct convolutions of torchvision resnet50 (v1.5: stride on the 3x3) at 224 x 224, batch 1:
/// {C, H, K, R, stride, pad}; square inputs and filters.
struct ResNetConv {
    int c, h, k, r, stride, pad;
};
const ResNetConv kResNet50[] = {
    {3, 224, 64, 7, 2, 3},                                                                  // stem
    {64, 56, 64, 1, 1, 0}, {64, 56, 64, 3, 1, 1}, {64, 56, 256, 1, 1, 0}, {256, 56, 64, 1, 1, 0},  // layer1 (+ downsample = 64->256)
    {256, 56, 128, 1, 1, 0}, {128, 56, 128, 3, 2, 1}, {128, 28, 512, 1, 1, 0}, {256, 56, 512, 1, 2, 0},  // layer2 block 0
    {512, 28, 128, 1, 1, 0}, {128, 28, 128, 3, 1, 1},                                        // layer2 blocks 1-3
    {512, 28, 256, 1, 1, 0}, {256, 28, 256, 3, 2, 1}, {256, 14, 1024, 1, 1, 0}, {512, 28, 1024, 1, 2, 0},
    {1024, 14, 256, 1, 1, 0}, {256, 14, 256, 3, 1, 1},
    {1024, 14, 512, 1, 1, 0}, {512, 14, 512, 3, 2, 1}, {512, 7, 2048, 1, 1, 0}, {1024, 14, 2048, 1, 2, 0},
    {2048, 7, 512, 1, 1, 0}, {512, 7, 512, 3, 1, 1},
};

std::vector<ConvShape> conv_shapes(bool quick) {
    if (quick) return {{32, 64, 56, 56, 64, 3, 3, 1, 1}, {32, 256, 14, 14, 256, 3, 3, 1, 1}};
    std::vector<ConvShape> v;
    // Batches 24 and 96, apart from tools/validate's ResNet-50 batches (32, 64, 128): those are
    // predicted from these, never looked up (tests/test_accuracy.cpp).
    for (int n : {24, 96})
        for (const auto& l : kResNet50) v.push_back({n, l.c, l.h, l.h, l.k, l.r, l.r, l.stride, l.pad});
    // depthwise 3x3 (MobileNet/EfficientNet-like), groups = C
    for (const auto& [c, h, stride] : std::vector<std::array<int, 3>>{{32, 112, 1}, {144, 56, 2}, {576, 14, 1}, {960, 7, 1}})
        v.push_back({32, c, h, h, c, 3, 3, stride, 1, c, 1});
    // dilated 3x3 (DeepLab-like), pad = dilation keeps the size
    for (const auto& [c, h, d] : std::vector<std::array<int, 3>>{{256, 28, 2}, {512, 28, 4}, {256, 56, 2}})
        v.push_back({32, c, h, h, c, 3, 3, 1, d, 1, d});
    // 1-D, kernel 3, pad 1 (audio and sequence models): dense at two widths and lengths, depthwise
    // (groups = C). Batches 16 and 64 (dense), 8 and 32 (depthwise) bracket tools/validate's conv1d
    // cases (batch 32 and 16), which are predicted from these, never looked up.
    for (int n : {16, 64})
        for (const auto& [c, l] : std::vector<std::array<int, 2>>{{256, 1024}, {512, 512}})
            v.push_back({n, c, 1, l, c, 1, 3, 1, 1, 1, 1, true});
    for (int n : {8, 32}) v.push_back({n, 1024, 1, 2048, 1024, 1, 3, 1, 1, 1024, 1, true});
    return v;
}

struct Descs {
    cudnnTensorDescriptor_t x{}, y{};
    cudnnFilterDescriptor_t w{};
    cudnnConvolutionDescriptor_t conv{};
    ~Descs() {
        if (conv) cudnnDestroyConvolutionDescriptor(conv);
        if (w) cudnnDestroyFilterDescriptor(w);
        if (y) cudnnDestroyTensorDescriptor(y);
        if (x) cudnnDestroyTensorDescriptor(x);
    }
};

struct Handle {
    cudnnHandle_t h{};
    Handle() { RS_CUDNN(cudnnCreate(&h)); }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle() { cudnnDestroy(h); }
};

/// Spins for about `ns` nanoseconds of GPU time (used only when graph capture is refused).
__global__ void spin_kernel(unsigned long long ns) {
    const unsigned long long t0 = global_ns();
    while (global_ns() - t0 < ns) {
    }
}

/// GPU seconds per call: CUDA-graph replay when cuDNN's calls can be captured; otherwise CUDA events
/// around one call queued behind a ~100 us spin kernel (the host is then ahead of the GPU).
Measurement time_conv(cudaStream_t stream, const std::function<void(int)>& call, int sets, int samples, bool& captured) {
    captured = true;
    try {
        const double pilot = pilot_seconds(stream, call);
        const GraphTiming g = time_graph(stream, call, graph_calls(pilot, sets), samples);
        Measurement m = summarize(g.seconds_per_call);
        m.method = g.method("cuDNN calls");
        return m;
    } catch (const std::runtime_error&) {
        captured = false;
    }
    RS_CUDA(cudaStreamSynchronize(stream));
    EventTimer t;
    std::vector<double> v;
    for (int i = 0; i < 2 + samples; ++i) {
        spin_kernel<<<1, 1, 0, stream>>>(100000ull);
        RS_CUDA_LAUNCH();
        t.start(stream);
        call(i);
        const double sec = t.stop(stream);
        if (i >= 2) v.push_back(sec);
    }
    Measurement m = summarize(v);
    m.method = "GPU time: CUDA events around one call queued behind a 100 us spin kernel (graph capture was refused), median of " +
               std::to_string(samples) + " after 2 warm-ups";
    return m;
}

void run_conv(ProbeContext& ctx) {
    Handle handle;
    Stream stream;
    RS_CUDNN(cudnnSetStream(handle.h, stream.get()));
    const auto shapes = conv_shapes(ctx.quick);
    struct Prec {
        ComputeUnit unit;
        cudnnDataType_t data;
        cudnnDataType_t compute;
        cudnnTensorFormat_t format;
        cudnnMathType_t math;
        int bytes;
        const char* text;
    };
    // fp32 convs in PyTorch run with TF32 allowed by default (torch.backends.cudnn.allow_tf32 = True);
    // PyTorch passes NCHW unless the tensors are channels_last, bf16 included.
    const Prec bf16_nchw{ComputeUnit::bf16_tensor, CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CUDNN_TENSOR_OP_MATH, 2,
                         "bf16 NCHW (PyTorch's contiguous layout), fp32 accumulate"};
    const std::vector<Prec> precs = ctx.quick
        ? std::vector<Prec>{bf16_nchw}
        : std::vector<Prec>{bf16_nchw,
                            {ComputeUnit::bf16_tensor, CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, CUDNN_TENSOR_OP_MATH, 2,
                             "bf16 NHWC (channels_last), fp32 accumulate"},
                            {ComputeUnit::tf32_tensor, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CUDNN_DEFAULT_MATH, 4,
                             "fp32 NCHW, TF32 allowed (CUDNN_DEFAULT_MATH)"},
                            {ComputeUnit::fp32, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CUDNN_FMA_MATH, 4,
                             "fp32 NCHW, FP32 math only (CUDNN_FMA_MATH forbids TF32)"}};
    const std::size_t l2 = ctx.device.l2_bytes > 0 ? ctx.device.l2_bytes : (std::size_t(50) << 20);
    auto sizes = [](const ConvShape& s, int bytes) {
        const std::int64_t p = conv_out_extent(s.h, s.r, s.pad_h(), s.stride_h(), s.dilation_h());
        const std::int64_t q = conv_out_extent(s.w, s.s, s.pad, s.stride, s.dilation);
        return std::array<std::size_t, 3>{align256(std::size_t(s.n) * s.c * s.h * s.w * bytes),
                                          align256(std::size_t(s.n) * s.k * p * q * bytes),
                                          align256(std::size_t(s.k) * (s.c / s.groups) * s.r * s.s * bytes)};
    };
    std::size_t pool_bytes = 0;
    for (const auto& s : shapes) {
        const auto z = sizes(s, 4);
        const std::size_t set = z[0] + z[1] + z[2];
        pool_bytes = std::max(pool_bytes, set * static_cast<std::size_t>(rotation_sets(set, l2)));
    }
    DeviceBuffer<float> pool(pool_bytes / 4 + 1);
    const std::size_t ws_limit = std::size_t(1) << 30;
    DeviceBuffer<char> ws(ws_limit);
    const int samples = ctx.quick ? 3 : 5;
    const float alpha = 1.0f, beta = 0.0f;
    bool all_captured = true;
    for (const auto& pr : precs) {
        if (pr.bytes == 2) fill_random_bf16(pool.get(), pool_bytes / 2, 41);
        else fill_random(pool.get(), pool_bytes / 4, 41);
        for (const auto& s : shapes) {
            ctx.check_deadline("conv");
            Descs d;
            RS_CUDNN(cudnnCreateTensorDescriptor(&d.x));
            RS_CUDNN(cudnnCreateTensorDescriptor(&d.y));
            RS_CUDNN(cudnnCreateFilterDescriptor(&d.w));
            RS_CUDNN(cudnnCreateConvolutionDescriptor(&d.conv));
            RS_CUDNN(cudnnSetTensor4dDescriptor(d.x, pr.format, pr.data, s.n, s.c, s.h, s.w));
            RS_CUDNN(cudnnSetFilter4dDescriptor(d.w, pr.data, pr.format, s.k, s.c / s.groups, s.r, s.s));
            RS_CUDNN(cudnnSetConvolution2dDescriptor(d.conv, s.pad_h(), s.pad, s.stride_h(), s.stride, s.dilation_h(), s.dilation,
                                                     CUDNN_CROSS_CORRELATION, pr.compute));
            RS_CUDNN(cudnnSetConvolutionGroupCount(d.conv, s.groups));
            RS_CUDNN(cudnnSetConvolutionMathType(d.conv, pr.math));
            int on = 0, oc = 0, oh = 0, ow = 0;
            RS_CUDNN(cudnnGetConvolution2dForwardOutputDim(d.conv, d.x, d.w, &on, &oc, &oh, &ow));
            RS_CUDNN(cudnnSetTensor4dDescriptor(d.y, pr.format, pr.data, on, oc, oh, ow));
            const double flops = 2.0 * s.n * double(s.k) * oh * ow * (s.c / s.groups) * s.r * s.s;
            const auto z = sizes(s, pr.bytes);
            const std::size_t set = z[0] + z[1] + z[2];
            const int sets = rotation_sets(set, l2);
            auto at = [&](int i, int which) -> void* {
                std::size_t off = static_cast<std::size_t>(i % sets) * set;
                for (int j = 0; j < which; ++j) off += z[j];
                return reinterpret_cast<char*>(pool.get()) + off;
            };
            for (ConvPass pass : {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_filter}) {
                std::string algo_name;
                std::function<void(int)> call;
                try {
                    if (pass == ConvPass::forward) {
                        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
                        int cnt = 0;
                        RS_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(handle.h, d.x, d.w, d.conv, d.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &cnt, perf));
                        int pick = -1;
                        for (int i = 0; i < cnt; ++i)
                            if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= ws_limit) { pick = i; break; }
                        if (pick < 0) throw std::runtime_error("no forward algorithm fits the workspace");
                        const auto algo = perf[pick].algo;
                        algo_name = "CUDNN_CONVOLUTION_FWD_ALGO #" + std::to_string(static_cast<int>(algo));
                        call = [&, algo](int i) {
                            RS_CUDNN(cudnnConvolutionForward(handle.h, &alpha, d.x, at(i, 0), d.w, at(i, 2), d.conv, algo, ws.get(), ws_limit, &beta, d.y, at(i, 1)));
                        };
                    } else if (pass == ConvPass::backward_data) {
                        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
                        int cnt = 0;
                        RS_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle.h, d.w, d.y, d.conv, d.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &cnt, perf));
                        int pick = -1;
                        for (int i = 0; i < cnt; ++i)
                            if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= ws_limit) { pick = i; break; }
                        if (pick < 0) throw std::runtime_error("no backward-data algorithm fits the workspace");
                        const auto algo = perf[pick].algo;
                        algo_name = "CUDNN_CONVOLUTION_BWD_DATA_ALGO #" + std::to_string(static_cast<int>(algo));
                        call = [&, algo](int i) {
                            RS_CUDNN(cudnnConvolutionBackwardData(handle.h, &alpha, d.w, at(i, 2), d.y, at(i, 1), d.conv, algo, ws.get(), ws_limit, &beta, d.x, at(i, 0)));
                        };
                    } else {
                        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
                        int cnt = 0;
                        RS_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle.h, d.x, d.y, d.conv, d.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &cnt, perf));
                        int pick = -1;
                        for (int i = 0; i < cnt; ++i)
                            if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= ws_limit) { pick = i; break; }
                        if (pick < 0) throw std::runtime_error("no backward-filter algorithm fits the workspace");
                        const auto algo = perf[pick].algo;
                        algo_name = "CUDNN_CONVOLUTION_BWD_FILTER_ALGO #" + std::to_string(static_cast<int>(algo));
                        call = [&, algo](int i) {
                            RS_CUDNN(cudnnConvolutionBackwardFilter(handle.h, &alpha, d.x, at(i, 0), d.y, at(i, 1), d.conv, algo, ws.get(), ws_limit, &beta, d.w, at(i, 2)));
                        };
                    }
                    bool captured = true;
                    ConvRecord r;
                    r.seconds = time_conv(stream.get(), call, sets, samples, captured);
                    all_captured = all_captured && captured;
                    r.pass = pass;
                    r.n = s.n; r.c = s.c; r.h = s.h; r.w = s.w; r.k = s.k; r.r = s.r; r.s = s.s; r.stride = s.stride; r.pad = s.pad;
                    r.groups = s.groups;
                    r.dilation = s.dilation;
                    if (s.one_d) {
                        r.stride_h = s.stride_h();
                        r.pad_h = s.pad_h();
                        r.dilation_h = s.dilation_h();
                    }
                    r.layout = pr.format == CUDNN_TENSOR_NHWC ? "NHWC" : "NCHW";
                    r.unit = pr.unit;
                    r.algorithm = algo_name;
                    r.seconds.method = std::string("cuDNN legacy API, ") + pr.text + ", algorithm: first _v7 heuristic result that fits 1 GiB workspace, operands rotated over " +
                                       std::to_string(sets) + " set(s); " + r.seconds.method;
                    r.flops_per_second = flops / r.seconds.median;
                    r.efficiency = 1.0;  // set against the library GEMM ceiling when the profile is assembled
                    ctx.out.conv_sweep.push_back(r);
                } catch (const ProbeTimeout&) {
                    throw;
                } catch (const std::exception& e) {
                    RS_CUDA(cudaStreamSynchronize(stream.get()));
                    ctx.missing("conv_sweep/" + std::string(to_string(pr.unit)) + "/" + std::string(to_string(pass)) + "/n" +
                                    std::to_string(s.n) + "c" + std::to_string(s.c) + "h" + std::to_string(s.h) + "k" +
                                    std::to_string(s.k) + "r" + std::to_string(s.r) + "u" + std::to_string(s.stride) + "g" +
                                    std::to_string(s.groups) + "d" + std::to_string(s.dilation) + (s.one_d ? "-1d-" : "-") +
                                    (pr.format == CUDNN_TENSOR_NHWC ? "nhwc" : "nchw"),
                                MissingReason::failed, e.what());
                }
            }
        }
        ctx.log(std::string("conv ") + pr.text + ": " + std::to_string(shapes.size()) + " shapes x 3 passes");
    }
    ctx.log(all_captured ? "conv: every call timed by CUDA-graph replay" : "conv: some calls were timed behind a spin kernel (capture refused)");
}

}  // namespace

Probe make_conv_probe() {
    return Probe{"conv_sweep", "cuDNN convolution GPU time, forward / backward-data / backward-filter, ResNet-50 + depthwise + dilated + 1-D shapes", 3.0, 45.0,
                 [](const DeviceInfo& d) { return d.cc() >= 80 ? std::string() : std::string("needs compute capability 8.0"); },
                 run_conv};
}

}  // namespace roofsim::calib

#else  // not built with cuDNN

namespace roofsim::calib {
Probe make_conv_probe() {
    return Probe{"conv_sweep", "cuDNN convolution sweep (not built: cuDNN was not found at configure time)", 0.0, 0.0,
                 [](const DeviceInfo&) { return std::string("not built with cuDNN"); }, [](ProbeContext&) {}};
}
}  // namespace roofsim::calib

#endif
