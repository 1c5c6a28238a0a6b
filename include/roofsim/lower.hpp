#pragma once
/// Lowering: a layer graph becomes the kernels PyTorch runs for one training step (forward in layer
/// order, backward in reverse, then the optimizer), under a precision mode. Each op's rule names
/// the PyTorch implementation it follows; byte counts are the least traffic of each kernel (every
/// operand read once, every result written once) unless the rule says the implementation makes
/// more passes.

#include <roofsim/graph.hpp>
#include <roofsim/ir.hpp>
#include <roofsim/precision_mode.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

namespace roofsim {

/// The optimizer a step ends with.
enum class OptimizerKind { none, sgd, adam, adamw };

[[nodiscard]] constexpr std::string_view to_string(OptimizerKind k) {
    switch (k) {
        case OptimizerKind::none: return "none";
        case OptimizerKind::sgd: return "sgd";
        case OptimizerKind::adam: return "adam";
        case OptimizerKind::adamw: return "adamw";
    }
    return "?";
}

[[nodiscard]] inline std::optional<OptimizerKind> optimizer_from_key(std::string_view key) {
    for (OptimizerKind k : {OptimizerKind::none, OptimizerKind::sgd, OptimizerKind::adam, OptimizerKind::adamw}) {
        if (to_string(k) == key) return k;
    }
    return std::nullopt;
}

struct OptimizerOptions {
    OptimizerKind kind = OptimizerKind::sgd;
    bool momentum = true;      ///< SGD with a momentum buffer
    bool weight_decay = true;  ///< SGD: grad += wd * param (an extra pass); AdamW: param *= 1 - lr wd
    bool fused = false;        ///< fused=True (one kernel per group) instead of foreach (the default)
};

struct LoweringOptions {
    std::int64_t batch = 1;
    PrecisionMode precision = PrecisionMode::fp32;
    OptimizerOptions optimizer;
};

/// One layer after shape inference, for reports and memory accounting.
struct LayerSummary {
    std::string name;
    std::string op;
    std::vector<std::int64_t> output_shape;
    DType output_dtype = DType::f32;
    double parameters = 0;      ///< trainable elements
    Bytes saved_for_backward{0};  ///< activations autograd keeps until this layer's backward
    /// The same, tensor by tensor: (tensor, bytes). A tensor saved by several layers (an activation's
    /// output that the next convolution saves too) has one key, so memory counts it once.
    std::vector<std::pair<std::string, Bytes>> saved;
    Bytes output_bytes{0};
};

/// The kernels of a step plus what memory accounting needs.
struct LoweredStep {
    KernelList kernels;
    std::vector<LayerSummary> layers;
    std::vector<double> parameter_tensors;  ///< elements of each parameter tensor
    DType parameter_dtype = DType::f32;
    Bytes input_bytes{0};                   ///< graph inputs resident during the step

    [[nodiscard]] double parameter_count() const {
        return std::accumulate(parameter_tensors.begin(), parameter_tensors.end(), 0.0);
    }
};

namespace detail {

[[nodiscard]] inline double numel(const std::vector<std::int64_t>& shape) {
    double n = 1;
    for (auto d : shape) n *= static_cast<double>(d);
    return n;
}

/// The ops lowering knows, with their arity (inputs), for validation before any work.
inline const std::map<std::string, int>& known_ops() {
    static const std::map<std::string, int> ops = {
        {"linear", 1},       {"matmul", 2},        {"bmm", 2},          {"conv2d", 1},
        {"conv1d", 1},       {"batchnorm2d", 1},   {"layernorm", 1},    {"groupnorm", 1},
        {"rmsnorm", 1},      {"relu", 1},          {"gelu", 1},         {"silu", 1},
        {"tanh", 1},         {"sigmoid", 1},       {"dropout", 1},      {"add", 2},
        {"mul", 2},          {"softmax", 1},       {"log_softmax", 1},  {"cross_entropy", 2},
        {"sdpa", 3},         {"mha", 1},           {"embedding", 1},    {"maxpool2d", 1},
        {"avgpool2d", 1},    {"adaptive_avgpool2d", 1}, {"flatten", 1}, {"reshape", 1},
        {"transpose_contiguous", 1}, {"cat", 2},  {"gelu_tanh_composite", 1}, {"slice", 1},
    };
    return ops;
}

/// Autocast's float32 list (torch.amp docs, "CUDA Ops that can autocast to float32"): these run in
/// float32 even when their input is lower precision.
inline bool autocast_to_fp32(const std::string& op) {
    static const std::set<std::string> ops = {"layernorm", "groupnorm", "softmax", "log_softmax", "cross_entropy",
                                              "rmsnorm"};
    return ops.count(op) != 0;
}

/// Autocast's lower-precision list ("CUDA Ops that can autocast to float16"): matmuls, convolutions,
/// attention, and the RNN cells.
inline bool autocast_to_low(const std::string& op) {
    static const std::set<std::string> ops = {"linear", "matmul", "bmm", "conv2d", "conv1d", "sdpa", "mha"};
    return ops.count(op) != 0;
}

/// A value flowing between layers.
struct Value {
    std::vector<std::int64_t> shape;
    DType dtype = DType::f32;
    bool needs_grad = false;
};

class Lowerer {
public:
    Lowerer(const Graph& g, const LoweringOptions& o) : graph_(g), options_(o), rules_(rules_for(o.precision)) {}

    LoweredStep run() {
        if (options_.batch <= 0) throw GraphError("batch size must be positive");
        step_.kernels.model = graph_.name;
        step_.kernels.precision = std::string(to_string(options_.precision));
        step_.kernels.origin = "lowered from layer graph '" + graph_.name + "'";
        step_.parameter_dtype = rules_.parameter_dtype;
        step_.kernels.kernels.reserve(graph_.layers.size() * 8);
        backward_.reserve(graph_.layers.size());
        declare_inputs();
        count_consumers();
        for (const auto& layer : graph_.layers) lower_layer(layer);
        // Backward: a scalar loss starts from ones_like (one fill); then the layers in reverse.
        const auto& last = graph_.layers.back();
        if (numel(values_.at(last.name).shape) == 1) {
            kernel(last, Phase::backward, "aten::ones_like", KernelKind::elementwise, values_.at(last.name).dtype, 0, 1);
            std::rotate(backward_.back().rbegin(), backward_.back().rbegin() + 1, backward_.back().rend());
        }
        for (auto it = backward_.rbegin(); it != backward_.rend(); ++it) {
            for (auto& k : *it) step_.kernels.kernels.push_back(std::move(k));
        }
        lower_optimizer();
        return std::move(step_);
    }

private:
    const Graph& graph_;
    LoweringOptions options_;
    PrecisionRules rules_;
    LoweredStep step_;
    std::map<std::string, Value> values_;
    std::map<std::string, int> consumers_;
    std::map<std::string, std::string> first_reader_;  // value -> the first layer that reads it
    std::vector<std::vector<Kernel>> backward_;  // one list per layer, in forward order
    std::map<std::string, std::string> alias_;   // in-place outputs -> the tensor they overwrite

    // ---- bookkeeping --------------------------------------------------------------------------

    void declare_inputs() {
        for (const auto& in : graph_.inputs) {
            Value v;
            for (const auto& d : in.shape) v.shape.push_back(d.is_batch ? options_.batch : d.size);
            // bf16 mode converts float32 inputs (model.to(torch.bfloat16) and its data); any other
            // declared dtype is kept (a bfloat16 activation entering an autocast layer stays bfloat16).
            v.dtype = in.dtype == DType::f32 ? rules_.input_dtype : in.dtype;
            v.needs_grad = in.requires_grad;
            if (values_.count(in.name)) throw GraphError("input '" + in.name + "' is declared twice");
            step_.input_bytes += tensor_bytes(numel(v.shape), v.dtype);
            values_[in.name] = v;
        }
        if (graph_.layers.empty()) throw GraphError("graph '" + graph_.name + "' has no layers");
    }

    void count_consumers() {
        for (const auto& l : graph_.layers) {
            auto op = known_ops().find(l.op);
            if (op == known_ops().end()) throw layer_error(l, "unknown op (docs/graph-format.md lists the ops)");
            if (static_cast<int>(l.inputs.size()) != op->second) {
                throw layer_error(l, "inputs: expected " + std::to_string(op->second) + ", got " +
                                         std::to_string(l.inputs.size()));
            }
            for (const auto& i : l.inputs) {
                consumers_[i] += 1;
                first_reader_.emplace(i, l.name);
            }
        }
    }

    const Value& input(const Layer& l, std::size_t i) const {
        auto it = values_.find(l.inputs[i]);
        if (it == values_.end()) {
            throw layer_error(l, "inputs[" + std::to_string(i) + "]: '" + l.inputs[i] +
                                     "' is neither a graph input nor an earlier layer");
        }
        return it->second;
    }

    Kernel& kernel(const Layer& l, Phase phase, std::string op, KernelKind kind, DType dtype, double read_elements,
                   double write_elements, double flops = 0, ComputeUnit unit = ComputeUnit::fp32) {
        Kernel k;
        k.op = std::move(op);
        k.kind = kind;
        k.phase = phase;
        k.layer = l.name;
        k.dtype = dtype;
        k.unit = unit;
        k.flops = Flops(flops);
        k.bytes_read = tensor_bytes(read_elements, dtype);
        k.bytes_written = tensor_bytes(write_elements, dtype);
        k.host_dispatch = false;  // the layer's dispatch marker carries the host cost
        k.source_op = l.op;
        auto& list = phase == Phase::forward ? step_.kernels.kernels : backward_.back();
        list.push_back(std::move(k));
        return list.back();
    }

    /// The host-side dispatch of a layer (module call, autograd node): no GPU work, the host cost
    /// of the layer's op as the framework profile measured it.
    static Kernel marker(const std::string& layer, const std::string& op, Phase phase) {
        Kernel k;
        k.op = "dispatch " + op;
        k.kind = KernelKind::host_only;
        k.phase = phase;
        k.layer = layer;
        k.host_op = op;
        k.host_dispatch = true;
        return k;
    }

    /// An elementwise cast of `elements` from one dtype to another (aten::_to_copy).
    void cast(const Layer& l, Phase phase, double elements, DType from, DType to) {
        Kernel& k = kernel(l, phase, "aten::_to_copy", KernelKind::elementwise, from, elements, 0);
        k.bytes_written = tensor_bytes(elements, to);
    }

    void add_parameter(LayerSummary& s, double elements) {
        step_.parameter_tensors.push_back(elements);
        s.parameters += elements;
    }

    /// The dtype an op computes in, inserting autocast's input casts (and their backward casts).
    DType compute_dtype(const Layer& l, const Value& in) {
        if (!rules_.autocast || !(in.dtype == DType::f32 || in.dtype == rules_.low_dtype)) return in.dtype;
        if (autocast_to_low(l.op) && in.dtype != rules_.low_dtype) {
            cast(l, Phase::forward, numel(in.shape), in.dtype, rules_.low_dtype);
            if (in.needs_grad) cast(l, Phase::backward, numel(in.shape), rules_.low_dtype, in.dtype);
            return rules_.low_dtype;
        }
        if (autocast_to_fp32(l.op) && in.dtype != DType::f32) {
            cast(l, Phase::forward, numel(in.shape), in.dtype, DType::f32);
            if (in.needs_grad) cast(l, Phase::backward, numel(in.shape), DType::f32, in.dtype);
            return DType::f32;
        }
        return in.dtype;
    }

    /// Autocast casts a float32 weight to the compute dtype once per forward; its gradient is cast back.
    void weight_cast(const Layer& l, double elements, DType compute) {
        if (!rules_.autocast || compute == rules_.parameter_dtype) return;
        cast(l, Phase::forward, elements, rules_.parameter_dtype, compute);
        cast(l, Phase::backward, elements, compute, rules_.parameter_dtype);
    }

    /// The tensor a value name stands for: an in-place layer's output is its input's tensor.
    std::string tensor_of(const std::string& value) const {
        auto it = alias_.find(value);
        return it == alias_.end() ? "value:" + value : it->second;
    }

    /// Records a tensor autograd saves for this layer's backward.
    static void save(LayerSummary& s, std::string tensor, Bytes bytes) {
        s.saved.emplace_back(std::move(tensor), bytes);
        s.saved_for_backward += bytes;
    }

    /// Saves input i as the op computes on it: the input's own tensor, or the cast copy autocast made.
    void save_input(LayerSummary& s, const Layer& l, std::size_t i, DType compute) {
        const Value& v = input(l, i);
        if (compute == v.dtype) save(s, tensor_of(l.inputs[i]), tensor_bytes(numel(v.shape), v.dtype));
        else save(s, l.name + ":cast" + std::to_string(i), tensor_bytes(numel(v.shape), compute));
    }

    ComputeUnit matmul_unit(DType d) const { return tensor_unit_for(d, rules_.matmul_unit); }
    ComputeUnit conv_unit(DType d) const { return tensor_unit_for(d, rules_.conv_unit); }

    Kernel& gemm(const Layer& l, Phase phase, const std::string& op, DType dtype, GemmDims g, DType out_dtype) {
        const double in_elements = static_cast<double>(g.batch) * (static_cast<double>(g.m) * static_cast<double>(g.k) +
                                                                   static_cast<double>(g.k) * static_cast<double>(g.n));
        Kernel& k = kernel(l, phase, op, KernelKind::gemm, dtype, in_elements, 0, gemm_flops(g).value(), matmul_unit(dtype));
        k.bytes_written = tensor_bytes(static_cast<double>(g.batch) * static_cast<double>(g.m) * static_cast<double>(g.n), out_dtype);
        k.dims = g;
        return k;
    }

    // ---- layers -------------------------------------------------------------------------------

    void lower_layer(const Layer& l) {
        if (values_.count(l.name)) throw layer_error(l, "name: used twice (layer names must be unique)");
        backward_.emplace_back();
        LayerSummary s{l.name, l.op, {}, DType::f32, 0, Bytes(0), {}, Bytes(0)};
        step_.kernels.kernels.push_back(marker(l.name, l.op, Phase::forward));
        Value out = dispatch(l, s);
        bool any_grad = false;
        for (std::size_t i = 0; i < l.inputs.size(); ++i) any_grad = any_grad || input(l, i).needs_grad;
        out.needs_grad = out.needs_grad || any_grad || s.parameters > 0;
        if (out.needs_grad) backward_.back().insert(backward_.back().begin(), marker(l.name, l.op, Phase::backward));
        else backward_.back().clear();
        // A value read by several layers gets its gradient summed in backward: one add per extra reader.
        for (std::size_t i = 0; i < l.inputs.size(); ++i) {
            const Value& v = input(l, i);
            if (v.needs_grad && consumers_[l.inputs[i]] > 1 && first_reader_[l.inputs[i]] != l.name) {
                kernel(l, Phase::backward, "aten::add_", KernelKind::elementwise, v.dtype, 2 * numel(v.shape), numel(v.shape));
            }
        }
        for (auto d : out.shape) {
            if (d <= 0) throw layer_error(l, "output shape has a non-positive dimension (check the attributes)");
        }
        s.output_shape = out.shape;
        s.output_dtype = out.dtype;
        s.output_bytes = tensor_bytes(numel(out.shape), out.dtype);
        step_.layers.push_back(std::move(s));
        values_[l.name] = std::move(out);
    }


    Value dispatch(const Layer& l, LayerSummary& s) {
        const std::string& op = l.op;
        if (op == "linear") return linear(l, s);
        if (op == "matmul" || op == "bmm") return matmul(l, s);
        if (op == "conv2d") return conv(l, s, 2);
        if (op == "conv1d") return conv(l, s, 1);
        if (op == "batchnorm2d") return batchnorm(l, s);
        if (op == "layernorm" || op == "rmsnorm") return layernorm(l, s);
        if (op == "groupnorm") return groupnorm(l, s);
        if (op == "relu" || op == "gelu" || op == "silu" || op == "tanh" || op == "sigmoid") return activation(l, s);
        if (op == "dropout") return dropout(l, s);
        if (op == "add" || op == "mul") return binary(l, s);
        if (op == "softmax" || op == "log_softmax") return softmax(l, s);
        if (op == "cross_entropy") return cross_entropy(l, s);
        if (op == "sdpa") return sdpa(l, s);
        if (op == "mha") return mha(l, s);
        if (op == "embedding") return embedding(l, s);
        if (op == "maxpool2d" || op == "avgpool2d") return pool(l, s);
        if (op == "adaptive_avgpool2d") return adaptive_pool(l, s);
        if (op == "flatten" || op == "reshape") return reshape(l, s);
        if (op == "slice") return slice(l, s);
        if (op == "gelu_tanh_composite") return gelu_tanh_composite(l, s);
        if (op == "transpose_contiguous") return transpose(l, s);
        if (op == "cat") return cat(l, s);
        throw layer_error(l, "unknown op");
    }

    // linear: y = x W^T + b as one GEMM with the bias in its epilogue (aten::addmm on the flattened
    // input); backward dX = dY W, dW = dY^T X, db = sum(dY) (aten::linear / addmm derivatives).
    Value linear(const Layer& l, LayerSummary& s) {
        const Value& x = input(l, 0);
        const std::int64_t in_f = attr_int(l, "in_features"), out_f = attr_int(l, "out_features");
        const bool bias = attr_bool(l, "bias", true);
        if (x.shape.empty() || x.shape.back() != in_f) {
            throw layer_error(l, "in_features: " + std::to_string(in_f) + " does not match the input's last dimension");
        }
        const double m = numel(x.shape) / static_cast<double>(in_f);
        const auto rows = static_cast<std::int64_t>(m);
        // tied: the weight is another layer's (GPT-2's lm_head shares the token embedding); its
        // gradient is summed into that parameter's gradient.
        const bool tied = attr_bool(l, "tied", false);
        if (!tied) add_parameter(s, static_cast<double>(in_f * out_f));
        if (bias) add_parameter(s, static_cast<double>(out_f));
        const DType dt = compute_dtype(l, x);
        weight_cast(l, static_cast<double>(in_f * out_f) + (bias ? static_cast<double>(out_f) : 0.0), dt);
        if (tied) kernel(l, Phase::backward, "aten::add_", KernelKind::elementwise, rules_.parameter_dtype,
                         2.0 * static_cast<double>(in_f * out_f), static_cast<double>(in_f * out_f));
        gemm(l, Phase::forward, bias ? "aten::addmm" : "aten::mm", dt, {rows, out_f, in_f, 1}, dt);
        save_input(s, l, 0, dt);
        if (x.needs_grad) gemm(l, Phase::backward, "aten::mm", dt, {rows, in_f, out_f, 1}, dt);
        gemm(l, Phase::backward, "aten::mm", dt, {out_f, in_f, rows, 1}, dt);
        if (bias) kernel(l, Phase::backward, "aten::sum", KernelKind::reduction, dt, m * static_cast<double>(out_f), static_cast<double>(out_f));
        Value y{x.shape, dt, true};
        y.shape.back() = out_f;
        return y;
    }

    // matmul / bmm: C = A B over leading batch dimensions; backward dA = dC B^T, dB = A^T dC.
    Value matmul(const Layer& l, LayerSummary& s) {
        const Value& a = input(l, 0);
        const Value& b = input(l, 1);
        if (a.shape.size() < 2 || b.shape.size() < 2) throw layer_error(l, "inputs must have at least 2 dimensions");
        const std::int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back();
        const std::int64_t k2 = b.shape[b.shape.size() - 2], n = b.shape.back();
        if (k != k2) throw layer_error(l, "inner dimensions differ: " + std::to_string(k) + " vs " + std::to_string(k2));
        const double batch_a = numel(a.shape) / static_cast<double>(m * k);
        const double batch_b = numel(b.shape) / static_cast<double>(k * n);
        if (batch_a != batch_b) throw layer_error(l, "batch dimensions differ (broadcasting is not modelled)");
        const auto batch = static_cast<std::int64_t>(batch_a);
        DType dt = compute_dtype(l, a);
        if (b.dtype != dt && rules_.autocast) cast(l, Phase::forward, numel(b.shape), b.dtype, dt);
        const std::string name = batch > 1 ? "aten::bmm" : "aten::mm";
        gemm(l, Phase::forward, name, dt, {m, n, k, batch}, dt);
        save_input(s, l, 0, dt);
        save_input(s, l, 1, dt);
        if (a.needs_grad) gemm(l, Phase::backward, name, dt, {m, k, n, batch}, dt);
        if (b.needs_grad) gemm(l, Phase::backward, name, dt, {k, n, m, batch}, dt);
        Value c{a.shape, dt, a.needs_grad || b.needs_grad};
        c.shape.back() = n;
        return c;
    }

    // conv: cuDNN forward; backward-data (when the input needs a gradient), backward-filter, and a
    // bias reduction (aten::convolution_backward).
    Value conv(const Layer& l, LayerSummary& s, std::size_t rank) {
        const Value& x = input(l, 0);
        if (x.shape.size() != rank + 2) throw layer_error(l, "input must be N x C x spatial (" + std::to_string(rank + 2) + " dimensions)");
        const std::int64_t c = attr_int(l, "in_channels"), k = attr_int(l, "out_channels");
        const auto ks = attr_ints(l, "kernel_size", rank), st = attr_ints(l, "stride", rank, 1);
        const auto pad = attr_ints(l, "padding", rank, 0), dil = attr_ints(l, "dilation", rank, 1);
        const std::int64_t groups = attr_int(l, "groups", 1);
        const bool bias = attr_bool(l, "bias", true);
        if (x.shape[1] != c) throw layer_error(l, "in_channels: " + std::to_string(c) + " does not match the input");
        if (groups <= 0 || c % groups != 0 || k % groups != 0) throw layer_error(l, "groups: must divide in_channels and out_channels");
        ConvDims d;
        d.n = x.shape[0];
        d.c = c;
        d.k = k;
        d.groups = groups;
        if (rank == 2) {
            d.h = x.shape[2]; d.w = x.shape[3]; d.r = ks[0]; d.s = ks[1];
            d.stride_h = st[0]; d.stride_w = st[1]; d.pad_h = pad[0]; d.pad_w = pad[1];
            d.dilation_h = dil[0]; d.dilation_w = dil[1];
        } else {
            d.h = 1; d.w = x.shape[2]; d.r = 1; d.s = ks[0];
            d.stride_w = st[0]; d.pad_w = pad[0]; d.dilation_w = dil[0];
        }
        if (d.p() <= 0 || d.q() <= 0) throw layer_error(l, "kernel_size: larger than the padded input");
        const double weights = static_cast<double>(k * (c / groups) * d.r * d.s);
        add_parameter(s, weights);
        if (bias) add_parameter(s, static_cast<double>(k));
        const DType dt = compute_dtype(l, x);
        weight_cast(l, weights + (bias ? static_cast<double>(k) : 0.0), dt);
        const double in_el = numel(x.shape);
        const double out_el = static_cast<double>(d.n * k * d.p() * d.q());
        auto pass = [&](Phase ph, ConvPass p, double read_el, double write_el) {
            ConvDims dp = d;
            dp.pass = p;
            Kernel& kk = kernel(l, ph, "aten::convolution", KernelKind::conv, dt, read_el, write_el, conv_flops(dp).value(), conv_unit(dt));
            kk.dims = dp;
            if (p != ConvPass::forward) kk.op = "aten::convolution_backward";
        };
        pass(Phase::forward, ConvPass::forward, in_el + weights, out_el);
        save_input(s, l, 0, dt);
        if (x.needs_grad) pass(Phase::backward, ConvPass::backward_data, out_el + weights, in_el);
        pass(Phase::backward, ConvPass::backward_filter, out_el + in_el, weights);
        if (bias) kernel(l, Phase::backward, "aten::convolution_backward", KernelKind::reduction, dt, out_el, static_cast<double>(k));
        Value y{x.shape, dt, true};
        y.shape[1] = k;
        if (rank == 2) { y.shape[2] = d.p(); y.shape[3] = d.q(); }
        else y.shape[2] = d.q();
        return y;
    }

    // batchnorm2d in training mode (cuDNN): forward reads x twice (statistics, then normalize) and
    // writes y; backward reads x and dY twice (reductions, then dX) and writes dX.
    Value batchnorm(const Layer& l, LayerSummary& s) {
        const Value& x = input(l, 0);
        const std::int64_t features = attr_int(l, "num_features");
        if (x.shape.size() != 4 || x.shape[1] != features) throw layer_error(l, "num_features: does not match input channels");
        add_parameter(s, 2.0 * static_cast<double>(features));
        const double n = numel(x.shape);
        kernel(l, Phase::forward, "aten::cudnn_batch_norm", KernelKind::normalization, x.dtype, 2 * n, n, 0);
        save_input(s, l, 0, x.dtype);
        kernel(l, Phase::backward, "aten::cudnn_batch_norm_backward", KernelKind::normalization, x.dtype, 4 * n, n, 0);
        return Value{x.shape, x.dtype, true};
    }

    // layernorm / rmsnorm over the trailing dimensions: one forward kernel (Welford per row);
    // backward: dX, then the weight (and bias) gradients (aten::native_layer_norm_backward).
    Value layernorm(const Layer& l, LayerSummary& s) {
        const Value& x = input(l, 0);
        const auto shape = attr_ints(l, "normalized_shape", 0);
        const bool affine = attr_bool(l, "elementwise_affine", true);
        double normalized = 1;
        for (auto d : shape) normalized *= static_cast<double>(d);
        if (shape.empty() || shape.size() > x.shape.size() ||
            !std::equal(shape.rbegin(), shape.rend(), x.shape.rbegin())) {
            throw layer_error(l, "normalized_shape: does not match the input's trailing dimensions");
        }
        const bool rms = l.op == "rmsnorm";
        if (affine) add_parameter(s, rms ? normalized : 2 * normalized);
        const DType dt = compute_dtype(l, x);
        const double n = numel(x.shape);
        const std::string fwd = rms ? "aten::_fused_rms_norm" : "aten::native_layer_norm";
        kernel(l, Phase::forward, fwd, KernelKind::normalization, dt, n, n, 0);
        save_input(s, l, 0, dt);
        kernel(l, Phase::backward, fwd + "_backward", KernelKind::normalization, dt, 2 * n, n, 0);
        if (affine) kernel(l, Phase::backward, fwd + "_backward", KernelKind::reduction, dt, 2 * n, normalized);
        return Value{x.shape, dt, true};
    }

    // groupnorm: statistics kernel, then normalize (aten::native_group_norm); backward: per-group
    // reductions, then dX, then weight/bias gradients.
    Value groupnorm(const Layer& l, LayerSummary& s) {
        const Value& x = input(l, 0);
        const std::int64_t groups = attr_int(l, "num_groups"), channels = attr_int(l, "num_channels");
        if (x.shape.size() < 2 || x.shape[1] != channels) throw layer_error(l, "num_channels: does not match the input");
        if (groups <= 0 || channels % groups != 0) throw layer_error(l, "num_groups: must divide num_channels");
        add_parameter(s, 2.0 * static_cast<double>(channels));
        const DType dt = compute_dtype(l, x);
        const double n = numel(x.shape);
        kernel(l, Phase::forward, "aten::native_group_norm", KernelKind::reduction, dt, n, 0);
        kernel(l, Phase::forward, "aten::native_group_norm", KernelKind::normalization, dt, n, n);
        save_input(s, l, 0, dt);
        kernel(l, Phase::backward, "aten::native_group_norm_backward", KernelKind::reduction, dt, 2 * n, 0);
        kernel(l, Phase::backward, "aten::native_group_norm_backward", KernelKind::normalization, dt, 2 * n, n);
        return Value{x.shape, dt, true};
    }

    // activations: one elementwise pass forward; backward reads dY and the saved input (gelu, silu)
    // or output (relu, tanh, sigmoid) and writes dX.
    Value activation(const Layer& l, LayerSummary& s) {
        const Value& x = input(l, 0);
        const double n = numel(x.shape);
        kernel(l, Phase::forward, "aten::" + l.op, KernelKind::elementwise, x.dtype, n, n);
        // relu, tanh and sigmoid save their output; gelu and silu their input. inplace=True (torchvision's
        // ReLU) writes the output over the input: no new tensor.
        if (attr_bool(l, "inplace", false)) alias_[l.name] = tensor_of(l.inputs[0]);
        const bool saves_output = l.op == "relu" || l.op == "tanh" || l.op == "sigmoid";
        save(s, saves_output ? tensor_of(l.name) : tensor_of(l.inputs[0]), tensor_bytes(n, x.dtype));
        kernel(l, Phase::backward, "aten::" + l.op + "_backward", KernelKind::elementwise, x.dtype, 2 * n, n);
        return Value{x.shape, x.dtype, x.needs_grad};
    }

    // dropout (training): writes the output and a one-byte mask; backward multiplies dY by the mask.
    Value dropout(const Layer& l, LayerSummary& s) {
        const Value& x = input(l, 0);
        const double p = attr_real(l, "p", 0.5);
        if (p < 0 || p >= 1) throw layer_error(l, "p: must be in [0, 1)");
        const double n = numel(x.shape);
        Kernel& f = kernel(l, Phase::forward, "aten::native_dropout", KernelKind::elementwise, x.dtype, n, n);
        f.bytes_written += tensor_bytes(n, DType::boolean);
        save(s, l.name + ":mask", tensor_bytes(n, DType::boolean));
        Kernel& b = kernel(l, Phase::backward, "aten::native_dropout_backward", KernelKind::elementwise, x.dtype, n, n);
        b.bytes_read += tensor_bytes(n, DType::boolean);
        return Value{x.shape, x.dtype, x.needs_grad};
    }

    // add: one pass; its gradient passes through with no kernel. mul: one pass; backward computes
    // dA = dY * B and dB = dY * A.
    Value binary(const Layer& l, LayerSummary& s) {
        const Value& a = input(l, 0);
        const Value& b = input(l, 1);
        // The second input may broadcast over leading dimensions (b's shape a suffix of a's, leading 1s
        // allowed): its gradient is then reduced over them.
        std::vector<std::int64_t> b_core = b.shape;
        while (!b_core.empty() && b_core.front() == 1 && b_core.size() > 1) b_core.erase(b_core.begin());
        const bool broadcast = a.shape != b.shape;
        if (broadcast && (b_core.size() > a.shape.size() || !std::equal(b_core.rbegin(), b_core.rend(), a.shape.rbegin()))) {
            throw layer_error(l, "inputs: the second must have the first's shape or broadcast over its leading dimensions");
        }
        const DType dt = (a.dtype == DType::f32 || b.dtype == DType::f32) ? DType::f32 : a.dtype;  // type promotion
        const double n = numel(a.shape);
        kernel(l, Phase::forward, "aten::" + l.op, KernelKind::elementwise, dt, n + numel(b.shape), n);
        if (broadcast && b.needs_grad) kernel(l, Phase::backward, "aten::sum", KernelKind::reduction, dt, n, numel(b.shape));
        if (l.op == "mul") {
            save_input(s, l, 0, dt);
            save_input(s, l, 1, dt);
            if (a.needs_grad) kernel(l, Phase::backward, "aten::mul", KernelKind::elementwise, dt, 2 * n, n);
            if (b.needs_grad) kernel(l, Phase::backward, "aten::mul", KernelKind::elementwise, dt, 2 * n, n);
        }
        return Value{a.shape, dt, a.needs_grad || b.needs_grad};
    }

    // softmax / log_softmax along a dimension: one pass each way; backward reads Y and dY.
    Value softmax(const Layer& l, LayerSummary& s) {
        const Value& x = input(l, 0);
        (void)attr_int(l, "dim", -1);
        const DType dt = compute_dtype(l, x);
        const double n = numel(x.shape);
        kernel(l, Phase::forward, "aten::_" + l.op, KernelKind::softmax, dt, n, n);
        save(s, tensor_of(l.name), tensor_bytes(n, dt));
        kernel(l, Phase::backward, "aten::_" + l.op + "_backward_data", KernelKind::softmax, dt, 2 * n, n);
        return Value{x.shape, dt, x.needs_grad};
    }

    // cross_entropy(logits N x C, targets N): log_softmax + nll_loss forward; backward: nll_loss
    // backward (zero-fill N x C, scatter) then log_softmax backward.
    Value cross_entropy(const Layer& l, LayerSummary& s) {
        const Value& x = input(l, 0);
        const Value& t = input(l, 1);
        if (x.shape.size() != 2 || t.shape.size() != 1 || t.shape[0] != x.shape[0]) {
            throw layer_error(l, "inputs: expected logits N x C and integer targets N");
        }
        const DType dt = compute_dtype(l, x);
        const double n = numel(x.shape), rows = static_cast<double>(x.shape[0]);
        kernel(l, Phase::forward, "aten::_log_softmax", KernelKind::softmax, dt, n, n);
        Kernel& nll = kernel(l, Phase::forward, "aten::nll_loss_forward", KernelKind::reduction, dt, rows, 1);
        nll.bytes_read += tensor_bytes(rows, t.dtype);
        save(s, l.name + ":log_softmax", tensor_bytes(n, dt));
        kernel(l, Phase::backward, "aten::nll_loss_backward", KernelKind::elementwise, dt, 0, n);
        kernel(l, Phase::backward, "aten::nll_loss_backward", KernelKind::elementwise, dt, rows, rows);
        kernel(l, Phase::backward, "aten::_log_softmax_backward_data", KernelKind::softmax, dt, 2 * n, n);
        return Value{{1}, dt, x.needs_grad};
    }

    void attention_kernels(const Layer& l, AttentionDims a, DType dt) {
        const double qkv = static_cast<double>(a.batch * a.heads * a.head_dim) * static_cast<double>(a.seq_q + 2 * a.seq_kv);
        const double o = static_cast<double>(a.batch * a.heads * a.seq_q * a.head_dim);
        const double rows = static_cast<double>(a.batch * a.heads * a.seq_q);
        if (a.backend == AttentionBackend::math) {
            // math path: bmm(Q, K^T) -> softmax -> bmm(P, V), with the score matrix in memory.
            const std::int64_t bh = a.batch * a.heads;
            const double scores = static_cast<double>(bh * a.seq_q * a.seq_kv);
            kernel(l, Phase::forward, "aten::mul", KernelKind::elementwise, dt, o, o);  // q * scale
            gemm(l, Phase::forward, "aten::bmm", dt, {a.seq_q, a.seq_kv, a.head_dim, bh}, dt);
            if (a.causal) kernel(l, Phase::forward, "aten::add", KernelKind::elementwise, dt, scores, scores);
            kernel(l, Phase::forward, "aten::_softmax", KernelKind::softmax, dt, scores, scores);
            gemm(l, Phase::forward, "aten::bmm", dt, {a.seq_q, a.head_dim, a.seq_kv, bh}, dt);
            gemm(l, Phase::backward, "aten::bmm", dt, {a.seq_q, a.seq_kv, a.head_dim, bh}, dt);  // dP = dO V^T
            gemm(l, Phase::backward, "aten::bmm", dt, {a.seq_kv, a.head_dim, a.seq_q, bh}, dt);  // dV = P^T dO
            kernel(l, Phase::backward, "aten::_softmax_backward_data", KernelKind::softmax, dt, 2 * scores, scores);
            gemm(l, Phase::backward, "aten::bmm", dt, {a.seq_q, a.head_dim, a.seq_kv, bh}, dt);  // dQ = dS K
            gemm(l, Phase::backward, "aten::bmm", dt, {a.seq_kv, a.head_dim, a.seq_q, bh}, dt);  // dK = dS^T Q
            kernel(l, Phase::backward, "aten::mul", KernelKind::elementwise, dt, o, o);
            return;
        }
        const std::string name = a.backend == AttentionBackend::flash ? "aten::_scaled_dot_product_flash_attention"
                                                                      : "aten::_scaled_dot_product_efficient_attention";
        Kernel& f = kernel(l, Phase::forward, name, KernelKind::attention, dt, qkv, o,
                           attention_flops(a, false).value(), matmul_unit(dt));
        f.bytes_written += tensor_bytes(rows, DType::f32);  // log-sum-exp per row
        f.dims = a;
        // backward: a preprocessing pass (rowsum(dO * O)) and the fused backward kernel.
        kernel(l, Phase::backward, name + "_backward", KernelKind::reduction, dt, 2 * o, 0);
        Kernel& b = kernel(l, Phase::backward, name + "_backward", KernelKind::attention, dt, qkv + 2 * o, qkv,
                           attention_flops(a, true).value(), matmul_unit(dt));
        b.dims = a;
        b.backward_pass = true;
    }

    // sdpa(q, k, v) with q B x H x L x D: the backend's fused kernels (flash / memory-efficient) or
    // the math path.
    Value sdpa(const Layer& l, LayerSummary& s) {
        const Value& q = input(l, 0);
        const Value& k = input(l, 1);
        if (q.shape.size() != 4 || k.shape.size() != 4) throw layer_error(l, "inputs: expected B x H x L x D tensors");
        AttentionDims a;
        a.batch = q.shape[0]; a.heads = q.shape[1]; a.seq_q = q.shape[2]; a.head_dim = q.shape[3];
        a.seq_kv = k.shape[2];
        a.causal = attr_bool(l, "is_causal", false);
        const auto backend = attention_backend_from_key(attr_string(l, "backend", "flash"));
        if (!backend) throw layer_error(l, "backend: expected flash, efficient or math");
        a.backend = *backend;
        const DType dt = compute_dtype(l, q);
        attention_kernels(l, a, dt);
        for (std::size_t i = 0; i < 3; ++i) save_input(s, l, i, dt);
        save(s, tensor_of(l.name), tensor_bytes(numel(q.shape), dt));
        return Value{q.shape, dt, true};
    }

    /// Backward of nn.MultiheadAttention's output projection (dX, dW, db) and of the copy that
    /// merged the heads; `tokens` rows of width `e`.
    void mha_out_projection_backward(const Layer& l, DType dt, std::int64_t tokens, std::int64_t e) {
        const double te = static_cast<double>(tokens * e);
        gemm(l, Phase::backward, "aten::mm", dt, {tokens, e, e, 1}, dt);
        gemm(l, Phase::backward, "aten::mm", dt, {e, e, tokens, 1}, dt);
        kernel(l, Phase::backward, "aten::sum", KernelKind::reduction, dt, te, static_cast<double>(e));
        kernel(l, Phase::backward, "aten::clone", KernelKind::copy, dt, te, te);
    }

    /// Backward of the copy that split the heads and of the packed input projection (dX when the
    /// input needs it, dW, db).
    void mha_in_projection_backward(const Layer& l, DType dt, std::int64_t tokens, std::int64_t e, bool input_grad) {
        const double te = static_cast<double>(tokens * e);
        kernel(l, Phase::backward, "aten::clone", KernelKind::copy, dt, 3 * te, 3 * te);
        if (input_grad) gemm(l, Phase::backward, "aten::mm", dt, {tokens, e, 3 * e, 1}, dt);
        gemm(l, Phase::backward, "aten::mm", dt, {3 * e, e, tokens, 1}, dt);
        kernel(l, Phase::backward, "aten::sum", KernelKind::reduction, dt, 3 * te, static_cast<double>(3 * e));
    }

    // nn.MultiheadAttention(x, x, x) in training (need_weights=True, the default): packed input
    // projection, a copy to split heads, scaled Q K^T (baddbmm), softmax, P V (bmm), the head-averaged
    // weights, and the output projection (torch.nn.functional.multi_head_attention_forward).
    Value mha(const Layer& l, LayerSummary& s) {
        const Value& x = input(l, 0);
        if (x.shape.size() != 3) throw layer_error(l, "input: expected B x L x E (batch_first)");
        const std::int64_t e = attr_int(l, "embed_dim"), heads = attr_int(l, "num_heads");
        if (x.shape[2] != e) throw layer_error(l, "embed_dim: does not match the input");
        if (heads <= 0 || e % heads != 0) throw layer_error(l, "num_heads: must divide embed_dim");
        const std::int64_t b = x.shape[0], len = x.shape[1], d = e / heads, bh = b * heads;
        const double tokens = static_cast<double>(b * len);
        add_parameter(s, static_cast<double>(3 * e * e + 3 * e));  // in_proj weight + bias
        add_parameter(s, static_cast<double>(e * e + e));          // out_proj
        const DType dt = compute_dtype(l, x);
        weight_cast(l, static_cast<double>(4 * e * e + 4 * e), dt);
        const double te = tokens * static_cast<double>(e);
        const double scores = static_cast<double>(bh * len * len);
        if (!attr_bool(l, "need_weights", true)) {
            // need_weights=False: the packed projection, a copy to split heads, SDPA (flash for 16-bit,
            // memory-efficient for float32), a copy to merge heads, the output projection.
            gemm(l, Phase::forward, "aten::addmm", dt, {b * len, 3 * e, e, 1}, dt);
            kernel(l, Phase::forward, "aten::clone", KernelKind::copy, dt, 3 * te, 3 * te);
            AttentionDims a{b, heads, len, len, d, false,
                            dt == DType::f32 ? AttentionBackend::efficient : AttentionBackend::flash};
            attention_kernels(l, a, dt);
            kernel(l, Phase::forward, "aten::clone", KernelKind::copy, dt, te, te);
            gemm(l, Phase::forward, "aten::addmm", dt, {b * len, e, e, 1}, dt);
            save(s, l.name + ":internals", tensor_bytes(6 * te, dt));
            mha_out_projection_backward(l, dt, b * len, e);
            mha_in_projection_backward(l, dt, b * len, e, x.needs_grad);
            return Value{x.shape, dt, true};
        }
        // forward
        gemm(l, Phase::forward, "aten::addmm", dt, {b * len, 3 * e, e, 1}, dt);
        kernel(l, Phase::forward, "aten::clone", KernelKind::copy, dt, 3 * te, 3 * te);  // split heads
        kernel(l, Phase::forward, "aten::mul", KernelKind::elementwise, dt, te, te);        // q * scale
        gemm(l, Phase::forward, "aten::baddbmm", dt, {len, len, d, bh}, dt);
        kernel(l, Phase::forward, "aten::_softmax", KernelKind::softmax, dt, scores, scores);
        gemm(l, Phase::forward, "aten::bmm", dt, {len, d, len, bh}, dt);
        kernel(l, Phase::forward, "aten::clone", KernelKind::copy, dt, te, te);            // merge heads
        gemm(l, Phase::forward, "aten::addmm", dt, {b * len, e, e, 1}, dt);
        kernel(l, Phase::forward, "aten::mean", KernelKind::reduction, dt, scores, static_cast<double>(b * len * len));
        save(s, l.name + ":internals", tensor_bytes(4 * te + scores, dt));
        // backward (reverse order)
        mha_out_projection_backward(l, dt, b * len, e);
        gemm(l, Phase::backward, "aten::bmm", dt, {len, len, d, bh}, dt);
        gemm(l, Phase::backward, "aten::bmm", dt, {len, d, len, bh}, dt);
        kernel(l, Phase::backward, "aten::_softmax_backward_data", KernelKind::softmax, dt, 2 * scores, scores);
        gemm(l, Phase::backward, "aten::bmm", dt, {len, d, len, bh}, dt);
        gemm(l, Phase::backward, "aten::bmm", dt, {len, d, len, bh}, dt);
        kernel(l, Phase::backward, "aten::mul", KernelKind::elementwise, dt, te, te);
        mha_in_projection_backward(l, dt, b * len, e, x.needs_grad);
        return Value{x.shape, dt, true};
    }

    // embedding: gather rows forward; backward zero-fills the weight gradient, sorts the indices and
    // accumulates rows (aten::embedding_dense_backward).
    Value embedding(const Layer& l, LayerSummary& s) {
        const Value& idx = input(l, 0);
        const std::int64_t rows = attr_int(l, "num_embeddings"), dim = attr_int(l, "embedding_dim");
        const double lookups = numel(idx.shape);
        add_parameter(s, static_cast<double>(rows * dim));
        const DType dt = rules_.parameter_dtype;
        Kernel& f = kernel(l, Phase::forward, "aten::embedding", KernelKind::embedding, dt, lookups * static_cast<double>(dim),
                           lookups * static_cast<double>(dim));
        f.bytes_read += tensor_bytes(lookups, idx.dtype);
        save(s, tensor_of(l.inputs[0]), tensor_bytes(lookups, idx.dtype));
        kernel(l, Phase::backward, "aten::embedding_dense_backward", KernelKind::elementwise, dt, 0,
               static_cast<double>(rows * dim));
        kernel(l, Phase::backward, "aten::embedding_dense_backward", KernelKind::copy, idx.dtype, 4 * lookups, 4 * lookups);
        kernel(l, Phase::backward, "aten::embedding_dense_backward", KernelKind::embedding, dt,
                             lookups * static_cast<double>(dim), lookups * static_cast<double>(dim));
        Value y{idx.shape, dt, true};
        y.shape.push_back(dim);
        return y;
    }

    // max / avg pooling: one pass forward (max also writes int64 indices); backward writes dX
    // reading dY (and the indices).
    Value pool(const Layer& l, LayerSummary& s) {
        const Value& x = input(l, 0);
        if (x.shape.size() != 4) throw layer_error(l, "input: expected N x C x H x W");
        const auto ks = attr_ints(l, "kernel_size", 2), st = attr_ints(l, "stride", 2, ks[0]), pad = attr_ints(l, "padding", 2, 0);
        Value y = x;
        for (int i = 0; i < 2; ++i) {
            if (st[static_cast<std::size_t>(i)] <= 0) throw layer_error(l, "stride: must be positive");
            y.shape[static_cast<std::size_t>(2 + i)] =
                (x.shape[static_cast<std::size_t>(2 + i)] + 2 * pad[static_cast<std::size_t>(i)] - ks[static_cast<std::size_t>(i)]) /
                    st[static_cast<std::size_t>(i)] + 1;
        }
        const double n_in = numel(x.shape), n_out = numel(y.shape);
        const bool max = l.op == "maxpool2d";
        Kernel& f = kernel(l, Phase::forward, max ? "aten::max_pool2d_with_indices" : "aten::avg_pool2d",
                           KernelKind::elementwise, x.dtype, n_in, n_out);
        if (max) f.bytes_written += tensor_bytes(n_out, DType::i64);
        save(s, tensor_of(l.inputs[0]), tensor_bytes(n_in, x.dtype));
        if (max) save(s, l.name + ":indices", tensor_bytes(n_out, DType::i64));
        Kernel& b = kernel(l, Phase::backward, max ? "aten::max_pool2d_with_indices_backward" : "aten::avg_pool2d_backward",
                           KernelKind::elementwise, x.dtype, n_out, n_in);
        if (max) b.bytes_read += tensor_bytes(n_out, DType::i64);
        return y;
    }

    // adaptive average pooling to output_size: a reduction forward, an expanding pass backward.
    Value adaptive_pool(const Layer& l, LayerSummary& s) {
        const Value& x = input(l, 0);
        if (x.shape.size() != 4) throw layer_error(l, "input: expected N x C x H x W");
        const auto out = attr_ints(l, "output_size", 2);
        Value y = x;
        y.shape[2] = out[0];
        y.shape[3] = out[1];
        const double n_in = numel(x.shape), n_out = numel(y.shape);
        kernel(l, Phase::forward, "aten::_adaptive_avg_pool2d", KernelKind::reduction, x.dtype, n_in, n_out);
        (void)s;
        kernel(l, Phase::backward, "aten::_adaptive_avg_pool2d_backward", KernelKind::elementwise, x.dtype, n_out, n_in);
        return y;
    }

    // flatten / reshape of a contiguous tensor: a view, dispatched on the host, no kernel.
    Value reshape(const Layer& l, LayerSummary&) {
        const Value& x = input(l, 0);
        Value y = x;
        if (l.op == "flatten") {
            const std::int64_t start = attr_int(l, "start_dim", 1);
            if (start < 0 || start >= static_cast<std::int64_t>(x.shape.size())) throw layer_error(l, "start_dim: out of range");
            y.shape.assign(x.shape.begin(), x.shape.begin() + start);
            y.shape.push_back(static_cast<std::int64_t>(numel(x.shape) / numel(y.shape)));
        } else {
            y.shape = attr_ints(l, "shape", 0);
            std::int64_t known = 1;
            int infer = -1;
            for (std::size_t i = 0; i < y.shape.size(); ++i) {
                if (y.shape[i] == -1) infer = static_cast<int>(i);
                else known *= y.shape[i];
            }
            if (infer >= 0 && known > 0) y.shape[static_cast<std::size_t>(infer)] = static_cast<std::int64_t>(numel(x.shape)) / known;
            if (numel(y.shape) != numel(x.shape)) throw layer_error(l, "shape: element count differs from the input");
        }
        if (attr_bool(l, "copy", false)) {
            // reshape of a non-contiguous tensor (e.g. heads merged after attention): one copy each way.
            copy_both_ways(l, x);
        }
        return y;
    }

    /// A contiguous copy of x forward, and of its gradient backward (aten::clone both ways).
    void copy_both_ways(const Layer& l, const Value& x) {
        const double n = numel(x.shape);
        kernel(l, Phase::forward, "aten::clone", KernelKind::copy, x.dtype, n, n);
        kernel(l, Phase::backward, "aten::clone", KernelKind::copy, x.dtype, n, n);
    }

    // slice along a dimension (x.narrow / split / chunk): a view; its backward writes the slice's
    // gradient into a zero-filled full-size tensor (aten::slice_backward).
    Value slice(const Layer& l, LayerSummary&) {
        const Value& x = input(l, 0);
        auto dim = attr_int(l, "dim");
        const auto start = attr_int(l, "start"), length = attr_int(l, "length");
        const auto rank = static_cast<std::int64_t>(x.shape.size());
        if (dim < 0) dim += rank;
        if (dim < 0 || dim >= rank) throw layer_error(l, "dim: out of range");
        if (start < 0 || length <= 0 || start + length > x.shape[static_cast<std::size_t>(dim)]) {
            throw layer_error(l, "start/length: outside the input");
        }
        Value y = x;
        y.shape[static_cast<std::size_t>(dim)] = length;
        if (x.needs_grad) kernel(l, Phase::backward, "aten::slice_backward", KernelKind::copy, x.dtype, numel(y.shape), numel(x.shape));
        return y;
    }

    // GPT-2's "gelu_new" written out in Python (transformers NewGELUActivation):
    // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): eight elementwise kernels forward (pow, mul,
    // add, mul, tanh, add, mul, mul) and eleven backward (the autograd of each, plus the sums of the
    // three gradient paths into x).
    Value gelu_tanh_composite(const Layer& l, LayerSummary& s) {
        const Value& x = input(l, 0);
        const double n = numel(x.shape);
        const int forward_reads[] = {1, 1, 2, 1, 1, 1, 1, 2};
        for (int r : forward_reads) kernel(l, Phase::forward, "aten::elementwise", KernelKind::elementwise, x.dtype, r * n, n);
        save(s, l.name + ":internals", tensor_bytes(4 * n, x.dtype));
        const int backward_reads[] = {2, 2, 1, 2, 1, 2, 1, 1, 1, 2, 2};
        for (int r : backward_reads) kernel(l, Phase::backward, "aten::elementwise", KernelKind::elementwise, x.dtype, r * n, n);
        return Value{x.shape, x.dtype, x.needs_grad};
    }

    // x.transpose(d0, d1).contiguous(): one copy each way.
    Value transpose(const Layer& l, LayerSummary&) {
        const Value& x = input(l, 0);
        auto d0 = attr_int(l, "dim0"), d1 = attr_int(l, "dim1");
        const auto rank = static_cast<std::int64_t>(x.shape.size());
        if (d0 < 0) d0 += rank;
        if (d1 < 0) d1 += rank;
        if (d0 < 0 || d1 < 0 || d0 >= rank || d1 >= rank) throw layer_error(l, "dim0/dim1: out of range");
        Value y = x;
        std::swap(y.shape[static_cast<std::size_t>(d0)], y.shape[static_cast<std::size_t>(d1)]);
        copy_both_ways(l, x);
        return y;
    }

    // cat of two tensors: one copy forward; backward slices dY (views, no kernel).
    Value cat(const Layer& l, LayerSummary&) {
        const Value& a = input(l, 0);
        const Value& b = input(l, 1);
        auto dim = attr_int(l, "dim", 0);
        const auto rank = static_cast<std::int64_t>(a.shape.size());
        if (dim < 0) dim += rank;
        if (a.shape.size() != b.shape.size() || dim < 0 || dim >= rank) throw layer_error(l, "dim: out of range or ranks differ");
        Value y = a;
        y.shape[static_cast<std::size_t>(dim)] += b.shape[static_cast<std::size_t>(dim)];
        const double n = numel(y.shape);
        kernel(l, Phase::forward, "aten::cat", KernelKind::copy, a.dtype, n, n);
        y.needs_grad = a.needs_grad || b.needs_grad;
        return y;
    }

    // ---- optimizer ----------------------------------------------------------------------------

    /// One torch._foreach_* op over every parameter-sized tensor list: multi_tensor_apply launches
    /// one kernel per 110 tensors / 320 blocks of 64 Ki elements (ATen MultiTensorApply.cuh, depth 1;
    /// deeper lists hold fewer tensors), reading `reads` and writing `writes` tensors per parameter.
    void foreach_op(const std::string& name, int reads, int writes, int depth) {
        static constexpr int tensors_per_launch[] = {110, 64, 48, 36, 30};
        const int per_launch = tensors_per_launch[std::clamp(depth, 1, 5) - 1];
        const double chunk = 65536, blocks_per_launch = 320;
        double chunks = 0;
        for (double p : step_.parameter_tensors) chunks += std::ceil(p / chunk);
        const double tensors = static_cast<double>(step_.parameter_tensors.size());
        const auto launches = static_cast<int>(std::max(std::ceil(tensors / per_launch), std::ceil(chunks / blocks_per_launch)));
        const double elements = step_.parameter_count();
        const DType dt = rules_.parameter_dtype;
        for (int i = 0; i < launches; ++i) {
            Kernel k;
            k.op = name;
            k.kind = KernelKind::optimizer;
            k.phase = Phase::optimizer;
            k.layer = "optimizer";
            k.dtype = dt;
            k.bytes_read = tensor_bytes(reads * elements / launches, dt);
            k.bytes_written = tensor_bytes(writes * elements / launches, dt);
            k.flops = Flops(2.0 * elements / launches);
            k.host_dispatch = false;  // optimizer.step()'s marker carries the host cost
            step_.kernels.kernels.push_back(std::move(k));
        }
    }

    void lower_optimizer() {
        const auto& o = options_.optimizer;
        if (o.kind == OptimizerKind::none || step_.parameter_tensors.empty()) return;
        step_.kernels.kernels.push_back(marker("optimizer", "optimizer", Phase::optimizer));
        if (o.kind == OptimizerKind::sgd) {
            // torch.optim.sgd._multi_tensor_sgd: grad += wd p; buf = m buf + grad; p -= lr buf.
            if (o.fused) { foreach_op("aten::_fused_sgd_", o.momentum ? 3 : 2, o.momentum ? 2 : 1, 3); return; }
            if (o.weight_decay) foreach_op("aten::_foreach_add", 2, 1, 2);
            if (o.momentum) {
                foreach_op("aten::_foreach_mul_", 1, 1, 1);
                foreach_op("aten::_foreach_add_", 2, 1, 2);
            }
            foreach_op("aten::_foreach_add_", 2, 1, 2);
            return;
        }
        // torch.optim.adam(w)._multi_tensor_adam: (AdamW: p *= 1 - lr wd;) m = lerp(m, g, 1-b1);
        // v = b2 v + (1-b2) g^2 (mul_, addcmul_); s = sqrt(v) / bc2 + eps (sqrt, div_, add_);
        // p = p - step * m / s (addcdiv_). Fused: one kernel reading p, g, m, v and writing p, m, v.
        if (o.fused) { foreach_op(o.kind == OptimizerKind::adamw ? "aten::_fused_adamw_" : "aten::_fused_adam_", 4, 3, 4); return; }
        if (o.kind == OptimizerKind::adamw && o.weight_decay) foreach_op("aten::_foreach_mul_", 1, 1, 1);
        foreach_op("aten::_foreach_lerp_", 2, 1, 2);
        foreach_op("aten::_foreach_mul_", 1, 1, 1);
        foreach_op("aten::_foreach_addcmul_", 2, 1, 3);
        foreach_op("aten::_foreach_sqrt", 1, 1, 2);
        foreach_op("aten::_foreach_div_", 1, 1, 1);
        foreach_op("aten::_foreach_add_", 1, 1, 1);
        foreach_op("aten::_foreach_addcdiv_", 3, 1, 3);
    }
};

}  // namespace detail

/// Lowers a layer graph into the kernels of one training step (forward, backward, optimizer).
/// Throws GraphError naming the layer and the field for an unknown op, a bad shape or attribute.
[[nodiscard]] inline LoweredStep lower(const Graph& graph, const LoweringOptions& options) {
    return detail::Lowerer(graph, options).run();
}

}  // namespace roofsim
