#pragma once
/// Step simulation: the host issues kernels one after another (each eager op costs host time), the
/// GPU runs them in order on one stream, a kernel starting when both the host has issued it and the
/// previous kernel has finished. Launch-bound steps (small layers, small batches) come out as host
/// time; compute-bound ones as GPU time.

#include <roofsim/cost.hpp>
#include <roofsim/detail/name_index.hpp>
#include <roofsim/ir.hpp>

#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
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

struct HostCosts {
    std::map<std::string, Seconds, std::less<>> forward;   ///< a layer's forward, by host op ("linear", "conv2d_nobias")
    std::map<std::string, Seconds, std::less<>> backward;  ///< a layer's backward nodes, by host op
    Seconds default_forward{0};               ///< a layer whose op has no figure
    Seconds default_backward{0};
    Seconds backward_call{0};                 ///< once per step, before the first backward node
    Seconds backward_call_end{0};             ///< once per step, after the last backward node
    Seconds optimizer_step{0};                ///< the whole optimizer.step()
    Seconds per_kernel{0};                    ///< each kernel dispatched on its own (exported IR, no profile)
    Seconds synchronize{0};                   ///< returning from a wait for the GPU (a `sync` kernel)
    ConvHostGrowth conv_growth;               ///< a convolution's host cost beyond its tiny layer's, by size
    std::string source;
};

/// A host op's figure in `table`: its own, else (a variant the profile did not measure, "conv2d_nobias")
/// the op's it is a variant of; nullptr when neither is there.
[[nodiscard]] inline const Seconds* find_host_figure(const std::map<std::string, Seconds, std::less<>>& table,
                                                     std::string_view op) {
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
                       &h.per_kernel, &h.synchronize}) {
        *s = *s * factor;
    }
    for (auto* points : {&h.conv_growth.kernel_1x1, &h.conv_growth.other}) {
        for (auto& point : *points) {
            point.forward = point.forward * factor;
            point.backward = point.backward * factor;
        }
    }
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

/// One kernel as simulated.
struct SimulatedKernel {
    Seconds host_time{0};  ///< host time spent issuing it
    Seconds issued{0};     ///< when the host finished issuing it
    Seconds start{0};      ///< when the GPU started it
    Seconds gpu_time{0};   ///< its cost-model time
    Bound bound = Bound::compute;
};

/// The simulated step.
struct Timeline {
    std::vector<SimulatedKernel> kernels;  ///< parallel to the kernel list
    Seconds step_time{0};                  ///< until the GPU finishes the last kernel
    Seconds host_time{0};                  ///< total host issue time
    Seconds gpu_time{0};                   ///< total GPU busy time (the kernels' own)
    Seconds gpu_gap_time{0};               ///< total time between back-to-back kernels (gap_after)
};

/// A convolution pass's host cost beyond its tiny layer's: the growth measured at the sizes around
/// its FLOPs, linear in log FLOPs between them, held at the end points beyond them; the forward's on
/// the forward pass, the backward's on the weight-gradient pass (every convolution's backward has
/// one). None for a depthwise convolution (PyTorch's own kernels, not cuDNN's engines).
[[nodiscard]] inline Seconds conv_host_growth(const Kernel& k, const ConvHostGrowth& growth) {
    const auto* d = std::get_if<ConvDims>(&k.dims);
    if (k.kind != KernelKind::conv || !d || d->pass == ConvPass::backward_data || is_depthwise_conv(k)) return Seconds(0);
    const auto& points = d->r == 1 && d->s == 1 ? growth.kernel_1x1 : growth.other;
    const double flops = conv_flops(*d).value();
    if (points.empty() || !(flops > 0)) return Seconds(0);
    const auto extra = [&](const ConvHostGrowth::Point& p) { return d->pass == ConvPass::forward ? p.forward : p.backward; };
    const double x = std::log(flops);
    if (x <= std::log(points.front().flops)) return extra(points.front());
    for (std::size_t i = 1; i < points.size(); ++i) {
        const double x1 = std::log(points[i].flops);
        if (x <= x1) {
            const double x0 = std::log(points[i - 1].flops), t = (x - x0) / (x1 - x0);
            return extra(points[i - 1]) + (extra(points[i]) - extra(points[i - 1])) * t;
        }
    }
    return extra(points.back());
}

/// Host time before kernel `k` can be launched: a layer's dispatch marker (host-only, naming its
/// op) costs that op's figure; a kernel dispatched on its own costs `per_kernel`; a convolution pass
/// adds its growth over the tiny layer (conv_host_growth).
[[nodiscard]] inline Seconds host_cost(const Kernel& k, const HostCosts& h) {
    if (k.kind == KernelKind::host_only && !k.host_op.empty()) {
        if (k.phase == Phase::optimizer) return h.optimizer_step;
        const auto& table = k.phase == Phase::forward ? h.forward : h.backward;
        if (const Seconds* figure = find_host_figure(table, k.host_op)) return *figure;
        return k.phase == Phase::forward ? h.default_forward : h.default_backward;
    }
    const Seconds dispatch = k.host_dispatch ? h.per_kernel : Seconds(0);
    return k.kind == KernelKind::conv ? dispatch + conv_host_growth(k, h.conv_growth) : dispatch;
}

namespace detail {

/// A kernel list's host costs and per-op efficiencies, looked up once per distinct graph op, phase
/// and precision class rather than once per kernel (a step has a handful of distinct ops). Gives the
/// same values as host_cost and op_factor. Holds views of the list's strings.
class OpLookups {
public:
    OpLookups(const CostContext& ctx, const HostCosts& host) : ctx_(ctx), host_(host) {}

    /// host_cost(k, host)
    [[nodiscard]] Seconds host_cost(const Kernel& k) {
        if (k.kind != KernelKind::host_only || k.host_op.empty() || k.phase == Phase::optimizer) {
            return roofsim::host_cost(k, host_);
        }
        std::optional<Seconds>& cost = entry(k.host_op).host[k.phase == Phase::forward ? 0 : 1];
        if (!cost) cost = roofsim::host_cost(k, host_);
        return *cost;
    }

    /// op_factor(k, ctx)
    [[nodiscard]] double op_factor(const Kernel& k) {
        if (!takes_op_factor(k, ctx_)) return 1.0;
        const auto key = op_factor_key(k);
        const auto& [op, phase, low] = key;
        std::optional<const std::vector<OpFactorPoint>*>& points = entry(op).factor[static_cast<int>(phase)][low ? 1 : 0];
        if (!points) {
            auto it = ctx_.op_factor.find(key);
            points = it != ctx_.op_factor.end() ? &it->second : nullptr;
        }
        if (!*points) return 1.0;
        const auto* norm = std::get_if<NormDims>(&k.dims);
        if (!norm || (*points)->size() == 1) return op_factor_at(**points, k, ctx_);
        // A normalization's factor depends on its shape: remembered per shape (a network repeats few).
        for (const NormFactor& m : norm_factors_) {
            if (m.points == *points && m.groups == norm->groups && m.group_elements == norm->group_elements) return m.factor;
        }
        norm_factors_.push_back({*points, norm->groups, norm->group_elements, op_factor_at(**points, k, ctx_)});
        return norm_factors_.back().factor;
    }

private:
    struct Entry {
        std::string_view op;
        std::optional<Seconds> host[2];      ///< forward, backward dispatch
        std::optional<const std::vector<OpFactorPoint>*> factor[3][2];  ///< the op's points, by phase and 16-bit
    };
    struct NormFactor {
        const std::vector<OpFactorPoint>* points;
        std::int64_t groups, group_elements;
        double factor;
    };
    const CostContext& ctx_;
    const HostCosts& host_;
    std::vector<NormFactor> norm_factors_;
    NameIndex index_;
    std::vector<Entry> entries_;
    std::size_t last_ = NameIndex::none;  ///< consecutive kernels mostly share an op

    Entry& entry(std::string_view op) {
        if (last_ != NameIndex::none && entries_[last_].op == op) return entries_[last_];
        last_ = index_.insert(op, entries_.size());
        if (last_ == entries_.size()) entries_.push_back(Entry{op, {}, {}});
        return entries_[last_];
    }
};

}  // namespace detail

/// Runs the host/GPU simulation of a kernel list: issued_i = issued_{i-1} + host_i (a synchronizing
/// host-only kernel then waits until the GPU has finished, plus the cost of returning from the wait);
/// start_i = max(issued_i, start_{i-1} + gpu_{i-1} + gap_{i-1}) (gap_after); the step ends when the
/// last kernel does, or when the host is done (backward() returned, last dispatch issued), whichever
/// is later.
[[nodiscard]] inline Timeline simulate(const KernelList& list, const CostContext& ctx, const HostCosts& host) {
    Timeline t;
    t.kernels.reserve(list.kernels.size());
    detail::OpLookups lookups(ctx, host);
    detail::BandwidthMemo bandwidths(ctx);
    detail::ShapeMemo shapes;
    Seconds host_clock{0}, gpu_free{0}, gpu_end{0}, host_total{0}, gpu_total{0};
    bool in_backward = false, backward_done = false;
    for (const Kernel& k : list.kernels) {
        SimulatedKernel s;
        s.host_time = lookups.host_cost(k);
        if (k.phase == Phase::backward && !in_backward) {
            s.host_time += host.backward_call;
            in_backward = true;
        } else if (k.phase != Phase::backward && in_backward && !backward_done) {
            s.host_time += host.backward_call_end;  // backward() returns before optimizer.step() begins
            backward_done = true;
        }
        host_clock += s.host_time;
        s.issued = host_clock;
        if (k.host_sync) {  // .item(), bool(tensor): the host waits for everything queued before it
            const Seconds waited = max(Seconds(0), gpu_end - host_clock) + host.synchronize;
            host_clock += waited;
            s.host_time += waited;
        }
        const KernelCost c = detail::kernel_cost(k, ctx, lookups.op_factor(k), &bandwidths, &shapes);
        s.gpu_time = c.time;
        s.bound = c.bound;
        s.start = max(s.issued, gpu_free);
        if (k.kind != KernelKind::host_only) {
            const Seconds gap = gap_after(k, c, ctx);
            gpu_end = s.start + s.gpu_time;
            gpu_free = gpu_end + gap;  // the next kernel of the stream starts after the gap
            t.gpu_gap_time += gap;
        }
        host_total += s.host_time;
        gpu_total += s.gpu_time;
        t.kernels.push_back(s);
    }
    if (in_backward && !backward_done) {  // a step without optimizer ends when backward() returns
        host_clock += host.backward_call_end;
        host_total += host.backward_call_end;
    }
    t.host_time = host_total;
    t.gpu_time = gpu_total;
    t.step_time = max(gpu_end, host_clock);
    return t;
}

}  // namespace roofsim
