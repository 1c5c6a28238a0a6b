#pragma once
/// Lowering of the optimizer step: torch.optim's foreach and fused kernels.

#include <roofsim/lower/lowerer.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace roofsim::detail {

/// One torch._foreach_* op over every parameter-sized tensor list: multi_tensor_apply launches
/// one kernel per 110 tensors / 320 blocks of 64 Ki elements (ATen MultiTensorApply.cuh, depth 1;
/// deeper lists hold fewer tensors), reading `reads` and writing `writes` tensors per parameter, of
/// `dtype` (default: the dtype the optimizer steps; a 16-bit tensor among float32 ones counts 0.5).
inline void Lowerer::foreach_op(std::string_view name, double reads, double writes, int depth, std::optional<DType> dtype) {
    static constexpr int tensors_per_launch[] = {110, 64, 48, 36, 30};
    const int per_launch = tensors_per_launch[std::clamp(depth, 1, 5) - 1];
    const double blocks_per_launch = 320;
    const double tensors = static_cast<double>(step_.parameter_tensors.size());
    const auto launches =
        static_cast<int>(std::max(std::ceil(tensors / per_launch), std::ceil(parameter_chunks_ / blocks_per_launch)));
    const double elements = parameter_elements_;
    const DType dt = dtype.value_or(has_master_weights(options_.precision) ? DType::f32 : rules_.parameter_dtype);
    for (int i = 0; i < launches; ++i) {
        Kernel& k = step_.kernels.kernels.emplace_back(blank_);
        rows_.of_kernel.push_back(static_cast<std::uint32_t>(optimizer_row_));
        k.op = name;
        k.kind = KernelKind::optimizer;
        k.phase = Phase::optimizer;
        k.layer = "optimizer";
        k.dtype = dt;
        k.bytes_read = tensor_bytes(reads * elements / launches, dt);
        k.bytes_written = tensor_bytes(writes * elements / launches, dt);
        k.flops = Flops(2.0 * elements / launches);
        k.host_dispatch = false;  // optimizer.step()'s marker carries the host cost
    }
}

inline void Lowerer::lower_optimizer() {
    const auto& o = options_.optimizer;
    if (o.kind == OptimizerKind::none || step_.parameter_tensors.empty()) return;
    // The parameters' elements, and the 64 Ki-element chunks multi_tensor_apply splits them into.
    parameter_elements_ = step_.parameter_count();
    for (double p : step_.parameter_tensors) parameter_chunks_ += std::ceil(p / 65536);
    marker(step_.kernels.kernels.emplace_back(blank_), "optimizer", "optimizer", Phase::optimizer);
    rows_.of_kernel.push_back(static_cast<std::uint32_t>(optimizer_row_));
    if (has_master_weights(options_.precision)) {
        // apex amp O2: the float16 gradients unscaled into the float32 masters' (multi_tensor_scale,
        // which also checks for overflow), the step on the masters, then the masters copied back
        // into the float16 model (master_params_to_model_params)
        const double low = bytes_per_element(rules_.parameter_dtype) / bytes_per_element(DType::f32);  // in float32 tensors
        foreach_op("apex::multi_tensor_scale", low, 1, 2, DType::f32);
        lower_optimizer_step(o);
        foreach_op("apex::multi_tensor_scale", 1, low, 2, DType::f32);
        return;
    }
    lower_optimizer_step(o);
}

/// The optimizer's own kernels (torch.optim's foreach and fused implementations).
inline void Lowerer::lower_optimizer_step(const OptimizerOptions& o) {
    if (o.kind == OptimizerKind::sgd) {
        // torch.optim.sgd._multi_tensor_sgd: grad += wd p; buf = m buf + grad; p -= lr buf.
        if (o.fused) { foreach_op("aten::_fused_sgd_", o.momentum ? 3 : 2, o.momentum ? 2 : 1, 3); return; }
        if (o.weight_decay) foreach_op("aten::_foreach_add", 2, 1, 2);
        if (o.momentum) {
            foreach_op("aten::_foreach_mul_", 1, 1, 1);
            foreach_op("aten::_foreach_add_", 2, 1, 2);
        }
        foreach_op("aten::_foreach_add_", 2, 1, 2);
        return;
    }
    // torch.optim.adam(w)._multi_tensor_adam: (AdamW: p *= 1 - lr wd;) m = lerp(m, g, 1-b1);
    // v = b2 v + (1-b2) g^2 (mul_, addcmul_); s = sqrt(v) / bc2 + eps (sqrt, div_, add_);
    // p = p - step * m / s (addcdiv_). Fused: one kernel reading p, g, m, v and writing p, m, v.
    if (o.fused) { foreach_op(o.kind == OptimizerKind::adamw ? "aten::_fused_adamw_" : "aten::_fused_adam_", 4, 3, 4); return; }
    if (o.kind == OptimizerKind::adamw && o.weight_decay) foreach_op("aten::_foreach_mul_", 1, 1, 1);
    foreach_op("aten::_foreach_lerp_", 2, 1, 2);
    foreach_op("aten::_foreach_mul_", 1, 1, 1);
    foreach_op("aten::_foreach_addcmul_", 2, 1, 3);
    foreach_op("aten::_foreach_sqrt", 1, 1, 2);
    foreach_op("aten::_foreach_div_", 1, 1, 1);
    foreach_op("aten::_foreach_add_", 1, 1, 1);
    foreach_op("aten::_foreach_addcdiv_", 3, 1, 3);
}

}  // namespace roofsim::detail
