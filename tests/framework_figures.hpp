#pragma once
// The figures of a framework profile that every step prediction reads (a profile without one is an
// error naming it), for tests that build profiles of a few figures: each missing one set to zero.
#include <roofsim/profile/framework.hpp>

#include <string>
#include <vector>

namespace roofsim::test {

inline std::vector<std::string> step_framework_figures() {
    std::vector<std::string> keys = {"backward_walk_node", "backward_node_view", "backward_call", "cuda_synchronize_idle",
                                     "eager_op_add", "eager_op_add_autocast", "zero_grad_per_step", "zero_grad_per_param",
                                     "python_reference"};
    for (const std::string amp : {"", "_autocast"}) {
        for (const std::string key : {"layer_forward_add", "layer_backward_add", "backward_call_before_first_kernel",
                                      "backward_call_after_last_kernel"}) {
            keys.push_back(key + amp);
        }
    }
    for (const std::string kind : {"optimizer_sgd", "optimizer_sgd_wd", "optimizer_adamw"}) {
        for (const std::string impl : {"_foreach", "_fused"}) {
            for (const std::string when : {"", "_cold"}) {
                keys.push_back(kind + impl + when + "_per_step");
                keys.push_back(kind + impl + when + "_per_param");
            }
        }
        keys.push_back(kind + "_foreach_launches");
    }
    return keys;
}

/// `f` with every figure of step_framework_figures() it lacks set to zero.
inline void add_missing_step_figures(FrameworkProfile& f) {
    for (const auto& key : step_framework_figures()) {
        if (!f.figures.count(key)) f.figures[key] = FrameworkFigure{0, 0, 0, 1, "zero: set by the test", std::nullopt};
    }
}

}  // namespace roofsim::test
