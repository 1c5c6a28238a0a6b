#pragma once
/// Per-op efficiencies: the measured over modelled GPU time of PyTorch's own kernels for a graph op,
/// read at a kernel's shape among the shapes the framework probe timed (CostContext::op_factor).

#include <roofsim/cost/streaming.hpp>

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

/// Whether a kernel is a dtype conversion (aten::_to_copy, or copy_ between dtypes: written as an
/// elementwise kernel; a same-dtype copy is a `copy` kernel).
[[nodiscard]] inline bool is_cast(const Kernel& k) {
    return k.kind == KernelKind::elementwise && (k.op == "aten::_to_copy" || k.op == "aten::copy_");
}

/// Whether a kernel is a layout copy (aten::clone: what .contiguous() runs on a transposed or
/// permuted view, as attention's heads are split and merged; a contiguous tensor's .contiguous()
/// copies nothing). Such copies read with strides: on an H200 a float32 one ran at 2.5 TB/s and a
/// bfloat16 one at 1.55 TB/s where a contiguous clone ran at 3.8 (a copy-speed diagnostic, in git history,
/// 2026-11-30), so they take the probe's transposed copy's efficiency (factor_op).
[[nodiscard]] inline bool is_layout_copy(const Kernel& k) {
    return k.kind == KernelKind::copy && k.op == "aten::clone";
}

/// Whether a kernel is an elementwise op over floating operands of different dtypes (a bfloat16
/// activation added to a float32 residual under autocast): PyTorch's TensorIterator then runs its
/// unrolled loop that casts each operand on load (LoadWithCast), not the vectorized one; on an H200
/// it ran at 2.4-2.5 TB/s where the same op on one dtype ran at about 4 (kernel profiles of BERT-base
/// and GPT-2 small, 2026-11-30), so such kernels take the probe's mixed-dtype add's efficiency.
[[nodiscard]] inline bool is_mixed_elementwise(const Kernel& k) {
    return k.kind == KernelKind::elementwise && k.mixed_dtypes && !is_cast(k);
}

/// Whether a kernel is an elementwise op of one dtype over a strided or broadcast operand (a bias
/// added apart to a transposed tensor: `linear` on a strided input runs `matmul` and a broadcast
/// `add_`): TensorIterator cannot run its vectorized loop and computes each element's offsets, as a
/// transposing copy does; on an H200 ViT-B/16's bfloat16 bias adds ran at 1.5 TB/s and the probe's
/// bfloat16 transposed copy at 1.4 TB/s (2026-12-01), so such kernels take the transposed copy's
/// efficiency. A mixed-dtype loop keeps its own (is_mixed_elementwise), as does a cast.
[[nodiscard]] inline bool is_strided_elementwise(const Kernel& k) {
    return k.kind == KernelKind::elementwise && k.strided && !k.mixed_dtypes && !is_cast(k);
}

/// Whether a kernel is a backward add of one dtype: autograd summing the gradients of a tensor that
/// several paths read (a residual connection, q/k/v's shared input, tied weights). The autograd engine
/// runs it where the paths meet, inside whichever layer's backward is running (an exported IR gives it
/// that layer's op: GPT-2's residual sums ran inside LayerNorm's), so it takes the add's own
/// efficiency: on an H200 GPT-2 small b16's float32 sums of 151 MB ran at 35.6 µs (4.2 TB/s), the
/// probe's add at 4.2 TB/s, where layer norm's backward efficiency made them 128 µs.
[[nodiscard]] inline bool is_gradient_sum(const Kernel& k) {
    return k.kind == KernelKind::elementwise && k.phase == Phase::backward && (k.op == "aten::add" || k.op == "aten::add_") &&
           !k.mixed_dtypes && !k.strided;
}

/// The phase whose per-op efficiency a kernel takes: its own, but a layout copy's (and a strided
/// elementwise loop's) is the same copy either way and takes the forward's (the probe's transposed
/// copy launches none backward), and a mixed-dtype elementwise kernel or a gradient sum is the same
/// loop either way (the probe times mixed-dtype and same-dtype adds forward).
[[nodiscard]] inline Phase factor_phase(const Kernel& k) {
    return is_layout_copy(k) || is_strided_elementwise(k) || is_mixed_elementwise(k) || is_gradient_sum(k) ? Phase::forward
                                                                                                              : k.phase;
}

/// Whether a kernel is a sum over the leading dimensions that keeps the last (aten::sum carrying its
/// reduction shape as NormDims: columns, rows), as bias gradients are.
[[nodiscard]] inline bool is_column_sum(const Kernel& k) {
    return k.kind == KernelKind::reduction && std::holds_alternative<NormDims>(k.dims) && k.op == "aten::sum";
}

/// Whether a kernel is a depthwise convolution (groups == input channels > 1): PyTorch runs its own
/// depthwise kernels for many of these, which the cuDNN sweep's ratio does not describe.
[[nodiscard]] inline bool is_depthwise_conv(const Kernel& k) {
    const auto* d = std::get_if<ConvDims>(&k.dims);
    return k.kind == KernelKind::conv && d && d->groups > 1 && d->groups == d->c;
}

/// A depthwise convolution over one spatial dimension (a conv1d: height 1, a 1 x S kernel), which
/// PyTorch runs as a 2-D one of height 1: S taps an output where the timed 3x3 takes 9.
[[nodiscard]] inline bool is_depthwise_conv1d(const Kernel& k) {
    if (!is_depthwise_conv(k)) return false;
    const auto& d = std::get<ConvDims>(k.dims);
    return d.h == 1 && d.r == 1;
}

/// Whether a kernel is a fused attention kernel that the kernel model prices (CostContext::attention).
[[nodiscard]] inline bool priced_by_kernel_model(const Kernel& k, const CostContext& ctx) {
    const auto* a = std::get_if<AttentionDims>(&k.dims);
    return a && k.kind == KernelKind::attention && ctx.attention.count({k.unit, a->backend, k.backward_pass}) != 0;
}

/// Whether a kernel's time takes a measured per-op efficiency: the memory-bound and attention
/// kernels a graph op lowered to, every cast, every column sum and every depthwise convolution,
/// where the context has per-op efficiencies.
[[nodiscard]] inline bool takes_op_factor(const Kernel& k, const CostContext& ctx) {
    if (ctx.op_factor.empty() || k.kind == KernelKind::gemm) return false;
    if (k.kind == KernelKind::conv) return is_depthwise_conv(k);
    // a fused attention kernel the kernel model prices (CostContext::attention) takes no sdpa efficiency,
    // only dropout's cost where it draws random numbers (op_factor_key)
    if (priced_by_kernel_model(k, ctx)) return std::get<AttentionDims>(k.dims).dropout > 0;
    return !k.source_op.empty() || is_cast(k) || is_column_sum(k) || is_mixed_elementwise(k) || is_strided_elementwise(k) ||
           is_gradient_sum(k);
}

/// The op whose timings a kernel's efficiency comes from: its graph op, but for a fused attention
/// kernel sdpa's, whichever module runs it (nn.MultiheadAttention and sdpa call the same kernels),
/// for a cast the cast op's, whichever layer casts (its precision class is the source dtype's), for
/// a column sum (a bias gradient, with its reduction shape) the sum op's, for a depthwise
/// convolution's passes the depthwise timing's (conv2d with groups = channels; a conv1d's its own,
/// find_op_factor_points), for a layout copy or an elementwise kernel over strided operands the
/// transposed copy's, and for an
/// elementwise kernel on mixed dtypes the mixed-dtype add's, and for a gradient sum the add's,
/// whichever op it belongs to.
[[nodiscard]] inline std::string_view factor_op(const Kernel& k) {
    if (k.kind == KernelKind::attention && std::holds_alternative<AttentionDims>(k.dims)) return "sdpa";
    if (is_layout_copy(k) || is_strided_elementwise(k)) return "transpose_contiguous";
    if (is_cast(k)) return "cast";
    if (is_mixed_elementwise(k)) return "elementwise_mixed";
    if (is_gradient_sum(k)) return "add";
    if (is_column_sum(k)) return "sum";
    if (is_depthwise_conv(k)) return is_depthwise_conv1d(k) ? "depthwise_conv1d" : "depthwise_conv2d";
    return k.source_op;
}

/// The points of a per-op efficiency key in `op_factor`, or nullptr.
template <class Map, class Key>
[[nodiscard]] inline const std::vector<OpFactorPoint>* find_op_factor_points(const Map& op_factor, const Key& key) {
    const auto it = op_factor.find(key);
    return it != op_factor.end() ? &it->second : nullptr;
}

namespace detail {

/// The log-log interpolation of (x, factor) points at x: between the two that bracket it, the end
/// point's beyond them. `for_each_point(visit)` calls visit(x, factor) for each point (at least one).
/// Where points share an x, each end takes the one the points sorted by (x, factor) would put there,
/// found in one pass without sorting (no allocation).
template <class ForEachPoint>
[[nodiscard]] double interpolate_log_log(ForEachPoint&& for_each_point, double x) {
    using Point = std::pair<double, double>;
    // the first and last of the sorted points, the last below x and the first at or above it
    std::optional<Point> first, last, below, above;
    for_each_point([&](double point_x, double factor) {
        const Point p{point_x, factor};
        if (!first || p < *first) first = p;
        if (!last || *last < p) last = p;
        if (point_x < x && (!below || *below < p)) below = p;
        if (point_x >= x && (!above || p < *above)) above = p;
    });
    if (x <= first->first) return first->second;
    if (!above) return last->second;
    const auto [x0, f0] = *below;  // x0 < x <= x1
    const auto [x1, f1] = *above;
    if (x1 == x0) return f0;
    const double t = std::log(x / x0) / std::log(x1 / x0);
    return std::exp(std::log(f0) * (1 - t) + std::log(f1) * t);
}

}  // namespace detail

/// The size by which an op's efficiency is read among the sizes it was timed at (op_factor_at): a
/// depthwise convolution's output positions per channel (N x P x Q: its weight gradient reduces each
/// channel's in one block, so few channels of many positions run far below many of few), any other
/// kernel's bytes (an elementwise op below and beyond the L2 cache).
[[nodiscard]] inline double factor_size(const Kernel& k) {
    if (is_depthwise_conv(k)) {
        const auto& d = std::get<ConvDims>(k.dims);
        return static_cast<double>(d.n) * static_cast<double>(d.p()) * static_cast<double>(d.q());
    }
    return k.bytes().value();
}

/// The op factor at a kernel's shape among an op's points: an attention kernel takes the points of its
/// backend (cuDNN's, where there is none, flash's: the same tiling), of its causality and of its
/// dropout (with or without) where such points exist, interpolated in log factor over log key length
/// between the two that bracket it (the end point's beyond); a normalization kernel with its reduction
/// shape, the points timed at the nearest group count (log scale), interpolated likewise over log group
/// length; any other kernel, among points timed at two sizes or more, interpolated likewise over its
/// log factor_size; otherwise the op's first op timing.
[[nodiscard]] inline double op_factor_at(const std::vector<OpFactorPoint>& points, const Kernel& k) {
    if (points.empty()) return 1.0;
    const auto distance = [](double a, double b) { return a > b ? a / b : b / a; };  // |log(a/b)|, ordered alike
    if (const auto* a = std::get_if<AttentionDims>(&k.dims)) {
        std::vector<const OpFactorPoint*> of_backend;
        for (const AttentionBackend backend : {a->backend, AttentionBackend::flash}) {
            for (const auto& p : points) {
                if (p.attention && p.attention->backend == backend) of_backend.push_back(&p);
            }
            if (!of_backend.empty() || a->backend != AttentionBackend::cudnn) break;
        }
        if (of_backend.empty()) return points.front().factor;
        // keep the points that match the kernel in `same`, where any do
        const auto keep_matching = [](std::vector<const OpFactorPoint*>& list, auto same) {
            std::vector<const OpFactorPoint*> matching;
            for (const auto* p : list) {
                if (same(*p->attention)) matching.push_back(p);
            }
            if (!matching.empty()) list = std::move(matching);
        };
        keep_matching(of_backend, [&](const AttentionDims& p) { return p.causal == a->causal; });
        keep_matching(of_backend, [&](const AttentionDims& p) { return (p.dropout > 0) == (a->dropout > 0); });
        const auto by_length = [&of_backend](auto&& visit) {
            for (const auto* p : of_backend) visit(static_cast<double>(p->attention->seq_kv), p->factor);
        };
        return detail::interpolate_log_log(by_length, static_cast<double>(a->seq_kv));
    }
    const auto* norm = std::get_if<NormDims>(&k.dims);
    if (const double size = factor_size(k); !norm && points.size() > 1 && size > 0) {
        // the timed sizes that bracket the kernel's (no allocation: this runs for every kernel)
        const OpFactorPoint *below = nullptr, *above = nullptr;
        int sized = 0;
        for (const auto& p : points) {
            if (p.size <= 0) continue;
            ++sized;
            if (p.size <= size && (!below || p.size > below->size)) below = &p;
            if (p.size >= size && (!above || p.size < above->size)) above = &p;
        }
        if (sized > 1) {
            if (!below) return above->factor;
            if (!above || above->size == below->size) return below->factor;
            const double t = std::log(size / below->size) / std::log(above->size / below->size);
            return std::exp(std::log(below->factor) * (1 - t) + std::log(above->factor) * t);
        }
    }
    if (!norm || points.size() == 1) return points.front().factor;
    const double groups = static_cast<double>(norm->groups), length = static_cast<double>(norm->group_elements);
    const OpFactorPoint* nearest = nullptr;
    for (const auto& p : points) {
        if (p.norm && (!nearest || distance(static_cast<double>(p.norm->groups), groups) <
                                       distance(static_cast<double>(nearest->norm->groups), groups))) {
            nearest = &p;
        }
    }
    if (!nearest) return points.front().factor;
    const auto nearest_groups = [&points, nearest](auto&& visit) {  // the nearest group count's points, by length
        for (const auto& p : points) {
            if (p.norm && p.norm->groups == nearest->norm->groups) visit(static_cast<double>(p.norm->group_elements), p.factor);
        }
    };
    return detail::interpolate_log_log(nearest_groups, length);
}

/// op_factor_at, but a column sum (a bias gradient) among points that carry their measured seconds
/// per byte takes those, interpolated in log over log rows at each timed column count and then over
/// log columns (clamped at the grid's edges), as a factor on its modelled time. PyTorch's column
/// reduction is far from the bandwidth curve at these sizes (0.6-3.6 TB/s on an H200, where the curve,
/// measured on L2-resident data below 50 MB, reads 7): its time follows the shape smoothly, while
/// measured / modelled jumps where the curve leaves the L2, so the time, not the ratio, is what
/// carries from the probe's shapes to a model's (BERT-base's 16384 x 768 bias gradients: 13.9 µs
/// by the nearest column count's ratio, about 2.3 times the measured rate of its neighbours).
[[nodiscard]] inline double op_factor_at(const std::vector<OpFactorPoint>& points, const Kernel& k, const CostContext& ctx) {
    const auto* shape = std::get_if<NormDims>(&k.dims);
    if (!shape || !is_column_sum(k) || k.bytes().value() <= 0) return op_factor_at(points, k);
    const auto timed = [](const OpFactorPoint& p) { return p.norm && p.seconds_per_byte > 0; };
    if (std::none_of(points.begin(), points.end(), timed)) return op_factor_at(points, k);
    // at each timed column count, the seconds per byte at the kernel's rows (the points of that count, by rows)
    const auto at_rows = [&](auto&& visit) {
        for (auto p = points.begin(); p != points.end(); ++p) {
            const bool first_of_its_columns = timed(*p) && std::none_of(points.begin(), p, [&](const OpFactorPoint& q) {
                return timed(q) && q.norm->groups == p->norm->groups;
            });
            if (!first_of_its_columns) continue;
            const auto along_rows = [&](auto&& visit_row) {
                for (const auto& q : points) {
                    if (timed(q) && q.norm->groups == p->norm->groups) visit_row(static_cast<double>(q.norm->group_elements), q.seconds_per_byte);
                }
            };
            visit(static_cast<double>(p->norm->groups), detail::interpolate_log_log(along_rows, static_cast<double>(shape->group_elements)));
        }
    };
    const double seconds_per_byte = detail::interpolate_log_log(at_rows, static_cast<double>(shape->groups));
    const Seconds modelled = streaming_cost(k, ctx, true, nullptr).time;
    return modelled.value() > 0 ? k.bytes().value() * seconds_per_byte / modelled.value() : 1.0;
}

/// A float16 batch norm: PyTorch runs cuDNN's kernels for it as for float32 (lower/norm.hpp).
[[nodiscard]] inline bool is_half_cudnn_batch_norm(const Kernel& k) {
    return k.dtype == DType::f16 && std::string_view(k.op).rfind("aten::cudnn_batch_norm", 0) == 0;
}

/// What a kernel's per-op efficiency is multiplied by for its dtype: 2 for cuDNN's float16 batch norm,
/// which takes float32's time, twice its bytes' at float32's efficiency, since its time follows the
/// elements, not the bytes (H200, torch.profiler, ResNet-50 b256 NCHW under float16 autocast,
/// 2026-12-04: its kernels 37.4 ms a step, where float32's model 42.8 ms and float16's bytes 21.3 ms);
/// else 1.
[[nodiscard]] inline double factor_dtype_scale(const Kernel& k) { return is_half_cudnn_batch_norm(k) ? 2.0 : 1.0; }

/// Whether a kernel's per-op efficiency is the 16-bit one of its op: a bfloat16 or float16 kernel's,
/// but a float16 batch norm takes float32's (the same cuDNN kernels); bfloat16 runs PyTorch's own.
[[nodiscard]] inline bool factor_16_bit(const Kernel& k) {
    if (is_half_cudnn_batch_norm(k)) return false;
    return k.dtype == DType::bf16 || k.dtype == DType::f16;
}

/// The key of a kernel's per-op efficiency in CostContext::op_factor: its op, phase and precision
/// class (factor_16_bit).
[[nodiscard]] inline std::tuple<std::string_view, Phase, bool> op_factor_key(const Kernel& k) {
    return {factor_op(k), factor_phase(k), factor_16_bit(k)};
}

/// op_factor_key, but a fused attention kernel that the kernel model prices takes only dropout's cost:
/// the key "sdpa_dropout" (calibrate_attention_dropout).
[[nodiscard]] inline std::tuple<std::string_view, Phase, bool> op_factor_key(const Kernel& k, const CostContext& ctx) {
    if (priced_by_kernel_model(k, ctx)) return {"sdpa_dropout", factor_phase(k), factor_16_bit(k)};
    return op_factor_key(k);
}

/// The per-op efficiency that multiplies a kernel's time: the factor of its op, phase and precision
/// class at its shape (op_factor_at), 1 where there is none.
[[nodiscard]] inline double op_factor(const Kernel& k, const CostContext& ctx) {
    if (!takes_op_factor(k, ctx)) return 1.0;
    const std::vector<OpFactorPoint>* points = find_op_factor_points(ctx.op_factor, op_factor_key(k, ctx));
    return points ? op_factor_at(*points, k, ctx) * factor_dtype_scale(k) : 1.0;
}

}  // namespace roofsim
