#pragma once
/// The public entry: a layer graph (or a kernel list) on a GPU under PyTorch's settings, to the
/// time of each layer's forward and backward pass, the optimizer step, the whole step, and memory.

#include <roofsim/cost.hpp>
#include <roofsim/detail/name_index.hpp>
#include <roofsim/framework.hpp>
#include <roofsim/lower.hpp>
#include <roofsim/memory.hpp>
#include <roofsim/sim.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <optional>
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
    std::string host_costs_source;
    std::string precision;
    std::int64_t batch = 0;
    std::vector<LayerTime> layers;  ///< in forward order, then the optimizer
    Seconds step_time{0};           ///< simulated: host issue and GPU stream together
    Seconds forward_time{0}, backward_time{0}, optimizer_time{0};  ///< wall time of each phase in the simulation
    Seconds zero_grad_time{0};  ///< host time of optimizer.zero_grad() before the forward (step = it + the phases)
    Seconds gpu_time{0}, host_time{0};
    Seconds gpu_gap_time{0};  ///< GPU time between back-to-back kernels, on top of gpu_time
    MemoryEstimate memory;
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
    p.host_costs_source = host.source;
    p.precision = kernels.precision;
    p.kernels = std::move(kernels);
    const KernelList& list = p.kernels;
    p.timeline = simulate(list, ctx, host);
    p.step_time = p.timeline.step_time;
    p.gpu_time = p.timeline.gpu_time;
    p.gpu_gap_time = p.timeline.gpu_gap_time;
    p.host_time = p.timeline.host_time;

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

/// Options of a graph prediction: batch, precision mode, optimizer, and the framework profile that
/// gives host costs (without one: the calibration's launch rate, a lower bound).
struct PredictOptions {
    LoweringOptions lowering;
    const FrameworkProfile* framework = nullptr;
    /// Every host cost times this: the host at hand against the one the framework profile was
    /// measured on (1.3: 30 % slower; the ratio of their canaries, seconds per tiny torch.add).
    double host_time_scale = 1.0;
};

/// Options that read host costs from `framework`, on a host `host_time_scale` times slower.
[[nodiscard]] inline PredictOptions framework_options(const FrameworkProfile* framework, double host_time_scale = 1.0) {
    PredictOptions o;
    o.framework = framework;
    o.host_time_scale = host_time_scale;
    return o;
}

/// Predicts a training step of a layer graph.
[[nodiscard]] inline Prediction predict(const Graph& graph, const CostContext& ctx, const PredictOptions& options) {
    detail::PredictionLowering lowered = detail::lower_for_prediction(graph, options.lowering);
    LoweredStep& step = lowered.step;
    HostCosts host = options.framework
                         ? detail::host_costs_from_framework(*options.framework, options.lowering.precision,
                                                             options.lowering.optimizer, step.parameter_tensors.size(), &lowered.ops,
                                                             graph.layers.size() == 1)
                         : host_costs_from_launch_rate(ctx);
    if (options.framework) note_host_of_other_gpu(host, *options.framework, ctx);
    host = scaled(std::move(host), options.host_time_scale);
    Prediction p = detail::predict_kernels(std::move(step.kernels), ctx, host, &lowered.rows);
    p.host = std::move(host);
    p.parameter_tensors = step.parameter_tensors.size();
    p.batch = options.lowering.batch;
    p.parameters = step.parameter_count();
    p.memory = detail::estimate_memory(step, options.lowering, lowered.saved, lowered.largest_output);
    // Each layer's row gets its graph op: row i is layer i (the optimizer's row comes after them all).
    for (std::size_t i = 0; i < p.layers.size() && i < graph.layers.size(); ++i) p.layers[i].op = graph.layers[i].op;
    return p;
}

/// The prediction as JSON (SI units, unit in each key).
[[nodiscard]] inline nlohmann::json to_json(const Prediction& p) {
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& r : p.layers) {
        layers.push_back({{"layer", r.layer},
                          {"op", r.op},
                          {"forward_gpu_seconds", r.forward_gpu.value()},
                          {"backward_gpu_seconds", r.backward_gpu.value()},
                          {"forward_host_seconds", r.forward_host.value()},
                          {"backward_host_seconds", r.backward_host.value()},
                          {"flops", r.flops.value()},
                          {"bytes", r.bytes.value()},
                          {"bound", to_string(r.bound)},
                          {"kernels", r.kernels},
                          {"flagged_kernels", r.flagged},
                          {"share_of_gpu_time", r.share}});
    }
    return {{"gpu", p.gpu_key},
            {"ceilings", p.ceilings_origin},
            {"host_costs", p.host_costs_source},
            {"precision", p.precision},
            {"batch", p.batch},
            {"parameters", p.parameters},
            {"step_seconds", p.step_time.value()},
            {"zero_grad_seconds", p.zero_grad_time.value()},
            {"forward_seconds", p.forward_time.value()},
            {"backward_seconds", p.backward_time.value()},
            {"optimizer_seconds", p.optimizer_time.value()},
            {"gpu_busy_seconds", p.gpu_time.value()},
            {"gpu_gap_seconds", p.gpu_gap_time.value()},
            {"host_issue_seconds", p.host_time.value()},
            {"flagged_kernels", p.flagged_kernels},
            {"flagged_gpu_seconds", p.flagged_gpu_time.value()},
            {"memory_bytes",
             {{"parameters", p.memory.parameters.value()},
              {"gradients", p.memory.gradients.value()},
              {"optimizer_state", p.memory.optimizer_state.value()},
              {"inputs", p.memory.inputs.value()},
              {"activations", p.memory.activations.value()},
              {"autocast_copies", p.memory.autocast_copies.value()},
              {"peak", p.memory.peak.value()}}},
            {"layers", layers}};
}

}  // namespace roofsim
