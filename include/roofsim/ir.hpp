#pragma once
/// The kernel IR: what the GPU runs for one training step, as a flat list of kernels in issue order.
/// Each kernel has a kind, the shapes its cost model needs, its dtype and compute unit, the phase
/// (forward, backward, optimizer) and the layer that owns it. Layer graphs are lowered into it
/// (graph.hpp) and the PyTorch exporter writes it (docs/ir-format.md); the cost models read it.

#include <roofsim/detail/checked.hpp>
#include <roofsim/name.hpp>
#include <roofsim/compute_unit.hpp>
#include <roofsim/dtype.hpp>
#include <roofsim/precision_mode.hpp>
#include <roofsim/step_mode.hpp>
#include <roofsim/units.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace roofsim {

/// Which part of the training step a kernel belongs to.
enum class Phase { forward, backward, optimizer };

[[nodiscard]] constexpr std::string_view to_string(Phase p) {
    switch (p) {
        case Phase::forward: return "forward";
        case Phase::backward: return "backward";
        case Phase::optimizer: return "optimizer";
    }
    return "?";
}

[[nodiscard]] inline std::optional<Phase> phase_from_key(std::string_view key) {
    for (Phase p : {Phase::forward, Phase::backward, Phase::optimizer}) {
        if (to_string(p) == key) return p;
    }
    return std::nullopt;
}

/// What kind of GPU work a kernel is; selects its cost model.
enum class KernelKind {
    gemm,           ///< (batched) matrix multiply: cuBLAS
    conv,           ///< convolution forward / backward-data / backward-filter: cuDNN
    attention,      ///< fused scaled-dot-product attention (flash / memory-efficient)
    elementwise,    ///< one pass over its operands: activations, add, mul, casts, dropout
    reduction,      ///< sums and norms over one or more dimensions (bias gradients, losses)
    normalization,  ///< batch/layer/group/RMS norm (statistics + normalize)
    softmax,        ///< softmax / log-softmax along a dimension
    embedding,      ///< gather (forward) or scatter-add (backward) of rows
    copy,           ///< contiguous copies: transpose().contiguous(), cat, layout changes
    optimizer,      ///< a (multi-tensor) optimizer update
    host_only,      ///< an op the host dispatches that launches no kernel (views, reshapes)
    unknown,        ///< an op with no cost model: kept with its shapes and flagged, never counted as zero
    collective,     ///< an NCCL collective (DDP's gradient all-reduce), on the communication stream
};

inline constexpr std::array<KernelKind, 13> all_kernel_kinds = {
    KernelKind::gemm,      KernelKind::conv,    KernelKind::attention, KernelKind::elementwise,
    KernelKind::reduction, KernelKind::normalization, KernelKind::softmax, KernelKind::embedding,
    KernelKind::copy,      KernelKind::optimizer, KernelKind::host_only, KernelKind::unknown,
    KernelKind::collective};

[[nodiscard]] constexpr std::string_view to_string(KernelKind k) {
    switch (k) {
        case KernelKind::gemm: return "gemm";
        case KernelKind::conv: return "conv";
        case KernelKind::attention: return "attention";
        case KernelKind::elementwise: return "elementwise";
        case KernelKind::reduction: return "reduction";
        case KernelKind::normalization: return "normalization";
        case KernelKind::softmax: return "softmax";
        case KernelKind::embedding: return "embedding";
        case KernelKind::copy: return "copy";
        case KernelKind::optimizer: return "optimizer";
        case KernelKind::host_only: return "host-only";
        case KernelKind::unknown: return "unknown";
        case KernelKind::collective: return "collective";
    }
    return "?";
}

[[nodiscard]] inline std::optional<KernelKind> kernel_kind_from_key(std::string_view key) {
    for (KernelKind k : all_kernel_kinds) {
        if (to_string(k) == key) return k;
    }
    return std::nullopt;
}

/// How a GEMM's operands are stored, in row-major (PyTorch) terms, A then B: N as used, T a transposed
/// view (a weight's .t()). A linear's forward is nt, its input gradient nn, its weight gradient tn.
/// cuBLAS, column-major, sees the product transposed: its op(A) op(B) is this layout read backwards.
enum class GemmLayout : std::uint8_t { unknown, nn, nt, tn, tt };

[[nodiscard]] constexpr std::string_view to_string(GemmLayout l) {
    switch (l) {
        case GemmLayout::nn: return "NN";
        case GemmLayout::nt: return "NT";
        case GemmLayout::tn: return "TN";
        case GemmLayout::tt: return "TT";
        case GemmLayout::unknown: break;
    }
    return "";
}

/// "NN", "NT", "TN" or "TT" (row-major terms); nullopt for anything else.
[[nodiscard]] inline std::optional<GemmLayout> gemm_layout_from_key(std::string_view key) {
    for (GemmLayout l : {GemmLayout::nn, GemmLayout::nt, GemmLayout::tn, GemmLayout::tt}) {
        if (to_string(l) == key) return l;
    }
    return std::nullopt;
}

/// The row-major layout of a cuBLAS call whose op(A) op(B) is `cublas` ("TN" -> nt): C = A B
/// row-major is C^T = B^T A^T column-major, the operands swapped.
[[nodiscard]] inline std::optional<GemmLayout> gemm_layout_from_cublas(std::string_view cublas) {
    if (cublas.size() != 2) return std::nullopt;
    const char reversed[2] = {cublas[1], cublas[0]};
    return gemm_layout_from_key(std::string_view(reversed, 2));
}

/// C[batch] (m x n) = A[batch] (m x k) · B[batch] (k x n).
struct GemmDims {
    std::int64_t m = 0, n = 0, k = 0;
    std::int64_t batch = 1;
    GemmLayout layout = GemmLayout::unknown;  ///< how A and B are stored (unknown: not said)

    friend bool operator==(const GemmDims&, const GemmDims&) = default;
};

/// Which convolution pass.
enum class ConvPass { forward, backward_data, backward_filter };

[[nodiscard]] constexpr std::string_view to_string(ConvPass p) {
    switch (p) {
        case ConvPass::forward: return "forward";
        case ConvPass::backward_data: return "backward-data";
        case ConvPass::backward_filter: return "backward-filter";
    }
    return "?";
}

[[nodiscard]] inline std::optional<ConvPass> conv_pass_from_key(std::string_view k) {
    for (ConvPass p : {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_filter}) {
        if (to_string(p) == k) return p;
    }
    return std::nullopt;
}

/// A 2-D convolution (1-D is h = r = 1): input N x C x H x W, filter K x C/groups x R x S.
struct ConvDims {
    ConvPass pass = ConvPass::forward;
    std::int64_t n = 0, c = 0, h = 0, w = 0, k = 0, r = 1, s = 1;
    std::int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
    std::int64_t groups = 1;

    /// Output size along one axis: (in + 2 pad - dilation (kernel - 1) - 1) / stride + 1 (PyTorch
    /// Conv2d docs), or nullopt where a step of it overflows int64 (PyTorch's sizes are int64).
    [[nodiscard]] static constexpr std::optional<std::int64_t> output_size(std::int64_t in, std::int64_t pad, std::int64_t dilation,
                                                                         std::int64_t kernel, std::int64_t stride) {
        using detail::checked_add, detail::checked_mul, detail::checked_sub;
        const auto two_pad = checked_mul(2, pad);
        const auto padded = two_pad ? checked_add(in, *two_pad) : std::nullopt;
        const auto taps = checked_sub(kernel, 1);
        const auto reach = taps ? checked_mul(dilation, *taps) : std::nullopt;
        const auto span = padded && reach ? checked_sub(*padded, *reach) : std::nullopt;
        const auto last = span ? checked_sub(*span, 1) : std::nullopt;
        if (!last || stride <= 0) return std::nullopt;
        return checked_add(*last / stride, 1);
    }
    /// Output height (std::overflow_error where int64 cannot hold it: the loaders refuse such a shape first).
    [[nodiscard]] std::int64_t p() const {
        return detail::value_or_overflow(output_size(h, pad_h, dilation_h, r, stride_h), "convolution output height");
    }
    /// Output width, likewise.
    [[nodiscard]] std::int64_t q() const {
        return detail::value_or_overflow(output_size(w, pad_w, dilation_w, s, stride_w), "convolution output width");
    }

    friend bool operator==(const ConvDims&, const ConvDims&) = default;
};

/// The kind of kernel a convolution gets: a depthwise one (groups = channels > 1) runs PyTorch's own
/// kernels; a pointwise one (1 x 1, stride 1, no padding, one group) is a plain GEMM that cuDNN runs on
/// NCHW tensors as they are; a general one takes cuDNN's implicit-GEMM engines (on NCHW 16-bit and TF32
/// tensors with NHWC transposes around them: docs/NOTES.md, "Kernel models").
enum class ConvClass { general, pointwise, depthwise };

[[nodiscard]] constexpr std::string_view to_string(ConvClass c) {
    switch (c) {
        case ConvClass::general: return "general";
        case ConvClass::pointwise: return "pointwise";
        case ConvClass::depthwise: return "depthwise";
    }
    return "?";
}

[[nodiscard]] inline std::optional<ConvClass> conv_class_from_key(std::string_view k) {
    for (ConvClass c : {ConvClass::general, ConvClass::pointwise, ConvClass::depthwise}) {
        if (to_string(c) == k) return c;
    }
    return std::nullopt;
}

[[nodiscard]] constexpr ConvClass conv_class(const ConvDims& d) {
    if (d.groups > 1 && d.groups == d.c) return ConvClass::depthwise;
    const bool one = d.r == 1 && d.s == 1 && d.stride_h == 1 && d.stride_w == 1 && d.pad_h == 0 && d.pad_w == 0;
    return one && d.groups == 1 ? ConvClass::pointwise : ConvClass::general;
}

/// Which attention implementation runs (PyTorch's SDPA backends; `cudnn` is cuDNN's fused attention,
/// which PyTorch 2.11 picks first on Hopper for 16-bit inputs).
enum class AttentionBackend { flash, efficient, math, cudnn };

[[nodiscard]] constexpr std::string_view to_string(AttentionBackend b) {
    switch (b) {
        case AttentionBackend::flash: return "flash";
        case AttentionBackend::efficient: return "efficient";
        case AttentionBackend::math: return "math";
        case AttentionBackend::cudnn: return "cudnn";
    }
    return "?";
}

[[nodiscard]] inline std::optional<AttentionBackend> attention_backend_from_key(std::string_view k) {
    for (AttentionBackend b : {AttentionBackend::flash, AttentionBackend::efficient, AttentionBackend::math,
                               AttentionBackend::cudnn}) {
        if (to_string(b) == k) return b;
    }
    return std::nullopt;
}

/// A fused attention kernel over Q (batch x heads x seq_q x head_dim) and K, V (... seq_kv ...).
struct AttentionDims {
    std::int64_t batch = 0, heads = 0, seq_q = 0, seq_kv = 0, head_dim = 0;
    bool causal = false;
    AttentionBackend backend = AttentionBackend::flash;
    double dropout = 0;  ///< dropout probability on the attention weights (the kernels draw random numbers when > 0)
};

/// A normalization kernel's reduction shape: `groups` independent groups (batch norm: channels;
/// layer and RMS norm: rows; group norm: batch x groups) of `group_elements` elements each. PyTorch's
/// native batch-norm kernels run one thread block per channel, so their speed depends on both.
struct NormDims {
    std::int64_t groups = 0, group_elements = 0;
};

/// One GPU kernel (or one host-only dispatch) of a training step. The fields every kernel's cost
/// reads come first (its kind, phase, dtype, unit, flags and work: one cache line), then its names
/// and shapes; the layer and the flag, which no cost reads, last.
struct Kernel {
    KernelKind kind = KernelKind::unknown;
    Phase phase = Phase::forward;
    DType dtype = DType::f32;                ///< storage type of its main operands
    ComputeUnit unit = ComputeUnit::fp32;    ///< the compute ceiling its arithmetic runs on
    bool backward_pass = false;              ///< attention: the backward kernel of the pair
    bool host_dispatch = true;               ///< launched by its own host dispatch (costed per kernel)
    bool host_sync = false;                  ///< host-only: the host waits here until the GPU has drained (.item())
    bool mixed_dtypes = false;               ///< elementwise: floating operands of different dtypes (bfloat16 + float32)
    bool strided = false;                    ///< elementwise: an operand strided or broadcast (PyTorch's offset-computing loop)
    bool waits_for_communication = false;    ///< starts only once the communication stream has drained (DDP's finalize)
    std::uint16_t ranks = 0;                 ///< collective: the GPUs it spans (its message is bytes_read)
    Flops flops{0};                          ///< arithmetic work (FMA = 2)
    Bytes bytes_read{0};                     ///< least DRAM bytes read (each operand once)
    Bytes bytes_written{0};                  ///< least DRAM bytes written
    Seconds python_time{0};                  ///< host-only: the model's own Python code run here, as timed where the IR was exported
    Name op;                                 ///< the operator that issues it ("aten::addmm", "linear.forward")
    Name source_op;                          ///< the graph op that lowered to it ("maxpool2d"), for per-op efficiency
    Name host_op;                            ///< host-only markers: the framework op whose dispatch it stands for
    std::variant<std::monostate, GemmDims, ConvDims, AttentionDims, NormDims> dims;  ///< shapes for shape-aware costs
    Name layer;                              ///< owning layer / module path ("layer1.0.conv1")
    Name flag;                               ///< why the kernel is flagged (unknown op), empty otherwise

    [[nodiscard]] Bytes bytes() const { return bytes_read + bytes_written; }
};

// A step's kernels are copied, and freed, as bytes.
static_assert(std::is_trivially_copyable_v<Kernel> && std::is_trivially_destructible_v<Kernel>);

/// The host op of a layer of `op` without a bias ("conv2d_nobias"): the framework probe's tiny layers of
/// these ops have a bias (a cast, a reduction and two autograd nodes more), so it measures them apart
/// too. `op` itself for an op without that variant.
[[nodiscard]] constexpr std::string_view host_op_without_bias(std::string_view op) {
    if (op == "linear") return "linear_nobias";
    if (op == "conv2d") return "conv2d_nobias";
    if (op == "conv1d") return "conv1d_nobias";
    return op;
}

/// The host op of scaled-dot-product attention on `backend` ("sdpa_cudnn"): PyTorch picks the backend
/// by dtype and head size, and the framework probe times attention at a model's head size keyed by
/// the backend that ran (its tiny "sdpa" layer, head size 8, may run another).
[[nodiscard]] constexpr std::string_view host_op_of_attention(AttentionBackend backend) {
    switch (backend) {
        case AttentionBackend::flash: return "sdpa_flash";
        case AttentionBackend::efficient: return "sdpa_efficient";
        case AttentionBackend::math: return "sdpa_math";
        case AttentionBackend::cudnn: return "sdpa_cudnn";
    }
    return "sdpa";
}

/// The host op of a view (`x.view(...)`, `.transpose`, `.permute`) called in a model's own code, outside
/// any layer: the probe's chain of views (`layer_forward_view_chain`), a reshape layer's figures where
/// a profile has none (the reshape layer's one-call figure holds that call's own costs on top).
inline constexpr std::string_view view_in_model_code_host_op = "view_chain";

/// The host op of one dispatch of DDP's reducer (data parallel: a gradient into its bucket, back from
/// it, or a bucket's all-reduce).
inline constexpr std::string_view ddp_reducer_host_op = "ddp_reducer";
/// The host op of a gradient's contiguous copy that autograd's AccumulateGrad dispatches and
/// launches on its own (Lowerer::cat): costed as the framework profile's tiny eager op.
inline constexpr std::string_view accumulate_grad_clone_host_op = "accumulate_grad_clone";
/// The host op of nn.MultiheadAttention called with need_weights=False (the SDPA path, as
/// torchvision's ViT calls it): the framework probe times that call apart from the default one.
inline constexpr std::string_view mha_no_weights_host_op = "mha_no_weights";
/// The host op of nn.Dropout with p = 0 in training, which launches nothing and records no autograd
/// node (a module call and one dispatch that returns its input).
inline constexpr std::string_view dropout_identity_host_op = "dropout_identity";
/// The host op of a cast autocast inserts before an op of its lists whose input (an activation) is
/// of another dtype: aten::_to_copy dispatched on its own forward, a ToCopyBackward0 node backward;
/// costed as the cast layer (x.to(dtype)) the framework probe times.
inline constexpr std::string_view autocast_cast_host_op = "cast";

/// The graph op a host op stands for: "conv2d" for "conv2d_nobias" (host_op_without_bias), "sdpa"
/// for "sdpa_cudnn" (host_op_of_attention), "mha" for "mha_no_weights" (nn.MultiheadAttention called
/// with need_weights=False), "dropout" for "dropout_identity" (p = 0), "reshape" for "view_chain"
/// (view_in_model_code_host_op), else itself.
[[nodiscard]] constexpr std::string_view graph_op_of_host_op(std::string_view host_op) {
    if (host_op.starts_with("sdpa_")) return "sdpa";
    if (host_op == view_in_model_code_host_op) return "reshape";
    for (const std::string_view variant : {std::string_view("_nobias"), std::string_view("_no_weights"), std::string_view("_identity")}) {
        if (host_op.ends_with(variant)) return host_op.substr(0, host_op.size() - variant.size());
    }
    return host_op;
}

/// A step's kernels, in the order the host issues them, with what produced them.
struct KernelList {
    std::string model;      ///< what the kernels describe ("resnet50")
    PrecisionMode precision = PrecisionMode::fp32;  ///< the precision mode they ran under
    std::string origin;     ///< "lowered from <graph>" or "exported by roofsim_export <version>"
    std::vector<Kernel> kernels;
    StepMode mode = StepMode::training;             ///< a training step, or an inference forward
};

/// The first size of a GEMM that int64 cannot hold, named ("batch * m * k (A's bytes)"), or empty:
/// each operand's bytes must fit (PyTorch computes a tensor's bytes in int64 and refuses an overflow).
[[nodiscard]] inline std::string oversized_size(const GemmDims& g, std::int64_t element_bytes) {
    using detail::checked_product;
    if (!checked_product({g.batch, g.m, g.k, element_bytes})) return "batch * m * k (A's bytes)";
    if (!checked_product({g.batch, g.k, g.n, element_bytes})) return "batch * k * n (B's bytes)";
    if (!checked_product({g.batch, g.m, g.n, element_bytes})) return "batch * m * n (C's bytes)";
    return {};
}

/// The first size of a convolution that int64 cannot hold, named, or empty: the output size, and
/// the bytes of the input, output and filter (from which the implicit GEMM's sizes follow).
[[nodiscard]] inline std::string oversized_size(const ConvDims& d, std::int64_t element_bytes) {
    using detail::checked_product;
    const auto p = ConvDims::output_size(d.h, d.pad_h, d.dilation_h, d.r, d.stride_h);
    if (!p) return "h + 2 * padding - dilation * (r - 1) (output height)";
    const auto q = ConvDims::output_size(d.w, d.pad_w, d.dilation_w, d.s, d.stride_w);
    if (!q) return "w + 2 * padding - dilation * (s - 1) (output width)";
    if (!checked_product({d.n, d.c, d.h, d.w, element_bytes})) return "n * c * h * w (input bytes)";
    if (!checked_product({d.n, d.k, *p, *q, element_bytes})) return "n * k * p * q (output bytes)";
    if (d.groups <= 0 || !checked_product({d.k, d.c / d.groups, d.r, d.s, element_bytes})) return "k * c / groups * r * s (filter bytes)";
    return {};
}

/// The first size of an attention kernel that int64 cannot hold, named, or empty: batch * heads,
/// the bytes of Q and of K, and the sequences rounded up to the kernels' 128-row tiles.
[[nodiscard]] inline std::string oversized_size(const AttentionDims& a, std::int64_t element_bytes) {
    using detail::checked_product, detail::checked_round_up;
    if (!checked_product({a.batch, a.heads})) return "batch * heads";
    if (!checked_product({a.batch, a.heads, a.seq_q, a.head_dim, element_bytes})) return "batch * heads * seq_q * head_dim (Q's bytes)";
    if (!checked_product({a.batch, a.heads, a.seq_kv, a.head_dim, element_bytes})) return "batch * heads * seq_kv * head_dim (K's bytes)";
    if (!checked_round_up(a.seq_q, 128)) return "seq_q (rounded up to a 128-row tile)";
    if (!checked_round_up(a.seq_kv, 128)) return "seq_kv (rounded up to a 128-row tile)";
    return {};
}

/// A dtype's bytes per element as a whole number, at least 1 (for the size checks).
[[nodiscard]] constexpr std::int64_t whole_element_bytes(DType d) {
    const double b = bytes_per_element(d);
    return b <= 1 ? 1 : static_cast<std::int64_t>(b + 0.5);
}

/// FLOPs of a GEMM: 2 m n k per batch.
[[nodiscard]] inline Flops gemm_flops(const GemmDims& g) {
    return Flops(2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k) *
                 static_cast<double>(g.batch));
}

/// FLOPs of a convolution pass: 2 N K P Q (C / groups) R S, the same for all three passes.
[[nodiscard]] inline Flops conv_flops(const ConvDims& c) {
    return Flops(2.0 * static_cast<double>(c.n) * static_cast<double>(c.k) * static_cast<double>(c.p()) *
                 static_cast<double>(c.q()) * static_cast<double>(c.c / c.groups) * static_cast<double>(c.r) *
                 static_cast<double>(c.s));
}

/// FLOPs of attention: forward 4 B H Lq Lkv D (QK^T and PV), backward 2.5x that (five GEMMs of the
/// same size less the one recomputed in flash), halved for a causal mask; the FlashAttention-2 paper's count.
[[nodiscard]] inline Flops attention_flops(const AttentionDims& a, bool backward) {
    double f = 4.0 * static_cast<double>(a.batch) * static_cast<double>(a.heads) * static_cast<double>(a.seq_q) *
               static_cast<double>(a.seq_kv) * static_cast<double>(a.head_dim);
    if (backward) f *= 2.5;
    if (a.causal) f *= 0.5;
    return Flops(f);
}

}  // namespace roofsim
