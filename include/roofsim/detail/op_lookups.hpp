#pragma once
/// A memo of a kernel list's host costs and per-op efficiencies, by distinct op.

#include <roofsim/cost/kernel_cost.hpp>
#include <roofsim/detail/name_index.hpp>
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
        const auto key = op_factor_key(k, ctx_);
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
        return factors_.get(factor_key(**points, k), [&] { return op_factor_at(**points, k, ctx_); }) * factor_dtype_scale(k);
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

}  // namespace roofsim
