// roofsim kernel: the roofline time of one kernel from its FLOPs and bytes.

#include "commands.hpp"

#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>
#include <sstream>

namespace roofsim::cli {
namespace {

struct KernelOptions {
    std::string gpu, flops, bytes, l2_bytes, unit = "fp32";
    bool json = false;
};

void print_kernel(const Ceilings& c, const KernelWork& k, const RooflineTime& r, std::ostream& out) {
    out << "Kernel on " << c.gpu_name << " (" << c.gpu_key << "), ceilings from " << c.origin << "\n";
    out << "  work:       " << format_number("%.4g", k.flops.value()) << " FLOP on " << to_string(k.unit) << ", "
        << format_number("%.4g", k.dram_bytes.value()) << " DRAM bytes";
    if (k.l2_bytes) out << ", " << format_number("%.4g", k.l2_bytes->value()) << " L2 bytes";
    out << "\n";
    if (k.dram_bytes.value() > 0) {
        out << "  intensity:  " << format_number("%.3g", (k.flops / k.dram_bytes).value()) << " FLOP/B (ridge "
            << format_number("%.3g", ridge_point(k.unit, MemoryLevel::dram, c).value()) << ")\n";
    }
    out << "  time:       " << format_duration(r.time) << ", " << to_string(r.bound) << "-bound\n";
    out << "  compute:    " << format_duration(r.compute_time) << "\n";
    out << "  dram:       " << format_duration(r.dram_time) << "\n";
    if (k.l2_bytes) out << "  l2:         " << format_duration(r.l2_time) << "\n";
    if (c.launch_latency) out << "  floor:      " << format_duration(r.latency_time) << "\n";
    out << "  attains:    " << format_number("%.2f TFLOP/s", to_tflops_per_second(r.attained(k))) << "\n";
}

nlohmann::json kernel_json(const Ceilings& c, const KernelWork& work, const RooflineTime& r) {
    nlohmann::json j = {{"kind", "roofsim-kernel-time"},
                        {"schema_version", 1},
                        {"gpu", c.gpu_key},
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
    return j;
}

void run_kernel(const KernelOptions& o, const Context& ctx) {
    const auto& spec = gpu_arg(o.gpu);
    KernelWork work;
    work.unit = unit_arg(o.unit, "--unit");
    work.flops = Flops(flops_arg(o.flops, "--flops"));
    work.dram_bytes = Bytes(bytes_arg(o.bytes, "--bytes"));
    if (!o.l2_bytes.empty()) work.l2_bytes = Bytes(bytes_arg(o.l2_bytes, "--l2-bytes"));
    const auto c = ceilings_for(spec, ctx.calibration);
    const auto r = roofline_time(work, c);
    if (o.json) {
        std::cout << kernel_json(c, work, r).dump(2) << '\n';
    } else {
        std::ostringstream text;
        print_kernel(c, work, r, text);
        std::cout << wrap_lines(text.str());
    }
}

}  // namespace

Command add_kernel_command(CLI::App& app) {
    auto o = std::make_shared<KernelOptions>();
    auto* cmd = app.add_subcommand("kernel", "Time of a kernel from its FLOPs and bytes, and the ceiling it hits");
    cmd->add_option("--gpu", o->gpu, "GPU key or nvidia-smi name")->required();
    cmd->add_option("--flops", o->flops, "Floating-point operations (FMA = 2): a number, optionally with k M G T P and FLOP "
                                         "(e.g. 4.5G, 300TFLOP)")->required();
    cmd->add_option("--bytes", o->bytes, "DRAM bytes read plus written: a number, optionally with k M G T P or Ki Mi Gi Ti "
                                         "and B (e.g. 2GiB, 300MB)")->required();
    cmd->add_option("--l2-bytes", o->l2_bytes, "Bytes through L2, where known (as --bytes)");
    cmd->add_option("--unit", o->unit,
                    "Compute unit the kernel runs on (a ceiling, not a PyTorch precision mode): fp32 (CUDA cores), tf32, "
                    "fp16, bf16, fp8, int8 (tensor cores), or a key such as fp16-cuda, fp16-fp16acc-tensor")
        ->capture_default_str();
    cmd->add_flag("--json", o->json, "Print JSON (kind roofsim-kernel-time)");
    return {cmd, [o](const Context& ctx) { run_kernel(*o, ctx); }};
}

}  // namespace roofsim::cli
