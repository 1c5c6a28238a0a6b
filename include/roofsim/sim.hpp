#pragma once
/// Step simulation: the host issues kernels one after another (each eager op costs host time), the
/// GPU runs them in order on one stream, a kernel starting when both the host has issued it and the
/// previous kernel has finished. Launch-bound steps (small layers, small batches) come out as host
/// time; compute-bound ones as GPU time.

#include <roofsim/cost.hpp>
#include <roofsim/ir.hpp>

#include <string>
#include <vector>

namespace roofsim {

/// Host time per eager dispatch, by phase; from a framework profile or the measured launch rate.
struct HostCosts {
    Seconds forward_dispatch{0};    ///< a forward aten op: Python, dispatcher, autograd recording, launch
    Seconds backward_dispatch{0};   ///< one autograd node run by the engine, its launch included
    Seconds optimizer_dispatch{0};  ///< one torch._foreach_* / fused optimizer op
    Seconds extra_launch{0};        ///< each further kernel the same op launches
    std::string source;
};

/// Host costs from a calibration alone: every dispatch costs the measured back-to-back launch
/// interval (a lower bound: PyTorch's own dispatch comes on top). Zero without a calibration.
[[nodiscard]] inline HostCosts host_costs_from_launch_rate(const CostContext& ctx) {
    HostCosts h;
    if (ctx.ceilings.launch_latency) {
        const Seconds launch = ctx.ceilings.launch_latency->value;
        h = {launch, launch, launch, launch, ctx.ceilings.launch_latency->source};
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

[[nodiscard]] inline Seconds host_cost(const Kernel& k, const HostCosts& h) {
    if (!k.host_dispatch) return k.kind == KernelKind::host_only ? Seconds(0) : h.extra_launch;
    switch (k.phase) {
        case Phase::forward: return h.forward_dispatch;
        case Phase::backward: return h.backward_dispatch;
        case Phase::optimizer: return h.optimizer_dispatch;
    }
    return Seconds(0);
}

/// Runs the host/GPU simulation of a kernel list: issued_i = issued_{i-1} + host_i;
/// start_i = max(issued_i, start_{i-1} + gpu_{i-1}); the step ends when the last kernel does.
[[nodiscard]] inline Timeline simulate(const KernelList& list, const CostContext& ctx, const HostCosts& host) {
    Timeline t;
    t.kernels.reserve(list.kernels.size());
    Seconds host_clock{0}, gpu_free{0};
    for (const Kernel& k : list.kernels) {
        SimulatedKernel s;
        s.host_time = host_cost(k, host);
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
