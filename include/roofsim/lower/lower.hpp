#pragma once
/// Lowers a layer graph into the kernels of one training step.

#include <roofsim/lower/lowerer.hpp>
// the lowering rules, by op family (each defines its Lowerer members)
#include <roofsim/lower/attention.hpp>
#include <roofsim/lower/conv.hpp>
#include <roofsim/lower/elementwise.hpp>
#include <roofsim/lower/embedding.hpp>
#include <roofsim/lower/layout.hpp>
#include <roofsim/lower/linear.hpp>
#include <roofsim/lower/norm.hpp>
#include <roofsim/lower/optimizer.hpp>
#include <roofsim/lower/pool.hpp>
#include <roofsim/lower/reduction.hpp>

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

/// Lowers a layer graph into the kernels of one training step (forward, backward, optimizer).
/// Throws GraphError naming the layer and the field for an unknown op, a bad shape or attribute.
[[nodiscard]] inline LoweredStep lower(const Graph& graph, const LoweringOptions& options) {
    return detail::Lowerer(graph, options).run();
}

namespace detail {

/// A step lowered for a prediction: no layer summaries, but the memory totals they add up to and
/// the report row of each kernel.
struct PredictionLowering {
    LoweredStep step;
    Bytes saved{0};           ///< saved for backward, each tensor once
    Bytes largest_output{0};  ///< the largest layer output
    KernelRows rows;
    std::vector<std::string_view> ops;  ///< the graph's ops, each once
};

[[nodiscard]] inline PredictionLowering lower_for_prediction(const Graph& graph, const LoweringOptions& options) {
    Lowerer lowerer(graph, options);
    PredictionLowering out;
    out.step = lowerer.run(false);
    out.saved = lowerer.saved_bytes();
    out.largest_output = lowerer.largest_output();
    out.rows = lowerer.take_rows();
    out.ops = lowerer.ops();
    return out;
}

}  // namespace detail

}  // namespace roofsim
