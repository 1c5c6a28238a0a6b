#pragma once
/// Lowering: a layer graph becomes the kernels PyTorch runs for one training step (forward in layer
/// order, backward in reverse, then the optimizer), under a precision mode. Each op's rule names
/// the PyTorch implementation it follows; byte counts are the least traffic of each kernel (every
/// operand read once, every result written once) unless the rule says the implementation makes
/// more passes.

#include <roofsim/detail/concat.hpp>
#include <roofsim/detail/name_index.hpp>
#include <roofsim/graph.hpp>
#include <roofsim/ir.hpp>
#include <roofsim/lower/embedding.hpp>
#include <roofsim/lower/known_ops.hpp>
#include <roofsim/lower/shape.hpp>
#include <roofsim/lower/step.hpp>
#include <roofsim/precision_mode.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace roofsim {

namespace detail {

/// `a`, `b` and `c` as one name: a kernel's op made of parts ("aten::relu_backward"), in place.
[[nodiscard]] inline Name joined_name(std::string_view a, std::string_view b, std::string_view c = {}) {
    Name name = a;
    name += b;
    name += c;
    return name;
}

/// The report row of each kernel of a lowered step: its layer's, in graph order; the optimizer's
/// last (rows appear in order: every layer's forward comes first).
struct KernelRows {
    std::vector<std::uint32_t> of_kernel;
    std::size_t count = 0;
};

/// The bytes of saved tensors given as (key, bytes), each key once at its largest size: the same
/// tensor saved by several layers (an activation's output that the next convolution saves too)
/// counts once. Holds views of the keys.
class SavedTotal {
public:
    explicit SavedTotal(std::size_t tensors = 0) : index_(tensors) {}

    void add(std::string_view key, Bytes bytes) {
        const std::size_t i = index_.insert(key, bytes_.size());
        if (i == bytes_.size()) bytes_.push_back(Bytes(0));
        bytes_[i] = max(bytes_[i], bytes);
    }

    /// The total, added in the order the tensors were first seen (byte counts are whole numbers, so
    /// the order does not change the sum).
    [[nodiscard]] Bytes bytes() const {
        Bytes total{0};
        for (const Bytes b : bytes_) total += b;
        return total;
    }

private:
    NameIndex index_;
    std::vector<Bytes> bytes_;
};

/// A value flowing between layers.
struct Value {
    Shape shape;
    DType dtype = DType::f32;
    bool needs_grad = false;
};

class Lowerer {
public:
    Lowerer(const Graph& g, const LoweringOptions& o) : graph_(g), options_(o), rules_(rules_for(o.precision)) {}

    /// Lowers the graph. With `summaries`, the step has a summary of each layer (lower()); without,
    /// only what a prediction needs: the kernels and parameters, and the memory totals the
    /// summaries add up to (saved_bytes, largest_output).
    LoweredStep run(bool summaries = true) {
        summaries_ = summaries;
        if (options_.batch <= 0) throw GraphError("batch size must be positive");
        step_.kernels.model = graph_.name;
        step_.kernels.precision = options_.precision;
        step_.kernels.origin = "lowered from layer graph '" + graph_.name + "'";
        step_.parameter_dtype = rules_.parameter_dtype;
        step_.kernels.kernels.reserve(graph_.layers.size() * 8);
        if (summaries_) step_.layers.reserve(graph_.layers.size());
        backward_.reserve(graph_.layers.size() * 4);  // ample for the zoo models (at most 3.4 per layer)
        backward_begin_.reserve(graph_.layers.size() + 1);
        saved_.reserve(graph_.layers.size() * 2);
        rows_.of_kernel.reserve(step_.kernels.kernels.capacity());
        declare_inputs();
        count_consumers();
        for (layer_ = 0; layer_ < graph_.layers.size(); ++layer_) lower_layer(graph_.layers[layer_]);
        // Backward: a scalar loss starts from ones_like (one fill); then the layers in reverse.
        const auto& last = graph_.layers.back();
        const Value& loss = values_[graph_.inputs.size() + graph_.layers.size() - 1];
        if (numel(loss.shape) == 1) {
            layer_ = graph_.layers.size() - 1;
            kernel(last, Phase::backward, "aten::ones_like", KernelKind::elementwise, loss.dtype, 0, 1);
            std::rotate(backward_.begin() + static_cast<std::ptrdiff_t>(backward_begin_.back()), backward_.end() - 1,
                        backward_.end());
        }
        backward_begin_.push_back(backward_.size());
        auto& kernels = step_.kernels.kernels;
        kernels.reserve(kernels.size() + backward_.size() + 16);
        for (std::size_t i = graph_.layers.size(); i-- > 0;) {
            const auto begin = backward_.begin() + static_cast<std::ptrdiff_t>(backward_begin_[i]);
            const auto end = backward_.begin() + static_cast<std::ptrdiff_t>(backward_begin_[i + 1]);
            // a run of kernels, copied as bytes (Kernel is trivially copyable)
            kernels.insert(kernels.end(), begin, end);
            rows_.of_kernel.resize(kernels.size(), static_cast<std::uint32_t>(i));
        }
        // The optimizer's kernels go to a row of their own, or to the layer that has its name.
        const std::size_t named = names_.find("optimizer");
        optimizer_row_ = named != none && named >= graph_.inputs.size() ? named - graph_.inputs.size() : graph_.layers.size();
        rows_.count = graph_.layers.size() + 1;
        lower_optimizer();
        if (summaries_) {
            for (std::size_t i = 0; i < step_.layers.size(); ++i) {
                step_.layers[i].output_shape = values_[graph_.inputs.size() + i].shape.to_vector();
            }
            for (const Saved& t : saved_) step_.layers[t.layer].saved.emplace_back(saved_key(t), t.bytes);
        }
        return std::move(step_);
    }

    /// The bytes of the tensors autograd saves, each once (after run).
    [[nodiscard]] Bytes saved_bytes() const {
        // each tensor's largest bytes, by (owner, part); byte counts are whole numbers, so the order
        // of the sum does not change it
        constexpr std::size_t parts = static_cast<std::size_t>(SavedPart::count);
        std::vector<Bytes> largest(value_count() * parts, Bytes(0));
        for (const Saved& t : saved_) {
            Bytes& b = largest[t.owner * parts + static_cast<std::size_t>(t.part)];
            b = max(b, t.bytes);
        }
        Bytes total{0};
        for (const Bytes b : largest) total += b;
        return total;
    }

    /// The largest layer output (after run).
    [[nodiscard]] Bytes largest_output() const { return largest_output_; }

    /// The report row of each kernel (after run).
    [[nodiscard]] KernelRows take_rows() { return std::move(rows_); }

    /// The graph's ops, each once, then any other host op a layer's dispatch markers name (after run):
    /// every op whose framework figures the step looks up.
    [[nodiscard]] const std::vector<std::string_view>& ops() const { return op_names_; }

private:
    static constexpr std::size_t none = NameIndex::none;

    const Graph& graph_;
    LoweringOptions options_;
    PrecisionRules rules_;
    LoweredStep step_;
    // Values by id: the graph inputs, then each layer's output in graph order (as they are
    // defined). Layer inputs are resolved to ids once, before lowering.
    std::vector<Value> values_;
    NameIndex names_;                        // value names to ids
    std::vector<std::uint8_t> name_taken_;   // per layer: 1 where an earlier value has its name
    std::vector<const KnownOp*> op_;         // per layer: its op
    std::vector<const KnownOp*> distinct_ops_;  // the ops of the graph, each once
    std::vector<std::string_view> op_names_;    // and their names, then other host ops of the markers
    std::vector<std::size_t> input_ids_;     // every layer's input ids, layer after layer (none: no such value)
    std::vector<std::size_t> first_input_;   // per layer: where its ids start in input_ids_
    std::vector<int> consumers_;             // per value: how many layer inputs read it
    std::vector<std::size_t> first_reader_;  // per value: the first layer that reads it
    std::vector<std::size_t> tensor_;        // per value: the value whose tensor it is (in-place outputs)
    std::size_t layer_ = 0;                  // the layer being lowered
    std::size_t forward_marker_ = 0;         // its forward dispatch marker's place in the kernels
    // Backward kernels, one run per layer in forward order: layer i's start at backward_begin_[i].
    std::vector<Kernel> backward_;
    std::vector<std::size_t> backward_begin_;
    // Tensors autograd saves, in order: the layer that saves it; what it is, a `part` of the value
    // `owner` (the tensor a value stands for, or one a layer makes for its own backward: saved_key);
    // the bytes. Values' names are unique (lowering refuses one used twice), so ids tell them apart.
    enum class SavedPart : std::uint8_t { value, cast0, cast1, cast2, mask, log_softmax, internals, indices, count };
    struct Saved {
        std::size_t layer, owner;
        SavedPart part;
        Bytes bytes;
    };
    std::vector<Saved> saved_;
    Bytes largest_output_{0};
    KernelRows rows_;
    std::size_t optimizer_row_ = 0;
    double parameter_elements_ = 0, parameter_chunks_ = 0;  // the optimizer's
    bool summaries_ = true;
    // New kernels start as copies of a default one (cheaper than value-initialized ones, which are
    // zero-filled whole first); a layer's, as copies of one with its name and op, dispatched by the
    // layer's marker.
    const Kernel blank_;
    Kernel layer_kernel_ = [] {
        Kernel k;
        k.host_dispatch = false;  // the layer's dispatch marker carries the host cost
        return k;
    }();

    // ---- bookkeeping --------------------------------------------------------------------------

    /// A saved tensor's key in LayerSummary::saved: "value:<name>" for a value's tensor, else
    /// "<layer>:<part>" ("conv1:cast0", "attn:internals").
    [[nodiscard]] std::string saved_key(const Saved& t) const {
        static constexpr std::array<std::string_view, static_cast<std::size_t>(SavedPart::count)> suffixes = {
            "", ":cast0", ":cast1", ":cast2", ":mask", ":log_softmax", ":internals", ":indices"};
        const std::string& name = value_name(t.owner);
        if (t.part == SavedPart::value) return concat("value:", name);
        return concat(name, suffixes[static_cast<std::size_t>(t.part)]);
    }

    [[nodiscard]] std::size_t value_count() const { return graph_.inputs.size() + graph_.layers.size(); }

    [[nodiscard]] const std::string& value_name(std::size_t id) const {
        return id < graph_.inputs.size() ? graph_.inputs[id].name : graph_.layers[id - graph_.inputs.size()].name;
    }

    void declare_inputs() {
        values_.reserve(value_count());
        names_ = NameIndex(value_count());
        for (std::size_t id = 0; id < graph_.inputs.size(); ++id) {
            const auto& in = graph_.inputs[id];
            Value v;
            for (const auto& d : in.shape) v.shape.push_back(d.is_batch ? options_.batch : d.size);
            // bf16 mode converts float32 inputs (model.to(torch.bfloat16) and its data); any other
            // declared dtype is kept (a bfloat16 activation entering an autocast layer stays bfloat16).
            v.dtype = in.dtype == DType::f32 ? rules_.input_dtype : in.dtype;
            v.needs_grad = in.requires_grad;
            if (names_.insert(in.name, id) != id) throw GraphError("input '" + in.name + "' is declared twice");
            step_.input_bytes += tensor_bytes(numel(v.shape), v.dtype);
            values_.push_back(std::move(v));
        }
        if (graph_.layers.empty()) throw GraphError("graph '" + graph_.name + "' has no layers");
    }

    /// Checks each layer's op and arity, resolves its inputs to the values defined before it, and
    /// counts the readers of each value.
    void count_consumers() {
        consumers_.assign(value_count(), 0);
        first_reader_.assign(value_count(), none);
        tensor_.resize(value_count());
        std::iota(tensor_.begin(), tensor_.end(), std::size_t{0});
        first_input_.reserve(graph_.layers.size());
        op_.reserve(graph_.layers.size());
        name_taken_.assign(graph_.layers.size(), false);
        input_ids_.reserve(2 * graph_.layers.size());  // most layers read one or two values
        for (std::size_t li = 0; li < graph_.layers.size(); ++li) {
            const Layer& l = graph_.layers[li];
            // mostly a layer has the op of the one before it
            const KnownOp* op = li > 0 && same_name(l.op, graph_.layers[li - 1].op) ? op_.back() : find_known_op(l.op);
            if (!op) throw layer_error(l, "unknown op (docs/graph-format.md lists the ops)");
            if (static_cast<int>(l.inputs.size()) != op->arity) {
                throw layer_error(l, "inputs: expected " + std::to_string(op->arity) + ", got " +
                                         std::to_string(l.inputs.size()));
            }
            op_.push_back(op);
            if (std::find(distinct_ops_.begin(), distinct_ops_.end(), op) == distinct_ops_.end()) {
                distinct_ops_.push_back(op);
                op_names_.push_back(l.op);
            }
            first_input_.push_back(input_ids_.size());
            // mostly a layer reads the one before it: its value, where no earlier value has its name
            const bool after_unique_layer = li > 0 && name_taken_[li - 1] == 0;
            for (const auto& name : l.inputs) {
                const std::size_t id = after_unique_layer && name == graph_.layers[li - 1].name
                                           ? graph_.inputs.size() + li - 1
                                           : names_.find(name);  // none: reported when the layer is lowered
                input_ids_.push_back(id);
                if (id == none) continue;
                consumers_[id] += 1;
                if (first_reader_[id] == none) first_reader_[id] = li;
            }
            const std::size_t own = graph_.inputs.size() + li;
            name_taken_[li] = names_.insert(l.name, own) != own ? 1 : 0;
        }
    }

    /// The id of input i of the layer being lowered.
    [[nodiscard]] std::size_t input_id(std::size_t i) const { return input_ids_[first_input_[layer_] + i]; }

    const Value& input(const Layer& l, std::size_t i) const {
        const std::size_t id = input_id(i);
        if (id == none) {
            throw layer_error(l, "inputs[" + std::to_string(i) + "]: '" + l.inputs[i] +
                                     "' is neither a graph input nor an earlier layer");
        }
        return values_[id];
    }

    /// A kernel of layer `l`, the layer being lowered (layer_kernel_ holds its name and op).
    Kernel& kernel(const Layer& /*l*/, Phase phase, std::string_view op, KernelKind kind, DType dtype, double read_elements,
                   double write_elements, double flops = 0, ComputeUnit unit = ComputeUnit::fp32) {
        auto& list = phase == Phase::forward ? step_.kernels.kernels : backward_;
        Kernel& k = list.emplace_back(layer_kernel_);
        if (phase == Phase::forward) rows_.of_kernel.push_back(static_cast<std::uint32_t>(layer_));
        k.op = op;
        k.kind = kind;
        k.phase = phase;
        k.dtype = dtype;
        k.unit = unit;
        k.flops = Flops(flops);
        k.bytes_read = tensor_bytes(read_elements, dtype);
        k.bytes_written = tensor_bytes(write_elements, dtype);
        return k;
    }

    /// The host-side dispatch of a layer (module call, autograd node): no GPU work, the host cost
    /// of the layer's op as the framework profile measured it.
    static void marker(Kernel& k, std::string_view layer, std::string_view op, Phase phase) {
        k.op = "dispatch ";
        k.op += op;
        k.kind = KernelKind::host_only;
        k.phase = phase;
        k.layer = layer;
        k.host_op = op;
        k.host_dispatch = true;
    }

    /// The layer being lowered costs the figures of `host_op` (a string with static storage), not its
    /// graph op's, at its forward and/or backward dispatch marker; `host_op` joins the ops whose
    /// figures the step looks up.
    /// The markers keep the layer's graph op as their source op (an IR read back names the layer by it).
    void cost_markers_as(std::string_view host_op, bool forward, bool backward) {
        const auto mark = [&](Kernel& marker) {
            marker.host_op = host_op;
            marker.source_op = layer_kernel_.source_op;
        };
        if (forward) mark(step_.kernels.kernels[forward_marker_]);
        if (backward) mark(backward_[backward_begin_.back()]);  // the backward marker (lower_layer put it first)
        note_host_op(host_op);
    }

    /// `host_op` (a string with static storage) joins the ops whose figures the step looks up.
    void note_host_op(std::string_view host_op) {
        if (std::find(op_names_.begin(), op_names_.end(), host_op) == op_names_.end()) op_names_.push_back(host_op);
    }

    /// A bias gradient: dY (rows x columns) summed over its rows (aten::sum over the leading dims),
    /// with its reduction shape (the speed of PyTorch's column reduction depends on both).
    Kernel& column_sum(const Layer& l, DType dt, std::int64_t rows, std::int64_t columns, Phase phase = Phase::backward) {
        const double c = static_cast<double>(columns);
        Kernel& k = kernel(l, phase, "aten::sum", KernelKind::reduction, dt, static_cast<double>(rows) * c, c);
        k.dims = NormDims{columns, rows};
        return k;
    }

    /// Marks an elementwise kernel as reading two operands of different floating dtypes, each in its
    /// own (`a_elements` of `a`, `b_elements` of `b`): PyTorch's casting loop (is_mixed_elementwise).
    static void read_mixed(Kernel& k, double a_elements, DType a, double b_elements, DType b) {
        k.bytes_read = tensor_bytes(a_elements, a) + tensor_bytes(b_elements, b);
        k.mixed_dtypes = true;
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
        const AutocastList list = op_[layer_]->autocast;
        if (list == AutocastList::lower_precision && in.dtype != rules_.low_dtype) {
            activation_cast(l, in, rules_.low_dtype);
            return rules_.low_dtype;
        }
        if (list == AutocastList::float32 && in.dtype != DType::f32) {
            activation_cast(l, in, DType::f32);
            return DType::f32;
        }
        return in.dtype;
    }

    /// Autocast's cast of an input to `to`: the cast kernel, and its gradient's cast back. Each is
    /// an op of its own on the host (aten::_to_copy; a ToCopyBackward0 node), which a layer's figures
    /// leave out (chain slopes over layers that hand their dtype on), so each gets a dispatch marker
    /// costed as the cast layer (autocast_cast_host_op). A weight's cast (weight_cast) has none: the
    /// layer's figures hold it (every layer of a chain casts its own weight).
    void activation_cast(const Layer& l, const Value& in, DType to) {
        const double n = numel(in.shape);
        cast_marker(l, Phase::forward);
        cast(l, Phase::forward, n, in.dtype, to);
        if (!in.needs_grad) return;
        cast_marker(l, Phase::backward);
        cast(l, Phase::backward, n, to, in.dtype);
    }

    void cast_marker(const Layer& l, Phase phase) {
        if (phase == Phase::forward) {
            marker(step_.kernels.kernels.emplace_back(blank_), l.name, autocast_cast_host_op, phase);
            rows_.of_kernel.push_back(static_cast<std::uint32_t>(layer_));
        } else {
            marker(backward_.emplace_back(blank_), l.name, autocast_cast_host_op, phase);
        }
        note_host_op(autocast_cast_host_op);
    }

    /// Autocast casts a float32 weight to the compute dtype once per forward; its gradient is cast back.
    void weight_cast(const Layer& l, double elements, DType compute) {
        if (!rules_.autocast || compute == rules_.parameter_dtype) return;
        cast(l, Phase::forward, elements, rules_.parameter_dtype, compute);
        cast(l, Phase::backward, elements, compute, rules_.parameter_dtype);
    }

    /// The id of the layer being lowered, as a value.
    [[nodiscard]] std::size_t own_id() const { return graph_.inputs.size() + layer_; }

    /// Records a tensor autograd saves for this layer's backward: `part` of value `owner` (the same
    /// for the same tensor, however many layers save it).
    void save(LayerSummary& s, std::size_t owner, SavedPart part, Bytes bytes) {
        saved_.push_back(Saved{layer_, owner, part, bytes});
        s.saved_for_backward += bytes;
    }

    /// Records a tensor the layer being lowered makes for its own backward.
    void save(LayerSummary& s, SavedPart part, Bytes bytes) { save(s, own_id(), part, bytes); }

    /// Saves the tensor a value stands for: an in-place layer's output is its input's tensor.
    void save_value(LayerSummary& s, std::size_t value, Bytes bytes) { save(s, tensor_[value], SavedPart::value, bytes); }

    /// Saves input i as the op computes on it: the input's own tensor, or the cast copy autocast made.
    void save_input(LayerSummary& s, const Layer& l, std::size_t i, DType compute) {
        const Value& v = input(l, i);
        if (compute == v.dtype) return save_value(s, input_id(i), tensor_bytes(numel(v.shape), v.dtype));
        if (i > 2) throw std::logic_error("a cast copy of input " + std::to_string(i) + ": no op casts more than three");
        save(s, static_cast<SavedPart>(static_cast<int>(SavedPart::cast0) + static_cast<int>(i)), tensor_bytes(numel(v.shape), compute));
    }

    // Attributes, as graph.hpp's attr_int, attr_bool and attr_ints read them (their errors too), found
    // by a scan for an equal name: a layer has a handful, most rejected at their length, where the
    // map's ordered search compares the characters of each name it passes.

    [[nodiscard]] static const AttrValue* find_attr(const Layer& l, std::string_view key) {
        for (const auto& [name, value] : l.attrs) {
            if (name == key) return &value;
        }
        return nullptr;
    }

    /// find_attr of each of `keys`, in one scan of the layer's attributes.
    template <std::size_t N>
    [[nodiscard]] static std::array<const AttrValue*, N> find_attrs(const Layer& l, const std::array<std::string_view, N>& keys) {
        std::array<const AttrValue*, N> found{};
        for (const auto& [name, value] : l.attrs) {
            for (std::size_t i = 0; i < N; ++i) {
                if (name == keys[i]) {
                    found[i] = &value;
                    break;
                }
            }
        }
        return found;
    }

    [[nodiscard]] static std::int64_t int_attr(const Layer& l, std::string_view key,
                                               std::optional<std::int64_t> fallback = std::nullopt) {
        return int_attr(l, key, find_attr(l, key), fallback);
    }

    /// int_attr, of the attribute `v` found under `key` (null: not given).
    [[nodiscard]] static std::int64_t int_attr(const Layer& l, std::string_view key, const AttrValue* v,
                                               std::optional<std::int64_t> fallback = std::nullopt) {
        if (const auto* i = v ? std::get_if<std::int64_t>(v) : nullptr) return *i;
        if (!v && fallback) return *fallback;
        return attr_int(l, std::string(key), fallback);  // throws, naming the attribute and the fault
    }

    [[nodiscard]] static bool bool_attr(const Layer& l, std::string_view key, std::optional<bool> fallback = std::nullopt) {
        return bool_attr(l, key, find_attr(l, key), fallback);
    }

    /// bool_attr, of the attribute `v` found under `key` (null: not given).
    [[nodiscard]] static bool bool_attr(const Layer& l, std::string_view key, const AttrValue* v,
                                        std::optional<bool> fallback = std::nullopt) {
        if (const auto* b = v ? std::get_if<bool>(v) : nullptr) return *b;
        if (!v && fallback) return *fallback;
        return attr_bool(l, std::string(key), fallback);
    }

    /// A 1- or 2-dimensional attribute (kernel size, stride, padding); a single integer is repeated.
    [[nodiscard]] static std::array<std::int64_t, 2> dims_attr(const Layer& l, std::string_view key, std::size_t rank,
                                                               std::optional<std::int64_t> fallback = std::nullopt) {
        return dims_attr(l, key, find_attr(l, key), rank, fallback);
    }

    /// dims_attr, of the attribute `v` found under `key` (null: not given).
    [[nodiscard]] static std::array<std::int64_t, 2> dims_attr(const Layer& l, std::string_view key, const AttrValue* v,
                                                               std::size_t rank,
                                                               std::optional<std::int64_t> fallback = std::nullopt) {
        if (const auto* i = v ? std::get_if<std::int64_t>(v) : nullptr) return {*i, *i};
        const auto* list = v ? std::get_if<std::vector<std::int64_t>>(v) : nullptr;
        if (list && list->size() == rank) return {list->front(), list->back()};
        if (!v && fallback) return {*fallback, *fallback};
        const auto dims = attr_ints(l, std::string(key), rank, fallback);
        return {dims.front(), dims.back()};
    }

    ComputeUnit matmul_unit(DType d) const { return tensor_unit_for(d, rules_.matmul_unit); }
    ComputeUnit conv_unit(DType d) const { return tensor_unit_for(d, rules_.conv_unit); }

    Kernel& gemm(const Layer& l, Phase phase, std::string_view op, DType dtype, GemmDims g, DType out_dtype) {
        const double in_elements = static_cast<double>(g.batch) * (static_cast<double>(g.m) * static_cast<double>(g.k) +
                                                                   static_cast<double>(g.k) * static_cast<double>(g.n));
        Kernel& k = kernel(l, phase, op, KernelKind::gemm, dtype, in_elements, 0, gemm_flops(g).value(), matmul_unit(dtype));
        k.bytes_written = tensor_bytes(static_cast<double>(g.batch) * static_cast<double>(g.m) * static_cast<double>(g.n), out_dtype);
        k.dims = g;
        return k;
    }

    // ---- layers -------------------------------------------------------------------------------

    void lower_layer(const Layer& l) {
        if (name_taken_[layer_] != 0) throw layer_error(l, "name: used twice (layer names must be unique)");
        layer_kernel_.layer = l.name;
        layer_kernel_.source_op = l.op;
        LayerSummary s;
        if (summaries_) {
            s.name = l.name;
            s.op = l.op;
        }
        forward_marker_ = step_.kernels.kernels.size();
        Kernel& forward_marker = step_.kernels.kernels.emplace_back(blank_);
        marker(forward_marker, l.name, l.op, Phase::forward);
        rows_.of_kernel.push_back(static_cast<std::uint32_t>(layer_));
        const std::size_t backward_begin = backward_.size();
        backward_begin_.push_back(backward_begin);
        backward_.emplace_back(forward_marker).phase = Phase::backward;  // the backward marker, unless nothing needs a gradient
        Value out = dispatch(l, s);
        bool any_grad = false;
        for (std::size_t i = 0; i < l.inputs.size(); ++i) any_grad = any_grad || input(l, i).needs_grad;
        out.needs_grad = out.needs_grad || any_grad || s.parameters > 0;
        if (!out.needs_grad) backward_.erase(backward_.begin() + static_cast<std::ptrdiff_t>(backward_begin), backward_.end());
        // A value read by several layers gets its gradient summed in backward: one add per extra reader.
        for (std::size_t i = 0; i < l.inputs.size(); ++i) {
            const Value& v = input(l, i);
            if (v.needs_grad && consumers_[input_id(i)] > 1 && first_reader_[input_id(i)] != layer_) {
                kernel(l, Phase::backward, "aten::add_", KernelKind::elementwise, v.dtype, 2 * numel(v.shape), numel(v.shape));
            }
        }
        for (auto d : out.shape) {
            if (d <= 0) throw layer_error(l, "output shape has a non-positive dimension (check the attributes)");
        }
        s.output_dtype = out.dtype;
        s.output_bytes = tensor_bytes(numel(out.shape), out.dtype);
        largest_output_ = max(largest_output_, s.output_bytes);
        if (summaries_) step_.layers.push_back(std::move(s));  // its output shape and saved tensors come in run()
        values_.push_back(std::move(out));  // the value own_id()
    }

    Value dispatch(const Layer& l, LayerSummary& s) {
        switch (op_[layer_]->rule) {
            case OpRule::linear: return linear(l, s);
            case OpRule::matmul: return matmul(l, s);
            case OpRule::conv2d: return conv(l, s, 2);
            case OpRule::conv1d: return conv(l, s, 1);
            case OpRule::batchnorm: return batchnorm(l, s);
            case OpRule::layernorm: return layernorm(l, s);
            case OpRule::groupnorm: return groupnorm(l, s);
            case OpRule::activation: return activation(l, s);
            case OpRule::dropout: return dropout(l, s);
            case OpRule::binary: return binary(l, s);
            case OpRule::softmax: return softmax(l, s);
            case OpRule::cross_entropy: return cross_entropy(l, s);
            case OpRule::sdpa: return sdpa(l, s);
            case OpRule::mha: return mha(l, s);
            case OpRule::embedding: return embedding(l, s);
            case OpRule::pool: return pool(l, s);
            case OpRule::adaptive_pool: return adaptive_pool(l, s);
            case OpRule::reshape: return reshape(l, s);
            case OpRule::slice: return slice(l, s);
            case OpRule::gelu_tanh_composite: return gelu_tanh_composite(l, s);
            case OpRule::transpose: return transpose(l, s);
            case OpRule::cat: return cat(l, s);
            case OpRule::cast: return cast_layer(l, s);
            case OpRule::sum: return sum_layer(l, s);
        }
        throw layer_error(l, "unknown op");
    }

    // linear: y = x W^T + b as one GEMM with the bias in its epilogue (aten::addmm on the flattened
    // input); backward dX = dY W, dW = dY^T X, db = sum(dY) (aten::linear / addmm derivatives).
    Value linear(const Layer& l, LayerSummary& s) {
        const Value& x = input(l, 0);
        const std::int64_t in_f = int_attr(l, "in_features"), out_f = int_attr(l, "out_features");
        const bool bias = bool_attr(l, "bias", true);
        if (!bias) cost_markers_as(host_op_without_bias(l.op), true, true);
        if (x.shape.empty() || x.shape.back() != in_f) {
            throw layer_error(l, "in_features: " + std::to_string(in_f) + " does not match the input's last dimension");
        }
        const double m = numel(x.shape) / static_cast<double>(in_f);
        const auto rows = static_cast<std::int64_t>(m);
        // tied: the weight is another layer's (GPT-2's lm_head shares the token embedding); its
        // gradient is summed into that parameter's gradient.
        const bool tied = bool_attr(l, "tied", false);
        if (!tied) add_parameter(s, static_cast<double>(in_f * out_f));
        if (bias) add_parameter(s, static_cast<double>(out_f));
        const DType dt = compute_dtype(l, x);
        weight_cast(l, static_cast<double>(in_f * out_f) + (bias ? static_cast<double>(out_f) : 0.0), dt);
        if (tied) kernel(l, Phase::backward, "aten::add_", KernelKind::elementwise, rules_.parameter_dtype,
                         2.0 * static_cast<double>(in_f * out_f), static_cast<double>(in_f * out_f));
        // y = x W^T (W read transposed); dX = dY W; dW = dY^T X (dY read transposed)
        gemm(l, Phase::forward, bias ? "aten::addmm" : "aten::mm", dt, {rows, out_f, in_f, 1, GemmLayout::nt}, dt);
        save_input(s, l, 0, dt);
        if (x.needs_grad) gemm(l, Phase::backward, "aten::mm", dt, {rows, in_f, out_f, 1, GemmLayout::nn}, dt);
        gemm(l, Phase::backward, "aten::mm", dt, {out_f, in_f, rows, 1, GemmLayout::tn}, dt);
        if (bias) column_sum(l, dt, rows, out_f);
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
        const DType dt = compute_dtype(l, a);
        compute_dtype(l, b);  // autocast casts each input, and each one's gradient back
        const std::string_view name = batch > 1 ? "aten::bmm" : "aten::mm";
        // the inputs taken as stored (a graph says nothing of strides): C = A B; dA = dC B^T; dB = A^T dC
        gemm(l, Phase::forward, name, dt, {m, n, k, batch, GemmLayout::nn}, dt);
        save_input(s, l, 0, dt);
        save_input(s, l, 1, dt);
        if (a.needs_grad) gemm(l, Phase::backward, name, dt, {m, k, n, batch, GemmLayout::nt}, dt);
        if (b.needs_grad) gemm(l, Phase::backward, name, dt, {k, n, m, batch, GemmLayout::tn}, dt);
        Value c{a.shape, dt, a.needs_grad || b.needs_grad};
        c.shape.back() = n;
        return c;
    }

    // conv: cuDNN forward; backward-data (when the input needs a gradient), backward-filter, and a
    // bias reduction (aten::convolution_backward).
    Value conv(const Layer& l, LayerSummary& s, std::size_t rank) {
        const Value& x = input(l, 0);
        if (x.shape.size() != rank + 2) throw layer_error(l, "input must be N x C x spatial (" + std::to_string(rank + 2) + " dimensions)");
        const auto [in_channels, out_channels, kernel_size, stride, padding, dilation, groups_attr, bias_attr] =
            find_attrs(l, std::array<std::string_view, 8>{"in_channels", "out_channels", "kernel_size", "stride", "padding",
                                                          "dilation", "groups", "bias"});
        const std::int64_t c = int_attr(l, "in_channels", in_channels), k = int_attr(l, "out_channels", out_channels);
        const auto ks = dims_attr(l, "kernel_size", kernel_size, rank), st = dims_attr(l, "stride", stride, rank, 1);
        const auto pad = dims_attr(l, "padding", padding, rank, 0), dil = dims_attr(l, "dilation", dilation, rank, 1);
        const std::int64_t groups = int_attr(l, "groups", groups_attr, 1);
        const bool bias = bool_attr(l, "bias", bias_attr, true);
        if (!bias) cost_markers_as(host_op_without_bias(l.op), true, true);
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
        const std::int64_t out_h = d.p(), out_w = d.q();
        if (out_h <= 0 || out_w <= 0) throw layer_error(l, "kernel_size: larger than the padded input");
        const double weights = static_cast<double>(k * (c / groups) * d.r * d.s);
        add_parameter(s, weights);
        if (bias) add_parameter(s, static_cast<double>(k));
        const DType dt = compute_dtype(l, x);
        weight_cast(l, weights + (bias ? static_cast<double>(k) : 0.0), dt);
        const double in_el = numel(x.shape);
        const double out_el = static_cast<double>(d.n * k * out_h * out_w);
        const double flops = conv_flops(d).value();  // the same for the three passes
        auto pass = [&](Phase ph, ConvPass p, double read_el, double write_el) {
            Kernel& kk = kernel(l, ph, p == ConvPass::forward ? "aten::convolution" : "aten::convolution_backward", KernelKind::conv,
                                dt, read_el, write_el, flops, conv_unit(dt));
            kk.dims = d;
            std::get<ConvDims>(kk.dims).pass = p;
        };
        pass(Phase::forward, ConvPass::forward, in_el + weights, out_el);
        save_input(s, l, 0, dt);
        if (x.needs_grad) pass(Phase::backward, ConvPass::backward_data, out_el + weights, in_el);
        pass(Phase::backward, ConvPass::backward_filter, out_el + in_el, weights);
        if (bias) kernel(l, Phase::backward, "aten::convolution_backward", KernelKind::reduction, dt, out_el, static_cast<double>(k));
        Value y{x.shape, dt, true};
        y.shape[1] = k;
        if (rank == 2) { y.shape[2] = out_h; y.shape[3] = out_w; }
        else y.shape[2] = out_w;
        return y;
    }

    // batchnorm2d in training mode (cuDNN): forward reads x twice (statistics, then normalize) and
    // writes y; backward reads x and dY twice (reductions, then dX) and writes dX.
    Value batchnorm(const Layer& l, LayerSummary& s) {
        const Value& x = input(l, 0);
        const std::int64_t features = int_attr(l, "num_features");
        if (x.shape.size() != 4 || x.shape[1] != features) throw layer_error(l, "num_features: does not match input channels");
        add_parameter(s, static_cast<double>(features));  // weight
        add_parameter(s, static_cast<double>(features));  // bias
        const double n = numel(x.shape);
        const NormDims per_channel{features, static_cast<std::int64_t>(n) / features};
        kernel(l, Phase::forward, "aten::cudnn_batch_norm", KernelKind::normalization, x.dtype, 2 * n, n, 0).dims = per_channel;
        save_input(s, l, 0, x.dtype);
        kernel(l, Phase::backward, "aten::cudnn_batch_norm_backward", KernelKind::normalization, x.dtype, 4 * n, n, 0).dims = per_channel;
        return Value{x.shape, x.dtype, true};
    }

    // layernorm / rmsnorm over the trailing dimensions: one forward kernel (Welford per row);
    // backward: dX, then the weight (and bias) gradients (aten::native_layer_norm_backward).
    Value layernorm(const Layer& l, LayerSummary& s) {
        const Value& x = input(l, 0);
        const auto shape = attr_ints(l, "normalized_shape", 0);
        const bool affine = bool_attr(l, "elementwise_affine", true);
        double normalized = 1;
        for (auto d : shape) normalized *= static_cast<double>(d);
        if (shape.empty() || shape.size() > x.shape.size() ||
            !std::equal(shape.rbegin(), shape.rend(), x.shape.rbegin())) {
            throw layer_error(l, "normalized_shape: does not match the input's trailing dimensions");
        }
        const bool rms = l.op == "rmsnorm";
        if (affine) add_parameter(s, normalized);  // weight
        if (affine && !rms) add_parameter(s, normalized);  // bias
        const DType dt = compute_dtype(l, x);
        const double n = numel(x.shape);
        const NormDims per_row{static_cast<std::int64_t>(n / normalized), static_cast<std::int64_t>(normalized)};
        const std::string_view fwd = rms ? "aten::_fused_rms_norm" : "aten::native_layer_norm";
        kernel(l, Phase::forward, fwd, KernelKind::normalization, dt, n, n, 0).dims = per_row;
        save_input(s, l, 0, dt);
        kernel(l, Phase::backward, joined_name(fwd, "_backward"), KernelKind::normalization, dt, 2 * n, n, 0).dims = per_row;
        // the weight (and bias) gradients reduce the same rows: the same reduction shape, so that they
        // take the factor timed at the layer's shape, not the op's first timing
        if (affine) kernel(l, Phase::backward, joined_name(fwd, "_backward"), KernelKind::reduction, dt, 2 * n, normalized).dims = per_row;
        return Value{x.shape, dt, true};
    }

    // groupnorm: statistics kernel, then normalize (aten::native_group_norm); backward: per-group
    // reductions, then dX, then weight/bias gradients.
    Value groupnorm(const Layer& l, LayerSummary& s) {
        const Value& x = input(l, 0);
        const std::int64_t groups = int_attr(l, "num_groups"), channels = int_attr(l, "num_channels");
        if (x.shape.size() < 2 || x.shape[1] != channels) throw layer_error(l, "num_channels: does not match the input");
        if (groups <= 0 || channels % groups != 0) throw layer_error(l, "num_groups: must divide num_channels");
        add_parameter(s, static_cast<double>(channels));  // weight
        add_parameter(s, static_cast<double>(channels));  // bias
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
        kernel(l, Phase::forward, joined_name("aten::", l.op), KernelKind::elementwise, x.dtype, n, n);
        // relu, tanh and sigmoid save their output; gelu and silu their input. inplace=True (torchvision's
        // ReLU) writes the output over the input: no new tensor.
        if (bool_attr(l, "inplace", false)) tensor_[own_id()] = tensor_[input_id(0)];
        const bool saves_output = l.op == "relu" || l.op == "tanh" || l.op == "sigmoid";
        save_value(s, saves_output ? own_id() : input_id(0), tensor_bytes(n, x.dtype));
        kernel(l, Phase::backward, joined_name("aten::", l.op, "_backward"), KernelKind::elementwise, x.dtype, 2 * n, n);
        return Value{x.shape, x.dtype, x.needs_grad};
    }

    // dropout (training): writes the output and a one-byte mask; backward multiplies dY by the mask.
    // With p = 0 PyTorch returns the input itself (ATen's dropout: no kernel, no autograd node): the
    // module call's host cost alone, at its own figures (dropout_identity_host_op).
    Value dropout(const Layer& l, LayerSummary& s) {
        const Value& x = input(l, 0);
        const double p = attr_real(l, "p", 0.5);
        if (p < 0 || p >= 1) throw layer_error(l, "p: must be in [0, 1)");
        if (p == 0) {
            tensor_[own_id()] = tensor_[input_id(0)];
            cost_markers_as(dropout_identity_host_op, true, true);
            return x;
        }
        const double n = numel(x.shape);
        Kernel& f = kernel(l, Phase::forward, "aten::native_dropout", KernelKind::elementwise, x.dtype, n, n);
        f.bytes_written += tensor_bytes(n, DType::boolean);
        save(s, SavedPart::mask, tensor_bytes(n, DType::boolean));
        Kernel& b = kernel(l, Phase::backward, "aten::native_dropout_backward", KernelKind::elementwise, x.dtype, n, n);
        b.bytes_read += tensor_bytes(n, DType::boolean);
        return Value{x.shape, x.dtype, x.needs_grad};
    }

    // add: one pass; its gradient passes through with no kernel (but a cast into an input of another
    // dtype than the result's). mul: one pass; backward computes dA = dY * B and dB = dY * A.
    Value binary(const Layer& l, LayerSummary& s) {
        const Value& a = input(l, 0);
        const Value& b = input(l, 1);
        // The second input may broadcast over leading dimensions (b's shape a suffix of a's, leading 1s
        // allowed): its gradient is then reduced over them.
        std::size_t ones = 0;  // b's leading 1s, all but its last dimension
        while (ones + 1 < b.shape.size() && b.shape[ones] == 1) ++ones;
        const std::size_t b_core = b.shape.size() - ones;
        const bool broadcast = a.shape != b.shape;
        if (broadcast && (b_core > a.shape.size() ||
                          !std::equal(b.shape.rbegin(), b.shape.rbegin() + static_cast<std::ptrdiff_t>(b_core), a.shape.rbegin()))) {
            throw layer_error(l, "inputs: the second must have the first's shape or broadcast over its leading dimensions");
        }
        const DType dt = (a.dtype == DType::f32 || b.dtype == DType::f32) ? DType::f32 : a.dtype;  // type promotion
        const double n = numel(a.shape);
        // operands of two floating dtypes (a bfloat16 activation and a float32 residual under
        // autocast): each read in its own dtype, by PyTorch's casting loop (is_mixed_elementwise)
        const auto mixed = [](DType x, DType y) { return x != y && is_floating(x) && is_floating(y); };
        Kernel& forward = kernel(l, Phase::forward, joined_name("aten::", l.op), KernelKind::elementwise, dt, n + numel(b.shape), n);
        if (mixed(a.dtype, b.dtype)) read_mixed(forward, n, a.dtype, numel(b.shape), b.dtype);
        if (broadcast && b.needs_grad) kernel(l, Phase::backward, "aten::sum", KernelKind::reduction, dt, n, numel(b.shape));
        if (l.op == "mul") {
            save_input(s, l, 0, dt);
            save_input(s, l, 1, dt);
            // dA = dY * B, dB = dY * A: dY in the result's dtype, the other factor in its own
            for (const auto& [grad_of, other] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
                if (!grad_of->needs_grad) continue;
                Kernel& k = kernel(l, Phase::backward, "aten::mul", KernelKind::elementwise, dt, 2 * n, n);
                if (mixed(dt, other->dtype)) read_mixed(k, n, dt, n, other->dtype);
            }
        }
        // autograd hands each input its gradient in the input's dtype: a 16-bit input of a float32
        // result gets a cast of dY (or of dA, dB)
        for (const Value* in : {&a, &b}) {
            if (in->needs_grad && mixed(in->dtype, dt)) cast(l, Phase::backward, numel(in->shape), dt, in->dtype);
        }
        return Value{a.shape, dt, a.needs_grad || b.needs_grad};
    }

    // softmax / log_softmax along a dimension: one pass each way; backward reads Y and dY.
    Value softmax(const Layer& l, LayerSummary& s) {
        const Value& x = input(l, 0);
        (void)int_attr(l, "dim", -1);
        const DType dt = compute_dtype(l, x);
        const double n = numel(x.shape);
        kernel(l, Phase::forward, joined_name("aten::_", l.op), KernelKind::softmax, dt, n, n);
        save_value(s, own_id(), tensor_bytes(n, dt));
        kernel(l, Phase::backward, joined_name("aten::_", l.op, "_backward_data"), KernelKind::softmax, dt, 2 * n, n);
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
        save(s, SavedPart::log_softmax, tensor_bytes(n, dt));
        kernel(l, Phase::backward, "aten::nll_loss_backward", KernelKind::elementwise, dt, 0, n);
        kernel(l, Phase::backward, "aten::nll_loss_backward", KernelKind::elementwise, dt, rows, rows);
        kernel(l, Phase::backward, "aten::_log_softmax_backward_data", KernelKind::softmax, dt, 2 * n, n);
        return Value{{1}, dt, x.needs_grad};
    }

    void attention_kernels(const Layer& l, AttentionDims a, DType dt) {
        const double qkv = static_cast<double>(a.batch * a.heads * a.head_dim) * static_cast<double>(a.seq_q + 2 * a.seq_kv);
        const double o = static_cast<double>(a.batch * a.heads * a.seq_q * a.head_dim);
        const double rows = static_cast<double>(a.batch * a.heads * a.seq_q);
        if (a.backend == AttentionBackend::math && (dt == DType::bf16 || dt == DType::f16)) {
            // The math path upcasts 16-bit inputs to float32 and computes in float32
            // (torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp, False by default since
            // torch 2.5; an H200 kernel trace of the amp-bf16 case shows fp32 GEMMs): Q, K, V cast
            // up, the output cast down, and their gradients the other way.
            cast(l, Phase::forward, qkv, dt, DType::f32);
            attention_kernels(l, a, DType::f32);
            cast(l, Phase::forward, o, DType::f32, dt);
            cast(l, Phase::backward, o, dt, DType::f32);
            cast(l, Phase::backward, qkv, DType::f32, dt);
            return;
        }
        if (a.backend == AttentionBackend::math) {
            // math path (PyTorch's _scaled_dot_product_attention_math, aten/src/ATen/native/transformers/
            // attention.cpp): Q and K^T each times sqrt(scale); causal: a mask ones(L, S).tril() turned
            // into 0 / -inf and added in place to the scores; _safe_softmax (softmax, then rows all -inf
            // set to zero: eq(-inf), all(dim), where, with two one-element scalar tensors); bmm(P, V).
            // Its elementwise and softmax kernels are plain ones: they take those ops' efficiencies, not
            // the fused attention kernels'.
            const std::int64_t bh = a.batch * a.heads;
            const double scores = static_cast<double>(bh * a.seq_q * a.seq_kv);
            const double k_elements = static_cast<double>(bh * a.seq_kv * a.head_dim);
            const double mask = static_cast<double>(a.seq_q * a.seq_kv);
            // a kernel of the path that takes the efficiency of the plain op `efficiency_of`
            const auto plain = [&](Phase ph, std::string_view op, KernelKind kind, DType d, double read, double write,
                                   std::string_view efficiency_of) -> Kernel& {
                Kernel& k = kernel(l, ph, op, kind, d, read, write);
                k.source_op = efficiency_of;
                return k;
            };
            constexpr auto elementwise = KernelKind::elementwise;
            plain(Phase::forward, "aten::mul", elementwise, dt, o, o, "mul");                     // q * sqrt(scale)
            plain(Phase::forward, "aten::mul", elementwise, dt, k_elements, k_elements, "mul");   // k^T * sqrt(scale)
            gemm(l, Phase::forward, "aten::bmm", dt, {a.seq_q, a.seq_kv, a.head_dim, bh, GemmLayout::nt}, dt);  // Q K^T
            if (a.causal) {
                plain(Phase::forward, "aten::ones", elementwise, DType::boolean, 0, mask, "add");
                plain(Phase::forward, "aten::tril", elementwise, DType::boolean, mask, mask, "add");
                plain(Phase::forward, "aten::where", elementwise, dt, 0, mask, "add").bytes_read = tensor_bytes(mask, DType::boolean);
                plain(Phase::forward, "aten::add_", elementwise, dt, scores + mask, scores, "add");
            }
            plain(Phase::forward, "aten::_softmax", KernelKind::softmax, dt, scores, scores, "softmax");
            for (int i = 0; i < 2; ++i) plain(Phase::forward, "aten::fill_", elementwise, dt, 0, 1, "add");
            plain(Phase::forward, "aten::eq", elementwise, dt, scores, 0, "add").bytes_written = tensor_bytes(scores, DType::boolean);
            plain(Phase::forward, "aten::all", KernelKind::reduction, DType::boolean, scores, rows, "add");
            plain(Phase::forward, "aten::where", elementwise, dt, scores, scores, "add").bytes_read += tensor_bytes(rows, DType::boolean);
            gemm(l, Phase::forward, "aten::bmm", dt, {a.seq_q, a.head_dim, a.seq_kv, bh, GemmLayout::nn}, dt);  // P V
            gemm(l, Phase::backward, "aten::bmm", dt, {a.seq_q, a.seq_kv, a.head_dim, bh, GemmLayout::nt}, dt);  // dP = dO V^T
            gemm(l, Phase::backward, "aten::bmm", dt, {a.seq_kv, a.head_dim, a.seq_q, bh, GemmLayout::tn}, dt);  // dV = P^T dO
            // _safe_softmax's derivative formula is softmax's (_softmax_backward_data): no kernel for its guard
            plain(Phase::backward, "aten::_softmax_backward_data", KernelKind::softmax, dt, 2 * scores, scores, "softmax");
            gemm(l, Phase::backward, "aten::bmm", dt, {a.seq_q, a.head_dim, a.seq_kv, bh, GemmLayout::nn}, dt);  // dQ = dS K
            gemm(l, Phase::backward, "aten::bmm", dt, {a.seq_kv, a.head_dim, a.seq_q, bh, GemmLayout::tn}, dt);  // dK = dS^T Q
            plain(Phase::backward, "aten::mul", elementwise, dt, o, o, "mul");
            plain(Phase::backward, "aten::mul", elementwise, dt, k_elements, k_elements, "mul");
            return;
        }
        const std::string_view name = a.backend == AttentionBackend::flash   ? "aten::_scaled_dot_product_flash_attention"
                                      : a.backend == AttentionBackend::cudnn ? "aten::_scaled_dot_product_cudnn_attention"
                                                                             : "aten::_scaled_dot_product_efficient_attention";
        Kernel& f = kernel(l, Phase::forward, name, KernelKind::attention, dt, qkv, o,
                           attention_flops(a, false).value(), matmul_unit(dt));
        f.bytes_written += tensor_bytes(rows, DType::f32);  // log-sum-exp per row
        f.dims = a;
        // backward: a preprocessing pass (rowsum(dO * O)) and the fused backward kernel.
        kernel(l, Phase::backward, joined_name(name, "_backward"), KernelKind::reduction, dt, 2 * o, 0);
        Kernel& b = kernel(l, Phase::backward, joined_name(name, "_backward"), KernelKind::attention, dt, qkv + 2 * o, qkv,
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
        a.causal = bool_attr(l, "is_causal", false);
        const auto backend = attention_backend_from_key(attr_string(l, "backend", "flash"));
        if (!backend) throw layer_error(l, "backend: expected flash, efficient, math or cudnn");
        a.backend = *backend;
        a.dropout = attr_real(l, "dropout_p", 0.0);
        if (!(a.dropout >= 0 && a.dropout < 1)) throw layer_error(l, "dropout_p: expected a probability in [0, 1)");
        const DType dt = compute_dtype(l, q);
        compute_dtype(l, k);  // autocast casts each input, and each one's gradient back
        compute_dtype(l, input(l, 2));
        attention_kernels(l, a, dt);
        cost_markers_as(host_op_of_attention(a.backend), true, true);
        for (std::size_t i = 0; i < 3; ++i) save_input(s, l, i, dt);
        save_value(s, own_id(), tensor_bytes(numel(q.shape), dt));
        return Value{q.shape, dt, true};
    }

    /// Backward of nn.MultiheadAttention's output projection (dX, dW, db) and of the copy that
    /// merged the heads; `tokens` rows of width `e`.
    void mha_out_projection_backward(const Layer& l, DType dt, std::int64_t tokens, std::int64_t e) {
        const double te = static_cast<double>(tokens * e);
        gemm(l, Phase::backward, "aten::mm", dt, {tokens, e, e, 1, GemmLayout::nn}, dt);  // dX = dY W
        gemm(l, Phase::backward, "aten::mm", dt, {e, e, tokens, 1, GemmLayout::tn}, dt);  // dW = dY^T X
        column_sum(l, dt, tokens, e);
        kernel(l, Phase::backward, "aten::clone", KernelKind::copy, dt, te, te);
    }

    /// Backward of the copy that split the heads and of the packed input projection (dX when the
    /// input needs it, dW, db).
    void mha_in_projection_backward(const Layer& l, DType dt, std::int64_t tokens, std::int64_t e, bool input_grad) {
        const double te = static_cast<double>(tokens * e);
        kernel(l, Phase::backward, "aten::clone", KernelKind::copy, dt, 3 * te, 3 * te);
        if (input_grad) gemm(l, Phase::backward, "aten::mm", dt, {tokens, e, 3 * e, 1, GemmLayout::nn}, dt);
        gemm(l, Phase::backward, "aten::mm", dt, {3 * e, e, tokens, 1, GemmLayout::tn}, dt);
        column_sum(l, dt, tokens, 3 * e);
    }

    // nn.MultiheadAttention(x, x, x) in training (need_weights=True, the default): packed input
    // projection, a copy to split heads, scaled Q K^T (baddbmm), softmax, P V (bmm), the head-averaged
    // weights, and the output projection (torch.nn.functional.multi_head_attention_forward).
    Value mha(const Layer& l, LayerSummary& s) {
        const Value& x = input(l, 0);
        if (x.shape.size() != 3) throw layer_error(l, "input: expected B x L x E (batch_first)");
        const std::int64_t e = int_attr(l, "embed_dim"), heads = int_attr(l, "num_heads");
        if (x.shape[2] != e) throw layer_error(l, "embed_dim: does not match the input");
        if (heads <= 0 || e % heads != 0) throw layer_error(l, "num_heads: must divide embed_dim");
        const std::int64_t b = x.shape[0], len = x.shape[1], d = e / heads, bh = b * heads;
        const double tokens = static_cast<double>(b * len);
        add_parameter(s, static_cast<double>(3 * e * e));  // in_proj_weight
        add_parameter(s, static_cast<double>(3 * e));      // in_proj_bias
        add_parameter(s, static_cast<double>(e * e));      // out_proj.weight
        add_parameter(s, static_cast<double>(e));          // out_proj.bias
        const DType dt = compute_dtype(l, x);
        weight_cast(l, static_cast<double>(4 * e * e + 4 * e), dt);
        const double te = tokens * static_cast<double>(e);
        const double scores = static_cast<double>(bh * len * len);
        if (!bool_attr(l, "need_weights", true)) {
            // need_weights=False: the packed projection, a copy to split heads, SDPA (flash for 16-bit,
            // memory-efficient for float32), a copy to merge heads, the output projection.
            gemm(l, Phase::forward, "aten::addmm", dt, {b * len, 3 * e, e, 1, GemmLayout::nt}, dt);
            kernel(l, Phase::forward, "aten::clone", KernelKind::copy, dt, 3 * te, 3 * te);
            AttentionDims a{b, heads, len, len, d, false,
                            dt == DType::f32 ? AttentionBackend::efficient : AttentionBackend::flash};
            attention_kernels(l, a, dt);
            kernel(l, Phase::forward, "aten::clone", KernelKind::copy, dt, te, te);
            gemm(l, Phase::forward, "aten::addmm", dt, {b * len, e, e, 1, GemmLayout::nt}, dt);
            save(s, SavedPart::internals, tensor_bytes(6 * te, dt));
            mha_out_projection_backward(l, dt, b * len, e);
            mha_in_projection_backward(l, dt, b * len, e, x.needs_grad);
            cost_markers_as(mha_no_weights_host_op, true, true);
            return Value{x.shape, dt, true};
        }
        // forward
        gemm(l, Phase::forward, "aten::addmm", dt, {b * len, 3 * e, e, 1, GemmLayout::nt}, dt);
        kernel(l, Phase::forward, "aten::clone", KernelKind::copy, dt, 3 * te, 3 * te);  // split heads
        kernel(l, Phase::forward, "aten::mul", KernelKind::elementwise, dt, te, te);        // q * scale
        gemm(l, Phase::forward, "aten::baddbmm", dt, {len, len, d, bh, GemmLayout::nt}, dt);  // Q K^T
        kernel(l, Phase::forward, "aten::_softmax", KernelKind::softmax, dt, scores, scores);
        gemm(l, Phase::forward, "aten::bmm", dt, {len, d, len, bh, GemmLayout::nn}, dt);      // P V
        kernel(l, Phase::forward, "aten::clone", KernelKind::copy, dt, te, te);            // merge heads
        gemm(l, Phase::forward, "aten::addmm", dt, {b * len, e, e, 1, GemmLayout::nt}, dt);
        kernel(l, Phase::forward, "aten::mean", KernelKind::reduction, dt, scores, static_cast<double>(b * len * len));
        save(s, SavedPart::internals, tensor_bytes(4 * te + scores, dt));
        // backward (reverse order)
        mha_out_projection_backward(l, dt, b * len, e);
        gemm(l, Phase::backward, "aten::bmm", dt, {len, len, d, bh, GemmLayout::nt}, dt);  // dP = dO V^T
        gemm(l, Phase::backward, "aten::bmm", dt, {len, d, len, bh, GemmLayout::tn}, dt);  // dV = P^T dO
        kernel(l, Phase::backward, "aten::_softmax_backward_data", KernelKind::softmax, dt, 2 * scores, scores);
        gemm(l, Phase::backward, "aten::bmm", dt, {len, d, len, bh, GemmLayout::nn}, dt);  // dQ = dS K
        gemm(l, Phase::backward, "aten::bmm", dt, {len, d, len, bh, GemmLayout::tn}, dt);  // dK = dS^T Q
        kernel(l, Phase::backward, "aten::mul", KernelKind::elementwise, dt, te, te);
        mha_in_projection_backward(l, dt, b * len, e, x.needs_grad);
        return Value{x.shape, dt, true};
    }

    // embedding: gather rows forward. Backward (aten::embedding_dense_backward, PyTorch's
    // Embedding.cu) zero-fills the weight gradient, then up to 3072 indices accumulates the rows in
    // one atomic kernel; beyond that it sorts the (index, position) pairs with cub's radix sort (one
    // pass per index byte), finds the segments of equal indices and sums each segment's rows: about
    // 30 launches, as the H200 trace of the 8192-index case shows (data/validation/profiles/).
    Value embedding(const Layer& l, LayerSummary& s) {
        const Value& idx = input(l, 0);
        const std::int64_t rows = int_attr(l, "num_embeddings"), dim = int_attr(l, "embedding_dim");
        const double lookups = numel(idx.shape);
        add_parameter(s, static_cast<double>(rows * dim));
        const DType dt = rules_.parameter_dtype;
        const double row_elements = lookups * static_cast<double>(dim);
        Kernel& f = kernel(l, Phase::forward, "aten::embedding", KernelKind::embedding, dt, row_elements, row_elements);
        f.bytes_read += tensor_bytes(lookups, idx.dtype);
        save_value(s, input_id(0), tensor_bytes(lookups, idx.dtype));
        constexpr std::string_view op = "aten::embedding_dense_backward";
        kernel(l, Phase::backward, op, KernelKind::elementwise, dt, 0, static_cast<double>(rows * dim));  // zero-fill dW
        if (lookups <= 3072) {
            Kernel& a = kernel(l, Phase::backward, op, KernelKind::embedding, dt, row_elements, row_elements);
            a.bytes_read += tensor_bytes(lookups, idx.dtype);
            cost_markers_as("embedding_atomic", false, true);  // the atomic path's host cost (framework probe)
        } else {
            for (const auto& k : detail::embedding_sort_kernels(lookups, row_elements, idx.dtype, dt)) {
                Kernel& b = kernel(l, Phase::backward, op, k.kind, DType::i64, 0, 0);
                b.dtype = k.kind == KernelKind::embedding ? dt : idx.dtype;
                b.bytes_read = Bytes(k.read_bytes);
                b.bytes_written = Bytes(k.write_bytes);
            }
        }
        Value y{idx.shape, dt, true};
        y.shape.push_back(dim);
        return y;
    }

    // max / avg pooling: one pass forward (max also writes int64 indices); backward writes dX
    // reading dY (and the indices).
    Value pool(const Layer& l, LayerSummary& s) {
        const Value& x = input(l, 0);
        if (x.shape.size() != 4) throw layer_error(l, "input: expected N x C x H x W");
        const auto ks = dims_attr(l, "kernel_size", 2), st = dims_attr(l, "stride", 2, ks[0]), pad = dims_attr(l, "padding", 2, 0);
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
        save_value(s, input_id(0), tensor_bytes(n_in, x.dtype));
        if (max) save(s, SavedPart::indices, tensor_bytes(n_out, DType::i64));
        Kernel& b = kernel(l, Phase::backward, max ? "aten::max_pool2d_with_indices_backward" : "aten::avg_pool2d_backward",
                           KernelKind::elementwise, x.dtype, n_out, n_in);
        if (max) b.bytes_read += tensor_bytes(n_out, DType::i64);
        return y;
    }

    // adaptive average pooling to output_size: a reduction forward, an expanding pass backward.
    Value adaptive_pool(const Layer& l, LayerSummary& s) {
        const Value& x = input(l, 0);
        if (x.shape.size() != 4) throw layer_error(l, "input: expected N x C x H x W");
        const auto out = dims_attr(l, "output_size", 2);
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
            const std::int64_t start = int_attr(l, "start_dim", 1);
            if (start < 0 || start >= static_cast<std::int64_t>(x.shape.size())) throw layer_error(l, "start_dim: out of range");
            y.shape.assign(x.shape.begin(), x.shape.begin() + start);
            y.shape.push_back(static_cast<std::int64_t>(numel(x.shape) / numel(y.shape)));
        } else {
            y.shape = Shape(attr_ints(l, "shape", 0));
            std::int64_t known = 1;
            int infer = -1;
            for (std::size_t i = 0; i < y.shape.size(); ++i) {
                if (y.shape[i] == -1) infer = static_cast<int>(i);
                else known *= y.shape[i];
            }
            if (infer >= 0 && known > 0) y.shape[static_cast<std::size_t>(infer)] = static_cast<std::int64_t>(numel(x.shape)) / known;
            if (numel(y.shape) != numel(x.shape)) throw layer_error(l, "shape: element count differs from the input");
        }
        if (bool_attr(l, "copy", false)) {
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
        auto dim = int_attr(l, "dim");
        const auto start = int_attr(l, "start"), length = int_attr(l, "length");
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
    // three gradient paths into x). Under autocast torch.pow is on the float32 list: x is cast up
    // for it, and type promotion carries every later product into float32, so a 16-bit x comes out
    // as a float32 activation (as an H200 kernel trace of GPT-2 shows: float32 pow, tanh and muls).
    //
    // Under autocast (the exported trace of GPT-2 small on an H200): 0.5 x stays 16-bit, x is cast
    // up for pow, x + 0.044715 x^3 and the last product read one 16-bit and one float32 operand
    // (mixed-dtype loops); backward, dY x 0.5 x is mixed, and the gradients that reach the 16-bit
    // tensors (0.5 x, x through the add, x through the cast) are cast down and summed in 16 bits.
    Value gelu_tanh_composite(const Layer& l, LayerSummary& s) {
        const Value& x = input(l, 0);
        const double n = numel(x.shape);
        const bool upcast = rules_.autocast && (x.dtype == DType::bf16 || x.dtype == DType::f16);
        const DType dt = upcast ? DType::f32 : x.dtype;
        save(s, SavedPart::internals, tensor_bytes(4 * n, dt));
        if (!upcast) {
            const int forward_reads[] = {1, 1, 2, 1, 1, 1, 1, 2};
            for (int r : forward_reads) kernel(l, Phase::forward, "aten::elementwise", KernelKind::elementwise, dt, r * n, n);
            const int backward_reads[] = {2, 2, 1, 2, 1, 2, 1, 1, 1, 2, 2};
            for (int r : backward_reads) kernel(l, Phase::backward, "aten::elementwise", KernelKind::elementwise, dt, r * n, n);
            return Value{x.shape, dt, x.needs_grad};
        }
        const DType low = x.dtype;
        const auto plain = [&](Phase phase, DType d, int reads, std::string_view op = "aten::elementwise") {
            kernel(l, phase, op, KernelKind::elementwise, d, reads * n, n);
        };
        const auto mixed = [&](Phase phase) {  // one 16-bit and one float32 operand, a float32 result
            read_mixed(kernel(l, phase, "aten::elementwise", KernelKind::elementwise, dt, 0, n), n, low, n, dt);
        };
        plain(Phase::forward, low, 1);  // 0.5 x
        cast(l, Phase::forward, n, low, dt);
        for (int i = 0; i < 2; ++i) plain(Phase::forward, dt, 1);  // x^3, 0.044715 x^3
        mixed(Phase::forward);                                      // x + 0.044715 x^3
        for (int i = 0; i < 3; ++i) plain(Phase::forward, dt, 1);  // sqrt(2/pi) (...), tanh, 1 + tanh
        mixed(Phase::forward);                                      // 0.5 x (1 + tanh)
        if (!x.needs_grad) return Value{x.shape, dt, false};
        mixed(Phase::backward);        // dY 0.5 x
        plain(Phase::backward, dt, 2);  // dY (1 + tanh)
        cast(l, Phase::backward, n, dt, low);
        plain(Phase::backward, dt, 2);  // tanh_backward
        plain(Phase::backward, dt, 1);  // sqrt(2/pi)
        cast(l, Phase::backward, n, dt, low);
        for (int i = 0; i < 4; ++i) plain(Phase::backward, dt, i == 3 ? 2 : 1);  // 0.044715, x^2, 3 x^2, dY 3 x^2
        cast(l, Phase::backward, n, dt, low);
        plain(Phase::backward, low, 2, "aten::add");  // the gradients into x summed in 16 bits, 0.5 of one
        plain(Phase::backward, low, 1);
        plain(Phase::backward, low, 2, "aten::add");
        return Value{x.shape, dt, true};
    }

    // x.transpose(d0, d1): a view, costing the host what a view does (as the exporter costs
    // aten::transpose); transpose_contiguous, x.transpose(d0, d1).contiguous(): one copy each way.
    Value transpose(const Layer& l, LayerSummary&) {
        const Value& x = input(l, 0);
        auto d0 = int_attr(l, "dim0"), d1 = int_attr(l, "dim1");
        const auto rank = static_cast<std::int64_t>(x.shape.size());
        if (d0 < 0) d0 += rank;
        if (d1 < 0) d1 += rank;
        if (d0 < 0 || d1 < 0 || d0 >= rank || d1 >= rank) throw layer_error(l, "dim0/dim1: out of range");
        Value y = x;
        std::swap(y.shape[static_cast<std::size_t>(d0)], y.shape[static_cast<std::size_t>(d1)]);
        if (l.op == "transpose") {
            cost_markers_as("reshape", true, x.needs_grad);
        } else {
            copy_both_ways(l, x);
        }
        return y;
    }

    // cat of two tensors: one copy forward; backward slices dY (views, no kernel). A graph input
    // that requires grad (a leaf) takes its slice as its .grad, and where the slice is strided
    // unlike the input (cat along a dim after a non-unit one), AccumulateGrad stores a contiguous
    // copy (clone_obey_contract, torch/csrc/autograd/functions/accumulate_grad.h): one op
    // dispatched and launched on its own (host: accumulate_grad_clone_host_op) and one copy.
    Value cat(const Layer& l, LayerSummary&) {
        const Value& a = input(l, 0);
        const Value& b = input(l, 1);
        auto dim = int_attr(l, "dim", 0);
        const auto rank = static_cast<std::int64_t>(a.shape.size());
        if (dim < 0) dim += rank;
        if (a.shape.size() != b.shape.size() || dim < 0 || dim >= rank) throw layer_error(l, "dim: out of range or ranks differ");
        Value y = a;
        y.shape[static_cast<std::size_t>(dim)] += b.shape[static_cast<std::size_t>(dim)];
        const double n = numel(y.shape);
        kernel(l, Phase::forward, "aten::cat", KernelKind::copy, a.dtype, n, n);
        y.needs_grad = a.needs_grad || b.needs_grad;
        double leading = 1;  // the elements of the dims before `dim`: above 1, each input's slice of dY is strided
        for (std::int64_t d = 0; d < dim; ++d) leading *= static_cast<double>(a.shape[static_cast<std::size_t>(d)]);
        for (std::size_t i = 0; i < 2 && leading > 1; ++i) {
            const Value& x = input(l, i);
            if (!x.needs_grad || input_id(i) >= graph_.inputs.size()) continue;
            const double elements = numel(x.shape);
            marker(backward_.emplace_back(blank_), l.name, accumulate_grad_clone_host_op, Phase::backward);
            note_host_op(accumulate_grad_clone_host_op);
            kernel(l, Phase::backward, "aten::clone", KernelKind::copy, x.dtype, elements, elements);
        }
        return y;
    }

    // x.to(dtype) (x.float(), x.bfloat16()): one elementwise cast forward and the gradient's cast
    // back (ToCopyBackward); nothing saved. A cast to the dtype x has is a no-op, as in PyTorch.
    Value cast_layer(const Layer& l, LayerSummary&) {
        const Value& x = input(l, 0);
        const auto to = dtype_from_key(attr_string(l, "dtype", ""));
        if (!to) throw layer_error(l, "dtype: expected float32, bfloat16, float16, ...");
        Value y = x;
        if (*to == x.dtype) return y;
        const double n = numel(x.shape);
        cast(l, Phase::forward, n, x.dtype, *to);
        if (x.needs_grad) cast(l, Phase::backward, n, *to, x.dtype);
        y.dtype = *to;
        return y;
    }

    // x [..., C] summed over every dimension but the last (x.sum(dim=(0, ..., n-2)), what a bias
    // gradient is): one column reduction forward; its backward is an expand (a view, no kernel).
    Value sum_layer(const Layer& l, LayerSummary&) {
        const Value& x = input(l, 0);
        if (x.shape.size() < 2) throw layer_error(l, "input: expected at least 2 dimensions");
        const std::int64_t columns = x.shape.back();
        column_sum(l, x.dtype, static_cast<std::int64_t>(numel(x.shape)) / columns, columns, Phase::forward);
        return Value{{columns}, x.dtype, x.needs_grad};
    }

    // ---- optimizer ----------------------------------------------------------------------------

    /// One torch._foreach_* op over every parameter-sized tensor list: multi_tensor_apply launches
    /// one kernel per 110 tensors / 320 blocks of 64 Ki elements (ATen MultiTensorApply.cuh, depth 1;
    /// deeper lists hold fewer tensors), reading `reads` and writing `writes` tensors per parameter.
    void foreach_op(std::string_view name, int reads, int writes, int depth) {
        static constexpr int tensors_per_launch[] = {110, 64, 48, 36, 30};
        const int per_launch = tensors_per_launch[std::clamp(depth, 1, 5) - 1];
        const double blocks_per_launch = 320;
        const double tensors = static_cast<double>(step_.parameter_tensors.size());
        const auto launches =
            static_cast<int>(std::max(std::ceil(tensors / per_launch), std::ceil(parameter_chunks_ / blocks_per_launch)));
        const double elements = parameter_elements_;
        const DType dt = rules_.parameter_dtype;
        for (int i = 0; i < launches; ++i) {
            Kernel& k = step_.kernels.kernels.emplace_back(blank_);
            rows_.of_kernel.push_back(static_cast<std::uint32_t>(optimizer_row_));
            k.op = name;
            k.kind = KernelKind::optimizer;
            k.phase = Phase::optimizer;
            k.layer = "optimizer";
            k.dtype = dt;
            k.bytes_read = tensor_bytes(reads * elements / launches, dt);
            k.bytes_written = tensor_bytes(writes * elements / launches, dt);
            k.flops = Flops(2.0 * elements / launches);
            k.host_dispatch = false;  // optimizer.step()'s marker carries the host cost
        }
    }

    void lower_optimizer() {
        const auto& o = options_.optimizer;
        if (o.kind == OptimizerKind::none || step_.parameter_tensors.empty()) return;
        // The parameters' elements, and the 64 Ki-element chunks multi_tensor_apply splits them into.
        parameter_elements_ = step_.parameter_count();
        for (double p : step_.parameter_tensors) parameter_chunks_ += std::ceil(p / 65536);
        marker(step_.kernels.kernels.emplace_back(blank_), "optimizer", "optimizer", Phase::optimizer);
        rows_.of_kernel.push_back(static_cast<std::uint32_t>(optimizer_row_));
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

}  // namespace roofsim
