#pragma once
/// The built-in models, by name: what `roofsim predict --model NAME` builds.

#include <roofsim/zoo/resnet.hpp>
#include <roofsim/zoo/transformers.hpp>

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace roofsim::zoo {

inline constexpr std::array<std::string_view, 4> model_names = {"resnet50", "bert-base", "gpt2-small", "bert-large-squad"};

/// The model names, comma-separated, for help and error messages.
[[nodiscard]] inline std::string joined_model_names() {
    std::string out;
    for (std::string_view name : model_names) {
        if (!out.empty()) out += ", ";
        out += name;
    }
    return out;
}

/// The model's graph; `size` is the image size (resnet50) or sequence length (transformers), 0 for
/// the model's usual one (224, 128, 1024, 384). nullopt for an unknown name.
[[nodiscard]] inline std::optional<Graph> model(std::string_view name, std::int64_t size = 0) {
    if (name == "resnet50") return resnet50(size > 0 ? size : 224);
    if (name == "bert-base") return bert_base(size > 0 ? size : 128);
    if (name == "gpt2-small") return gpt2_small(size > 0 ? size : 1024);
    if (name == "bert-large-squad") return bert_large_squad(size > 0 ? size : 384);
    return std::nullopt;
}

}  // namespace roofsim::zoo
