// roofsim sweep: one model over a grid of GPUs x batch sizes x precision modes x GPU counts, on all cores.

#include "commands.hpp"

#include <roofsim/sweep.hpp>

#include <iostream>
#include <memory>
#include <sstream>

namespace roofsim::cli {
namespace {

struct SweepOptions {
    std::string model, graph, gpus, precisions = "fp32,amp-bf16", optimizer = "sgd", batches = "32", num_gpus = "1",
                                    mode = "training";
    CLI::Option* optimizer_option = nullptr;
    std::int64_t size = 0;
    unsigned jobs = 0;
    ClusterOptions cluster;
    bool json = false, csv = false;
};

void run_sweep(const SweepOptions& o) {
    PredictOptions options;
    const auto optimizer = optimizer_from_key(o.optimizer);
    if (!optimizer) throw UsageError("unknown optimizer '" + o.optimizer + "'; use sgd, adam, adamw or none");
    options.lowering.optimizer.kind = *optimizer;
    options.lowering.mode = step_mode_arg(o.mode);
    const bool inference = options.lowering.mode == StepMode::inference;
    if (inference && o.optimizer_option->count() > 0 && *optimizer != OptimizerKind::none) {
        throw UsageError("--optimizer: an inference forward (--mode inference) has no optimizer step");
    }
    if (inference) options.lowering.optimizer.kind = OptimizerKind::none;
    SweepGrid grid;
    grid.batches = integer_list_arg(o.batches, "--batch");
    for (const auto& key : split_list(o.precisions)) {
        const auto mode = precision_mode_from_key(key);
        if (!mode) throw UsageError("--precision: unknown precision mode '" + key + "'; use " + precision_mode_list);
        grid.precisions.push_back(*mode);
    }
    if (grid.precisions.empty()) throw UsageError("--precision: no precision mode given");
    grid.gpu_counts.clear();
    for (const auto n : integer_list_arg(o.num_gpus, "--num-gpus")) {
        if (n > 65535) throw UsageError("--num-gpus must be 1 to 65535, got " + std::to_string(n));
        if (inference && n != 1) throw UsageError("--num-gpus: data-parallel prediction is of training; --mode inference runs on one GPU");
        grid.gpu_counts.push_back(static_cast<int>(n));
    }
    const std::vector<std::string> keys = o.gpus.empty() ? seed_gpus : split_list(o.gpus);
    if (keys.empty()) throw UsageError("--gpu: no GPU given");
    const std::size_t configurations = grid.batches.size() * grid.precisions.size() * grid.gpu_counts.size() * keys.size();
    if (configurations > 10'000'000) throw UsageError("the grid has " + std::to_string(configurations) + " configurations; at most 10,000,000");
    const Graph graph = graph_input_arg(o.model, o.graph, o.size, "sweep");
    std::vector<GpuContext> contexts;
    contexts.reserve(keys.size());
    for (const auto& key : keys) {
        contexts.push_back(default_gpu_context(gpu_arg(key)));
        for (const int n : grid.gpu_counts) o.cluster.apply(contexts.back().ctx, n);
    }
    for (const auto& c : contexts) grid.gpus.push_back({&c.ctx, c.framework});

    const std::vector<SweepRow> rows = sweep(graph, grid, options, o.jobs);

    if (o.json) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& r : rows) {
            out.push_back({{"gpu", keys[r.gpu]}, {"profile", contexts[r.gpu].ctx.ceilings.kind}, {"precision", to_string(r.precision)},
                           {"batch", r.batch}, {"gpus", r.gpus}, {"step_seconds", r.step.value()},
                           {"samples_per_second", r.samples_per_second}, {"peak_bytes", r.peak.value()},
                           {"usable_bytes", r.usable.value()}, {"fits", r.fits}});
        }
        std::cout << nlohmann::json{{"kind", "roofsim-sweep"}, {"schema_version", 1}, {"model", graph.name}, {"mode", o.mode},
                                    {"optimizer", to_string(options.lowering.optimizer.kind)}, {"rows", out}}
                         .dump(1)
                  << '\n';
        return;
    }
    if (o.csv) {
        std::cout << "kind,schema_version,mode,gpu,profile,precision,batch,gpus,step_seconds,samples_per_second,peak_bytes,usable_bytes,fits\n";
        for (const auto& r : rows) {
            std::cout << "roofsim-sweep,1," << o.mode << ',' << keys[r.gpu] << ',' << contexts[r.gpu].ctx.ceilings.kind << ','
                      << to_string(r.precision) << ',' << r.batch << ',' << r.gpus << ',' << r.step.value() << ','
                      << r.samples_per_second << ',' << r.peak.value() << ',' << r.usable.value() << ',' << (r.fits ? 1 : 0) << '\n';
        }
        return;
    }
    std::ostringstream text;
    text << (inference ? "Inference forward of " : "Training step of ") << graph.name << ": " << rows.size()
         << " configurations (predicted; batch per GPU).\n\n";
    TextTable t({"GPU", "profile", "precision", "batch", "GPUs", "step ms", "samples/s", "peak / usable GiB", "fits"});
    for (const auto& r : rows) {
        t.add_row({keys[r.gpu], contexts[r.gpu].ctx.ceilings.kind, std::string(to_string(r.precision)), std::to_string(r.batch),
                   std::to_string(r.gpus), format_number("%.2f", to_milliseconds(r.step)), format_number("%.1f", r.samples_per_second),
                   format_number("%.1f", to_gib(r.peak)) + " / " + format_number("%.1f", to_gib(r.usable)), r.fits ? "yes" : "NO"});
    }
    t.print(text);
    std::cout << text.str();
}

}  // namespace

Command add_sweep_command(CLI::App& app) {
    auto o = std::make_shared<SweepOptions>();
    auto* cmd = app.add_subcommand("sweep", "One model over a grid of GPUs x batch sizes x precision modes x GPU counts, on all cores");
    auto* graph = cmd->add_option("--graph", o->graph, "Layer graph JSON (docs/graph-format.md)");
    cmd->add_option("--model", o->model, "A built-in model: " + zoo::joined_model_names())->excludes(graph);
    cmd->add_option("--size", o->size, "Built-in model's image size or sequence length")->check(positive_integer());
    cmd->add_option("--gpu", o->gpus, "GPU keys, comma-separated (default: the seed GPUs of compare)");
    cmd->add_option("--batch", o->batches, "Batch sizes per GPU: N, A-B (every one), A-B/STEP, comma-separated")->capture_default_str();
    cmd->add_option("--precision", o->precisions, "Precision modes, comma-separated (" + precision_mode_list + ")")->capture_default_str();
    cmd->add_option("--num-gpus", o->num_gpus, "GPU counts (data parallel), as --batch")->capture_default_str();
    o->cluster.add_to(cmd);
    o->optimizer_option = cmd->add_option("--optimizer", o->optimizer, "sgd (momentum), adam, adamw, none")->capture_default_str();
    cmd->add_option("--mode", o->mode, step_mode_help)->capture_default_str();
    cmd->add_option("--jobs", o->jobs, "Threads (default: one per core)")->check(CLI::Range(1u, 1024u));
    auto* json = cmd->add_flag("--json", o->json, "Print JSON (kind roofsim-sweep)");
    auto* csv = cmd->add_flag("--csv", o->csv, "Print CSV, one row per configuration");
    json->excludes(csv);
    return {cmd, [o](const Context&) { run_sweep(*o); }};
}

}  // namespace roofsim::cli
