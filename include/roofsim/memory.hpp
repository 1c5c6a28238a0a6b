#pragma once
/// Memory of a training step as PyTorch's caching allocator counts it (torch.cuda.max_memory_allocated):
/// parameters, gradients, optimizer state, graph inputs, activations saved for backward, autocast's
/// low-precision weight copies, and the peak.

#include <roofsim/lower.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace roofsim {

struct MemoryEstimate {
    Bytes parameters{0};
    Bytes gradients{0};
    Bytes optimizer_state{0};   ///< SGD momentum: 1 x parameters; Adam(W): 2 x (exp_avg, exp_avg_sq)
    Bytes inputs{0};
    Bytes activations{0};       ///< saved for backward, all layers together
    Bytes autocast_copies{0};   ///< low-precision weight copies kept for backward under autocast
    Bytes peak{0};
};

namespace detail {

/// estimate_memory from the step's totals: the bytes saved for backward (each tensor once) and the
/// largest layer output.
[[nodiscard]] inline MemoryEstimate estimate_memory(const LoweredStep& step, const LoweringOptions& options, Bytes saved,
                                                    Bytes largest_output) {
    MemoryEstimate m;
    const double p = step.parameter_count();
    const double param_bytes = bytes_per_element(step.parameter_dtype);
    m.parameters = Bytes(p * param_bytes);
    m.gradients = m.parameters;
    switch (options.optimizer.kind) {
        case OptimizerKind::none: break;
        case OptimizerKind::sgd: m.optimizer_state = options.optimizer.momentum ? m.parameters : Bytes(0); break;
        case OptimizerKind::adam:
        case OptimizerKind::adamw: m.optimizer_state = 2.0 * m.parameters; break;
    }
    m.inputs = step.input_bytes;
    m.activations = saved;
    const PrecisionRules rules = rules_for(options.precision);
    if (rules.autocast) m.autocast_copies = Bytes(p * bytes_per_element(rules.low_dtype));
    const Bytes forward_end = m.parameters + m.optimizer_state + m.inputs + m.activations + m.autocast_copies + 2.0 * largest_output;
    Bytes optimizer_step = m.parameters + m.gradients + m.optimizer_state + m.inputs;
    const bool adam = options.optimizer.kind == OptimizerKind::adam || options.optimizer.kind == OptimizerKind::adamw;
    if (adam && !options.optimizer.fused) optimizer_step += m.parameters;
    m.peak = max(forward_end, optimizer_step);
    return m;
}

}  // namespace detail

/// Peak = the larger of the end of forward (parameters, state, inputs, saved activations, weight
/// copies, plus the largest layer output twice: its gradient and its input's gradient in flight) and
/// the optimizer step (parameters, gradients, state, and one parameter-sized temporary for Adam's
/// sqrt(v)). Allocator rounding (512-byte blocks) is ignored.
[[nodiscard]] inline MemoryEstimate estimate_memory(const LoweredStep& step, const LoweringOptions& options) {
    detail::SavedTotal saved;  // each saved tensor once, however many layers keep it
    Bytes largest_output{0};
    for (const auto& l : step.layers) {
        for (const auto& [tensor, bytes] : l.saved) saved.add(tensor, bytes);
        largest_output = max(largest_output, l.output_bytes);
    }
    return detail::estimate_memory(step, options, saved.bytes(), largest_output);
}

}  // namespace roofsim
