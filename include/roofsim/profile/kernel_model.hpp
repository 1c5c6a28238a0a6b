#pragma once
/// A kernel-model profile: the GEMM kernel model's parameters of one architecture family (chip: GH100,
/// GA100, GA102, AD102), per compute unit, with where they came from (data/kernel_models/*.json,
/// docs/calibration-format.md). `roofsim fit-kernels` writes one from the fit half of a kernel corpus
/// (tools/validate/kernel_corpus.py) timed on a GPU of the family.

#include <roofsim/compute_unit.hpp>
#include <roofsim/cost/gemm_model.hpp>
#include <roofsim/detail/json_file.hpp>
#include <roofsim/detail/json_read.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

namespace roofsim {

struct KernelModelProfile {
    std::string chip;        ///< the architecture family, as data/gpus/*.json names its chip ("GH100")
    std::string provenance;  ///< what the parameters were fitted to, and how
    std::map<ComputeUnit, GemmKernelParams> gemm;
    /// By (unit, pass, class).
    std::map<std::tuple<ComputeUnit, ConvPass, ConvClass>, ConvKernelParams> conv;
    /// Fused attention, by (unit, backend, backward).
    std::map<std::tuple<ComputeUnit, AttentionBackend, bool>, ScaledGemmParams> attention;
    /// PyTorch's memory-bound kernels (elementwise, reductions, norms, softmax, copies): the time one
    /// takes besides its bytes at the calibration's bandwidth (launch ramp and tail of its grid).
    Seconds memory_fixed_time{0};
};

inline constexpr int kernel_model_schema_version = 2;

[[nodiscard]] inline nlohmann::json to_json(const KernelModelProfile& p) {
    nlohmann::json units = nlohmann::json::object();
    for (const auto& [unit, g] : p.gemm) {
        units[std::string(to_string(unit))] = {{"aligned_efficiency", g.aligned_efficiency},
                                               {"unaligned_efficiency", g.unaligned_efficiency},
                                               {"saturating_intensity", g.saturating_intensity},
                                               {"k_half", g.k_half},
                                               {"min_split_depth", g.min_split_depth},
                                               {"fixed_seconds", g.fixed_time.value()},
                                               {"split_seconds", g.split_time.value()}};
    }
    nlohmann::json conv = nlohmann::json::array();
    for (const auto& [key, c] : p.conv) {
        const auto& [unit, pass, kind] = key;
        conv.push_back({{"unit", std::string(to_string(unit))}, {"pass", std::string(to_string(pass))},
                        {"class", std::string(to_string(kind))}, {"factor", c.scaled.factor},
                        {"fixed_seconds", c.scaled.fixed_time.value()}, {"transposes", c.transposes}});
    }
    nlohmann::json attention = nlohmann::json::array();
    for (const auto& [key, a] : p.attention) {
        const auto& [unit, backend, backward] = key;
        attention.push_back({{"unit", std::string(to_string(unit))}, {"backend", std::string(to_string(backend))},
                             {"phase", backward ? "backward" : "forward"}, {"factor", a.factor}, {"fixed_seconds", a.fixed_time.value()}});
    }
    return {{"kind", "roofsim-kernel-model"}, {"schema_version", kernel_model_schema_version}, {"chip", p.chip},
            {"provenance", p.provenance}, {"gemm", units}, {"conv", conv}, {"attention", attention},
            {"memory", {{"fixed_seconds", p.memory_fixed_time.value()}}}};
}

namespace detail {
/// A compute unit read from its key at `c`; an error there for an unknown one.
[[nodiscard]] inline ComputeUnit kernel_model_unit(const JsonCursor& c, const std::string& key) {
    const auto unit = compute_unit_from_key(key);
    if (!unit) c.fail("not a compute unit");
    return *unit;
}

/// A list entry's {factor, fixed_seconds}.
[[nodiscard]] inline ScaledGemmParams scaled_gemm_params(const JsonCursor& c) {
    return ScaledGemmParams{c.at("factor").positive(), Seconds(c.at("fixed_seconds").non_negative())};
}
}  // namespace detail

/// Reads a kernel-model profile; errors name the file and the JSON path.
[[nodiscard]] inline KernelModelProfile kernel_model_from_json(const nlohmann::json& j, const std::string& origin) {
    const detail::JsonCursor root(j, origin, "");
    if (root.at("kind").string() != "roofsim-kernel-model") root.at("kind").fail("expected roofsim-kernel-model");
    if (root.at("schema_version").integer() != kernel_model_schema_version) {
        root.at("schema_version").fail("expected " + std::to_string(kernel_model_schema_version) +
                                       " (a profile of another version: fit it again with `roofsim fit-kernels`)");
    }
    KernelModelProfile p;
    p.chip = root.at("chip").string();
    p.provenance = root.at("provenance").string();
    const detail::JsonCursor units = root.at("gemm");
    for (const auto& [key, value] : units.object().items()) {
        const detail::JsonCursor u = units.at(key);
        const ComputeUnit unit = detail::kernel_model_unit(u, key);
        GemmKernelParams g;
        g.aligned_efficiency = u.at("aligned_efficiency").positive();
        g.unaligned_efficiency = u.at("unaligned_efficiency").positive();
        g.saturating_intensity = u.at("saturating_intensity").positive();
        g.k_half = u.at("k_half").non_negative();
        g.min_split_depth = u.at("min_split_depth").positive();
        g.fixed_time = Seconds(u.at("fixed_seconds").non_negative());
        g.split_time = Seconds(u.at("split_seconds").non_negative());
        p.gemm[unit] = g;
    }
    // "conv" and "attention" are optional: a family's profile may price only GEMMs
    const nlohmann::json none = nlohmann::json::array();
    const detail::JsonCursor conv = root.has("conv") ? root.at("conv") : detail::JsonCursor(none, origin, "/conv");
    for (std::size_t i = 0; i < conv.array_size(); ++i) {
        const detail::JsonCursor c = conv.at(i);
        const ComputeUnit unit = detail::kernel_model_unit(c.at("unit"), c.at("unit").string());
        const auto pass = conv_pass_from_key(c.at("pass").string());
        if (!pass) c.at("pass").fail("expected forward, backward-data or backward-filter");
        const auto kind = conv_class_from_key(c.at("class").string());
        if (!kind) c.at("class").fail("expected general, pointwise or depthwise");
        const auto key = std::tuple{unit, *pass, *kind};
        if (p.conv.count(key) != 0) c.fail("a second entry of this unit, pass and class");
        p.conv[key] = ConvKernelParams{detail::scaled_gemm_params(c), c.at("transposes").non_negative()};
    }
    const detail::JsonCursor attention = root.has("attention") ? root.at("attention") : detail::JsonCursor(none, origin, "/attention");
    for (std::size_t i = 0; i < attention.array_size(); ++i) {
        const detail::JsonCursor a = attention.at(i);
        const ComputeUnit unit = detail::kernel_model_unit(a.at("unit"), a.at("unit").string());
        const auto backend = attention_backend_from_key(a.at("backend").string());
        if (!backend) a.at("backend").fail("expected flash, efficient, math or cudnn");
        const std::string phase = a.at("phase").string();
        if (phase != "forward" && phase != "backward") a.at("phase").fail("expected forward or backward");
        const auto key = std::tuple{unit, *backend, phase == "backward"};
        if (p.attention.count(key) != 0) a.fail("a second entry of this unit, backend and phase");
        p.attention[key] = detail::scaled_gemm_params(a);
    }
    if (root.has("memory")) p.memory_fixed_time = Seconds(root.at("memory").at("fixed_seconds").non_negative());
    return p;
}

[[nodiscard]] inline KernelModelProfile load_kernel_model(const std::filesystem::path& path) {
    return kernel_model_from_json(detail::read_json_file(path), path.string());
}

}  // namespace roofsim
