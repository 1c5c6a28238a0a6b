#pragma once
/// Prediction from a kernel IR document (docs/ir-format.md), such as the PyTorch exporter writes:
/// the same cost models and step simulation as a layer graph's prediction, with host costs from the
/// framework profile for the IR's precision mode and optimizer, and the memory the producer counted.

#include <roofsim/ir_json.hpp>
#include <roofsim/predict.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace roofsim {

/// Host costs of an IR step: the framework profile's per-op figures for its markers (as for a
/// graph), one eager dispatch (`eager_op_add`, its autocast variant under autocast) for each
/// kernel the IR marks as dispatched on its own, and the model's own code as timed at export,
/// scaled by the Python reference work's time (`python_reference`): this host's fastest call over
/// the exporting host's calls while it timed the code (their median), or its fastest where the IR
/// gives no such median.
[[nodiscard]] inline HostCosts host_costs_for_ir(const KernelIr& ir, const CostContext& ctx, const FrameworkProfile* framework) {
    const PrecisionMode mode = precision_mode_from_key(ir.list.precision).value_or(PrecisionMode::fp32);
    if (!framework) return host_costs_from_launch_rate(ctx);
    HostCosts h = host_costs_from_framework(*framework, mode, ir.optimizer, static_cast<std::size_t>(ir.parameter_tensors));
    const bool amp = rules_for(mode).autocast;
    h.per_kernel = framework->seconds(amp ? "eager_op_add_autocast" : "eager_op_add").value_or(Seconds(0));
    note_host_of_other_gpu(h, *framework, ctx);
    const bool has_model_code = std::any_of(ir.list.kernels.begin(), ir.list.kernels.end(),
                                            [](const Kernel& k) { return k.python_time.value() > 0; });
    if (has_model_code) {
        // the model's own Python, timed where the IR was exported, at this host's Python speed: the
        // probe's fastest call of the reference work (the same work) over the exporting host's speed
        // while it timed the code, the median of its calls around the timed forwards (docs/NOTES.md,
        // 2026-12-03: a ViT-B/16 export timed its code while those calls took 1.8 times its fastest).
        // This host's fastest, not a median: a shared host's Python speed swings by 2x for seconds at
        // a time (the probe's passes on one H200 machine, 0.87-1.95 ms), its fastest call held at
        // 0.83-0.90 ms over six of seven runs of 2026-12-01, though one probe's calls all ran slow
        // (1.40 ms). An IR without that median: the exporting host's fastest call.
        const auto here = framework->fastest_seconds("python_reference");
        if (here && ir.model_code_fastest_reference) {
            h.model_code_scale = *here / ir.model_code_timed_reference.value_or(*ir.model_code_fastest_reference);
        } else if (!here) {
            h.source += "; model code at the exporting host's speed (the profile has no python_reference)";
        } else {
            h.source += ir.model_code_median_reference
                            ? "; model code at the exporting host's speed (the IR's reference is an earlier exporter's "
                              "median of the moment, not its fastest call: export it again to scale)"
                            : "; model code at the exporting host's speed (the IR has no python reference)";
        }
    }
    return h;
}

/// Predicts a training step from a kernel IR. Rows are the IR's layers (module paths); a row's op is
/// the layer-graph op its kernels implement. Memory is the IR's own count where it has one.
/// The IR fixes the batch, the precision mode and the optimizer: of `options`, only the framework
/// profile and the host time scale are read.
[[nodiscard]] inline Prediction predict(const KernelIr& ir, const CostContext& ctx, const PredictOptions& options) {
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
    return p;
}

/// The IR of a lowered layer graph, with the memory roofsim's model estimates for it
/// (`roofsim predict --graph G --emit-ir FILE`).
[[nodiscard]] inline KernelIr to_kernel_ir(const LoweredStep& step, const LoweringOptions& options) {
    KernelIr ir;
    ir.list = step.kernels;
    ir.batch = options.batch;
    ir.optimizer = options.optimizer;
    ir.parameter_elements = step.parameter_count();
    ir.parameter_tensors = static_cast<std::int64_t>(step.parameter_tensors.size());
    const MemoryEstimate m = estimate_memory(step, options);
    ir.memory = IrMemory{m.parameters, m.gradients, m.optimizer_state, m.peak, "roofsim memory model (memory.hpp)"};
    return ir;
}

/// The GPU time of one operator over the step (all its kernels, all layers).
struct OperatorTime {
    std::string op;
    KernelKind kind = KernelKind::unknown;
    int kernels = 0;
    Seconds gpu_time{0};
    Flops flops{0};
    Bytes bytes{0};
    double share = 0;  ///< of the step's GPU time
};

/// The step's GPU time by operator (aten op or lowered kernel name), most time first; host-only
/// dispatches are left out.
[[nodiscard]] inline std::vector<OperatorTime> time_by_operator(const Prediction& p) {
    std::map<Name, OperatorTime> by_op;
    for (std::size_t i = 0; i < p.kernels.kernels.size(); ++i) {
        const Kernel& k = p.kernels.kernels[i];
        if (k.kind == KernelKind::host_only) continue;
        OperatorTime& t = by_op[k.op];
        t.op = k.op;
        t.kind = k.kind;
        t.kernels += 1;
        t.gpu_time += p.timeline.kernels[i].gpu_time;
        t.flops += k.flops;
        t.bytes += k.bytes();
    }
    std::vector<OperatorTime> out;
    out.reserve(by_op.size());
    for (auto& [op, t] : by_op) {
        t.share = p.gpu_time.value() > 0 ? t.gpu_time / p.gpu_time : 0.0;
        out.push_back(std::move(t));
    }
    std::sort(out.begin(), out.end(), [](const OperatorTime& a, const OperatorTime& b) {
        return a.gpu_time != b.gpu_time ? a.gpu_time > b.gpu_time : a.op < b.op;
    });
    return out;
}

/// The flagged (unknown-op) kernels of a kernel list, for `--strict` and reports.
[[nodiscard]] inline std::vector<const Kernel*> flagged_kernels(const KernelList& list) {
    std::vector<const Kernel*> out;
    for (const Kernel& k : list.kernels) {
        if (k.kind == KernelKind::unknown) out.push_back(&k);
    }
    return out;
}

}  // namespace roofsim
