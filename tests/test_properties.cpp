// Properties over random valid layer graphs (seeded): every prediction is finite and positive; the
// step time does not fall as the batch grows where the GPU paces the step; memory adds up; an empty
// graph and kernels that move nothing divide by nothing.
#include "catch.hpp"

#include <roofsim/roofsim.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace roofsim;

namespace {

// Fewer graphs under the sanitizers (a build 10-50 times slower); ROOFSIM_PROPERTY_GRAPHS overrides.
#if defined(__SANITIZE_ADDRESS__)
constexpr int default_graphs = 1000;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr int default_graphs = 1000;
#else
constexpr int default_graphs = 5000;
#endif
#else
constexpr int default_graphs = 5000;
#endif
constexpr std::uint64_t seed = 20261205;

int graph_count() {
    if (const char* env = std::getenv("ROOFSIM_PROPERTY_GRAPHS"); env && *env) return std::max(1, std::atoi(env));
    return default_graphs;
}

/// A random graph with what PyTorch would say of it, counted here from the layers' definitions (not
/// by roofsim): its trainable parameter elements, its inputs' bytes, its largest layer output.
struct RandomGraph {
    Graph graph;
    double parameters = 0;
    double input_elements_f32 = 0, input_elements_i64 = 0;  ///< per sample (the batch dimension left out)
    double largest_output_elements = 0;                     ///< per sample
};

class Generator {
public:
    explicit Generator(std::uint64_t s) : rng_(s) {}

    RandomGraph next() {
        switch (pick(3)) {
            case 0: return image();
            case 1: return sequence();
            default: return mlp();
        }
    }

private:
    std::int64_t pick(std::int64_t n) { return std::uniform_int_distribution<std::int64_t>(0, n - 1)(rng_); }
    template <class T>
    T one_of(std::initializer_list<T> list) { return *(list.begin() + pick(static_cast<std::int64_t>(list.size()))); }

    void out(RandomGraph& g, double elements) { g.largest_output_elements = std::max(g.largest_output_elements, elements); }

    std::string layer(RandomGraph& g, const std::string& op, std::vector<std::string> inputs, std::map<std::string, AttrValue> attrs,
                      double output_elements) {
        const std::string name = op + std::to_string(g.graph.layers.size());
        g.graph.layers.push_back(Layer{name, op, std::move(inputs), std::move(attrs)});
        out(g, output_elements);
        return name;
    }

    // conv / batch norm / activation chains and residual blocks over [N, C, H, W], then a classifier
    RandomGraph image() {
        RandomGraph g;
        g.graph.name = "image";
        std::int64_t c = one_of<std::int64_t>({1, 3, 4}), h = one_of<std::int64_t>({8, 16, 32, 64});
        g.graph.inputs.push_back({"x", {GraphBuilder::batch, c, h, h}, DType::f32, false});
        g.graph.inputs.push_back({"labels", {GraphBuilder::batch}, DType::i64, false});
        g.input_elements_f32 = static_cast<double>(c * h * h);
        g.input_elements_i64 = 1;
        std::string x = "x";
        const auto blocks = 1 + pick(8);
        for (std::int64_t b = 0; b < blocks; ++b) {
            switch (pick(5)) {
                case 0: {  // conv, maybe strided, maybe without bias
                    const std::int64_t k = one_of<std::int64_t>({1, 3}), o = one_of<std::int64_t>({4, 8, 16});
                    const std::int64_t stride = h >= 4 ? 1 + pick(2) : 1;
                    const bool bias = pick(2) == 0;
                    x = layer(g, "conv2d", {x}, {{"in_channels", c}, {"out_channels", o}, {"kernel_size", k}, {"stride", stride},
                                                 {"padding", k / 2}, {"bias", bias}},
                              0);
                    h = (h + 2 * (k / 2) - k) / stride + 1;
                    g.parameters += static_cast<double>(o * c * k * k + (bias ? o : 0));
                    c = o;
                    out(g, static_cast<double>(c * h * h));
                    break;
                }
                case 1:  // batch norm and an activation
                    x = layer(g, "batchnorm2d", {x}, {{"num_features", c}}, static_cast<double>(c * h * h));
                    g.parameters += static_cast<double>(2 * c);
                    x = layer(g, one_of<const char*>({"relu", "gelu", "silu", "sigmoid", "tanh"}), {x}, {}, static_cast<double>(c * h * h));
                    break;
                case 2: {  // residual block: conv, batch norm, relu, conv, add
                    const std::string skip = x;
                    x = layer(g, "conv2d", {x}, {{"in_channels", c}, {"out_channels", c}, {"kernel_size", 3}, {"padding", 1}, {"bias", false}},
                              static_cast<double>(c * h * h));
                    x = layer(g, "batchnorm2d", {x}, {{"num_features", c}}, static_cast<double>(c * h * h));
                    x = layer(g, "relu", {x}, {}, static_cast<double>(c * h * h));
                    x = layer(g, "conv2d", {x}, {{"in_channels", c}, {"out_channels", c}, {"kernel_size", 3}, {"padding", 1}, {"bias", false}},
                              static_cast<double>(c * h * h));
                    x = layer(g, "add", {x, skip}, {}, static_cast<double>(c * h * h));
                    g.parameters += static_cast<double>(2 * c * c * 9 + 2 * c);
                    break;
                }
                case 3:  // pooling
                    if (h >= 2) {
                        x = layer(g, one_of<const char*>({"maxpool2d", "avgpool2d"}), {x}, {{"kernel_size", 2}}, 0);
                        h /= 2;
                        out(g, static_cast<double>(c * h * h));
                    }
                    break;
                default:  // dropout
                    x = layer(g, "dropout", {x}, {{"p", 0.1 * static_cast<double>(pick(5))}}, static_cast<double>(c * h * h));
                    break;
            }
        }
        x = layer(g, "adaptive_avgpool2d", {x}, {{"output_size", std::int64_t(1)}}, static_cast<double>(c));
        x = layer(g, "flatten", {x}, {}, static_cast<double>(c));
        const std::int64_t classes = one_of<std::int64_t>({10, 100});
        x = layer(g, "linear", {x}, {{"in_features", c}, {"out_features", classes}}, static_cast<double>(classes));
        g.parameters += static_cast<double>(c * classes + classes);
        layer(g, "cross_entropy", {x, "labels"}, {}, 1);
        return g;
    }

    // embedding, then transformer-like blocks (layer norm, attention, MLP, residual adds) over [N, L, E]
    RandomGraph sequence() {
        RandomGraph g;
        g.graph.name = "sequence";
        const std::int64_t l = one_of<std::int64_t>({8, 16, 64}), e = one_of<std::int64_t>({16, 32, 64}), vocab = one_of<std::int64_t>({50, 1000});
        g.graph.inputs.push_back({"ids", {GraphBuilder::batch, l}, DType::i64, false});
        g.input_elements_i64 = static_cast<double>(l);
        const double act = static_cast<double>(l * e);
        std::string x = layer(g, "embedding", {"ids"}, {{"num_embeddings", vocab}, {"embedding_dim", e}}, act);
        g.parameters += static_cast<double>(vocab * e);
        const auto blocks = 1 + pick(3);
        for (std::int64_t b = 0; b < blocks; ++b) {
            const std::string skip = x;
            x = layer(g, pick(2) ? "layernorm" : "rmsnorm", {x}, {{"normalized_shape", std::vector<std::int64_t>{e}}}, act);
            g.parameters += static_cast<double>(g.graph.layers.back().op == "layernorm" ? 2 * e : e);
            if (pick(2) == 0) {
                const std::int64_t heads = one_of<std::int64_t>({1, 2, 4});
                x = layer(g, "mha", {x}, {{"embed_dim", e}, {"num_heads", heads}, {"need_weights", pick(2) == 0}}, act);
                g.parameters += static_cast<double>(4 * e * e + 4 * e);
            } else {
                x = layer(g, "linear", {x}, {{"in_features", e}, {"out_features", 4 * e}}, 4 * act);
                x = layer(g, one_of<const char*>({"gelu", "relu", "silu"}), {x}, {}, 4 * act);
                x = layer(g, "linear", {x}, {{"in_features", 4 * e}, {"out_features", e}}, act);
                g.parameters += static_cast<double>(8 * e * e + 5 * e);
            }
            if (pick(2) == 0) x = layer(g, "dropout", {x}, {{"p", 0.1}}, act);
            x = layer(g, "add", {x, skip}, {}, act);
        }
        if (pick(2) == 0) x = layer(g, "softmax", {x}, {{"dim", std::int64_t(-1)}}, act);
        layer(g, "linear", {x}, {{"in_features", e}, {"out_features", vocab}}, static_cast<double>(l * vocab));
        g.parameters += static_cast<double>(e * vocab + vocab);
        return g;
    }

    // linear layers with activations, layer norms and dropout, then cross entropy
    RandomGraph mlp() {
        RandomGraph g;
        g.graph.name = "mlp";
        std::int64_t f = one_of<std::int64_t>({16, 100, 784});
        g.graph.inputs.push_back({"x", {GraphBuilder::batch, f}, DType::f32, false});
        g.graph.inputs.push_back({"labels", {GraphBuilder::batch}, DType::i64, false});
        g.input_elements_f32 = static_cast<double>(f);
        g.input_elements_i64 = 1;
        std::string x = "x";
        const auto layers = 1 + pick(6);
        for (std::int64_t i = 0; i < layers; ++i) {
            const std::int64_t o = one_of<std::int64_t>({8, 64, 256, 1024});
            const bool bias = pick(4) != 0;
            x = layer(g, "linear", {x}, {{"in_features", f}, {"out_features", o}, {"bias", bias}}, static_cast<double>(o));
            g.parameters += static_cast<double>(f * o + (bias ? o : 0));
            f = o;
            switch (pick(4)) {
                case 0: x = layer(g, "relu", {x}, {}, static_cast<double>(f)); break;
                case 1:
                    x = layer(g, "layernorm", {x}, {{"normalized_shape", std::vector<std::int64_t>{f}}}, static_cast<double>(f));
                    g.parameters += static_cast<double>(2 * f);
                    break;
                case 2: x = layer(g, "dropout", {x}, {{"p", 0.5}}, static_cast<double>(f)); break;
                default: x = layer(g, "tanh", {x}, {}, static_cast<double>(f)); break;
            }
        }
        x = layer(g, "linear", {x}, {{"in_features", f}, {"out_features", std::int64_t(10)}}, 10);
        g.parameters += static_cast<double>(10 * f + 10);
        layer(g, "cross_entropy", {x, "labels"}, {}, 1);
        return g;
    }

    std::mt19937_64 rng_;
};

bool finite_non_negative(double v) { return std::isfinite(v) && v >= 0; }

/// Every time, count and byte figure of a prediction: finite, non-negative; the step positive.
void check_finite(const Prediction& p) {
    REQUIRE(std::isfinite(p.step_time.value()));
    REQUIRE(p.step_time.value() > 0);
    for (const Seconds t : {p.forward_time, p.backward_time, p.optimizer_time, p.zero_grad_time, p.gpu_time, p.host_time,
                            p.gpu_gap_time, p.communication_time, p.communication_exposed, p.flagged_gpu_time}) {
        REQUIRE(finite_non_negative(t.value()));
    }
    REQUIRE(p.gpu_time.value() > 0);
    for (const Bytes b : {p.memory.parameters, p.memory.gradients, p.memory.optimizer_state, p.memory.master_weights, p.memory.inputs,
                          p.memory.activations, p.memory.autocast_copies, p.memory.gradient_buckets, p.memory.peak}) {
        REQUIRE(finite_non_negative(b.value()));
    }
    REQUIRE(p.memory.peak.value() > 0);
    REQUIRE(finite_non_negative(p.parameters));
    for (const auto& r : p.layers) {
        INFO("layer " << r.layer.str());
        for (const Seconds t : {r.forward_gpu, r.backward_gpu, r.forward_host, r.backward_host}) REQUIRE(finite_non_negative(t.value()));
        REQUIRE(finite_non_negative(r.flops.value()));
        REQUIRE(finite_non_negative(r.bytes.value()));
        REQUIRE(finite_non_negative(r.share));
        REQUIRE(r.share <= 1 + 1e-9);
    }
}

bool near(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max({std::abs(a), std::abs(b), 1.0}); }

}  // namespace

TEST_CASE("random valid graphs: finite positive predictions, memory that adds up, step time monotone in batch where GPU-paced",
          "[properties]") {
    const FrameworkProfile* framework = find_builtin_framework_profile("h200-sxm");
    std::vector<CostContext> contexts;
    for (const char* key : {"h200-sxm", "a100-80gb-sxm", "rtx-3090", "a10"}) contexts.push_back(make_default_cost_context(gpu_or_throw(key), framework));
    Generator gen(seed);
    std::mt19937_64 rng(seed + 1);
    const int graphs = graph_count();
    int gpu_paced_pairs = 0, inference = 0, data_parallel = 0;
    for (int i = 0; i < graphs; ++i) {
        const RandomGraph g = gen.next();
        const CostContext& ctx = contexts[static_cast<std::size_t>(i) % contexts.size()];
        PredictOptions o;
        o.framework = framework;
        o.lowering.batch = std::int64_t(1) << std::uniform_int_distribution<int>(0, 10)(rng);  // 1 to 1024
        o.lowering.batch += std::uniform_int_distribution<std::int64_t>(0, o.lowering.batch - 1)(rng);
        o.lowering.precision = std::array{PrecisionMode::fp32, PrecisionMode::tf32, PrecisionMode::amp_bf16, PrecisionMode::amp_fp16}[rng() % 4];
        o.lowering.optimizer.kind = std::array{OptimizerKind::sgd, OptimizerKind::adam, OptimizerKind::adamw, OptimizerKind::none}[rng() % 4];
        o.lowering.optimizer.fused = rng() % 2 == 0;
        const bool infer = i % 5 == 4;
        if (infer) o.lowering.mode = StepMode::inference;
        INFO("graph " << i << " (" << g.graph.name << ", " << g.graph.layers.size() << " layers), batch " << o.lowering.batch << ", "
                      << to_string(o.lowering.precision) << ", " << to_string(o.lowering.optimizer.kind) << ", " << ctx.ceilings.gpu_key
                      << (infer ? ", inference" : ""));
        const Prediction p = predict(g.graph, ctx, o);
        check_finite(p);

        // Memory adds up (memory.hpp): parameters are the sum over the layers of PyTorch's parameter
        // counts, in float32 (the parameter dtype of these precision modes); gradients the same bytes
        // again; inputs the graph inputs' bytes. Inference: the peak is the sum of its parts.
        // Training: the peak is the larger of the optimizer step's sum (parameters, gradients, state,
        // masters, inputs; Adam's foreach adds one parameter-sized temporary) and the end of the
        // forward's (parameters, state, masters, inputs, saved activations, autocast copies, and two
        // of the largest layer output, at most 4 bytes an element).
        const double batch = static_cast<double>(o.lowering.batch);
        REQUIRE(near(p.parameters, g.parameters));
        REQUIRE(near(p.memory.parameters.value(), 4 * g.parameters));
        REQUIRE(near(p.memory.inputs.value(), batch * (4 * g.input_elements_f32 + 8 * g.input_elements_i64)));
        const MemoryEstimate& m = p.memory;
        if (infer) {
            ++inference;
            REQUIRE(near(m.peak.value(), (m.parameters + m.inputs + m.activations + m.autocast_copies).value()));
        } else {
            REQUIRE(near(m.gradients.value(), m.parameters.value()));
            const double step = (m.parameters + m.gradients + m.optimizer_state + m.master_weights + m.inputs).value();
            const double forward_end = (m.parameters + m.optimizer_state + m.master_weights + m.inputs + m.activations + m.autocast_copies).value();
            REQUIRE(m.peak.value() >= step * (1 - 1e-12));
            REQUIRE(m.peak.value() >= forward_end * (1 - 1e-12));
            REQUIRE(m.peak.value() <= std::max(step + m.parameters.value(), forward_end + 2 * 4 * batch * g.largest_output_elements) * (1 + 1e-12));
        }

        // Data parallel: DDP's buckets are a flat copy of the gradients, added to the one-GPU peak.
        if (!infer && i % 10 == 3) {
            ++data_parallel;
            PredictOptions two = o;
            two.data_parallel.gpus = 2;
            const Prediction q = predict(g.graph, ctx, two);
            check_finite(q);
            double bucket_bytes = 0;
            for (const auto& b : q.buckets) bucket_bytes += static_cast<double>(b.bytes);
            REQUIRE(near(q.memory.gradient_buckets.value(), bucket_bytes));
            REQUIRE(near(q.memory.gradient_buckets.value(), q.memory.gradients.value()));
            REQUIRE(near(q.memory.peak.value(), p.memory.peak.value() + q.memory.gradient_buckets.value()));
        }

        // Monotone in batch where the GPU paces the step (its busy time and gaps over twice the host's
        // issue time), at both batches.
        PredictOptions larger = o;
        larger.lowering.batch = o.lowering.batch + std::uniform_int_distribution<std::int64_t>(1, o.lowering.batch)(rng);
        const auto gpu_paced = [](const Prediction& x) { return (x.gpu_time + x.gpu_gap_time).value() > 2 * x.host_time.value(); };
        if (gpu_paced(p)) {
            const Prediction bigger = predict(g.graph, ctx, larger);
            check_finite(bigger);
            if (gpu_paced(bigger)) {
                ++gpu_paced_pairs;
                INFO("batch " << o.lowering.batch << " -> " << larger.lowering.batch << ": " << p.step_time.value() << " s -> "
                              << bigger.step_time.value() << " s");
                REQUIRE(bigger.step_time.value() >= p.step_time.value() * (1 - 1e-9));
            }
        }
    }
    // the draws reach every property, not a handful of graphs
    CHECK(inference >= graphs / 10);
    CHECK(data_parallel >= graphs / 20);
    CHECK(gpu_paced_pairs >= graphs / 100);
}

TEST_CASE("an empty graph and kernels that move nothing divide by nothing", "[properties]") {
    const FrameworkProfile* framework = find_builtin_framework_profile("h200-sxm");
    const CostContext ctx = make_default_cost_context(gpu_or_throw("a100-80gb-sxm"), framework);
    PredictOptions o;
    o.framework = framework;

    SECTION("a graph without layers: an error or a finite prediction") {
        Graph empty;
        empty.name = "empty";
        empty.inputs.push_back({"x", {GraphBuilder::batch, 4}, DType::f32, false});
        try {
            const Prediction p = predict(empty, ctx, o);
            CHECK(std::isfinite(p.step_time.value()));
            CHECK(std::isfinite(p.memory.peak.value()));
            for (const auto& r : p.layers) CHECK(std::isfinite(r.share));
        } catch (const std::exception& e) {
            CHECK(std::string(e.what()).size() > 0);
        }
    }
    SECTION("kernels of zero bytes and zero FLOPs") {
        KernelIr ir;
        ir.list.model = "zero";
        ir.batch = 1;
        for (const KernelKind kind : {KernelKind::elementwise, KernelKind::reduction, KernelKind::copy, KernelKind::gemm, KernelKind::unknown}) {
            Kernel k;
            k.op = "aten::zero";
            k.kind = kind;
            k.phase = Phase::forward;
            k.layer = "l";
            if (kind == KernelKind::unknown) k.flag = "no cost model";
            ir.list.kernels.push_back(k);
        }
        for (const FrameworkProfile* fw : {framework, static_cast<const FrameworkProfile*>(nullptr)}) {
            o.framework = fw;
            const Prediction p = predict(ir, ctx, o);
            REQUIRE(std::isfinite(p.step_time.value()));
            REQUIRE(p.step_time.value() >= 0);
            REQUIRE(std::isfinite(p.gpu_time.value()));
            for (const auto& r : p.layers) {
                REQUIRE(std::isfinite(r.share));
                REQUIRE(std::isfinite(r.forward_gpu.value()));
            }
            for (const auto& op : time_by_operator(p)) REQUIRE(std::isfinite(op.share));
        }
    }
}
