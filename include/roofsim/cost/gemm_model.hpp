#pragma once
/// The GEMM kernel model: how the library places a GEMM on the GPU and what that costs. It picks an
/// output tile and a split of K (split-K / stream-K) that finish soonest, runs the tiles in waves over
/// the SMs, and pays for operands the dimensions leave unaligned. Its parameters are per architecture
/// family and compute unit (KernelModelProfile), fitted to calibration sweeps of what PyTorch runs.

#include <roofsim/detail/slot_memo.hpp>
#include <roofsim/ir.hpp>
#include <roofsim/units.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string>
#include <utility>

namespace roofsim {

/// One compute unit's GEMM kernel parameters (per architecture family; each fitted, see
/// KernelModelProfile). Rates are fractions of the unit's ceiling, so that a GPU of the family with
/// another SM count or clock takes them over.
struct GemmKernelParams {
    double aligned_efficiency = 1;    ///< large GEMMs whose rows allow 16-byte vectors: rate / ceiling
    double unaligned_efficiency = 1;  ///< the same where a dimension does not (no TMA / wgmma path)
    double saturating_intensity = 64; ///< tile intensity Tm Tn / (Tm + Tn) at and above which a tile runs at the full rate
    double k_half = 0;                ///< k0: the depth of K per tile at which its main loop runs at half rate
    double min_split_depth = 256;     ///< the least K a split of K keeps per tile
    Seconds fixed_time{0};            ///< t0: launch and prologue of the kernel (graph replays, back to back)
    Seconds split_time{0};            ///< the extra fixed time of a split-K GEMM (its reduction kernel)
};

namespace detail {
/// The output tiles the model chooses among (cuBLAS's and CUTLASS's kernels for SM80 and SM90 come in
/// these shapes; a tile of Tm x Tn outputs loads Tm + Tn elements per step of K).
inline constexpr std::array<std::pair<int, int>, 9> gemm_tiles{
    {{256, 128}, {128, 256}, {128, 128}, {128, 64}, {64, 128}, {64, 64}, {64, 32}, {32, 64}, {32, 32}}};
}  // namespace detail

/// A GEMM model of one unit on one GPU: the ceiling, the SM count, DRAM bandwidth and the parameters,
/// with what each tile's wave costs prepared from them (set_params).
class GemmModel {
public:
    GemmModel() = default;
    GemmModel(FlopsPerSecond ceiling, int sms, BytesPerSecond dram_bandwidth, const GemmKernelParams& params, std::string from)
        : rate(ceiling), sm_count(sms), dram(dram_bandwidth), source(std::move(from)) {
        set_params(params);
    }

    FlopsPerSecond rate{0};
    int sm_count = 1;
    BytesPerSecond dram{0};
    std::string source;  ///< where the ceiling and the parameters came from

    [[nodiscard]] const GemmKernelParams& params() const { return params_; }

    /// Sets the parameters and prepares each tile's figures: the tiles the SMs hold at once (c) and
    /// the seconds of one wave per element of K, 2 Tm Tn c SMs / (R e min(1, I / I_sat)), aligned and not.
    void set_params(const GemmKernelParams& p) {
        static std::atomic<std::uint64_t> generations{0};
        generation_ = ++generations;
        params_ = p;
        const double sms = static_cast<double>(sm_count);
        for (std::size_t i = 0; i < detail::gemm_tiles.size(); ++i) {
            const double tm = detail::gemm_tiles[i].first, tn = detail::gemm_tiles[i].second;
            const double share = std::min(1.0, tm * tn / (tm + tn) / p.saturating_intensity);
            slots_[i] = sms * std::max(1.0, 16384.0 / (tm * tn));
            inverse_slots_[i] = 1 / slots_[i];
            const double work = 2 * tm * tn * slots_[i] / share;
            wave_per_k_[0][i] = work / (rate.value() * p.unaligned_efficiency);
            wave_per_k_[1][i] = work / (rate.value() * p.aligned_efficiency);
        }
    }

    /// A number no other set of parameters and figures has had (gemm_choice's memo tells models apart by it).
    [[nodiscard]] std::uint64_t generation() const { return generation_; }

    /// The SM slots of tile i (SMs x tiles an SM holds at once), and 1 over them.
    [[nodiscard]] double slots(std::size_t i) const { return slots_[i]; }
    [[nodiscard]] double inverse_slots(std::size_t i) const { return inverse_slots_[i]; }
    /// Seconds of one wave of tile i per element of K, in the aligned class or not.
    [[nodiscard]] double wave_per_k(std::size_t i, bool aligned) const { return wave_per_k_[aligned ? 1 : 0][i]; }

private:
    GemmKernelParams params_;
    std::uint64_t generation_ = 0;
    std::array<double, detail::gemm_tiles.size()> slots_{}, inverse_slots_{};
    std::array<std::array<double, detail::gemm_tiles.size()>, 2> wave_per_k_{};
};

/// What the model says the library runs for one GEMM: the tile, the split of K, the waves of tiles,
/// the share of the peak rate it reaches, and its time.
struct GemmChoice {
    int tile_m = 0, tile_n = 0, split = 1;
    double waves = 0;
    bool aligned = true;
    double efficiency = 0;  ///< FLOP / (time x the unit's ceiling)
    Seconds compute{0};     ///< the waves' time alone (no fixed time, no DRAM bound)
    Seconds time{0};
};

/// A kernel priced as the GEMM model's waves of an equivalent GEMM (a convolution pass's implicit GEMM,
/// a fused attention's tile products): t = t0 + max(f x those waves, the tensors' bytes at DRAM
/// bandwidth). Per architecture family, unit and pass (or backend and phase); fitted, see
/// KernelModelProfile.
struct ScaledGemmParams {
    double factor = 1;     ///< f: the kernel's time over the GEMM model's waves of the equivalent GEMM
    Seconds fixed_time{0}; ///< t0
};

/// A convolution pass's kernel parameters (per architecture family, unit, pass and ConvClass; fitted,
/// see KernelModelProfile): its implicit GEMM scaled, and the layout transposes around it,
///   t = t0 + max(f x waves, B / DRAM) + tau B / DRAM,  B the pass's tensors' bytes.
/// cuDNN's tensor-core engines want NHWC; on PyTorch's NCHW tensors they transpose the input, the filter
/// and the output (H200, cuDNN 9.19: 2.9 transposes a call, 45 % of a bf16 call's time; docs/NOTES.md).
struct ConvKernelParams {
    ScaledGemmParams scaled;
    double transposes = 0;  ///< tau: the transposes' time per byte of the pass's tensors, in DRAM time (0: none)
};

namespace detail {

/// The splits of K the model tries when a GEMM has fewer tiles than the SMs can hold.
inline constexpr std::array<int, 13> gemm_splits{2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128};

/// Whether the rows of A, B and C (row-major, as stored) are 16-byte vectors of `element_bytes`
/// elements: Hopper's TMA and Ampere's cp.async move 16-byte aligned rows, and cuBLAS's fast kernels
/// need every leading dimension aligned. A row of A is k long when A is stored as used, m when it is a
/// transposed view; of B, n or k; of C, n. A GEMM of unknown layout needs all three dimensions.
[[nodiscard]] constexpr bool vector_aligned(const GemmDims& d, int element_bytes) {
    const std::int64_t v = 16 / std::max(1, element_bytes);
    const auto aligned = [v](std::int64_t x) { return x % v == 0; };
    switch (d.layout) {
        case GemmLayout::nn: return aligned(d.k) && aligned(d.n);
        case GemmLayout::nt: return aligned(d.k) && aligned(d.n);
        case GemmLayout::tn: return aligned(d.m) && aligned(d.n);
        case GemmLayout::tt: return aligned(d.m) && aligned(d.k) && aligned(d.n);
        case GemmLayout::unknown: break;
    }
    return aligned(d.m) && aligned(d.n) && aligned(d.k);
}

}  // namespace detail

/// The model's GEMM: for each tile Tm x Tn and split s of K (s > 1 only while the tiles do not fill
/// the SMs and each split keeps at least min_split_depth), the time of its waves,
///   t = ceil(T s / (SMs c)) (2 Tm Tn K/s) (SMs c) / (R e min(1, I / I_sat)) (K/s + k0) / (K/s),
/// T the tiles, c = max(1, 128^2 / (Tm Tn)) tiles an SM holds at once, I = Tm Tn / (Tm + Tn), R e the
/// unit's ceiling times its aligned or unaligned efficiency; a split adds split_time and its partial
/// sums' traffic; the quickest wins. Then t0 + max(that, the operands' bytes at DRAM bandwidth).
namespace detail {
[[nodiscard]] inline GemmChoice gemm_choice_uncached(const GemmModel& g, const GemmDims& d, int element_bytes) {
    // a shape no kernel can run is an error naming the field, never a time of zero
    for (const auto& [field, value] : {std::pair{"m", d.m}, std::pair{"n", d.n}, std::pair{"k", d.k}, std::pair{"batch", d.batch}}) {
        if (value < 1) {
            throw std::invalid_argument("GEMM " + std::to_string(d.m) + " x " + std::to_string(d.n) + " x " + std::to_string(d.k) +
                                        " (batch " + std::to_string(d.batch) + "): " + field + " must be at least 1");
        }
    }
    const GemmKernelParams& p = g.params();
    GemmChoice best;
    best.aligned = detail::vector_aligned(d, element_bytes);
    const double m = static_cast<double>(d.m), n = static_cast<double>(d.n), k = static_cast<double>(d.k);
    const double batch = static_cast<double>(d.batch);
    const double dram = g.dram.value() > 0 ? g.dram.value() : 1e300;
    double best_t = 1e300;
    const double full_work = m * n * batch * (k + p.k_half);
    for (std::size_t i = 0; i < detail::gemm_tiles.size(); ++i) {
        const auto tm = detail::gemm_tiles[i].first, tn = detail::gemm_tiles[i].second;  // clang before 16 cannot capture a binding
        const double slots = g.slots(i), wave_per_k = g.wave_per_k(i, best.aligned);
        // no tile runs faster than its waves full: m n batch (K + k0) at the tile's rate; the larger
        // tiles come first, so the smaller ones mostly stop here
        if (full_work * wave_per_k / (tm * tn * slots) >= best_t) continue;
        // tile sides are powers of two: x * (1 / T) is exact, and its ceiling the tiles along x
        const double tiles = std::ceil(m * (1.0 / tm)) * std::ceil(n * (1.0 / tn)) * batch;
        const auto consider = [&](double t, int split, double waves) {
            if (t < best_t) {
                best_t = t;
                best.tile_m = tm;
                best.tile_n = tn;
                best.split = split;
                best.waves = waves;
            }
        };
        const double waves = std::ceil(tiles * g.inverse_slots(i));
        consider(waves * wave_per_k * (k + p.k_half), 1, waves);
        // a split runs at best tiles / slots waves of K in all: no split can beat the best so far
        if (tiles >= slots || tiles / slots * wave_per_k * k >= best_t) continue;
        for (int s : detail::gemm_splits) {
            const double depth = k / s;
            if (depth < p.min_split_depth || tiles * s > 2 * slots) break;
            const double split_waves = std::ceil(tiles * s / slots);
            consider(split_waves * wave_per_k * (depth + p.k_half) + p.split_time.value() + m * n * batch * 4 * (s + 1) / dram, s,
                     split_waves);
        }
    }
    const double bytes = batch * (m * k + k * n + m * n) * element_bytes;
    best.compute = Seconds(best_t);
    best.time = p.fixed_time + Seconds(std::max(best_t, bytes / dram));
    best.efficiency = 2 * m * n * k * batch / (best.time.value() * g.rate.value());
    return best;
}

/// gemm_choice's key: the model's generation and the GEMM.
struct GemmChoiceKey {
    std::uint64_t generation = 0;
    std::int64_t m = 0, n = 0, k = 0, batch = 0;
    GemmLayout layout = GemmLayout::unknown;
    int element_bytes = 0;
    friend bool operator==(const GemmChoiceKey&, const GemmChoiceKey&) = default;
    [[nodiscard]] std::size_t hash() const {
        std::uint64_t h = generation * 0x9e3779b97f4a7c15ull;
        for (std::int64_t v : {m, n, k, batch, static_cast<std::int64_t>(layout), static_cast<std::int64_t>(element_bytes)}) {
            h = (h ^ static_cast<std::uint64_t>(v)) * 0x100000001b3ull;
        }
        return static_cast<std::size_t>(h ^ (h >> 29));
    }
};
}  // namespace detail

/// gemm_choice_uncached, remembered per thread for the last GEMMs of each model (a planner predicts
/// the same layers again and again; a model's parameters changed make it another generation).
[[nodiscard]] inline GemmChoice gemm_choice(const GemmModel& g, const GemmDims& d, int element_bytes) {
    thread_local detail::SlotMemo<detail::GemmChoiceKey, GemmChoice, 1024> memo;
    return memo.get({g.generation(), d.m, d.n, d.k, d.batch, d.layout, element_bytes},
                    [&] { return detail::gemm_choice_uncached(g, d, element_bytes); });
}

}  // namespace roofsim
