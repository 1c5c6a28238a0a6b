#pragma once
// Shared by the fuzz targets (libFuzzer's LLVMFuzzerTestOneInput): what a prediction must satisfy,
// the options a prediction is made with, the input as a temporary file.

#include <roofsim/roofsim.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include <unistd.h>

namespace roofsim::fuzz {

/// A finding: the figure is not finite or is negative. Prints it and aborts (a crash for libFuzzer).
inline void require_figure(double value, const char* what) {
    if (std::isfinite(value) && value >= 0) return;
    std::fprintf(stderr, "fuzz: %s = %g: not a finite, non-negative figure\n", what, value);
    std::abort();
}

/// Runs `f`. An error the loaders and the model raise (std::runtime_error, std::invalid_argument: the
/// CLI's exit 1, a message naming the file and field) is expected; any other exception (a JSON library
/// error, std::out_of_range, std::bad_alloc...) is a finding. Returns whether `f` returned.
template <class F>
bool expect_errors(F&& f) {
    try {
        f();
        return true;
    } catch (const std::runtime_error&) {
    } catch (const std::invalid_argument&) {
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fuzz: unexpected exception (not a runtime_error or invalid_argument): %s\n", e.what());
        std::abort();
    }
    return false;
}

/// Every time, FLOP count and byte count of a prediction is finite and not negative.
inline void check_prediction(const Prediction& p) {
    require_figure(p.step_time.value(), "step_time");
    require_figure(p.forward_time.value(), "forward_time");
    require_figure(p.backward_time.value(), "backward_time");
    require_figure(p.optimizer_time.value(), "optimizer_time");
    require_figure(p.gpu_time.value(), "gpu_time");
    require_figure(p.host_time.value(), "host_time");
    require_figure(p.communication_time.value(), "communication_time");
    require_figure(p.memory.peak.value(), "memory.peak");
    require_figure(p.memory.activations.value(), "memory.activations");
    require_figure(p.parameters, "parameters");
    for (const auto& l : p.layers) {
        require_figure(l.forward_gpu.value(), "layer forward_gpu");
        require_figure(l.backward_gpu.value(), "layer backward_gpu");
        require_figure(l.forward_host.value(), "layer forward_host");
        require_figure(l.backward_host.value(), "layer backward_host");
        require_figure(l.flops.value(), "layer flops");
        require_figure(l.bytes.value(), "layer bytes");
    }
    (void)to_json(p).dump();  // the report as --json prints it
}

/// FNV-1a over the input: picks the prediction's options, so that each input is predicted one way.
[[nodiscard]] inline std::uint64_t input_hash(const std::uint8_t* data, std::size_t size) {
    std::uint64_t h = 1469598103934665603ull;
    for (std::size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 1099511628211ull;
    return h;
}

/// Options for a layer graph chosen by `h`: batch (1 to 2^62), precision, optimizer, mode, GPUs.
[[nodiscard]] inline PredictOptions graph_options(std::uint64_t h) {
    static constexpr std::array<std::int64_t, 8> batches = {1, 2, 3, 32, 4096, std::int64_t(1) << 31, std::int64_t(1) << 40,
                                                            std::int64_t(1) << 62};
    static constexpr std::array<OptimizerKind, 4> optimizers = {OptimizerKind::sgd, OptimizerKind::adam, OptimizerKind::adamw,
                                                                OptimizerKind::none};
    PredictOptions o;
    o.lowering.batch = batches[h % batches.size()];
    h /= batches.size();
    o.lowering.precision = all_precision_modes[h % all_precision_modes.size()];
    h /= all_precision_modes.size();
    o.lowering.optimizer.kind = optimizers[h % optimizers.size()];
    h /= optimizers.size();
    o.lowering.optimizer.fused = h % 2 == 0;
    h /= 2;
    o.lowering.mode = h % 4 == 0 ? StepMode::inference : StepMode::training;
    h /= 4;
    if (o.lowering.mode == StepMode::training && h % 4 == 0) o.data_parallel.gpus = 2;
    return o;
}

/// The GPUs a prediction runs on: the H200 (measured profile, its framework profile) or the A10
/// (a profile derived from the H200's, datasheet host costs).
[[nodiscard]] inline const CostContext& context(std::uint64_t h, bool collectives = false) {
    static const CostContext h200 = make_default_cost_context(gpu_or_throw("h200-sxm"), find_builtin_framework_profile("h200-sxm"));
    static const CostContext a10 = make_default_cost_context(gpu_or_throw("a10"), nullptr);
    static const CostContext h200_pair = [] {
        CostContext c = h200;
        add_builtin_collectives(c, "h200-sxm");
        return c;
    }();
    if (h % 2 == 0) return collectives ? h200_pair : h200;
    return a10;
}

/// The input written to a file of this process (for the loaders that read a path); `name` is the
/// file's name, which errors quote.
[[nodiscard]] inline std::filesystem::path write_temporary(const std::uint8_t* data, std::size_t size, std::string_view name) {
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("roofsim-fuzz-" + std::to_string(static_cast<long>(::getpid())));
    std::filesystem::create_directories(dir);
    const std::filesystem::path path = dir / std::string(name);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out.flush()) std::abort();
    return path;
}

/// A file of the source tree (the fuzz targets predict the shipped small graph and IR).
[[nodiscard]] inline std::filesystem::path source_file(std::string_view relative) {
    return std::filesystem::path(ROOFSIM_FUZZ_SOURCE_DIR) / std::string(relative);
}

/// The shipped small graph and IR that the profile targets predict with the profile they loaded.
inline const Graph& small_graph() {
    static const Graph g = load_graph(source_file("data/models/mlp.json"));
    return g;
}
inline const KernelIr& small_ir() {
    static const KernelIr ir = load_kernel_ir(source_file("tests/data/ir-small.json"));
    return ir;
}

}  // namespace roofsim::fuzz
