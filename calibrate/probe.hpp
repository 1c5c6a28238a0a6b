#pragma once
// The probe registry of roofsim-calibrate (nvbandwidth-style): each probe has a stable snake_case key,
// a one-line description, a capability check and a run function that writes its figures into a
// Calibration. This header is CUDA-free so that the command-line front end is plain C++.

#include <chrono>
#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <roofsim/profile/calibration.hpp>

namespace roofsim::calib {

inline constexpr const char* tool_version = "0.1.0";

/// What the probes need to know about the GPU in hand (read from the CUDA runtime).
struct DeviceInfo {
    int ordinal = 0;
    std::string name;
    int cc_major = 0, cc_minor = 0;
    int sm_count = 0;
    int max_threads_per_sm = 0;
    std::size_t l2_bytes = 0;
    std::size_t memory_bytes = 0;
    std::size_t free_bytes = 0;
    double sm_clock_max_hz = 0.0;
    double memory_clock_max_hz = 0.0;
    int memory_bus_width_bits = 0;
    int device_count = 0;
    int driver_version = 0;
    int runtime_version = 0;
    [[nodiscard]] int cc() const { return cc_major * 10 + cc_minor; }
};

/// A probe ran past its deadline (cooperative: probes check between measurements).
struct ProbeTimeout : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// What a running probe sees: the device, the mode, where to write, and its deadline.
struct ProbeContext {
    const DeviceInfo& device;
    bool quick = false;
    Calibration& out;
    std::chrono::steady_clock::time_point deadline;
    bool verbose = false;

    /// Throws ProbeTimeout when the probe's time is up; called between measurements.
    void check_deadline(const std::string& where) const {
        if (std::chrono::steady_clock::now() > deadline) throw ProbeTimeout("deadline passed at " + where);
    }
    /// Records a figure the probe could not measure, and carries on.
    void missing(std::string figure, MissingReason reason, std::string detail) const {
        out.missing.push_back({std::move(figure), reason, std::move(detail)});
    }
    void log(const std::string& line) const;
};

struct Probe {
    std::string key;
    std::string description;
    double estimate_quick_s = 1.0;  ///< expected run time on an H100-class GPU, for progress estimates
    double estimate_full_s = 1.0;
    /// Empty string when the probe can run on this device, else the reason it cannot.
    std::function<std::string(const DeviceInfo&)> unsupported;
    std::function<void(ProbeContext&)> run;
};

/// All probes, in the order they run.
[[nodiscard]] std::vector<Probe> make_probes();

/// Number of CUDA devices visible; throws with the CUDA error text when there is no usable driver/GPU.
[[nodiscard]] int visible_device_count();
/// Queries one device; throws std::runtime_error when it cannot.
[[nodiscard]] DeviceInfo query_device(int ordinal);
/// Fills the identity block (name, SMs, clocks, driver and library versions).
void fill_identity(DeviceIdentity& id, const DeviceInfo& dev);

}  // namespace roofsim::calib
