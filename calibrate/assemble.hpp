#pragma once
// The profile assembled from what the probes measured: each probe's part merged in, the GEMM and
// convolution efficiencies set at the end, and the profile of a run that stopped before all its
// probes ran (a signal, a probe that hung). CUDA-free, so that the tests can run it without a GPU.

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <roofsim/profile/calibration_json.hpp>

namespace roofsim::calib {

/// Merges what one probe measured into the profile.
inline void merge(Calibration& into, Calibration&& from) {
    for (auto& [level, pats] : from.bandwidth)
        for (auto& [p, m] : pats) into.bandwidth[level][p] = std::move(m);
    for (auto& [p, c] : from.bandwidth_curve) into.bandwidth_curve[p] = std::move(c);
    if (from.l2_to_dram_step_bytes) into.l2_to_dram_step_bytes = from.l2_to_dram_step_bytes;
    for (auto& [u, c] : from.probe_ceilings) into.probe_ceilings[u] = std::move(c);
    for (auto& [u, c] : from.library_ceilings) into.library_ceilings[u] = std::move(c);
    for (auto& [u, c] : from.intensity_curves) into.intensity_curves[u] = std::move(c);
    for (auto& g : from.gemm_sweep) into.gemm_sweep.push_back(std::move(g));
    for (auto& [u, f] : from.gemm_fits) into.gemm_fits[u] = f;
    for (auto& v : from.conv_sweep) into.conv_sweep.push_back(std::move(v));
    if (from.launch_latency_seconds) into.launch_latency_seconds = from.launch_latency_seconds;
    if (from.launch_interval_seconds) into.launch_interval_seconds = from.launch_interval_seconds;
    if (from.launch_gpu_interval_seconds) into.launch_gpu_interval_seconds = from.launch_gpu_interval_seconds;
    for (auto& [k, f] : from.memcpy) into.memcpy[k] = std::move(f);
    for (auto& r : from.collectives) into.collectives.push_back(std::move(r));
    for (auto& m : from.missing) into.missing.push_back(std::move(m));
    if (from.device.sm_clock_measured_hz) into.device.sm_clock_measured_hz = from.device.sm_clock_measured_hz;
}

/// GEMM and conv efficiencies against the best rate known for their unit (sweep or ceiling), in (0, 1].
inline void finish_efficiencies(Calibration& c) {
    std::map<ComputeUnit, double> best;
    for (const auto& [u, ce] : c.library_ceilings) best[u] = std::max(best[u], ce.flops_per_second.median);
    for (const auto& g : c.gemm_sweep) best[g.unit] = std::max(best[g.unit], g.flops_per_second);
    for (const auto& v : c.conv_sweep) best[v.unit] = std::max(best[v.unit], v.flops_per_second);
    for (auto& g : c.gemm_sweep) g.efficiency = std::clamp(g.flops_per_second / best[g.unit], 1e-9, 1.0);
    for (auto& v : c.conv_sweep) v.efficiency = std::clamp(v.flops_per_second / best[v.unit], 1e-9, 1.0);
}

/// The profile of a run that stopped before the probes `not_run` (their keys, in run order) had
/// their turn: what `measured` holds, each of those probes listed missing as not_run with `why`,
/// marked partial where any is left, its efficiencies finished as at the end of a whole run.
[[nodiscard]] inline Calibration stopped_profile(Calibration measured, const std::vector<std::string>& not_run,
                                                 const std::string& why) {
    for (const auto& key : not_run) measured.missing.push_back({key, MissingReason::not_run, why});
    measured.partial = !not_run.empty();
    finish_efficiencies(measured);
    return measured;
}

/// stopped_profile written to `path` (atomically, validated: save_calibration); returns what was written.
inline Calibration save_stopped_profile(Calibration measured, const std::vector<std::string>& not_run,
                                        const std::string& why, const std::filesystem::path& path) {
    Calibration c = stopped_profile(std::move(measured), not_run, why);
    save_calibration(c, path);
    return c;
}

}  // namespace roofsim::calib
