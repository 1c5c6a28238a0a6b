#pragma once
/// The kernel corpus (tools/validate/kernel_corpus.py): GEMMs, convolutions and fused attention timed
/// as PyTorch runs them, on shapes no calibration chose. Each case becomes the kernels roofsim would
/// cost for it (a GEMM or a convolution pass as one kernel; attention through the lowering of a
/// one-layer `sdpa` graph), is costed with the GPU's measured profiles, and is compared with its
/// measured time. Every case belongs to the half ("fit" or "test") its shape's hash put it in.

#include <roofsim/detail/json_file.hpp>
#include <roofsim/detail/json_read.hpp>
#include <roofsim/detail/stats.hpp>
#include <roofsim/predict.hpp>
#include <roofsim/profile/builtin.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace roofsim {

/// One timed call of the corpus with the kernels roofsim costs for it.
struct KernelCorpusCase {
    std::string family;  ///< gemm, conv or attention
    std::string half;    ///< fit or test
    std::string unit;    ///< the compute unit it was timed in, as the corpus names it (fp32: TF32 off)
    std::string group;   ///< the layout class, pass, or backend and phase
    std::string label;   ///< its shape, for listings
    std::vector<Kernel> kernels;
    Seconds measured{0}, p10{0}, p90{0};
};

/// A corpus as read from its folder: the GPU it was timed on, its provenance and its cases.
struct KernelCorpus {
    std::string gpu_key;
    std::string provenance;  ///< GPU, date, PyTorch and cuDNN versions, tool
    std::vector<KernelCorpusCase> cases;
};

namespace detail {

/// A CSV file of a header row and plain comma-separated fields (no quoting: kernel_corpus.py writes
/// none), each row a map from the header's names; an error naming the file and line where a row's
/// field count differs from the header's.
class CsvRows {
public:
    explicit CsvRows(const std::filesystem::path& path) : path_(path.string()) {
        std::ifstream in(path);
        if (!in) throw std::runtime_error(path_ + ": cannot be read");
        std::string line;
        if (!std::getline(in, line)) throw std::runtime_error(path_ + ": empty (expected a header row)");
        if (!line.empty() && line.back() == '\r') line.pop_back();
        header_ = split(line);
        std::size_t number = 1;
        while (std::getline(in, line)) {
            ++number;
            if (!line.empty() && line.back() == '\r') line.pop_back();
            if (line.empty()) continue;
            auto fields = split(line);
            if (fields.size() != header_.size()) {
                throw std::runtime_error(path_ + ":" + std::to_string(number) + ": " + std::to_string(fields.size()) +
                                         " fields, the header has " + std::to_string(header_.size()));
            }
            rows_.push_back({number, std::move(fields)});
        }
    }

    [[nodiscard]] std::size_t size() const { return rows_.size(); }

    /// Field `name` of row `i`; an error naming the file where the header lacks it.
    [[nodiscard]] const std::string& field(std::size_t i, std::string_view name) const {
        const auto it = std::find(header_.begin(), header_.end(), name);
        if (it == header_.end()) throw std::runtime_error(path_ + ": no column '" + std::string(name) + "'");
        return rows_[i].second[static_cast<std::size_t>(it - header_.begin())];
    }

    /// Field `name` of row `i` as an integer of at least `least`; an error naming file, line and column.
    [[nodiscard]] std::int64_t integer(std::size_t i, std::string_view name, std::int64_t least = 1) const {
        const std::string& s = field(i, name);
        std::int64_t v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || end != s.data() + s.size() || v < least) {
            fail(i, name, "expected an integer of at least " + std::to_string(least) + ", got '" + s + "'");
        }
        return v;
    }

    /// Field `name` of row `i` as a finite number above 0 (a time); an error naming file, line and column.
    [[nodiscard]] double positive(std::size_t i, std::string_view name) const {
        const std::string& s = field(i, name);
        double v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v) || v <= 0) {
            fail(i, name, "expected a number above 0, got '" + s + "'");
        }
        return v;
    }

    [[noreturn]] void fail(std::size_t i, std::string_view name, const std::string& what) const {
        throw std::runtime_error(path_ + ":" + std::to_string(rows_[i].first) + ": " + std::string(name) + ": " + what);
    }

private:
    static std::vector<std::string> split(const std::string& line) {
        std::vector<std::string> out;
        std::size_t start = 0;
        for (;;) {
            const std::size_t comma = line.find(',', start);
            out.push_back(line.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
            if (comma == std::string::npos) break;
            start = comma + 1;
        }
        return out;
    }

    std::string path_;
    std::vector<std::string> header_;
    std::vector<std::pair<std::size_t, std::vector<std::string>>> rows_;
};

/// The compute unit and dtype of a corpus unit name (fp32: TF32 off; tf32-tensor; bf16-tensor; fp16-tensor).
inline std::pair<ComputeUnit, DType> corpus_unit(const CsvRows& rows, std::size_t i) {
    const std::string& u = rows.field(i, "unit");
    if (u == "fp32") return {ComputeUnit::fp32, DType::f32};
    if (u == "tf32-tensor") return {ComputeUnit::tf32_tensor, DType::f32};
    if (u == "bf16-tensor") return {ComputeUnit::bf16_tensor, DType::bf16};
    if (u == "fp16-tensor") return {ComputeUnit::fp16_tensor, DType::f16};
    rows.fail(i, "unit", "expected fp32, tf32-tensor, bf16-tensor or fp16-tensor, got '" + u + "'");
}

/// The precision mode whose rules run a corpus unit's attention: fp32 as fp32-strict (TF32 off),
/// tf32-tensor as tf32, bf16-tensor as bf16, fp16-tensor as amp-fp16 (its attention runs in float16).
inline PrecisionMode corpus_mode(ComputeUnit unit) {
    return unit == ComputeUnit::fp32          ? PrecisionMode::fp32_strict
           : unit == ComputeUnit::tf32_tensor ? PrecisionMode::tf32
           : unit == ComputeUnit::fp16_tensor ? PrecisionMode::amp_fp16
                                              : PrecisionMode::bf16;
}

/// The row's timing (seconds, p10, p90) into `c`; false for a row with an error and no time.
inline bool corpus_timing(const CsvRows& rows, std::size_t i, KernelCorpusCase& c) {
    if (!rows.field(i, "error").empty()) return false;
    c.measured = Seconds(rows.positive(i, "seconds"));
    c.p10 = Seconds(rows.positive(i, "p10"));
    c.p90 = Seconds(rows.positive(i, "p90"));
    c.half = rows.field(i, "half");
    if (c.half != "fit" && c.half != "test") rows.fail(i, "half", "expected fit or test, got '" + c.half + "'");
    c.unit = rows.field(i, "unit");
    return true;
}

/// How the corpus groups a GEMM: every dimension a multiple of 8, or not (a property of the shape; the
/// kernel model's own alignment class is in the CSV's `aligned`).
inline std::string gemm_alignment_group(const GemmDims& d) {
    return d.m % 8 == 0 && d.n % 8 == 0 && d.k % 8 == 0 ? "dims x8" : "a dim not x8";
}

inline void read_gemm_cases(const std::filesystem::path& file, std::vector<KernelCorpusCase>& out) {
    const CsvRows rows(file);
    for (std::size_t i = 0; i < rows.size(); ++i) {
        KernelCorpusCase c;
        c.family = "gemm";
        if (!corpus_timing(rows, i, c)) continue;
        const auto [unit, dtype] = corpus_unit(rows, i);
        GemmDims d{rows.integer(i, "m"), rows.integer(i, "n"), rows.integer(i, "k"), rows.integer(i, "batch")};
        const auto layout = gemm_layout_from_key(rows.field(i, "layout"));
        if (!layout) rows.fail(i, "layout", "expected NN, NT, TN or TT");
        d.layout = *layout;
        Kernel k;
        k.kind = KernelKind::gemm;
        k.op = d.batch > 1 ? "aten::bmm" : "aten::mm";
        k.dtype = dtype;
        k.unit = unit;
        k.dims = d;
        k.flops = gemm_flops(d);
        const double b = static_cast<double>(d.batch), m = static_cast<double>(d.m), n = static_cast<double>(d.n),
                     kk = static_cast<double>(d.k);
        k.bytes_read = tensor_bytes(b * (m * kk + kk * n), dtype);
        k.bytes_written = tensor_bytes(b * m * n, dtype);
        c.kernels.push_back(k);
        c.group = gemm_alignment_group(d);
        c.label = std::to_string(d.m) + "x" + std::to_string(d.n) + "x" + std::to_string(d.k) +
                  (d.batch > 1 ? " b" + std::to_string(d.batch) : "") + " " + std::string(to_string(d.layout));
        out.push_back(std::move(c));
    }
}

inline void read_conv_cases(const std::filesystem::path& file, std::vector<KernelCorpusCase>& out) {
    const CsvRows rows(file);
    for (std::size_t i = 0; i < rows.size(); ++i) {
        KernelCorpusCase c;
        c.family = "conv";
        if (!corpus_timing(rows, i, c)) continue;
        const auto [unit, dtype] = corpus_unit(rows, i);
        ConvDims d;
        const auto pass = conv_pass_from_key(rows.field(i, "pass"));
        if (!pass) rows.fail(i, "pass", "expected forward, backward-data or backward-filter");
        d.pass = *pass;
        d.n = rows.integer(i, "n"); d.c = rows.integer(i, "c"); d.h = rows.integer(i, "h"); d.w = rows.integer(i, "w");
        d.k = rows.integer(i, "k"); d.r = rows.integer(i, "r"); d.s = rows.integer(i, "s");
        d.stride_h = rows.integer(i, "stride_h"); d.stride_w = rows.integer(i, "stride_w");
        d.pad_h = rows.integer(i, "pad_h", 0); d.pad_w = rows.integer(i, "pad_w", 0);
        d.dilation_h = rows.integer(i, "dilation_h"); d.dilation_w = rows.integer(i, "dilation_w");
        d.groups = rows.integer(i, "groups");
        if (d.c % d.groups != 0 || d.k % d.groups != 0) rows.fail(i, "groups", "must divide c and k");
        if (d.p() <= 0 || d.q() <= 0) rows.fail(i, "r", "the kernel is larger than the padded input");
        const double in = static_cast<double>(d.n * d.c * d.h * d.w), outs = static_cast<double>(d.n * d.k * d.p() * d.q());
        const double weights = static_cast<double>(d.k * (d.c / d.groups) * d.r * d.s);
        const double read = d.pass == ConvPass::forward ? in + weights : d.pass == ConvPass::backward_data ? outs + weights : outs + in;
        const double written = d.pass == ConvPass::forward ? outs : d.pass == ConvPass::backward_data ? in : weights;
        Kernel k;
        k.kind = KernelKind::conv;
        k.op = d.pass == ConvPass::forward ? "aten::convolution" : "aten::convolution_backward";
        k.dtype = dtype;
        k.unit = unit;
        k.dims = d;
        k.flops = conv_flops(d);
        k.bytes_read = tensor_bytes(read, dtype);
        k.bytes_written = tensor_bytes(written, dtype);
        c.kernels.push_back(k);
        const ConvClass kind = conv_class(d);
        c.group = std::string(to_string(d.pass)) + (kind == ConvClass::general ? "" : " " + std::string(to_string(kind)));
        c.label = rows.field(i, "model") + " n" + std::to_string(d.n) + " c" + std::to_string(d.c) + " " + std::to_string(d.h) + "x" +
                  std::to_string(d.w) + " k" + std::to_string(d.k) + " " + std::to_string(d.r) + "x" + std::to_string(d.s) + "/" +
                  std::to_string(d.stride_h) + (d.groups > 1 ? " g" + std::to_string(d.groups) : "");
        out.push_back(std::move(c));
    }
}

inline void read_attention_cases(const std::filesystem::path& file, std::vector<KernelCorpusCase>& out) {
    const CsvRows rows(file);
    for (std::size_t i = 0; i < rows.size(); ++i) {
        KernelCorpusCase c;
        c.family = "attention";
        if (!corpus_timing(rows, i, c)) continue;
        const auto [unit, dtype] = corpus_unit(rows, i);
        const std::string& backend = rows.field(i, "backend");
        if (!attention_backend_from_key(backend)) rows.fail(i, "backend", "expected flash, efficient, math or cudnn");
        const std::string& phase = rows.field(i, "phase");
        if (phase != "forward" && phase != "backward") rows.fail(i, "phase", "expected forward or backward");
        const std::int64_t b = rows.integer(i, "batch"), h = rows.integer(i, "heads"), lq = rows.integer(i, "seq_q"),
                           lk = rows.integer(i, "seq_kv"), d = rows.integer(i, "head_dim");
        const bool causal = rows.integer(i, "causal", 0) != 0;
        const GraphInput q{"", {b, h, lq, d}, dtype, true}, kv{"", {b, h, lk, d}, dtype, true};
        const Graph g = one_layer_graph("sdpa", {{"backend", AttrValue(backend)}, {"is_causal", AttrValue(causal)}}, {q, kv, kv});
        LoweringOptions o;
        o.precision = corpus_mode(unit);
        o.optimizer.kind = OptimizerKind::none;
        const Phase want = phase == "forward" ? Phase::forward : Phase::backward;
        for (const Kernel& k : lower(g, o).kernels.kernels) {
            if (k.kind != KernelKind::host_only && k.phase == want) c.kernels.push_back(k);
        }
        c.group = backend + " " + phase;
        c.label = "b" + std::to_string(b) + " h" + std::to_string(h) + " L" + std::to_string(lq) + " d" + std::to_string(d) +
                  (causal ? " causal" : "");
        out.push_back(std::move(c));
    }
}

/// A norm, pooling or elementwise case (norm.csv, pool.csv, elementwise.csv): the graph op on its own
/// input(s), in float32 (unit fp32, precision fp32-strict) or bfloat16 (unit bf16, the bf16 mode: no
/// autocast), lowered as a training step; the kernels of the timed phase, forward or backward.
inline void read_memory_cases(const std::filesystem::path& file, const std::string& family, std::vector<KernelCorpusCase>& out) {
    const CsvRows rows(file);
    for (std::size_t i = 0; i < rows.size(); ++i) {
        KernelCorpusCase c;
        c.family = family;
        if (!corpus_timing(rows, i, c)) continue;
        if (c.unit != "fp32" && c.unit != "bf16") rows.fail(i, "unit", "expected fp32 or bf16, got '" + c.unit + "'");
        const DType dtype = c.unit == "fp32" ? DType::f32 : DType::bf16;
        const std::string& phase = rows.field(i, "phase");
        if (phase != "forward" && phase != "backward") rows.fail(i, "phase", "expected forward or backward");
        const std::string& op = rows.field(i, "op");
        std::vector<std::int64_t> shape;
        for (std::string_view s = rows.field(i, "shape"); !s.empty();) {
            const std::size_t x = s.find('x');
            std::int64_t v = 0;
            const auto part = s.substr(0, x);
            const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
            if (ec != std::errc() || end != part.data() + part.size() || v < 1) rows.fail(i, "shape", "expected sizes joined by x");
            shape.push_back(v);
            s = x == std::string_view::npos ? std::string_view() : s.substr(x + 1);
        }
        if (shape.empty()) rows.fail(i, "shape", "empty");
        std::map<std::string, AttrValue> attrs;
        for (std::string_view s = rows.field(i, "attrs"); !s.empty();) {
            const std::size_t semi = s.find(';'), eq = s.find('=');
            if (eq == std::string_view::npos || eq > semi) rows.fail(i, "attrs", "expected name=value pairs joined by ;");
            const std::string name(s.substr(0, eq)), value(s.substr(eq + 1, semi == std::string_view::npos ? std::string_view::npos : semi - eq - 1));
            const char* const end = value.data() + value.size();
            if (value.find('.') != std::string::npos) {
                double v = 0;
                const auto r = std::from_chars(value.data(), end, v);
                if (r.ec != std::errc() || r.ptr != end) rows.fail(i, "attrs", name + ": expected a number, got '" + value + "'");
                attrs[name] = AttrValue(v);
            } else {
                std::int64_t v = 0;
                const auto r = std::from_chars(value.data(), end, v);
                if (r.ec != std::errc() || r.ptr != end) rows.fail(i, "attrs", name + ": expected an integer, got '" + value + "'");
                attrs[name] = AttrValue(v);
            }
            s = semi == std::string_view::npos ? std::string_view() : s.substr(semi + 1);
        }
        if (op == "layernorm") attrs["normalized_shape"] = AttrValue(std::vector<std::int64_t>{shape.back()});
        if (op == "batchnorm2d") attrs["num_features"] = AttrValue(shape.size() > 1 ? shape[1] : 0);
        if (op == "softmax") attrs["dim"] = AttrValue(std::int64_t{-1});
        std::vector<GraphInput> inputs{GraphInput{"", {}, dtype, true}};
        for (auto v : shape) inputs[0].shape.push_back(Dim(v));
        if (op == "add" || op == "mul") inputs.push_back(inputs[0]);
        LoweringOptions o;
        o.precision = dtype == DType::f32 ? PrecisionMode::fp32_strict : PrecisionMode::bf16;
        o.optimizer.kind = OptimizerKind::none;
        const Phase want = phase == "forward" ? Phase::forward : Phase::backward;
        try {
            for (const Kernel& k : lower(one_layer_graph(op, std::move(attrs), inputs), o).kernels.kernels) {
                if (k.kind != KernelKind::host_only && k.phase == want) c.kernels.push_back(k);
            }
        } catch (const std::exception& e) {
            rows.fail(i, "op", e.what());
        }
        if (c.kernels.empty()) rows.fail(i, "phase", "the lowering has no kernel in this phase");
        c.group = op + " " + phase;
        c.label = op + " " + rows.field(i, "shape") + (rows.field(i, "attrs").empty() ? "" : " " + rows.field(i, "attrs"));
        out.push_back(std::move(c));
    }
}

}  // namespace detail

/// Reads a corpus folder: meta.json (kind roofsim-kernel-corpus) and the gemm.csv, conv.csv,
/// attention.csv, norm.csv, pool.csv and elementwise.csv it holds (each optional; at least one). Rows
/// with an error and no time are skipped.
[[nodiscard]] inline KernelCorpus load_kernel_corpus(const std::filesystem::path& dir) {
    const auto meta_path = dir / "meta.json";
    const nlohmann::json meta = detail::read_json_file(meta_path);
    const detail::JsonCursor m(meta, meta_path.string(), "");
    if (m.at("kind").string() != "roofsim-kernel-corpus") m.at("kind").fail("expected roofsim-kernel-corpus");
    if (m.at("schema_version").integer() != 1) m.at("schema_version").fail("expected 1");
    KernelCorpus corpus;
    corpus.gpu_key = m.at("gpu_key").string();
    corpus.provenance = "measured on " + m.at("gpu_name").string() + ", " + m.at("date_utc").string() + ", PyTorch " +
                        m.at("torch").string() + " (" + m.at("tool").string() + ")";
    bool any = false;
    for (const auto& [name, read] : {std::pair{"gemm.csv", &detail::read_gemm_cases}, std::pair{"conv.csv", &detail::read_conv_cases},
                                     std::pair{"attention.csv", &detail::read_attention_cases}}) {
        if (!std::filesystem::exists(dir / name)) continue;
        read(dir / name, corpus.cases);
        any = true;
    }
    for (const std::string family : {"norm", "pool", "elementwise"}) {
        if (!std::filesystem::exists(dir / (family + ".csv"))) continue;
        detail::read_memory_cases(dir / (family + ".csv"), family, corpus.cases);
        any = true;
    }
    if (!any) throw std::runtime_error(dir.string() + ": no gemm.csv, conv.csv, attention.csv, norm.csv, pool.csv or elementwise.csv");
    return corpus;
}

/// A corpus case's predicted time: each kernel's cost and the gap after it on its stream (a graph
/// replay of back-to-back calls times both).
[[nodiscard]] inline Seconds predicted_time(const KernelCorpusCase& c, const CostContext& ctx) {
    Seconds t{0};
    for (const Kernel& k : c.kernels) {
        const KernelCost cost = kernel_cost(k, ctx);
        t += cost.time + gap_after(k, cost, ctx);
    }
    return t;
}

/// One case's error: predicted / measured - 1; for a GEMM or a convolution, the GEMM (a convolution's
/// implicit GEMM) and what the GEMM kernel model chose for it.
struct KernelCaseError {
    const KernelCorpusCase* c = nullptr;
    Seconds predicted{0};
    double error = 0;
    std::optional<GemmDims> gemm;
    GemmChoice choice;
};

/// Every case of `half` ("fit", "test" or "all") predicted with `ctx`.
[[nodiscard]] inline std::vector<KernelCaseError> evaluate_kernel_corpus(const KernelCorpus& corpus, const CostContext& ctx,
                                                                         std::string_view half) {
    std::vector<KernelCaseError> out;
    for (const auto& c : corpus.cases) {
        if (half != "all" && c.half != half) continue;
        const Seconds p = predicted_time(c, ctx);
        KernelCaseError e{&c, p, p / c.measured - 1, std::nullopt, GemmChoice{}};
        const Kernel& k = c.kernels.front();
        if (const auto* g = std::get_if<GemmDims>(&k.dims)) e.gemm = *g;
        if (const auto* d = std::get_if<ConvDims>(&k.dims)) e.gemm = detail::implicit_gemm(*d);
        if (const auto model = ctx.gemm.find(k.unit); e.gemm && model != ctx.gemm.end()) {
            e.choice = gemm_choice(model->second, *e.gemm, detail::gemm_element_bytes(k.unit));
        }
        out.push_back(e);
    }
    return out;
}

/// The cost context a corpus is predicted with: its GPU's built-in calibration and framework profile,
/// with the stream of a CUDA-graph replay, as the corpus was timed: no host launches between kernels,
/// so no kernel takes less than the calibration's graph interval of empty kernels (launch/gpu_interval)
/// in place of the eager launch interval, and no eager gap after it (gpu_kernel_gap).
/// `kernels`: the kernel model to price with (the built-in one of the GPU's chip where null).
[[nodiscard]] inline CostContext kernel_corpus_context(const KernelCorpus& corpus, const KernelModelProfile* kernels = nullptr) {
    const GpuSpec& spec = gpu_or_throw(corpus.gpu_key);
    const Calibration* cal = find_builtin_calibration(spec.key);
    CostContext ctx = make_cost_context(spec, cal, kernels ? kernels : find_builtin_kernel_model(spec.chip.value));
    if (const FrameworkProfile* framework = find_builtin_framework_profile(spec.key)) apply_framework_profile(ctx, *framework);
    if (cal) {
        if (const auto floor = launch_gpu_interval(*cal)) {
            ctx.kernel_floor = *floor;
            ctx.kernel_floor_source = "the calibration's graph interval of empty kernels (launch/gpu_interval)";
        }
    }
    ctx.kernel_gap = Seconds(0);
    return ctx;
}

}  // namespace roofsim
