#include "catch.hpp"

#include <roofsim/profile/builtin.hpp>
#include <roofsim/predict.hpp>
#include <roofsim/report/operators.hpp>
#include <roofsim/zoo/zoo.hpp>

#include <filesystem>
#include <fstream>
#include <limits>

using namespace roofsim;

namespace {
const std::string data_dir = std::string(ROOFSIM_SOURCE_DIR) + "/tests/data/";

LoweringOptions lowering(std::int64_t batch, PrecisionMode mode, OptimizerKind optimizer) {
    LoweringOptions o;
    o.batch = batch;
    o.precision = mode;
    o.optimizer.kind = optimizer;
    return o;
}

std::string error_of(const nlohmann::json& doc) {
    try {
        (void)kernel_ir_from_json(doc, "ir.json");
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return "";
}

nlohmann::json small_ir() { return detail::read_json_file(data_dir + "ir-small.json"); }
}  // namespace

TEST_CASE("a lowered step survives the IR's JSON form kernel for kernel", "[ir][json]") {
    const std::string model = GENERATE("resnet50", "bert-base", "gpt2-small");
    const PrecisionMode mode = GENERATE(PrecisionMode::fp32, PrecisionMode::amp_bf16);
    INFO(model << " " << to_string(mode));
    const auto options = lowering(4, mode, OptimizerKind::adamw);
    const LoweredStep step = lower(*zoo::model(model, model == "resnet50" ? 224 : 128), options);
    const KernelIr ir = to_kernel_ir(step, options);
    const nlohmann::json text = to_json(ir);
    const KernelIr back = kernel_ir_from_json(nlohmann::json::parse(text.dump()), "roundtrip");
    REQUIRE(back.list.kernels.size() == step.kernels.kernels.size());
    for (std::size_t i = 0; i < back.list.kernels.size(); ++i) {
        INFO("kernel " << i << " " << step.kernels.kernels[i].op);
        CHECK(to_json(back.list.kernels[i]) == to_json(step.kernels.kernels[i]));
        CHECK(back.list.kernels[i].backward_pass == step.kernels.kernels[i].backward_pass);
    }
    CHECK(back.batch == 4);
    CHECK(back.list.mode == StepMode::training);
    CHECK(back.optimizer.kind == OptimizerKind::adamw);
    CHECK(back.optimizer.weight_decay == options.optimizer.weight_decay);
    // Without weight decay, said in the file; and an IR that does not say is read as with it.
    KernelIr plain = ir;
    plain.optimizer.weight_decay = false;
    CHECK_FALSE(kernel_ir_from_json(nlohmann::json::parse(to_json(plain).dump()), "plain").optimizer.weight_decay);
    nlohmann::json unsaid = to_json(plain);
    unsaid["optimizer"].erase("weight_decay");
    CHECK(kernel_ir_from_json(unsaid, "unsaid").optimizer.weight_decay);
    CHECK(back.list.precision == mode);
    CHECK(back.parameter_tensors == static_cast<std::int64_t>(step.parameter_tensors.size()));
    REQUIRE(back.memory);
    CHECK(back.memory->peak.value() > back.memory->parameters.value());
}

TEST_CASE("predicting from the IR of a graph gives the graph's prediction", "[ir][predict]") {
    const GpuSpec& spec = gpu_or_throw("h200-sxm");
    const FrameworkProfile* framework = find_builtin_framework_profile("h200-sxm");
    REQUIRE(framework != nullptr);
    const CostContext ctx = make_cost_context(spec, find_builtin_calibration("h200-sxm"), framework);
    const std::string model = GENERATE("resnet50", "bert-base");
    const PrecisionMode mode = GENERATE(PrecisionMode::fp32, PrecisionMode::amp_bf16);
    INFO(model << " " << to_string(mode));
    PredictOptions o;
    o.lowering = lowering(16, mode, OptimizerKind::sgd);
    o.framework = framework;
    const Graph g = *zoo::model(model, model == "resnet50" ? 224 : 128);
    const Prediction from_graph = predict(g, ctx, o);
    const KernelIr ir = kernel_ir_from_json(to_json(to_kernel_ir(lower(g, o.lowering), o.lowering)), "ir");
    const Prediction from_ir = predict(ir, ctx, framework_options(framework));
    CHECK(from_ir.step_time.value() == Catch::Approx(from_graph.step_time.value()).epsilon(1e-12));
    CHECK(from_ir.host_time.value() == Catch::Approx(from_graph.host_time.value()).epsilon(1e-12));
    CHECK(from_ir.gpu_time.value() == Catch::Approx(from_graph.gpu_time.value()).epsilon(1e-12));
    CHECK(from_ir.memory.peak.value() == Catch::Approx(from_graph.memory.peak.value()));
    REQUIRE(from_ir.layers.size() == from_graph.layers.size());
    for (std::size_t i = 0; i < from_ir.layers.size(); ++i) {
        CHECK(from_ir.layers[i].layer == from_graph.layers[i].layer);
        CHECK(from_ir.layers[i].op == from_graph.layers[i].op);
    }
    const auto ops = time_by_operator(from_ir);
    double sum = 0;
    for (const auto& op : ops) sum += op.gpu_time.value();
    CHECK(sum == Catch::Approx(from_ir.gpu_time.value()));
}

TEST_CASE("an unknown op is costed on the roofline, counted and flagged, never zero", "[ir][predict]") {
    const KernelIr ir = load_kernel_ir(data_dir + "ir-small.json");
    CHECK(ir.list.model == "two-layer-mlp");
    CHECK(ir.batch == 64);
    const CostContext ctx = make_cost_context(gpu_or_throw("a100-80gb-sxm"));
    const Prediction p = predict(ir, ctx, PredictOptions{});
    CHECK(p.flagged_kernels == 1);
    // 128 KiB at the A100 80GB's 2039 GB/s datasheet bandwidth.
    CHECK(p.flagged_gpu_time.value() == Catch::Approx(131072.0 / 2039e9));
    const auto flagged = flagged_kernels(p.kernels);
    REQUIRE(flagged.size() == 1);
    CHECK(flagged.front()->op == "aten::erfinv");
    CHECK(flagged.front()->layer == "act");
    CHECK(p.memory.peak.value() == 3000000);
    CHECK(p.parameters == 203530);
}

TEST_CASE("a bad IR is refused as a whole, naming the field", "[ir][json][errors]") {
    SECTION("unknown field") {
        CHECK(error_of(detail::read_json_file(data_dir + "ir-unknown-field.json")) ==
              "ir.json: /kernels/1/gemm/colour: unknown field (docs/ir-format.md lists the fields)");
    }
    SECTION("stride of zero") {
        CHECK(error_of(detail::read_json_file(data_dir + "ir-bad-stride.json")) ==
              "ir.json: /kernels/1/conv/stride: expected [h, w] of integers >= 1, got [0,1]");
    }
    SECTION("a convolution's fields out of PyTorch's ranges") {
        // each refused where it is read, before the output size divides by the stride
        nlohmann::json bad = detail::read_json_file(data_dir + "ir-bad-stride.json");
        nlohmann::json& conv = bad["kernels"][1]["conv"];
        conv["stride"] = {2, -1};
        CHECK(error_of(bad) == "ir.json: /kernels/1/conv/stride: expected [h, w] of integers >= 1, got [2,-1]");
        conv["stride"] = {1, 1};
        conv["padding"] = {-1, 0};
        CHECK(error_of(bad) == "ir.json: /kernels/1/conv/padding: expected [h, w] of integers >= 0, got [-1,0]");
        conv["padding"] = {1, 1};
        conv["dilation"] = {0, 0};
        CHECK(error_of(bad) == "ir.json: /kernels/1/conv/dilation: expected [h, w] of integers >= 1, got [0,0]");
        conv["dilation"] = {1, 1};
        conv["groups"] = 0;
        CHECK(error_of(bad) == "ir.json: /kernels/1/conv/groups: must be a positive integer, got 0");
        conv["groups"] = 2;
        CHECK(error_of(bad) == "ir.json: /kernels/1/conv/groups: must divide c and k");
        conv["groups"] = 1;
        conv["r"] = 0;
        CHECK(error_of(bad) == "ir.json: /kernels/1/conv/r: must be a positive integer, got 0");
        conv["r"] = 3;
        CHECK(error_of(bad).empty());  // the faults above were the only ones
    }
    nlohmann::json doc = small_ir();
    SECTION("version") {
        doc["schema_version"] = 2;
        CHECK(error_of(doc) == "ir.json: /schema_version: unsupported version (expected 1)");
    }
    SECTION("a layer graph is not an IR") {
        doc["kind"] = "roofsim-layer-graph";
        CHECK(error_of(doc) == "ir.json: /kind: expected \"roofsim-kernel-ir\"");
    }
    SECTION("no kernels") {
        doc["kernels"] = nlohmann::json::array();
        CHECK(error_of(doc) == "ir.json: /kernels: no kernels");
    }
    SECTION("mode") {
        doc["mode"] = "eval";
        CHECK(error_of(doc) == "ir.json: /mode: expected training or inference");
        doc["mode"] = "inference";
        doc["optimizer"] = {{"kind", "none"}};
        doc["kernels"][1]["phase"] = "backward";
        CHECK(error_of(doc) == "ir.json: /kernels/1/phase: an inference IR (mode \"inference\") holds forward kernels only");
        for (auto& k : doc["kernels"]) k["phase"] = "forward";
        doc["optimizer"] = {{"kind", "sgd"}};
        CHECK(error_of(doc) == "ir.json: /optimizer/kind: an inference IR (mode \"inference\") has no optimizer: expected none");
        doc["optimizer"] = {{"kind", "none"}};
        CHECK(error_of(doc).empty());
        CHECK(kernel_ir_from_json(doc, "ir.json").list.mode == StepMode::inference);
        doc.erase("mode");  // an IR that does not say is of training
        CHECK(kernel_ir_from_json(doc, "ir.json").list.mode == StepMode::training);
    }
    SECTION("kind") {
        doc["kernels"][1]["kind"] = "gem";
        CHECK(error_of(doc) == "ir.json: /kernels/1/kind: unknown kernel kind (docs/ir-format.md lists them)");
    }
    SECTION("shape object of another kind") {
        doc["kernels"][1]["kind"] = "elementwise";
        CHECK(error_of(doc) == "ir.json: /kernels/1/kind: does not match its shape object (gemm, conv, attention or norm)");
    }
    SECTION("a GEMM's layout") {
        doc["kernels"][1]["gemm"]["layout"] = "TN";
        CHECK(std::get<GemmDims>(kernel_ir_from_json(doc, "ir.json").list.kernels[1].dims).layout == GemmLayout::tn);
        doc["kernels"][1]["gemm"]["layout"] = "NX";
        CHECK(error_of(doc) == "ir.json: /kernels/1/gemm/layout: expected NN, NT, TN or TT");
    }
    SECTION("an attention's dropout is a probability") {
        doc["kernels"][1].erase("gemm");
        doc["kernels"][1]["kind"] = "attention";
        doc["kernels"][1]["attention"] = {{"batch", 2}, {"heads", 4}, {"seq_q", 128}, {"seq_kv", 128}, {"head_dim", 64},
                                          {"backend", "cudnn"}, {"dropout_p", 0.1}};
        doc["kernels"][1].erase("flops");  // the GEMM's
        CHECK_NOTHROW(kernel_ir_from_json(doc, "ir.json"));
        doc["kernels"][1]["attention"]["dropout_p"] = 1.0;
        CHECK(error_of(doc) == "ir.json: /kernels/1/attention/dropout_p: expected a probability below 1");
        doc["kernels"][1]["attention"]["dropout_p"] = -0.1;
        CHECK_THAT(error_of(doc), Catch::Contains("/kernels/1/attention/dropout_p"));
    }
    SECTION("a norm shape on a GEMM") {
        doc["kernels"][1]["norm"] = {{"groups", 64}, {"group_elements", 4096}};
        CHECK(error_of(doc) == "ir.json: /kernels/1: more than one of gemm, conv, attention, norm");
        doc["kernels"][1].erase("gemm");
        CHECK(error_of(doc) == "ir.json: /kernels/1/kind: does not match its shape object (gemm, conv, attention or norm)");
    }
    SECTION("a norm shape without its group length") {
        doc["kernels"][2]["kind"] = "normalization";
        doc["kernels"][2].erase("flag");
        doc["kernels"][2]["norm"] = {{"groups", 64}};
        CHECK(error_of(doc) == "ir.json: /kernels/2/norm/group_elements: missing");
    }
    SECTION("strided operands on an elementwise kernel only") {
        doc["kernels"][1]["strided"] = true;
        CHECK(error_of(doc) == "ir.json: /kernels/1/strided: only an elementwise kernel has strided operands");
        doc["kernels"][1]["strided"] = 1;
        CHECK_THAT(error_of(doc), Catch::Contains("/kernels/1/strided"));
    }
    SECTION("unknown op without a reason") {
        doc["kernels"][2].erase("flag");
        CHECK(error_of(doc) == "ir.json: /kernels/2: an unknown kernel needs a flag saying why");
    }
    SECTION("negative bytes") {
        doc["kernels"][1]["bytes_read"] = -1;
        CHECK(error_of(doc) == "ir.json: /kernels/1/bytes_read: must not be negative, got -1.0");
    }
    SECTION("GEMM dimension of zero") {
        doc["kernels"][1]["gemm"]["k"] = 0;
        CHECK(error_of(doc) == "ir.json: /kernels/1/gemm/k: must be a positive integer, got 0");
    }
    SECTION("host-only with GPU work") {
        doc["kernels"][0]["bytes_read"] = 4;
        CHECK(error_of(doc) == "ir.json: /kernels/0: a host-only kernel does no GPU work: flops and bytes must be 0");
    }
    SECTION("precision mode") {
        doc["precision"] = "fp12";
        CHECK(error_of(doc).find("ir.json: /precision: unknown precision mode") == 0);
    }
    SECTION("optimizer") {
        doc["optimizer"]["kind"] = "lamb";
        CHECK(error_of(doc) == "ir.json: /optimizer/kind: expected none, sgd, adam or adamw");
    }
    SECTION("optimizer weight decay not a boolean") {
        doc["optimizer"]["weight_decay"] = 1e-4;
        CHECK(error_of(doc).find("ir.json: /optimizer/weight_decay: expected") == 0);
    }
    SECTION("a shape whose sizes overflow a 64-bit integer") {
        constexpr std::int64_t huge = std::numeric_limits<std::int64_t>::max();
        doc["kernels"][1].erase("flops");
        doc["kernels"][1]["gemm"]["m"] = huge;  // was a 6.9e10 ms step
        CHECK(error_of(doc) == "ir.json: /kernels/1/gemm: batch * m * k (A's bytes) overflows a 64-bit integer");
        doc["kernels"][1]["gemm"]["m"] = 64;
        doc["kernels"][1]["gemm"]["batch"] = std::int64_t(1) << 50;
        CHECK(error_of(doc) == "ir.json: /kernels/1/gemm: batch * m * k (A's bytes) overflows a 64-bit integer");
        doc["kernels"][1].erase("gemm");
        doc["kernels"][1]["kind"] = "attention";
        doc["kernels"][1]["attention"] = {{"batch", std::int64_t(1) << 32}, {"heads", std::int64_t(1) << 32}, {"seq_q", 128},
                                          {"seq_kv", 128}, {"head_dim", 64}};
        CHECK(error_of(doc) == "ir.json: /kernels/1/attention: batch * heads overflows a 64-bit integer");
        doc["kernels"][1]["attention"]["heads"] = 1;
        doc["kernels"][1]["attention"]["batch"] = 1;
        doc["kernels"][1]["attention"]["seq_q"] = huge - 8;
        doc["kernels"][1]["attention"]["head_dim"] = 1;
        CHECK(error_of(doc) == "ir.json: /kernels/1/attention: batch * heads * seq_q * head_dim (Q's bytes) overflows a 64-bit integer");
        doc["kernels"][1].erase("attention");
        doc["kernels"][1]["kind"] = "conv";
        doc["kernels"][1]["conv"] = {{"pass", "forward"}, {"n", 1}, {"c", 3}, {"h", 8}, {"w", 8}, {"k", 4}, {"r", 3}, {"s", 3},
                                     {"padding", {huge / 2, 0}}};
        CHECK(error_of(doc) == "ir.json: /kernels/1/conv: h + 2 * padding - dilation * (r - 1) (output height) overflows a 64-bit integer");
        doc["kernels"][1]["conv"]["padding"] = {0, 0};
        doc["kernels"][1]["conv"]["k"] = huge / 4;
        CHECK(error_of(doc) == "ir.json: /kernels/1/conv: n * k * p * q (output bytes) overflows a 64-bit integer");
    }
    SECTION("flops that disagree with the shape") {
        doc["kernels"][1]["flops"] = 25690112 * 2;  // 2 m n k is 25690112
        CHECK(error_of(doc) == "ir.json: /kernels/1/flops: 51380224.0 disagrees with the gemm shape's 25690112.0 (docs/ir-format.md gives the count)");
        doc["kernels"][1]["flops"] = 25690112.000001;  // rounding
        CHECK(error_of(doc).empty());
        doc["kernels"][1].erase("gemm");
        doc["kernels"][1]["kind"] = "attention";
        doc["kernels"][1]["attention"] = {{"batch", 2}, {"heads", 4}, {"seq_q", 128}, {"seq_kv", 128}, {"head_dim", 64}, {"backward", true}};
        doc["kernels"][1]["flops"] = 4.0 * 2 * 4 * 128 * 128 * 64;  // the forward count on a backward kernel
        CHECK(error_of(doc).find("ir.json: /kernels/1/flops: 33554432.0 disagrees with the attention shape's 83886080.0") == 0);
    }
    SECTION("missing layer") {
        doc["kernels"][3].erase("layer");
        CHECK(error_of(doc) == "ir.json: /kernels/3/layer: missing");
    }
}

TEST_CASE("the IR is written atomically and read back", "[ir][json]") {
    const auto dir = std::filesystem::temp_directory_path() / "roofsim-test-ir";
    std::filesystem::create_directories(dir);
    const auto path = dir / "mlp-ir.json";
    const KernelIr ir = load_kernel_ir(data_dir + "ir-small.json");
    detail::write_json_atomically(to_json(ir), path);
    const KernelIr back = load_kernel_ir(path);
    CHECK(to_json(back) == to_json(ir));
    // Writing into a directory that does not exist fails and leaves nothing behind.
    CHECK_THROWS(detail::write_json_atomically(to_json(ir), dir / "missing" / "x.json"));
    CHECK_FALSE(std::filesystem::exists(dir / "missing"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("a normalization's reduction shape survives the JSON form", "[ir][json]") {
    nlohmann::json doc = small_ir();
    doc["kernels"][2] = {{"op", "aten::native_batch_norm"}, {"kind", "normalization"}, {"phase", "forward"},
                         {"layer", "bn"}, {"dtype", "bfloat16"}, {"bytes_read", 2e6}, {"bytes_written", 1e6},
                         {"norm", {{"groups", 64}, {"group_elements", 8192}}}};
    const KernelIr ir = kernel_ir_from_json(doc, "ir.json");
    const auto* norm = std::get_if<NormDims>(&ir.list.kernels[2].dims);
    REQUIRE(norm != nullptr);
    CHECK(norm->groups == 64);
    CHECK(norm->group_elements == 8192);
    CHECK(to_json(ir.list.kernels[2])["norm"] == doc["kernels"][2]["norm"]);
}
