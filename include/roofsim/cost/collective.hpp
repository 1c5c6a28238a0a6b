#pragma once
/// The time of an NCCL all-reduce: measured where the calibration has that GPU count (in one node),
/// else by NCCL's own cost model of its ring and tree algorithms over the links' datasheet bandwidths.

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
    bool link_is_nvlink = false;  ///< `link` is NVLink (else PCIe): NCCL's per-step latency differs
    /// The most GPUs of this kind one node holds (an HGX board, a server of PCIe cards: 8). A group
    /// of more GPUs spans gpus / gpus_per_node nodes joined by `network`.
    int gpus_per_node = 8;
    BytesPerSecond network{0};  ///< one direction, per node, between nodes; 0: none given
    Seconds network_step_latency{9.6e-6};  ///< one ring step over the network (NCCL's default figure)
    std::string network_source;
};

/// NCCL's cost model of an all-reduce, Simple protocol (src/graph/tuning.cc of NCCL 2.x, baseLat
/// and hwLat, in microseconds): a ring over n GPUs takes 2 (n - 1) steps, each with a link's latency,
/// after a base latency; a tree takes 2 (GPUs per node - 1) steps in a node and 2 log2(nodes) over
/// the network, at 0.9 x the bus bandwidth and half of it as algorithm bandwidth.
struct NcclLatencies {
    static constexpr double ring_base = 8.4e-6;
    static constexpr double ring_step_nvlink = 3.4e-6, ring_step_pcie = 5.7e-6;
    static constexpr double tree_step_intra = 28e-6;  // NVLink and PCIe alike (a 256 kB chunk's latency)
    /// over the network a tree step costs the ring step's latency plus 40.4 us of chunk time (50 - 9.6)
    static constexpr double tree_step_network_extra = 40.4e-6;
    static constexpr double tree_bandwidth = 0.9 * 0.5;  // busBw x .9, then algorithm bandwidth = busBw / 2
    static constexpr double ring_plateau = 1.9;  // several nodes, large messages: the ring's latency x 1.9
};

/// How `gpus` GPUs sit: in one node, or spread over nodes of `gpus_per_node`. Throws where the count
/// does not fill whole nodes, or spans nodes with no network given.
struct Placement {
    int nodes = 1;
    int per_node = 1;
};
[[nodiscard]] inline Placement placement(int gpus, const CollectiveModel& m) {
    if (gpus < 1) throw std::invalid_argument("a GPU count must be positive, got " + std::to_string(gpus));
    if (m.gpus_per_node < 1) throw std::invalid_argument("GPUs per node must be positive, got " + std::to_string(m.gpus_per_node));
    if (gpus <= m.gpus_per_node) return {1, gpus};
    if (gpus % m.gpus_per_node != 0) {
        throw std::invalid_argument(std::to_string(gpus) + " GPUs do not fill nodes of " + std::to_string(m.gpus_per_node) +
                                    ": give a multiple of " + std::to_string(m.gpus_per_node));
    }
    if (!(m.network.value() > 0)) {
        throw std::invalid_argument(std::to_string(gpus) + " GPUs are beyond one node's " + std::to_string(m.gpus_per_node) +
                                    ", and no network between nodes is given");
    }
    return {gpus / m.gpus_per_node, m.gpus_per_node};
}

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

/// Measured all-reduce points over `gpus` GPUs of one node, or none.
[[nodiscard]] inline const std::vector<CollectivePoint>* measured_points(int gpus, const CollectiveModel& m) {
    const auto it = m.all_reduce.find(gpus);
    return gpus <= m.gpus_per_node && it != m.all_reduce.end() && !it->second.empty() ? &it->second : nullptr;
}

/// Where all_reduce_time's figure over `gpus` GPUs comes from: "measured: <source>", "ring rule on
/// <link>" (one node) or "NCCL ring/tree rule on <link> and <network>" (several).
[[nodiscard]] inline std::string all_reduce_source(int gpus, const CollectiveModel& m) {
    if (measured_points(gpus, m)) return "measured: " + m.measured_source;
    const Placement at = placement(gpus, m);
    const std::string& link = *ring_link(at.per_node, m).second;
    if (at.nodes == 1) return "ring rule on " + link;
    return "NCCL ring/tree rule over " + std::to_string(at.nodes) + " nodes of " + std::to_string(at.per_node) + ": " + link +
           "; between nodes, " + m.network_source;
}

/// The GPU time of an all-reduce of `bytes` over `gpus` GPUs, and which figure set it:
/// - measured (NCCL over this GPU count, in one node): log-log interpolation between the measured
///   sizes; below the smallest, its time (the latency floor); above the largest, its bus bandwidth;
/// - else NCCL's cost model (NcclLatencies), the faster of
///   ring: base + 2 (n - 1) step latencies + 2 (n - 1) / n x bytes / bus bandwidth, the bus bandwidth
///         the link's one-way figure (between nodes, the lesser of it and the network's);
///   tree (several nodes only): 2 ((per node - 1) x 28 us + log2(nodes) x network step) + bytes / (0.45 x bus bandwidth).
[[nodiscard]] inline Seconds all_reduce_time(double bytes, int gpus, const CollectiveModel& m, std::string* how = nullptr) {
    if (gpus < 2) throw std::invalid_argument("all_reduce_time: a collective needs 2 or more GPUs, got " + std::to_string(gpus));
    if (!(bytes >= 0) || !std::isfinite(bytes)) throw std::invalid_argument("all_reduce_time: bytes must be finite and >= 0");
    if (const auto* p = measured_points(gpus, m)) {
        if (how) *how = all_reduce_source(gpus, m);
        if (bytes <= p->front().bytes) return p->front().time;
        if (bytes >= p->back().bytes) return p->back().time * (bytes / p->back().bytes);
        const auto hi = std::lower_bound(p->begin(), p->end(), bytes, [](const CollectivePoint& q, double b) { return q.bytes < b; });
        const auto lo = hi - 1;
        const double f = std::log(bytes / lo->bytes) / std::log(hi->bytes / lo->bytes);
        return Seconds(std::exp(std::log(lo->time.value()) + f * std::log(hi->time.value() / lo->time.value())));
    }
    const Placement at = placement(gpus, m);
    const BytesPerSecond link = ring_link(at.per_node, m).first;
    if (!(link.value() > 0) && at.per_node > 1) {
        throw std::runtime_error("all-reduce over " + std::to_string(gpus) + " GPUs: no measurement for that count and no link bandwidth");
    }
    if (how) *how = all_reduce_source(gpus, m);
    using L = NcclLatencies;
    const bool wider = m.link_gpus && at.per_node > *m.link_gpus;
    const double intra_step = m.link_is_nvlink && !wider ? L::ring_step_nvlink : L::ring_step_pcie;
    const double net_step = m.network_step_latency.value();
    const double n = gpus;
    if (at.nodes == 1) return Seconds(L::ring_base + 2 * (n - 1) * intra_step + 2 * (n - 1) / n * bytes / link.value());
    const double bus = at.per_node > 1 ? std::min(link.value(), m.network.value()) : m.network.value();
    const double inter_steps = 2.0 * (at.nodes - 1);
    double ring_latency = L::ring_base + (2 * (n - 1) - inter_steps) * intra_step + inter_steps * net_step;
    if (bytes >= n / 16 * 65536) ring_latency *= L::ring_plateau;
    const double ring = ring_latency + 2 * (n - 1) / n * bytes / bus;
    const double tree = 2 * ((at.per_node - 1) * L::tree_step_intra + std::ceil(std::log2(at.nodes)) * (net_step + L::tree_step_network_extra)) +
                        bytes / (L::tree_bandwidth * bus);
    return Seconds(std::min(ring, tree));
}

}  // namespace roofsim
