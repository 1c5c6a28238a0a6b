#pragma once
/// The GEMM kernel model: how the library places a GEMM on the GPU and what that costs. It picks an
/// output tile and a split of K (split-K / stream-K) that finish soonest, runs the tiles in waves over
/// the SMs, and pays for operands the dimensions leave unaligned. Its parameters are per architecture
/// family and compute unit (KernelModelProfile), fitted to calibration sweeps of what PyTorch runs.

#include <roofsim/ir.hpp>
#include <roofsim/units.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
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

/// A GEMM model of one unit on one GPU: the ceiling, the SM count, DRAM bandwidth and the parameters.
struct GemmModel {
    FlopsPerSecond rate{0};
    int sm_count = 1;
    BytesPerSecond dram{0};
    GemmKernelParams params;
    std::string source;  ///< where the ceiling and the parameters came from
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

namespace detail {

/// The output tiles the model chooses among (cuBLAS's and CUTLASS's kernels for SM80 and SM90 come in
/// these shapes; a tile of Tm x Tn outputs loads Tm + Tn elements per step of K).
inline constexpr std::array<std::pair<int, int>, 9> gemm_tiles{
    {{256, 128}, {128, 256}, {128, 128}, {128, 64}, {64, 128}, {64, 64}, {64, 32}, {32, 64}, {32, 32}}};

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
[[nodiscard]] inline GemmChoice gemm_choice(const GemmModel& g, const GemmDims& d, int element_bytes) {
    const GemmKernelParams& p = g.params;
    GemmChoice best;
    best.aligned = detail::vector_aligned(d, element_bytes);
    const double rate = g.rate.value() * (best.aligned ? p.aligned_efficiency : p.unaligned_efficiency);
    const double m = static_cast<double>(d.m), n = static_cast<double>(d.n), k = static_cast<double>(d.k);
    const double batch = static_cast<double>(d.batch), sms = static_cast<double>(g.sm_count);
    const double dram = g.dram.value() > 0 ? g.dram.value() : 1e300;
    double best_t = 1e300;
    for (const auto& [tm, tn] : detail::gemm_tiles) {
        const double tile_m = tm, tile_n = tn;
        const double intensity = tile_m * tile_n / (tile_m + tile_n);
        const double tile_rate = rate * std::min(1.0, intensity / p.saturating_intensity);
        const double per_sm = std::max(1.0, 16384.0 / (tile_m * tile_n));
        const double slots = sms * per_sm;
        const double tiles = std::ceil(m / tile_m) * std::ceil(n / tile_n) * batch;
        const auto time_at = [&](double split) {
            const double depth = k / split;
            const double waves = std::ceil(tiles * split / slots);
            double t = waves * 2 * tile_m * tile_n * depth * slots / tile_rate * (depth + p.k_half) / depth;
            if (split > 1) t += p.split_time.value() + m * n * batch * 4 * (split + 1) / dram;
            return std::pair{t, waves};
        };
        const auto consider = [&](int split) {
            const auto [t, waves] = time_at(split);
            if (t < best_t) {
                best_t = t;
                best.tile_m = tm;
                best.tile_n = tn;
                best.split = split;
                best.waves = waves;
            }
        };
        consider(1);
        if (tiles >= slots) continue;
        for (int s : detail::gemm_splits) {
            if (k / s < p.min_split_depth || tiles * s > 2 * slots) break;
            consider(s);
        }
    }
    const double bytes = batch * (m * k + k * n + m * n) * element_bytes;
    best.compute = Seconds(best_t);
    best.time = p.fixed_time + Seconds(std::max(best_t, bytes / dram));
    best.efficiency = 2 * m * n * k * batch / (best.time.value() * g.rate.value());
    return best;
}

}  // namespace roofsim
