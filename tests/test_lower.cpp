#include "catch.hpp"

#include <roofsim/detail/json_file.hpp>
#include <roofsim/lower/lower.hpp>
#include <roofsim/memory.hpp>
#include <roofsim/predict.hpp>
#include <roofsim/zoo/zoo.hpp>
#include <validate/validation.hpp>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <set>
#include <vector>

using namespace roofsim;

namespace {
std::vector<const Kernel*> of_kind(const LoweredStep& s, KernelKind kind, Phase phase) {
    std::vector<const Kernel*> out;
    for (const auto& k : s.kernels.kernels) {
        if (k.kind == kind && k.phase == phase) out.push_back(&k);
    }
    return out;
}

Graph mlp() {
    GraphBuilder b("mlp");
    auto x = b.input("x", {GraphBuilder::batch, 784});
    auto y = b.input("y", {GraphBuilder::batch}, DType::i64);
    auto h = b.layer("fc1", "linear", {x}, {{"in_features", std::int64_t(784)}, {"out_features", std::int64_t(256)}});
    h = b.layer("act", "relu", {h});
    h = b.layer("fc2", "linear", {h}, {{"in_features", std::int64_t(256)}, {"out_features", std::int64_t(10)}});
    b.layer("loss", "cross_entropy", {h, y});
    return std::move(b).build();
}

std::string lowering_error(const Graph& g) {
    try {
        (void)lower(g, LoweringOptions{});
    } catch (const GraphError& e) {
        return e.what();
    }
    return "no error";
}
}  // namespace

TEST_CASE("a linear layer trains as three GEMMs", "[lower]") {
    LoweringOptions o;
    o.batch = 64;
    const LoweredStep s = lower(mlp(), o);
    // fc2's input needs a gradient (it comes from fc1), so it has dX and dW; fc1's input is data.
    const auto fwd = of_kind(s, KernelKind::gemm, Phase::forward);
    const auto bwd = of_kind(s, KernelKind::gemm, Phase::backward);
    REQUIRE(fwd.size() == 2);
    REQUIRE(bwd.size() == 3);
    const auto& f = std::get<GemmDims>(fwd[1]->dims);  // fc2: (64 x 256) (256 x 10)
    CHECK(f.m == 64); CHECK(f.n == 10); CHECK(f.k == 256);
    // backward of fc2 first: dX (64 x 256 = 64 x 10 . 10 x 256), dW (10 x 256 = 10 x 64 . 64 x 256)
    const auto& dx = std::get<GemmDims>(bwd[0]->dims);
    const auto& dw = std::get<GemmDims>(bwd[1]->dims);
    CHECK(dx.m == 64); CHECK(dx.n == 256); CHECK(dx.k == 10);
    CHECK(dw.m == 10); CHECK(dw.n == 256); CHECK(dw.k == 64);
    // y = x W^T reads the weight transposed; dX = dY W both as stored; dW = dY^T X reads dY transposed
    CHECK(f.layout == GemmLayout::nt);
    CHECK(dx.layout == GemmLayout::nn);
    CHECK(dw.layout == GemmLayout::tn);
    CHECK(gemm_flops(f).value() + gemm_flops(dx).value() + gemm_flops(dw).value() == Catch::Approx(3 * 2.0 * 64 * 10 * 256));
    CHECK(s.parameter_count() == 784 * 256 + 256 + 256 * 10 + 10);
    // the bias gradients: dY summed over the 64 rows, carrying (columns, rows) for their efficiency
    const auto sums = of_kind(s, KernelKind::reduction, Phase::backward);
    REQUIRE(sums.size() == 2);
    CHECK(is_column_sum(*sums[0]));
    CHECK(std::get<NormDims>(sums[0]->dims).groups == 10);
    CHECK(std::get<NormDims>(sums[0]->dims).group_elements == 64);
    CHECK(std::get<NormDims>(sums[1]->dims).groups == 256);
}

TEST_CASE("an embedding's backward sorts its indices beyond 3072 of them, as PyTorch's CUDA kernel does", "[lower]") {
    const auto backward_of = [](std::int64_t tokens) {
        GraphBuilder b("emb");
        auto ids = b.input("ids", {GraphBuilder::batch, tokens}, DType::i64);
        b.layer("wte", "embedding", {ids}, {{"num_embeddings", std::int64_t(50257)}, {"embedding_dim", std::int64_t(768)}});
        LoweringOptions o;
        o.batch = 4;
        std::vector<Kernel> out;
        for (const auto& k : lower(std::move(b).build(), o).kernels.kernels) {
            if (k.op == "aten::embedding_dense_backward") out.push_back(k);
        }
        return out;
    };
    // 4 x 768 = 3072 indices: zero-fill dW, one atomic accumulation kernel
    const auto atomic = backward_of(768);
    REQUIRE(atomic.size() == 2);
    CHECK(atomic[0].bytes_written.value() == 50257.0 * 768 * 4);
    CHECK(atomic[1].kind == KernelKind::embedding);
    // 4 x 1024 = 4096: the fill, 10 memsets, an arange, the radix sort (histogram, scan, 8 passes of
    // int64 keys), unique-by-key (2), a scan (2), 3 segment kernels, the two row-sum kernels: 31 launches
    const auto sorted = backward_of(1024);
    CHECK(sorted.size() == 31);
    const auto passes = std::count_if(sorted.begin(), sorted.end(), [](const Kernel& k) {
        return k.kind == KernelKind::copy && k.bytes_read.value() == 4096.0 * 16;
    });
    CHECK(passes == 8);
    double rows_written = 0;
    for (const auto& k : sorted) {
        if (k.kind == KernelKind::embedding) rows_written += k.bytes_written.value();
    }
    CHECK(rows_written == 4096.0 * 768 * 4 * 2);  // float32 partial sums, then float32 rows of dW
}

TEST_CASE("casts and GPT-2's gelu_new follow autocast's dtypes", "[lower][precision]") {
    GraphBuilder b("g");
    auto x = b.input("x", {GraphBuilder::batch, 64}, DType::bf16);
    auto up = b.layer("up", "cast", {x}, {{"dtype", std::string("float32")}});
    b.layer("act", "gelu_tanh_composite", {x});
    b.layer("same", "cast", {up}, {{"dtype", std::string("float32")}});
    Graph g = std::move(b).build();
    g.inputs.front().requires_grad = true;
    LoweringOptions o;
    o.batch = 8;
    o.precision = PrecisionMode::amp_bf16;
    o.optimizer.kind = OptimizerKind::none;
    const LoweredStep s = lower(g, o);
    int casts_up = 0, casts_down = 0, fp32_elementwise = 0, bf16_elementwise = 0, mixed = 0;
    const double n = 8.0 * 64;
    for (const Kernel& k : s.kernels.kernels) {
        if (is_cast(k)) (k.dtype == DType::bf16 ? casts_up : casts_down) += 1;
        if (k.kind != KernelKind::elementwise || is_cast(k)) continue;
        if (k.mixed_dtypes) {
            ++mixed;
            CHECK(k.bytes_read.value() == n * (2 + 4));  // one bfloat16 and one float32 operand
            CHECK(k.bytes_written.value() == n * 4);
        } else {
            (k.dtype == DType::f32 ? fp32_elementwise : bf16_elementwise) += 1;
        }
    }
    // `up` and gelu_new's pow each cast x up forward; `up`'s gradient is cast back down, and so are
    // the three of gelu_new's that reach a bfloat16 tensor (0.5 x, x through the add, x through
    // the cast); a cast to the dtype a tensor has is nothing
    CHECK(casts_up == 2);
    CHECK(casts_down == 1 + 3);
    // gelu_new under autocast, as the H200 trace of GPT-2 runs it: 0.5 x in bfloat16, five float32
    // ops and two on mixed operands forward; backward one mixed product, seven float32 kernels and
    // three bfloat16 ones (the gradients into x summed, one of them halved)
    CHECK(mixed == 2 + 1);
    CHECK(fp32_elementwise == 5 + 7);
    CHECK(bf16_elementwise == 1 + 3 + 1);  // and x's gradients from `up` and gelu_new summed
}

TEST_CASE("an add of a bfloat16 and a float32 tensor reads each in its dtype", "[lower][precision]") {
    GraphBuilder b("residual");
    auto x = b.input("x", {GraphBuilder::batch, 256}, DType::bf16);
    auto r = b.input("r", {GraphBuilder::batch, 256}, DType::f32);
    auto x2 = b.input("x2", {GraphBuilder::batch, 256}, DType::bf16);
    auto r2 = b.input("r2", {GraphBuilder::batch, 256}, DType::f32);
    b.layer("add", "add", {x, r});
    b.layer("mul", "mul", {x2, r2});
    Graph g = std::move(b).build();
    for (auto& in : g.inputs) in.requires_grad = true;
    LoweringOptions o;
    o.batch = 4;
    o.precision = PrecisionMode::amp_bf16;
    o.optimizer.kind = OptimizerKind::none;
    const LoweredStep s = lower(g, o);
    const double n = 4.0 * 256;
    int mixed_forward = 0, mixed_backward = 0, plain_backward = 0, casts_down = 0;
    for (const Kernel& k : s.kernels.kernels) {
        if (is_cast(k)) {
            CHECK(k.phase == Phase::backward);
            CHECK((k.bytes_read.value() == n * 4 && k.bytes_written.value() == n * 2));
            ++casts_down;
            continue;
        }
        if (k.kind != KernelKind::elementwise) continue;
        CHECK(k.dtype == DType::f32);  // type promotion: the result is float32
        if (k.mixed_dtypes) {
            CHECK(k.bytes_read.value() == n * (2 + 4));
            CHECK(k.bytes_written.value() == n * 4);
            (k.phase == Phase::forward ? mixed_forward : mixed_backward) += 1;
        } else {
            CHECK(k.phase == Phase::backward);
            CHECK(k.bytes_read.value() == n * (4 + 4));
            ++plain_backward;
        }
    }
    CHECK(mixed_forward == 2);   // add and mul
    CHECK(mixed_backward == 1);  // mul's dR = dY * x (bfloat16 x); dX = dY * r is all float32
    CHECK(plain_backward == 1);
    CHECK(casts_down == 2);      // x's gradient from each, cast to bfloat16
}

TEST_CASE("precision modes follow PyTorch's rules", "[lower][precision]") {
    GraphBuilder b("conv-linear");
    auto x = b.input("x", {GraphBuilder::batch, 16, 8, 8});
    auto h = b.layer("conv", "conv2d", {x}, {{"in_channels", std::int64_t(16)}, {"out_channels", std::int64_t(16)}, {"kernel_size", std::int64_t(3)}, {"padding", std::int64_t(1)}});
    h = b.layer("flat", "flatten", {h});
    b.layer("fc", "linear", {h}, {{"in_features", std::int64_t(1024)}, {"out_features", std::int64_t(8)}});
    const Graph g = std::move(b).build();
    auto units = [&](PrecisionMode m) {
        LoweringOptions o;
        o.batch = 4;
        o.precision = m;
        const LoweredStep s = lower(g, o);
        return std::pair{of_kind(s, KernelKind::conv, Phase::forward).at(0)->unit, of_kind(s, KernelKind::gemm, Phase::forward).at(0)->unit};
    };
    CHECK(units(PrecisionMode::fp32) == std::pair{ComputeUnit::tf32_tensor, ComputeUnit::fp32});  // cuDNN TF32 on, matmul off
    CHECK(units(PrecisionMode::fp32_strict) == std::pair{ComputeUnit::fp32, ComputeUnit::fp32});
    CHECK(units(PrecisionMode::tf32) == std::pair{ComputeUnit::tf32_tensor, ComputeUnit::tf32_tensor});
    CHECK(units(PrecisionMode::amp_bf16) == std::pair{ComputeUnit::bf16_tensor, ComputeUnit::bf16_tensor});
    CHECK(units(PrecisionMode::amp_fp16) == std::pair{ComputeUnit::fp16_tensor, ComputeUnit::fp16_tensor});
    CHECK(units(PrecisionMode::bf16) == std::pair{ComputeUnit::bf16_tensor, ComputeUnit::bf16_tensor});

    SECTION("autocast casts inputs and weights, and casts weight gradients back") {
        LoweringOptions o;
        o.batch = 4;
        o.precision = PrecisionMode::amp_bf16;
        const LoweredStep s = lower(g, o);
        int forward_casts = 0, backward_casts = 0;
        for (const auto& k : s.kernels.kernels) {
            if (k.op != "aten::_to_copy") continue;
            (k.phase == Phase::forward ? forward_casts : backward_casts) += 1;
        }
        CHECK(forward_casts == 3);   // conv input, conv weight, fc weight
        CHECK(backward_casts == 2);  // the two weight gradients
        LoweringOptions plain = o;
        plain.precision = PrecisionMode::bf16;
        for (const auto& k : lower(g, plain).kernels.kernels) CHECK(k.op != "aten::_to_copy");
    }
}

TEST_CASE("autocast casts every float32 input of a matmul and of attention, and each one's gradient back", "[lower][precision]") {
    // torch.autocast casts each argument of a lower-precision op (matmul, bmm, scaled_dot_product_attention)
    // on its own; autograd casts each gradient back to the input's float32.
    const auto casts = [](Graph g, std::int64_t batch) {
        for (auto& in : g.inputs) in.requires_grad = true;  // leaves of a layer timed on its own
        LoweringOptions o;
        o.batch = batch;
        o.precision = PrecisionMode::amp_bf16;
        o.optimizer.kind = OptimizerKind::none;
        std::pair<int, int> counted{0, 0};
        for (const auto& k : lower(g, o).kernels.kernels) {
            if (k.op == "aten::_to_copy") (k.phase == Phase::forward ? counted.first : counted.second) += 1;
        }
        return counted;
    };
    GraphBuilder mm("matmul");
    auto a = mm.input("a", {GraphBuilder::batch, 4, 16, 8});
    auto bm = mm.input("b", {GraphBuilder::batch, 4, 8, 16});
    mm.layer("ab", "matmul", {a, bm});
    CHECK(casts(std::move(mm).build(), 2) == std::pair{2, 2});
    GraphBuilder at("attention");
    std::vector<std::string> qkv;
    for (const char* name : {"q", "k", "v"}) qkv.push_back(at.input(name, {GraphBuilder::batch, 2, 64, 16}));
    at.layer("attn", "sdpa", qkv, {{"backend", std::string("efficient")}});
    CHECK(casts(std::move(at).build(), 2) == std::pair{3, 3});
}

TEST_CASE("backward runs in reverse layer order, after the whole forward", "[lower]") {
    LoweringOptions o;
    o.batch = 8;
    o.optimizer.kind = OptimizerKind::adamw;
    const LoweredStep s = lower(mlp(), o);
    std::vector<std::string> backward_layers;
    Phase last = Phase::forward;
    for (const auto& k : s.kernels.kernels) {
        CHECK(static_cast<int>(k.phase) >= static_cast<int>(last));  // forward, then backward, then optimizer
        last = k.phase;
        if (k.phase == Phase::backward && (backward_layers.empty() || backward_layers.back() != k.layer)) backward_layers.push_back(k.layer.str());
    }
    CHECK(backward_layers == std::vector<std::string>{"loss", "fc2", "act", "fc1"});
    // AdamW foreach: eight torch._foreach_* ops over 4 parameter tensors, one launch each.
    CHECK(of_kind(s, KernelKind::optimizer, Phase::optimizer).size() == 8);
}

TEST_CASE("a tensor several layers save for backward is counted once", "[lower][memory]") {
    // fc1 -> activation -> fc2: GELU saves its input (fc1's output) and fc2 its own input (GELU's
    // output), two tensors; an in-place ReLU saves its output, which is fc1's output, and so does fc2.
    const auto graph = [](bool in_place_relu) {
        GraphBuilder b("saved");
        auto x = b.input("x", {GraphBuilder::batch, 16});
        auto y = b.input("y", {GraphBuilder::batch}, DType::i64);
        auto h = b.layer("fc1", "linear", {x}, {{"in_features", std::int64_t(16)}, {"out_features", std::int64_t(32)}});
        h = in_place_relu ? b.layer("act", "relu", {h}, {{"inplace", true}}) : b.layer("act", "gelu", {h});
        h = b.layer("fc2", "linear", {h}, {{"in_features", std::int64_t(32)}, {"out_features", std::int64_t(8)}});
        b.layer("loss", "cross_entropy", {h, y});
        return std::move(b).build();
    };
    LoweringOptions o;
    o.batch = 64;
    const LoweredStep relu = lower(graph(true), o), gelu = lower(graph(false), o);
    const auto saved_keys = [](const LoweredStep& s, std::string_view layer) {
        std::vector<std::string> keys;
        for (const auto& l : s.layers) {
            if (l.name == layer) {
                for (const auto& [key, bytes] : l.saved) keys.push_back(key);
            }
        }
        return keys;
    };
    CHECK(saved_keys(relu, "act") == std::vector<std::string>{"value:fc1"});
    CHECK(saved_keys(relu, "fc2") == std::vector<std::string>{"value:fc1"});
    CHECK(saved_keys(gelu, "act") == std::vector<std::string>{"value:fc1"});
    CHECK(saved_keys(gelu, "fc2") == std::vector<std::string>{"value:act"});
    const Bytes one_activation = tensor_bytes(64.0 * 32, DType::f32);  // fc1's output, float32
    CHECK(estimate_memory(gelu, o).activations - estimate_memory(relu, o).activations == one_activation);
}

TEST_CASE("a prediction counts the saved tensors the layer summaries list, each once", "[lower][memory]") {
    // predict() lowers without summaries and tells saved tensors apart by value and part; lower()'s
    // summaries name them by key: both count the same bytes.
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"));
    for (const Graph& g : {zoo::resnet50(), zoo::bert_base(), zoo::gpt2_small()}) {
        for (const PrecisionMode mode : {PrecisionMode::fp32, PrecisionMode::amp_bf16, PrecisionMode::bf16}) {
            PredictOptions o;
            o.lowering.batch = 4;
            o.lowering.precision = mode;
            INFO(g.name << " " << to_string(mode));
            const MemoryEstimate from_summaries = estimate_memory(lower(g, o.lowering), o.lowering);
            CHECK(predict(g, ctx, o).memory.activations == from_summaries.activations);
            CHECK(from_summaries.activations.value() > 0);
        }
    }
}

TEST_CASE("the zoo's parameter counts equal what PyTorch counted", "[lower][zoo]") {
    // parameter_count in the validation file was read from the real models by
    // tools/validate/measure_pytorch.py (sum of p.numel()).
    const nlohmann::json raw = detail::read_json_file(ROOFSIM_BUILTIN_RUN_MEASUREMENTS);
    int checked = 0;
    for (const auto& m : raw.at("model_cases")) {
        auto g = zoo::model(m.at("model").get<std::string>(), m.contains("seq_len") ? m.at("seq_len").get<std::int64_t>() : 0);
        if (!g) continue;  // measured, not in the zoo (ViT-B/16: predicted from its exported IR)
        LoweringOptions o;
        o.batch = 2;
        INFO(m.at("id").get<std::string>());
        CHECK(lower(*g, o).parameter_count() == m.at("parameter_count").get<double>());
        ++checked;
    }
    CHECK(checked >= 3);
}

TEST_CASE("the zoo's parameter tensors are PyTorch's, one per nn.Parameter", "[lower][zoo]") {
    // len(list(model.parameters())): torchvision.models.resnet50() 161 (counted with Debian's
    // python3-torchvision); BertForSequenceClassification(num_labels=2) 201 (embeddings 5, each of 12
    // layers 16: query, key, value, attention output, intermediate, output weight and bias, two layer
    // norms' weight and bias; pooler 2, classifier 2); GPT2LMHeadModel 148 (wte, wpe; each of 12 blocks
    // 12: ln_1, c_attn, c_proj, ln_2, c_fc, mlp c_proj weight and bias; ln_f 2; lm_head tied to wte).
    // optimizer.step() and zero_grad() cost the host per tensor, and a norm's weight and bias are two.
    LoweringOptions o;
    o.batch = 2;
    CHECK(lower(*zoo::model("resnet50"), o).parameter_tensors.size() == 161);
    CHECK(lower(*zoo::model("bert-base"), o).parameter_tensors.size() == 201);
    CHECK(lower(*zoo::model("gpt2-small"), o).parameter_tensors.size() == 148);
    // and the counts the exporter read from the real models (torch 2.11 on the H200 machine)
    const auto exported = std::filesystem::path(ROOFSIM_SOURCE_DIR) / "data" / "validation" / "exported" /
                          "h200-sxm-2026-12-03";
    for (const auto& [model, file] : {std::pair{"resnet50", "resnet50_b32x224_amp-bf16.json"},
                                      std::pair{"bert-base", "bert-base_b32xs128_amp-bf16.json"},
                                      std::pair{"gpt2-small", "gpt2-small_b4xs1024_amp-bf16.json"}}) {
        INFO(model);
        const nlohmann::json ir = detail::read_json_file(exported / file);
        CHECK(lower(*zoo::model(model), o).parameter_tensors.size() == ir.at("parameters").at("tensors").get<std::size_t>());
    }
}

TEST_CASE("ResNet-50 forward FLOPs match the published 4.1 GMACs per image", "[lower][zoo]") {
    LoweringOptions o;
    o.batch = 1;
    const LoweredStep s = lower(zoo::resnet50(), o);
    double flops = 0;
    for (const auto& k : s.kernels.kernels) {
        if (k.phase == Phase::forward && (k.kind == KernelKind::conv || k.kind == KernelKind::gemm)) flops += k.flops.value();
    }
    // He et al. 2016, Table 1: 3.8e9 multiply-adds for ResNet-50 v1; torchvision's v1.5 reports 4.09 GMACs.
    CHECK(flops / 2 == Catch::Approx(4.09e9).epsilon(0.02));
}

TEST_CASE("bad graphs are errors that name the layer and the field", "[lower][graph]") {
    GraphBuilder b("bad");
    auto x = b.input("x", {GraphBuilder::batch, 10});
    Graph g = b.graph();
    g.layers.push_back(Layer{"fc", "linear", {x}, {{"in_features", std::int64_t(12)}, {"out_features", std::int64_t(4)}}});
    CHECK(lowering_error(g) == "layer 'fc' (linear): in_features: 12 does not match the input's last dimension");
    g.layers[0].attrs.erase("in_features");
    CHECK(lowering_error(g) == "layer 'fc' (linear): in_features: missing");
    g.layers[0] = Layer{"fc", "linear", {"nowhere"}, {}};
    CHECK(lowering_error(g).find("'nowhere' is neither a graph input nor an earlier layer") != std::string::npos);
    g.layers[0] = Layer{"w", "warp_drive", {x}, {}};
    CHECK(lowering_error(g) == "layer 'w' (warp_drive): unknown op (docs/graph-format.md lists the ops)");
    g.layers[0] = Layer{"p", "maxpool2d", {x}, {{"kernel_size", std::int64_t(2)}}};
    CHECK(lowering_error(g) == "layer 'p' (maxpool2d): input: expected N x C x H x W");
    g.layers[0] = Layer{"c", "conv2d", {x}, {{"in_channels", std::string("many")}}};
    CHECK(lowering_error(g).find("layer 'c' (conv2d): input must be N x C x spatial") != std::string::npos);
    // a name used twice: by two layers, or by a layer and a graph input
    g.layers = {Layer{"a", "relu", {x}, {}}, Layer{"a", "relu", {"a"}, {}}};
    CHECK(lowering_error(g) == "layer 'a' (relu): name: used twice (layer names must be unique)");
    g.layers = {Layer{"a", "relu", {x}, {}}, Layer{"b", "relu", {"a"}, {}}, Layer{"a", "tanh", {"b"}, {}}};
    CHECK(lowering_error(g) == "layer 'a' (tanh): name: used twice (layer names must be unique)");
    g.layers = {Layer{x, "relu", {x}, {}}};
    CHECK(lowering_error(g) == "layer 'x' (relu): name: used twice (layer names must be unique)");
    g.layers = {Layer{"a", "relu", {x}, {}}, Layer{"b", "relu", {"a"}, {}}};
    CHECK(lowering_error(g) == "no error");
}

TEST_CASE("layer attributes out of PyTorch's ranges are refused, naming the layer and the field", "[lower][graph]") {
    using Attrs = std::map<std::string, AttrValue>;
    const auto i64 = [](std::int64_t v) { return AttrValue(v); };
    const auto lowered = [](const std::string& op, Attrs attrs, std::vector<std::int64_t> shape) {
        std::vector<Dim> dims;
        for (const auto d : shape) dims.push_back(Dim(d));
        return lowering_error(one_layer_graph(op, std::move(attrs), {GraphInput{"", dims, DType::f32, true}}));
    };
    const auto conv2d = [&](Attrs extra) {
        Attrs attrs{{"in_channels", AttrValue(std::int64_t(4))}, {"out_channels", AttrValue(std::int64_t(8))},
                    {"kernel_size", AttrValue(std::int64_t(3))}};
        for (auto& [k, v] : extra) attrs[k] = v;
        return lowered("conv2d", attrs, {2, 4, 16, 16});
    };
    SECTION("convolutions") {
        CHECK(conv2d({}) == "no error");
        CHECK(conv2d({{"stride", i64(2)}, {"padding", i64(1)}, {"dilation", i64(2)}, {"groups", i64(2)}}) == "no error");
        // stride 0 divided the output size (SIGFPE) before it was checked
        CHECK(conv2d({{"stride", i64(0)}}) == "layer 'conv2d' (conv2d): stride: expected positive integers, got 0");
        // a negative stride says so, not that the kernel is larger than the input
        CHECK(conv2d({{"stride", AttrValue(std::vector<std::int64_t>{2, -1})}}) ==
              "layer 'conv2d' (conv2d): stride: expected positive integers, got -1");
        CHECK(conv2d({{"kernel_size", i64(0)}}) == "layer 'conv2d' (conv2d): kernel_size: expected positive integers, got 0");
        CHECK(conv2d({{"dilation", i64(0)}}) == "layer 'conv2d' (conv2d): dilation: expected positive integers, got 0");
        CHECK(conv2d({{"padding", i64(-1)}}) == "layer 'conv2d' (conv2d): padding: expected non-negative integers, got -1");
        CHECK(conv2d({{"groups", i64(0)}}) == "layer 'conv2d' (conv2d): groups: expected a positive integer, got 0");
        CHECK(conv2d({{"groups", i64(3)}}) == "layer 'conv2d' (conv2d): groups: 3 does not divide in_channels 4 and out_channels 8");
        CHECK(conv2d({{"out_channels", i64(-8)}}) == "layer 'conv2d' (conv2d): out_channels: expected a positive integer, got -8");
        CHECK(conv2d({{"kernel_size", i64(17)}}) == "layer 'conv2d' (conv2d): kernel_size: larger than the padded input");
        const Attrs conv1d{{"in_channels", i64(4)}, {"out_channels", i64(8)}, {"kernel_size", i64(3)}, {"stride", i64(0)}};
        CHECK(lowered("conv1d", conv1d, {2, 4, 32}) == "layer 'conv1d' (conv1d): stride: expected positive integers, got 0");
    }
    SECTION("pooling") {
        const std::vector<std::int64_t> image{2, 4, 16, 16};
        CHECK(lowered("maxpool2d", {{"kernel_size", i64(3)}, {"stride", i64(2)}, {"padding", i64(1)}}, image) == "no error");
        CHECK(lowered("maxpool2d", {{"kernel_size", i64(0)}}, image) ==
              "layer 'maxpool2d' (maxpool2d): kernel_size: expected positive integers, got 0");
        CHECK(lowered("maxpool2d", {{"kernel_size", i64(2)}, {"stride", i64(-2)}}, image) ==
              "layer 'maxpool2d' (maxpool2d): stride: expected positive integers, got -2");
        CHECK(lowered("avgpool2d", {{"kernel_size", i64(2)}, {"stride", i64(0)}}, image) ==
              "layer 'avgpool2d' (avgpool2d): stride: expected positive integers, got 0");
        CHECK(lowered("avgpool2d", {{"kernel_size", i64(2)}, {"padding", i64(-1)}}, image) ==
              "layer 'avgpool2d' (avgpool2d): padding: expected non-negative integers, got -1");
        // PyTorch: "pad should be at most half of effective kernel size"
        CHECK(lowered("maxpool2d", {{"kernel_size", i64(3)}, {"padding", i64(2)}}, image) ==
              "layer 'maxpool2d' (maxpool2d): padding: expected at most half of kernel_size 3, got 2");
        CHECK(lowered("adaptive_avgpool2d", {{"output_size", i64(0)}}, image) ==
              "layer 'adaptive_avgpool2d' (adaptive_avgpool2d): output_size: expected positive integers, got 0");
    }
    SECTION("softmax dim within [-rank, rank)") {
        const std::vector<std::int64_t> matrix{8, 10};
        CHECK(lowered("softmax", {{"dim", i64(1)}}, matrix) == "no error");
        CHECK(lowered("log_softmax", {{"dim", i64(-2)}}, matrix) == "no error");
        CHECK(lowered("softmax", {{"dim", i64(2)}}, matrix) ==
              "layer 'softmax' (softmax): dim: expected -2 to 1 for a 2-dimensional input, got 2");
        CHECK(lowered("log_softmax", {{"dim", i64(-3)}}, matrix) ==
              "layer 'log_softmax' (log_softmax): dim: expected -2 to 1 for a 2-dimensional input, got -3");
    }
    SECTION("gelu's approximate: none or tanh") {
        CHECK(lowered("gelu", {{"approximate", AttrValue(std::string("tanh"))}}, {8, 10}) == "no error");
        CHECK(lowered("gelu", {{"approximate", AttrValue(std::string("none"))}}, {8, 10}) == "no error");
        CHECK(lowered("gelu", {{"approximate", AttrValue(std::string("fast"))}}, {8, 10}) ==
              "layer 'gelu' (gelu): approximate: expected \"none\" or \"tanh\", got \"fast\"");
    }
    SECTION("cast to the floating dtypes priced") {
        CHECK(lowered("cast", {{"dtype", AttrValue(std::string("bfloat16"))}}, {8, 10}) == "no error");
        CHECK(lowered("cast", {{"dtype", AttrValue(std::string("int8"))}}, {8, 10}) ==
              "layer 'cast' (cast): dtype: expected float32, bfloat16 or float16, got 'int8'");
        CHECK(lowered("cast", {{"dtype", AttrValue(std::string("float8"))}}, {8, 10}) ==
              "layer 'cast' (cast): dtype: expected float32, bfloat16 or float16, got 'float8'");
        CHECK(lowered("cast", {}, {8, 10}) == "layer 'cast' (cast): dtype: missing");
    }
}

TEST_CASE("sizes that overflow a 64-bit integer are refused, naming the layer and the field", "[lower][graph][overflow]") {
    using Attrs = std::map<std::string, AttrValue>;
    constexpr std::int64_t huge = std::numeric_limits<std::int64_t>::max();
    const auto i64 = [](std::int64_t v) { return AttrValue(v); };
    const auto lowered = [](const std::string& op, Attrs attrs, std::vector<std::vector<std::int64_t>> shapes) {
        std::vector<GraphInput> inputs;
        for (const auto& shape : shapes) {
            std::vector<Dim> dims;
            for (const auto d : shape) dims.push_back(Dim(d));
            inputs.push_back(GraphInput{"", dims, DType::f32, true});
        }
        return lowering_error(one_layer_graph(op, std::move(attrs), std::move(inputs)));
    };
    SECTION("a linear layer's weight") {
        // was "-4611686018427.39 M parameters"
        CHECK(lowered("linear", {{"in_features", i64(8)}, {"out_features", i64(huge / 4)}}, {{2, 8}}) ==
              "layer 'linear' (linear): in_features * out_features (weight elements): overflows a 64-bit integer");
    }
    SECTION("a convolution's output size and filter") {
        const Attrs conv{{"in_channels", i64(4)}, {"out_channels", i64(8)}, {"kernel_size", i64(3)}, {"padding", i64(huge / 2)}};
        CHECK(lowered("conv2d", conv, {{2, 4, 16, 16}}) ==
              "layer 'conv2d' (conv2d): input + 2 * padding - dilation * (kernel_size - 1) (output size): overflows a 64-bit integer");
        const Attrs wide{{"in_channels", i64(4)}, {"out_channels", i64(huge / 2)}, {"kernel_size", i64(1)}};
        CHECK(lowered("conv2d", wide, {{2, 4, 16, 16}}) ==
              "layer 'conv2d' (conv2d): out_channels * in_channels / groups * kernel_size (weight elements): overflows a 64-bit integer");
    }
    SECTION("a pooling's output size") {
        CHECK(lowered("maxpool2d", {{"kernel_size", i64(huge)}, {"padding", i64(huge / 2)}}, {{2, 4, 16, 16}}) ==
              "layer 'maxpool2d' (maxpool2d): input + 2 * padding - kernel_size (output size): overflows a 64-bit integer");
    }
    SECTION("an input whose bytes overflow") {
        CHECK(lowered("relu", {}, {{huge / 2, 4}}) == "input 'input0': shape: its bytes overflow a 64-bit integer");
    }
    SECTION("attention's batch * heads, and its keys") {
        // q, k and v of different shapes: the keys' sequence times q's batch and heads overflows
        const std::int64_t big = std::int64_t(1) << 40;
        CHECK(lowered("sdpa", {}, {{big, 2, 4, 8}, {1, 1, big, 8}, {1, 1, big, 8}}) ==
              "layer 'sdpa' (sdpa): batch * heads * seq_kv * head_dim (K's bytes): overflows a 64-bit integer");
        CHECK(lowered("mha", {{"embed_dim", i64(1)}, {"num_heads", i64(1)}}, {{1, std::int64_t(1) << 32, 1}}) ==
              "layer 'mha' (mha): batch * num_heads * L * L (attention weights): overflows a 64-bit integer");
    }
    SECTION("an embedding's table") {
        CHECK(lowered("embedding", {{"num_embeddings", i64(huge / 2)}, {"embedding_dim", i64(4)}}, {{2, 3}}) ==
              "layer 'embedding' (embedding): num_embeddings * embedding_dim (weight elements): overflows a 64-bit integer");
    }
    SECTION("slice start + length, reshape's element count") {
        CHECK(lowered("slice", {{"dim", i64(1)}, {"start", i64(huge)}, {"length", i64(2)}}, {{2, 8}}) ==
              "layer 'slice' (slice): start + length: overflows a 64-bit integer");
        CHECK(lowered("reshape", {{"shape", AttrValue(std::vector<std::int64_t>{huge, 4, -1})}}, {{2, 8}}) ==
              "layer 'reshape' (reshape): shape (its element count): overflows a 64-bit integer");
    }
    SECTION("a GEMM whose operands' bytes overflow") {
        CHECK(lowered("matmul", {}, {{1, std::int64_t(1) << 40}, {std::int64_t(1) << 40, 1}}) == "no error");
        CHECK(lowered("linear", {{"in_features", i64(1)}, {"out_features", i64(std::int64_t(1) << 31)}}, {{std::int64_t(1) << 31, 1}}) ==
              "layer 'linear' (linear): batch * m * n (C's bytes): overflows a 64-bit integer");
    }
}

TEST_CASE("unknown attributes are refused, naming the layer and the close matches", "[lower][graph]") {
    Graph g = mlp();
    g.layers[0].attrs["in_featuers"] = g.layers[0].attrs["in_features"];
    g.layers[0].attrs.erase("in_features");
    CHECK(lowering_error(g) == "layer 'fc1' (linear): in_featuers: unknown attribute; did you mean in_features? "
                               "(linear takes in_features, out_features, bias, tied)");
    g = mlp();
    g.layers[1].attrs["colour"] = std::string("red");
    CHECK(lowering_error(g) == "layer 'act' (relu): colour: unknown attribute (relu takes inplace)");
    g = mlp();
    g.layers[3].attrs["reduction"] = std::string("sum");
    CHECK(lowering_error(g) == "layer 'loss' (cross_entropy): reduction: unknown attribute (cross_entropy takes none)");
    // every op lowering knows has its list of attributes, and only those ops
    std::set<std::string> ops, listed;
    for (const auto& [op, known] : detail::known_ops()) ops.insert(op);
    for (const auto& [op, names] : detail::known_attributes()) listed.insert(op);
    CHECK(ops == listed);
    // the zoo's graphs use only attributes of their ops
    for (const auto name : zoo::model_names) CHECK_NOTHROW(lower(*zoo::model(name, 64), LoweringOptions{}));
}

TEST_CASE("a graph file's unknown fields are refused with the close matches", "[graph][json]") {
    nlohmann::json j = to_json(mlp());
    j["layers"][0]["atrs"] = j["layers"][0]["attrs"];
    CHECK_THROWS_WITH(graph_from_json(j, "m.json"),
                      "m.json: /layers/0/atrs: unknown field; did you mean attrs? (docs/graph-format.md lists the fields)");
    j = to_json(mlp());
    j["inputs"][0]["requires_gradient"] = true;
    CHECK_THROWS_WITH(graph_from_json(j, "m.json"),
                      "m.json: /inputs/0/requires_gradient: unknown field; did you mean requires_grad? (docs/graph-format.md lists the fields)");
    j = to_json(mlp());
    j["comment"] = "a note";
    CHECK_THROWS_WITH(graph_from_json(j, "m.json"), "m.json: /comment: unknown field (docs/graph-format.md lists the fields)");
}

TEST_CASE("graph JSON round-trips and rejects malformed files", "[graph][json]") {
    const Graph g = zoo::gpt2_small(64);
    const Graph again = graph_from_json(to_json(g), "round-trip");
    CHECK(to_json(again) == to_json(g));
    nlohmann::json j = to_json(mlp());
    j["layers"][0].erase("op");
    CHECK_THROWS_WITH(graph_from_json(j, "m.json"), "m.json: /layers/0/op: missing");
    j = to_json(mlp());
    j["inputs"][0]["shape"][0] = "tokens";
    CHECK_THROWS_WITH(graph_from_json(j, "m.json"), Catch::Matchers::Contains("/inputs/0/shape/0: a symbolic dimension must be \"batch\""));
}

TEST_CASE("the math attention path runs the kernels of PyTorch's _scaled_dot_product_attention_math", "[lower]") {
    // PyTorch (aten/src/ATen/native/transformers/attention.cpp): q and k^T each times sqrt(scale);
    // causal: ones(L, S).tril() made a 0 / -inf mask, added in place to q k^T; _safe_softmax =
    // softmax, eq(-inf), all over the row, where (with two one-element scalar tensors); then @ v.
    const GraphInput q{"", {2, 4, 128, 64}, DType::f32, true};
    Graph g = one_layer_graph("sdpa", {{"is_causal", AttrValue(true)}, {"backend", AttrValue(std::string("math"))}}, {q, q, q});
    LoweringOptions o;
    o.precision = PrecisionMode::fp32;
    o.optimizer.kind = OptimizerKind::none;
    const LoweredStep s = lower(g, o);
    std::vector<std::string> forward, backward;
    for (const auto& k : s.kernels.kernels) {
        if (k.kind == KernelKind::host_only) continue;
        (k.phase == Phase::forward ? forward : backward).push_back(k.op.str());
    }
    CHECK(forward == std::vector<std::string>{"aten::mul", "aten::mul", "aten::bmm", "aten::ones", "aten::tril", "aten::where",
                                              "aten::add_", "aten::_softmax", "aten::fill_", "aten::fill_", "aten::eq",
                                              "aten::all", "aten::where", "aten::bmm"});
    CHECK(backward == std::vector<std::string>{"aten::bmm", "aten::bmm", "aten::_softmax_backward_data", "aten::bmm",
                                               "aten::bmm", "aten::mul", "aten::mul"});
    // The scores: 2 x 4 x 128 x 128 of float32; _safe_softmax's eq writes a byte per score.
    const double scores = 2.0 * 4 * 128 * 128;
    for (const auto& k : s.kernels.kernels) {
        if (k.op == "aten::eq") CHECK(k.bytes_written.value() == Catch::Approx(scores));
        if (k.op == "aten::_softmax") CHECK(k.bytes_written.value() == Catch::Approx(4 * scores));
        // its elementwise and softmax kernels take their own ops' efficiencies, not the fused kernels'
        if (k.kind == KernelKind::softmax) CHECK(k.source_op == "softmax");
        if (k.op == "aten::mul") CHECK(k.source_op == "mul");
    }
    // Without the mask: no ones, tril or add_; the softmax guard stays (it runs unconditionally).
    g.layers[0].attrs["is_causal"] = AttrValue(false);
    const LoweredStep full = lower(g, o);
    CHECK(std::none_of(full.kernels.kernels.begin(), full.kernels.kernels.end(), [](const Kernel& k) { return k.op == "aten::tril"; }));
    CHECK(std::count_if(full.kernels.kernels.begin(), full.kernels.kernels.end(), [](const Kernel& k) { return k.op == "aten::eq"; }) == 1);
}

TEST_CASE("attention dropout reaches the fused kernels and is checked", "[lower]") {
    const GraphInput q{"", {2, 4, 128, 64}, DType::bf16, true};
    LoweringOptions o;
    o.precision = PrecisionMode::bf16;
    o.optimizer.kind = OptimizerKind::none;
    const auto attention_dropouts = [&](std::map<std::string, AttrValue> attrs) {
        std::vector<double> dropouts;
        for (const auto& k : lower(one_layer_graph("sdpa", std::move(attrs), {q, q, q}), o).kernels.kernels) {
            if (const auto* a = std::get_if<AttentionDims>(&k.dims)) dropouts.push_back(a->dropout);
        }
        return dropouts;
    };
    CHECK(attention_dropouts({{"backend", AttrValue(std::string("cudnn"))}}) == std::vector<double>{0.0, 0.0});
    CHECK(attention_dropouts({{"backend", AttrValue(std::string("cudnn"))}, {"dropout_p", AttrValue(0.1)}}) ==
          std::vector<double>{0.1, 0.1});  // forward and backward
    CHECK_THROWS_WITH(lower(one_layer_graph("sdpa", {{"dropout_p", AttrValue(1.0)}}, {q, q, q}), o),
                      Catch::Contains("dropout_p"));
}

TEST_CASE("flash attention of float32 inputs runs on the memory-efficient kernels, as PyTorch picks", "[lower]") {
    const GraphInput q{"", {2, 4, 128, 64}, DType::f32, true};
    LoweringOptions o;
    o.optimizer.kind = OptimizerKind::none;
    const auto backends = [&](PrecisionMode mode) {
        o.precision = mode;
        std::vector<AttentionBackend> out;
        for (const auto& k : lower(one_layer_graph("sdpa", {{"backend", AttrValue(std::string("flash"))}}, {q, q, q}), o).kernels.kernels) {
            if (const auto* a = std::get_if<AttentionDims>(&k.dims)) out.push_back(a->backend);
        }
        return out;
    };
    CHECK(backends(PrecisionMode::fp32) == std::vector<AttentionBackend>{AttentionBackend::efficient, AttentionBackend::efficient});
    CHECK(backends(PrecisionMode::amp_bf16) == std::vector<AttentionBackend>{AttentionBackend::flash, AttentionBackend::flash});
}

TEST_CASE("dropout with p = 0 returns its input: no kernel, the identity call's host figures", "[lower]") {
    const GraphInput x{"", {8, 128, 768}, DType::f32, true};
    LoweringOptions o;
    o.optimizer.kind = OptimizerKind::none;
    const auto launched = [](const LoweredStep& step) {
        std::vector<std::string> ops;
        for (const Kernel& k : step.kernels.kernels) {
            if (k.kind != KernelKind::host_only) ops.push_back(k.op.str());
        }
        return ops;
    };
    const LoweredStep identity = lower(one_layer_graph("dropout", {{"p", AttrValue(0.0)}}, {x}), o);
    CHECK(launched(identity).empty());
    std::vector<std::string> host_ops;
    for (const Kernel& k : identity.kernels.kernels) {
        if (k.kind == KernelKind::host_only) host_ops.push_back(k.host_op.str());
    }
    CHECK(host_ops == std::vector<std::string>{"dropout_identity", "dropout_identity"});
    CHECK(graph_op_of_host_op("dropout_identity") == "dropout");
    // p > 0: the mask kernel forward, its product backward
    CHECK(launched(lower(one_layer_graph("dropout", {{"p", AttrValue(0.1)}}, {x}), o)) ==
          std::vector<std::string>{"aten::native_dropout", "aten::native_dropout_backward"});
}

TEST_CASE("a layer norm's weight gradients carry its row shape", "[lower]") {
    // so that they take the efficiency timed at the layer's shape (op_factor_at), as its dX kernel does
    const GraphInput x{"", {64, 768}, DType::f32, true};
    LoweringOptions o;
    o.optimizer.kind = OptimizerKind::none;
    for (const char* op : {"layernorm", "rmsnorm"}) {
        INFO(op);
        const Graph g = one_layer_graph(op, {{"normalized_shape", AttrValue(std::vector<std::int64_t>{768})}}, {x});
        int backward = 0;
        for (const auto& k : lower(g, o).kernels.kernels) {
            if (k.phase != Phase::backward || k.kind == KernelKind::host_only) continue;
            ++backward;
            const auto* d = std::get_if<NormDims>(&k.dims);
            REQUIRE(d != nullptr);
            CHECK(d->groups == 64);
            CHECK(d->group_elements == 768);
        }
        CHECK(backward == 2);  // dX, then the weight (and bias) gradients
    }
}

TEST_CASE("a cat's leaf inputs get their gradients as contiguous copies where their slices are strided", "[lower]") {
    // AccumulateGrad stores a gradient that is strided unlike its tensor as a contiguous copy
    // (clone_obey_contract): a slice of dY along the last dim is; along the first it is not.
    const auto clones = [](std::int64_t dim, bool requires_grad) {
        std::vector<GraphInput> inputs(2, GraphInput{"", {Dim(8), Dim(1024), Dim(768)}, DType::f32, requires_grad});
        Graph g = one_layer_graph("cat", {{"dim", AttrValue(std::int64_t{dim})}}, inputs);
        LoweringOptions o;
        o.precision = PrecisionMode::fp32;
        o.optimizer.kind = OptimizerKind::none;
        int copies = 0, dispatches = 0;
        for (const Kernel& k : lower(g, o).kernels.kernels) {
            if (k.phase != Phase::backward) continue;
            if (k.op.str() == "aten::clone") {
                CHECK(k.bytes_read.value() == 8.0 * 1024 * 768 * 4);
                ++copies;
            }
            if (k.kind == KernelKind::host_only && k.host_op == accumulate_grad_clone_host_op) ++dispatches;
        }
        CHECK(dispatches == copies);
        return copies;
    };
    CHECK(clones(-1, true) == 2);
    CHECK(clones(1, true) == 2);
    CHECK(clones(0, true) == 0);   // contiguous slices: AccumulateGrad keeps them
    CHECK(clones(-1, false) == 0);  // no gradient wanted
}

TEST_CASE("the graph schema's ops are the ops lowering knows", "[lower][schema]") {
    const auto schema = detail::read_json_file(std::filesystem::path(ROOFSIM_SOURCE_DIR) / "docs" / "graph.schema.json");
    std::set<std::string> in_schema;
    for (const auto& op : schema.at("properties").at("layers").at("items").at("properties").at("op").at("enum")) {
        in_schema.insert(op.get<std::string>());
    }
    std::set<std::string> known;
    for (const auto& [name, op] : detail::known_ops()) known.insert(name);
    CHECK(in_schema == known);
}

TEST_CASE("scale: one pass each way and nothing saved", "[lower]") {
    const GraphInput x{"", {8, 16, 64, 64}, DType::f32, true};
    LoweringOptions o;
    o.optimizer.kind = OptimizerKind::none;
    const LoweredStep step = lower(one_layer_graph("scale", {{"factor", AttrValue(0.125)}}, {x}), o);
    const double bytes = 8.0 * 16 * 64 * 64 * 4;
    int forward = 0, backward = 0;
    for (const auto& k : step.kernels.kernels) {
        if (k.kind == KernelKind::host_only) continue;
        (k.phase == Phase::forward ? forward : backward) += 1;
        CHECK(k.bytes_read.value() == bytes);
        CHECK(k.bytes_written.value() == bytes);
    }
    CHECK(forward == 1);
    CHECK(backward == 1);
    CHECK(estimate_memory(step, o).activations.value() == 0);
    CHECK_THROWS_WITH(lower(one_layer_graph("scale", {{"factor", AttrValue(std::numeric_limits<double>::infinity())}}, {x}), o),
                      Catch::Contains("factor"));
}

TEST_CASE("fp16-master: a float16 model, float32 masters unscaled into, stepped and copied back", "[lower][memory]") {
    GraphBuilder b("fc");
    const std::string x = b.input("x", {GraphBuilder::batch, 1024});
    b.layer("fc", "linear", {x}, {{"in_features", std::int64_t{1024}}, {"out_features", std::int64_t{1024}}, {"bias", false}});
    const Graph g = std::move(b).build();
    LoweringOptions o;
    o.batch = 8;
    o.precision = PrecisionMode::fp16_master;
    o.optimizer = OptimizerOptions{OptimizerKind::adamw, true, true, true};  // fused AdamW
    const LoweredStep step = lower(g, o);
    const double p = 1024.0 * 1024;
    std::vector<const Kernel*> optimizer;
    for (const auto& k : step.kernels.kernels) {
        if (k.phase == Phase::optimizer && k.kind != KernelKind::host_only) optimizer.push_back(&k);
        if (k.kind == KernelKind::gemm) CHECK(k.unit == ComputeUnit::fp16_tensor);
    }
    REQUIRE(optimizer.size() == 3);  // one tensor: one launch each
    CHECK(optimizer[0]->bytes_read.value() == 2 * p);   // float16 gradients
    CHECK(optimizer[0]->bytes_written.value() == 4 * p);  // into the float32 masters' gradients
    CHECK(optimizer[1]->bytes_read.value() == 4 * 4 * p);  // master, gradient, exp_avg, exp_avg_sq in float32
    CHECK(optimizer[1]->bytes_written.value() == 3 * 4 * p);
    CHECK(optimizer[2]->bytes_read.value() == 4 * p);   // the masters
    CHECK(optimizer[2]->bytes_written.value() == 2 * p);  // into the float16 model
    const MemoryEstimate m = estimate_memory(step, o);
    CHECK(m.parameters.value() == 2 * p);
    CHECK(m.gradients.value() == 2 * p);
    CHECK(m.master_weights.value() == 8 * p);   // float32 masters and their gradients
    CHECK(m.optimizer_state.value() == 8 * p);  // float32 exp_avg and exp_avg_sq
    o.precision = PrecisionMode::bf16;  // no masters: the state in the parameters' dtype
    const MemoryEstimate pure = estimate_memory(lower(g, o), o);
    CHECK(pure.master_weights.value() == 0);
    CHECK(pure.optimizer_state.value() == 4 * p);
}

TEST_CASE("an inference forward runs no loss, backward or optimizer, saves nothing, and batchnorm and dropout as in eval",
          "[lower][inference]") {
    GraphBuilder b("cnn");
    auto x = b.input("x", {GraphBuilder::batch, 4, 8, 8});
    auto y = b.input("y", {GraphBuilder::batch}, DType::i64);
    auto h = b.layer("conv", "conv2d", {x}, {{"in_channels", std::int64_t(4)}, {"out_channels", std::int64_t(8)},
                                             {"kernel_size", std::int64_t(3)}, {"padding", std::int64_t(1)}});
    h = b.layer("bn", "batchnorm2d", {h}, {{"num_features", std::int64_t(8)}});
    h = b.layer("drop", "dropout", {h}, {{"p", 0.5}});
    h = b.layer("flat", "flatten", {h});
    h = b.layer("fc", "linear", {h}, {{"in_features", std::int64_t(8 * 8 * 8)}, {"out_features", std::int64_t(10)}});
    b.layer("loss", "cross_entropy", {h, y});
    b.layer("after_loss", "scale", {"loss"}, {{"factor", 0.5}});  // reads the loss: not run either
    const Graph g = std::move(b).build();
    LoweringOptions o;
    o.batch = 2;
    o.mode = StepMode::inference;
    o.optimizer.kind = OptimizerKind::adamw;  // not read in inference
    const LoweredStep s = lower(g, o);
    CHECK(s.kernels.mode == StepMode::inference);
    for (const Kernel& k : s.kernels.kernels) {
        CHECK(k.phase == Phase::forward);
        CHECK(k.op != "aten::native_dropout");
        CHECK(k.layer != "loss");
        CHECK(k.layer != "after_loss");
    }
    const auto norms = of_kind(s, KernelKind::normalization, Phase::forward);
    REQUIRE(norms.size() == 1);
    // eval: one pass over the 2 x 8 x 8 x 8 float32 activations (training's statistics pass is gone)
    CHECK(norms[0]->bytes_read.value() == 2 * 8 * 8 * 8 * 4);
    CHECK(norms[0]->bytes_written.value() == 2 * 8 * 8 * 8 * 4);
    for (const auto& l : s.layers) CHECK(l.saved.empty());
    // parameters are the model's all the same: conv 8x4x3x3 + 8, bn 2x8, fc 512x10 + 10
    CHECK(s.parameter_count() == 8 * 4 * 9 + 8 + 16 + 512 * 10 + 10);
    o.mode = StepMode::training;
    const LoweredStep t = lower(g, o);
    CHECK(t.kernels.mode == StepMode::training);
    CHECK_FALSE(of_kind(t, KernelKind::normalization, Phase::backward).empty());
    CHECK(t.live_peak.value() == 0);
}

TEST_CASE("an inference forward's activations: the layer outputs alive at once, a view sharing its input's tensor",
          "[lower][inference][memory]") {
    // x [1, 8] -> l1 linear 16 -> l2 relu -> l3 linear 16 -> l4 add(l1, l3) -> l5 reshape (a view).
    // float32 outputs of 16 elements: 64 bytes each. Alive: at l1 {l1}; at l2 {l1, l2}; at l3
    // {l1, l2, l3} (l2's last reader); at l4 {l1, l3, l4}; at l5 {l4 through its view}: 192 bytes at most.
    GraphBuilder b("residual");
    auto x = b.input("x", {GraphBuilder::batch, 8});
    auto l1 = b.layer("l1", "linear", {x}, {{"in_features", std::int64_t(8)}, {"out_features", std::int64_t(16)}});
    auto l2 = b.layer("l2", "relu", {l1});
    auto l3 = b.layer("l3", "linear", {l2}, {{"in_features", std::int64_t(16)}, {"out_features", std::int64_t(16)}});
    auto l4 = b.layer("l4", "add", {l1, l3});
    b.layer("l5", "reshape", {l4}, {{"shape", std::vector<std::int64_t>{-1}}});
    const Graph g = std::move(b).build();
    LoweringOptions o;
    o.mode = StepMode::inference;
    const LoweredStep s = lower(g, o);
    CHECK(s.live_peak.value() == 192);
    const MemoryEstimate m = estimate_memory(s, o);
    const double parameters = (8 * 16 + 16 + 16 * 16 + 16) * 4.0;
    CHECK(m.parameters.value() == parameters);
    CHECK(m.gradients.value() == 0);
    CHECK(m.optimizer_state.value() == 0);
    CHECK(m.activations.value() == 192);
    CHECK(m.peak.value() == parameters + 8 * 4 + 192);  // parameters, the input, the outputs alive
    // under autocast the weights' bfloat16 copies stay in autocast's cache through the forward
    o.precision = PrecisionMode::amp_bf16;
    const MemoryEstimate amp = estimate_memory(lower(g, o), o);
    CHECK(amp.autocast_copies.value() == parameters / 2);
}
