#pragma once
/// What a step runs: a training step (forward, backward, optimizer) or an inference forward
/// (model.eval() under torch.inference_mode()).

#include <optional>
#include <string_view>

namespace roofsim {

/// The kind of step a prediction is of.
enum class StepMode {
    training,   ///< model.train(): forward with autograd recording, loss, backward, optimizer.step()
    inference,  ///< model.eval() under torch.inference_mode(): the forward alone, no loss, nothing saved
};

[[nodiscard]] constexpr std::string_view to_string(StepMode m) {
    return m == StepMode::inference ? "inference" : "training";
}

[[nodiscard]] inline std::optional<StepMode> step_mode_from_key(std::string_view key) {
    if (key == "training") return StepMode::training;
    if (key == "inference") return StepMode::inference;
    return std::nullopt;
}

}  // namespace roofsim
