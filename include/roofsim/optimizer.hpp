#pragma once
/// The optimizer a training step ends with, as a PyTorch user sets it.

#include <optional>
#include <string_view>

namespace roofsim {

/// The optimizer a step ends with.
enum class OptimizerKind { none, sgd, adam, adamw };

[[nodiscard]] constexpr std::string_view to_string(OptimizerKind k) {
    switch (k) {
        case OptimizerKind::none: return "none";
        case OptimizerKind::sgd: return "sgd";
        case OptimizerKind::adam: return "adam";
        case OptimizerKind::adamw: return "adamw";
    }
    return "?";
}

[[nodiscard]] inline std::optional<OptimizerKind> optimizer_from_key(std::string_view key) {
    for (OptimizerKind k : {OptimizerKind::none, OptimizerKind::sgd, OptimizerKind::adam, OptimizerKind::adamw}) {
        if (to_string(k) == key) return k;
    }
    return std::nullopt;
}

/// The optimizer and how it runs (torch.optim defaults: foreach implementation).
struct OptimizerOptions {
    OptimizerKind kind = OptimizerKind::sgd;
    bool momentum = true;      ///< SGD with a momentum buffer
    bool weight_decay = true;  ///< SGD: grad += wd * param (an extra pass); AdamW: param *= 1 - lr wd
    bool fused = false;        ///< fused=True (one kernel per group) instead of foreach (the default)
};

}  // namespace roofsim
