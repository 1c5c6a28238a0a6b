// The built-in models: each name builds, the BERT models' parameters against the architecture's
// formula (counted here, independently of the graph builder), BERT-large for SQuAD's head and loss.
#include "catch.hpp"

#include <roofsim/lower/lower.hpp>
#include <roofsim/zoo/zoo.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

using namespace roofsim;

namespace {
/// The trainable parameters of a BERT encoder (embeddings and layers, no pooler), from its shape:
/// each nn.Linear(in, out) has in x out weights and out biases, each LayerNorm(h) h weights and h biases.
double bert_encoder_parameters(double layers, double hidden, double intermediate, double vocab, double positions,
                               double token_types) {
    const double layer_norm = 2 * hidden;
    const double embeddings = vocab * hidden + positions * hidden + token_types * hidden + layer_norm;
    const double attention = 4 * (hidden * hidden + hidden);  // query, key, value, attention output dense
    const double ffn = (hidden * intermediate + intermediate) + (intermediate * hidden + hidden);
    return embeddings + layers * (attention + ffn + 2 * layer_norm);
}

LoweringOptions batch_of(std::int64_t batch) {
    LoweringOptions o;
    o.batch = batch;
    return o;
}

double step_flops(const Graph& g, std::int64_t batch) {
    double flops = 0;
    for (const auto& k : lower(g, batch_of(batch)).kernels.kernels) flops += k.flops.value();
    return flops;
}

const Layer* find_layer(const Graph& g, const std::string& name) {
    for (const auto& l : g.layers) {
        if (l.name == name) return &l;
    }
    return nullptr;
}
}  // namespace

TEST_CASE("every built-in model builds and lowers; an unknown name is nullopt", "[zoo]") {
    for (const auto name : zoo::model_names) {
        INFO(std::string(name));
        const auto g = zoo::model(name);
        REQUIRE(g.has_value());
        CHECK(g->name == std::string(name));
        const LoweredStep s = lower(*g, batch_of(2));
        CHECK(s.parameter_count() > 0);
        CHECK_FALSE(s.kernels.kernels.empty());
        CHECK(zoo::joined_model_names().find(std::string(name)) != std::string::npos);
    }
    CHECK_FALSE(zoo::model("nope").has_value());
    CHECK_FALSE(zoo::model("").has_value());
    CHECK(zoo::joined_model_names() == "resnet50, bert-base, gpt2-small, bert-large-squad, gpt2-medium, vgg16");
}

TEST_CASE("bert-large-squad: parameters of BERT-large with run_squad.py's padded vocabulary and the QA head", "[zoo]") {
    // 24 layers, hidden 1024, intermediate 4096, vocabulary 30522 padded to 30528, 512 positions, 2
    // token types; qa_outputs Linear(1024, 2). No pooler.
    const double expected = bert_encoder_parameters(24, 1024, 4096, 30528, 512, 2) + (1024 * 2 + 2);
    CHECK(expected == 334100482.0);  // the formula, worked by hand: 31,789,056 + 24 x 12,596,224 + 2,050
    const auto g = zoo::model("bert-large-squad");
    REQUIRE(g.has_value());
    const LoweredStep s = lower(*g, batch_of(2));
    CHECK(s.parameter_count() == expected);
    // one tensor per nn.Parameter: embeddings 5 (word, position, token type, layer norm weight and
    // bias); each layer 16 (query, key, value, attention output, intermediate and output dense weight
    // and bias: 12; two layer norms' weight and bias: 4); qa_outputs weight and bias 2
    CHECK(s.parameter_tensors.size() == std::size_t{5 + 24 * 16 + 2});
    CHECK(s.parameter_tensors.size() == 391);
    // the parameters do not depend on the sequence length or the batch
    CHECK(lower(*zoo::model("bert-large-squad", 128), batch_of(8)).parameter_count() == expected);
}

TEST_CASE("bert-large-squad: the sequence length is the model's size, 384 by default", "[zoo]") {
    const double at_384 = step_flops(*zoo::model("bert-large-squad"), 2);
    CHECK(at_384 == step_flops(zoo::bert_large_squad(384), 2));
    CHECK(at_384 == step_flops(*zoo::model("bert-large-squad", 384), 2));
    const double at_128 = step_flops(*zoo::model("bert-large-squad", 128), 2);
    CHECK(at_128 > 0);
    CHECK(at_128 != at_384);
    CHECK(at_128 < at_384);
    // the GEMMs alone grow linearly with the tokens: three times the sequence, more than twice the FLOPs
    CHECK(at_384 > 2 * at_128);
}

TEST_CASE("bert-large-squad: start and end logits [B, L] from qa_outputs [B, L, 2], two cross entropies added", "[zoo]") {
    const std::int64_t seq = 384, batch = 3;
    const Graph g = zoo::bert_large_squad(seq);
    REQUIRE(g.layers.size() > 2);
    CHECK(find_layer(g, "pooler.dense") == nullptr);  // BertForQuestionAnswering has no pooler
    CHECK(find_layer(g, "encoder.layer.23.output.norm") != nullptr);
    CHECK(find_layer(g, "encoder.layer.24.output.norm") == nullptr);
    const Layer* qa = find_layer(g, "qa_outputs");
    REQUIRE(qa != nullptr);
    CHECK(qa->op == "linear");
    CHECK(std::get<std::int64_t>(qa->attrs.at("in_features")) == 1024);
    CHECK(std::get<std::int64_t>(qa->attrs.at("out_features")) == 2);
    const Layer& loss = g.layers.back();
    CHECK(loss.name == "loss");
    CHECK(loss.op == "add");
    CHECK(loss.inputs == std::vector<std::string>{"start_loss", "end_loss"});
    for (const char* name : {"start_loss", "end_loss"}) {
        const Layer* l = find_layer(g, name);
        REQUIRE(l != nullptr);
        CHECK(l->op == "cross_entropy");
    }
    CHECK(find_layer(g, "start_loss")->inputs == std::vector<std::string>{"start_logits", "start_positions"});
    CHECK(find_layer(g, "end_loss")->inputs == std::vector<std::string>{"end_logits", "end_positions"});

    // shapes after lowering, by layer name
    const LoweredStep s = lower(g, batch_of(batch));
    const auto shape_of = [&](const std::string& name) {
        for (const auto& l : s.layers) {
            if (l.name == name) return l.output_shape;
        }
        return std::vector<std::int64_t>{};
    };
    CHECK(shape_of("qa_outputs") == std::vector<std::int64_t>{batch, seq, 2});
    CHECK(shape_of("qa_outputs.start") == std::vector<std::int64_t>{batch, seq, 1});
    CHECK(shape_of("start_logits") == std::vector<std::int64_t>{batch, seq});
    CHECK(shape_of("end_logits") == std::vector<std::int64_t>{batch, seq});
    CHECK(shape_of("embeddings.word") == std::vector<std::int64_t>{batch, seq, 1024});
    // run_squad.py feeds segment ids per sample and expands the positions over the batch
    CHECK(shape_of("embeddings.token_type") == std::vector<std::int64_t>{batch, seq, 1024});
    CHECK(shape_of("embeddings.position") == std::vector<std::int64_t>{batch, seq, 1024});
    CHECK(shape_of("encoder.layer.0.attention.q_heads") == std::vector<std::int64_t>{batch, 16, seq, 64});
    CHECK(shape_of("encoder.layer.0.intermediate.dense") == std::vector<std::int64_t>{batch, seq, 4096});
    CHECK(shape_of("loss") == std::vector<std::int64_t>{1});
}

TEST_CASE("bert-base is unchanged by the shared BERT builder", "[zoo]") {
    // BertForSequenceClassification(num_labels=2): the encoder (12 layers, 768 wide, intermediate
    // 3072, vocabulary 30522, 512 positions, 2 token types), the pooler Linear(768, 768) and the
    // classifier Linear(768, 2)
    const double expected = bert_encoder_parameters(12, 768, 3072, 30522, 512, 2) + (768 * 768 + 768) + (768 * 2 + 2);
    CHECK(expected == 109483778.0);
    const Graph g = *zoo::model("bert-base");
    CHECK(lower(g, batch_of(2)).parameter_count() == expected);
    CHECK(lower(g, batch_of(2)).parameter_tensors.size() == 201);
    CHECK(find_layer(g, "pooler.dense") != nullptr);
    CHECK(g.layers.back().name == "loss");
    CHECK(g.layers.back().op == "cross_entropy");
    // the transformers buffers: token types and positions [1, L], broadcast over the batch
    REQUIRE(g.inputs.size() == 4);
    CHECK(g.inputs[1].name == "token_type_ids");
    CHECK(g.inputs[1].shape == std::vector<Dim>{Dim(1), Dim(128)});
    CHECK(g.inputs[2].name == "position_ids");
    CHECK(g.inputs[2].shape == std::vector<Dim>{Dim(1), Dim(128)});
    CHECK(g.inputs[3].name == "labels");
}

TEST_CASE("the BERT builder refuses a width that the heads do not divide", "[zoo]") {
    zoo::BertConfig c;
    c.hidden = 1000;
    c.heads = 16;
    GraphBuilder b("bad");
    CHECK_THROWS_AS(zoo::bert_encoder(b, c, 16), std::invalid_argument);
}

TEST_CASE("GPT-2 medium: the parameters of Hugging Face's gpt2-medium, counted from its configuration", "[zoo]") {
    // GPT2LMHeadModel, n_layer 24, n_embd d = 1024, vocabulary V = 50257, n_positions P = 1024, the LM
    // head tied: V d + P d + per layer (two layer norms 4d, c_attn d x 3d + 3d, attn c_proj d x d + d,
    // mlp c_fc d x 4d + 4d, mlp c_proj 4d x d + d) + ln_f 2d
    const std::int64_t d = 1024, layers = 24, vocab = 50257, positions = 1024;
    const std::int64_t per_layer = 4 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d);
    const std::int64_t expected = vocab * d + positions * d + layers * per_layer + 2 * d;
    CHECK(expected == 354823168);  // the count transformers reports for gpt2-medium
    const LoweredStep s = lower(*zoo::model("gpt2-medium"), batch_of(1));
    CHECK(static_cast<std::int64_t>(s.parameter_count()) == expected);
    CHECK(zoo::find_model("gpt2-medium")->default_size == 1024);
    CHECK(zoo::find_model("vgg19") == nullptr);
}
