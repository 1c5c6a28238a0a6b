#pragma once
/// The time of an NCCL all-reduce: measured where the calibration has that GPU count, else from the
/// link's bandwidth by the ring algorithm's bus-bandwidth rule.

#include <roofsim/units.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace roofsim {

/// One measured collective: its message (bytes per rank; an all-reduce's buffer) and time.
struct CollectivePoint {
    double bytes = 0;
    Seconds time{0};
};

/// What the collective cost reads of a GPU and its calibrations.
struct CollectiveModel {
    /// NCCL all-reduce times measured over this many GPUs, by message size (ascending).
    std::map<int, std::vector<CollectivePoint>> all_reduce;
    std::string measured_source;    ///< where the measured points come from
    BytesPerSecond link{0};         ///< one direction of one GPU's link to its peers (datasheet)
    std::string link_source;
    /// The most GPUs `link` joins (a two-GPU NVLink bridge: 2); none: any count. Beyond it the ring
    /// runs over `wider_link` (PCIe).
    std::optional<int> link_gpus;
    BytesPerSecond wider_link{0};
    std::string wider_link_source;
};

/// The link a ring over `gpus` GPUs runs on, and its source.
[[nodiscard]] inline std::pair<BytesPerSecond, const std::string*> ring_link(int gpus, const CollectiveModel& m) {
    if (m.link_gpus && gpus > *m.link_gpus) return {m.wider_link, &m.wider_link_source};
    return {m.link, &m.link_source};
}

/// Adds measured all-reduce points over `gpus` GPUs (kept sorted by size; a size measured again
/// replaces the earlier point).
inline void add_all_reduce_point(CollectiveModel& m, int gpus, CollectivePoint p) {
    auto& points = m.all_reduce[gpus];
    auto it = std::lower_bound(points.begin(), points.end(), p.bytes,
                               [](const CollectivePoint& q, double b) { return q.bytes < b; });
    if (it != points.end() && it->bytes == p.bytes) *it = p;
    else points.insert(it, p);
}

/// Where all_reduce_time's figure over `gpus` GPUs comes from: "measured: <source>" or "ring rule on <link>".
[[nodiscard]] inline std::string all_reduce_source(int gpus, const CollectiveModel& m) {
    const auto it = m.all_reduce.find(gpus);
    return it != m.all_reduce.end() && !it->second.empty() ? "measured: " + m.measured_source : "ring rule on " + *ring_link(gpus, m).second;
}

/// The GPU time of an all-reduce of `bytes` over `gpus` GPUs, and which figure set it:
/// - measured (NCCL over this GPU count): log-log interpolation between the measured sizes; below
///   the smallest, its time (the latency floor); above the largest, its bus bandwidth;
/// - else the ring rule: 2 (n - 1) / n x bytes over the link's one-way bandwidth (nccl-tests' bus
///   bandwidth = the link's), no latency: a lower bound.
[[nodiscard]] inline Seconds all_reduce_time(double bytes, int gpus, const CollectiveModel& m, std::string* how = nullptr) {
    if (gpus < 2) throw std::invalid_argument("all_reduce_time: a collective needs 2 or more GPUs, got " + std::to_string(gpus));
    if (!(bytes >= 0) || !std::isfinite(bytes)) throw std::invalid_argument("all_reduce_time: bytes must be finite and >= 0");
    if (const auto it = m.all_reduce.find(gpus); it != m.all_reduce.end() && !it->second.empty()) {
        const auto& p = it->second;
        if (how) *how = all_reduce_source(gpus, m);
        if (bytes <= p.front().bytes) return p.front().time;
        if (bytes >= p.back().bytes) return p.back().time * (bytes / p.back().bytes);
        const auto hi = std::lower_bound(p.begin(), p.end(), bytes, [](const CollectivePoint& q, double b) { return q.bytes < b; });
        const auto lo = hi - 1;
        const double f = std::log(bytes / lo->bytes) / std::log(hi->bytes / lo->bytes);
        return Seconds(std::exp(std::log(lo->time.value()) + f * std::log(hi->time.value() / lo->time.value())));
    }
    const BytesPerSecond link = ring_link(gpus, m).first;
    if (!(link.value() > 0)) {
        throw std::runtime_error("all-reduce over " + std::to_string(gpus) + " GPUs: no measurement for that count and no link bandwidth");
    }
    if (how) *how = all_reduce_source(gpus, m);
    return Seconds(2.0 * (gpus - 1) / gpus * bytes / link.value());
}

}  // namespace roofsim
