#pragma once
/// Memos of a prediction's cost lookups: bandwidths by working set, GEMM and convolution costs by shape.

#include <roofsim/cost/context.hpp>
#include <roofsim/detail/slot_memo.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace roofsim {

namespace detail {

/// The bandwidths of a context's curves while the kernels of a step are costed: curve_bandwidth,
/// each working set's taken once (a step has a few dozen distinct tensor sizes).
class BandwidthMemo {
public:
    explicit BandwidthMemo(const CostContext& ctx) : ctx_(ctx) {}

    /// curve_bandwidth of the read-only or the copy curve.
    [[nodiscard]] std::optional<BytesPerSecond> bandwidth(bool read_mostly, Bytes working_set) {
        const auto& curve = read_mostly ? ctx_.read_curve : ctx_.copy_curve;
        if (curve.empty()) return std::nullopt;
        return BytesPerSecond(slots_.get(Key{working_set.value(), read_mostly},
                                         [&] { return curve_bandwidth(curve, working_set)->value(); }));
    }

    /// The DRAM ceiling (ctx.ceilings.rate(MemoryLevel::dram)), looked up once.
    [[nodiscard]] BytesPerSecond dram() {
        if (!dram_) dram_ = ctx_.ceilings.rate(MemoryLevel::dram);
        return *dram_;
    }

private:
    struct Key {
        double working_set = 0;
        bool read_mostly = false;
        friend bool operator==(const Key&, const Key&) = default;

        [[nodiscard]] std::size_t hash() const {
            const std::uint64_t key = std::bit_cast<std::uint64_t>(working_set) ^ (read_mostly ? 1 : 0);
            return static_cast<std::size_t>((key * 0x9e3779b97f4a7c15) >> 58);
        }
    };
    const CostContext& ctx_;
    SlotMemo<Key, double, 64> slots_;  ///< bytes per second by working set and curve
    std::optional<BytesPerSecond> dram_;
};

/// The costs of GEMMs and convolutions already costed in one prediction, by unit, shape and bytes (a
/// network repeats a few shapes many times; their neighbour lookups are the costliest part of a cost).
class ShapeMemo {
public:
    template <class Dims, class Compute>
    [[nodiscard]] KernelCost cost(const Kernel& k, const Dims& d, Compute&& compute) {
        return std::get<SlotMemo<Key<Dims>, KernelCost, 64>>(slots_).get(Key<Dims>{k.unit, k.bytes().value(), d},
                                                                          std::forward<Compute>(compute));
    }

private:
    template <class Dims>
    struct Key {
        ComputeUnit unit{};
        double bytes = 0;
        Dims dims{};
        friend bool operator==(const Key&, const Key&) = default;

        [[nodiscard]] std::size_t hash() const {
            std::uint64_t h = static_cast<std::uint64_t>(unit) * 0x9e3779b97f4a7c15ull ^ std::bit_cast<std::uint64_t>(bytes);
            const auto mix = [&h](std::int64_t v) { h = (h ^ static_cast<std::uint64_t>(v)) * 0x100000001b3ull; };
            const Dims& d = dims;
            if constexpr (std::is_same_v<Dims, GemmDims>) {
                for (auto v : {d.m, d.n, d.k, d.batch}) mix(v);
            } else {
                for (auto v : {static_cast<std::int64_t>(d.pass), d.n, d.c, d.h, d.w, d.k, d.r, d.s, d.stride_h, d.pad_h, d.groups}) mix(v);
            }
            return static_cast<std::size_t>((h * 0x9e3779b97f4a7c15ull) >> 58);
        }
    };
    /// The GEMM shapes' costs and the convolution shapes' (a collision recomputes).
    std::tuple<SlotMemo<Key<GemmDims>, KernelCost, 64>, SlotMemo<Key<ConvDims>, KernelCost, 64>> slots_{};
};

}  // namespace detail

}  // namespace roofsim
