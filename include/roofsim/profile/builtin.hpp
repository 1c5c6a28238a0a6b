#pragma once
/// The measured profiles shipped with roofsim (data/calibrations/*.json, data/framework/*.json), each
/// with its provenance. They are read, once, from a folder: the source tree's data/ in a build, the
/// installed share/roofsim after `cmake --install` (the compile definition ROOFSIM_DATA_DIR that the
/// CMake target roofsim::roofsim sets), or wherever $ROOFSIM_DATA_DIR or set_builtin_data_dir() says.

#include <roofsim/profile/calibration_json.hpp>
#include <roofsim/profile/framework.hpp>
#include <roofsim/profile/kernel_model.hpp>
#include <roofsim/detail/json_file.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace roofsim {

namespace detail {
/// The folder set by set_builtin_data_dir(), if any.
inline std::optional<std::filesystem::path>& builtin_data_dir_override() {
    static std::optional<std::filesystem::path> dir;
    return dir;
}

/// The *.json files directly in `dir` (not in its subfolders), sorted by name; an error naming the
/// folder where it does not exist.
[[nodiscard]] inline std::vector<std::filesystem::path> json_files_in(const std::filesystem::path& dir) {
    if (!std::filesystem::is_directory(dir)) {
        throw std::runtime_error(dir.string() + ": no such folder of built-in profiles (set ROOFSIM_DATA_DIR to the "
                                                "installed share/roofsim or to the source tree's data/)");
    }
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        if (entry.is_regular_file() && entry.path().extension() == ".json") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    return files;
}
}  // namespace detail

/// Reads the built-in profiles from `dir` instead (a folder with calibrations/ and framework/), for
/// profiles read after the call; the CLI points it at the share/roofsim beside its executable.
inline void set_builtin_data_dir(std::filesystem::path dir) { detail::builtin_data_dir_override() = std::move(dir); }

/// The folder the built-in profiles are read from: set_builtin_data_dir()'s, else $ROOFSIM_DATA_DIR,
/// else the one the build defined (ROOFSIM_DATA_DIR). An error where none is known.
[[nodiscard]] inline std::filesystem::path builtin_data_dir() {
    if (const auto& dir = detail::builtin_data_dir_override()) return *dir;
    if (const char* env = std::getenv("ROOFSIM_DATA_DIR"); env && *env) return env;
#ifdef ROOFSIM_DATA_DIR
    return ROOFSIM_DATA_DIR;
#else
    throw std::runtime_error("roofsim: no folder of built-in profiles is known: link roofsim::roofsim with CMake, "
                             "or set ROOFSIM_DATA_DIR to the installed share/roofsim");
#endif
}

/// Every built-in calibration profile, parsed and validated once.
[[nodiscard]] inline const std::vector<Calibration>& builtin_calibrations() {
    static const std::vector<Calibration> profiles = [] {
        std::vector<Calibration> out;
        for (const auto& path : detail::json_files_in(builtin_data_dir() / "calibrations")) out.push_back(load_calibration(path));
        return out;
    }();
    return profiles;
}

/// The built-in profile measured on a GPU of this key, or nullptr.
[[nodiscard]] inline const Calibration* find_builtin_calibration(std::string_view gpu_key) {
    for (const auto& c : builtin_calibrations()) {
        if (c.device.gpu_key == gpu_key) return &c;
    }
    return nullptr;
}

/// Every built-in collective profile (data/collectives/*.json: roofsim-calibrate's nccl probe over
/// several GPUs, `--only nccl`), parsed and validated once; none where there is no such folder.
[[nodiscard]] inline const std::vector<Calibration>& builtin_collective_profiles() {
    static const std::vector<Calibration> profiles = [] {
        std::vector<Calibration> out;
        const auto dir = builtin_data_dir() / "collectives";
        if (!std::filesystem::is_directory(dir)) return out;
        for (const auto& path : detail::json_files_in(dir)) out.push_back(load_calibration(path));
        return out;
    }();
    return profiles;
}

/// Every built-in framework profile (data/framework/*.json), parsed once.
[[nodiscard]] inline const std::vector<FrameworkProfile>& builtin_framework_profiles() {
    static const std::vector<FrameworkProfile> profiles = [] {
        std::vector<FrameworkProfile> out;
        for (const auto& path : detail::json_files_in(builtin_data_dir() / "framework")) out.push_back(load_framework_profile(path));
        return out;
    }();
    return profiles;
}

/// The framework profile measured with this GPU, or nullptr.
[[nodiscard]] inline const FrameworkProfile* find_builtin_framework_profile(std::string_view gpu_key) {
    for (const auto& f : builtin_framework_profiles()) {
        if (f.gpu_key == gpu_key) return &f;
    }
    return nullptr;
}

/// The framework profile a GPU's predictions take by default: the one measured with that GPU, else
/// the first built-in one (host costs of another host: the report says so); nullptr where none is
/// built in.
[[nodiscard]] inline const FrameworkProfile* default_framework_profile(std::string_view gpu_key) {
    if (const FrameworkProfile* own = find_builtin_framework_profile(gpu_key)) return own;
    return builtin_framework_profiles().empty() ? nullptr : &builtin_framework_profiles().front();
}

/// Every built-in kernel-model profile (data/kernel_models/*.json), parsed once; none where no folder
/// of built-in profiles is known or it has no kernel_models/.
[[nodiscard]] inline const std::vector<KernelModelProfile>& builtin_kernel_models() {
    static const std::vector<KernelModelProfile> profiles = [] {
        std::vector<KernelModelProfile> out;
        std::filesystem::path dir;
        try {
            dir = builtin_data_dir() / "kernel_models";
        } catch (const std::runtime_error&) {
            return out;
        }
        if (!std::filesystem::is_directory(dir)) return out;
        for (const auto& path : detail::json_files_in(dir)) out.push_back(load_kernel_model(path));
        return out;
    }();
    return profiles;
}

/// The built-in kernel model of an architecture family (a GPU's chip, "GH100"), or nullptr.
[[nodiscard]] inline const KernelModelProfile* find_builtin_kernel_model(std::string_view chip) {
    for (const auto& k : builtin_kernel_models()) {
        if (k.chip == chip) return &k;
    }
    return nullptr;
}

}  // namespace roofsim
