#pragma once
// Shared pieces of the roofsim subcommands: exit codes, option-value parsing, output helpers.

#include "text_table.hpp"

#include <roofsim/roofsim.hpp>

#include <CLI/CLI.hpp>

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace roofsim::cli {

constexpr int exit_ok = 0;
constexpr int exit_error = 1;
constexpr int exit_usage = 2;

/// A bad option value found after parsing (unknown GPU, unknown precision): exit code 2.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// What every subcommand may read: the global options, once parsed and loaded.
struct Context {
    std::optional<Calibration> calibration;
};

/// A subcommand: its CLI11 app and what runs it once the command line is parsed.
struct Command {
    CLI::App* app = nullptr;
    std::function<void(const Context&)> run;
};

/// The GPUs the main job compares: the seeds of the project plus the Hopper parts.
extern const std::vector<std::string> seed_gpus;

/// A GPU by key or nvidia-smi name; an unknown one is a usage error.
const GpuSpec& gpu_arg(const std::string& key);
/// A compute unit (fp32, tf32, bf16-tensor...); an unknown one is a usage error.
ComputeUnit precision_arg(const std::string& text);
/// A non-negative amount such as 4.5G or 2GiB; anything else is a usage error naming `option`.
double amount_arg(const std::string& text, const std::string& option);
/// "a,b,,c" -> {a, b, c}.
std::vector<std::string> split_list(const std::string& text);
/// A rate as TFLOP/s with one decimal, "-" where there is none.
std::string tflops(std::optional<FlopsPerSecond> r);
/// A time as milliseconds with three decimals.
std::string ms(Seconds t);
/// Writes `text` to `path`.
void write_file(const std::string& path, const std::string& text);
/// The ceilings for a GPU: from the calibration when it describes that GPU, else from the datasheet.
Ceilings ceilings_for(const GpuSpec& spec, const std::optional<Calibration>& calibration);

}  // namespace roofsim::cli
