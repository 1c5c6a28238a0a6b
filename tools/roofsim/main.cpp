// roofsim: GPU specs, rooflines and kernel times from the command line.
// Exit codes: 0 ok, 1 error (bad file, failed computation), 2 usage (bad option or argument value).

#include "data_dir.hpp"
#include "quantity_parse.hpp"
#include "text_table.hpp"

#include <roofsim/roofsim.hpp>
#include <validate/validation.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace {

using roofsim::cli::format_number;
using roofsim::cli::percent_or_dash;
using roofsim::cli::TextTable;

constexpr int exit_ok = 0;
constexpr int exit_error = 1;
constexpr int exit_usage = 2;

/// A bad option value found after parsing (unknown GPU, unknown precision): exit code 2.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// The GPUs the main job compares: the seeds of the project plus the Hopper parts.
const std::vector<std::string> seed_gpus = {"rtx-3090", "rtx-a6000", "a100-40gb-sxm", "a100-80gb-sxm",
                                            "h100-sxm", "h200-sxm"};

const roofsim::GpuSpec& gpu_arg(const std::string& key) {
    try {
        return roofsim::gpu_or_throw(key);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
}

roofsim::ComputeUnit precision_arg(const std::string& text) {
    auto unit = roofsim::parse_compute_unit(text);
    if (!unit) {
        std::string keys;
        for (auto u : roofsim::all_compute_units) keys += (keys.empty() ? "" : ", ") + std::string(to_string(u));
        throw UsageError("unknown precision '" + text + "'; use one of: " + keys +
                         " (or the short forms tf32, fp16, bf16, fp8, int8 for tensor cores)");
    }
    return *unit;
}

double amount_arg(const std::string& text, const std::string& option) {
    auto v = roofsim::cli::parse_amount(text);
    if (!v) {
        throw UsageError(option + ": '" + text +
                         "' is not a non-negative amount (examples: 1e12, 4.5G, 2GiB, 300T)");
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

std::string tflops(std::optional<roofsim::FlopsPerSecond> r) {
    return r ? format_number("%.1f", roofsim::to_tflops_per_second(*r)) : "-";
}

void write_file(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    if (!out) throw std::runtime_error(path + ": cannot open for writing");
    out << text;
    if (!out.flush()) throw std::runtime_error(path + ": write failed");
}

// ---- specs ---------------------------------------------------------------------------------

void print_spec_table(std::ostream& out) {
    using roofsim::ComputeUnit;
    TextTable t({"key", "name", "arch", "SMs", "boost MHz", "FP64", "FP32", "TF32 TC", "FP16 TC", "BF16 TC",
                 "FP8 TC", "mem GiB", "mem GB/s", "L2 MiB", "TDP W", "NVLink GB/s"});
    for (const auto& g : roofsim::builtin_gpus()) {
        t.add_row({g.key, g.name, g.architecture.value, std::to_string(g.sm_count.value),
                   format_number("%.0f", g.boost_clock.value.value() / 1e6), tflops(g.peak(ComputeUnit::fp64)),
                   tflops(g.peak(ComputeUnit::fp32)), tflops(g.peak(ComputeUnit::tf32_tensor)),
                   tflops(g.peak(ComputeUnit::fp16_tensor)), tflops(g.peak(ComputeUnit::bf16_tensor)),
                   tflops(g.peak(ComputeUnit::fp8_tensor)), format_number("%.0f", roofsim::to_gib(g.memory_size.value)),
                   format_number("%.0f", roofsim::to_gb_per_second(g.memory_bandwidth.value)),
                   format_number("%.0f", g.l2_size.value.value() / (1024.0 * 1024.0)),
                   format_number("%.0f", g.tdp_watts.value),
                   g.nvlink_bandwidth ? format_number("%.0f", roofsim::to_gb_per_second(g.nvlink_bandwidth->value))
                                      : "-"});
    }
    t.print(out);
    out << "\nTFLOP/s, dense. TC = tensor cores; FP16/BF16 TC with FP32 accumulate. Sources: roofsim specs --gpu KEY\n";
}

void print_spec_detail(const roofsim::GpuSpec& g, std::ostream& out) {
    out << g.name << " (" << g.key << ")\n";
    out << "nvidia-smi names: ";
    for (std::size_t i = 0; i < g.nvidia_smi_names.size(); ++i) out << (i ? ", " : "") << g.nvidia_smi_names[i];
    out << "\n\n";
    TextTable t({"figure", "value", "source"});
    auto row = [&](const std::string& name, const std::string& value, const std::string& source) {
        t.add_row({name, value, g.cite(source)});
    };
    row("architecture", g.architecture.value, g.architecture.source);
    row("chip", g.chip.value, g.chip.source);
    row("compute capability", g.compute_capability.value, g.compute_capability.source);
    row("form factor", g.form_factor.value, g.form_factor.source);
    row("SMs", std::to_string(g.sm_count.value), g.sm_count.source);
    row("boost clock", format_number("%.0f MHz", g.boost_clock.value.value() / 1e6), g.boost_clock.source);
    for (const auto& [unit, p] : g.peak_compute) {
        row(std::string(to_string(unit)), format_number("%.1f TFLOP/s", roofsim::to_tflops_per_second(p.value)),
            p.source);
    }
    row("memory", g.memory_type.value, g.memory_type.source);
    row("memory size", format_number("%.0f GiB", roofsim::to_gib(g.memory_size.value)), g.memory_size.source);
    row("memory bandwidth", format_number("%.0f GB/s", roofsim::to_gb_per_second(g.memory_bandwidth.value)),
        g.memory_bandwidth.source);
    row("L2 cache", format_number("%.0f MiB", g.l2_size.value.value() / (1024.0 * 1024.0)), g.l2_size.source);
    if (g.l2_bandwidth) {
        row("L2 bandwidth", format_number("%.0f GB/s", roofsim::to_gb_per_second(g.l2_bandwidth->value)),
            g.l2_bandwidth->source);
    }
    row("TDP", format_number("%.0f W", g.tdp_watts.value), g.tdp_watts.source);
    row("PCIe", "Gen" + std::to_string(g.pcie_generation.value), g.pcie_generation.source);
    row("PCIe bandwidth", format_number("%.0f GB/s bidir.", roofsim::to_gb_per_second(g.pcie_bandwidth.value)),
        g.pcie_bandwidth.source);
    if (g.nvlink_generation && g.nvlink_bandwidth) {
        row("NVLink", "gen " + std::to_string(g.nvlink_generation->value), g.nvlink_generation->source);
        row("NVLink bandwidth", format_number("%.0f GB/s bidir.", roofsim::to_gb_per_second(g.nvlink_bandwidth->value)),
            g.nvlink_bandwidth->source);
    }
    t.print(out);
}

// ---- roofline ------------------------------------------------------------------------------

/// The ceilings for a GPU: from the calibration when it describes that GPU, else from the datasheet.
roofsim::Ceilings ceilings_for(const roofsim::GpuSpec& spec, const std::optional<roofsim::Calibration>& calibration) {
    if (calibration && calibration->device.gpu_key == spec.key) {
        return roofsim::ceilings_from_calibration(*calibration, spec);
    }
    if (calibration) {
        std::cerr << "roofsim: note: the calibration describes "
                  << (calibration->device.gpu_key.empty() ? calibration->device.name : calibration->device.gpu_key)
                  << "; " << spec.key << " uses datasheet ceilings\n";
    }
    return roofsim::ceilings_from_spec(spec);
}

nlohmann::json roofline_json(const roofsim::Ceilings& c, const std::vector<roofsim::ComputeUnit>& units) {
    nlohmann::json compute = nlohmann::json::array();
    for (auto u : units) {
        if (!c.has(u)) continue;
        nlohmann::json ridges = nlohmann::json::object();
        for (const auto& [level, bw] : c.bandwidth) {
            ridges[std::string(to_string(level))] = roofsim::ridge_point(u, level, c).value();
        }
        compute.push_back({{"unit", to_string(u)},
                           {"flops_per_second", c.rate(u).value()},
                           {"ridge_flops_per_byte", ridges},
                           {"source", c.compute.at(u).source}});
    }
    nlohmann::json bandwidth = nlohmann::json::array();
    for (const auto& [level, bw] : c.bandwidth) {
        bandwidth.push_back({{"level", to_string(level)}, {"bytes_per_second", bw.value.value()}, {"source", bw.source}});
    }
    nlohmann::json j = {{"gpu", c.gpu_key}, {"name", c.gpu_name}, {"origin", c.origin},
                        {"compute", compute}, {"bandwidth", bandwidth}};
    if (c.launch_latency) {
        j["launch_latency_seconds"] = {{"value", c.launch_latency->value.value()},
                                       {"source", c.launch_latency->source}};
    }
    return j;
}

void print_roofline_detail(const roofsim::Ceilings& c, const std::vector<roofsim::ComputeUnit>& units,
                           std::ostream& out) {
    out << "Roofline of " << c.gpu_name << " (" << c.gpu_key << "), ceilings from " << c.origin << "\n\n";
    const bool has_l2 = c.has(roofsim::MemoryLevel::l2);
    TextTable t = has_l2 ? TextTable({"ceiling", "TFLOP/s", "ridge DRAM FLOP/B", "ridge L2 FLOP/B", "source"})
                         : TextTable({"ceiling", "TFLOP/s", "ridge DRAM FLOP/B", "source"});
    for (auto u : units) {
        if (!c.has(u)) continue;
        std::vector<std::string> row = {std::string(to_string(u)), tflops(c.rate(u)),
                                        format_number("%.1f", roofsim::ridge_point(u, roofsim::MemoryLevel::dram, c).value())};
        if (has_l2) row.push_back(format_number("%.1f", roofsim::ridge_point(u, roofsim::MemoryLevel::l2, c).value()));
        row.push_back(c.compute.at(u).source);
        t.add_row(row);
    }
    t.print(out);
    out << '\n';
    TextTable m({"memory level", "GB/s", "source"});
    for (const auto& [level, bw] : c.bandwidth) {
        m.add_row({std::string(to_string(level)), format_number("%.0f", roofsim::to_gb_per_second(bw.value)), bw.source});
    }
    if (c.launch_latency) {
        m.add_row({"kernel floor", format_number("%.2f us", roofsim::to_microseconds(c.launch_latency->value)),
                   c.launch_latency->source});
    }
    m.print(out);
}

void print_roofline_table(const std::vector<roofsim::Ceilings>& all, const std::vector<roofsim::ComputeUnit>& units,
                          std::ostream& out) {
    std::vector<std::string> header = {"GPU", "DRAM GB/s"};
    for (auto u : units) header.push_back(std::string(to_string(u)) + " TFLOP/s");
    for (auto u : units) header.push_back(std::string(to_string(u)) + " ridge");
    header.push_back("ceilings from");
    TextTable t(header);
    for (const auto& c : all) {
        std::vector<std::string> row = {c.gpu_key,
                                        format_number("%.0f", roofsim::to_gb_per_second(c.rate(roofsim::MemoryLevel::dram)))};
        for (auto u : units) row.push_back(c.has(u) ? tflops(c.rate(u)) : "-");
        for (auto u : units) {
            row.push_back(c.has(u) ? format_number("%.1f", roofsim::ridge_point(u, roofsim::MemoryLevel::dram, c).value())
                                   : "-");
        }
        row.push_back(c.origin);
        t.add_row(row);
    }
    t.print(out);
    out << "\nTFLOP/s dense; ridge = FLOP per DRAM byte where compute and bandwidth ceilings meet.\n"
           "fp16-tensor and bf16-tensor accumulate in FP32 (GeForce parts run them at half the FP16-accumulate rate).\n";
}

// ---- kernel --------------------------------------------------------------------------------

void print_kernel(const roofsim::Ceilings& c, const roofsim::KernelWork& k, const roofsim::RooflineTime& r,
                  std::ostream& out) {
    using roofsim::to_microseconds;
    out << "Kernel on " << c.gpu_name << " (" << c.gpu_key << "), ceilings from " << c.origin << "\n";
    out << "  work:       " << format_number("%.4g", k.flops.value()) << " FLOP on " << to_string(k.unit) << ", "
        << format_number("%.4g", k.dram_bytes.value()) << " DRAM bytes";
    if (k.l2_bytes) out << ", " << format_number("%.4g", k.l2_bytes->value()) << " L2 bytes";
    out << "\n";
    if (k.dram_bytes.value() > 0) {
        out << "  intensity:  " << format_number("%.3g", (k.flops / k.dram_bytes).value()) << " FLOP/B (ridge "
            << format_number("%.3g", roofsim::ridge_point(k.unit, roofsim::MemoryLevel::dram, c).value()) << ")\n";
    }
    out << "  time:       " << format_number("%.3f us", to_microseconds(r.time)) << ", " << to_string(r.bound)
        << "-bound\n";
    out << "  compute:    " << format_number("%.3f us", to_microseconds(r.compute_time)) << "\n";
    out << "  dram:       " << format_number("%.3f us", to_microseconds(r.dram_time)) << "\n";
    if (k.l2_bytes) out << "  l2:         " << format_number("%.3f us", to_microseconds(r.l2_time)) << "\n";
    if (c.launch_latency) out << "  floor:      " << format_number("%.3f us", to_microseconds(r.latency_time)) << "\n";
    out << "  attains:    " << format_number("%.2f TFLOP/s", roofsim::to_tflops_per_second(r.attained(k))) << "\n";
}

// ---- predict -------------------------------------------------------------------------------

std::string ms(roofsim::Seconds t) { return format_number("%.3f", roofsim::to_milliseconds(t)); }

/// Errors (fractions) by (op or model, precision mode).
using ErrorGroups = std::map<std::pair<std::string, std::string>, std::vector<double>>;

/// One row per group: its case count, the median |error| (the upper one of an even count) and the worst.
void print_error_groups(const ErrorGroups& groups, const std::string& what, std::ostream& out) {
    TextTable t({"op or model", "mode", "cases", "median |" + what + "| %", "worst " + what + " %"});
    for (const auto& [key, errors] : groups) {
        std::vector<double> a;
        for (double x : errors) a.push_back(std::abs(x));
        std::sort(a.begin(), a.end());
        const double worst = *std::max_element(errors.begin(), errors.end(), [](double x, double y) { return std::abs(x) < std::abs(y); });
        t.add_row({key.first, key.second, std::to_string(errors.size()), format_number("%.1f", 100 * a[a.size() / 2]),
                   format_number("%+.1f", 100 * worst)});
    }
    t.print(out);
}

/// `roofsim validate --runs`: each run's own summary, then each case's median error over the runs.
/// `roofsim validate --runs --phases`: each model case's phases, each timed on its own, measured
/// against predicted, run by run.
void print_phases(const roofsim::RunsEvaluation& v, std::ostream& out) {
    out << "\nModel steps by phase, each timed on its own between two synchronizes (ms, measured / predicted;\n"
           "the runs newest first; forward + backward minus forward in brackets):\n";
    TextTable t({"case", "path", "run", "forward", "forward + backward", "(backward)", "optimizer"});
    const auto pair = [](roofsim::Seconds measured, roofsim::Seconds predicted) { return ms(measured) + " / " + ms(predicted); };
    for (const auto& [path, cases] : {std::pair{"zoo", &v.cases}, std::pair{"exported", &v.exported}}) {
        for (const auto& c : *cases) {
            for (std::size_t i = 0; i < c.phases.size(); ++i) {
                const auto& [m, p] = c.phases[i];
                t.add_row({c.id, path, std::to_string(i + 1), pair(m.forward, p.forward), pair(m.forward_backward, p.forward_backward),
                           pair(m.forward_backward - m.forward, p.forward_backward - p.forward), pair(m.optimizer, p.optimizer)});
            }
        }
    }
    t.print(out);
}

/// `roofsim validate --runs --passes`: each model case's passes over the runs, each pass's median
/// step against the prediction at the profile's host speed and at its own canary's.
void print_passes(const roofsim::RunsEvaluation& v, std::ostream& out) {
    out << "\nModel steps pass by pass (each pass's median step, passes minutes apart in one process; the error %\n"
           "at the framework profile's host speed, and at the host speed of the pass's own canary: median, lowest,\n"
           "highest over every pass of every run whose passes are known):\n";
    TextTable t({"case", "path", "passes", "at profile's host", "lowest", "highest", "at pass's canary", "lowest", "highest",
                 "canary x"});
    const auto three = [](std::vector<double> errors) -> std::array<std::string, 3> {
        if (errors.empty()) return {"-", "-", "-"};
        const auto [lowest, highest] = std::minmax_element(errors.begin(), errors.end());
        return {format_number("%+.1f", 100 * roofsim::detail::quantile(errors, 0.5)), format_number("%+.1f", 100 * *lowest),
                format_number("%+.1f", 100 * *highest)};
    };
    for (const auto& [path, cases] : {std::pair{"zoo", &v.cases}, std::pair{"exported", &v.exported}}) {
        for (const auto& c : *cases) {
            if (c.passes.empty()) continue;
            std::vector<double> at_profiled, at_canary, scales;
            for (const auto& p : c.passes) {
                at_profiled.push_back(p.error_at_profiled);
                if (p.error_at_canary && p.host_time_scale) {
                    at_canary.push_back(*p.error_at_canary);
                    scales.push_back(*p.host_time_scale);
                }
            }
            const auto profiled = three(at_profiled);
            const auto canary = three(at_canary);
            std::string scale_range = "-";
            if (!scales.empty()) {
                const auto [lowest, highest] = std::minmax_element(scales.begin(), scales.end());
                scale_range = format_number("%.2f", *lowest) + "-" + format_number("%.2f", *highest);
            }
            t.add_row({c.id, path, std::to_string(c.passes.size()), profiled[0], profiled[1], profiled[2], canary[0], canary[1],
                       canary[2], scale_range});
        }
    }
    t.print(out);
}

void print_validation_runs(const roofsim::RunsEvaluation& v, const std::string& manifest, roofsim::HostSpeed speed, bool all_cases,
                           bool phases, bool passes, std::ostream& out) {
    out << "Validation over " << v.runs.size() << " runs (" << manifest
        << "), each predicted with the framework profile and calibration measured with it, at "
        << (speed == roofsim::HostSpeed::measured ? "each case's canary host speed" : "the framework profile's host speed") << ":\n";
    for (const auto& r : v.runs) {
        out << "  " << r.name << " (" << r.origin << "): layer cases median |error| " << format_number("%.1f", 100 * r.layer_median)
            << "%, 90th percentile " << format_number("%.1f", 100 * r.layer_p90) << "%; model steps worst "
            << format_number("%.1f", 100 * r.model_worst) << "%";
        if (r.host_canary) {  // how fast and how steady the host was while its probe measured
            out << "; the probe's canary " << format_number("%.2f", 1e6 * r.host_canary->value()) << " us";
            if (r.host_canary_p10 && r.host_canary_p90) {
                out << " (10th-90th percentile " << format_number("%.2f", 1e6 * r.host_canary_p10->value()) << "-"
                    << format_number("%.2f", 1e6 * r.host_canary_p90->value()) << ")";
            }
        }
        out << "\n";
    }
    const auto by_run = [](const roofsim::CaseOverRuns& c) {
        std::string text;
        for (double e : c.errors) {
            if (!text.empty()) text += ' ';
            text += format_number("%+.1f", 100 * e);
        }
        return text;
    };
    const auto table = [&](const std::vector<roofsim::CaseOverRuns>& cases, bool models_only) {
        TextTable t({"case", "runs", "median error %", "errors % by run, newest first", "paced by", "host / GPU",
                     "step on a host " + format_number("%.1f", roofsim::validation_host_swing) + "x slower %",
                     "passes apart %", "median memory error %"});
        for (const auto& c : cases) {
            if (models_only && !c.model) continue;
            t.add_row({c.id, std::to_string(c.errors.size()), format_number("%+.1f", 100 * c.median_error()), by_run(c),
                       c.host_bound() ? "host" : "GPU",
                       std::isfinite(c.median_host_over_gpu()) ? format_number("%.2f", c.median_host_over_gpu()) : "no GPU work",
                       c.model ? format_number("%+.1f", 100 * c.median_host_swing_effect()) : "-",
                       percent_or_dash("%.1f", c.median_pass_spread()),
                       percent_or_dash("%+.1f", c.median_memory_error())});
        }
        t.print(out);
    };
    out << '\n';
    if (all_cases) {
        table(v.cases, false);
    } else {
        ErrorGroups groups;
        for (const auto& c : v.cases) groups[{c.family, c.precision}].push_back(c.median_error());
        print_error_groups(groups, "median error", out);
        out << "\nModel steps:\n";
        table(v.cases, true);
    }
    const auto layers = [](const roofsim::CaseOverRuns& c) { return !c.model; };
    const auto models = [](const roofsim::CaseOverRuns& c) { return c.model; };
    out << "\nover the runs (each case's median error): layer cases: median |error| "
        << format_number("%.1f", 100 * roofsim::median_error_quantile(v.cases, 0.5, layers)) << "%, 90th percentile "
        << format_number("%.1f", 100 * roofsim::median_error_quantile(v.cases, 0.9, layers)) << "%; model steps: median "
        << format_number("%.1f", 100 * roofsim::median_error_quantile(v.cases, 0.5, models)) << "%, worst "
        << format_number("%.1f", 100 * roofsim::median_error_quantile(v.cases, 1.0, models)) << "%\n";
    if (!v.exported.empty()) {
        out << "\nModel steps predicted from the exported IRs:\n";
        table(v.exported, true);
    }
    if (phases) print_phases(v, out);
    if (passes) print_passes(v, out);
}

void print_prediction(const roofsim::Prediction& p, std::size_t top, std::ostream& out) {
    out << "Training step of " << p.kernels.model << " on " << p.gpu_key << ", batch " << p.batch << ", " << roofsim::to_string(p.precision)
        << "\n  ceilings: " << p.ceilings_origin << "\n  host costs: " << p.host_costs_source << "\n\n";
    std::vector<const roofsim::LayerTime*> rows;
    for (const auto& r : p.layers) rows.push_back(&r);
    if (top > 0 && top < rows.size()) {
        std::partial_sort(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(top), rows.end(), [](auto* a, auto* b) {
            return (a->forward_gpu + a->backward_gpu) > (b->forward_gpu + b->backward_gpu);
        });
        rows.resize(top);
    }
    TextTable t({"layer", "op", "fwd ms", "bwd ms", "host ms", "GFLOP", "MB", "bound", "share %"});
    for (const auto* r : rows) {
        t.add_row({r->layer.str(), r->op.str(), ms(r->forward_gpu), ms(r->backward_gpu), ms(r->forward_host + r->backward_host),
                   format_number("%.2f", r->flops.value() / 1e9), format_number("%.1f", r->bytes.value() / 1e6),
                   std::string(to_string(r->bound)) + (r->flagged ? " (flagged)" : ""), format_number("%.1f", 100 * r->share)});
    }
    t.print(out);
    if (top > 0 && top < p.layers.size()) out << "(top " << top << " of " << p.layers.size() << " rows by GPU time)\n";
    out << "\nstep " << ms(p.step_time) << " ms = ";
    if (p.zero_grad_time.value() > 0) out << "zero_grad " << ms(p.zero_grad_time) << " + ";
    out << "forward " << ms(p.forward_time) << " + backward " << ms(p.backward_time)
        << " + optimizer " << ms(p.optimizer_time) << " (GPU busy " << ms(p.gpu_time) << " ms";
    if (p.gpu_gap_time.value() > 0) out << " + " << ms(p.gpu_gap_time) << " ms between kernels";
    out << ", host issue " << ms(p.host_time) << " ms, " << p.kernels.kernels.size() << " kernels)\n";
    out << format_number("%.1f", static_cast<double>(p.batch) / p.step_time.value()) << " samples/s; "
        << format_number("%.2f", p.parameters / 1e6) << " M parameters\n";
    const auto gib = [](roofsim::Bytes b) { return format_number("%.2f", roofsim::to_gib(b)); };
    out << "memory GiB: peak " << gib(p.memory.peak) << " = parameters " << gib(p.memory.parameters) << ", gradients "
        << gib(p.memory.gradients) << ", optimizer state " << gib(p.memory.optimizer_state) << ", activations "
        << gib(p.memory.activations) << ", inputs " << gib(p.memory.inputs) << ", autocast copies "
        << gib(p.memory.autocast_copies) << "\n";
    if (p.flagged_kernels > 0) {
        out << "flagged: " << p.flagged_kernels << " kernels have no cost model (costed on the roofline from their bytes, "
            << ms(p.flagged_gpu_time) << " ms, " << format_number("%.1f", 100 * (p.flagged_gpu_time / p.gpu_time))
            << "% of GPU time; their real time is unknown):";
        std::map<std::string, int> ops;
        for (const auto* k : roofsim::flagged_kernels(p.kernels)) ops[k->op.str()] += 1;
        for (const auto& [op, n] : ops) out << ' ' << op << " x" << n;
        out << '\n';
    }
}

void print_operators(const roofsim::Prediction& p, std::size_t top, std::ostream& out) {
    const auto ops = roofsim::time_by_operator(p);
    TextTable t({"operator", "kind", "kernels", "GPU ms", "GFLOP", "MB", "share %"});
    std::size_t shown = 0;
    for (const auto& o : ops) {
        if (top > 0 && shown == top) break;
        t.add_row({o.op, std::string(to_string(o.kind)), std::to_string(o.kernels), ms(o.gpu_time),
                   format_number("%.2f", o.flops.value() / 1e9), format_number("%.1f", o.bytes.value() / 1e6),
                   format_number("%.1f", 100 * o.share)});
        ++shown;
    }
    t.print(out);
    if (shown < ops.size()) out << "(top " << shown << " of " << ops.size() << " operators by GPU time; --by-op lists all)\n";
}

/// What `predict --graph/--ir FILE` reads: a layer graph or a kernel IR, the file's `kind` says which.
std::variant<roofsim::Graph, roofsim::KernelIr> load_model_file(const std::string& path) {
    const nlohmann::json doc = roofsim::detail::read_json_file(path);
    const std::string name = std::filesystem::path(path).filename().string();
    if (doc.is_object() && doc.contains("kind") && doc["kind"] == "roofsim-kernel-ir") return roofsim::kernel_ir_from_json(doc, name);
    return roofsim::graph_from_json(doc, name);
}

void print_prediction_csv(const roofsim::Prediction& p, std::ostream& out) {
    out << "layer,op,forward_gpu_seconds,backward_gpu_seconds,host_seconds,flops,bytes,bound,share\n";
    for (const auto& r : p.layers) {
        out << r.layer << ',' << r.op << ',' << r.forward_gpu.value() << ',' << r.backward_gpu.value() << ','
            << (r.forward_host + r.backward_host).value() << ',' << r.flops.value() << ',' << r.bytes.value() << ','
            << to_string(r.bound) << ',' << r.share << '\n';
    }
}

}  // namespace

int main(int argc, char** argv) {
    roofsim::cli::use_installed_data_dir();
    CLI::App app{"roofsim: GPU specs, rooflines and kernel times for PyTorch training on NVIDIA GPUs"};
    app.require_subcommand(1);
    app.fallthrough();
    std::string calibration_path;
    app.add_option("--calibration", calibration_path,
                   "Calibration profile (JSON) measured by roofsim-calibrate; replaces datasheet ceilings for its GPU");

    // specs
    auto* specs = app.add_subcommand("specs", "List the built-in GPU datasheet specifications");
    std::string specs_gpu;
    bool specs_json = false;
    specs->add_option("--gpu", specs_gpu, "One GPU by key or nvidia-smi name: all figures with their sources");
    specs->add_flag("--json", specs_json, "Print JSON (SI units, unit in each key)");

    // roofline
    auto* roofline = app.add_subcommand("roofline", "Roofline ceilings and ridge points of one or more GPUs");
    std::string roofline_gpus, roofline_precision, roofline_svg_path;
    bool roofline_json_flag = false;
    roofline->add_option("--gpu", roofline_gpus,
                         "GPU key, or comma-separated keys (default: rtx-3090, rtx-a6000, A100s, H100, H200)");
    roofline->add_option("--precision", roofline_precision,
                         "One ceiling: fp64, fp32, tf32, fp16, bf16, fp8, int8, or a key such as fp16-cuda, fp16-fp16acc-tensor");
    roofline->add_option("--svg", roofline_svg_path, "Write a log-log roofline chart (one GPU)");
    roofline->add_flag("--json", roofline_json_flag, "Print JSON");

    // kernel
    auto* kernel = app.add_subcommand("kernel", "Time of a kernel from its FLOPs and bytes, and the ceiling it hits");
    std::string kernel_gpu, kernel_flops, kernel_bytes, kernel_l2_bytes, kernel_precision = "fp32";
    bool kernel_json = false;
    kernel->add_option("--gpu", kernel_gpu, "GPU key or nvidia-smi name")->required();
    kernel->add_option("--flops", kernel_flops, "Floating-point operations (FMA = 2); suffixes k M G T P")->required();
    kernel->add_option("--bytes", kernel_bytes, "DRAM bytes read plus written; suffixes k M G T, Ki Mi Gi")->required();
    kernel->add_option("--l2-bytes", kernel_l2_bytes, "Bytes through L2, where known");
    kernel->add_option("--precision", kernel_precision, "Compute unit (default fp32 on CUDA cores)")->capture_default_str();
    kernel->add_flag("--json", kernel_json, "Print JSON");

    // predict
    auto* predict = app.add_subcommand("predict", "Predict one training step: per-layer times, totals, memory");
    std::string predict_graph, predict_model, predict_gpu, predict_precision = "fp32", predict_optimizer = "sgd";
    std::int64_t predict_batch = 32, predict_size = 0;
    std::size_t predict_top = 0;
    bool predict_json = false, predict_csv = false, predict_datasheet = false, predict_fused = false;
    auto* graph_option = predict->add_option("--graph", predict_graph,
                                             "Layer graph JSON (docs/graph-format.md), or a kernel IR file (its kind says which)");
    std::string predict_ir;
    auto* ir_option = predict->add_option("--ir,--torch-ir", predict_ir,
                                          "Kernel IR JSON (docs/ir-format.md), e.g. from python3 -m roofsim_export; "
                                          "its precision, batch and optimizer are the ones it was captured with")
                          ->excludes(graph_option);
    auto* model_option = predict->add_option("--model", predict_model, "A built-in model: resnet50, bert-base, gpt2-small")
                             ->excludes(graph_option)
                             ->excludes(ir_option);
    (void)model_option;
    bool predict_strict = false, predict_by_op = false;
    std::string predict_emit_ir;
    predict->add_flag("--strict", predict_strict, "Refuse a model with ops that have no cost model (flagged), listing them");
    predict->add_flag("--by-op", predict_by_op, "Table by operator (aten op or kernel) instead of by layer");
    predict->add_option("--emit-ir", predict_emit_ir, "Also write the kernel IR the graph or model lowers to (docs/ir-format.md)");
    predict->add_option("--size", predict_size, "Built-in model's image size or sequence length (default 224 / 128 / 1024)");
    predict->add_option("--gpu", predict_gpu, "GPU key or nvidia-smi name (default: the calibration's GPU)");
    auto* precision_option =
        predict->add_option("--precision", predict_precision, "fp32, fp32-strict, tf32, amp-bf16, amp-fp16, bf16")->capture_default_str();
    auto* batch_option = predict->add_option("--batch", predict_batch, "Batch size")->capture_default_str();
    auto* optimizer_option =
        predict->add_option("--optimizer", predict_optimizer, "sgd (momentum), adam, adamw, none")->capture_default_str();
    auto* fused_option = predict->add_flag("--fused", predict_fused, "The optimizer's fused=True implementation (default: foreach)");
    bool predict_no_weight_decay = false;
    auto* no_weight_decay_option = predict->add_flag(
        "--no-weight-decay", predict_no_weight_decay,
        "The optimizer without weight decay (default: with it, as a training recipe has it: SGD's costs one more foreach "
        "pass and its own host time, AdamW's one more multiply)");
    std::string predict_framework;
    predict->add_option("--framework", predict_framework,
                        "Framework profile (host costs) from calibrate/torch_framework_probe.py (default: the built-in one)");
    double predict_host_time_scale = 1.0;
    predict->add_option("--host-time-scale", predict_host_time_scale,
                        "Every host (framework) cost times this: a host CPU slower (> 1) or faster (< 1) than the one the "
                        "framework profile was measured on, e.g. the ratio of the two hosts' eager_op_add figures")
        ->check(
            [](const std::string& text) {
                double v = 0;
                std::istringstream in(text);
                in >> v;
                return in && v > 0 && std::isfinite(v) ? std::string() : "must be a positive number, got " + text;
            },
            "POSITIVE")
        ->capture_default_str();
    predict->add_flag("--datasheet", predict_datasheet, "Datasheet ceilings even where a measured profile is built in");
    predict->add_option("--top", predict_top, "Show the K layers with the most GPU time");
    predict->add_flag("--json", predict_json, "Print JSON");
    predict->add_flag("--csv", predict_csv, "Print CSV, one row per layer");
    std::string predict_svg;
    predict->add_option("--svg", predict_svg, "Write an SVG report: roofline with every layer as a point, per-layer time bars");

    // validate
    auto* validate = app.add_subcommand("validate", "Compare predictions with PyTorch timings from tools/validate/measure_pytorch.py");
    std::string validate_file, validate_framework, validate_runs;
    bool validate_cases = false;
    auto* measurements_option = validate->add_option("--measurements", validate_file, "A data/validation/*.json file");
    auto* runs_option = validate->add_option(
        "--runs", validate_runs,
        "A list of validation runs (data/validation/runs.json): each predicted with its own framework profile and "
        "calibration, each case's error the median over the runs");
    measurements_option->excludes(runs_option);
    auto* framework_option =
        validate->add_option("--framework", validate_framework, "Framework profile (default: the built-in one of the measured GPU)");
    framework_option->excludes(runs_option);
    validate->add_flag("--cases", validate_cases, "Print every case, not only the summary per op and mode");
    bool validate_phases = false;
    validate->add_flag("--phases", validate_phases,
                       "With --runs: each model case's forward, forward + backward and optimizer step, each timed on its own, "
                       "measured against predicted (each phase simulated on its own), run by run")
        ->needs(runs_option);
    bool validate_passes = false;
    validate->add_flag("--passes", validate_passes,
                       "With --runs: each model case pass by pass (the passes of measure_pytorch.py --model-rounds): each "
                       "pass's median step against the prediction at the profile's host speed and at its own canary's")
        ->needs(runs_option);
    std::string validate_host_speed = "profiled";
    validate->add_option("--host-speed", validate_host_speed,
                         "Host speed the cases are predicted on: profiled (the framework profile's, as any prediction) or "
                         "measured (host costs scaled by each case's canary over the profile's, where both have one: an "
                         "analysis, docs/validation.md); the table of --cases shows the other too")
        ->check(CLI::IsMember({"measured", "profiled"}))
        ->capture_default_str();
    std::string validate_exported;
    validate->add_option("--exported", validate_exported,
                         "Directory of kernel IRs exported from the measured models (roofsim_export), one per model case "
                         "named <case id with / as _>.json: also predict the model cases from them")
        ->check(CLI::ExistingDirectory);

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        app.exit(e);
        return exit_usage;
    }

    try {
        std::optional<roofsim::Calibration> calibration;
        if (!calibration_path.empty()) calibration = roofsim::load_calibration(calibration_path);

        if (specs->parsed()) {
            if (!specs_gpu.empty()) {
                const auto& g = gpu_arg(specs_gpu);
                if (specs_json) std::cout << to_json(g).dump(2) << '\n';
                else print_spec_detail(g, std::cout);
            } else if (specs_json) {
                nlohmann::json all = nlohmann::json::array();
                for (const auto& g : roofsim::builtin_gpus()) all.push_back(to_json(g));
                std::cout << all.dump(2) << '\n';
            } else {
                print_spec_table(std::cout);
            }
        } else if (roofline->parsed()) {
            std::vector<std::string> keys = split_list(roofline_gpus);
            if (keys.empty() && calibration && !calibration->device.gpu_key.empty()) {
                keys = {calibration->device.gpu_key};
            }
            const bool default_set = keys.empty();
            if (default_set) keys = seed_gpus;
            std::vector<roofsim::ComputeUnit> units;
            if (!roofline_precision.empty()) units = {precision_arg(roofline_precision)};
            std::vector<roofsim::Ceilings> all;
            for (const auto& k : keys) all.push_back(ceilings_for(gpu_arg(k), calibration));
            if (!roofline_svg_path.empty()) {
                if (all.size() != 1) throw UsageError("--svg draws one GPU: give --gpu KEY");
                roofsim::RooflineSvgOptions svg_options;
                if (!units.empty()) svg_options.only_unit = units.front();
                write_file(roofline_svg_path, roofsim::roofline_svg(all.front(), svg_options));
            }
            if (units.empty()) {
                units = (all.size() == 1) ? std::vector<roofsim::ComputeUnit>(roofsim::all_compute_units.begin(),
                                                                              roofsim::all_compute_units.end())
                                          : std::vector<roofsim::ComputeUnit>{
                                                roofsim::ComputeUnit::fp32, roofsim::ComputeUnit::tf32_tensor,
                                                roofsim::ComputeUnit::fp16_tensor, roofsim::ComputeUnit::bf16_tensor};
            }
            for (const auto& c : all) {
                for (auto u : units) {
                    if (!roofline_precision.empty()) (void)c.rate(u);  // a named precision the GPU lacks is an error
                }
            }
            if (roofline_json_flag) {
                nlohmann::json j = nlohmann::json::array();
                for (const auto& c : all) j.push_back(roofline_json(c, units));
                std::cout << (all.size() == 1 ? j.front() : j).dump(2) << '\n';
            } else if (all.size() == 1) {
                print_roofline_detail(all.front(), units, std::cout);
            } else {
                print_roofline_table(all, units, std::cout);
            }
            if (!roofline_svg_path.empty() && !roofline_json_flag) {
                std::cout << "\nwrote " << roofline_svg_path << '\n';
            }
        } else if (predict->parsed()) {
            if (predict_graph.empty() && predict_model.empty() && predict_ir.empty()) {
                throw UsageError("predict needs --graph FILE, --ir FILE or --model NAME");
            }
            if (predict_gpu.empty()) {
                if (!calibration || calibration->device.gpu_key.empty()) throw UsageError("predict needs --gpu KEY");
                predict_gpu = calibration->device.gpu_key;
            }
            const auto& spec = gpu_arg(predict_gpu);
            roofsim::PredictOptions options;
            const auto mode = roofsim::precision_mode_from_key(predict_precision);
            if (!mode) throw UsageError("unknown precision mode '" + predict_precision + "'; use fp32, fp32-strict, tf32, amp-bf16, amp-fp16 or bf16");
            const auto optimizer = roofsim::optimizer_from_key(predict_optimizer);
            if (!optimizer) throw UsageError("unknown optimizer '" + predict_optimizer + "'; use sgd, adam, adamw or none");
            if (predict_batch <= 0) throw UsageError("--batch must be positive");
            options.lowering.batch = predict_batch;
            options.lowering.precision = *mode;
            options.lowering.optimizer.kind = *optimizer;
            options.lowering.optimizer.fused = predict_fused;
            options.lowering.optimizer.weight_decay = !predict_no_weight_decay;
            std::variant<roofsim::Graph, roofsim::KernelIr> input;
            if (!predict_model.empty()) {
                auto g = roofsim::zoo::model(predict_model, predict_size);
                if (!g) throw UsageError("unknown model '" + predict_model + "'; built in: resnet50, bert-base, gpt2-small");
                input = std::move(*g);
            } else {
                input = load_model_file(predict_graph.empty() ? predict_ir : predict_graph);
            }
            if (const auto* ir = std::get_if<roofsim::KernelIr>(&input)) {
                // The IR's shapes and kernels are fixed when it is captured: options that would change them are refused.
                const std::string again = "; export the model again to change it";
                if (precision_option->count() > 0 && predict_precision != roofsim::to_string(ir->list.precision)) {
                    throw UsageError("--precision " + predict_precision + ": the IR was captured under " + std::string(roofsim::to_string(ir->list.precision)) + again);
                }
                if (batch_option->count() > 0 && predict_batch != ir->batch) {
                    throw UsageError("--batch " + std::to_string(predict_batch) + ": the IR was captured at batch " +
                                     std::to_string(ir->batch) + again);
                }
                if ((optimizer_option->count() > 0 && *optimizer != ir->optimizer.kind) ||
                    (fused_option->count() > 0 && predict_fused != ir->optimizer.fused)) {
                    throw UsageError("--optimizer/--fused: the IR was captured with " + std::string(to_string(ir->optimizer.kind)) +
                                     (ir->optimizer.fused ? " (fused)" : "") + again);
                }
                if (no_weight_decay_option->count() > 0 && ir->optimizer.weight_decay) {
                    throw UsageError("--no-weight-decay: the IR was captured with weight decay" + again);
                }
                if (!predict_emit_ir.empty()) throw UsageError("--emit-ir: the input is already a kernel IR");
                if (predict_size > 0) throw UsageError("--size applies to built-in models only");
            }
            const roofsim::Calibration* measured = nullptr;
            if (calibration && calibration->device.gpu_key == spec.key) measured = &*calibration;
            else if (!predict_datasheet && !calibration) measured = roofsim::find_builtin_calibration(spec.key);
            std::optional<roofsim::FrameworkProfile> framework_file;
            if (!predict_framework.empty()) framework_file = roofsim::load_framework_profile(predict_framework);
            options.framework = framework_file ? &*framework_file : roofsim::find_builtin_framework_profile(spec.key);
            if (!options.framework && !roofsim::builtin_framework_profiles().empty()) {
                options.framework = &roofsim::builtin_framework_profiles().front();
            }
            const auto ctx = roofsim::make_cost_context(spec, measured, options.framework);
            options.host_time_scale = predict_host_time_scale;
            roofsim::Prediction p;
            if (const auto* graph = std::get_if<roofsim::Graph>(&input)) {
                if (!predict_emit_ir.empty()) {
                    const auto ir = roofsim::to_kernel_ir(roofsim::lower(*graph, options.lowering), options.lowering);
                    roofsim::detail::write_json_atomically(roofsim::to_json(ir), predict_emit_ir);
                }
                p = roofsim::predict(*graph, ctx, options);
            } else {
                p = roofsim::predict(std::get<roofsim::KernelIr>(input), ctx, options);
            }
            if (predict_strict && p.flagged_kernels > 0) {
                std::ostringstream why;
                why << p.flagged_kernels << " kernels have no cost model (--strict):";
                for (const auto* k : roofsim::flagged_kernels(p.kernels)) {
                    why << "\n  " << (k->layer.empty() ? "(model code)" : k->layer) << ": " << k->op << " (" << k->flag << ")";
                }
                throw std::runtime_error(why.str());
            }
            if (!predict_svg.empty()) write_file(predict_svg, roofsim::prediction_svg(p, ctx.ceilings));
            if (predict_json) std::cout << to_json(p).dump(2) << '\n';
            else if (predict_csv) print_prediction_csv(p, std::cout);
            else if (predict_by_op) print_operators(p, predict_top, std::cout);
            else {
                print_prediction(p, predict_top, std::cout);
                if (std::holds_alternative<roofsim::KernelIr>(input)) {
                    std::cout << "\nGPU time by operator:\n";
                    print_operators(p, 10, std::cout);
                }
            }
        } else if (validate->parsed() && !validate_runs.empty()) {
            const auto speed = validate_host_speed == "profiled" ? roofsim::HostSpeed::profiled : roofsim::HostSpeed::measured;
            print_validation_runs(roofsim::evaluate_runs(roofsim::load_validation_runs(validate_runs), speed), validate_runs, speed,
                                  validate_cases, validate_phases, validate_passes, std::cout);
        } else if (validate->parsed()) {
            if (validate_file.empty()) throw UsageError("validate needs --measurements FILE or --runs FILE");
            const roofsim::ValidationSet set = roofsim::load_validation(validate_file);
            const auto& spec = gpu_arg(set.gpu_key);
            const roofsim::Calibration* measured = calibration && calibration->device.gpu_key == spec.key
                                                       ? &*calibration
                                                       : roofsim::find_builtin_calibration(spec.key);
            std::optional<roofsim::FrameworkProfile> framework_file;
            if (!validate_framework.empty()) framework_file = roofsim::load_framework_profile(validate_framework);
            const roofsim::FrameworkProfile* framework =
                framework_file ? &*framework_file : roofsim::find_builtin_framework_profile(spec.key);
            const auto ctx = roofsim::make_cost_context(spec, measured, framework);
            const auto speed = validate_host_speed == "profiled" ? roofsim::HostSpeed::profiled : roofsim::HostSpeed::measured;
            const auto other_speed = speed == roofsim::HostSpeed::measured ? roofsim::HostSpeed::profiled : roofsim::HostSpeed::measured;
            const char* other_error_header = speed == roofsim::HostSpeed::measured ? "error % at profile's host" : "error % at canary's host";
            const auto errors = roofsim::evaluate(set, ctx, framework, speed);
            const auto other = roofsim::evaluate(set, ctx, framework, other_speed);
            std::cout << set.origin << "\n  ceilings: " << ctx.ceilings.origin << "\n  host costs: "
                      << (framework ? framework->provenance() : std::string("launch rate only"));
            if (const auto host = framework ? framework->host_seconds_per_op() : std::nullopt) {
                std::cout << ", on a host of " << format_number("%.2f", host->value() * 1e6) << " us per tiny add";
            }
            std::cout << "\n  cases predicted at " << (speed == roofsim::HostSpeed::measured
                                                           ? "each case's canary host speed (host costs x canary x)"
                                                           : "the framework profile's host speed")
                      << "\n\n";
            if (validate_cases) {
                TextTable t({"case", "measured ms", "predicted ms", "host ms", "GPU ms", "error %", "paced by", "canary x",
                             other_error_header, "passes apart %"});
                for (std::size_t i = 0; i < errors.size(); ++i) {
                    const auto& e = errors[i];
                    t.add_row({e.c->id, format_number("%.3f", e.c->measured_seconds * 1e3),
                               format_number("%.3f", e.predicted_seconds * 1e3), format_number("%.3f", e.predicted_host_seconds * 1e3),
                               format_number("%.3f", e.predicted_gpu_seconds * 1e3), format_number("%+.1f", 100 * e.error),
                               e.host_bound() ? "host" : "GPU",
                               format_number("%.2f", roofsim::host_time_scale(*e.c, framework, roofsim::HostSpeed::measured)),
                               format_number("%+.1f", 100 * other[i].error),
                               percent_or_dash("%.1f", e.c->pass_spread())});
                }
                t.print(std::cout);
                std::cout << '\n';
            }
            ErrorGroups groups;
            for (const auto& e : errors) groups[{e.c->family, e.c->precision}].push_back(e.error);
            print_error_groups(groups, "error", std::cout);
            auto layers = [](const roofsim::CaseError& e) { return !e.c->model; };
            auto models = [](const roofsim::CaseError& e) { return e.c->model; };
            // "<median label> X%, <upper label> Y%" of the cases `pick` selects; "none" where it selects
            // none (a file of layer cases only, or of model cases only)
            const auto errors_of = [](const std::vector<roofsim::CaseError>& list, auto pick, const char* median_label,
                                      double upper, const char* upper_label) -> std::string {
                if (std::none_of(list.begin(), list.end(), pick)) return "none";
                return std::string(median_label) + " " + format_number("%.1f", 100 * roofsim::error_quantile(list, 0.5, pick)) +
                       "%, " + upper_label + " " + format_number("%.1f", 100 * roofsim::error_quantile(list, upper, pick)) + "%";
            };
            const auto summary = [&](const std::vector<roofsim::CaseError>& list, const char* what) {
                std::cout << what << ": layer cases: " << errors_of(list, layers, "median |error|", 0.9, "90th percentile")
                          << "; model steps: " << errors_of(list, models, "median", 1.0, "worst") << "\n";
            };
            std::cout << '\n';
            summary(speed == roofsim::HostSpeed::measured ? other : errors, "at the profile's host speed");
            summary(speed == roofsim::HostSpeed::measured ? errors : other, "at each case's canary host speed");
            for (const auto& e : errors) {
                if (e.memory_error) {
                    std::cout << "peak memory " << e.c->id << ": measured " << format_number("%.2f", *e.c->measured_peak_bytes / 1073741824.0)
                              << " GiB, predicted " << format_number("%.2f", *e.predicted_peak_bytes / 1073741824.0) << " GiB ("
                              << format_number("%+.1f", 100 * *e.memory_error) << "%)\n";
                }
            }
            for (const auto& [id, why] : set.not_modelled) std::cout << "not modelled: " << id << " (" << why << ")\n";
            if (!validate_exported.empty()) {
                const auto exported = roofsim::evaluate_exported(set, validate_exported, ctx, framework, speed);
                const auto exported_other = roofsim::evaluate_exported(set, validate_exported, ctx, framework, other_speed);
                std::cout << "\nModel steps predicted from the exported IRs in " << validate_exported << ":\n";
                TextTable table({"case", "measured ms", "predicted ms", "error %", "paced by", "canary x", other_error_header,
                                 "measured peak GiB", "predicted peak GiB", "memory error %"});
                for (std::size_t i = 0; i < exported.size(); ++i) {
                    const auto& e = exported[i];
                    const auto gib = [](std::optional<double> b) { return b ? format_number("%.2f", *b / 1073741824.0) : "-"; };
                    table.add_row({e.c->id, format_number("%.3f", e.c->measured_seconds * 1e3), format_number("%.3f", e.predicted_seconds * 1e3),
                               format_number("%+.1f", 100 * e.error), e.host_bound() ? "host" : "GPU",
                               format_number("%.2f", roofsim::host_time_scale(*e.c, framework, roofsim::HostSpeed::measured)),
                               format_number("%+.1f", 100 * exported_other[i].error), gib(e.c->measured_peak_bytes),
                               gib(e.predicted_peak_bytes),
                               percent_or_dash("%+.1f", e.memory_error)});
                }
                table.print(std::cout);
                if (exported.empty()) std::cout << "(no IR file matches a model case)\n";
            }
        } else if (kernel->parsed()) {
            const auto& spec = gpu_arg(kernel_gpu);
            roofsim::KernelWork work;
            work.unit = precision_arg(kernel_precision);
            work.flops = roofsim::Flops(amount_arg(kernel_flops, "--flops"));
            work.dram_bytes = roofsim::Bytes(amount_arg(kernel_bytes, "--bytes"));
            if (!kernel_l2_bytes.empty()) work.l2_bytes = roofsim::Bytes(amount_arg(kernel_l2_bytes, "--l2-bytes"));
            const auto c = ceilings_for(spec, calibration);
            const auto r = roofsim::roofline_time(work, c);
            if (kernel_json) {
                nlohmann::json j = {{"gpu", c.gpu_key},
                                    {"origin", c.origin},
                                    {"unit", to_string(work.unit)},
                                    {"flops", work.flops.value()},
                                    {"dram_bytes", work.dram_bytes.value()},
                                    {"time_seconds", r.time.value()},
                                    {"bound", to_string(r.bound)},
                                    {"compute_seconds", r.compute_time.value()},
                                    {"dram_seconds", r.dram_time.value()},
                                    {"l2_seconds", r.l2_time.value()},
                                    {"latency_seconds", r.latency_time.value()},
                                    {"attained_flops_per_second", r.attained(work).value()}};
                if (work.l2_bytes) j["l2_bytes"] = work.l2_bytes->value();
                std::cout << j.dump(2) << '\n';
            } else {
                print_kernel(c, work, r, std::cout);
            }
        }
    } catch (const UsageError& e) {
        std::cerr << "roofsim: " << e.what() << '\n';
        return exit_usage;
    } catch (const std::exception& e) {
        std::cerr << "roofsim: error: " << e.what() << '\n';
        return exit_error;
    }
    return exit_ok;
}
