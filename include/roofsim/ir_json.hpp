#pragma once
/// The kernel IR's JSON form (`roofsim-kernel-ir`, schema version 1, docs/ir-format.md): read what
/// the PyTorch exporter (tools/roofsim_export) writes, and write what a layer graph lowers to.
/// Reading is strict: unknown fields, bad kinds, negative counts and malformed shapes are errors that
/// name the file and the JSON pointer; nothing is returned from a partly read document.

#include <roofsim/detail/json_file.hpp>
#include <roofsim/detail/json_read.hpp>
#include <roofsim/ir.hpp>
#include <roofsim/optimizer.hpp>
#include <roofsim/precision_mode.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace roofsim {

/// The step's memory as the IR's producer counted it (the exporter tracks live tensor storages).
struct IrMemory {
    Bytes parameters{0};
    Bytes gradients{0};
    Bytes optimizer_state{0};
    Bytes peak{0};
    std::string method;
};

/// A kernel IR document: the kernel list and what the step it describes was captured with.
struct KernelIr {
    KernelList list;
    std::int64_t batch = 0;                  ///< the batch size of the captured shapes (0: not given)
    OptimizerOptions optimizer = [] { OptimizerOptions o; o.kind = OptimizerKind::none; return o; }();
    double parameter_elements = 0;           ///< 0: not given
    std::int64_t parameter_tensors = 0;      ///< tensors optimizer.step() updates (0: not given)
    std::optional<IrMemory> memory;
    /// How the kernels' python_seconds were timed: the exporting host's fastest call of the Python
    /// reference work (the framework probe's `python_reference` times the same work), which relates
    /// them to another host's speed (`model_code.fastest_reference_seconds`).
    std::optional<Seconds> model_code_fastest_reference;
    /// The exporting host's Python speed while it timed the code (`model_code.timed_reference_seconds`:
    /// the median of the reference calls around the timed forwards), where the IR gives it: the code
    /// was timed at that speed, which a shared host's swings can put far from its fastest.
    std::optional<Seconds> model_code_timed_reference;
    std::string model_code_method;
};

namespace detail {

/// Refuses members of an object that the format does not define.
inline void check_fields(const JsonCursor& c, std::initializer_list<std::string_view> known) {
    c.check_fields(known, "docs/ir-format.md");
}

/// [h, w] of integers >= `least`, or `fallback` when absent.
inline std::array<std::int64_t, 2> pair_field(const JsonCursor& c, std::string_view key, std::int64_t least,
                                              std::array<std::int64_t, 2> fallback) {
    if (!c.has(key)) return fallback;
    const JsonCursor v = c.at(key);
    if (v.json().is_array() && v.json().size() == 2 && v.json()[0].is_number_integer() && v.json()[1].is_number_integer()) {
        const std::array<std::int64_t, 2> out{v.at(0).integer(), v.at(1).integer()};
        if (out[0] >= least && out[1] >= least) return out;
    }
    v.fail("expected [h, w] of integers >= " + std::to_string(least) + ", got " + v.json().dump());
}

inline std::int64_t positive_field(const JsonCursor& c, std::string_view key, std::int64_t fallback) {
    return c.has(key) ? c.at(key).positive_integer() : fallback;
}

inline GemmDims gemm_dims_from_json(const JsonCursor& c) {
    check_fields(c, {"m", "n", "k", "batch", "layout"});
    GemmDims d{c.at("m").positive_integer(), c.at("n").positive_integer(), c.at("k").positive_integer(),
               positive_field(c, "batch", 1)};
    if (c.has("layout")) {
        const auto layout = gemm_layout_from_key(c.at("layout").string());
        if (!layout) c.at("layout").fail("expected NN, NT, TN or TT");
        d.layout = *layout;
    }
    return d;
}

inline ConvDims conv_dims_from_json(const JsonCursor& c) {
    check_fields(c, {"pass", "n", "c", "h", "w", "k", "r", "s", "stride", "padding", "dilation", "groups"});
    ConvDims d;
    const auto pass = conv_pass_from_key(c.at("pass").string());
    if (!pass) c.at("pass").fail("expected forward, backward-data or backward-filter");
    d.pass = *pass;
    d.n = c.at("n").positive_integer();
    d.c = c.at("c").positive_integer();
    d.h = c.at("h").positive_integer();
    d.w = c.at("w").positive_integer();
    d.k = c.at("k").positive_integer();
    d.r = c.at("r").positive_integer();
    d.s = c.at("s").positive_integer();
    const auto stride = pair_field(c, "stride", 1, {1, 1});
    const auto padding = pair_field(c, "padding", 0, {0, 0});
    const auto dilation = pair_field(c, "dilation", 1, {1, 1});
    d.stride_h = stride[0]; d.stride_w = stride[1];
    d.pad_h = padding[0]; d.pad_w = padding[1];
    d.dilation_h = dilation[0]; d.dilation_w = dilation[1];
    d.groups = positive_field(c, "groups", 1);
    if (d.c % d.groups != 0 || d.k % d.groups != 0) c.at("groups").fail("must divide c and k");
    // PyTorch's sizes are int64: an output size that overflows it is no shape
    if (!ConvDims::output_size(d.h, d.pad_h, d.dilation_h, d.r, d.stride_h)) c.fail("h + 2 * padding - dilation * (r - 1) (output height) overflows a 64-bit integer");
    if (!ConvDims::output_size(d.w, d.pad_w, d.dilation_w, d.s, d.stride_w)) c.fail("w + 2 * padding - dilation * (s - 1) (output width) overflows a 64-bit integer");
    if (d.p() <= 0 || d.q() <= 0) c.fail("the filter does not fit the padded input (output size <= 0)");
    return d;
}

inline AttentionDims attention_dims_from_json(const JsonCursor& c, bool& backward) {
    check_fields(c, {"batch", "heads", "seq_q", "seq_kv", "head_dim", "causal", "backend", "backward", "dropout_p"});
    AttentionDims a;
    a.batch = c.at("batch").positive_integer();
    a.heads = c.at("heads").positive_integer();
    a.seq_q = c.at("seq_q").positive_integer();
    a.seq_kv = c.at("seq_kv").positive_integer();
    a.head_dim = c.at("head_dim").positive_integer();
    a.causal = c.has("causal") && c.at("causal").boolean();
    if (c.has("backend")) {
        const auto b = attention_backend_from_key(c.at("backend").string());
        if (!b) c.at("backend").fail("expected flash, efficient, math or cudnn");
        a.backend = *b;
    }
    if (c.has("dropout_p")) {
        a.dropout = c.at("dropout_p").non_negative();
        if (a.dropout >= 1) c.at("dropout_p").fail("expected a probability below 1");
    }
    backward = c.has("backward") && c.at("backward").boolean();
    return a;
}

inline NormDims norm_dims_from_json(const JsonCursor& c) {
    check_fields(c, {"groups", "group_elements"});
    return NormDims{c.at("groups").positive_integer(), c.at("group_elements").positive_integer()};
}

/// Refuses a GEMM, convolution or attention shape whose sizes overflow int64 (PyTorch computes a
/// tensor's bytes in int64 and refuses an overflow), and `flops` that disagree with the shape's
/// count (ir.hpp: gemm_flops, conv_flops, attention_flops) beyond rounding.
inline void check_shape_sizes(const JsonCursor& c, const Kernel& k) {
    const std::int64_t element_bytes = whole_element_bytes(k.dtype);
    std::string oversized;
    std::string_view field;
    std::optional<Flops> expected;
    if (const auto* g = std::get_if<GemmDims>(&k.dims)) {
        field = "gemm";
        oversized = oversized_size(*g, element_bytes);
        if (oversized.empty()) expected = gemm_flops(*g);
    } else if (const auto* d = std::get_if<ConvDims>(&k.dims)) {
        field = "conv";
        oversized = oversized_size(*d, element_bytes);
        if (oversized.empty()) expected = conv_flops(*d);
    } else if (const auto* a = std::get_if<AttentionDims>(&k.dims)) {
        field = "attention";
        oversized = oversized_size(*a, element_bytes);
        if (oversized.empty()) expected = attention_flops(*a, k.backward_pass);
    } else {
        return;
    }
    if (!oversized.empty()) c.at(field).fail(oversized + " overflows a 64-bit integer");
    if (!c.has("flops")) return;
    const double given = k.flops.value(), want = expected->value();
    if (std::abs(given - want) > 1e-6 * std::max(want, 1.0)) {
        c.at("flops").fail(JsonCursor::format(given) + " disagrees with the " + std::string(field) + " shape's " +
                           JsonCursor::format(want) + " (docs/ir-format.md gives the count)");
    }
}

/// A count of bytes: >= 0 and at most 2^63, what PyTorch's int64 sizes can count (a larger one is a
/// corrupt file, and sums of them would reach infinity).
inline double byte_count(const JsonCursor& c) {
    const double v = c.non_negative();
    if (v > 0x1p63) c.fail("more bytes than a 64-bit size counts, got " + JsonCursor::format(v));
    return v;
}

inline std::string optional_string(const JsonCursor& c, std::string_view key) {
    return c.has(key) ? c.at(key).string() : std::string();
}

inline Kernel kernel_from_json(const JsonCursor& c) {
    check_fields(c, {"op", "kind", "phase", "layer", "dtype", "unit", "flops", "bytes_read", "bytes_written", "gemm",
                     "conv", "attention", "norm", "host_dispatch", "sync", "mixed_dtypes", "strided", "host_op", "source_op", "flag",
                     "args", "python_seconds", "ranks", "waits_for_communication"});
    Kernel k;
    k.op = c.at("op").string();
    if (k.op.empty()) c.at("op").fail("must not be empty");
    const auto kind = kernel_kind_from_key(c.at("kind").string());
    if (!kind) c.at("kind").fail("unknown kernel kind (docs/ir-format.md lists them)");
    k.kind = *kind;
    const auto phase = phase_from_key(c.at("phase").string());
    if (!phase) c.at("phase").fail("expected forward, backward or optimizer");
    k.phase = *phase;
    k.layer = c.at("layer").string();
    if (c.has("dtype")) {
        const auto d = dtype_from_key(c.at("dtype").string());
        if (!d) c.at("dtype").fail("unknown dtype (float32, float16, bfloat16, int64, ...)");
        k.dtype = *d;
    }
    if (c.has("unit")) {
        const auto u = compute_unit_from_key(c.at("unit").string());
        if (!u) c.at("unit").fail("unknown compute unit (fp32, tf32-tensor, bf16-tensor, ...)");
        k.unit = *u;
    }
    if (c.has("flops")) k.flops = Flops(c.at("flops").non_negative());
    if (c.has("bytes_read")) k.bytes_read = Bytes(byte_count(c.at("bytes_read")));
    if (c.has("bytes_written")) k.bytes_written = Bytes(byte_count(c.at("bytes_written")));
    int shapes = 0;
    if (c.has("gemm")) { k.dims = gemm_dims_from_json(c.at("gemm")); ++shapes; }
    if (c.has("conv")) { k.dims = conv_dims_from_json(c.at("conv")); ++shapes; }
    if (c.has("attention")) { k.dims = attention_dims_from_json(c.at("attention"), k.backward_pass); ++shapes; }
    if (c.has("norm")) { k.dims = norm_dims_from_json(c.at("norm")); ++shapes; }
    if (shapes > 1) c.fail("more than one of gemm, conv, attention, norm");
    check_shape_sizes(c, k);
    const bool shape_fits = (c.has("gemm") && k.kind == KernelKind::gemm) || (c.has("conv") && k.kind == KernelKind::conv) ||
                            (c.has("attention") && k.kind == KernelKind::attention) ||
                            (c.has("norm") && (k.kind == KernelKind::normalization || k.kind == KernelKind::reduction));
    if (shapes == 1 && !shape_fits) c.at("kind").fail("does not match its shape object (gemm, conv, attention or norm)");
    if (c.has("host_dispatch")) k.host_dispatch = c.at("host_dispatch").boolean();
    if (c.has("sync")) {
        k.host_sync = c.at("sync").boolean();
        if (k.host_sync && k.kind != KernelKind::host_only) c.at("sync").fail("only a host-only kernel can synchronize");
    }
    if (c.has("mixed_dtypes")) {
        k.mixed_dtypes = c.at("mixed_dtypes").boolean();
        if (k.mixed_dtypes && k.kind != KernelKind::elementwise) c.at("mixed_dtypes").fail("only an elementwise kernel has mixed operand dtypes");
    }
    if (c.has("strided")) {
        k.strided = c.at("strided").boolean();
        if (k.strided && k.kind != KernelKind::elementwise) c.at("strided").fail("only an elementwise kernel has strided operands");
    }
    if (c.has("ranks")) {
        if (k.kind != KernelKind::collective) c.at("ranks").fail("only a collective kernel spans ranks");
        const std::int64_t ranks = c.at("ranks").positive_integer();
        if (ranks < 2 || ranks > 65535) c.at("ranks").fail("expected 2 to 65535 GPUs");
        k.ranks = static_cast<std::uint16_t>(ranks);
    }
    if (k.kind == KernelKind::collective && k.ranks == 0) c.fail("a collective kernel needs ranks (the GPUs it spans)");
    if (c.has("waits_for_communication")) k.waits_for_communication = c.at("waits_for_communication").boolean();
    k.host_op = optional_string(c, "host_op");
    k.source_op = optional_string(c, "source_op");
    k.flag = optional_string(c, "flag");
    if (k.kind == KernelKind::unknown && k.flag.empty()) c.fail("an unknown kernel needs a flag saying why");
    if (c.has("python_seconds")) {
        k.python_time = Seconds(c.at("python_seconds").non_negative());
        if (k.kind != KernelKind::host_only) c.at("python_seconds").fail("only a host-only kernel runs model code");
    }
    if (k.kind == KernelKind::host_only && (k.flops.value() > 0 || k.bytes().value() > 0)) {
        c.fail("a host-only kernel does no GPU work: flops and bytes must be 0");
    }
    return k;
}

inline nlohmann::json pair_json(std::int64_t h, std::int64_t w) { return nlohmann::json::array({h, w}); }

}  // namespace detail

/// Parses a kernel IR document (schema_version 1, kind "roofsim-kernel-ir").
[[nodiscard]] inline KernelIr kernel_ir_from_json(const nlohmann::json& document, std::string_view origin) {
    using detail::JsonCursor;
    const JsonCursor root(document, std::string(origin), "");
    detail::check_fields(root, {"schema_version", "kind", "model", "precision", "mode", "batch", "optimizer", "origin",
                                "parameters", "memory", "model_code", "kernels"});
    if (root.at("schema_version").integer() != 1) root.at("schema_version").fail("unsupported version (expected 1)");
    if (root.at("kind").string() != "roofsim-kernel-ir") root.at("kind").fail("expected \"roofsim-kernel-ir\"");
    KernelIr ir;
    ir.list.model = detail::optional_string(root, "model");
    ir.list.origin = detail::optional_string(root, "origin");
    if (root.has("precision")) {  // absent: PyTorch's defaults (fp32)
        const auto mode = precision_mode_from_key(root.at("precision").string());
        if (!mode) root.at("precision").fail("unknown precision mode (fp32, fp32-strict, tf32, amp-bf16, amp-fp16, bf16, fp16-master)");
        ir.list.precision = *mode;
    }
    if (root.has("mode")) {  // absent: a training step
        const auto mode = step_mode_from_key(root.at("mode").string());
        if (!mode) root.at("mode").fail("expected training or inference");
        ir.list.mode = *mode;
    }
    if (root.has("batch")) ir.batch = root.at("batch").positive_integer();
    if (root.has("optimizer")) {
        const JsonCursor o = root.at("optimizer");
        detail::check_fields(o, {"kind", "fused", "weight_decay"});
        const auto kind = optimizer_from_key(o.at("kind").string());
        if (!kind) o.at("kind").fail("expected none, sgd, adam or adamw");
        ir.optimizer.kind = *kind;
        ir.optimizer.fused = o.has("fused") && o.at("fused").boolean();
        // Absent: with weight decay, as every IR written before the field was (the exporter's SGD and AdamW have it).
        ir.optimizer.weight_decay = !o.has("weight_decay") || o.at("weight_decay").boolean();
    }
    if (root.has("parameters")) {
        const JsonCursor p = root.at("parameters");
        detail::check_fields(p, {"elements", "tensors"});
        ir.parameter_elements = p.at("elements").non_negative();
        ir.parameter_tensors = p.at("tensors").integer();
        if (ir.parameter_tensors < 0) p.at("tensors").fail("must not be negative");
    }
    if (root.has("memory")) {
        const JsonCursor m = root.at("memory");
        detail::check_fields(m, {"parameters_bytes", "gradients_bytes", "optimizer_state_bytes", "peak_bytes", "method"});
        IrMemory mem;
        mem.parameters = Bytes(detail::byte_count(m.at("parameters_bytes")));
        mem.gradients = Bytes(detail::byte_count(m.at("gradients_bytes")));
        mem.optimizer_state = Bytes(detail::byte_count(m.at("optimizer_state_bytes")));
        mem.peak = Bytes(detail::byte_count(m.at("peak_bytes")));
        mem.method = m.at("method").string();
        ir.memory = mem;
    }
    if (root.has("model_code")) {
        const JsonCursor m = root.at("model_code");
        detail::check_fields(m, {"fastest_reference_seconds", "timed_reference_seconds", "method"});
        ir.model_code_fastest_reference = Seconds(m.at("fastest_reference_seconds").positive());
        if (m.has("timed_reference_seconds")) {
            const JsonCursor timed = m.at("timed_reference_seconds");
            ir.model_code_timed_reference = Seconds(timed.positive());
            if (*ir.model_code_timed_reference < *ir.model_code_fastest_reference) {
                timed.fail("below fastest_reference_seconds: a median of calls cannot be faster than their fastest");
            }
        }
        ir.model_code_method = m.at("method").string();
    }
    const JsonCursor kernels = root.at("kernels");
    const std::size_t n = kernels.array_size();
    if (n == 0) kernels.fail("no kernels");
    ir.list.kernels.reserve(n);
    double flops = 0;
    for (std::size_t i = 0; i < n; ++i) {
        ir.list.kernels.push_back(detail::kernel_from_json(kernels.at(i)));
        flops += ir.list.kernels.back().flops.value();
        if (!std::isfinite(flops)) kernels.at(i).at("flops").fail("the kernels' FLOPs add up to more than a double holds");
        // an inference forward has no backward and no optimizer step
        if (ir.list.mode == StepMode::inference && ir.list.kernels.back().phase != Phase::forward) {
            kernels.at(i).at("phase").fail("an inference IR (mode \"inference\") holds forward kernels only");
        }
    }
    if (ir.list.mode == StepMode::inference && ir.optimizer.kind != OptimizerKind::none) {
        root.at("optimizer").at("kind").fail("an inference IR (mode \"inference\") has no optimizer: expected none");
    }
    return ir;
}

/// Reads a kernel IR file.
[[nodiscard]] inline KernelIr load_kernel_ir(const std::filesystem::path& path) {
    return kernel_ir_from_json(detail::read_json_file(path), path.filename().string());
}

/// One kernel in its JSON form; fields at their default are left out.
[[nodiscard]] inline nlohmann::json to_json(const Kernel& k) {
    nlohmann::json j = {{"op", k.op}, {"kind", to_string(k.kind)}, {"phase", to_string(k.phase)}, {"layer", k.layer}};
    if (k.kind != KernelKind::host_only) {
        j["dtype"] = to_string(k.dtype);
        j["unit"] = to_string(k.unit);
        if (k.flops.value() > 0) j["flops"] = k.flops.value();
        j["bytes_read"] = k.bytes_read.value();
        j["bytes_written"] = k.bytes_written.value();
    }
    if (const auto* g = std::get_if<GemmDims>(&k.dims)) {
        j["gemm"] = {{"m", g->m}, {"n", g->n}, {"k", g->k}, {"batch", g->batch}};
        if (g->layout != GemmLayout::unknown) j["gemm"]["layout"] = to_string(g->layout);
    } else if (const auto* c = std::get_if<ConvDims>(&k.dims)) {
        j["conv"] = {{"pass", to_string(c->pass)}, {"n", c->n}, {"c", c->c}, {"h", c->h}, {"w", c->w}, {"k", c->k},
                     {"r", c->r}, {"s", c->s}, {"stride", detail::pair_json(c->stride_h, c->stride_w)},
                     {"padding", detail::pair_json(c->pad_h, c->pad_w)},
                     {"dilation", detail::pair_json(c->dilation_h, c->dilation_w)}, {"groups", c->groups}};
    } else if (const auto* a = std::get_if<AttentionDims>(&k.dims)) {
        j["attention"] = {{"batch", a->batch},       {"heads", a->heads},   {"seq_q", a->seq_q},
                          {"seq_kv", a->seq_kv},     {"head_dim", a->head_dim}, {"causal", a->causal},
                          {"backend", to_string(a->backend)}, {"backward", k.backward_pass}};
        if (a->dropout > 0) j["attention"]["dropout_p"] = a->dropout;
    } else if (const auto* nd = std::get_if<NormDims>(&k.dims)) {
        j["norm"] = {{"groups", nd->groups}, {"group_elements", nd->group_elements}};
    }
    if (!k.host_dispatch) j["host_dispatch"] = false;
    if (k.host_sync) j["sync"] = true;
    if (k.mixed_dtypes) j["mixed_dtypes"] = true;
    if (k.strided) j["strided"] = true;
    if (k.ranks > 0) j["ranks"] = k.ranks;
    if (k.waits_for_communication) j["waits_for_communication"] = true;
    if (!k.host_op.empty()) j["host_op"] = k.host_op;
    if (!k.source_op.empty()) j["source_op"] = k.source_op;
    if (!k.flag.empty()) j["flag"] = k.flag;
    if (k.python_time.value() > 0) j["python_seconds"] = k.python_time.value();
    return j;
}

/// The IR document (kernel_ir_from_json(to_json(ir)) gives the same kernels back).
[[nodiscard]] inline nlohmann::json to_json(const KernelIr& ir) {
    nlohmann::json kernels = nlohmann::json::array();
    for (const Kernel& k : ir.list.kernels) kernels.push_back(to_json(k));
    nlohmann::json j = {{"schema_version", 1}, {"kind", "roofsim-kernel-ir"}, {"model", ir.list.model},
                        {"origin", ir.list.origin}};
    j["precision"] = to_string(ir.list.precision);
    j["mode"] = to_string(ir.list.mode);
    if (ir.batch > 0) j["batch"] = ir.batch;
    j["optimizer"] = {{"kind", to_string(ir.optimizer.kind)}, {"fused", ir.optimizer.fused}, {"weight_decay", ir.optimizer.weight_decay}};
    if (ir.parameter_tensors > 0 || ir.parameter_elements > 0) {
        j["parameters"] = {{"elements", ir.parameter_elements}, {"tensors", ir.parameter_tensors}};
    }
    if (ir.memory) {
        j["memory"] = {{"parameters_bytes", ir.memory->parameters.value()},
                       {"gradients_bytes", ir.memory->gradients.value()},
                       {"optimizer_state_bytes", ir.memory->optimizer_state.value()},
                       {"peak_bytes", ir.memory->peak.value()},
                       {"method", ir.memory->method}};
    }
    if (ir.model_code_fastest_reference) {
        j["model_code"] = {{"fastest_reference_seconds", ir.model_code_fastest_reference->value()},
                           {"method", ir.model_code_method}};
        if (ir.model_code_timed_reference) j["model_code"]["timed_reference_seconds"] = ir.model_code_timed_reference->value();
    }
    j["kernels"] = std::move(kernels);
    return j;
}

}  // namespace roofsim
