#pragma once
/// A prediction as JSON: SI units, the unit in each key, with its kind and schema_version.

#include <roofsim/predict.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

namespace roofsim {

/// The kind and format version of a prediction's JSON document (bumped whenever its format changes).
inline constexpr std::string_view prediction_json_kind = "roofsim-prediction";
inline constexpr int prediction_json_schema_version = 2;  // 2: "mode"

/// The prediction as JSON (SI units, unit in each key).
[[nodiscard]] inline nlohmann::json to_json(const Prediction& p) {
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& r : p.layers) {
        layers.push_back({{"layer", r.layer},
                          {"op", r.op},
                          {"forward_gpu_seconds", r.forward_gpu.value()},
                          {"backward_gpu_seconds", r.backward_gpu.value()},
                          {"forward_host_seconds", r.forward_host.value()},
                          {"backward_host_seconds", r.backward_host.value()},
                          {"flops", r.flops.value()},
                          {"bytes", r.bytes.value()},
                          {"bound", to_string(r.bound)},
                          {"kernels", r.kernels},
                          {"flagged_kernels", r.flagged},
                          {"share_of_gpu_time", r.share}});
    }
    nlohmann::json data_parallel = nullptr;
    if (p.gpus > 1) {
        nlohmann::json buckets = nlohmann::json::array();
        for (const auto& b : p.buckets) buckets.push_back({{"bytes", b.bytes}, {"tensors", b.tensors}});
        data_parallel = {{"communication_seconds", p.communication_time.value()},
                         {"exposed_communication_seconds", p.communication_exposed.value()},
                         {"collectives", p.communication_source},
                         {"buckets", buckets}};
    }
    return {{"kind", prediction_json_kind},
            {"schema_version", prediction_json_schema_version},
            {"gpu", p.gpu_key},
            {"profile", p.profile_kind},
            {"ceilings", p.ceilings_origin},
            {"host_costs", p.host_costs_source},
            {"precision", to_string(p.precision)},
            {"mode", to_string(p.mode)},
            {"batch", p.batch},
            {"gpus", p.gpus},
            {"data_parallel", data_parallel},
            {"parameters", p.parameters},
            {"step_seconds", p.step_time.value()},
            {"zero_grad_seconds", p.zero_grad_time.value()},
            {"forward_seconds", p.forward_time.value()},
            {"backward_seconds", p.backward_time.value()},
            {"optimizer_seconds", p.optimizer_time.value()},
            {"gpu_busy_seconds", p.gpu_time.value()},
            {"gpu_gap_seconds", p.gpu_gap_time.value()},
            {"host_issue_seconds", p.host_time.value()},
            {"flagged_kernels", p.flagged_kernels},
            {"flagged_gpu_seconds", p.flagged_gpu_time.value()},
            {"memory_bytes",
             {{"parameters", p.memory.parameters.value()},
              {"gradients", p.memory.gradients.value()},
              {"optimizer_state", p.memory.optimizer_state.value()},
              {"master_weights", p.memory.master_weights.value()},
              {"inputs", p.memory.inputs.value()},
              {"activations", p.memory.activations.value()},
              {"autocast_copies", p.memory.autocast_copies.value()},
              {"gradient_buckets", p.memory.gradient_buckets.value()},
              {"peak", p.memory.peak.value()}}},
            {"memory_fit",
             {{"capacity_bytes", p.memory_fit.capacity.value()},
              {"capacity_source", p.memory_fit.capacity_source},
              {"cuda_context_bytes", p.memory_fit.context.value()},
              {"usable_bytes", p.memory_fit.usable().value()},
              {"fits", p.memory_fit.fits()},
              {"not_modelled", "the caching allocator's fragmentation"}}},
            {"layers", layers}};
}

/// What the GEMM kernel model chose for each distinct GEMM, convolution pass and fused attention of a
/// prediction (the GEMM it placed: a convolution's implicit GEMM, an attention's tile products), with
/// how many kernels share it: tile, split of K, waves, alignment class and efficiency (gemm_choice).
[[nodiscard]] inline nlohmann::json gemm_kernels_json(const Prediction& p, const CostContext& ctx) {
    nlohmann::json out = nlohmann::json::array();
    std::map<std::string, std::size_t> seen;
    for (const Kernel& k : p.kernels.kernels) {
        std::optional<GemmDims> g;
        if (const auto* d = std::get_if<GemmDims>(&k.dims); d && k.kind == KernelKind::gemm) g = *d;
        if (const auto* d = std::get_if<ConvDims>(&k.dims); d && k.kind == KernelKind::conv) g = detail::implicit_gemm(*d);
        if (const auto* a = std::get_if<AttentionDims>(&k.dims); a && k.kind == KernelKind::attention) {
            g = detail::attention_gemms(*a, k.backward_pass).first;
        }
        const auto model = ctx.gemm.find(k.unit);
        if (!g || model == ctx.gemm.end()) continue;
        const std::string key = std::string(k.op.str()) + "|" + std::string(to_string(k.phase)) + "|" + std::string(to_string(k.unit)) + "|" +
                                std::to_string(g->m) + "x" + std::to_string(g->n) + "x" + std::to_string(g->k) + "x" +
                                std::to_string(g->batch) + std::string(to_string(g->layout));
        if (const auto it = seen.find(key); it != seen.end()) {
            out[it->second]["kernels"] = out[it->second]["kernels"].get<int>() + 1;
            continue;
        }
        const GemmChoice c = gemm_choice(model->second, *g, detail::gemm_element_bytes(k.unit));
        seen[key] = out.size();
        out.push_back({{"op", k.op.str()},
                       {"phase", to_string(k.phase)},
                       {"unit", to_string(k.unit)},
                       {"kernels", 1},
                       {"gemm", {{"m", g->m}, {"n", g->n}, {"k", g->k}, {"batch", g->batch}, {"layout", to_string(g->layout)}}},
                       {"tile_m", c.tile_m},
                       {"tile_n", c.tile_n},
                       {"split_k", c.split},
                       {"waves", c.waves},
                       {"aligned", c.aligned},
                       {"efficiency", c.efficiency}});
    }
    return out;
}

}  // namespace roofsim
