// roofsim specs: the built-in GPU datasheet figures.

#include "commands.hpp"

#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>
#include <sstream>

namespace roofsim::cli {
namespace {

struct SpecsOptions {
    std::string gpu;
    bool json = false;
    CLI::Option* gpu_option = nullptr;
};

void print_spec_table(std::ostream& out) {
    TextTable t({"key", "name", "arch", "SMs", "boost MHz", "FP64", "FP32", "TF32 TC", "FP16 TC", "BF16 TC",
                 "FP8 TC", "mem GiB", "mem GB/s", "L2 MiB", "TDP W", "NVLink GB/s"});
    for (const auto& g : builtin_gpus()) {
        const std::string vendor = "NVIDIA ";
        const std::string name = g.name.rfind(vendor, 0) == 0 ? g.name.substr(vendor.size()) : g.name;
        t.add_row({g.key, name, g.architecture.value, std::to_string(g.sm_count.value),
                   format_number("%.0f", g.boost_clock.value.value() / 1e6), tflops(g.peak(ComputeUnit::fp64)),
                   tflops(g.peak(ComputeUnit::fp32)), tflops(g.peak(ComputeUnit::tf32_tensor)),
                   tflops(g.peak(ComputeUnit::fp16_tensor)), tflops(g.peak(ComputeUnit::bf16_tensor)),
                   tflops(g.peak(ComputeUnit::fp8_tensor)), format_number("%.0f", to_gib(g.memory_size.value)),
                   format_number("%.0f", to_gb_per_second(g.memory_bandwidth.value)),
                   format_number("%.0f", g.l2_size.value.value() / (1024.0 * 1024.0)),
                   format_number("%.0f", g.tdp_watts.value),
                   g.nvlink_bandwidth ? format_number("%.0f", to_gb_per_second(g.nvlink_bandwidth->value)) : "-"});
    }
    t.print(out);
    out << "\nNames without the NVIDIA prefix. TFLOP/s, dense.\nTC = tensor cores; FP16/BF16 TC with FP32 accumulate. Sources: roofsim specs --gpu KEY\n";
}

void print_spec_detail(const GpuSpec& g, std::ostream& out) {
    out << g.name << " (" << g.key << ")\n";
    out << "nvidia-smi names: ";
    for (std::size_t i = 0; i < g.nvidia_smi_names.size(); ++i) out << (i ? ", " : "") << g.nvidia_smi_names[i];
    out << "\n\n";
    TextTable t({"figure", "value", "source"});
    Notes sources;
    auto row = [&](const std::string& name, const std::string& value, const std::string& source) {
        t.add_row({name, value, sources.ref(g.cite(source))});
    };
    row("architecture", g.architecture.value, g.architecture.source);
    row("chip", g.chip.value, g.chip.source);
    row("compute capability", g.compute_capability.value, g.compute_capability.source);
    row("form factor", g.form_factor.value, g.form_factor.source);
    row("SMs", std::to_string(g.sm_count.value), g.sm_count.source);
    row("boost clock", format_number("%.0f MHz", g.boost_clock.value.value() / 1e6), g.boost_clock.source);
    for (const auto& [unit, p] : g.peak_compute) {
        row(std::string(to_string(unit)), format_number("%.1f TFLOP/s", to_tflops_per_second(p.value)), p.source);
    }
    row("memory", g.memory_type.value, g.memory_type.source);
    row("memory size", format_number("%.0f GiB", to_gib(g.memory_size.value)), g.memory_size.source);
    row("memory bandwidth", format_number("%.0f GB/s", to_gb_per_second(g.memory_bandwidth.value)),
        g.memory_bandwidth.source);
    row("L2 cache", format_number("%.0f MiB", g.l2_size.value.value() / (1024.0 * 1024.0)), g.l2_size.source);
    if (g.l2_bandwidth) {
        row("L2 bandwidth", format_number("%.0f GB/s", to_gb_per_second(g.l2_bandwidth->value)), g.l2_bandwidth->source);
    }
    row("TDP", format_number("%.0f W", g.tdp_watts.value), g.tdp_watts.source);
    row("PCIe", "Gen" + std::to_string(g.pcie_generation.value), g.pcie_generation.source);
    row("PCIe bandwidth", format_number("%.0f GB/s bidir.", to_gb_per_second(g.pcie_bandwidth.value)),
        g.pcie_bandwidth.source);
    if (g.nvlink_generation && g.nvlink_bandwidth) {
        row("NVLink", "gen " + std::to_string(g.nvlink_generation->value), g.nvlink_generation->source);
        row("NVLink bandwidth", format_number("%.0f GB/s bidir.", to_gb_per_second(g.nvlink_bandwidth->value)),
            g.nvlink_bandwidth->source);
    }
    t.print(out);
    out << "\nSources:\n";
    sources.print(out);
}

void run_specs(const SpecsOptions& o) {
    std::ostringstream table;
    if (o.gpu_option->count() > 0 && o.gpu.empty()) throw UsageError("--gpu: no GPU given");
    if (!o.gpu.empty()) {
        const auto& g = gpu_arg(o.gpu);
        if (o.json) std::cout << with_kind(to_json(g), "roofsim-gpu-spec").dump(2) << '\n';
        else print_spec_detail(g, table);
    } else if (o.json) {
        nlohmann::json all = nlohmann::json::array();
        for (const auto& g : builtin_gpus()) all.push_back(to_json(g));
        std::cout << nlohmann::json{{"kind", "roofsim-specs"}, {"schema_version", 1}, {"gpus", all}}.dump(2) << '\n';
    } else {
        print_spec_table(table);
    }
    std::cout << wrap_lines(table.str());
}

}  // namespace

Command add_specs_command(CLI::App& app) {
    auto o = std::make_shared<SpecsOptions>();
    auto* cmd = app.add_subcommand("specs", "List the built-in GPU datasheet specifications");
    o->gpu_option = cmd->add_option("--gpu", o->gpu, "One GPU by key or nvidia-smi name: all figures with their sources");
    cmd->add_flag("--json", o->json, "Print JSON (kind roofsim-specs, or roofsim-gpu-spec with --gpu: the spec file format, display units)");
    return {cmd, [o](const Context&) { run_specs(*o); }};
}

}  // namespace roofsim::cli
