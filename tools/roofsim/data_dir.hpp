#pragma once
// The installed roofsim reads its measured profiles from the share/roofsim beside its executable
// (<prefix>/bin/roofsim -> <prefix>/share/roofsim); a build reads the source tree's data/.

#include <roofsim/profile/builtin.hpp>

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace roofsim::cli {

/// Points the built-in profiles at <prefix>/share/roofsim where this executable is installed there
/// and $ROOFSIM_DATA_DIR is not set.
inline void use_installed_data_dir() {
    if (const char* env = std::getenv("ROOFSIM_DATA_DIR"); env && *env) return;
    std::error_code error;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", error);
    if (error) return;
    const auto share = exe.parent_path().parent_path() / "share" / "roofsim";
    if (std::filesystem::is_directory(share / "calibrations", error)) set_builtin_data_dir(share);
}

}  // namespace roofsim::cli
