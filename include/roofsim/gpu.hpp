#pragma once
/// GPU datasheet specifications: peak rates per compute unit, memory, caches, links, each figure with
/// the document it was read from. Loaded from `data/gpus/*.json`; the same files are embedded in
/// `detail/embedded_gpus.hpp`, so the library works with no files around it.

#include <roofsim/detail/close_matches.hpp>
#include <roofsim/detail/embedded_gpus.hpp>
#include <roofsim/detail/json_file.hpp>
#include <roofsim/detail/json_read.hpp>
#include <roofsim/compute_unit.hpp>
#include <roofsim/units.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace roofsim {

/// A figure and where it came from: the key of a citation in the spec's `sources` table, or
/// "derived: <rule>" for a figure computed from others.
template <class T>
struct Sourced {
    T value{};
    std::string source;
};

/// The datasheet specification of one GPU model (dense rates, no sparsity). Field by field it is
/// the file format of `data/gpus/*.json` (docs/gpu-specs.md), converted to SI units.
struct GpuSpec {
    std::string key;                            ///< stable lookup key, e.g. "a100-40gb-sxm"
    std::string name;                           ///< human name, e.g. "NVIDIA A100 SXM4 40GB"
    std::vector<std::string> nvidia_smi_names;  ///< exact names `nvidia-smi` prints for this model
    std::map<std::string, std::string> sources; ///< citation key -> full citation
    Sourced<std::string> architecture;          ///< "ampere", "hopper", ...
    Sourced<std::string> chip;                  ///< "GA100", "GA102", "GH100", ...
    Sourced<std::string> compute_capability;    ///< "8.0", "8.6", "9.0"
    Sourced<std::string> form_factor;           ///< "SXM4", "PCIe", ...
    Sourced<int> sm_count;
    Sourced<Hertz> boost_clock;
    std::map<ComputeUnit, Sourced<FlopsPerSecond>> peak_compute;  ///< absent = not supported
    Sourced<std::string> memory_type;
    Sourced<Bytes> memory_size;
    Sourced<BytesPerSecond> memory_bandwidth;
    Sourced<Bytes> l2_size;
    std::optional<Sourced<BytesPerSecond>> l2_bandwidth;  ///< only where a source states it
    Sourced<double> tdp_watts;
    Sourced<int> pcie_generation;
    Sourced<BytesPerSecond> pcie_bandwidth;  ///< bidirectional, as datasheets quote it
    std::optional<Sourced<int>> nvlink_generation;
    std::optional<Sourced<BytesPerSecond>> nvlink_bandwidth;  ///< bidirectional total per GPU

    /// Peak rate of a compute unit, or nullopt where the GPU has no such unit.
    [[nodiscard]] std::optional<FlopsPerSecond> peak(ComputeUnit unit) const {
        auto it = peak_compute.find(unit);
        if (it == peak_compute.end()) return std::nullopt;
        return it->second.value;
    }

    /// The full citation behind a figure's source key ("derived: ..." sources are returned as they are).
    [[nodiscard]] std::string cite(const std::string& source) const {
        auto it = sources.find(source);
        return it == sources.end() ? source : it->second;
    }
};

namespace detail {

/// Unit conversions between the file's display units and SI, in one place.
inline constexpr double bytes_per_gib = 1024.0 * 1024.0 * 1024.0;
inline constexpr double bytes_per_mib = 1024.0 * 1024.0;
inline constexpr double hz_per_mhz = 1e6;
inline constexpr double flops_per_tflop = 1e12;
inline constexpr double bytes_per_gb = 1e9;

template <class T>
Sourced<T> read_figure(const JsonCursor& parent, std::string_view key,
                       const std::map<std::string, std::string>& sources) {
    const JsonCursor node = parent.at(key);
    (void)node.object();
    Sourced<T> out;
    const JsonCursor value = node.at("value");
    if constexpr (std::is_same_v<T, std::string>) {
        out.value = value.string();
        if (out.value.empty()) value.fail("must not be empty");
    } else if constexpr (std::is_integral_v<T>) {
        out.value = static_cast<T>(value.positive_integer());
    } else {
        out.value = value.positive();
    }
    const JsonCursor source = node.at("source");
    out.source = source.string();
    if (out.source.rfind("derived: ", 0) != 0 && sources.count(out.source) == 0) {
        source.fail("'" + out.source + "' is neither a key of /sources nor a \"derived: <rule>\" text");
    }
    return out;
}

/// A numeric figure in a display unit (TFLOP/s, GB/s ...) converted to its SI quantity.
template <class Q>
Sourced<Q> read_scaled(const JsonCursor& parent, std::string_view key, double si_per_unit,
                       const std::map<std::string, std::string>& sources) {
    auto raw = read_figure<double>(parent, key, sources);
    return {Q(raw.value * si_per_unit), raw.source};
}

}  // namespace detail

/// Parses one GPU spec (schema_version 1, docs/gpu-specs.md). `origin` names the file in errors.
/// Throws std::runtime_error naming the origin and the JSON pointer of the bad field.
[[nodiscard]] inline GpuSpec gpu_spec_from_json(const nlohmann::json& file, std::string_view origin) {
    using namespace detail;
    const JsonCursor root(file, std::string(origin), "");
    (void)root.object();
    const auto version = root.at("schema_version").integer();
    if (version != 1) root.at("schema_version").fail("unsupported version " + std::to_string(version) + " (expected 1)");

    GpuSpec g;
    g.key = root.at("key").string();
    if (g.key.empty()) root.at("key").fail("must not be empty");
    g.name = root.at("name").string();
    const JsonCursor names = root.at("nvidia_smi_names");
    for (std::size_t i = 0; i < names.array_size(); ++i) g.nvidia_smi_names.push_back(names.at(i).string());
    if (g.nvidia_smi_names.empty()) names.fail("must not be empty");
    const JsonCursor sources = root.at("sources");
    for (const auto& [k, v] : sources.object().items()) g.sources[k] = sources.at(k).string();

    const auto& src = g.sources;
    g.architecture = read_figure<std::string>(root, "architecture", src);
    g.chip = read_figure<std::string>(root, "chip", src);
    g.compute_capability = read_figure<std::string>(root, "compute_capability", src);
    g.form_factor = read_figure<std::string>(root, "form_factor", src);
    g.sm_count = read_figure<int>(root, "sm_count", src);
    g.boost_clock = read_scaled<Hertz>(root, "boost_clock_mhz", hz_per_mhz, src);

    const JsonCursor peaks = root.at("peak_tflops");
    for (const auto& [k, v] : peaks.object().items()) {
        auto unit = compute_unit_from_key(k);
        if (!unit) peaks.at(k).fail("unknown compute unit (keys: see docs/gpu-specs.md)");
        g.peak_compute[*unit] = read_scaled<FlopsPerSecond>(peaks, k, flops_per_tflop, src);
    }
    for (ComputeUnit required : {ComputeUnit::fp32, ComputeUnit::fp64}) {
        if (!g.peak_compute.count(required)) (void)peaks.at(to_string(required));  // fails: missing
    }

    g.memory_type = read_figure<std::string>(root, "memory_type", src);
    g.memory_size = read_scaled<Bytes>(root, "memory_size_gib", bytes_per_gib, src);
    g.memory_bandwidth = read_scaled<BytesPerSecond>(root, "memory_bandwidth_gb_per_s", bytes_per_gb, src);
    g.l2_size = read_scaled<Bytes>(root, "l2_cache_mib", bytes_per_mib, src);
    if (root.has("l2_bandwidth_gb_per_s")) {
        g.l2_bandwidth = read_scaled<BytesPerSecond>(root, "l2_bandwidth_gb_per_s", bytes_per_gb, src);
    }
    g.tdp_watts = read_figure<double>(root, "tdp_watts", src);
    g.pcie_generation = read_figure<int>(root, "pcie_generation", src);
    g.pcie_bandwidth = read_scaled<BytesPerSecond>(root, "pcie_bidirectional_gb_per_s", bytes_per_gb, src);
    if (root.has("nvlink_generation") != root.has("nvlink_bidirectional_gb_per_s")) {
        root.fail("nvlink_generation and nvlink_bidirectional_gb_per_s go together");
    }
    if (root.has("nvlink_generation")) {
        g.nvlink_generation = read_figure<int>(root, "nvlink_generation", src);
        g.nvlink_bandwidth = read_scaled<BytesPerSecond>(root, "nvlink_bidirectional_gb_per_s", bytes_per_gb, src);
    }
    return g;
}

/// The spec in its file format (schema_version 1, display units): gpu_spec_from_json(to_json(g)) == g.
[[nodiscard]] inline nlohmann::json to_json(const GpuSpec& g) {
    using namespace detail;
    auto fig = [](const auto& value, const std::string& source) {
        return nlohmann::json{{"value", value}, {"source", source}};
    };
    auto scaled = [&](const auto& s, double si_per_unit) { return fig(s.value.value() / si_per_unit, s.source); };
    nlohmann::json peaks = nlohmann::json::object();
    for (const auto& [unit, p] : g.peak_compute) peaks[std::string(to_string(unit))] = scaled(p, flops_per_tflop);
    nlohmann::json j = nlohmann::json::object();
    j["schema_version"] = 1;
    j["key"] = g.key;
    j["name"] = g.name;
    j["nvidia_smi_names"] = g.nvidia_smi_names;
    j["sources"] = g.sources;
    j["architecture"] = fig(g.architecture.value, g.architecture.source);
    j["chip"] = fig(g.chip.value, g.chip.source);
    j["compute_capability"] = fig(g.compute_capability.value, g.compute_capability.source);
    j["form_factor"] = fig(g.form_factor.value, g.form_factor.source);
    j["sm_count"] = fig(g.sm_count.value, g.sm_count.source);
    j["boost_clock_mhz"] = scaled(g.boost_clock, hz_per_mhz);
    j["peak_tflops"] = peaks;
    j["memory_type"] = fig(g.memory_type.value, g.memory_type.source);
    j["memory_size_gib"] = scaled(g.memory_size, bytes_per_gib);
    j["memory_bandwidth_gb_per_s"] = scaled(g.memory_bandwidth, bytes_per_gb);
    j["l2_cache_mib"] = scaled(g.l2_size, bytes_per_mib);
    if (g.l2_bandwidth) j["l2_bandwidth_gb_per_s"] = scaled(*g.l2_bandwidth, bytes_per_gb);
    j["tdp_watts"] = fig(g.tdp_watts.value, g.tdp_watts.source);
    j["pcie_generation"] = fig(g.pcie_generation.value, g.pcie_generation.source);
    j["pcie_bidirectional_gb_per_s"] = scaled(g.pcie_bandwidth, bytes_per_gb);
    if (g.nvlink_generation && g.nvlink_bandwidth) {
        j["nvlink_generation"] = fig(g.nvlink_generation->value, g.nvlink_generation->source);
        j["nvlink_bidirectional_gb_per_s"] = scaled(*g.nvlink_bandwidth, bytes_per_gb);
    }
    return j;
}

/// Reads a GPU spec file.
[[nodiscard]] inline GpuSpec load_gpu_spec(const std::filesystem::path& path) {
    return gpu_spec_from_json(detail::read_json_file(path), path.filename().string());
}

/// Every built-in GPU, parsed once from the embedded copies of `data/gpus/*.json`, sorted by key.
[[nodiscard]] inline const std::vector<GpuSpec>& builtin_gpus() {
    static const std::vector<GpuSpec> gpus = [] {
        std::vector<GpuSpec> out;
        for (const auto& [file_name, text] : detail::embedded_gpus_files) {
            const std::string origin = "embedded " + std::string(file_name);
            out.push_back(gpu_spec_from_json(detail::parse_json_text(text, origin), origin));
        }
        std::sort(out.begin(), out.end(), [](const GpuSpec& a, const GpuSpec& b) { return a.key < b.key; });
        return out;
    }();
    return gpus;
}

/// Looks a built-in GPU up by its key ("rtx-a6000"); nullptr when there is none.
[[nodiscard]] inline const GpuSpec* find_gpu(std::string_view key) {
    for (const auto& g : builtin_gpus()) {
        if (g.key == key) return &g;
    }
    return nullptr;
}

namespace detail {
inline std::string normalized_name(std::string_view s) {
    std::string out;
    for (char c : s) {
        if (std::isalnum(static_cast<unsigned char>(c))) {
            out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
        }
    }
    return out;
}

}  // namespace detail

/// Looks a built-in GPU up by the name `nvidia-smi` (or cudaGetDeviceProperties) prints, e.g.
/// "NVIDIA A100-SXM4-80GB"; case, spaces and punctuation are ignored. nullptr when unknown.
[[nodiscard]] inline const GpuSpec* find_gpu_by_name(std::string_view device_name) {
    const std::string wanted = detail::normalized_name(device_name);
    for (const auto& g : builtin_gpus()) {
        for (const auto& n : g.nvidia_smi_names) {
            if (detail::normalized_name(n) == wanted) return &g;
        }
    }
    return nullptr;
}

/// Built-in GPU keys close to a mistyped one, best first (edit distance, or a shared substring).
[[nodiscard]] inline std::vector<std::string> close_gpu_keys(std::string_view typed, std::size_t at_most = 4) {
    std::vector<std::pair<std::size_t, std::string>> scored;
    const std::string t = detail::normalized_name(typed);
    for (const auto& g : builtin_gpus()) {
        const std::string k = detail::normalized_name(g.key);
        std::size_t d = detail::edit_distance(t, k);
        if (!t.empty() && k.find(t) != std::string::npos) d = 0;  // "a100" suggests every A100
        if (d <= std::max<std::size_t>(3, k.size() / 3)) scored.emplace_back(d, g.key);
    }
    std::stable_sort(scored.begin(), scored.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::string> out;
    for (const auto& s : scored) {
        if (out.size() == at_most) break;
        out.push_back(s.second);
    }
    return out;
}

/// Looks up by key, then by nvidia-smi name; throws with close matches listed when neither works.
[[nodiscard]] inline const GpuSpec& gpu_or_throw(std::string_view key_or_name) {
    if (const GpuSpec* g = find_gpu(key_or_name)) return *g;
    if (const GpuSpec* g = find_gpu_by_name(key_or_name)) return *g;
    std::string message = "unknown GPU '" + std::string(key_or_name) + "'";
    auto close = close_gpu_keys(key_or_name);
    if (!close.empty()) {
        message += "; did you mean: ";
        for (std::size_t i = 0; i < close.size(); ++i) message += (i ? ", " : "") + close[i];
    }
    message += " (roofsim specs lists all)";
    throw std::invalid_argument(message);
}

}  // namespace roofsim
