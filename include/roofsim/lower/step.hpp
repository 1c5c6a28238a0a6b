#pragma once
/// What lowering makes of a layer graph: its options (batch, precision mode, optimizer), each
/// layer's summary, and the step's kernels with what memory accounting needs.

#include <roofsim/ir.hpp>
#include <roofsim/optimizer.hpp>
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

struct LoweringOptions {
    std::int64_t batch = 1;
    PrecisionMode precision = PrecisionMode::fp32;
    OptimizerOptions optimizer;  ///< not read in inference (no optimizer step)
    StepMode mode = StepMode::training;
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
    std::vector<std::uint32_t> parameter_layer;  ///< the layer (index) each parameter tensor belongs to
    DType parameter_dtype = DType::f32;
    Bytes input_bytes{0};                   ///< graph inputs resident during the step
    /// Inference: the most bytes of layer outputs alive at once (each tensor from the layer that
    /// writes it to its last reader; a view or an in-place output is its input's tensor). Zero in training.
    Bytes live_peak{0};

    [[nodiscard]] double parameter_count() const {
        return std::accumulate(parameter_tensors.begin(), parameter_tensors.end(), 0.0);
    }
};

}  // namespace roofsim
