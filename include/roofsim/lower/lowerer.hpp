#pragma once
/// Lowering: a layer graph becomes the kernels PyTorch runs for one training step (forward in layer
/// order, backward in reverse, then the optimizer), or for one inference forward (model.eval() under
/// torch.inference_mode(): no loss, no backward, nothing saved), under a precision mode. Each op's rule names
/// the PyTorch implementation it follows; byte counts are the least traffic of each kernel (every
/// operand read once, every result written once) unless the rule says the implementation makes
/// more passes. The rules of each op family define their Lowerer members in lower/<family>.hpp;
/// include lower/lower.hpp, which holds them all.

#include <roofsim/detail/checked.hpp>
#include <roofsim/detail/close_matches.hpp>
#include <roofsim/detail/concat.hpp>
#include <roofsim/detail/name_index.hpp>
#include <roofsim/graph.hpp>
#include <roofsim/ir.hpp>
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
    std::vector<std::uint32_t> layer_of_row;  ///< the graph layer of each row before the optimizer's
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
    Lowerer(const Graph& g, const LoweringOptions& o)
        : graph_(g), options_(o), rules_(rules_for(o.precision)), inference_(o.mode == StepMode::inference) {}

    /// Lowers the graph. With `summaries`, the step has a summary of each layer (lower()); without,
    /// only what a prediction needs: the kernels and parameters, and the memory totals the
    /// summaries add up to (saved_bytes, largest_output).
    LoweredStep run(bool summaries = true) {
        summaries_ = summaries;
        if (options_.batch <= 0) throw GraphError("batch size must be positive");
        step_.kernels.model = graph_.name;
        step_.kernels.precision = options_.precision;
        step_.kernels.mode = options_.mode;
        step_.kernels.origin = "lowered from layer graph '" + graph_.name + "'";
        step_.parameter_dtype = rules_.parameter_dtype;
        step_.kernels.kernels.reserve(graph_.layers.size() * 8);
        step_.parameter_tensors.reserve(graph_.layers.size() * 2);
        step_.parameter_layer.reserve(graph_.layers.size() * 2);
        if (summaries_) step_.layers.reserve(graph_.layers.size());
        backward_.reserve(graph_.layers.size() * 4);  // ample for the zoo models (at most 3.4 per layer)
        backward_begin_.reserve(graph_.layers.size() + 1);
        saved_.reserve(graph_.layers.size() * 2);
        rows_.of_kernel.reserve(step_.kernels.kernels.capacity());
        declare_inputs();
        count_consumers();
        for (layer_ = 0; layer_ < graph_.layers.size(); ++layer_) lower_layer(graph_.layers[layer_]);
        if (inference_) return finish_inference();
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
    bool inference_ = false;                 // an inference forward (options_.mode)
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
    std::size_t row_ = 0;                    // its report row: the layer, less the layers inference skips before it
    // Inference: per value, 1 where the layer is not run (a loss, or a layer reading one's value); the
    // last layer that reads it (none: no reader); the bytes of the tensor it writes (0: a view of its input's)
    std::vector<std::uint8_t> skipped_;
    std::vector<std::size_t> last_reader_;
    std::vector<Bytes> written_;
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
            v.needs_grad = in.requires_grad && !inference_;
            // PyTorch's sizes are int64: a tensor whose bytes overflow it cannot be made
            std::int64_t bytes = whole_element_bytes(v.dtype);
            for (const auto d : v.shape) {
                const auto more = checked_mul(bytes, d);
                if (!more) throw GraphError("input '" + in.name + "': shape: its bytes overflow a 64-bit integer");
                bytes = *more;
            }
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
        last_reader_.assign(value_count(), none);
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
            if (!l.attrs.empty()) check_attribute_names(l);
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
                last_reader_[id] = li;
            }
            const std::size_t own = graph_.inputs.size() + li;
            name_taken_[li] = names_.insert(l.name, own) != own ? 1 : 0;
        }
    }

    /// Refuses an attribute the layer's op does not take (known_attributes), naming it and the close
    /// matches: PyTorch refuses an unexpected keyword argument, and a typo must not become a default.
    static void check_attribute_names(const Layer& l) {
        const auto known = known_attributes().find(l.op);
        if (known == known_attributes().end()) return;  // not an op lowering knows: refused as such
        for (const auto& attr : l.attrs) {
            const auto& names = known->second;
            if (std::find(names.begin(), names.end(), attr.first) != names.end()) continue;
            std::string taken;
            for (const auto name : names) taken += (taken.empty() ? "" : ", ") + std::string(name);
            throw layer_error(l, attr.first + ": unknown attribute" + did_you_mean(attr.first, names) + " (" + l.op +
                                     (names.empty() ? " takes none)" : " takes " + taken + ")"));
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
        if (phase == Phase::forward) rows_.of_kernel.push_back(static_cast<std::uint32_t>(row_));
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
        step_.parameter_layer.push_back(static_cast<std::uint32_t>(layer_));
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
            rows_.of_kernel.push_back(static_cast<std::uint32_t>(row_));
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
        if (inference_) return;  // inference_mode saves nothing
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

    /// Refuses a dims attribute with a value below `least` (1: positive, 0: non-negative), as PyTorch does.
    static void check_dims_at_least(const Layer& l, std::string_view key, const std::array<std::int64_t, 2>& dims,
                                    std::int64_t least) {
        for (const std::int64_t d : dims) {
            if (d >= least) continue;
            throw layer_error(l, std::string(key) + (least > 0 ? ": expected positive integers, got " : ": expected non-negative integers, got ") +
                                     std::to_string(d));
        }
    }

    /// The product of `factors`, refused naming `what` where int64 cannot hold it (PyTorch's sizes are int64).
    static std::int64_t product(const Layer& l, std::string_view what, std::initializer_list<std::int64_t> factors) {
        const auto p = checked_product(factors);
        if (!p) throw layer_error(l, std::string(what) + ": overflows a 64-bit integer");
        return *p;
    }

    /// a + b, refused naming `what` where int64 cannot hold it.
    static std::int64_t sum(const Layer& l, std::string_view what, std::int64_t a, std::int64_t b) {
        const auto s = checked_add(a, b);
        if (!s) throw layer_error(l, std::string(what) + ": overflows a 64-bit integer");
        return *s;
    }

    /// Refuses a kernel shape whose sizes overflow int64 (ir.hpp, oversized_size), naming the size.
    template <class Dims>
    static void check_sizes(const Layer& l, const Dims& d, DType dtype) {
        const std::string oversized = oversized_size(d, whole_element_bytes(dtype));
        if (!oversized.empty()) throw layer_error(l, oversized + ": overflows a 64-bit integer");
    }

    ComputeUnit matmul_unit(DType d) const { return tensor_unit_for(d, rules_.matmul_unit); }
    ComputeUnit conv_unit(DType d) const { return tensor_unit_for(d, rules_.conv_unit); }

    Kernel& gemm(const Layer& l, Phase phase, std::string_view op, DType dtype, GemmDims g, DType out_dtype) {
        check_sizes(l, g, std::max(dtype, out_dtype, [](DType a, DType b) { return bytes_per_element(a) < bytes_per_element(b); }));
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
        if (inference_ && skip_in_inference(l)) return;
        forward_marker_ = step_.kernels.kernels.size();
        Kernel& forward_marker = step_.kernels.kernels.emplace_back(blank_);
        marker(forward_marker, l.name, l.op, Phase::forward);
        rows_.of_kernel.push_back(static_cast<std::uint32_t>(row_));
        const std::size_t backward_begin = backward_.size();
        backward_begin_.push_back(backward_begin);
        backward_.emplace_back(forward_marker).phase = Phase::backward;  // the backward marker, unless nothing needs a gradient
        Value out = dispatch(l, s);
        bool any_grad = false;
        for (std::size_t i = 0; i < l.inputs.size(); ++i) any_grad = any_grad || input(l, i).needs_grad;
        out.needs_grad = !inference_ && (out.needs_grad || any_grad || s.parameters > 0);
        if (!out.needs_grad) backward_.erase(backward_.begin() + static_cast<std::ptrdiff_t>(backward_begin), backward_.end());
        // A value read by several layers gets its gradient summed in backward: one add per extra reader.
        for (std::size_t i = 0; i < l.inputs.size(); ++i) {
            const Value& v = input(l, i);
            if (v.needs_grad && consumers_[input_id(i)] > 1 && first_reader_[input_id(i)] != layer_) {
                kernel(l, Phase::backward, "aten::add_", KernelKind::elementwise, v.dtype, 2 * numel(v.shape), numel(v.shape));
            }
        }
        std::int64_t out_bytes = whole_element_bytes(out.dtype);
        for (auto d : out.shape) {
            if (d <= 0) throw layer_error(l, "output shape has a non-positive dimension (check the attributes)");
            // PyTorch's sizes are int64: an output whose bytes overflow it cannot be made
            out_bytes = product(l, "output shape (its bytes)", {out_bytes, d});
        }
        s.output_dtype = out.dtype;
        s.output_bytes = tensor_bytes(numel(out.shape), out.dtype);
        largest_output_ = max(largest_output_, s.output_bytes);
        if (inference_) note_written(l, out);
        if (summaries_) step_.layers.push_back(std::move(s));  // its output shape and saved tensors come in run()
        values_.push_back(std::move(out));  // the value own_id()
        rows_.layer_of_row.push_back(static_cast<std::uint32_t>(layer_));
        ++row_;
    }

    // ---- inference ----------------------------------------------------------------------------

    /// Whether inference leaves layer `l` out, and if so records it as left out: a loss
    /// (cross_entropy; an inference forward returns the logits) and every layer that reads the value
    /// of one left out. Its value stays as a placeholder, so later layers' ids hold.
    bool skip_in_inference(const Layer& l) {
        if (skipped_.empty()) skipped_.assign(value_count(), 0);
        bool skip = op_[layer_]->rule == OpRule::cross_entropy;
        for (std::size_t i = 0; i < l.inputs.size() && !skip; ++i) skip = input_id(i) != none && skipped_[input_id(i)] != 0;
        if (!skip) return false;
        skipped_[own_id()] = 1;
        backward_begin_.push_back(backward_.size());
        if (summaries_) {
            LayerSummary& s = step_.layers.emplace_back();
            s.name = l.name;
            s.op = l.op;
        }
        values_.push_back(Value{Shape{1}, DType::f32, false});
        return true;
    }

    /// Records the bytes of the tensor the layer just lowered writes: its output's, unless its forward
    /// kernels write nothing (a view: reshape, slice, transpose without a copy; dropout in eval) or it
    /// works in place, whose output is its input's tensor.
    void note_written(const Layer& l, const Value& out) {
        if (written_.empty()) written_.assign(value_count(), Bytes(0));
        Bytes wrote{0};
        const auto& kernels = step_.kernels.kernels;
        for (std::size_t i = forward_marker_; i < kernels.size(); ++i) wrote += kernels[i].bytes_written;
        if (tensor_[own_id()] != own_id()) return;
        if (wrote.value() == 0 && !l.inputs.empty() && input_id(0) != none) {
            tensor_[own_id()] = tensor_[input_id(0)];
            return;
        }
        written_[own_id()] = tensor_bytes(numel(out.shape), out.dtype);
    }

    /// The inference step: the forward's kernels alone, and the most bytes of layer outputs alive at
    /// once. A tensor lives from the layer that writes it to the last layer that reads it or any view
    /// of it; an output no layer reads (the model's) to the end.
    LoweredStep finish_inference() {
        rows_.count = row_;
        if (written_.empty()) written_.assign(value_count(), Bytes(0));
        const std::size_t layers = graph_.layers.size(), first = graph_.inputs.size();
        std::vector<std::size_t> end(value_count(), 0);
        for (std::size_t v = first; v < value_count(); ++v) {
            if (!skipped_.empty() && skipped_[v] != 0) continue;
            const std::size_t last = last_reader_[v] == none ? layers - 1 : last_reader_[v];
            std::size_t& e = end[tensor_[v]];
            e = std::max(e, last);
        }
        std::vector<double> change(layers + 1, 0.0);  // bytes allocated at a layer, freed after its last reader
        for (std::size_t v = first; v < value_count(); ++v) {
            if (written_[v].value() == 0) continue;
            change[v - first] += written_[v].value();
            change[end[v] + 1] -= written_[v].value();
        }
        double live = 0, peak = 0;
        for (std::size_t i = 0; i < layers; ++i) {
            live += change[i];
            peak = std::max(peak, live);
        }
        step_.live_peak = Bytes(peak);
        if (summaries_) {
            for (std::size_t i = 0; i < step_.layers.size(); ++i) {
                step_.layers[i].output_shape = values_[first + i].shape.to_vector();
            }
        }
        return std::move(step_);
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
            case OpRule::scale: return scale(l, s);
        }
        throw layer_error(l, "unknown op");
    }

    Value linear(const Layer& l, LayerSummary& s);

    Value matmul(const Layer& l, LayerSummary& s);

    Value conv(const Layer& l, LayerSummary& s, std::size_t rank);

    Value batchnorm(const Layer& l, LayerSummary& s);

    Value layernorm(const Layer& l, LayerSummary& s);

    Value groupnorm(const Layer& l, LayerSummary& s);

    Value activation(const Layer& l, LayerSummary& s);

    Value dropout(const Layer& l, LayerSummary& s);

    Value binary(const Layer& l, LayerSummary& s);

    Value softmax(const Layer& l, LayerSummary& s);
    Value scale(const Layer& l, LayerSummary& s);

    Value cross_entropy(const Layer& l, LayerSummary& s);

    void attention_kernels(const Layer& l, AttentionDims a, DType dt);

    Value sdpa(const Layer& l, LayerSummary& s);

    void mha_out_projection_backward(const Layer& l, DType dt, std::int64_t tokens, std::int64_t e);

    void mha_in_projection_backward(const Layer& l, DType dt, std::int64_t tokens, std::int64_t e, bool input_grad);

    Value mha(const Layer& l, LayerSummary& s);

    Value embedding(const Layer& l, LayerSummary& s);

    Value pool(const Layer& l, LayerSummary& s);

    Value adaptive_pool(const Layer& l, LayerSummary& s);

    Value reshape(const Layer& l, LayerSummary&);

    void copy_both_ways(const Layer& l, const Value& x);

    Value slice(const Layer& l, LayerSummary&);

    Value gelu_tanh_composite(const Layer& l, LayerSummary& s);

    Value transpose(const Layer& l, LayerSummary&);

    Value cat(const Layer& l, LayerSummary&);

    Value cast_layer(const Layer& l, LayerSummary&);

    Value sum_layer(const Layer& l, LayerSummary&);

    // ---- optimizer ----------------------------------------------------------------------------

    void foreach_op(std::string_view name, double reads, double writes, int depth, std::optional<DType> dtype = std::nullopt);

    void lower_optimizer();
    void lower_optimizer_step(const OptimizerOptions& o);
};

}  // namespace detail

}  // namespace roofsim
