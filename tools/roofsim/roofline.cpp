// roofsim roofline: the ceilings and ridge points of one or more GPUs, as a table, JSON or SVG.

#include "commands.hpp"

#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>
#include <sstream>

namespace roofsim::cli {
namespace {

struct RooflineOptions {
    std::string gpus, unit, svg;
    bool json = false;
    CLI::Option* gpu_option = nullptr;
};

nlohmann::json roofline_json(const Ceilings& c, const std::vector<ComputeUnit>& units) {
    nlohmann::json compute = nlohmann::json::array();
    for (auto u : units) {
        if (!c.has(u)) continue;
        nlohmann::json ridges = nlohmann::json::object();
        for (const auto& [level, bw] : c.bandwidth) ridges[std::string(to_string(level))] = ridge_point(u, level, c).value();
        compute.push_back({{"unit", to_string(u)},
                           {"flops_per_second", c.rate(u).value()},
                           {"ridge_flops_per_byte", ridges},
                           {"source", c.compute.at(u).source}});
    }
    nlohmann::json bandwidth = nlohmann::json::array();
    for (const auto& [level, bw] : c.bandwidth) {
        bandwidth.push_back({{"level", to_string(level)}, {"bytes_per_second", bw.value.value()}, {"source", bw.source}});
    }
    nlohmann::json j = {{"kind", "roofsim-roofline"}, {"schema_version", 1}, {"gpu", c.gpu_key}, {"name", c.gpu_name}, {"origin", c.origin},
                        {"compute", compute}, {"bandwidth", bandwidth}};
    if (c.launch_latency) {
        j["launch_latency_seconds"] = {{"value", c.launch_latency->value.value()}, {"source", c.launch_latency->source}};
    }
    return j;
}

void print_roofline_detail(const Ceilings& c, const std::vector<ComputeUnit>& units, std::ostream& out) {
    out << "Roofline of " << c.gpu_name << " (" << c.gpu_key << "), ceilings from " << c.origin << "\n\n";
    const bool has_l2 = c.has(MemoryLevel::l2);
    TextTable t = has_l2 ? TextTable({"ceiling", "TFLOP/s", "ridge DRAM FLOP/B", "ridge L2 FLOP/B", "source"})
                         : TextTable({"ceiling", "TFLOP/s", "ridge DRAM FLOP/B", "source"});
    Notes sources;
    for (auto u : units) {
        if (!c.has(u)) continue;
        std::vector<std::string> row = {std::string(to_string(u)), tflops(c.rate(u)),
                                        format_number("%.1f", ridge_point(u, MemoryLevel::dram, c).value())};
        if (has_l2) row.push_back(format_number("%.1f", ridge_point(u, MemoryLevel::l2, c).value()));
        row.push_back(sources.ref(c.compute.at(u).source));
        t.add_row(row);
    }
    t.print(out);
    out << '\n';
    TextTable m({"memory level", "GB/s", "source"});
    for (const auto& [level, bw] : c.bandwidth) {
        m.add_row({std::string(to_string(level)), format_number("%.0f", to_gb_per_second(bw.value)), sources.ref(bw.source)});
    }
    if (c.launch_latency) {
        m.add_row({"kernel floor", format_duration(c.launch_latency->value), sources.ref(c.launch_latency->source)});
    }
    m.print(out);
    out << "\nSources:\n";
    sources.print(out);
}

void print_roofline_table(const std::vector<Ceilings>& all, const std::vector<ComputeUnit>& units, std::ostream& out) {
    std::vector<std::string> header = {"GPU", "DRAM GB/s"};
    for (auto u : units) header.push_back(std::string(to_string(u)) + " TFLOP/s");
    for (auto u : units) header.push_back(std::string(to_string(u)) + " ridge");
    header.push_back("ceilings from");
    TextTable t(header);
    for (const auto& c : all) {
        std::vector<std::string> row = {c.gpu_key, format_number("%.0f", to_gb_per_second(c.rate(MemoryLevel::dram)))};
        for (auto u : units) row.push_back(c.has(u) ? tflops(c.rate(u)) : "-");
        for (auto u : units) {
            row.push_back(c.has(u) ? format_number("%.1f", ridge_point(u, MemoryLevel::dram, c).value()) : "-");
        }
        row.push_back(c.origin);
        t.add_row(row);
    }
    t.print(out);
    out << "\nTFLOP/s dense; ridge = FLOP per DRAM byte where compute and bandwidth ceilings meet.\n"
           "fp16-tensor and bf16-tensor accumulate in FP32 (GeForce parts run them at half the FP16-accumulate rate).\n";
}

/// The units a table shows: the one asked for, else all (one GPU) or the four training ones.
std::vector<ComputeUnit> units_shown(const std::vector<ComputeUnit>& asked, std::size_t gpus) {
    if (!asked.empty()) return asked;
    if (gpus == 1) return {all_compute_units.begin(), all_compute_units.end()};
    return {ComputeUnit::fp32, ComputeUnit::tf32_tensor, ComputeUnit::fp16_tensor, ComputeUnit::bf16_tensor};
}

void run_roofline(const RooflineOptions& o, const Context& ctx) {
    std::vector<std::string> keys = split_list(o.gpus);
    if (keys.empty() && o.gpu_option->count() > 0) throw UsageError("--gpu: no GPU given");
    if (keys.empty() && ctx.calibration && !ctx.calibration->device.gpu_key.empty()) keys = {ctx.calibration->device.gpu_key};
    if (keys.empty()) keys = seed_gpus;
    std::vector<ComputeUnit> asked;
    if (!o.unit.empty()) asked = {unit_arg(o.unit, "--unit")};
    std::vector<Ceilings> all;
    for (const auto& k : keys) all.push_back(ceilings_for(gpu_arg(k), ctx.calibration));
    if (!o.svg.empty() && all.size() != 1) throw UsageError("--svg draws one GPU: give --gpu KEY");
    const auto units = units_shown(asked, all.size());
    for (const auto& c : all) {
        for (auto u : asked) (void)c.rate(u);  // a named unit the GPU lacks is an error
    }
    if (!o.svg.empty()) {
        RooflineSvgOptions svg_options;
        if (!asked.empty()) svg_options.only_unit = asked.front();
        write_file_atomically(o.svg, roofline_svg(all.front(), svg_options));
    }
    std::ostringstream table;
    if (o.json) {
        nlohmann::json gpus = nlohmann::json::array();
        for (const auto& c : all) gpus.push_back(roofline_json(c, units));
        const nlohmann::json many = {{"kind", "roofsim-roofline"}, {"schema_version", 1}, {"gpus", gpus}};
        std::cout << (all.size() == 1 ? gpus.front() : many).dump(2) << '\n';
    } else if (all.size() == 1) {
        print_roofline_detail(all.front(), units, table);
    } else {
        print_roofline_table(all, units, table);
    }
    std::cout << wrap_lines(table.str());
    if (!o.svg.empty() && !o.json) std::cout << "\nwrote " << o.svg << '\n';
}

}  // namespace

Command add_roofline_command(CLI::App& app) {
    auto o = std::make_shared<RooflineOptions>();
    auto* cmd = app.add_subcommand("roofline", "Roofline ceilings and ridge points of one or more GPUs");
    o->gpu_option = cmd->add_option("--gpu", o->gpus, "GPU key, or comma-separated keys (default: rtx-3090, rtx-a6000, A100s, H100, H200)");
    cmd->add_option("--unit", o->unit,
                    "One compute unit's ceiling (not a PyTorch precision mode): fp64, fp32, tf32, fp16, bf16, fp8, int8, "
                    "or a key such as fp16-cuda, fp16-fp16acc-tensor");
    cmd->add_option("--svg", o->svg, "Write a log-log roofline chart (one GPU)");
    cmd->add_flag("--json", o->json, "Print JSON (kind roofsim-roofline)");
    return {cmd, [o](const Context& ctx) { run_roofline(*o, ctx); }};
}

}  // namespace roofsim::cli
