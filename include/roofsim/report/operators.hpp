#pragma once
/// A prediction's GPU time by operator, and its flagged (unknown-op) kernels.

#include <roofsim/predict.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace roofsim {

/// The GPU time of one operator over the step (all its kernels, all layers).
struct OperatorTime {
    std::string op;
    KernelKind kind = KernelKind::unknown;
    int kernels = 0;
    Seconds gpu_time{0};
    Flops flops{0};
    Bytes bytes{0};
    double share = 0;  ///< of the step's GPU time
};

/// The step's GPU time by operator (aten op or lowered kernel name), most time first; host-only
/// dispatches are left out.
[[nodiscard]] inline std::vector<OperatorTime> time_by_operator(const Prediction& p) {
    std::map<Name, OperatorTime> by_op;
    for (std::size_t i = 0; i < p.kernels.kernels.size(); ++i) {
        const Kernel& k = p.kernels.kernels[i];
        if (k.kind == KernelKind::host_only) continue;
        OperatorTime& t = by_op[k.op];
        t.op = k.op;
        t.kind = k.kind;
        t.kernels += 1;
        t.gpu_time += p.timeline.kernels[i].gpu_time;
        t.flops += k.flops;
        t.bytes += k.bytes();
    }
    std::vector<OperatorTime> out;
    out.reserve(by_op.size());
    for (auto& [op, t] : by_op) {
        t.share = p.gpu_time.value() > 0 ? t.gpu_time / p.gpu_time : 0.0;
        out.push_back(std::move(t));
    }
    std::sort(out.begin(), out.end(), [](const OperatorTime& a, const OperatorTime& b) {
        return a.gpu_time != b.gpu_time ? a.gpu_time > b.gpu_time : a.op < b.op;
    });
    return out;
}

/// The flagged (unknown-op) kernels of a kernel list, for `--strict` and reports.
[[nodiscard]] inline std::vector<const Kernel*> flagged_kernels(const KernelList& list) {
    std::vector<const Kernel*> out;
    for (const Kernel& k : list.kernels) {
        if (k.kind == KernelKind::unknown) out.push_back(&k);
    }
    return out;
}

}  // namespace roofsim
