#pragma once
/// Calibration profiles shipped with roofsim (data/calibrations/*.json, embedded in the headers):
/// measured on real GPUs, each with its provenance.

#include <roofsim/calibration.hpp>
#include <roofsim/detail/embedded_calibrations.hpp>
#include <roofsim/detail/embedded_framework.hpp>
#include <roofsim/framework.hpp>
#include <roofsim/detail/json_file.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace roofsim {

/// Every built-in calibration profile, parsed and validated once.
[[nodiscard]] inline const std::vector<Calibration>& builtin_calibrations() {
    static const std::vector<Calibration> profiles = [] {
        std::vector<Calibration> out;
        for (const auto& [file_name, text] : detail::embedded_calibrations_files) {
            const std::string origin = "embedded " + std::string(file_name);
            out.push_back(calibration_from_json(detail::parse_json_text(text, origin), origin));
        }
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

/// Every built-in framework profile (data/framework/*.json), parsed once.
[[nodiscard]] inline const std::vector<FrameworkProfile>& builtin_framework_profiles() {
    static const std::vector<FrameworkProfile> profiles = [] {
        std::vector<FrameworkProfile> out;
        for (const auto& [file_name, text] : detail::embedded_framework_files) {
            const std::string origin = "embedded " + std::string(file_name);
            out.push_back(framework_profile_from_json(detail::parse_json_text(text, origin), origin));
        }
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

}  // namespace roofsim
