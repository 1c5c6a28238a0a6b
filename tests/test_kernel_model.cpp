// The GEMM kernel model (tile, split of K, waves, alignment class), the kernel-model profiles and their
// fit, and accuracy on the kernel corpus's test half (tools/validate/kernel_corpus.py), whose shapes no
// fit has read.
#include "catch.hpp"

#include <roofsim/profile/builtin.hpp>
#include <roofsim/zoo/zoo.hpp>
#include <validate/kernel_fit.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

using namespace roofsim;

namespace {
const std::filesystem::path corpus_dir =
    std::filesystem::path(ROOFSIM_SOURCE_DIR) / "data" / "validation" / "kernels" / "h200-sxm-2026-12-04";

const KernelCorpus& corpus() {
    static const KernelCorpus c = load_kernel_corpus(corpus_dir);
    return c;
}

GemmModel h200_model(ComputeUnit unit) {
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"), find_builtin_calibration("h200-sxm"));
    return ctx.gemm.at(unit);
}

std::filesystem::path temp_dir(const char* name) {
    const auto dir = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
}

void write(const std::filesystem::path& path, const std::string& text) {
    std::ofstream(path) << text;
}

const char* meta_json = R"({"kind": "roofsim-kernel-corpus", "schema_version": 1, "gpu_key": "h200-sxm",
  "gpu_name": "NVIDIA H200", "date_utc": "2026-12-04T00:00:00Z", "torch": "2.11.0", "tool": "test"})";
}  // namespace

TEST_CASE("the GEMM kernel model splits K when a GEMM's tiles cannot fill the SMs", "[kernel-model]") {
    const GemmModel g = h200_model(ComputeUnit::fp32);
    // [128 x 32768] @ [32768 x 256] (the issue's case): two 128 x 128 tiles for 132 SMs
    const GemmChoice deep = gemm_choice(g, GemmDims{128, 256, 32768, 1, GemmLayout::nn}, 4);
    CHECK(deep.split > 1);
    // a GEMM of many tiles runs unsplit, in waves
    const GemmChoice wide = gemm_choice(g, GemmDims{8192, 8192, 1024, 1, GemmLayout::nn}, 4);
    CHECK(wide.split == 1);
    CHECK(wide.waves >= 2);
    // splitting K lets the deep GEMM reach a rate near the wide one's
    CHECK(deep.efficiency > 0.5 * wide.efficiency);
}

TEST_CASE("a GEMM the model cannot place is an error naming the field", "[kernel-model]") {
    const GemmModel g = h200_model(ComputeUnit::bf16_tensor);
    CHECK_THROWS_WITH(gemm_choice(g, GemmDims{0, 64, 64, 1, GemmLayout::nn}, 2), Catch::Contains("m must be at least 1"));
    CHECK_THROWS_WITH(gemm_choice(g, GemmDims{64, 64, -3, 1, GemmLayout::nn}, 2), Catch::Contains("k must be at least 1"));
    CHECK_THROWS_WITH(gemm_choice(g, GemmDims{64, 64, 64, 0, GemmLayout::nn}, 2), Catch::Contains("batch must be at least 1"));
    // a convolution whose implicit GEMM has no rows, as a hand-built kernel can have it
    Kernel conv;
    conv.kind = KernelKind::conv;
    conv.unit = ComputeUnit::bf16_tensor;
    conv.dtype = DType::bf16;
    ConvDims d;
    d.n = 0; d.c = 64; d.h = 8; d.w = 8; d.k = 64; d.r = 3; d.s = 3; d.pad_h = d.pad_w = 1;
    conv.dims = d;
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"), find_builtin_calibration("h200-sxm"));
    CHECK_THROWS_WITH(kernel_cost(conv, ctx), Catch::Contains("must be at least 1"));
}

TEST_CASE("the alignment class follows the rows the operands are stored in", "[kernel-model]") {
    // bf16: rows of 16 bytes are multiples of 8 elements. A linear layer's forward (nt) reads rows of
    // K (input and weight) and writes rows of N: an odd token count M leaves every row aligned.
    CHECK(detail::vector_aligned(GemmDims{4095, 768, 768, 1, GemmLayout::nt}, 2));
    CHECK_FALSE(detail::vector_aligned(GemmDims{4096, 50257, 768, 1, GemmLayout::nt}, 2));  // GPT-2's LM head
    CHECK_FALSE(detail::vector_aligned(GemmDims{4096, 768, 767, 1, GemmLayout::nt}, 2));
    // a transposed view of A (tn, a weight gradient) has rows of M
    CHECK_FALSE(detail::vector_aligned(GemmDims{4095, 768, 768, 1, GemmLayout::tn}, 2));
    // float32 rows of 16 bytes are multiples of 4 elements
    CHECK(detail::vector_aligned(GemmDims{100, 100, 100, 1, GemmLayout::nn}, 4));
    CHECK_FALSE(detail::vector_aligned(GemmDims{100, 100, 100, 1, GemmLayout::nn}, 2));
    // unknown layout: all three dimensions
    CHECK_FALSE(detail::vector_aligned(GemmDims{4095, 768, 768, 1, GemmLayout::unknown}, 2));
    // on the H200's bf16 tensor cores an unaligned GEMM runs several times slower (the corpus's
    // fit half: 0.18 of the ceiling against 0.95); its CUDA cores barely care
    const GemmModel bf16 = h200_model(ComputeUnit::bf16_tensor);
    const double aligned = gemm_choice(bf16, GemmDims{4096, 50256, 768, 1, GemmLayout::nt}, 2).time.value();
    const double odd = gemm_choice(bf16, GemmDims{4096, 50257, 768, 1, GemmLayout::nt}, 2).time.value();
    CHECK(odd > 2.5 * aligned);
    const GemmModel fp32 = h200_model(ComputeUnit::fp32);
    const double aligned32 = gemm_choice(fp32, GemmDims{4096, 50256, 768, 1, GemmLayout::nt}, 4).time.value();
    const double odd32 = gemm_choice(fp32, GemmDims{4096, 50257, 768, 1, GemmLayout::nt}, 4).time.value();
    CHECK(odd32 < 1.2 * aligned32);
}

TEST_CASE("the shipped kernel model is the fit of the corpus's fit half", "[kernel-model]") {
    // data/kernel_models/gh100.json is what `roofsim fit-kernels` writes from the corpus: refitting
    // gives the same parameters (nothing in it was set by hand).
    const KernelModelProfile* shipped = find_builtin_kernel_model("GH100");
    REQUIRE(shipped != nullptr);
    const KernelModelProfile fitted = fit_kernel_model(corpus(), corpus_dir.filename().string());
    CHECK(fitted.provenance == shipped->provenance);
    REQUIRE(fitted.gemm.size() == shipped->gemm.size());
    for (const auto& [unit, p] : fitted.gemm) {
        INFO(to_string(unit));
        const GemmKernelParams& s = shipped->gemm.at(unit);
        CHECK(p.aligned_efficiency == Catch::Approx(s.aligned_efficiency));
        CHECK(p.unaligned_efficiency == Catch::Approx(s.unaligned_efficiency));
        CHECK(p.saturating_intensity == Catch::Approx(s.saturating_intensity));
        CHECK(p.k_half == Catch::Approx(s.k_half));
        CHECK(p.min_split_depth == Catch::Approx(s.min_split_depth));
        CHECK(p.fixed_time.value() == Catch::Approx(s.fixed_time.value()));
        CHECK(p.split_time.value() == Catch::Approx(s.split_time.value()));
    }
    REQUIRE(fitted.conv.size() == shipped->conv.size());
    for (const auto& [key, p] : fitted.conv) {
        CHECK(p.scaled.factor == Catch::Approx(shipped->conv.at(key).scaled.factor));
        CHECK(p.transposes == shipped->conv.at(key).transposes);
    }
    REQUIRE(fitted.attention.size() == shipped->attention.size());
    for (const auto& [key, p] : fitted.attention) CHECK(p.factor == Catch::Approx(shipped->attention.at(key).factor));
    // and it round-trips through its JSON
    const KernelModelProfile again = kernel_model_from_json(to_json(fitted), "test");
    CHECK(again.chip == fitted.chip);
    CHECK(again.gemm.at(ComputeUnit::bf16_tensor).unaligned_efficiency == fitted.gemm.at(ComputeUnit::bf16_tensor).unaligned_efficiency);
    CHECK(again.attention.size() == fitted.attention.size());
}

TEST_CASE("kernel-model profiles and corpora are refused with the file and field named", "[kernel-model]") {
    nlohmann::json j = to_json(*find_builtin_kernel_model("GH100"));
    j["gemm"]["bf16-tensor"]["aligned_efficiency"] = -1;
    CHECK_THROWS_WITH(kernel_model_from_json(j, "k.json"), Catch::Contains("k.json: /gemm/bf16-tensor/aligned_efficiency"));
    j = to_json(*find_builtin_kernel_model("GH100"));
    j["gemm"]["tf33-tensor"] = j["gemm"]["tf32-tensor"];
    CHECK_THROWS_WITH(kernel_model_from_json(j, "k.json"), Catch::Contains("/gemm/tf33-tensor: not a compute unit"));
    j = to_json(*find_builtin_kernel_model("GH100"));
    j["attention"][0]["backend"] = "fast";
    CHECK_THROWS_WITH(kernel_model_from_json(j, "k.json"), Catch::Contains("/attention/0/backend"));
    j["schema_version"] = 1;
    CHECK_THROWS_WITH(kernel_model_from_json(j, "k.json"), Catch::Contains("/schema_version: expected 2"));
    j = to_json(*find_builtin_kernel_model("GH100"));
    j["conv"][0]["class"] = "dense";
    CHECK_THROWS_WITH(kernel_model_from_json(j, "k.json"), Catch::Contains("/conv/0/class: expected general, pointwise or depthwise"));
    // a kernel model of another family is refused, naming both
    KernelModelProfile other = *find_builtin_kernel_model("GH100");
    other.chip = "GA102";
    CHECK_THROWS_WITH(make_cost_context(gpu_or_throw("h200-sxm"), nullptr, &other), Catch::Contains("GA102"));

    const auto dir = temp_dir("roofsim-corpus-test");
    write(dir / "meta.json", meta_json);
    CHECK_THROWS_WITH(load_kernel_corpus(dir), Catch::Contains("no gemm.csv"));
    write(dir / "gemm.csv", "half,unit,layout,m,n,k,batch,seconds,p10,p90,reps,error\nfit,fp32,NN,0,8,8,1,1e-5,1e-5,1e-5,1,\n");
    CHECK_THROWS_WITH(load_kernel_corpus(dir), Catch::Contains("gemm.csv:2: m: expected an integer of at least 1, got '0'"));
    write(dir / "gemm.csv", "half,unit,layout,m,n,k,batch,seconds,p10,p90,reps,error\nfit,fp32,NN,8,8,8,1,nan,1e-5,1e-5,1,\n");
    CHECK_THROWS_WITH(load_kernel_corpus(dir), Catch::Contains("gemm.csv:2: seconds: expected a number above 0"));
    write(dir / "gemm.csv", "half,unit,layout,m,n,k,batch,seconds,p10,p90,reps,error\nfit,fp32,NX,8,8,8,1,1e-5,1e-5,1e-5,1,\n");
    CHECK_THROWS_WITH(load_kernel_corpus(dir), Catch::Contains("gemm.csv:2: layout"));
    write(dir / "gemm.csv", "half,unit,layout,m,n,k,batch,seconds,p10,p90,reps,error\nfit,fp32,NN,8,8,8,1,1e-5\n");
    CHECK_THROWS_WITH(load_kernel_corpus(dir), Catch::Contains("gemm.csv:2: 8 fields, the header has 12"));
    write(dir / "gemm.csv", "half,unit,layout,m,n,k,batch,seconds,p10,p90,reps,error\nmid,fp32,NN,8,8,8,1,1e-5,1e-5,1e-5,1,\n");
    CHECK_THROWS_WITH(load_kernel_corpus(dir), Catch::Contains("half: expected fit or test"));
    // a row with an error and no time is skipped, never given a number
    write(dir / "gemm.csv", "half,unit,layout,m,n,k,batch,seconds,p10,p90,reps,error\nfit,fp32,NN,8,8,8,1,,,,,out of memory\n"
                            "test,bf16-tensor,NT,64,64,64,1,1e-5,1e-5,1e-5,1,\n");
    const KernelCorpus c = load_kernel_corpus(dir);
    REQUIRE(c.cases.size() == 1);
    CHECK(c.cases.front().unit == "bf16-tensor");
    std::filesystem::remove_all(dir);
}

TEST_CASE("a convolution's class picks its GEMM, and the layout transposes add their DRAM time", "[kernel-model]") {
    ConvDims d;
    d.n = 32; d.c = 256; d.h = d.w = 14; d.k = 512;
    CHECK(conv_class(d) == ConvClass::pointwise);
    // a pointwise convolution on NCHW tensors: one GEMM per sample, W (K x C) x[n] (C x HW)
    const GemmDims pointwise = detail::implicit_gemm(d);
    CHECK(pointwise.m == 512);
    CHECK(pointwise.n == 14 * 14);
    CHECK(pointwise.k == 256);
    CHECK(pointwise.batch == 32);
    d.pass = ConvPass::backward_filter;
    CHECK(detail::implicit_gemm(d).k == 14 * 14);
    // a 3 x 3 convolution is the implicit GEMM of N P Q rows
    d.pass = ConvPass::forward;
    d.r = d.s = 3;
    d.pad_h = d.pad_w = 1;
    CHECK(conv_class(d) == ConvClass::general);
    CHECK(detail::implicit_gemm(d).m == 32 * 14 * 14);
    CHECK(detail::implicit_gemm(d).k == 256 * 9);
    d.groups = d.c = d.k = 64;
    CHECK(conv_class(d) == ConvClass::depthwise);
    // tau x the tensors' DRAM time on top of the scaled GEMM
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"));
    const GemmModel& g = ctx.gemm.at(ComputeUnit::bf16_tensor);
    d.groups = 1;
    d.c = d.k = 256;
    const Bytes bytes = detail::conv_tensor_bytes(d, 2);
    const ConvKernelParams none{ScaledGemmParams{1, Seconds(0)}, 0}, two{ScaledGemmParams{1, Seconds(0)}, 2};
    const double extra = (detail::conv_model_time(g, two, d, ComputeUnit::bf16_tensor, bytes) -
                          detail::conv_model_time(g, none, d, ComputeUnit::bf16_tensor, bytes)).value();
    CHECK(extra == Catch::Approx(2 * (bytes / g.dram).value()));
}

TEST_CASE("a norm, pooling or elementwise case the lowering refuses is an error naming its file, line and field", "[kernel-model]") {
    const auto dir = std::filesystem::temp_directory_path() / "roofsim-test-memory-corpus";
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "meta.json") << R"({"kind": "roofsim-kernel-corpus", "schema_version": 1, "gpu_key": "h200-sxm",
        "gpu_name": "NVIDIA H200", "date_utc": "2026-12-04", "torch": "2.11", "tool": "kernel_corpus.py"})";
    const std::string header = "half,unit,phase,op,shape,attrs,seconds,p10,p90,reps,error\n";
    std::ofstream(dir / "pool.csv") << header << "test,fp32,forward,maxpool2d,8x16x32x32,kernel_size=3;stride=0;padding=1,1e-5,1e-5,1e-5,5,\n";
    CHECK_THROWS_WITH(load_kernel_corpus(dir), Catch::Contains("pool.csv:2: op:") && Catch::Contains("stride"));
    std::ofstream(dir / "pool.csv") << header << "test,tf32-tensor,forward,maxpool2d,8x16x32x32,,1e-5,1e-5,1e-5,5,\n";
    CHECK_THROWS_WITH(load_kernel_corpus(dir), Catch::Contains("pool.csv:2: unit: expected fp32 or bf16"));
    std::ofstream(dir / "pool.csv") << header << "test,fp32,forward,maxpool2d,8x16xx32,,1e-5,1e-5,1e-5,5,\n";
    CHECK_THROWS_WITH(load_kernel_corpus(dir), Catch::Contains("pool.csv:2: shape"));
    std::ofstream(dir / "pool.csv") << header << "test,fp32,forward,maxpool2d,8x16x32x32,kernel_size=three,1e-5,1e-5,1e-5,5,\n";
    CHECK_THROWS_WITH(load_kernel_corpus(dir), Catch::Contains("pool.csv:2: attrs: kernel_size: expected an integer, got 'three'"));
    // a good row lowers to the pooling's kernels of that phase
    std::ofstream(dir / "pool.csv") << header << "test,bf16,backward,maxpool2d,8x16x32x32,kernel_size=2;stride=2;padding=0,1e-5,1e-5,1e-5,5,\n";
    const KernelCorpus c = load_kernel_corpus(dir);
    REQUIRE(c.cases.size() == 1);
    REQUIRE(c.cases.front().kernels.size() == 1);
    CHECK(c.cases.front().kernels.front().op == "aten::max_pool2d_with_indices_backward");
    CHECK(c.cases.front().kernels.front().dtype == DType::bf16);
    std::filesystem::remove_all(dir);
}

TEST_CASE("the corpus's test half stays within the figures this model reaches", "[kernel-model][accuracy]") {
    // Regression bounds at the figures of docs/validation.md ("Kernel corpus"), a little above them;
    // the goal (median 5 %, 90th percentile 15 % per family) is not met yet. The test half's shapes
    // were never read by the fit (half_of in kernel_corpus.py: a hash of the shape).
    const KernelCorpus& k = corpus();
    const CostContext ctx = kernel_corpus_context(k);
    std::map<std::string, std::vector<double>> by_family;
    for (const auto& e : evaluate_kernel_corpus(k, ctx, "test")) by_family[e.c->family].push_back(std::abs(e.error));
    const std::map<std::string, std::pair<double, double>> bounds = {
        {"gemm", {0.16, 0.45}}, {"conv", {0.24, 0.74}}, {"attention", {0.16, 0.43}},
        {"norm", {0.37, 0.72}}, {"pool", {0.23, 0.62}}, {"elementwise", {0.16, 0.40}}};
    for (const auto& [family, bound] : bounds) {
        const auto& errors = by_family[family];
        REQUIRE(errors.size() >= (family == "gemm" || family == "conv" || family == "attention" ? 1000u : 300u));
        const double median = detail::quantile(errors, 0.5), p90 = detail::quantile(errors, 0.9);
        std::printf("  %-9s test half: %zu calls, median |error| %.1f%%, 90th percentile %.1f%%\n", family.c_str(), errors.size(),
                    100 * median, 100 * p90);
        INFO(family);
        CHECK(median <= bound.first);
        CHECK(p90 <= bound.second);
    }
    // the fit half was the fit's: every case of it is there, and the halves do not share a shape
    std::size_t fit = 0, test = 0;
    for (const auto& c : k.cases) (c.half == "fit" ? fit : test) += 1;
    CHECK(fit > 10000);
    CHECK(test > 10000);
}

TEST_CASE("predicted throughput does not fall as the batch grows", "[kernel-model][predict]") {
    // From batch 16 up to the largest batch whose predicted peak fits the H200, samples per second at
    // each batch are at least the best of the smaller batches' (1 % slack for rounding): no measured
    // cause says a larger batch runs slower on these models. Known drops, listed with why (all model
    // artefacts, none measured), may fall by at most 6 %; a listed one that no longer falls fails, so
    // that the list stays true (docs/validation.md, "Throughput over batch").
    struct KnownDrop {
        const char* model;
        PrecisionMode mode;
        const char* reason;
    };
    const KnownDrop known_drops[] = {
        {"resnet50", PrecisionMode::fp32,
         "past 4x the cuDNN sweep's batches its measured times fade into the corpus-fitted convolution model, slower than "
         "cuDNN's sweep at ResNet's geometries"},
        {"bert-base", PrecisionMode::fp32, "the GEMM model's wave quantization of its 1024-token tiles"},
    };
    const GpuSpec& spec = gpu_or_throw("h200-sxm");
    const FrameworkProfile* framework = find_builtin_framework_profile("h200-sxm");
    const CostContext ctx = make_cost_context(spec, find_builtin_calibration("h200-sxm"), framework);
    for (const auto& name : zoo::model_names) {
        for (PrecisionMode mode : {PrecisionMode::amp_bf16, PrecisionMode::fp32}) {
            const KnownDrop* known = nullptr;
            for (const auto& d : known_drops) {
                if (d.model == name && d.mode == mode) known = &d;
            }
            double best = 0, worst_drop = 0;
            for (std::int64_t batch = 16; batch <= 4096; batch *= 2) {
                PredictOptions o;
                o.lowering.batch = batch;
                o.lowering.precision = mode;
                o.framework = framework;
                const Prediction p = predict(*zoo::model(name), ctx, o);
                if (p.memory.peak > spec.memory_size.value) break;
                const double throughput = static_cast<double>(batch) / p.step_time.value();
                INFO(name << " " << to_string(mode) << " batch " << batch);
                CHECK(throughput >= (known ? 0.94 : 0.99) * best);
                if (best > 0) worst_drop = std::max(worst_drop, 1 - throughput / best);
                best = std::max(best, throughput);
            }
            INFO(name << " " << to_string(mode) << (known ? std::string(": listed, ") + known->reason : std::string()));
            if (known) CHECK(worst_drop > 0.01);
        }
    }
}
