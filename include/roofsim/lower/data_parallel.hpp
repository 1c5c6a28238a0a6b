#pragma once
/// Data-parallel training: the kernels torch.nn.parallel.DistributedDataParallel (DDP) adds to a
/// lowered training step on each of N GPUs, with its defaults (bucket_cap_mb=25, the first bucket
/// 1 MiB, gradient_as_bucket_view=False; PyTorch's torch/csrc/distributed/c10d/reducer.cpp).

#include <roofsim/lower/lowerer.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace roofsim {

/// How a step is spread over GPUs (data parallel: each GPU runs the whole step on its own batch).
struct DataParallelOptions {
    int gpus = 1;                                  ///< GPUs in the group; 1: no DDP
    double bucket_cap_bytes = 25.0 * 1024 * 1024;  ///< DDP(bucket_cap_mb=25)
    double first_bucket_bytes = 1024.0 * 1024;     ///< torch.distributed._DEFAULT_FIRST_BUCKET_BYTES
};

/// One gradient bucket as DDP all-reduces it: its bytes and its gradients (parameter tensors).
struct GradientBucket {
    double bytes = 0;
    int tensors = 0;
};

namespace detail {

/// Adds DDP's kernels to a lowered step (`rows`: its kernels' report rows, row i = layer i). In
/// the steady state (DDP rebuilds its buckets after the first step, in the order the gradients
/// became ready):
/// - a gradient is ready after its layer's last backward kernel; there DDP copies it into its bucket,
///   scaled by 1/N (`mul_out`: one elementwise kernel and one dispatch per parameter tensor);
/// - a bucket closes once it holds at least first_bucket_bytes (the first) or bucket_cap_bytes, and
///   its all-reduce (NCCL, on the communication stream) is issued at once; the last bucket closes with
///   the last gradient;
/// - at the end of the backward (DDP's finalize), every gradient is copied back from its bucket
///   (`copy_`, one kernel a tensor), the first waiting for the last all-reduce.
/// Not modelled: the buffers' broadcast before each forward (broadcast_buffers), the reducer's own
/// host work per hook, and the SMs NCCL's kernels take from the compute stream.
/// Returns the buckets in the order they are all-reduced.
inline std::vector<GradientBucket> add_data_parallel(LoweredStep& step, KernelRows& rows, const DataParallelOptions& o) {
    if (o.gpus < 1 || o.gpus > 65535) throw std::invalid_argument("data parallel: gpus must be 1 to 65535, got " + std::to_string(o.gpus));
    if (!(o.bucket_cap_bytes > 0) || !(o.first_bucket_bytes > 0)) throw std::invalid_argument("data parallel: bucket sizes must be positive");
    std::vector<GradientBucket> buckets;
    if (o.gpus == 1 || step.parameter_tensors.empty()) return buckets;
    auto& kernels = step.kernels.kernels;
    if (rows.of_kernel.size() != kernels.size() || step.parameter_layer.size() != step.parameter_tensors.size()) {
        throw std::logic_error("data parallel: the step's rows or parameter layers do not match its kernels");
    }
    // each row's last backward kernel, and where the backward ends (the optimizer's first kernel)
    constexpr std::size_t none = static_cast<std::size_t>(-1);
    std::vector<std::size_t> last_backward(rows.count, none);
    std::size_t backward_end = kernels.size();
    for (std::size_t i = 0; i < kernels.size(); ++i) {
        if (kernels[i].phase == Phase::backward) last_backward[rows.of_kernel[i]] = i;
        if (kernels[i].phase == Phase::optimizer && backward_end == kernels.size()) backward_end = i;
    }
    const auto first_backward = std::find_if(kernels.begin(), kernels.end(), [](const Kernel& k) { return k.phase == Phase::backward; });
    if (first_backward == kernels.end()) return buckets;  // no backward: nothing to all-reduce
    if (backward_end == kernels.size()) {
        for (std::size_t i = kernels.size(); i-- > 0;) {
            if (kernels[i].phase == Phase::backward) { backward_end = i + 1; break; }
        }
    }
    // the tensors in the order their gradients are ready (ties: reverse registration order, as DDP's
    // initial buckets); a layer without backward kernels has its gradients ready at the backward's end
    const std::size_t n = step.parameter_tensors.size();
    std::vector<std::size_t> ready(n), order(n);
    for (std::size_t t = 0; t < n; ++t) {
        const std::size_t at = last_backward[step.parameter_layer[t]];
        ready[t] = at == none ? backward_end - 1 : at;
    }
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return ready[a] != ready[b] ? ready[a] < ready[b] : a > b;
    });

    const DType dt = step.parameter_dtype;
    Kernel blank;
    blank.phase = Phase::backward;
    blank.dtype = dt;
    auto grad_kernel = [&](std::size_t t, const char* op, KernelKind kind) {
        Kernel k = blank;
        k.op = op;
        k.kind = kind;
        k.layer = kernels[ready[t]].layer;
        k.bytes_read = k.bytes_written = tensor_bytes(step.parameter_tensors[t], dt);
        return k;
    };
    // (position: insert before kernels[position], kernel, row); each GPU kernel after the host-only
    // marker of the reducer's dispatch that issues it
    struct Insert { std::size_t before; Kernel kernel; std::uint32_t row; };
    std::vector<Insert> inserts;
    inserts.reserve(6 * n + 8);
    auto add = [&](std::size_t before, Kernel k, std::uint32_t row) {
        Kernel marker = blank;
        marker.op = "ddp.reducer";
        marker.kind = KernelKind::host_only;
        marker.host_op = ddp_reducer_host_op;
        marker.layer = k.layer;
        inserts.push_back({before, marker, row});
        k.host_dispatch = false;  // the marker carries its host cost
        inserts.push_back({before, k, row});
    };
    GradientBucket open;
    for (std::size_t j = 0; j < n; ++j) {
        const std::size_t t = order[j];
        const auto row = static_cast<std::uint32_t>(step.parameter_layer[t]);
        Kernel copy = grad_kernel(t, "aten::mul", KernelKind::elementwise);  // DDP divides while copying into the bucket
        copy.flops = Flops(step.parameter_tensors[t]);
        add(ready[t] + 1, copy, row);
        open.bytes += tensor_bytes(step.parameter_tensors[t], dt).value();
        open.tensors += 1;
        const double limit = buckets.empty() ? o.first_bucket_bytes : o.bucket_cap_bytes;
        if (open.bytes >= limit || j + 1 == n) {
            Kernel ar = blank;
            ar.op = "nccl:all_reduce";
            ar.kind = KernelKind::collective;
            ar.ranks = static_cast<std::uint16_t>(o.gpus);
            ar.layer = copy.layer;
            ar.bytes_read = Bytes(open.bytes);
            add(ready[t] + 1, ar, row);
            buckets.push_back(open);
            open = {};
        }
    }
    // finalize: every gradient back from its bucket, bucket by bucket, once the all-reduces are done
    for (std::size_t j = 0; j < n; ++j) {
        const std::size_t t = order[j];
        Kernel back = grad_kernel(t, "aten::copy_", KernelKind::copy);
        back.waits_for_communication = j == 0;
        add(backward_end, back, static_cast<std::uint32_t>(step.parameter_layer[t]));
    }
    // merge: kernels and the inserts (stable by position, then in the order added)
    std::stable_sort(inserts.begin(), inserts.end(), [](const Insert& a, const Insert& b) { return a.before < b.before; });
    std::vector<Kernel> merged;
    std::vector<std::uint32_t> merged_rows;
    merged.reserve(kernels.size() + inserts.size());
    merged_rows.reserve(merged.capacity());
    std::size_t next = 0;
    for (std::size_t i = 0; i <= kernels.size(); ++i) {
        for (; next < inserts.size() && inserts[next].before == i; ++next) {
            merged.push_back(inserts[next].kernel);
            merged_rows.push_back(inserts[next].row);
        }
        if (i < kernels.size()) {
            merged.push_back(kernels[i]);
            merged_rows.push_back(rows.of_kernel[i]);
        }
    }
    kernels = std::move(merged);
    rows.of_kernel = std::move(merged_rows);
    return buckets;
}

}  // namespace detail

}  // namespace roofsim
