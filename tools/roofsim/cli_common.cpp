#include "cli_common.hpp"
#include "quantity_parse.hpp"

#include <fstream>
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

ComputeUnit precision_arg(const std::string& text) {
    auto unit = parse_compute_unit(text);
    if (!unit) {
        std::string keys;
        for (auto u : all_compute_units) keys += (keys.empty() ? "" : ", ") + std::string(to_string(u));
        throw UsageError("unknown precision '" + text + "'; use one of: " + keys +
                         " (or the short forms tf32, fp16, bf16, fp8, int8 for tensor cores)");
    }
    return *unit;
}

double amount_arg(const std::string& text, const std::string& option) {
    auto v = parse_amount(text);
    if (!v) {
        throw UsageError(option + ": '" + text + "' is not a non-negative amount (examples: 1e12, 4.5G, 2GiB, 300T)");
    }
    return *v;
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

std::string ms(Seconds t) { return format_number("%.3f", to_milliseconds(t)); }

void write_file(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    if (!out) throw std::runtime_error(path + ": cannot open for writing");
    out << text;
    if (!out.flush()) throw std::runtime_error(path + ": write failed");
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
