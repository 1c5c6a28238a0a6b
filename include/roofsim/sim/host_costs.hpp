#pragma once
/// Host costs of a step: what each dispatch, backward() and the optimizer cost the host, and the
/// host time of one kernel's dispatch from them.

#include <roofsim/cost/context.hpp>
#include <roofsim/cost/op_factor.hpp>
#include <roofsim/ir.hpp>
#include <roofsim/profile/framework.hpp>

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

/// Host time of a step's dispatches: per layer op (forward, backward), the fixed cost of one
/// backward() call, optimizer.step(), and a cost per kernel where nothing better is known.
/// How a convolution's host cost grows with its size beyond the tiny layer the per-layer figures were
/// measured on (cuDNN runs engines of more kernels for larger convolutions): points of (FLOPs of one
/// pass, extra forward seconds, extra backward seconds), FLOPs rising, the first the tiny layer's.
struct ConvHostGrowth {
    struct Point {
        double flops = 0;
        Seconds forward{0}, backward{0};
    };
    std::vector<Point> kernel_1x1;  ///< 1x1 convolutions
    std::vector<Point> other;       ///< the rest (measured on 3x3 ones)
};

/// A host op's figures by its name: a few dozen (name, value) pairs in one vector, in the order added
/// (no node or string allocated per op: a prediction makes its tables afresh). Read and written
/// as a std::map of them is: find, at, count, operator[], emplace (which keeps an op's first value).
template <class Value>
class HostFigureTable {
public:
    using value_type = std::pair<Name, Value>;
    using iterator = typename std::vector<value_type>::iterator;
    using const_iterator = typename std::vector<value_type>::const_iterator;

    [[nodiscard]] iterator begin() { return pairs_.begin(); }
    [[nodiscard]] iterator end() { return pairs_.end(); }
    [[nodiscard]] const_iterator begin() const { return pairs_.begin(); }
    [[nodiscard]] const_iterator end() const { return pairs_.end(); }
    [[nodiscard]] std::size_t size() const { return pairs_.size(); }
    [[nodiscard]] bool empty() const { return pairs_.empty(); }

    /// The pair of `op`, or end().
    [[nodiscard]] const_iterator find(std::string_view op) const { return find_in(pairs_, op); }
    [[nodiscard]] iterator find(std::string_view op) { return find_in(pairs_, op); }
    [[nodiscard]] std::size_t count(std::string_view op) const { return find(op) != end() ? 1 : 0; }
    /// The value of `op`; std::out_of_range where it has none.
    [[nodiscard]] const Value& at(std::string_view op) const {
        const auto it = find(op);
        if (it == end()) throw std::out_of_range("no host figure for op '" + std::string(op) + "'");
        return it->second;
    }
    /// The value of `op`, added (value-initialized) where it has none.
    Value& operator[](std::string_view op) {
        const auto it = find(op);
        return it != end() ? it->second : pairs_.emplace_back(Name(op), Value{}).second;
    }
    /// Adds `op` with `value` where it has none; returns its pair and whether it was added.
    std::pair<iterator, bool> emplace(std::string_view op, Value value) {
        const auto it = find(op);
        if (it != end()) return {it, false};
        pairs_.emplace_back(Name(op), value);
        return {pairs_.end() - 1, true};
    }

    /// Adds `op`, which the table does not hold, with `value` (no search: a caller adding distinct ops).
    void add_new(std::string_view op, Value value) { pairs_.emplace_back(Name(op), value); }

private:
    std::vector<value_type> pairs_;

    /// find, for a const table or not.
    template <class Pairs>
    [[nodiscard]] static auto find_in(Pairs& pairs, std::string_view op) {
        return std::find_if(pairs.begin(), pairs.end(), [op](const value_type& p) { return p.first == op; });
    }
};

struct HostCosts {
    HostFigureTable<Seconds> forward;   ///< a layer's forward, by host op ("linear", "conv2d_nobias")
    HostFigureTable<Seconds> backward;  ///< a layer's backward nodes, by host op
    Seconds default_forward{0};               ///< a layer whose op has no figure
    Seconds default_backward{0};
    Seconds backward_call{0};                 ///< once per step, before the first backward node
    Seconds backward_call_end{0};             ///< once per step, after the last backward node
    /// Autograd nodes one layer's backward holds, by host op (the chain figures' count, where measured)
    HostFigureTable<double> backward_nodes;
    Seconds backward_walk_per_node{0};        ///< backward()'s walk of its graph, per node, before any node runs
    Seconds optimizer_step{0};                ///< the whole optimizer.step(), inside a training step
    /// Where optimizer.step() launches each foreach op's kernels, in order (empty: every kernel after
    /// all of its host time)
    std::vector<OptimizerLaunch> optimizer_launches;
    Seconds zero_grad{0};                     ///< optimizer.zero_grad() before the step's first kernel
    Seconds per_kernel{0};                    ///< each kernel dispatched on its own (exported IR, no profile)
    Seconds synchronize{0};                   ///< returning from a wait for the GPU (a `sync` kernel)
    /// One dispatch of DDP's reducer (data parallel; ddp_reducer_host_op markers); the default
    /// backward figure where the profile has none
    std::optional<Seconds> reducer_dispatch;
    ConvHostGrowth conv_growth;               ///< a convolution's host cost beyond its tiny layer's, by size
    /// Seconds of model code here per second of it timed where the IR was exported (a kernel's
    /// python_time): this host's Python reference time over the exporting host's
    double model_code_scale = 1;
    std::string source;
};

/// A host op's figure in `table` (its seconds, or its backward node count): its own, else (a variant
/// the profile did not measure, "conv2d_nobias") the op's it is a variant of; nullptr when neither is there.
template <class Value>
[[nodiscard]] const Value* find_host_figure(const HostFigureTable<Value>& table, std::string_view op) {
    auto it = table.find(op);
    if (it == table.end()) it = table.find(graph_op_of_host_op(op));
    return it != table.end() ? &it->second : nullptr;
}

/// Host costs on a host `factor` times slower (> 1) or faster (< 1) than the one they were measured
/// on: every figure scaled alike (roofsim reads a framework profile's figures on one host speed by
/// the same rule, a tiny add's host time standing for the host's speed: framework.hpp).
[[nodiscard]] inline HostCosts scaled(HostCosts h, double factor) {
    if (!(factor > 0) || !std::isfinite(factor)) throw std::invalid_argument("host time scale must be a positive number");
    if (factor == 1) return h;
    for (auto* table : {&h.forward, &h.backward}) {
        for (auto& [op, seconds] : *table) seconds = seconds * factor;
    }
    for (Seconds* s : {&h.default_forward, &h.default_backward, &h.backward_call, &h.backward_call_end, &h.optimizer_step,
                       &h.zero_grad, &h.per_kernel, &h.synchronize, &h.backward_walk_per_node}) {
        *s = *s * factor;
    }
    if (h.reducer_dispatch) *h.reducer_dispatch = *h.reducer_dispatch * factor;
    for (auto* points : {&h.conv_growth.kernel_1x1, &h.conv_growth.other}) {
        for (auto& point : *points) {
            point.forward = point.forward * factor;
            point.backward = point.backward * factor;
        }
    }
    h.model_code_scale *= factor;
    char text[32];
    std::snprintf(text, sizeof text, "; host times x%.3f", factor);
    h.source += text;
    return h;
}

/// Host costs from a calibration alone: every dispatch costs the measured back-to-back launch
/// interval (a lower bound: PyTorch's own dispatch comes on top). Zero without a calibration.
[[nodiscard]] inline HostCosts host_costs_from_launch_rate(const CostContext& ctx) {
    HostCosts h;
    if (ctx.ceilings.launch_latency) {
        const Seconds launch = ctx.ceilings.launch_latency->value;
        h.default_forward = h.default_backward = h.per_kernel = h.optimizer_step = launch;
        h.source = ctx.ceilings.launch_latency->source + "; no framework profile: PyTorch's dispatch cost not included";
    } else {
        h.source = "none (no calibration: host time not modelled)";
    }
    return h;
}

namespace detail {

/// conv_host_growth of a convolution pass of `flops` FLOPs among `points`, with `log_flops(i)` giving
/// log(points[i].flops) (computed on the spot, or taken from a table made once per step).
template <class LogFlops>
[[nodiscard]] Seconds conv_host_growth_at(const std::vector<ConvHostGrowth::Point>& points, LogFlops&& log_flops, double flops,
                                          ConvPass pass) {
    if (points.empty() || !(flops > 0)) return Seconds(0);
    const auto extra = [pass](const ConvHostGrowth::Point& p) { return pass == ConvPass::forward ? p.forward : p.backward; };
    const double x = std::log(flops);
    if (x <= log_flops(0)) return extra(points.front());
    for (std::size_t i = 1; i < points.size(); ++i) {
        const double x1 = log_flops(i);
        if (x <= x1) {
            // linear in log FLOPs between the bracketing points: t = (x - x0) / (x1 - x0)
            const double x0 = log_flops(i - 1), t = (x - x0) / (x1 - x0);
            return extra(points[i - 1]) + (extra(points[i]) - extra(points[i - 1])) * t;
        }
    }
    return extra(points.back());
}

/// The convolution shape a pass's host growth is read at: its dims where the pass has a growth (a
/// forward or weight-gradient pass of a dense convolution), else null.
[[nodiscard]] inline const ConvDims* conv_with_host_growth(const Kernel& k) {
    const auto* d = std::get_if<ConvDims>(&k.dims);
    if (k.kind != KernelKind::conv || !d || d->pass == ConvPass::backward_data || is_depthwise_conv(k)) return nullptr;
    return d;
}

}  // namespace detail

/// A convolution pass's host cost beyond its tiny layer's: the growth measured at the sizes around
/// its FLOPs, linear in log FLOPs between them, held at the end points beyond them; the forward's on
/// the forward pass, the backward's on the weight-gradient pass (every convolution's backward has
/// one). None for a depthwise convolution (PyTorch's own kernels, not cuDNN's engines).
[[nodiscard]] inline Seconds conv_host_growth(const Kernel& k, const ConvHostGrowth& growth) {
    const ConvDims* d = detail::conv_with_host_growth(k);
    if (!d) return Seconds(0);
    const auto& points = d->r == 1 && d->s == 1 ? growth.kernel_1x1 : growth.other;
    return detail::conv_host_growth_at(points, [&points](std::size_t i) { return std::log(points[i].flops); },
                                       conv_flops(*d).value(), d->pass);
}

/// Host time of a stretch of model code (a host-only kernel with python_time): its time where the
/// IR was exported, at this host's Python speed (HostCosts::model_code_scale). Zero for any other kernel.
[[nodiscard]] inline Seconds model_code_cost(const Kernel& k, const HostCosts& h) {
    return k.kind == KernelKind::host_only ? k.python_time * h.model_code_scale : Seconds(0);
}

/// Host time before kernel `k` can be launched: a layer's dispatch marker (host-only, naming its
/// op) costs that op's figure; model code its own time (model_code_cost); a kernel dispatched on its
/// own costs `per_kernel`; a convolution pass adds its growth over the tiny layer (conv_host_growth).
[[nodiscard]] inline Seconds host_cost(const Kernel& k, const HostCosts& h) {
    if (k.python_time.value() > 0) return model_code_cost(k, h);
    if (k.kind == KernelKind::host_only && !k.host_op.empty()) {
        if (k.phase == Phase::optimizer) return h.optimizer_step;
        if (h.reducer_dispatch && k.host_op == ddp_reducer_host_op) return *h.reducer_dispatch;
        const auto& table = k.phase == Phase::forward ? h.forward : h.backward;
        if (const Seconds* figure = find_host_figure(table, k.host_op)) return *figure;
        return k.phase == Phase::forward ? h.default_forward : h.default_backward;
    }
    const Seconds dispatch = k.host_dispatch ? h.per_kernel : Seconds(0);
    return k.kind == KernelKind::conv ? dispatch + conv_host_growth(k, h.conv_growth) : dispatch;
}

/// The part of a backward dispatch marker's figure that is backward()'s walk of the layer's autograd
/// nodes (walk per node x the nodes its op's chain figure counted, at most the figure): charged once
/// before the first backward kernel instead, for every layer of the step (simulate). Zero for any
/// other kernel, or where the profile has no walk or node count.
[[nodiscard]] inline Seconds backward_walk_share(const Kernel& k, const HostCosts& h) {
    if (k.kind != KernelKind::host_only || k.host_op.empty() || k.phase != Phase::backward || !(h.backward_walk_per_node.value() > 0)) {
        return Seconds(0);
    }
    const double* nodes = find_host_figure(h.backward_nodes, k.host_op);
    return nodes ? min(host_cost(k, h), h.backward_walk_per_node * *nodes) : Seconds(0);
}

}  // namespace roofsim
