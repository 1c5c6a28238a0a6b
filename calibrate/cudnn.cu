// cuDNN convolution sweep: forward, backward-data and backward-filter over representative shapes
// (ResNet-50 layers at batch 32), algorithms chosen by cuDNN's heuristic as PyTorch does when
// torch.backends.cudnn.benchmark is off. Built only when cuDNN is found (ROOFSIM_HAVE_CUDNN).
#include "common.cuh"

#ifdef ROOFSIM_HAVE_CUDNN
#include <cudnn.h>

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
    int n, c, h, w, k, r, s, stride, pad;
};

std::vector<ConvShape> conv_shapes(bool quick) {
    if (quick) return {{32, 64, 56, 56, 64, 3, 3, 1, 1}, {32, 256, 14, 14, 256, 3, 3, 1, 1}};
    return {
        {32, 3, 224, 224, 64, 7, 7, 2, 3},    // stem
        {32, 64, 56, 56, 64, 1, 1, 1, 0},     // bottleneck 1x1 reduce
        {32, 64, 56, 56, 64, 3, 3, 1, 1},     // bottleneck 3x3
        {32, 64, 56, 56, 256, 1, 1, 1, 0},    // bottleneck 1x1 expand
        {32, 128, 28, 28, 128, 3, 3, 1, 1},
        {32, 256, 14, 14, 256, 3, 3, 1, 1},
        {32, 512, 7, 7, 512, 3, 3, 1, 1},
        {32, 1024, 14, 14, 256, 1, 1, 1, 0},
    };
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

void run_conv(ProbeContext& ctx) {
    Handle handle;
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
    // fp32 convs in PyTorch run with TF32 allowed by default (torch.backends.cudnn.allow_tf32 = True).
    const std::vector<Prec> precs = ctx.quick
        ? std::vector<Prec>{{ComputeUnit::bf16_tensor, CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, CUDNN_TENSOR_OP_MATH, 2, "bf16 NHWC, fp32 accumulate"}}
        : std::vector<Prec>{{ComputeUnit::bf16_tensor, CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, CUDNN_TENSOR_OP_MATH, 2, "bf16 NHWC, fp32 accumulate"},
                            {ComputeUnit::tf32_tensor, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CUDNN_DEFAULT_MATH, 4, "fp32 NCHW, TF32 allowed"}};
    std::size_t max_x = 0, max_y = 0, max_w = 0;
    for (const auto& s : shapes) {
        const int p = (s.h + 2 * s.pad - s.r) / s.stride + 1, q = (s.w + 2 * s.pad - s.s) / s.stride + 1;
        max_x = std::max(max_x, std::size_t(s.n) * s.c * s.h * s.w);
        max_y = std::max(max_y, std::size_t(s.n) * s.k * p * q);
        max_w = std::max(max_w, std::size_t(s.k) * s.c * s.r * s.s);
    }
    DeviceBuffer<float> x(max_x), y(max_y), w(max_w);
    fill_random(x.get(), max_x, 41);
    fill_random(y.get(), max_y, 42);
    fill_random(w.get(), max_w, 43);
    const std::size_t ws_limit = std::size_t(1) << 30;
    DeviceBuffer<char> ws(ws_limit);
    const int samples = ctx.quick ? 3 : 5;
    const float alpha = 1.0f, beta = 0.0f;
    for (const auto& pr : precs) {
        for (const auto& s : shapes) {
            ctx.check_deadline("conv");
            Descs d;
            RS_CUDNN(cudnnCreateTensorDescriptor(&d.x));
            RS_CUDNN(cudnnCreateTensorDescriptor(&d.y));
            RS_CUDNN(cudnnCreateFilterDescriptor(&d.w));
            RS_CUDNN(cudnnCreateConvolutionDescriptor(&d.conv));
            RS_CUDNN(cudnnSetTensor4dDescriptor(d.x, pr.format, pr.data, s.n, s.c, s.h, s.w));
            RS_CUDNN(cudnnSetFilter4dDescriptor(d.w, pr.data, pr.format, s.k, s.c, s.r, s.s));
            RS_CUDNN(cudnnSetConvolution2dDescriptor(d.conv, s.pad, s.pad, s.stride, s.stride, 1, 1,
                                                     CUDNN_CROSS_CORRELATION, pr.compute));
            RS_CUDNN(cudnnSetConvolutionMathType(d.conv, pr.math));
            int on = 0, oc = 0, oh = 0, ow = 0;
            RS_CUDNN(cudnnGetConvolution2dForwardOutputDim(d.conv, d.x, d.w, &on, &oc, &oh, &ow));
            RS_CUDNN(cudnnSetTensor4dDescriptor(d.y, pr.format, pr.data, on, oc, oh, ow));
            const double flops = 2.0 * s.n * double(s.k) * oh * ow * s.c * s.r * s.s;
            for (ConvPass pass : {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_filter}) {
                std::string algo_name;
                std::function<void()> one;
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
                    one = [&, algo] {
                        RS_CUDNN(cudnnConvolutionForward(handle.h, &alpha, d.x, x.get(), d.w, w.get(), d.conv, algo, ws.get(), ws_limit, &beta, d.y, y.get()));
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
                    one = [&, algo] {
                        RS_CUDNN(cudnnConvolutionBackwardData(handle.h, &alpha, d.w, w.get(), d.y, y.get(), d.conv, algo, ws.get(), ws_limit, &beta, d.x, x.get()));
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
                    one = [&, algo] {
                        RS_CUDNN(cudnnConvolutionBackwardFilter(handle.h, &alpha, d.x, x.get(), d.y, y.get(), d.conv, algo, ws.get(), ws_limit, &beta, d.w, w.get()));
                    };
                }
                const auto t = time_samples(one, 2, samples);
                ConvRecord r;
                r.pass = pass;
                r.n = s.n; r.c = s.c; r.h = s.h; r.w = s.w; r.k = s.k; r.r = s.r; r.s = s.s; r.stride = s.stride; r.pad = s.pad;
                r.unit = pr.unit;
                r.algorithm = algo_name;
                r.seconds = summarize(t);
                r.seconds.method = std::string("cuDNN legacy API, ") + pr.text + ", algorithm from the _v7 heuristic, CUDA events, median of " +
                                   std::to_string(samples) + " after 2 warm-ups";
                r.flops_per_second = flops / r.seconds.median;
                r.efficiency = 1.0;  // set against the library GEMM ceiling when the profile is assembled
                ctx.out.conv_sweep.push_back(r);
            }
        }
        ctx.log("conv " + std::string(to_string(pr.unit)) + ": " + std::to_string(shapes.size()) + " shapes x 3 passes");
    }
}

}  // namespace

Probe make_conv_probe() {
    return Probe{"conv_sweep", "cuDNN convolution forward / backward-data / backward-filter over ResNet-50 shapes", 2.0, 8.0,
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
