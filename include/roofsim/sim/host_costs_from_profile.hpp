#pragma once
/// Host costs of a step derived from a framework profile: per-op dispatch figures, backward(),
/// optimizer.zero_grad() and optimizer.step(), a convolution's growth with size.

#include <roofsim/cost/context.hpp>
#include <roofsim/detail/concat.hpp>
#include <roofsim/precision_mode.hpp>
#include <roofsim/profile/framework.hpp>
#include <roofsim/step_mode.hpp>
#include <roofsim/sim/host_costs.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace roofsim {

/// Host time of one optimizer.step() over `parameter_tensors` tensors: per_step + tensors x per_param
/// (the probe's fit over 64 and 512 tiny parameters), for the optimizer as it runs (SGD with weight
/// decay runs one more foreach op, which allocates a new gradient list), measured with the CPU's
/// caches flushed before each step (`_cold`: in a training step the forward and backward run between
/// two optimizer steps). Adam reads AdamW's figures. OptimizerTiming::back_to_back: the figures of
/// steps timed one after another. A figure the profile lacks is an error naming it.
[[nodiscard]] inline Seconds optimizer_step_host_seconds(const FrameworkProfile& f, const OptimizerOptions& optimizer,
                                                         std::size_t parameter_tensors,
                                                         OptimizerTiming timing = OptimizerTiming::in_training_step) {
    if (optimizer.kind == OptimizerKind::none) return Seconds(0);
    const std::string_view kind = optimizer.kind != OptimizerKind::sgd ? "optimizer_adamw"
                                  : optimizer.weight_decay            ? "optimizer_sgd_wd"
                                                                      : "optimizer_sgd";
    const std::string_view when = timing == OptimizerTiming::in_training_step ? "_cold" : "";
    const std::string base = detail::concat(kind, optimizer.fused ? "_fused" : "_foreach", when);
    const Seconds per_step = f.required(base + "_per_step");
    const Seconds per_param = f.required(base + "_per_param");
    return per_step + static_cast<double>(parameter_tensors) * per_param;
}

/// Where optimizer.step() launches each foreach op's kernels within its host time, from the profile's
/// optimizer_<kind>_foreach_launches figure (the probe's, on 512 tiny parameters under torch.profiler):
/// SGD with or without weight decay as it runs, Adam on AdamW's (the same ops less the decay's
/// multiply). Empty for the fused optimizers (one kernel per launch at the end of their host work,
/// not measured); a profile without the figure is an error naming it.
[[nodiscard]] inline std::vector<OptimizerLaunch> optimizer_launches(const FrameworkProfile& f, const OptimizerOptions& optimizer) {
    if (optimizer.kind == OptimizerKind::none || optimizer.fused) return {};
    const std::string_view key = optimizer.kind != OptimizerKind::sgd ? "optimizer_adamw_foreach_launches"
                                 : optimizer.weight_decay            ? "optimizer_sgd_wd_foreach_launches"
                                                                     : "optimizer_sgd_foreach_launches";
    (void)f.required(key);
    return f.figures.find(key)->second.launches;
}

/// Host time of optimizer.zero_grad(set_to_none=True) over `parameter_tensors` tensors, as a training
/// step calls it before its forward: per_step + tensors x per_param (the probe's fit over 64 and 512
/// parameters holding gradients of 256 and 1 Mi elements alternately; it launches nothing: each
/// gradient is dropped and the caching allocator takes its block back), with the CPU's caches as the
/// previous step's optimizer.step() leaves them (the back-to-back figures). Zero without an optimizer.
[[nodiscard]] inline Seconds zero_grad_host_seconds(const FrameworkProfile& f, const OptimizerOptions& optimizer,
                                                    std::size_t parameter_tensors) {
    if (optimizer.kind == OptimizerKind::none) return Seconds(0);
    const Seconds per_step = f.required("zero_grad_per_step");
    const Seconds per_param = f.required("zero_grad_per_param");
    return max(Seconds(0), per_step + static_cast<double>(parameter_tensors) * per_param);
}

/// The precision class a convolution's host path differs by in `mode` (the conv_host figures' "mode"):
/// PyTorch's default flags (cuDNN may use TF32: fp32 and tf32), TF32 off, bfloat16 weights, autocast.
[[nodiscard]] constexpr std::string_view conv_host_mode(PrecisionMode mode) {
    switch (mode) {
        case PrecisionMode::fp32:
        case PrecisionMode::tf32: return "fp32";
        case PrecisionMode::fp32_strict: return "fp32_strict";
        case PrecisionMode::bf16:
        case PrecisionMode::fp16_master: return "bf16";  // 16-bit weights, no autocast (bfloat16's figures)
        case PrecisionMode::amp_bf16:
        case PrecisionMode::amp_fp16: return "autocast";
    }
    return "fp32";
}

/// How a convolution's host cost grows with its size in `mode`, from the profile's conv_host figures:
/// at each size, forward(size) - forward(tiny) for the forward, and the same of (forward + backward
/// - forward) for the backward, the tiny size being the family's smallest; a negative growth (the
/// figures' noise) counts as none. Empty where the profile has no such figures (before 2026-12).
[[nodiscard]] inline ConvHostGrowth conv_host_growth_from_framework(const FrameworkProfile& f, PrecisionMode mode) {
    ConvHostGrowth growth;
    const std::string_view wanted = conv_host_mode(mode);
    struct Size {
        double flops = 0;
        std::optional<Seconds> forward, forward_backward;
    };
    std::vector<Size> sizes[2];  // k1, k3: the profile's few sizes of each, in the order met
    for (const ConvHostFigure& c : f.conv_host) {
        if (c.mode != wanted) continue;
        const int family = c.family == "k1" ? 0 : c.family == "k3" ? 1 : -1;
        if (family < 0) continue;
        auto& of_family = sizes[family];
        auto size = std::find_if(of_family.begin(), of_family.end(), [&c](const Size& s) { return s.flops == c.flops; });
        if (size == of_family.end()) size = of_family.insert(of_family.end(), Size{c.flops, {}, {}});
        (c.part == "forward" ? size->forward : size->forward_backward) = c.seconds;
    }
    for (int family = 0; family < 2; ++family) {
        auto& of_family = sizes[family];
        std::sort(of_family.begin(), of_family.end(), [](const Size& a, const Size& b) { return a.flops < b.flops; });
        std::vector<ConvHostGrowth::Point> points;
        std::optional<std::pair<Seconds, Seconds>> tiny;  // forward, backward
        for (const Size& s : of_family) {
            if (!s.forward || !s.forward_backward) continue;
            const Seconds forward = *s.forward, backward = *s.forward_backward - *s.forward;
            if (!tiny) tiny = std::pair{forward, backward};
            points.push_back({s.flops, max(Seconds(0), forward - tiny->first), max(Seconds(0), backward - tiny->second)});
        }
        if (points.size() >= 2) (family == 0 ? growth.kernel_1x1 : growth.other) = std::move(points);
    }
    return growth;
}

namespace detail {

/// host_costs_from_framework, with the per-op figures of `ops` alone where given (all a prediction
/// of a graph of those ops looks up, the lowering's ops(); the add layer's give the defaults);
/// `single_layer`: the graph is one layer, of the first op in `ops`. An inference forward (`step`)
/// reads each layer's layer_inference_ figure (eval, under inference_mode) where the profile has one,
/// else its training forward's (autograd recording included: an upper bound), and says so in the source.
[[nodiscard]] inline HostCosts host_costs_from_framework(const FrameworkProfile& f, PrecisionMode mode,
                                                         const OptimizerOptions& optimizer, std::size_t parameter_tensors,
                                                         const std::vector<std::string_view>* ops, bool single_layer = false,
                                                         StepMode step = StepMode::training) {
    HostCosts h;
    const bool amp = rules_for(mode).autocast;
    const bool inference = step == StepMode::inference;
    bool forward_for_inference = false;  // an inference forward took a training forward's figure
    constexpr std::string_view suffix = "_autocast", forward_prefix = "layer_forward_", backward_prefix = "layer_backward_",
                               inference_prefix = "layer_inference_";
    const auto wanted = [ops](std::string_view op) { return !ops || op == "add" || std::find(ops->begin(), ops->end(), op) != ops->end(); };
    if (ops) {
        // The few ops wanted: each one's figures found by their keys, layer_forward_<op>[_autocast] and
        // layer_backward_<op>[_autocast] (the same figures the scan below takes of them).
        std::string key;
        const auto add_figures_of = [&](std::string_view op) {
            if (!amp && op.ends_with(suffix)) return;  // its keys would be autocast figures
            if (inference) {
                key.assign(inference_prefix).append(op).append(amp ? suffix : std::string_view());
                if (auto it = f.figures.find(key); it != f.figures.end()) {
                    h.forward.emplace(op, Seconds(it->second.seconds));
                } else {
                    forward_for_inference = forward_for_inference || f.figures.count(concat(forward_prefix, key.substr(inference_prefix.size()))) > 0;
                }
            }
            for (const auto& [prefix, table] : {std::pair{forward_prefix, &h.forward}, std::pair{backward_prefix, &h.backward}}) {
                key.assign(prefix).append(op).append(amp ? suffix : std::string_view());
                if (auto it = f.figures.find(key); it != f.figures.end()) {
                    table->emplace(op, Seconds(it->second.seconds));
                    if (table == &h.backward && it->second.backward_nodes_per_layer) {
                        h.backward_nodes.emplace(op, *it->second.backward_nodes_per_layer);
                    }
                }
            }
        };
        add_figures_of("add");
        for (const std::string_view op : *ops) add_figures_of(op);
    } else {
        for (auto it = f.figures.lower_bound("layer_"); it != f.figures.end() && it->first.starts_with("layer_"); ++it) {
            std::string_view base = it->first;
            if (base.ends_with(suffix) != amp) continue;
            if (amp) base.remove_suffix(suffix.size());
            const Seconds seconds(it->second.seconds);
            // the profile's keys are distinct, so are the ops taken from them
            if (base.starts_with(forward_prefix)) h.forward.add_new(base.substr(forward_prefix.size()), seconds);
            // (the profile's keys sort layer_forward_ before layer_inference_: the inference figure replaces it)
            if (inference && base.starts_with(inference_prefix)) h.forward[base.substr(inference_prefix.size())] = seconds;
            if (base.starts_with(backward_prefix)) {
                const std::string_view op = base.substr(backward_prefix.size());
                h.backward.add_new(op, seconds);
                if (it->second.backward_nodes_per_layer) h.backward_nodes.add_new(op, *it->second.backward_nodes_per_layer);
            }
        }
    }
    // A view's backward node launches nothing: its one-at-a-time figure is the difference of two
    // noisy times (often 0); the chain slope of view nodes measures it (the engine's cost of a node
    // plus one view op), whatever the autocast state.
    for (const std::string_view op : {"reshape", "flatten"}) {
        if (!wanted(op)) continue;
        h.backward[op] = f.required("backward_node_view");
        h.backward_nodes[op] = 1;  // the chain of view nodes: one a view
    }
    // backward() walks its whole graph before it runs a node: the walk per node, which the chain
    // figures hold spread over their nodes, is charged before the first backward kernel
    // (simulate: backward_walk_share)
    h.backward_walk_per_node = f.required("backward_walk_node");
    // A copy AccumulateGrad dispatches and launches on its own: one eager op (a tiny add, back to back).
    if (wanted(accumulate_grad_clone_host_op)) h.backward[accumulate_grad_clone_host_op] = f.required("eager_op_add");
    const std::string_view amp_suffix = amp ? suffix : std::string_view();
    // an op without figures of its own takes the add layer's
    h.default_forward = f.required(concat(forward_prefix, "add", amp_suffix));
    if (inference) {
        if (const auto add = f.seconds(concat(inference_prefix, "add", amp_suffix))) h.default_forward = *add;
        if (!ops) {  // every op the profile has a training forward figure of: has each an inference one too?
            for (auto it = f.figures.lower_bound(forward_prefix); it != f.figures.end() && it->first.starts_with(forward_prefix); ++it) {
                if (it->first.ends_with(suffix) != amp) continue;
                forward_for_inference = forward_for_inference ||
                                        f.figures.count(concat(inference_prefix, std::string_view(it->first).substr(forward_prefix.size()))) == 0;
            }
        }
    }
    h.default_backward = f.required(concat(backward_prefix, "add", amp_suffix));
    h.backward_call = f.required("backward_call");
    h.synchronize = f.required("cuda_synchronize_idle");
    // A graph of one op (a layer on its own) pays the per-call costs that the per-layer figures, chain
    // slopes, leave out: the op's steady-state figure is the whole host cost of one forward + backward,
    // and what the per-layer figures do not account for is this step's per-call cost.
    // (A layer without a bias is looked up by its bias-free figures, which the lowering lists among the ops.)
    if (single_layer && ops && !ops->empty()) {
        // the layer's markers cost another host op's figures where the lowering lists one of its
        // variants (a layer without a bias, attention on a named backend)
        const std::string_view graph_op = ops->front();
        const auto variant = std::find_if(ops->begin() + 1, ops->end(), [graph_op](std::string_view op) {
            return op != graph_op && graph_op_of_host_op(op) == graph_op;
        });
        const std::string_view host_op = variant != ops->end() ? *variant : graph_op;
        auto steady = f.seconds(concat("layer_steady_", host_op, amp_suffix));
        if (!steady) steady = f.seconds(concat("layer_steady_", graph_op, amp_suffix));
        if (steady) {
            // the steady figure holds the layer's autocast input casts too (its input is float32)
            if (graph_op != autocast_cast_host_op) {
                h.forward[autocast_cast_host_op] = Seconds(0);
                h.backward[autocast_cast_host_op] = Seconds(0);
            }
            const auto figure = [host_op](const auto& table, Seconds fallback) {
                const Seconds* s = find_host_figure(table, host_op);
                return s ? *s : fallback;
            };
            const Seconds layer = figure(h.forward, h.default_forward) + figure(h.backward, h.default_backward);
            h.backward_call = max(Seconds(0), *steady - layer);
        }
    }
    // Where the per-call cost falls: before the first backward kernel (host ahead of the GPU) or
    // after the last one (overlapping the GPU's tail), in the shares measured on an idle GPU.
    const Seconds before = f.required(concat("backward_call_before_first_kernel", amp_suffix));
    const Seconds after = f.required(concat("backward_call_after_last_kernel", amp_suffix));
    if ((before + after).value() > 0) {
        const double share_before = before / (before + after);
        h.backward_call_end = h.backward_call * (1 - share_before);
        h.backward_call = h.backward_call * share_before;
    }
    h.optimizer_step = optimizer_step_host_seconds(f, optimizer, parameter_tensors);
    h.optimizer_launches = optimizer_launches(f, optimizer);
    h.zero_grad = zero_grad_host_seconds(f, optimizer, parameter_tensors);
    h.conv_growth = conv_host_growth_from_framework(f, mode);
    h.per_kernel = Seconds(0);
    // DDP's reducer (data parallel): each of its C++ dispatches (a gradient's mul_out into its bucket,
    // its copy_ back, a bucket's all-reduce) at a tiny out= op's figure, whose Python call it lacks: an
    // upper bound by that much.
    h.reducer_dispatch = f.seconds("eager_op_add_out");
    h.source = f.provenance();
    if (forward_for_inference) {
        h.source += "; inference: a layer without a layer_inference_ figure takes its training forward's (autograd "
                    "recording included: an upper bound)";
    }
    return h;
}

}  // namespace detail

/// Host costs of a step from a framework profile: each layer's forward and backward dispatch by
/// its graph op (the autocast figures under amp modes), one backward() call (split into the part
/// before its first kernel and the part after its last), optimizer.zero_grad() before the step and
/// optimizer.step() each as its fixed cost plus a cost per parameter tensor (Adam uses AdamW's figures: both run
/// torch.optim.adam's _multi_tensor_adam / _fused_adam). Ops without a figure take the add layer's.
/// A convolution pass adds its growth over the tiny layer by size (conv_host_growth_from_framework).
[[nodiscard]] inline HostCosts host_costs_from_framework(const FrameworkProfile& f, PrecisionMode mode,
                                                         const OptimizerOptions& optimizer, std::size_t parameter_tensors,
                                                         StepMode step = StepMode::training) {
    return detail::host_costs_from_framework(f, mode, optimizer, parameter_tensors, nullptr, false, step);
}

/// Host costs measured with another GPU's host are used unchanged; the source says so.
inline void note_host_of_other_gpu(HostCosts& h, const FrameworkProfile& f, const CostContext& ctx) {
    if (f.gpu_key != ctx.ceilings.gpu_key) h.source = "derived: host costs " + h.source + ", taken for this GPU's host unchanged";
}

}  // namespace roofsim
