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

Graph graph_input_arg(const std::string& model, const std::string& graph, std::int64_t size, const std::string& command) {
    if (!model.empty()) {
        auto g = zoo::model(model, size);
        if (!g) throw UsageError("unknown model '" + model + "'; built in: " + zoo::joined_model_names());
        return std::move(*g);
    }
    if (graph.empty()) throw UsageError(command + " needs --model NAME or --graph FILE");
    if (size > 0) throw UsageError(size_needs_model);
    return load_graph(graph);
}

std::vector<std::int64_t> integer_list_arg(const std::string& text, const std::string& option) {
    const auto number = [&](std::string_view item, std::string_view whole) {
        std::int64_t v = 0;
        const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
        if (ec == std::errc::result_out_of_range) throw UsageError(option + " " + std::string(whole) + ": does not fit in a 64-bit integer");
        if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || v <= 0) {
            throw UsageError(option + ": '" + std::string(whole) + "' is not a positive integer, a range A-B or a range A-B/STEP");
        }
        return v;
    };
    constexpr std::int64_t most = 1000000;  // values in one list
    std::vector<std::int64_t> values;
    for (const auto& item : split_list(text)) {
        const std::string_view v(item);
        const auto dash = v.find('-');
        if (dash == std::string_view::npos) {
            values.push_back(number(v, item));
            continue;
        }
        const auto slash = v.find('/', dash);
        const std::int64_t from = number(v.substr(0, dash), item);
        const std::int64_t to = number(v.substr(dash + 1, slash == std::string_view::npos ? std::string_view::npos : slash - dash - 1), item);
        const std::int64_t step = slash == std::string_view::npos ? 1 : number(v.substr(slash + 1), item);
        if (to < from) throw UsageError(option + ": the range " + item + " ends before it starts");
        if ((to - from) / step + static_cast<std::int64_t>(values.size()) >= most) {
            throw UsageError(option + ": " + item + " gives more than " + std::to_string(most) + " values");
        }
        for (std::int64_t x = from; x <= to; x += step) {
            values.push_back(x);
            if (to - x < step) break;  // no overflow past INT64_MAX
        }
    }
    if (values.empty()) throw UsageError(option + ": no value given");
    return values;
}

GpuContext default_gpu_context(const GpuSpec& spec, const FrameworkProfile* framework) {
    const FrameworkProfile* fw = framework ? framework : default_framework_profile(spec.key);
    GpuContext g{make_default_cost_context(spec, fw), fw};
    add_builtin_collectives(g.ctx, spec.key);
    return g;
}

void ClusterOptions::add_to(CLI::App* cmd) {
    cmd->add_option("--gpus-per-node", gpus_per_node,
                    "GPUs one node holds (an HGX board, a server of PCIe cards); --num-gpus beyond it spans nodes")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{16}))
        ->capture_default_str();
    cmd->add_option("--network-gbits", network_gbits,
                    "The network between nodes, Gbit/s one way per node (e.g. 1600: 8 x 200 Gbit/s InfiniBand HDR)")
        ->check(CLI::Range(1e-3, 1e6));
    cmd->add_option("--network-latency-us", network_latency_us, "One NCCL ring step over the network, microseconds")
        ->check(CLI::Range(0.0, 1e6))
        ->capture_default_str();
}

void ClusterOptions::apply(CostContext& ctx, std::int64_t num_gpus) const {
    ctx.collectives.gpus_per_node = static_cast<int>(gpus_per_node);
    ctx.collectives.network = BytesPerSecond(network_gbits * 1e9 / 8);
    ctx.collectives.network_step_latency = Seconds(network_latency_us * 1e-6);
    ctx.collectives.network_source = format_number("%g", network_gbits) + " Gbit/s a node (--network-gbits), " +
                                     format_number("%g", network_latency_us) + " us a ring step";
    if (num_gpus <= gpus_per_node) return;
    const std::string n = "--num-gpus " + std::to_string(num_gpus);
    if (num_gpus % gpus_per_node != 0) {
        throw UsageError(n + ": does not fill nodes of " + std::to_string(gpus_per_node) + " GPUs (--gpus-per-node); give a multiple of " +
                         std::to_string(gpus_per_node));
    }
    if (!(network_gbits > 0)) {
        throw UsageError(n + ": beyond one node's " + std::to_string(gpus_per_node) +
                         " GPUs (--gpus-per-node); give --network-gbits, the network between the nodes");
    }
}

std::string ClusterOptions::describe(std::int64_t num_gpus) const {
    if (num_gpus <= 1) return "";
    if (num_gpus <= gpus_per_node) return std::to_string(num_gpus) + " GPUs in one node";
    return std::to_string(num_gpus / gpus_per_node) + " nodes of " + std::to_string(gpus_per_node) + " GPUs, " +
           format_number("%g", network_gbits) + " Gbit/s between nodes";
}

std::string csv_field(const std::string& text) {
    if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
    std::string q = "\"";
    for (char c : text) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
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
