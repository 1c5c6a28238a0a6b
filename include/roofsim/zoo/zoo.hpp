#pragma once
/// The built-in models, by name: what `roofsim predict --model NAME` builds.

#include <roofsim/zoo/resnet.hpp>
#include <roofsim/zoo/transformers.hpp>

#include <array>
#include <optional>
#include <string_view>

namespace roofsim::zoo {

inline constexpr std::array<std::string_view, 3> model_names = {"resnet50", "bert-base", "gpt2-small"};

/// The model's graph; `size` is the image size (resnet50) or sequence length (transformers), 0 for
/// the model's usual one (224, 128, 1024). nullopt for an unknown name.
[[nodiscard]] inline std::optional<Graph> model(std::string_view name, std::int64_t size = 0) {
    if (name == "resnet50") return resnet50(size > 0 ? size : 224);
    if (name == "bert-base") return bert_base(size > 0 ? size : 128);
    if (name == "gpt2-small") return gpt2_small(size > 0 ? size : 1024);
    return std::nullopt;
}

}  // namespace roofsim::zoo
