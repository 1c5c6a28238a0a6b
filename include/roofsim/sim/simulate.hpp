#pragma once
/// Step simulation: the host issues kernels one after another (each eager op costs host time), the
/// GPU runs them in order on one stream, a kernel starting when both the host has issued it and the
/// previous kernel has finished. Launch-bound steps (small layers, small batches) come out as host
/// time; compute-bound ones as GPU time.

#include <roofsim/cost/kernel_cost.hpp>
#include <roofsim/detail/op_lookups.hpp>
#include <roofsim/ir.hpp>
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
    Seconds communication_time{0};         ///< total time of the collectives on the communication stream
    Seconds communication_wait{0};         ///< time the compute stream waited for it (the exposed part)
};

/// Runs the host/GPU simulation of a kernel list: the host starts after optimizer.zero_grad()
/// (HostCosts::zero_grad, in host_time; no kernel's); a foreach optimizer's kernels are issued where
/// its host work reaches their ops (place_optimizer_launches); issued_i = issued_{i-1} + host_i (a synchronizing
/// host-only kernel then waits until the GPU has finished, plus the cost of returning from the wait;
/// the backward's first kernel also pays backward()'s walk of every backward layer's nodes, which
/// those layers' dispatches then no longer hold: backward_walk_share);
/// start_i = max(issued_i, start_{i-1} + gpu_{i-1} + gap_{i-1}) (gap_after); the step ends when the
/// last kernel does, or when the host is done (backward() returned, last dispatch issued), whichever
/// is later. Collectives (DDP's all-reduces) run on a communication stream of their own: one starts
/// once it is issued, the compute stream has finished what was issued before it (DDP records an event
/// there) and the previous collective has ended; a kernel that waits_for_communication starts only
/// after the last collective ended (DDP's finalize).
[[nodiscard]] inline Timeline simulate(const KernelList& list, const CostContext& ctx, const HostCosts& host) {
    Timeline t;
    t.kernels.reserve(list.kernels.size());
    detail::OpLookups lookups(ctx, host);
    detail::BandwidthMemo bandwidths(ctx);
    detail::ShapeMemo shapes;
    Seconds host_clock = host.zero_grad, gpu_free{0}, gpu_end{0}, host_total = host.zero_grad, gpu_total{0};
    Seconds comm_end{0};
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
        if (k.kind == KernelKind::collective) [[unlikely]] {
            s.start = max(max(s.issued, gpu_end), comm_end);
            comm_end = s.start + s.gpu_time;
            t.communication_time += s.gpu_time;
            host_total += s.host_time;
            t.kernels.push_back(s);
            continue;
        }
        if (k.waits_for_communication && comm_end > s.start) [[unlikely]] {
            t.communication_wait += comm_end - s.start;
            s.start = comm_end;
        }
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
    t.step_time = max(max(gpu_end, comm_end), host_clock);
    return t;
}

}  // namespace roofsim
