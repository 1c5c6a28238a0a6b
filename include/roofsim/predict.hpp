#pragma once
/// The public entry: a layer graph or a kernel IR on a GPU under PyTorch's settings, to the time of
/// each layer's forward and backward pass, the optimizer step, the whole step, and memory; or, in
/// inference, of each layer's forward and the whole forward.

#include <roofsim/cost/kernel_cost.hpp>
#include <roofsim/cost/op_factor_calibration.hpp>
#include <roofsim/detail/name_index.hpp>
#include <roofsim/ir_json.hpp>
#include <roofsim/lower/data_parallel.hpp>
#include <roofsim/lower/lower.hpp>
#include <roofsim/memory.hpp>
#include <roofsim/sim/host_costs_from_profile.hpp>
#include <roofsim/sim/simulate.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace roofsim {

/// One row of the report: a layer (or "optimizer"), its forward and backward time and work.
struct LayerTime {
    Name layer;  ///< its module path (a Name: no allocation per row)
    Name op;
    Seconds forward_gpu{0}, backward_gpu{0};    ///< GPU busy time of its kernels
    Seconds forward_host{0}, backward_host{0};  ///< host issue time of its ops
    Flops flops{0};
    Bytes bytes{0};
    Flops forward_flops{0};                     ///< the forward pass's share of `flops`
    Bytes forward_bytes{0};                     ///< the forward pass's share of `bytes`
    Bound bound = Bound::compute;               ///< the bound of its longest kernel
    int kernels = 0;
    int flagged = 0;                            ///< kernels with no cost model (unknown ops)
    double share = 0;                           ///< of the step's GPU time
};

struct Prediction {
    std::string gpu_key;
    std::string ceilings_origin;
    std::string profile_kind;  ///< the kind of profile it was predicted on: "measured", "derived" or "datasheet"
    std::string host_costs_source;
    PrecisionMode precision = PrecisionMode::fp32;
    StepMode mode = StepMode::training;  ///< inference: step_time is the forward's latency
    std::int64_t batch = 0;
    std::vector<LayerTime> layers;  ///< in forward order, then the optimizer
    Seconds step_time{0};           ///< simulated: host issue and GPU stream together
    Seconds forward_time{0}, backward_time{0}, optimizer_time{0};  ///< wall time of each phase in the simulation
    Seconds zero_grad_time{0};  ///< host time of optimizer.zero_grad() before the forward (step = it + the phases)
    Seconds gpu_time{0}, host_time{0};
    Seconds gpu_gap_time{0};  ///< GPU time between back-to-back kernels, on top of gpu_time
    /// Data-parallel training: the GPUs, the gradient all-reduces' time on the communication stream,
    /// and the part of it the compute stream waited for (exposed).
    int gpus = 1;
    Seconds communication_time{0}, communication_exposed{0};
    std::vector<GradientBucket> buckets;  ///< DDP's gradient buckets, in the order they are all-reduced
    std::string communication_source;     ///< where the all-reduce times come from
    MemoryEstimate memory;
    MemoryFit memory_fit;  ///< the peak against the GPU's memory less the CUDA context
    double parameters = 0;
    int flagged_kernels = 0;
    Seconds flagged_gpu_time{0};
    KernelList kernels;
    Timeline timeline;
    HostCosts host;                       ///< the host costs the step was simulated with
    std::size_t parameter_tensors = 0;    ///< trainable parameter tensors (the optimizer's per-tensor costs)
};

namespace detail {

/// predict_kernels; with `rows` (a lowered graph's), each kernel's report row comes from there and
/// rows get no op (the graph overload names each row's graph op itself).
[[nodiscard]] inline Prediction predict_kernels(KernelList kernels, const CostContext& ctx, const HostCosts& host,
                                                const KernelRows* rows) {
    Prediction p;
    p.gpu_key = ctx.ceilings.gpu_key;
    p.ceilings_origin = ctx.ceilings.origin;
    p.profile_kind = ctx.ceilings.kind;
    p.host_costs_source = host.source;
    p.precision = kernels.precision;
    p.mode = kernels.mode;
    p.kernels = std::move(kernels);
    const KernelList& list = p.kernels;
    p.timeline = simulate(list, ctx, host);
    p.step_time = p.timeline.step_time;
    p.gpu_time = p.timeline.gpu_time;
    p.gpu_gap_time = p.timeline.gpu_gap_time;
    p.host_time = p.timeline.host_time;
    p.communication_time = p.timeline.communication_time;
    p.communication_exposed = p.timeline.communication_wait;

    // A row per layer, in the order layers first appear.
    p.layers.reserve(rows ? rows->count : 0);
    NameIndex row_of(rows ? 0 : list.kernels.size() / 4);  // a layer has a few kernels
    std::vector<Seconds> longest(p.layers.capacity());
    std::size_t row_index = 0;
    const Name* previous_layer = nullptr;
    const LayerTime blank_row{};  // rows start as copies of it (a value-initialized one is zero-filled by `rep stos`)
    Seconds phase_end[3] = {Seconds(0), Seconds(0), Seconds(0)};
    for (std::size_t i = 0; i < list.kernels.size(); ++i) {
        const Kernel& k = list.kernels[i];
        const SimulatedKernel& s = p.timeline.kernels[i];
        if (rows) {
            row_index = rows->of_kernel[i];
        } else if (!previous_layer || *previous_layer != k.layer) {  // consecutive kernels mostly share a layer
            row_index = row_of.insert(k.layer, p.layers.size());
            previous_layer = &k.layer;
        }
        if (row_index == p.layers.size()) {
            LayerTime& added = p.layers.emplace_back(blank_row);
            added.layer = k.layer;
            if (k.phase == Phase::optimizer) added.op = "optimizer";
            if (longest.size() < p.layers.size()) longest.resize(p.layers.size());
        }
        LayerTime& row = p.layers[row_index];
        if (!rows && row.op.empty() && k.phase == Phase::forward) row.op = k.op;
        const bool forward = k.phase == Phase::forward;
        if (k.kind == KernelKind::collective) [[unlikely]] {  // its own stream: in the step's communication, not the row's GPU time
            (forward ? row.forward_host : row.backward_host) += s.host_time;
            phase_end[static_cast<int>(k.phase)] = max(phase_end[static_cast<int>(k.phase)], s.start + s.gpu_time);
            continue;
        }
        (forward ? row.forward_gpu : row.backward_gpu) += s.gpu_time;
        (forward ? row.forward_host : row.backward_host) += s.host_time;
        row.flops += k.flops;
        row.bytes += k.bytes();
        if (forward) {
            row.forward_flops += k.flops;
            row.forward_bytes += k.bytes();
        }
        if (k.kind != KernelKind::host_only) row.kernels += 1;
        if (k.kind == KernelKind::unknown) {
            row.flagged += 1;
            p.flagged_kernels += 1;
            p.flagged_gpu_time += s.gpu_time;
        }
        if (s.gpu_time > longest[row_index]) { longest[row_index] = s.gpu_time; row.bound = s.bound; }
        phase_end[static_cast<int>(k.phase)] = max(phase_end[static_cast<int>(k.phase)], max(s.start + s.gpu_time, s.issued));
    }
    p.zero_grad_time = host.zero_grad;  // the simulation's host starts after it
    p.forward_time = max(Seconds(0), phase_end[0] - p.zero_grad_time);
    p.backward_time = max(Seconds(0), phase_end[1] - phase_end[0]);
    p.optimizer_time = max(Seconds(0), p.step_time - max(phase_end[0], phase_end[1]));
    for (auto& row : p.layers) {
        row.share = p.gpu_time.value() > 0 ? (row.forward_gpu + row.backward_gpu) / p.gpu_time : 0.0;
    }
    return p;
}

}  // namespace detail

/// Predicts from a kernel list (lowered or exported). `memory` is filled by the graph overload.
[[nodiscard]] inline Prediction predict_kernels(KernelList kernels, const CostContext& ctx, const HostCosts& host) {
    return detail::predict_kernels(std::move(kernels), ctx, host, nullptr);
}

/// What the memory model needs of a lowered step with its layer summaries (lower()): each saved
/// tensor once, however many layers keep it, and the largest layer output.
[[nodiscard]] inline MemoryInputs memory_inputs(const LoweredStep& step, const LoweringOptions& options, Bytes saved,
                                                Bytes largest_output) {
    return {step.parameter_count(), step.parameter_dtype, step.input_bytes, saved, largest_output, options.optimizer, options.precision,
            options.mode, step.live_peak};
}

/// The memory of a lowered step (estimate_memory), from its layer summaries.
[[nodiscard]] inline MemoryEstimate estimate_memory(const LoweredStep& step, const LoweringOptions& options) {
    detail::SavedTotal saved;  // each saved tensor once, however many layers keep it
    Bytes largest_output{0};
    for (const auto& l : step.layers) {
        for (const auto& [tensor, bytes] : l.saved) saved.add(tensor, bytes);
        largest_output = max(largest_output, l.output_bytes);
    }
    return estimate_memory(memory_inputs(step, options, saved.bytes(), largest_output));
}

/// Options of a prediction: batch, precision mode, optimizer (a graph's; an IR fixes its own), and the
/// framework profile that gives host costs (without one: the calibration's launch rate, a lower bound).
struct PredictOptions {
    LoweringOptions lowering;
    const FrameworkProfile* framework = nullptr;
    /// Every host cost times this: the host at hand against the one the framework profile was
    /// measured on (1.3: 30 % slower; the ratio of their canaries, seconds per tiny torch.add).
    double host_time_scale = 1.0;
    /// Data-parallel training over several GPUs (DDP); a layer graph's prediction only.
    DataParallelOptions data_parallel;
};

/// Options that read host costs from `framework`, on a host `host_time_scale` times slower.
[[nodiscard]] inline PredictOptions framework_options(const FrameworkProfile* framework, double host_time_scale = 1.0) {
    PredictOptions o;
    o.framework = framework;
    o.host_time_scale = host_time_scale;
    return o;
}

/// A layer graph lowered once for a batch, precision, mode and GPU count (the data-parallel kernels
/// added), to be costed on any number of GPUs (predict(PreparedStep, ...)). It refers to the graph's
/// op names: the graph must outlive it.
struct PreparedStep {
    detail::PredictionLowering lowered;
    std::vector<GradientBucket> buckets;
    PredictOptions options;
    std::size_t graph_layers = 0;
    std::vector<Name> layer_ops;  ///< each report row's graph op, in row order
};

/// Lowers `graph` for predictions with `options` (their framework profile and host scale are read
/// when the step is costed).
[[nodiscard]] inline PreparedStep prepare(const Graph& graph, const PredictOptions& options) {
    const bool inference = options.lowering.mode == StepMode::inference;
    if (inference && options.data_parallel.gpus != 1) {
        throw std::invalid_argument("data-parallel prediction is of training: an inference forward runs on one GPU");
    }
    PreparedStep prepared;
    prepared.options = options;
    prepared.lowered = detail::lower_for_prediction(graph, options.lowering);
    prepared.buckets = detail::add_data_parallel(prepared.lowered.step, prepared.lowered.rows, options.data_parallel);
    prepared.graph_layers = graph.layers.size();
    for (const std::size_t layer : prepared.lowered.rows.layer_of_row) prepared.layer_ops.push_back(graph.layers[layer].op);
    return prepared;
}

/// Predicts a prepared step on the GPU of `ctx`.
[[nodiscard]] inline Prediction predict(const PreparedStep& prepared, const CostContext& ctx) {
    const PredictOptions& options = prepared.options;
    const bool inference = options.lowering.mode == StepMode::inference;
    if (options.data_parallel.gpus > 1) (void)placement(options.data_parallel.gpus, ctx.collectives);  // fills whole nodes
    const detail::PredictionLowering& lowered = prepared.lowered;
    const LoweredStep& step = lowered.step;
    OptimizerOptions optimizer = options.lowering.optimizer;
    if (inference) optimizer.kind = OptimizerKind::none;
    HostCosts host = options.framework
                         ? detail::host_costs_from_framework(*options.framework, options.lowering.precision, optimizer,
                                                             step.parameter_tensors.size(), &lowered.ops, prepared.graph_layers == 1,
                                                             options.lowering.mode)
                         : host_costs_from_launch_rate(ctx);
    if (options.framework) note_host_of_other_gpu(host, *options.framework, ctx);
    host = scaled(std::move(host), options.host_time_scale);
    Prediction p = detail::predict_kernels(step.kernels, ctx, host, &lowered.rows);
    p.host = std::move(host);
    p.parameter_tensors = step.parameter_tensors.size();
    p.batch = options.lowering.batch;
    p.parameters = step.parameter_count();
    LoweringOptions lowering = options.lowering;
    lowering.optimizer = optimizer;
    p.memory = estimate_memory(memory_inputs(step, lowering, lowered.saved, lowered.largest_output));
    p.gpus = options.data_parallel.gpus;
    for (const auto& b : prepared.buckets) p.memory.gradient_buckets += Bytes(b.bytes);  // DDP's flat copy of the gradients
    p.memory.peak += p.memory.gradient_buckets;
    p.buckets = prepared.buckets;
    if (p.gpus > 1) p.communication_source = all_reduce_source(p.gpus, ctx.collectives);
    p.memory_fit = memory_fit(p.memory.peak, ctx.memory_capacity, ctx.memory_capacity_source);
    // Each layer's row gets its graph op (the optimizer's row comes after them all).
    for (std::size_t i = 0; i < p.layers.size() && i < prepared.layer_ops.size(); ++i) p.layers[i].op = prepared.layer_ops[i];
    return p;
}

/// Predicts a training step of a layer graph, or its inference forward (options.lowering.mode; its
/// optimizer is then not read).
[[nodiscard]] inline Prediction predict(const Graph& graph, const CostContext& ctx, const PredictOptions& options) {
    if (options.data_parallel.gpus > 1 && options.lowering.mode != StepMode::inference) {
        (void)placement(options.data_parallel.gpus, ctx.collectives);  // before lowering: fills whole nodes
    }
    return predict(prepare(graph, options), ctx);
}


/// Host costs of an IR step: the framework profile's per-op figures for its markers (as for a
/// graph), one eager dispatch (`eager_op_add`, its autocast variant under autocast) for each
/// kernel the IR marks as dispatched on its own, and the model's own code as timed at export,
/// scaled by the Python reference work's time (`python_reference`): this host's fastest call over
/// the exporting host's calls while it timed the code (their median), or its fastest where the IR
/// gives no such median.
[[nodiscard]] inline HostCosts host_costs_for_ir(const KernelIr& ir, const CostContext& ctx, const FrameworkProfile* framework) {
    const PrecisionMode mode = ir.list.precision;
    if (!framework) return host_costs_from_launch_rate(ctx);
    HostCosts h = host_costs_from_framework(*framework, mode, ir.optimizer, static_cast<std::size_t>(ir.parameter_tensors), ir.list.mode);
    const bool amp = rules_for(mode).autocast;
    h.per_kernel = framework->required(amp ? "eager_op_add_autocast" : "eager_op_add");
    note_host_of_other_gpu(h, *framework, ctx);
    const bool has_model_code = std::any_of(ir.list.kernels.begin(), ir.list.kernels.end(),
                                            [](const Kernel& k) { return k.python_time.value() > 0; });
    if (has_model_code) {
        // the model's own Python, timed where the IR was exported, at this host's Python speed: the
        // probe's fastest call of the reference work (the same work) over the exporting host's speed
        // while it timed the code, the median of its calls around the timed forwards (H200,
        // 2026-12-03: a ViT-B/16 export timed its code while those calls took 1.8 times its fastest).
        // This host's fastest, not a median: a shared host's Python speed swings by 2x for seconds at
        // a time (the probe's passes on one H200 machine, 0.87-1.95 ms), its fastest call held at
        // 0.83-0.90 ms over six of seven runs of 2026-12-01, though one probe's calls all ran slow
        // (1.40 ms). An IR without that median: the exporting host's fastest call.
        (void)framework->required("python_reference");
        const Seconds here = *framework->fastest_seconds("python_reference");
        if (!ir.model_code_fastest_reference) {
            throw std::runtime_error("kernel IR of " + ir.list.model + ": its model code has no timed reference work "
                                     "(model_code.fastest_reference_seconds): export it again with roofsim_export");
        }
        h.model_code_scale = here / ir.model_code_timed_reference.value_or(*ir.model_code_fastest_reference);
    }
    return h;
}

/// Predicts a training step from a kernel IR. Rows are the IR's layers (module paths); a row's op is
/// the layer-graph op its kernels implement. Memory is the IR's own count where it has one.
/// The IR fixes the batch, the precision mode and the optimizer: of `options`, only the framework
/// profile and the host time scale are read.
[[nodiscard]] inline Prediction predict(const KernelIr& ir, const CostContext& ctx, const PredictOptions& options) {
    if (options.data_parallel.gpus != 1) {
        throw std::invalid_argument("data-parallel prediction needs a layer graph: a kernel IR (" + ir.list.model +
                                    ") does not say which layer each parameter belongs to");
    }
    HostCosts host = scaled(host_costs_for_ir(ir, ctx, options.framework), options.host_time_scale);
    Prediction p = predict_kernels(ir.list, ctx, host);
    p.host = std::move(host);
    p.parameter_tensors = static_cast<std::size_t>(ir.parameter_tensors);
    p.batch = ir.batch;
    p.parameters = ir.parameter_elements;
    std::map<std::string_view, std::string_view, std::less<>> op_of_layer;  // views of p's kernels' names
    for (const Kernel& k : p.kernels.kernels) {
        const std::string_view op = !k.source_op.empty() ? std::string_view(k.source_op) : graph_op_of_host_op(k.host_op);
        if (!op.empty()) op_of_layer.emplace(k.layer, op);
    }
    for (auto& row : p.layers) {
        if (auto it = op_of_layer.find(row.layer); it != op_of_layer.end()) row.op = it->second;
        if (row.layer.empty()) row.layer = "(model code)";
    }
    if (ir.memory) {
        p.memory.parameters = ir.memory->parameters;
        p.memory.gradients = ir.memory->gradients;
        p.memory.optimizer_state = ir.memory->optimizer_state;
        p.memory.peak = ir.memory->peak;
        p.memory.activations = max(Bytes(0), ir.memory->peak - ir.memory->parameters - ir.memory->gradients -
                                                 ir.memory->optimizer_state);
    }
    p.memory_fit = memory_fit(p.memory.peak, ctx.memory_capacity, ctx.memory_capacity_source);
    return p;
}

/// The IR of a lowered layer graph, with the memory roofsim's model estimates for it
/// (`roofsim predict --graph G --emit-ir FILE`).
[[nodiscard]] inline KernelIr to_kernel_ir(const LoweredStep& step, const LoweringOptions& options) {
    KernelIr ir;
    ir.list = step.kernels;
    ir.batch = options.batch;
    ir.optimizer = options.optimizer;
    if (options.mode == StepMode::inference) ir.optimizer.kind = OptimizerKind::none;
    ir.parameter_elements = step.parameter_count();
    ir.parameter_tensors = static_cast<std::int64_t>(step.parameter_tensors.size());
    const MemoryEstimate m = estimate_memory(step, options);
    ir.memory = IrMemory{m.parameters, m.gradients, m.optimizer_state, m.peak, "roofsim memory model (memory.hpp)"};
    return ir;
}

}  // namespace roofsim
