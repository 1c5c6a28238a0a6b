#pragma once
/// Step simulation: the host issues kernels one after another (each eager op costs host time), the
/// GPU runs them in order on one stream, a kernel starting when both the host has issued it and the
/// previous kernel has finished. Launch-bound steps (small layers, small batches) come out as host
/// time; compute-bound ones as GPU time.

#include <roofsim/cost.hpp>
#include <roofsim/ir.hpp>

#include <map>
#include <string>
#include <vector>

namespace roofsim {

/// Host time of a step's dispatches: per layer op (forward, backward), the fixed cost of one
/// backward() call, optimizer.step(), and a cost per kernel where nothing better is known.
struct HostCosts {
    std::map<std::string, Seconds> forward;   ///< a layer's forward, by graph op ("linear")
    std::map<std::string, Seconds> backward;  ///< a layer's backward nodes, by graph op
    Seconds default_forward{0};               ///< a layer whose op has no figure
    Seconds default_backward{0};
    Seconds backward_call{0};                 ///< once per step, before the first backward node
    Seconds optimizer_step{0};                ///< the whole optimizer.step()
    Seconds per_kernel{0};                    ///< each kernel dispatched on its own (exported IR, no profile)
    std::string source;
};

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
    Seconds gpu_time{0};                   ///< total GPU busy time
};

/// Host time before kernel `k` can be launched: a layer's dispatch marker (host-only, naming its
/// op) costs that op's figure; a kernel dispatched on its own costs `per_kernel`.
[[nodiscard]] inline Seconds host_cost(const Kernel& k, const HostCosts& h) {
    if (k.kind == KernelKind::host_only && !k.host_op.empty()) {
        if (k.phase == Phase::optimizer) return h.optimizer_step;
        const auto& table = k.phase == Phase::forward ? h.forward : h.backward;
        auto it = table.find(k.host_op);
        if (it != table.end()) return it->second;
        return k.phase == Phase::forward ? h.default_forward : h.default_backward;
    }
    return k.host_dispatch ? h.per_kernel : Seconds(0);
}

/// Runs the host/GPU simulation of a kernel list: issued_i = issued_{i-1} + host_i;
/// start_i = max(issued_i, start_{i-1} + gpu_{i-1}); the step ends when the last kernel does.
[[nodiscard]] inline Timeline simulate(const KernelList& list, const CostContext& ctx, const HostCosts& host) {
    Timeline t;
    t.kernels.reserve(list.kernels.size());
    Seconds host_clock{0}, gpu_free{0};
    bool in_backward = false;
    for (const Kernel& k : list.kernels) {
        SimulatedKernel s;
        s.host_time = host_cost(k, host);
        if (k.phase == Phase::backward && !in_backward) {
            s.host_time += host.backward_call;
            in_backward = true;
        }
        host_clock += s.host_time;
        s.issued = host_clock;
        const KernelCost c = kernel_cost(k, ctx);
        s.gpu_time = c.time;
        s.bound = c.bound;
        s.start = max(s.issued, gpu_free);
        if (k.kind != KernelKind::host_only) gpu_free = s.start + s.gpu_time;
        t.host_time += s.host_time;
        t.gpu_time += s.gpu_time;
        t.kernels.push_back(s);
    }
    t.step_time = max(gpu_free, host_clock);
    return t;
}

}  // namespace roofsim
