#pragma once
/// The built-in models, by name: what `roofsim predict --model NAME` builds, and the catalogue that
/// `roofsim models` lists (each model's configuration and where its definition comes from).

#include <roofsim/zoo/resnet.hpp>
#include <roofsim/zoo/transformers.hpp>
#include <roofsim/zoo/vgg.hpp>

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace roofsim::zoo {

/// One built-in model: its name, what `size` means and its usual value, its configuration and the
/// code its graph follows.
struct ModelInfo {
    std::string_view name;
    std::string_view size_meaning;  ///< "image" (pixels a side) or "sequence" (tokens)
    std::int64_t default_size = 0;
    std::string_view configuration;
    std::string_view source;
    Graph (*build)(std::int64_t size);
};

inline constexpr std::array<ModelInfo, 6> models = {{
    {"resnet50", "image", 224, "ResNet-50 v1.5, 1000 classes, cross-entropy",
     "torchvision.models.resnet50", [](std::int64_t s) { return resnet50(s); }},
    {"bert-base", "sequence", 128, "BERT-base for sequence classification: 12 layers, 768 wide, 12 heads, 2 labels",
     "transformers BertForSequenceClassification(BertConfig(num_labels=2)), attn_implementation=\"sdpa\"",
     [](std::int64_t s) { return bert_base(s); }},
    {"gpt2-small", "sequence", 1024, "GPT-2 small with its tied LM head: 12 layers, 768 wide, 12 heads, vocabulary 50257",
     "transformers GPT2LMHeadModel(GPT2Config())", [](std::int64_t s) { return gpt2_small(s); }},
    {"bert-large-squad", "sequence", 384, "BERT-large SQuAD v1.1 fine-tuning: 24 layers, 1024 wide, 16 heads, vocabulary 30528",
     "NVIDIA DeepLearningExamples PyTorch/LanguageModeling/BERT run_squad.py (modeling.BertForQuestionAnswering)",
     [](std::int64_t s) { return bert_large_squad(s); }},
    {"gpt2-medium", "sequence", 1024, "GPT-2 medium with its tied LM head: 24 layers, 1024 wide, 16 heads, vocabulary 50257",
     "transformers GPT2LMHeadModel(gpt2-medium's GPT2Config)", [](std::int64_t s) { return gpt2_medium(s); }},
    {"vgg16", "image", 224, "VGG-16 (configuration D, no batch norm), 1000 classes, cross-entropy",
     "torchvision.models.vgg16", [](std::int64_t s) { return vgg16(s); }},
}};

/// The model names, in the catalogue's order.
inline constexpr std::array<std::string_view, models.size()> model_names = [] {
    std::array<std::string_view, models.size()> names{};
    for (std::size_t i = 0; i < models.size(); ++i) names[i] = models[i].name;
    return names;
}();

/// The catalogue entry of `name`, or nullptr.
[[nodiscard]] inline const ModelInfo* find_model(std::string_view name) {
    for (const auto& m : models) {
        if (m.name == name) return &m;
    }
    return nullptr;
}

/// The model names, comma-separated, for help and error messages.
[[nodiscard]] inline std::string joined_model_names() {
    std::string out;
    for (std::string_view name : model_names) {
        if (!out.empty()) out += ", ";
        out += name;
    }
    return out;
}

/// The model's graph; `size` is the image size or sequence length, 0 for the model's usual one
/// (ModelInfo::default_size). nullopt for an unknown name.
[[nodiscard]] inline std::optional<Graph> model(std::string_view name, std::int64_t size = 0) {
    const ModelInfo* m = find_model(name);
    if (!m) return std::nullopt;
    return m->build(size > 0 ? size : m->default_size);
}

}  // namespace roofsim::zoo
