#pragma once
// Shared pieces of the roofsim subcommands: exit codes, option-value parsing, output helpers.

#include "text_table.hpp"

#include <roofsim/roofsim.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

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
/// A compute unit (fp32, tf32, bf16-tensor...) given to `option`; an unknown one is a usage error.
ComputeUnit unit_arg(const std::string& text, const std::string& option);
/// A FLOP amount such as 4.5G or 300TFLOP given to `option`; anything else is a usage error.
double flops_arg(const std::string& text, const std::string& option);
/// A byte amount such as 2GiB or 300MB given to `option`; anything else is a usage error.
double bytes_arg(const std::string& text, const std::string& option);
/// A CLI11 check: the option's value is a whole number of at least 1.
CLI::Validator positive_integer();
/// Why --size is refused without --model: it sets a built-in model's image size or sequence length.
inline const std::string size_needs_model =
    "--size applies only to built-in models (--model NAME); a --graph or --ir file keeps its own shapes";
/// The precision modes, as an unknown one's message lists them.
inline const std::string precision_mode_list = "fp32, fp32-strict, tf32, amp-bf16, amp-fp16, bf16 or fp16-master";
/// --mode's help text.
inline const std::string step_mode_help =
    "training: forward, loss, backward, optimizer step; inference: model.eval() under torch.inference_mode(), the "
    "forward alone (no loss, no optimizer), its latency";
/// A step mode (training, inference) given to --mode; anything else is a usage error.
StepMode step_mode_arg(const std::string& text);
/// A CSV field, quoted where it holds a comma, a quote or a line break (a quote doubled).
std::string csv_field(const std::string& text);
/// "a,b,,c" -> {a, b, c}.
std::vector<std::string> split_list(const std::string& text);
/// A rate as TFLOP/s with one decimal, "-" where there is none.
std::string tflops(std::optional<FlopsPerSecond> r);
/// A time in the unit that suits it (ns, us, ms, s: the number between 1 and 1000), 4 significant digits.
std::string format_duration(Seconds t);

/// One unit for a column (or line) of times, chosen from the largest: "ms" and its scale.
struct TimeUnit {
    const char* name = "ms";
    double per_second = 1e3;
    int decimals = 3;
    /// `t` in this unit, without the unit's name.
    std::string operator()(Seconds t) const;
    /// The unit that suits times up to `largest` (3-4 significant digits for it).
    static TimeUnit for_largest(Seconds largest);
};

/// The model of --model NAME (with --size) or --graph FILE; `command` names the subcommand in the
/// message where neither is given.
Graph graph_input_arg(const std::string& model, const std::string& graph, std::int64_t size, const std::string& command);
/// "1,2,8-16,64-256/64" -> 1 2 8 9 ... 16 64 128 192 256: positive integers, ranges A-B (every
/// integer) or A-B/S (every S-th); anything else is a usage error naming `option`.
std::vector<std::int64_t> integer_list_arg(const std::string& text, const std::string& option);

/// A GPU's default cost context (its built-in measured profile, else one derived from a measured
/// one, else its datasheet; the built-in collective measurements of its kind) and the framework
/// profile of its host costs: `framework` where given, else the one measured with that GPU, else the
/// first built-in one (host costs of another host).
struct GpuContext {
    CostContext ctx;
    const FrameworkProfile* framework = nullptr;
};
GpuContext default_gpu_context(const GpuSpec& spec, const FrameworkProfile* framework = nullptr);

/// Where data-parallel GPUs sit: --gpus-per-node, --network-gbits, --network-latency-us.
struct ClusterOptions {
    std::int64_t gpus_per_node = 8;
    double network_gbits = 0;         ///< Gbit/s between nodes, one direction, per node; 0: none
    double network_latency_us = 9.6;  ///< one ring step over the network (NCCL's own figure)
    /// Adds the three options to `cmd`.
    void add_to(CLI::App* cmd);
    /// Puts the node size and network into `ctx`'s collective model, and checks that `num_gpus`
    /// fill whole nodes, with a network where they span several (usage errors otherwise).
    void apply(CostContext& ctx, std::int64_t num_gpus) const;
    /// The one-line description of the cluster for `num_gpus` GPUs ("" for one GPU).
    [[nodiscard]] std::string describe(std::int64_t num_gpus) const;
};

/// The profile --calibration names. A partial one (from a calibration that stopped before all its
/// probes ran) is an error naming the file and the probes it lacks, unless `accept_partial`
/// (--accept-partial): then a warning on stderr, and its provenance says "partial".
Calibration calibration_arg(const std::string& path, bool accept_partial);
/// `j` with `kind` and `schema_version` first where it has no `kind` of its own.
nlohmann::json with_kind(nlohmann::json j, const std::string& kind, int schema_version = 1);
/// The ceilings for a GPU: from the calibration when it describes that GPU, else from the datasheet.
Ceilings ceilings_for(const GpuSpec& spec, const std::optional<Calibration>& calibration);

}  // namespace roofsim::cli
