#pragma once
/// Step simulation: the host issues kernels one after another (each eager op costs host time), the
/// GPU runs them in order on one stream, a kernel starting when both the host has issued it and the
/// previous kernel has finished. Launch-bound steps (small layers, small batches) come out as host
/// time; compute-bound ones as GPU time.

#include <roofsim/cost.hpp>
#include <roofsim/detail/name_index.hpp>
#include <roofsim/ir.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
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

/// Where a foreach optimizer's step launches one of its ops' kernels: the op ("aten::_foreach_lerp_")
/// and the fraction of optimizer.step()'s host time before its first launch.
struct OptimizerLaunch {
    std::string op;
    double fraction = 0;
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

namespace detail {

/// A kernel list's host costs and per-op efficiencies, looked up once per distinct graph op, phase
/// and precision class rather than once per kernel (a step has a handful of distinct ops). Gives the
/// same values as host_cost and op_factor. Holds views of the list's strings.
class OpLookups {
public:
    OpLookups(const CostContext& ctx, const HostCosts& host)
        : ctx_(ctx), host_(host), log_flops_1x1_(log_flops(host.conv_growth.kernel_1x1)),
          log_flops_other_(log_flops(host.conv_growth.other)) {}

    /// host_cost(k, host); where `walk_share` is given, it is set to backward_walk_share(k, host)
    /// (looked up with the cost: zero but for a backward dispatch marker).
    [[nodiscard]] Seconds host_cost(const Kernel& k, Seconds* walk_share = nullptr) {
        if (walk_share) *walk_share = Seconds(0);
        if (k.python_time.value() > 0) return model_code_cost(k, host_);  // each stretch its own time
        if (k.kind == KernelKind::host_only && !k.host_op.empty()) {  // a dispatch marker: its op's figure
            if (k.phase == Phase::optimizer) return roofsim::host_cost(k, host_);
            Entry& e = entry(k.host_op);
            std::optional<Seconds>& cost = e.host[k.phase == Phase::forward ? 0 : 1];
            if (!cost) cost = roofsim::host_cost(k, host_);
            if (walk_share && k.phase == Phase::backward) {
                if (!e.walk) e.walk = roofsim::backward_walk_share(k, host_);
                *walk_share = *e.walk;
            }
            return *cost;
        }
        const Seconds dispatch = k.host_dispatch ? host_.per_kernel : Seconds(0);
        return k.kind == KernelKind::conv ? dispatch + conv_host_growth(k) : dispatch;
    }

    /// op_factor(k, ctx); 1 for a host-only kernel, whose cost (none) no factor changes.
    [[nodiscard]] double op_factor(const Kernel& k) {
        if (k.kind == KernelKind::host_only || !takes_op_factor(k, ctx_)) return 1.0;
        const auto key = op_factor_key(k);
        const auto& [op, phase, low] = key;
        std::optional<const std::vector<OpFactorPoint>*>& points =
            entry(op).factor[static_cast<int>(phase)][low ? 1 : 0];
        if (!points) {
            points = find_op_factor_points(ctx_.op_factor, key);
        }
        if (!*points) return 1.0;
        if (std::holds_alternative<AttentionDims>(k.dims)) return op_factor_at(**points, k, ctx_);
        // Any other kernel's factor depends on its points, bytes and reduction shape alone (a column
        // sum's on its FLOPs and unit too): remembered per such key (a network repeats few).
        return factors_.get(factor_key(**points, k), [&] { return op_factor_at(**points, k, ctx_); });
    }

private:
    struct Entry {
        std::string_view op;
        std::optional<Seconds> host[2];      ///< forward, backward dispatch
        std::optional<Seconds> walk;         ///< the backward dispatch's walk share
        std::optional<const std::vector<OpFactorPoint>*> factor[3][2];  ///< the op's points, by phase and 16-bit
    };
    /// What op_factor_at reads of a kernel that is not attention, with the op's points.
    struct FactorKey {
        const std::vector<OpFactorPoint>* points = nullptr;
        double bytes = 0, flops = 0;
        std::int64_t groups = -1, group_elements = -1;  ///< the reduction shape, -1 without one
        ComputeUnit unit{};
        bool column_sum = false;
        friend bool operator==(const FactorKey&, const FactorKey&) = default;

        [[nodiscard]] std::size_t hash() const {
            std::uint64_t h = std::bit_cast<std::uint64_t>(bytes) * 0x9e3779b97f4a7c15ull;
            for (const std::uint64_t v : {static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(points)),
                                          std::bit_cast<std::uint64_t>(flops), static_cast<std::uint64_t>(groups),
                                          static_cast<std::uint64_t>(group_elements), static_cast<std::uint64_t>(unit)}) {
                h = (h ^ v) * 0x100000001b3ull;
            }
            // the top 7 bits of a last multiply pick one of the 128 slots: the low bits above follow the
            // keys' low bits, which round doubles and aligned addresses share (keys met one slot)
            return static_cast<std::size_t>((h * 0x9e3779b97f4a7c15ull) >> 57);
        }
    };
    const CostContext& ctx_;
    const HostCosts& host_;
    NameIndex index_;
    std::vector<Entry> entries_;
    SlotMemo<FactorKey, double, 128> factors_;  ///< op_factor_at by FactorKey
    /// What a convolution pass's host growth depends on (conv_host_growth_at).
    struct GrowthKey {
        double flops = 0;
        ConvPass pass{};
        bool one_by_one = false;
        friend bool operator==(const GrowthKey&, const GrowthKey&) = default;

        [[nodiscard]] std::size_t hash() const {
            const std::uint64_t h = (std::bit_cast<std::uint64_t>(flops) ^ (static_cast<std::uint64_t>(pass) << 1) ^
                                     (one_by_one ? 1u : 0u)) * 0x9e3779b97f4a7c15ull;
            return static_cast<std::size_t>(h >> 40);
        }
    };
    SlotMemo<GrowthKey, Seconds, 64> growths_;  ///< conv_host_growth_at by GrowthKey
    std::vector<double> log_flops_1x1_, log_flops_other_;  ///< log FLOPs of host.conv_growth's points

    [[nodiscard]] static std::vector<double> log_flops(const std::vector<ConvHostGrowth::Point>& points) {
        std::vector<double> logs;
        logs.reserve(points.size());
        for (const auto& p : points) logs.push_back(std::log(p.flops));
        return logs;
    }

    [[nodiscard]] static FactorKey factor_key(const std::vector<OpFactorPoint>& points, const Kernel& k) {
        FactorKey key{&points, k.bytes().value(), k.flops.value()};
        if (const auto* norm = std::get_if<NormDims>(&k.dims)) {
            key.groups = norm->groups;
            key.group_elements = norm->group_elements;
        }
        key.unit = k.unit;
        key.column_sum = is_column_sum(k);
        return key;
    }

    /// conv_host_growth(k, host.conv_growth), with the points' log FLOPs taken once per step and each
    /// (family, pass, FLOPs) growth once (a network repeats few convolution sizes).
    [[nodiscard]] Seconds conv_host_growth(const Kernel& k) {
        const ConvDims* d = conv_with_host_growth(k);
        if (!d) return Seconds(0);
        const bool one_by_one = d->r == 1 && d->s == 1;
        const auto& points = one_by_one ? host_.conv_growth.kernel_1x1 : host_.conv_growth.other;
        if (points.empty()) return Seconds(0);
        const double flops = conv_flops(*d).value();
        return growths_.get(GrowthKey{flops, d->pass, one_by_one}, [&] {
            const auto& logs = one_by_one ? log_flops_1x1_ : log_flops_other_;
            return conv_host_growth_at(points, [&logs](std::size_t i) { return logs[i]; }, flops, d->pass);
        });
    }

    /// The entry of `op`, added where it has none. A step has a handful of distinct ops: while there
    /// are few, a scan finds them sooner than the index (which takes them all beyond that).
    Entry& entry(std::string_view op) {
        constexpr std::size_t few_ops = 16;
        if (entries_.size() <= few_ops) {
            for (Entry& e : entries_) {
                if (same_name(e.op, op)) return e;
            }
            if (entries_.size() < few_ops) return entries_.emplace_back(Entry{op, {}, {}, {}});
            for (std::size_t i = 0; i < entries_.size(); ++i) index_.insert(entries_[i].op, i);
        }
        const std::size_t i = index_.insert(op, entries_.size());
        if (i == entries_.size()) entries_.push_back(Entry{op, {}, {}, {}});
        return entries_[i];
    }
};

/// Issues a foreach optimizer's kernels as optimizer.step()'s host reaches their ops
/// (HostCosts::optimizer_launches): the step's dispatch marker keeps none of its host time; the
/// first kernel of each op the launches name is issued after (its fraction - the previous op's) of
/// it; the rest of it comes after the last kernel's issue (returned: the kernel's index and the time,
/// which does not delay that kernel). A kernel belongs to the op it names, the first listed at or
/// after the last one found (consecutive ops of one name are issued at the first's place). Without
/// launches, a marker or a kernel the launches name, `host_times` stays: all of the host time
/// before the first kernel.
inline std::pair<std::size_t, Seconds> place_optimizer_launches(const KernelList& list, const HostCosts& host,
                                                                std::vector<Seconds>& host_times) {
    const std::size_t none = list.kernels.size();
    const auto& launches = host.optimizer_launches;
    if (launches.empty()) return {none, Seconds(0)};
    std::size_t marker = none;
    for (std::size_t i = 0; i < list.kernels.size(); ++i) {
        const Kernel& k = list.kernels[i];
        if (k.phase == Phase::optimizer && k.kind == KernelKind::host_only && !k.host_op.empty() && k.python_time.value() <= 0) {
            marker = i;
            break;
        }
    }
    if (marker == none) return {none, Seconds(0)};
    const Seconds step = host_times[marker];
    std::vector<std::pair<std::size_t, double>> firsts;  // (kernel, fraction) of each op's first kernel
    std::size_t next = 0, last = none;
    const OptimizerLaunch* current = nullptr;
    for (std::size_t i = marker + 1; i < list.kernels.size(); ++i) {
        const Kernel& k = list.kernels[i];
        if (k.phase != Phase::optimizer || k.kind == KernelKind::host_only) continue;
        last = i;
        if (current && k.op == current->op) continue;
        std::size_t j = next;
        while (j < launches.size() && k.op != launches[j].op) ++j;
        if (j == launches.size()) continue;  // an op not listed: issued with the one before it
        current = &launches[j];
        next = j + 1;
        firsts.emplace_back(i, current->fraction);
    }
    if (firsts.empty()) return {none, Seconds(0)};
    host_times[marker] = Seconds(0);
    double issued = 0;
    for (const auto& [i, fraction] : firsts) {
        host_times[i] += step * (fraction - issued);
        issued = fraction;
    }
    return {last, step * (1 - issued)};
}

}  // namespace detail

/// Runs the host/GPU simulation of a kernel list: the host starts after optimizer.zero_grad()
/// (HostCosts::zero_grad, in host_time; no kernel's); a foreach optimizer's kernels are issued where
/// its host work reaches their ops (place_optimizer_launches); issued_i = issued_{i-1} + host_i (a synchronizing
/// host-only kernel then waits until the GPU has finished, plus the cost of returning from the wait;
/// the backward's first kernel also pays backward()'s walk of every backward layer's nodes, which
/// those layers' dispatches then no longer hold: backward_walk_share);
/// start_i = max(issued_i, start_{i-1} + gpu_{i-1} + gap_{i-1}) (gap_after); the step ends when the
/// last kernel does, or when the host is done (backward() returned, last dispatch issued), whichever
/// is later.
[[nodiscard]] inline Timeline simulate(const KernelList& list, const CostContext& ctx, const HostCosts& host) {
    Timeline t;
    t.kernels.reserve(list.kernels.size());
    detail::OpLookups lookups(ctx, host);
    detail::BandwidthMemo bandwidths(ctx);
    detail::ShapeMemo shapes;
    Seconds host_clock = host.zero_grad, gpu_free{0}, gpu_end{0}, host_total = host.zero_grad, gpu_total{0};
    // each kernel's host cost, less its share of backward()'s walk, which is summed for the first
    // backward kernel: the whole graph's walk comes before any node runs
    std::vector<Seconds> host_times(list.kernels.size());
    Seconds walk{0};
    for (std::size_t i = 0; i < list.kernels.size(); ++i) {
        Seconds share{0};
        host_times[i] = lookups.host_cost(list.kernels[i], &share) - share;
        walk += share;
    }
    const auto [optimizer_tail_after, optimizer_tail] = detail::place_optimizer_launches(list, host, host_times);
    bool in_backward = false, backward_done = false;
    for (std::size_t i = 0; i < list.kernels.size(); ++i) {
        const Kernel& k = list.kernels[i];
        SimulatedKernel s;
        s.host_time = host_times[i];
        if (k.phase == Phase::backward && !in_backward) {
            s.host_time += host.backward_call + walk;
            in_backward = true;
        } else if (k.phase != Phase::backward && in_backward && !backward_done) {
            s.host_time += host.backward_call_end;  // backward() returns before optimizer.step() begins
            backward_done = true;
        }
        host_clock += s.host_time;
        s.issued = host_clock;
        if (i == optimizer_tail_after) {  // optimizer.step()'s host work after its last launch
            host_clock += optimizer_tail;
            s.host_time += optimizer_tail;
        }
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
