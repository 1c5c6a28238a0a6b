#pragma once
/// The layer graph: named input tensors and PyTorch layers in execution order, each with its op,
/// its input names and typed attributes. Built in C++ (GraphBuilder) or read from JSON
/// (docs/graph-format.md); lowered into kernels by lower.hpp. Shapes may use the symbol "batch".

#include <roofsim/detail/json_file.hpp>
#include <roofsim/detail/json_read.hpp>
#include <roofsim/ir.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace roofsim {

/// An attribute value: integer, real, flag, name, or integer list (kernel sizes, shapes).
using AttrValue = std::variant<std::int64_t, double, bool, std::string, std::vector<std::int64_t>>;

/// One dimension of an input shape: a number, or the batch size (filled in at prediction time).
struct Dim {
    std::int64_t size = 0;
    bool is_batch = false;

    constexpr Dim() = default;
    constexpr Dim(std::int64_t fixed_size) : size(fixed_size) {}  // NOLINT: a number is a fixed dimension
    constexpr Dim(std::int64_t fixed_size, bool batch) : size(fixed_size), is_batch(batch) {}
    friend constexpr bool operator==(const Dim&, const Dim&) = default;
};

/// A tensor entering the graph (data, labels, indices).
struct GraphInput {
    std::string name;
    std::vector<Dim> shape;
    DType dtype = DType::f32;
    bool requires_grad = false;  ///< true for inputs whose gradient the step computes (rare)
};

/// One layer: what PyTorch module or function runs, on which inputs, with which attributes.
struct Layer {
    std::string name;                         ///< unique; also names the layer's output
    std::string op;                           ///< "linear", "conv2d", ... (docs/graph-format.md)
    std::vector<std::string> inputs;          ///< graph inputs or earlier layers, in argument order
    std::map<std::string, AttrValue> attrs;   ///< the op's attributes
};

/// A model as a sequence of layers over named inputs.
struct Graph {
    std::string name;
    std::vector<GraphInput> inputs;
    std::vector<Layer> layers;
};

/// A graph error that names the layer and the field, e.g. "layer 'fc1' (linear): in_features: missing".
class GraphError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

[[nodiscard]] inline GraphError layer_error(const Layer& l, const std::string& what) {
    return GraphError("layer '" + l.name + "' (" + l.op + "): " + what);
}

/// Typed attribute access with the layer named in every error.
[[nodiscard]] inline std::int64_t attr_int(const Layer& l, const std::string& key,
                                           std::optional<std::int64_t> fallback = std::nullopt) {
    auto it = l.attrs.find(key);
    if (it == l.attrs.end()) {
        if (fallback) return *fallback;
        throw layer_error(l, key + ": missing");
    }
    if (const auto* v = std::get_if<std::int64_t>(&it->second)) return *v;
    throw layer_error(l, key + ": expected an integer");
}

[[nodiscard]] inline double attr_real(const Layer& l, const std::string& key, std::optional<double> fallback = std::nullopt) {
    auto it = l.attrs.find(key);
    if (it == l.attrs.end()) {
        if (fallback) return *fallback;
        throw layer_error(l, key + ": missing");
    }
    if (const auto* v = std::get_if<double>(&it->second)) return *v;
    if (const auto* v = std::get_if<std::int64_t>(&it->second)) return static_cast<double>(*v);
    throw layer_error(l, key + ": expected a number");
}

[[nodiscard]] inline bool attr_bool(const Layer& l, const std::string& key, std::optional<bool> fallback = std::nullopt) {
    auto it = l.attrs.find(key);
    if (it == l.attrs.end()) {
        if (fallback) return *fallback;
        throw layer_error(l, key + ": missing");
    }
    if (const auto* v = std::get_if<bool>(&it->second)) return *v;
    throw layer_error(l, key + ": expected true or false");
}

[[nodiscard]] inline std::string attr_string(const Layer& l, const std::string& key,
                                             std::optional<std::string> fallback = std::nullopt) {
    auto it = l.attrs.find(key);
    if (it == l.attrs.end()) {
        if (fallback) return *fallback;
        throw layer_error(l, key + ": missing");
    }
    if (const auto* v = std::get_if<std::string>(&it->second)) return *v;
    throw layer_error(l, key + ": expected a string");
}

/// An integer list attribute; a single integer is accepted and repeated `rank` times (PyTorch's
/// `kernel_size=3` means (3, 3)).
[[nodiscard]] inline std::vector<std::int64_t> attr_ints(const Layer& l, const std::string& key, std::size_t rank,
                                                         std::optional<std::int64_t> fallback = std::nullopt) {
    auto it = l.attrs.find(key);
    if (it == l.attrs.end()) {
        if (fallback) return std::vector<std::int64_t>(rank, *fallback);
        throw layer_error(l, key + ": missing");
    }
    if (const auto* v = std::get_if<std::int64_t>(&it->second)) return std::vector<std::int64_t>(rank, *v);
    if (const auto* v = std::get_if<std::vector<std::int64_t>>(&it->second)) {
        if (rank != 0 && v->size() != rank) {
            throw layer_error(l, key + ": expected " + std::to_string(rank) + " values, got " + std::to_string(v->size()));
        }
        return *v;
    }
    throw layer_error(l, key + ": expected an integer or a list of integers");
}

/// Builds a graph in C++: `GraphBuilder b("mlp"); auto x = b.input("x", {batch, 784}); ...`.
class GraphBuilder {
public:
    explicit GraphBuilder(std::string name) { graph_.name = std::move(name); }

    /// The batch dimension, for input shapes.
    static constexpr Dim batch{0, true};

    /// Declares a graph input; returns its name for use as a layer input.
    std::string input(const std::string& name, std::vector<Dim> shape, DType dtype = DType::f32) {
        graph_.inputs.push_back(GraphInput{name, std::move(shape), dtype, false});
        return name;
    }

    /// Adds a layer; returns its name (its output) for use as a later layer's input.
    std::string layer(const std::string& name, const std::string& op, std::vector<std::string> inputs,
                      std::map<std::string, AttrValue> attrs = {}) {
        graph_.layers.push_back(Layer{name, op, std::move(inputs), std::move(attrs)});
        return name;
    }

    [[nodiscard]] const Graph& graph() const { return graph_; }
    [[nodiscard]] Graph build() && { return std::move(graph_); }

private:
    Graph graph_;
};

/// A graph of one layer over its own inputs (`input0`, `input1`, ...): how single-layer
/// measurements are rebuilt for prediction.
[[nodiscard]] inline Graph one_layer_graph(const std::string& op, std::map<std::string, AttrValue> attrs,
                                           std::vector<GraphInput> inputs) {
    Graph g;
    g.name = op;
    Layer layer{op, op, {}, std::move(attrs)};
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        inputs[i].name = "input" + std::to_string(i);
        layer.inputs.push_back(inputs[i].name);
    }
    g.inputs = std::move(inputs);
    g.layers.push_back(std::move(layer));
    return g;
}

namespace detail {
inline AttrValue attr_from_json(const JsonCursor& c) {
    const nlohmann::json& v = c.json();
    if (v.is_boolean()) return v.get<bool>();
    if (v.is_number_integer()) return c.integer();
    if (v.is_number()) return c.number();
    if (v.is_string()) return v.get<std::string>();
    if (!v.is_array()) c.fail("an attribute is an integer, number, boolean, string or list of integers");
    std::vector<std::int64_t> list;
    for (std::size_t i = 0; i < c.array_size(); ++i) list.push_back(c.at(i).integer());
    return list;
}

/// A graph input: {"shape", "dtype" (float32), "requires_grad" (false)}, "name" where `named`; shape
/// entries are positive integers or, in a graph file, "batch".
inline GraphInput graph_input_from_json(const JsonCursor& in, bool named) {
    if (named) in.check_fields({"name", "shape", "dtype", "requires_grad"}, "docs/graph-format.md");
    GraphInput gi;
    if (named) gi.name = in.at("name").string();
    const JsonCursor shape = in.at("shape");
    for (std::size_t d = 0; d < shape.array_size(); ++d) {
        const JsonCursor dim = shape.at(d);
        if (named && dim.json().is_string()) {
            if (dim.string() != "batch") dim.fail("a symbolic dimension must be \"batch\"");
            gi.shape.push_back(Dim{0, true});
        } else {
            gi.shape.push_back(Dim(dim.positive_integer()));
        }
    }
    if (in.has("dtype")) {
        auto dt = dtype_from_key(in.at("dtype").string());
        if (!dt) in.at("dtype").fail("unknown dtype (float32, float16, bfloat16, int64, ...)");
        gi.dtype = *dt;
    }
    gi.requires_grad = in.has("requires_grad") && in.at("requires_grad").boolean();
    return gi;
}

/// A measured single layer as the measurement scripts write it: {"op", "params", "inputs": [{"shape",
/// "dtype", "requires_grad"}]} (tools/validate, calibrate/torch_framework_probe.py).
inline Graph one_layer_graph_from_json(const JsonCursor& c) {
    std::map<std::string, AttrValue> attrs;
    const JsonCursor params = c.at("params");
    for (const auto& [key, value] : params.object().items()) attrs[key] = attr_from_json(params.at(key));
    std::vector<GraphInput> inputs;
    const JsonCursor list = c.at("inputs");
    for (std::size_t i = 0; i < list.array_size(); ++i) inputs.push_back(graph_input_from_json(list.at(i), false));
    return one_layer_graph(c.at("op").string(), std::move(attrs), std::move(inputs));
}
}  // namespace detail

/// Parses a layer graph (schema_version 1, kind "roofsim-layer-graph"). Errors name the file and the
/// JSON pointer; structural checks (unknown input names, duplicates) name the layer.
[[nodiscard]] inline Graph graph_from_json(const nlohmann::json& document, std::string_view origin) {
    using detail::JsonCursor;
    const JsonCursor root(document, std::string(origin), "");
    root.check_fields({"schema_version", "kind", "name", "inputs", "layers"}, "docs/graph-format.md");
    if (root.at("schema_version").integer() != 1) root.at("schema_version").fail("unsupported version (expected 1)");
    if (root.at("kind").string() != "roofsim-layer-graph") root.at("kind").fail("expected \"roofsim-layer-graph\"");
    Graph g;
    g.name = root.at("name").string();
    const JsonCursor inputs = root.at("inputs");
    for (std::size_t i = 0; i < inputs.array_size(); ++i) g.inputs.push_back(detail::graph_input_from_json(inputs.at(i), true));
    const JsonCursor layers = root.at("layers");
    for (std::size_t i = 0; i < layers.array_size(); ++i) {
        const JsonCursor lj = layers.at(i);
        lj.check_fields({"name", "op", "inputs", "attrs"}, "docs/graph-format.md");
        Layer l;
        l.name = lj.at("name").string();
        l.op = lj.at("op").string();
        const JsonCursor ins = lj.at("inputs");
        for (std::size_t k = 0; k < ins.array_size(); ++k) l.inputs.push_back(ins.at(k).string());
        if (lj.has("attrs")) {
            const JsonCursor attrs = lj.at("attrs");
            for (const auto& [key, value] : attrs.object().items()) l.attrs[key] = detail::attr_from_json(attrs.at(key));
        }
        g.layers.push_back(std::move(l));
    }
    return g;
}

/// The graph in its JSON form (graph_from_json(to_json(g)) == g).
[[nodiscard]] inline nlohmann::json to_json(const Graph& g) {
    nlohmann::json inputs = nlohmann::json::array();
    for (const auto& in : g.inputs) {
        nlohmann::json shape = nlohmann::json::array();
        for (const auto& d : in.shape) {
            if (d.is_batch) shape.push_back("batch");
            else shape.push_back(d.size);
        }
        inputs.push_back({{"name", in.name}, {"shape", shape}, {"dtype", to_string(in.dtype)},
                          {"requires_grad", in.requires_grad}});
    }
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& l : g.layers) {
        nlohmann::json attrs = nlohmann::json::object();
        for (const auto& attr : l.attrs) {  // not a structured binding: clang before 16 cannot capture one
            std::visit([&attrs, &key = attr.first](const auto& x) { attrs[key] = x; }, attr.second);
        }
        layers.push_back({{"name", l.name}, {"op", l.op}, {"inputs", l.inputs}, {"attrs", attrs}});
    }
    return {{"schema_version", 1}, {"kind", "roofsim-layer-graph"}, {"name", g.name},
            {"inputs", inputs},     {"layers", layers}};
}

/// Reads a layer graph file.
[[nodiscard]] inline Graph load_graph(const std::filesystem::path& path) {
    return graph_from_json(detail::read_json_file(path), path.filename().string());
}

}  // namespace roofsim
