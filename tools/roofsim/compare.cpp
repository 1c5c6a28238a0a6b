// roofsim compare: one model's training step on several GPUs, side by side.

#include "commands.hpp"

#include <charconv>
#include <iostream>
#include <memory>
#include <sstream>

namespace roofsim::cli {
namespace {

struct CompareOptions {
    std::string model, graph, gpus, precision = "fp32", optimizer = "sgd", batch = "32", framework, mode = "training";
    CLI::Option* optimizer_option = nullptr;
    std::int64_t size = 0, num_gpus = 1;
    bool json = false, csv = false;
};

Graph load_graph_input(const CompareOptions& o) {
    if (!o.model.empty()) {
        auto g = zoo::model(o.model, o.size);
        if (!g) throw UsageError("unknown model '" + o.model + "'; built in: " + zoo::joined_model_names());
        return std::move(*g);
    }
    if (o.graph.empty()) throw UsageError("compare needs --model NAME or --graph FILE");
    if (o.size > 0) throw UsageError(size_needs_model);
    return load_graph(o.graph);
}

struct Setup {
    PredictOptions options;
    bool at_largest = false;
};

Setup setup(const CompareOptions& o) {
    Setup s;
    const auto mode = precision_mode_from_key(o.precision);
    if (!mode) throw UsageError("unknown precision mode '" + o.precision + "'; use " + precision_mode_list);
    const auto optimizer = optimizer_from_key(o.optimizer);
    if (!optimizer) throw UsageError("unknown optimizer '" + o.optimizer + "'; use sgd, adam, adamw or none");
    s.options.lowering.precision = *mode;
    s.options.lowering.optimizer.kind = *optimizer;
    s.options.lowering.mode = step_mode_arg(o.mode);
    if (s.options.lowering.mode == StepMode::inference) {
        if (o.optimizer_option->count() > 0 && *optimizer != OptimizerKind::none) {
            throw UsageError("--optimizer: an inference forward (--mode inference) has no optimizer step");
        }
        if (o.num_gpus != 1) throw UsageError("--num-gpus: data-parallel prediction is of training; --mode inference runs on one GPU");
        s.options.lowering.optimizer.kind = OptimizerKind::none;
    }
    if (o.batch == "max") {
        s.at_largest = true;
        s.options.lowering.batch = 1;
    } else {
        std::int64_t b = 0;
        const char* end = o.batch.data() + o.batch.size();
        const auto [ptr, ec] = std::from_chars(o.batch.data(), end, b);
        // PyTorch's sizes are int64: a batch beyond it is no batch
        if (ec == std::errc::result_out_of_range) throw UsageError("--batch " + o.batch + ": does not fit in a 64-bit integer");
        if (ec != std::errc() || ptr != end || b <= 0) throw UsageError("--batch must be a positive integer or max, got '" + o.batch + "'");
        s.options.lowering.batch = b;
    }
    if (o.num_gpus < 1 || o.num_gpus > 65535) throw UsageError("--num-gpus must be 1 to 65535, got " + std::to_string(o.num_gpus));
    s.options.data_parallel.gpus = static_cast<int>(o.num_gpus);
    return s;
}

std::string gib(Bytes b) { return format_number("%.1f", to_gib(b)); }

void run_compare(const CompareOptions& o) {
    Setup s = setup(o);
    const Graph graph = load_graph_input(o);
    std::vector<std::string> keys = o.gpus.empty() ? seed_gpus : split_list(o.gpus);
    if (keys.empty()) throw UsageError("--gpu: no GPU given");
    std::optional<FrameworkProfile> framework_file;
    if (!o.framework.empty()) framework_file = load_framework_profile(o.framework);
    std::vector<CostContext> contexts;
    std::vector<const FrameworkProfile*> frameworks;
    contexts.reserve(keys.size());
    for (const auto& key : keys) {
        const GpuSpec& spec = gpu_arg(key);
        const FrameworkProfile* fw = framework_file ? &*framework_file : find_builtin_framework_profile(spec.key);
        if (!fw && !builtin_framework_profiles().empty()) fw = &builtin_framework_profiles().front();
        contexts.push_back(make_default_cost_context(spec, fw));
        if (s.options.data_parallel.gpus > 1) add_builtin_collectives(contexts.back(), spec.key);
        frameworks.push_back(fw);
    }
    // each GPU with its own framework profile (the host costs of the host it was measured on)
    std::vector<ComparedGpu> gpus;
    for (std::size_t i = 0; i < contexts.size(); ++i) gpus.push_back({&contexts[i], frameworks[i]});
    const std::vector<Comparison> rows = compare(graph, gpus, s.options, s.at_largest);
    const auto rate = [](const Prediction& p) { return static_cast<double>(p.batch) * p.gpus / p.step_time.value(); };

    if (o.json) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& r : rows) {
            const Prediction& p = r.prediction;
            out.push_back({{"gpu", r.gpu_key}, {"profile", r.profile}, {"batch", p.batch}, {"gpus", p.gpus},
                           {"step_seconds", p.step_time.value()}, {"samples_per_second", rate(p)}, {"speedup", r.speedup},
                           {"peak_bytes", p.memory_fit.peak.value()}, {"usable_bytes", p.memory_fit.usable().value()},
                           {"fits", p.memory_fit.fits()},
                           {"largest_batch", r.largest_batch ? nlohmann::json(*r.largest_batch) : nlohmann::json(nullptr)},
                           {"compute_share", r.compute_share}, {"memory_share", r.memory_share}, {"idle_share", r.idle_share},
                           {"host_costs", p.host_costs_source}});
        }
        nlohmann::json doc = {{"kind", "roofsim-comparison"}, {"schema_version", 2}, {"model", graph.name},
                              {"mode", o.mode}, {"precision", o.precision},
                              {"optimizer", to_string(s.options.lowering.optimizer.kind)},
                              {"batch", s.at_largest ? nlohmann::json("max") : nlohmann::json(s.options.lowering.batch)},
                              {"rows", out}};
        std::cout << doc.dump(2) << '\n';
        return;
    }
    if (o.csv) {
        std::cout << "kind,schema_version,mode,gpu,profile,batch,gpus,step_seconds,samples_per_second,speedup,peak_bytes,usable_bytes,"
                     "fits,largest_batch,compute_share,memory_share,idle_share\n";
        for (const auto& r : rows) {
            const Prediction& p = r.prediction;
            std::cout << "roofsim-comparison,2," << o.mode << ',' << r.gpu_key << ',' << r.profile << ',' << p.batch << ',' << p.gpus << ','
                      << p.step_time.value() << ',' << rate(p) << ',' << r.speedup << ',' << p.memory_fit.peak.value() << ','
                      << p.memory_fit.usable().value() << ',' << (p.memory_fit.fits() ? 1 : 0) << ','
                      << (r.largest_batch ? std::to_string(*r.largest_batch) : std::string()) << ',' << r.compute_share << ','
                      << r.memory_share << ',' << r.idle_share << '\n';
        }
        return;
    }
    std::ostringstream text;
    const bool inference = s.options.lowering.mode == StepMode::inference;
    text << (inference ? "Inference forward of " : "Training step of ") << graph.name << ", " << o.precision
         << (inference ? std::string() : ", " + o.optimizer) << ", batch "
         << (s.at_largest ? std::string("max (each GPU's largest that fits)") : std::to_string(s.options.lowering.batch))
         << (s.options.data_parallel.gpus > 1 ? " per GPU, " + std::to_string(s.options.data_parallel.gpus) + " GPUs each (DDP)"
                                              : std::string())
         << "; speedup: samples/s over the first row's.\n"
         << (inference ? "Step: the forward's latency. " : "") << "Shares of the step: GPU time in compute-bound kernels, in memory-bound ones, the rest waiting on the host.\n\n";
    TextTable t({"GPU", "profile", "batch", "step ms", "samples/s", "speedup", "peak / usable GiB", "fits", "largest batch",
                 "compute %", "memory %", "host %"});
    for (const auto& r : rows) {
        const Prediction& p = r.prediction;
        t.add_row({r.gpu_key, r.profile, std::to_string(p.batch), format_number("%.2f", to_milliseconds(p.step_time)),
                   format_number("%.1f", rate(p)), format_number("%.2f", r.speedup),
                   gib(p.memory_fit.peak) + " / " + gib(p.memory_fit.usable()), p.memory_fit.fits() ? "yes" : "NO",
                   r.largest_batch ? std::to_string(*r.largest_batch) : std::string("none"),
                   format_number("%.0f", 100 * r.compute_share), format_number("%.0f", 100 * r.memory_share),
                   format_number("%.0f", 100 * r.idle_share)});
    }
    t.print(text);
    text << "Profiles: measured = the GPU's calibration and framework profile; datasheet = its datasheet, host costs of "
            "the host measured with another GPU. Memory: less the CUDA context; allocator fragmentation not modelled.\n";
    std::cout << wrap_lines(text.str());
}

}  // namespace

Command add_compare_command(CLI::App& app) {
    auto o = std::make_shared<CompareOptions>();
    auto* cmd = app.add_subcommand("compare", "One model's training step (or inference forward) on several GPUs: time, throughput, memory, largest batch");
    auto* graph = cmd->add_option("--graph", o->graph, "Layer graph JSON (docs/graph-format.md)");
    cmd->add_option("--model", o->model, "A built-in model: " + zoo::joined_model_names())->excludes(graph);
    cmd->add_option("--size", o->size, "Built-in model's image size or sequence length (default: resnet50 224, bert-base 128, gpt2-small 1024, bert-large-squad 384)")
        ->check(positive_integer());
    cmd->add_option("--gpu", o->gpus,
                    "GPU keys, comma-separated (default: rtx-3090, rtx-a6000, a100-40gb-sxm, a100-80gb-sxm, h100-sxm, h200-sxm)");
    cmd->add_option("--precision", o->precision, "PyTorch precision mode: fp32, fp32-strict, tf32, amp-bf16, amp-fp16, bf16, fp16-master (apex amp O2)")
        ->capture_default_str();
    o->optimizer_option = cmd->add_option("--optimizer", o->optimizer, "sgd (momentum), adam, adamw, none")->capture_default_str();
    cmd->add_option("--mode", o->mode, step_mode_help)->capture_default_str();
    cmd->add_option("--batch", o->batch, "Batch size per GPU, or max: each GPU at its largest batch that fits")->capture_default_str();
    cmd->add_option("--num-gpus", o->num_gpus, "Data-parallel training over N GPUs of each kind (DDP)")->capture_default_str();
    cmd->add_option("--framework", o->framework, "Framework profile (host costs) for every GPU (default: the built-in ones)");
    auto* json = cmd->add_flag("--json", o->json, "Print JSON (kind roofsim-comparison)");
    auto* csv = cmd->add_flag("--csv", o->csv, "Print CSV, one row per GPU");
    json->excludes(csv);
    return {cmd, [o](const Context&) { run_compare(*o); }};
}

}  // namespace roofsim::cli
