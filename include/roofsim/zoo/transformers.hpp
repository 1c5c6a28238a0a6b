#pragma once
/// Transformer models as Hugging Face transformers builds them with attn_implementation="sdpa":
/// BERT-base for sequence classification and GPT-2 small with its language-model head.

#include <roofsim/graph.hpp>

#include <string>

namespace roofsim::zoo {

namespace detail {
/// q, k or v: a linear projection viewed as B x L x H x D, then transposed to B x H x L x D (two
/// views: SDPA takes strided inputs), as the exported IRs of both models show.
inline std::string heads_view(GraphBuilder& b, const std::string& name, const std::string& in, std::int64_t heads,
                              std::int64_t seq, std::int64_t head_dim) {
    const std::string viewed = b.layer(name + "_view", "reshape", {in}, {{"shape", std::vector<std::int64_t>{-1, seq, heads, head_dim}}});
    return b.layer(name, "transpose", {viewed}, {{"dim0", std::int64_t{1}}, {"dim1", std::int64_t{2}}});
}

/// The attention core shared by both models: SDPA over q, k, v with the configs' attention dropout
/// (0.1, passed as dropout_p in training), then heads merged back: a transpose and a reshape, both
/// views (the fused attention kernels write their output as B x L x H x D; the exported IRs copy nothing).
inline std::string attention_core(GraphBuilder& b, const std::string& name, const std::string& q, const std::string& k,
                                  const std::string& v, bool causal, std::int64_t seq, std::int64_t hidden) {
    std::string a = b.layer(name + ".sdpa", "sdpa", {q, k, v},
                            {{"is_causal", causal}, {"backend", std::string("flash")}, {"dropout_p", 0.1}});
    a = b.layer(name + ".heads_back", "transpose", {a}, {{"dim0", std::int64_t{1}}, {"dim1", std::int64_t{2}}});
    return b.layer(name + ".merge_heads", "reshape", {a}, {{"shape", std::vector<std::int64_t>{-1, seq, hidden}}});
}

inline std::int64_t i64(std::int64_t v) { return v; }

/// An nn.Linear(in_features, out_features) with bias.
inline std::string linear(GraphBuilder& b, const std::string& name, const std::string& in, std::int64_t in_features,
                          std::int64_t out_features) {
    return b.layer(name, "linear", {in}, {{"in_features", in_features}, {"out_features", out_features}});
}
}  // namespace detail

/// BertForSequenceClassification(BertConfig(num_labels=2)): 12 layers, hidden 768, 12 heads,
/// intermediate 3072, vocabulary 30522, no attention mask, dropout 0.1, loss over 2 labels.
[[nodiscard]] inline Graph bert_base(std::int64_t seq = 128) {
    using detail::i64;
    const std::int64_t hidden = 768, heads = 12, head_dim = 64, ffn = 3072, layers = 12;
    GraphBuilder b("bert-base");
    const std::string ids = b.input("input_ids", {GraphBuilder::batch, seq}, DType::i64);
    const std::string token_types = b.input("token_type_ids", {1, seq}, DType::i64);
    const std::string positions = b.input("position_ids", {1, seq}, DType::i64);
    const std::string labels = b.input("labels", {GraphBuilder::batch}, DType::i64);
    std::string x = b.layer("embeddings.word", "embedding", {ids}, {{"num_embeddings", i64(30522)}, {"embedding_dim", hidden}});
    std::string t = b.layer("embeddings.token_type", "embedding", {token_types}, {{"num_embeddings", i64(2)}, {"embedding_dim", hidden}});
    x = b.layer("embeddings.add_token_type", "add", {x, t});
    std::string p = b.layer("embeddings.position", "embedding", {positions}, {{"num_embeddings", i64(512)}, {"embedding_dim", hidden}});
    x = b.layer("embeddings.add_position", "add", {x, p});
    x = b.layer("embeddings.norm", "layernorm", {x}, {{"normalized_shape", std::vector<std::int64_t>{hidden}}});
    x = b.layer("embeddings.dropout", "dropout", {x}, {{"p", 0.1}});
    for (std::int64_t i = 0; i < layers; ++i) {
        const std::string n = "encoder.layer." + std::to_string(i);
        std::string q = detail::heads_view(b, n + ".attention.q_heads", detail::linear(b, n + ".attention.query", x, hidden, hidden), heads, seq, head_dim);
        std::string k = detail::heads_view(b, n + ".attention.k_heads", detail::linear(b, n + ".attention.key", x, hidden, hidden), heads, seq, head_dim);
        std::string v = detail::heads_view(b, n + ".attention.v_heads", detail::linear(b, n + ".attention.value", x, hidden, hidden), heads, seq, head_dim);
        std::string a = detail::attention_core(b, n + ".attention", q, k, v, false, seq, hidden);
        a = detail::linear(b, n + ".attention.output.dense", a, hidden, hidden);
        a = b.layer(n + ".attention.output.dropout", "dropout", {a}, {{"p", 0.1}});
        a = b.layer(n + ".attention.output.add", "add", {a, x});
        x = b.layer(n + ".attention.output.norm", "layernorm", {a}, {{"normalized_shape", std::vector<std::int64_t>{hidden}}});
        std::string h = detail::linear(b, n + ".intermediate.dense", x, hidden, ffn);
        h = b.layer(n + ".intermediate.gelu", "gelu", {h});
        h = detail::linear(b, n + ".output.dense", h, ffn, hidden);
        h = b.layer(n + ".output.dropout", "dropout", {h}, {{"p", 0.1}});
        h = b.layer(n + ".output.add", "add", {h, x});
        x = b.layer(n + ".output.norm", "layernorm", {h}, {{"normalized_shape", std::vector<std::int64_t>{hidden}}});
    }
    std::string cls = b.layer("pooler.first_token", "slice", {x}, {{"dim", i64(1)}, {"start", i64(0)}, {"length", i64(1)}});
    cls = b.layer("pooler.squeeze", "reshape", {cls}, {{"shape", std::vector<std::int64_t>{-1, hidden}}});
    cls = b.layer("pooler.dense", "linear", {cls}, {{"in_features", hidden}, {"out_features", hidden}});
    cls = b.layer("pooler.tanh", "tanh", {cls});
    cls = b.layer("dropout", "dropout", {cls}, {{"p", 0.1}});
    cls = b.layer("classifier", "linear", {cls}, {{"in_features", hidden}, {"out_features", i64(2)}});
    b.layer("loss", "cross_entropy", {cls, labels});
    return std::move(b).build();
}

/// GPT2LMHeadModel(GPT2Config()): 12 layers, 768 wide, 12 heads, vocabulary 50257, 1024 positions,
/// "gelu_new" written out in Python, dropout 0.1, the LM head tied to the token embedding, and the
/// next-token loss computed in float32 over every position.
[[nodiscard]] inline Graph gpt2_small(std::int64_t seq = 1024) {
    using detail::i64;
    const std::int64_t hidden = 768, heads = 12, head_dim = 64, layers = 12, vocab = 50257;
    GraphBuilder b("gpt2-small");
    const std::string ids = b.input("input_ids", {GraphBuilder::batch, seq}, DType::i64);
    const std::string positions = b.input("position_ids", {1, seq}, DType::i64);
    const std::string labels = b.input("labels", {GraphBuilder::batch, seq}, DType::i64);
    std::string x = b.layer("wte", "embedding", {ids}, {{"num_embeddings", vocab}, {"embedding_dim", hidden}});
    std::string p = b.layer("wpe", "embedding", {positions}, {{"num_embeddings", i64(1024)}, {"embedding_dim", hidden}});
    x = b.layer("add_positions", "add", {x, p});
    x = b.layer("drop", "dropout", {x}, {{"p", 0.1}});
    for (std::int64_t i = 0; i < layers; ++i) {
        const std::string n = "h." + std::to_string(i);
        std::string a = b.layer(n + ".ln_1", "layernorm", {x}, {{"normalized_shape", std::vector<std::int64_t>{hidden}}});
        a = detail::linear(b, n + ".attn.c_attn", a, hidden, 3 * hidden);
        auto part = [&](const char* which, std::int64_t index) {
            std::string s = b.layer(n + ".attn." + which, "slice", {a}, {{"dim", i64(2)}, {"start", index * hidden}, {"length", hidden}});
            return detail::heads_view(b, n + ".attn." + which + "_heads", s, heads, seq, head_dim);
        };
        std::string q = part("q", 0), k = part("k", 1), v = part("v", 2);
        a = detail::attention_core(b, n + ".attn", q, k, v, true, seq, hidden);
        a = detail::linear(b, n + ".attn.c_proj", a, hidden, hidden);
        a = b.layer(n + ".attn.resid_dropout", "dropout", {a}, {{"p", 0.1}});
        x = b.layer(n + ".add_attn", "add", {a, x});
        std::string h = b.layer(n + ".ln_2", "layernorm", {x}, {{"normalized_shape", std::vector<std::int64_t>{hidden}}});
        h = detail::linear(b, n + ".mlp.c_fc", h, hidden, 4 * hidden);
        h = b.layer(n + ".mlp.act", "gelu_tanh_composite", {h});
        h = detail::linear(b, n + ".mlp.c_proj", h, 4 * hidden, hidden);
        h = b.layer(n + ".mlp.dropout", "dropout", {h}, {{"p", 0.1}});
        x = b.layer(n + ".add_mlp", "add", {h, x});
    }
    x = b.layer("ln_f", "layernorm", {x}, {{"normalized_shape", std::vector<std::int64_t>{hidden}}});
    x = b.layer("lm_head", "linear", {x}, {{"in_features", hidden}, {"out_features", vocab}, {"bias", false}, {"tied", true}});
    x = b.layer("logits_rows", "reshape", {x}, {{"shape", std::vector<std::int64_t>{-1, vocab}}});
    const std::string targets = b.layer("labels_rows", "reshape", {labels}, {{"shape", std::vector<std::int64_t>{-1}}});
    b.layer("loss", "cross_entropy", {x, targets});
    return std::move(b).build();
}

}  // namespace roofsim::zoo
