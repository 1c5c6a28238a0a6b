#pragma once
/// Memory of a training step as PyTorch's caching allocator counts it (torch.cuda.max_memory_allocated):
/// parameters, gradients, optimizer state, graph inputs, activations saved for backward, autocast's
/// low-precision weight copies, and the peak. It needs only what a step's kernels and layers add up to
/// (MemoryInputs), not how they were lowered.

#include <roofsim/dtype.hpp>
#include <roofsim/optimizer.hpp>
#include <roofsim/precision_mode.hpp>
#include <roofsim/step_mode.hpp>
#include <roofsim/units.hpp>

#include <string>
#include <utility>

namespace roofsim {

struct MemoryEstimate {
    Bytes parameters{0};
    Bytes gradients{0};
    Bytes optimizer_state{0};   ///< SGD momentum: 1 x parameters; Adam(W): 2 x (exp_avg, exp_avg_sq); in float32 with master weights
    Bytes master_weights{0};    ///< float32 master parameters and their gradients (has_master_weights)
    Bytes inputs{0};
    Bytes activations{0};       ///< saved for backward, all layers together; inference: the layer outputs alive at once, at most
    Bytes autocast_copies{0};   ///< low-precision weight copies kept for backward under autocast
    Bytes gradient_buckets{0};  ///< data parallel: DDP's buckets, a flat copy of the gradients
    Bytes peak{0};
};

/// What the memory of a step is estimated from.
struct MemoryInputs {
    double parameter_elements = 0;         ///< trainable elements, all tensors together
    DType parameter_dtype = DType::f32;    ///< of parameters, gradients and optimizer state
    Bytes inputs{0};                       ///< graph inputs resident during the step
    Bytes saved{0};                        ///< tensors saved for backward, each once
    Bytes largest_output{0};               ///< the largest layer output
    OptimizerOptions optimizer;
    PrecisionMode precision = PrecisionMode::fp32;
    StepMode mode = StepMode::training;
    Bytes live_peak{0};                    ///< inference: the most bytes of layer outputs alive at once
};

/// Peak = the larger of the end of forward (parameters, state, inputs, saved activations, weight
/// copies, plus the largest layer output twice: its gradient and its input's gradient in flight) and
/// the optimizer step (parameters, gradients, state, and one parameter-sized temporary for Adam's
/// sqrt(v)). Allocator rounding (512-byte blocks) is ignored.
/// Inference: parameters, graph inputs, autocast's low-precision weight copies (its cache keeps each
/// until the forward's autocast region ends) and the most layer outputs alive at once; no gradients,
/// no optimizer state, nothing saved. A layer's scratch (attention's, cuDNN's workspace) is not counted.
[[nodiscard]] inline MemoryEstimate estimate_memory(const MemoryInputs& in) {
    MemoryEstimate m;
    const double p = in.parameter_elements;
    const double param_bytes = bytes_per_element(in.parameter_dtype);
    m.parameters = Bytes(p * param_bytes);
    const PrecisionRules rules = rules_for(in.precision);
    if (in.mode == StepMode::inference) {
        m.inputs = in.inputs;
        m.activations = in.live_peak;
        if (rules.autocast) m.autocast_copies = Bytes(p * bytes_per_element(rules.low_dtype));
        m.peak = m.parameters + m.inputs + m.activations + m.autocast_copies;
        return m;
    }
    m.gradients = m.parameters;
    // the optimizer's state is in the dtype of the parameters it steps: the float32 masters' where there are
    const bool master = has_master_weights(in.precision) && in.optimizer.kind != OptimizerKind::none;
    const Bytes stepped = master ? Bytes(p * bytes_per_element(DType::f32)) : m.parameters;
    if (master) m.master_weights = 2.0 * stepped;
    switch (in.optimizer.kind) {
        case OptimizerKind::none: break;
        case OptimizerKind::sgd: m.optimizer_state = in.optimizer.momentum ? stepped : Bytes(0); break;
        case OptimizerKind::adam:
        case OptimizerKind::adamw: m.optimizer_state = 2.0 * stepped; break;
    }
    m.inputs = in.inputs;
    m.activations = in.saved;
    if (rules.autocast) m.autocast_copies = Bytes(p * bytes_per_element(rules.low_dtype));
    const Bytes forward_end = m.parameters + m.optimizer_state + m.master_weights + m.inputs + m.activations + m.autocast_copies +
                              2.0 * in.largest_output;
    Bytes optimizer_step = m.parameters + m.gradients + m.optimizer_state + m.master_weights + m.inputs;
    const bool adam = in.optimizer.kind == OptimizerKind::adam || in.optimizer.kind == OptimizerKind::adamw;
    if (adam && !in.optimizer.fused) optimizer_step += stepped;
    m.peak = max(forward_end, optimizer_step);
    return m;
}

/// The CUDA context and the libraries' handles (cuBLAS, cuDNN) that a PyTorch process holds on a GPU
/// besides what its caching allocator reserves: total - free memory once CUDA, a matmul and a
/// convolution have run, nothing allocated (tools/validate/measure_max_batch.py on an H200, CUDA 13,
/// driver 580, PyTorch 2.11, 2026-12-04: 0.68 GiB). Taken for every GPU: not measured elsewhere.
inline constexpr double cuda_context_bytes = 0.6766 * 1024 * 1024 * 1024;

/// Whether a step's memory fits a GPU: its peak (as the caching allocator counts it) against the
/// GPU's memory less the CUDA context. The allocator's fragmentation (what it reserves beyond what
/// it allocates) is not modelled: on an H200 it reserved 1-2 GiB more than its peak at the largest
/// batch of ResNet-50 and BERT-base, 10-14 GiB more for GPT-2 small (docs/validation.md).
struct MemoryFit {
    Bytes capacity{0};          ///< the GPU's memory
    std::string capacity_source;
    Bytes context{0};           ///< the CUDA context's share (cuda_context_bytes)
    Bytes peak{0};              ///< the step's predicted peak
    [[nodiscard]] Bytes usable() const { return capacity - context; }
    [[nodiscard]] bool fits() const { return peak <= usable(); }
};

/// A peak against a GPU of `capacity` bytes (from `source`).
[[nodiscard]] inline MemoryFit memory_fit(Bytes peak, Bytes capacity, std::string source) {
    return MemoryFit{capacity, std::move(source), Bytes(cuda_context_bytes), peak};
}

}  // namespace roofsim
