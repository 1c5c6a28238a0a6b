#pragma once
/// The graph ops lowering knows: each op's arity, its lowering rule and its autocast list.

#include <roofsim/detail/name_index.hpp>

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

/// The lowering rule of a graph op (several ops share one: the activations, the poolings, ...).
enum class OpRule {
    linear, matmul, conv2d, conv1d, batchnorm, layernorm, groupnorm, activation, dropout, binary, softmax,
    cross_entropy, sdpa, mha, embedding, pool, adaptive_pool, reshape, slice, gelu_tanh_composite, transpose, cat, cast, sum,
    scale,
};

/// Autocast's op lists (torch.amp docs): "CUDA Ops that can autocast to float16" (matmuls,
/// convolutions, attention, the RNN cells) run in the lower precision; "CUDA Ops that can autocast
/// to float32" run in float32 even when their input is lower precision.
enum class AutocastList { none, lower_precision, float32 };

/// What lowering knows of an op: its arity (inputs, checked before any work), its rule, its autocast list.
struct KnownOp {
    int arity = 1;
    OpRule rule = OpRule::linear;
    AutocastList autocast = AutocastList::none;
};

/// The ops lowering knows.
inline const std::map<std::string, KnownOp, std::less<>>& known_ops() {
    using R = OpRule;
    constexpr auto low = AutocastList::lower_precision, fp32 = AutocastList::float32;
    static const std::map<std::string, KnownOp, std::less<>> ops = {
        {"linear", {1, R::linear, low}},       {"matmul", {2, R::matmul, low}},        {"bmm", {2, R::matmul, low}},
        {"conv2d", {1, R::conv2d, low}},       {"conv1d", {1, R::conv1d, low}},        {"batchnorm2d", {1, R::batchnorm}},
        {"layernorm", {1, R::layernorm, fp32}}, {"groupnorm", {1, R::groupnorm, fp32}}, {"rmsnorm", {1, R::layernorm, fp32}},
        {"relu", {1, R::activation}},          {"gelu", {1, R::activation}},           {"silu", {1, R::activation}},
        {"tanh", {1, R::activation}},          {"sigmoid", {1, R::activation}},        {"dropout", {1, R::dropout}},
        {"add", {2, R::binary}},               {"mul", {2, R::binary}},                {"softmax", {1, R::softmax, fp32}},
        {"log_softmax", {1, R::softmax, fp32}}, {"cross_entropy", {2, R::cross_entropy, fp32}},
        {"sdpa", {3, R::sdpa, low}},           {"mha", {1, R::mha, low}},              {"embedding", {1, R::embedding}},
        {"maxpool2d", {1, R::pool}},           {"avgpool2d", {1, R::pool}},            {"adaptive_avgpool2d", {1, R::adaptive_pool}},
        {"flatten", {1, R::reshape}},          {"reshape", {1, R::reshape}},           {"slice", {1, R::slice}},
        {"transpose", {1, R::transpose}},      {"transpose_contiguous", {1, R::transpose}}, {"cat", {2, R::cat}},
        {"gelu_tanh_composite", {1, R::gelu_tanh_composite}}, {"cast", {1, R::cast}},
        {"sum", {1, R::sum}},                  {"scale", {1, R::scale}},
    };
    return ops;
}

/// The attributes each known op takes (docs/graph-format.md, "Ops and attributes"): the one list
/// lowering reads them by, against which a graph's attributes are checked (an unknown one is a
/// typo PyTorch would refuse as an unexpected keyword argument).
inline const std::map<std::string, std::vector<std::string_view>, std::less<>>& known_attributes() {
    static const std::vector<std::string_view> conv = {"in_channels", "out_channels", "kernel_size", "stride",
                                                       "padding", "dilation", "groups", "bias"};
    static const std::vector<std::string_view> activation = {"inplace"};
    static const std::vector<std::string_view> pool = {"kernel_size", "stride", "padding"};
    static const std::vector<std::string_view> norm = {"normalized_shape", "elementwise_affine"};
    static const std::vector<std::string_view> dims = {"dim0", "dim1"};
    static const std::vector<std::string_view> softmax = {"dim"};
    static const std::map<std::string, std::vector<std::string_view>, std::less<>> attributes = {
        {"linear", {"in_features", "out_features", "bias", "tied"}},
        {"matmul", {}}, {"bmm", {}},
        {"conv2d", conv}, {"conv1d", conv},
        {"batchnorm2d", {"num_features"}},
        {"layernorm", norm}, {"rmsnorm", norm},
        {"groupnorm", {"num_groups", "num_channels"}},
        {"relu", activation}, {"gelu", {"inplace", "approximate"}}, {"silu", activation}, {"tanh", activation},
        {"sigmoid", activation},
        {"dropout", {"p"}},
        {"add", {}}, {"mul", {}},
        {"softmax", softmax}, {"log_softmax", softmax},
        {"cross_entropy", {}},
        {"sdpa", {"is_causal", "dropout_p", "backend"}},
        {"mha", {"embed_dim", "num_heads", "need_weights", "batch_first"}},  // batch_first: the measurement scripts record it
        {"embedding", {"num_embeddings", "embedding_dim"}},
        {"maxpool2d", pool}, {"avgpool2d", pool},
        {"adaptive_avgpool2d", {"output_size"}},
        {"flatten", {"start_dim", "copy"}}, {"reshape", {"shape", "copy"}},
        {"slice", {"dim", "start", "length"}},
        {"transpose", dims}, {"transpose_contiguous", dims},
        {"cat", {"dim"}},
        {"gelu_tanh_composite", {}},
        {"cast", {"dtype"}},
        {"sum", {}},
        {"scale", {"factor"}},
    };
    return attributes;
}

/// The known op named `op`, or null: known_ops() indexed once, for the lookup of every layer's op.
inline const KnownOp* find_known_op(std::string_view op) {
    static const auto index = [] {
        std::pair<NameIndex, std::vector<const KnownOp*>> by_name{NameIndex(known_ops().size()), {}};
        for (const auto& [name, known] : known_ops()) {
            by_name.first.insert(name, by_name.second.size());
            by_name.second.push_back(&known);
        }
        return by_name;
    }();
    const std::size_t i = index.first.find(op);
    return i == NameIndex::none ? nullptr : index.second[i];
}

}  // namespace detail

}  // namespace roofsim
