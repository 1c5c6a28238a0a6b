#pragma once
/// Transformer models as Hugging Face transformers builds them with attn_implementation="sdpa":
/// BERT-base for sequence classification and GPT-2 small with its language-model head; and BERT-large
/// for SQuAD as NVIDIA's DeepLearningExamples fine-tunes it. One builder (bert_encoder) makes a BERT
/// encoder of any configuration (BertConfig); the BERT models put their heads on it.

#include <roofsim/graph.hpp>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace roofsim::zoo {

namespace detail {
/// q, k or v: a linear projection viewed as B x L x H x D, then transposed to B x H x L x D (two
/// views: SDPA takes strided inputs), as the exported IRs of both models show.
inline std::string heads_view(GraphBuilder& b, const std::string& name, const std::string& in, std::int64_t heads,
                              std::int64_t seq, std::int64_t head_dim) {
    const std::string viewed = b.layer(name + "_view", "reshape", {in}, {{"shape", std::vector<std::int64_t>{-1, seq, heads, head_dim}}});
    return b.layer(name, "transpose", {viewed}, {{"dim0", std::int64_t{1}}, {"dim1", std::int64_t{2}}});
}

/// The attention core shared by the models: SDPA over q, k, v with the configs' attention dropout
/// (0.1, passed as dropout_p in training), then heads merged back: a transpose and a reshape, both
/// views (the fused attention kernels write their output as B x L x H x D; the exported IRs copy nothing).
inline std::string attention_core(GraphBuilder& b, const std::string& name, const std::string& q, const std::string& k,
                                  const std::string& v, bool causal, std::int64_t seq, std::int64_t hidden,
                                  double dropout_p = 0.1) {
    std::string a = b.layer(name + ".sdpa", "sdpa", {q, k, v},
                            {{"is_causal", causal}, {"backend", std::string("flash")}, {"dropout_p", dropout_p}});
    a = b.layer(name + ".heads_back", "transpose", {a}, {{"dim0", std::int64_t{1}}, {"dim1", std::int64_t{2}}});
    return b.layer(name + ".merge_heads", "reshape", {a}, {{"shape", std::vector<std::int64_t>{-1, seq, hidden}}});
}

/// Attention as DeepLearningExamples' modeling.BertSelfAttention computes it, eagerly: scores =
/// matmul(q, k^T) (k viewed transposed), / sqrt(head_dim), + the additive mask (a float tensor
/// broadcast over heads and query rows: here [1, L], the same bytes), softmax, dropout, matmul with
/// v, then permute(0, 2, 1, 3).contiguous() (a copy) and a view back to B x L x hidden. The B x H x
/// L x L scores are written and read by each step, and the softmax output, the dropout mask and its
/// output are saved for the backward.
inline std::string eager_attention(GraphBuilder& b, const std::string& name, const std::string& q, const std::string& k,
                                   const std::string& v, const std::string& mask, std::int64_t seq, std::int64_t hidden,
                                   std::int64_t head_dim, double dropout_p) {
    const std::string k_t = b.layer(name + ".key_t", "transpose", {k}, {{"dim0", std::int64_t{2}}, {"dim1", std::int64_t{3}}});
    std::string s = b.layer(name + ".scores", "matmul", {q, k_t});
    s = b.layer(name + ".scale", "scale", {s}, {{"factor", 1.0 / std::sqrt(static_cast<double>(head_dim))}});
    s = b.layer(name + ".mask", "add", {s, mask});
    s = b.layer(name + ".softmax", "softmax", {s}, {{"dim", std::int64_t{-1}}});
    s = b.layer(name + ".probs_dropout", "dropout", {s}, {{"p", dropout_p}});
    std::string a = b.layer(name + ".context", "matmul", {s, v});
    a = b.layer(name + ".heads_back", "transpose_contiguous", {a}, {{"dim0", std::int64_t{1}}, {"dim1", std::int64_t{2}}});
    return b.layer(name + ".merge_heads", "reshape", {a}, {{"shape", std::vector<std::int64_t>{-1, seq, hidden}}});
}

inline std::int64_t i64(std::int64_t v) { return v; }

/// An nn.Linear(in_features, out_features) with bias.
inline std::string linear(GraphBuilder& b, const std::string& name, const std::string& in, std::int64_t in_features,
                          std::int64_t out_features) {
    return b.layer(name, "linear", {in}, {{"in_features", in_features}, {"out_features", out_features}});
}
}  // namespace detail

/// A BERT encoder's shape (the BertConfig fields the graph needs). The defaults are BERT-base's.
struct BertConfig {
    std::int64_t layers = 12;           ///< num_hidden_layers
    std::int64_t hidden = 768;          ///< hidden_size
    std::int64_t heads = 12;            ///< num_attention_heads (hidden must be a multiple)
    std::int64_t intermediate = 3072;   ///< intermediate_size (the FFN's inner width, GELU)
    std::int64_t vocab = 30522;         ///< vocab_size
    std::int64_t positions = 512;       ///< max_position_embeddings
    std::int64_t token_types = 2;       ///< type_vocab_size
    double dropout = 0.1;               ///< hidden_dropout_prob and attention_probs_dropout_prob
    /// token_type_ids and position_ids of shape [B, L] (the batch's segment ids; positions
    /// expanded over the batch) rather than [1, L] (transformers' buffers, broadcast over it).
    bool per_sample_ids = false;
    /// Attention written out as DeepLearningExamples' modeling.py computes it (eager_attention)
    /// rather than transformers' fused SDPA; the encoder then takes an additive attention mask.
    bool eager_attention = false;
};

/// BertModel's embeddings and encoder (no pooler), attention as transformers' "sdpa" runs it (no
/// attention mask): declares the inputs input_ids [B, L], token_type_ids and position_ids, adds
/// the layers and returns the name of the last hidden state [B, L, hidden]. A task head goes on top.
inline std::string bert_encoder(GraphBuilder& b, const BertConfig& c, std::int64_t seq) {
    using detail::i64;
    if (c.heads <= 0 || c.hidden % c.heads != 0) {
        throw std::invalid_argument("bert_encoder: hidden " + std::to_string(c.hidden) + " is not a multiple of " +
                                    std::to_string(c.heads) + " heads");
    }
    const std::int64_t hidden = c.hidden, heads = c.heads, head_dim = c.hidden / c.heads, ffn = c.intermediate;
    const Dim id_rows = c.per_sample_ids ? GraphBuilder::batch : Dim(1);
    const std::string ids = b.input("input_ids", {GraphBuilder::batch, seq}, DType::i64);
    const std::string token_types = b.input("token_type_ids", {id_rows, seq}, DType::i64);
    const std::string positions = b.input("position_ids", {id_rows, seq}, DType::i64);
    std::string x = b.layer("embeddings.word", "embedding", {ids}, {{"num_embeddings", c.vocab}, {"embedding_dim", hidden}});
    std::string t = b.layer("embeddings.token_type", "embedding", {token_types}, {{"num_embeddings", c.token_types}, {"embedding_dim", hidden}});
    x = b.layer("embeddings.add_token_type", "add", {x, t});
    std::string p = b.layer("embeddings.position", "embedding", {positions}, {{"num_embeddings", c.positions}, {"embedding_dim", hidden}});
    x = b.layer("embeddings.add_position", "add", {x, p});
    x = b.layer("embeddings.norm", "layernorm", {x}, {{"normalized_shape", std::vector<std::int64_t>{hidden}}});
    x = b.layer("embeddings.dropout", "dropout", {x}, {{"p", c.dropout}});
    const std::string mask = c.eager_attention ? b.input("attention_mask", {1, seq}, DType::f32) : std::string();
    for (std::int64_t i = 0; i < c.layers; ++i) {
        const std::string n = "encoder.layer." + std::to_string(i);
        std::string q = detail::heads_view(b, n + ".attention.q_heads", detail::linear(b, n + ".attention.query", x, hidden, hidden), heads, seq, head_dim);
        std::string k = detail::heads_view(b, n + ".attention.k_heads", detail::linear(b, n + ".attention.key", x, hidden, hidden), heads, seq, head_dim);
        std::string v = detail::heads_view(b, n + ".attention.v_heads", detail::linear(b, n + ".attention.value", x, hidden, hidden), heads, seq, head_dim);
        std::string a = c.eager_attention ? detail::eager_attention(b, n + ".attention", q, k, v, mask, seq, hidden, head_dim, c.dropout)
                                          : detail::attention_core(b, n + ".attention", q, k, v, false, seq, hidden, c.dropout);
        a = detail::linear(b, n + ".attention.output.dense", a, hidden, hidden);
        a = b.layer(n + ".attention.output.dropout", "dropout", {a}, {{"p", c.dropout}});
        a = b.layer(n + ".attention.output.add", "add", {a, x});
        x = b.layer(n + ".attention.output.norm", "layernorm", {a}, {{"normalized_shape", std::vector<std::int64_t>{hidden}}});
        std::string h = detail::linear(b, n + ".intermediate.dense", x, hidden, ffn);
        h = b.layer(n + ".intermediate.gelu", "gelu", {h});
        h = detail::linear(b, n + ".output.dense", h, ffn, hidden);
        h = b.layer(n + ".output.dropout", "dropout", {h}, {{"p", c.dropout}});
        h = b.layer(n + ".output.add", "add", {h, x});
        x = b.layer(n + ".output.norm", "layernorm", {h}, {{"normalized_shape", std::vector<std::int64_t>{hidden}}});
    }
    return x;
}

/// BertForSequenceClassification(BertConfig(num_labels=2)): 12 layers, hidden 768, 12 heads,
/// intermediate 3072, vocabulary 30522, no attention mask, dropout 0.1, loss over 2 labels.
[[nodiscard]] inline Graph bert_base(std::int64_t seq = 128) {
    using detail::i64;
    const BertConfig c;  // BERT-base
    GraphBuilder b("bert-base");
    std::string x = bert_encoder(b, c, seq);
    const std::string labels = b.input("labels", {GraphBuilder::batch}, DType::i64);
    std::string cls = b.layer("pooler.first_token", "slice", {x}, {{"dim", i64(1)}, {"start", i64(0)}, {"length", i64(1)}});
    cls = b.layer("pooler.squeeze", "reshape", {cls}, {{"shape", std::vector<std::int64_t>{-1, c.hidden}}});
    cls = b.layer("pooler.dense", "linear", {cls}, {{"in_features", c.hidden}, {"out_features", c.hidden}});
    cls = b.layer("pooler.tanh", "tanh", {cls});
    cls = b.layer("dropout", "dropout", {cls}, {{"p", c.dropout}});
    cls = b.layer("classifier", "linear", {cls}, {{"in_features", c.hidden}, {"out_features", i64(2)}});
    b.layer("loss", "cross_entropy", {cls, labels});
    return std::move(b).build();
}

/// BERT-large fine-tuned on SQuAD v1.1 as NVIDIA DeepLearningExamples' PyTorch/LanguageModeling/BERT
/// run_squad.py trains it: modeling.BertForQuestionAnswering over BERT-large's config, 24 layers,
/// hidden 1024, 16 heads (head dim 64), intermediate 4096, GELU, dropout 0.1, 512 positions, 2 token
/// types. Vocabulary 30528: run_squad.py pads the config's 30522 up to a multiple of 8 ("Padding for
/// divisibility by 8", as DeepLearningExamples' pretraining does, whose checkpoint it loads).
/// token_type_ids are the batch's segment ids and position_ids arange(L) expanded over the batch,
/// both [B, L]. Sequence length 384: scripts/run_squad.sh's --max_seq_length.
/// Head: qa_outputs = Linear(1024, 2) over every position (no dropout before it), logits [B, L, 2]
/// split into start and end logits ([B, L] each: a slice of length 1 on dim 2, then a view that
/// squeezes it), and the loss (CrossEntropy(start, start_positions) + CrossEntropy(end,
/// end_positions)) / 2 with start/end positions [B] int64.
///
/// Trainable parameters: 334,100,482 (embeddings 30528 x 1024 + 512 x 1024 + 2 x 1024 + layer norm;
/// 24 layers of 12,596,224; qa_outputs 2,050), in 391 tensors (embeddings 5, 16 per layer, qa 2).
/// With the unpadded vocabulary of 30522 (Hugging Face's BertForQuestionAnswering, which builds no
/// pooler) that is 6 x 1024 fewer: 334,094,338, by the same formula.
///
/// What the graph leaves out or models differently from DeepLearningExamples' step:
/// - the final `/ 2`: no graph op multiplies by a scalar (`mul` takes two tensors), so the loss is
///   the sum of the two cross entropies (one tiny division kernel forward and one backward missing);
/// - `start_positions.clamp_(0, L)` and `end_positions.clamp_(0, L)` (two tiny in-place kernels on
///   [B]; the graph has no clamp op) and CrossEntropyLoss's ignore_index (costs the same);
/// - the additive attention mask is [1, L] where modeling.py broadcasts a [B, 1, 1, L] one into the
///   scores (the same bytes; its computation from the input mask, a few kernels on [B, L], is left out);
/// - modeling.BertModel builds a pooler (1024 x 1024 + 1024) and runs its forward, whose output the
///   QA head ignores: run_squad.py keeps it out of the optimizer and it gets no gradient, so it is
///   not built here (its one small forward GEMM and tanh are left out). DeepLearningExamples'
///   logged "model_weights_num" counts it: 335,150,082;
/// - the fused bias + GELU (LinearActivation, a TorchScript bias_gelu) is a linear then a gelu;
/// - split's backward (one kernel writing both halves' gradients in PyTorch) is each slice's own
///   backward, on tensors of B x L x 2 elements.
[[nodiscard]] inline Graph bert_large_squad(std::int64_t seq = 384) {
    using detail::i64;
    BertConfig c;
    c.layers = 24;
    c.hidden = 1024;
    c.heads = 16;
    c.intermediate = 4096;
    c.vocab = 30528;  // 30522 padded to a multiple of 8 by run_squad.py
    c.per_sample_ids = true;
    c.eager_attention = true;  // modeling.BertSelfAttention: matmul, scale, mask, softmax, dropout, matmul
    GraphBuilder b("bert-large-squad");
    const std::string x = bert_encoder(b, c, seq);
    const std::string start_positions = b.input("start_positions", {GraphBuilder::batch}, DType::i64);
    const std::string end_positions = b.input("end_positions", {GraphBuilder::batch}, DType::i64);
    const std::string logits = detail::linear(b, "qa_outputs", x, c.hidden, 2);  // [B, L, 2]
    // logits.split(1, dim=-1), then squeeze(-1): a slice and a view each
    std::string start = b.layer("qa_outputs.start", "slice", {logits}, {{"dim", i64(2)}, {"start", i64(0)}, {"length", i64(1)}});
    start = b.layer("start_logits", "reshape", {start}, {{"shape", std::vector<std::int64_t>{-1, seq}}});
    std::string end = b.layer("qa_outputs.end", "slice", {logits}, {{"dim", i64(2)}, {"start", i64(1)}, {"length", i64(1)}});
    end = b.layer("end_logits", "reshape", {end}, {{"shape", std::vector<std::int64_t>{-1, seq}}});
    const std::string start_loss = b.layer("start_loss", "cross_entropy", {start, start_positions});
    const std::string end_loss = b.layer("end_loss", "cross_entropy", {end, end_positions});
    b.layer("loss", "add", {start_loss, end_loss});  // (start_loss + end_loss), the / 2 left out (above)
    return std::move(b).build();
}

/// A GPT-2's shape (the GPT2Config fields the graph needs). The defaults are GPT-2 small's.
struct Gpt2Config {
    std::int64_t layers = 12, hidden = 768, heads = 12, vocab = 50257, positions = 1024;
};

/// GPT2LMHeadModel(config): "gelu_new" written out in Python, dropout 0.1, the LM head tied to the
/// token embedding, and the next-token loss computed in float32 over every position.
[[nodiscard]] inline Graph gpt2(const std::string& name, const Gpt2Config& c, std::int64_t seq) {
    using detail::i64;
    const std::int64_t hidden = c.hidden, heads = c.heads, head_dim = c.hidden / c.heads, layers = c.layers, vocab = c.vocab;
    GraphBuilder b(name);
    const std::string ids = b.input("input_ids", {GraphBuilder::batch, seq}, DType::i64);
    const std::string positions = b.input("position_ids", {1, seq}, DType::i64);
    const std::string labels = b.input("labels", {GraphBuilder::batch, seq}, DType::i64);
    std::string x = b.layer("wte", "embedding", {ids}, {{"num_embeddings", vocab}, {"embedding_dim", hidden}});
    std::string p = b.layer("wpe", "embedding", {positions}, {{"num_embeddings", c.positions}, {"embedding_dim", hidden}});
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

/// GPT2LMHeadModel(GPT2Config()): 12 layers, 768 wide, 12 heads, vocabulary 50257, 1024 positions.
[[nodiscard]] inline Graph gpt2_small(std::int64_t seq = 1024) { return gpt2("gpt2-small", Gpt2Config{}, seq); }

/// GPT-2 medium (Hugging Face's gpt2-medium config): 24 layers, 1024 wide, 16 heads.
[[nodiscard]] inline Graph gpt2_medium(std::int64_t seq = 1024) { return gpt2("gpt2-medium", Gpt2Config{24, 1024, 16, 50257, 1024}, seq); }

}  // namespace roofsim::zoo
