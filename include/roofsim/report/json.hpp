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
inline constexpr int prediction_json_schema_version = 1;

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
    return {{"kind", prediction_json_kind},
            {"schema_version", prediction_json_schema_version},
            {"gpu", p.gpu_key},
            {"ceilings", p.ceilings_origin},
            {"host_costs", p.host_costs_source},
            {"precision", to_string(p.precision)},
            {"batch", p.batch},
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
              {"inputs", p.memory.inputs.value()},
              {"activations", p.memory.activations.value()},
              {"autocast_copies", p.memory.autocast_copies.value()},
              {"peak", p.memory.peak.value()}}},
            {"layers", layers}};
}

}  // namespace roofsim
