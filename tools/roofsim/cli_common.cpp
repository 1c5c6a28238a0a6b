#include "cli_common.hpp"
#include "quantity_parse.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <sstream>

namespace roofsim::cli {

const std::vector<std::string> seed_gpus = {"rtx-3090", "rtx-a6000", "a100-40gb-sxm", "a100-80gb-sxm",
                                            "h100-sxm", "h200-sxm"};

const GpuSpec& gpu_arg(const std::string& key) {
    try {
        return gpu_or_throw(key);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
}

ComputeUnit unit_arg(const std::string& text, const std::string& option) {
    auto unit = parse_compute_unit(text);
    if (!unit) {
        std::string keys;
        for (auto u : all_compute_units) keys += (keys.empty() ? "" : ", ") + std::string(to_string(u));
        throw UsageError(option + ": unknown compute unit '" + text + "'; use one of: " + keys +
                         " (or the short forms tf32, fp16, bf16, fp8, int8 for tensor cores)");
    }
    return *unit;
}

double flops_arg(const std::string& text, const std::string& option) {
    if (auto v = parse_flops(text)) return *v;
    throw UsageError(option + ": '" + text + "' is not a FLOP amount (a non-negative number, optionally with k, M, G, T "
                     "or P and FLOP, e.g. 1e12, 4.5G, 300TFLOP; no bytes)");
}

double bytes_arg(const std::string& text, const std::string& option) {
    if (auto v = parse_bytes(text)) return *v;
    throw UsageError(option + ": '" + text + "' is not a byte amount (a non-negative number, optionally with k, M, G, T, P "
                     "or Ki, Mi, Gi, Ti and B, e.g. 4096, 300MB, 2GiB)");
}

StepMode step_mode_arg(const std::string& text) {
    const auto mode = step_mode_from_key(text);
    if (!mode) throw UsageError("--mode: expected training or inference, got '" + text + "'");
    return *mode;
}

CLI::Validator positive_integer() {
    return CLI::Validator(
        [](const std::string& text) {
            const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
            if (!digits || text.find_first_not_of('0') == std::string::npos) return "must be a positive integer, got " + text;
            std::int64_t v = 0;  // the option is an int64: a number beyond it must not saturate to INT64_MAX
            const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
            if (ec != std::errc() || ptr != text.data() + text.size()) return text + ": does not fit in a 64-bit integer";
            return std::string();
        },
        "POSITIVE INTEGER");
}

std::vector<std::string> split_list(const std::string& text) {
    std::vector<std::string> out;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
        if (!item.empty()) out.push_back(item);
    }
    return out;
}

std::string tflops(std::optional<FlopsPerSecond> r) {
    return r ? format_number("%.1f", to_tflops_per_second(*r)) : "-";
}

namespace {

struct UnitScale {
    const char* name;
    double per_second;
};
constexpr UnitScale time_units[] = {{"ns", 1e9}, {"us", 1e6}, {"ms", 1e3}, {"s", 1}};

/// The largest unit in which `seconds` is at least 1 (ns for anything shorter).
const UnitScale& unit_for(double seconds) {
    for (int i = 3; i > 0; --i) {
        if (seconds * time_units[i].per_second >= 1 - 1e-12) return time_units[i];
    }
    return time_units[0];
}

int decimals_for(double v) { return v >= 100 ? 1 : v >= 10 ? 2 : 3; }

}  // namespace

std::string format_duration(Seconds t) {
    const double s = t.value();
    if (s == 0) return "0 s";
    const auto& u = unit_for(std::abs(s));
    const double v = s * u.per_second;
    return format_number(("%." + std::to_string(decimals_for(std::abs(v))) + "f ").c_str(), v) + u.name;
}

std::string TimeUnit::operator()(Seconds t) const {
    return format_number(("%." + std::to_string(decimals) + "f").c_str(), t.value() * per_second);
}

TimeUnit TimeUnit::for_largest(Seconds largest) {
    const auto& u = unit_for(std::abs(largest.value()));
    return {u.name, u.per_second, decimals_for(std::abs(largest.value()) * u.per_second)};
}

nlohmann::json with_kind(nlohmann::json j, const std::string& kind, int schema_version) {
    if (j.contains("kind")) return j;
    nlohmann::json out = {{"kind", kind}, {"schema_version", j.value("schema_version", schema_version)}};
    out.update(j);
    return out;
}

Calibration calibration_arg(const std::string& path, bool accept_partial) {
    Calibration c = load_calibration(path, PartialProfile::accept);
    if (!c.partial) return c;
    if (!accept_partial) {
        throw std::runtime_error(path + ": a partial calibration: roofsim-calibrate stopped before " + probes_not_run_text(c) +
                                 " ran; calibrate again, or pass --accept-partial to use it as it is");
    }
    std::cerr << "roofsim: warning: " << path << " is a partial calibration (not run: " << probes_not_run_text(c)
              << "): each figure it lacks is taken as for any figure a calibration does not hold (the datasheet's "
                 "ceilings, the built-in kernel models)\n";
    return c;
}

Ceilings ceilings_for(const GpuSpec& spec, const std::optional<Calibration>& calibration) {
    if (calibration && calibration->device.gpu_key == spec.key) return ceilings_from_calibration(*calibration, spec);
    if (calibration) {
        std::cerr << "roofsim: note: the calibration describes "
                  << (calibration->device.gpu_key.empty() ? calibration->device.name : calibration->device.gpu_key)
                  << "; " << spec.key << " uses datasheet ceilings\n";
    }
    return ceilings_from_spec(spec);
}

}  // namespace roofsim::cli
