// roofsim predict: one training step (or inference forward) of a layer graph, kernel IR or built-in model.

#include "commands.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <variant>

namespace roofsim::cli {
namespace {

struct PredictOptions {
    std::string graph, ir, model, gpu, precision = "fp32", optimizer = "sgd", emit_ir, framework, svg, mode = "training";
    std::string batch_text = "32";  ///< a positive integer, or "max"
    std::int64_t batch = 32, size = 0, num_gpus = 1;
    bool batch_max = false;
    std::size_t top = 0;
    bool json = false, csv = false, datasheet = false, fused = false, strict = false, by_op = false;
    bool no_weight_decay = false;
    double host_time_scale = 1.0;
    ClusterOptions cluster;
    // options whose presence matters (an IR refuses them)
    CLI::Option *precision_option = nullptr, *batch_option = nullptr, *optimizer_option = nullptr,
                *fused_option = nullptr, *no_weight_decay_option = nullptr, *mode_option = nullptr;
};

using ModelInput = std::variant<Graph, KernelIr>;

/// The layers a table, JSON or CSV shows: all in forward order, or the `top` with the most GPU time.
std::vector<const LayerTime*> layers_shown(const Prediction& p, std::size_t top) {
    std::vector<const LayerTime*> rows;
    for (const auto& r : p.layers) rows.push_back(&r);
    if (top > 0 && top < rows.size()) {
        std::partial_sort(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(top), rows.end(), [](auto* a, auto* b) {
            return (a->forward_gpu + a->backward_gpu) > (b->forward_gpu + b->backward_gpu);
        });
        rows.resize(top);
    }
    return rows;
}

/// The operators shown: all, most GPU time first, or the first `top` of them.
std::vector<OperatorTime> operators_shown(const Prediction& p, std::size_t top) {
    auto ops = time_by_operator(p);
    if (top > 0 && top < ops.size()) ops.resize(top);
    return ops;
}

void print_layer_table(const std::vector<const LayerTime*>& rows, std::ostream& out) {
    Seconds longest{0};
    for (const auto* r : rows) longest = std::max({longest, r->forward_gpu, r->backward_gpu, r->forward_host + r->backward_host});
    const auto unit = TimeUnit::for_largest(longest);
    const std::string u = unit.name;
    TextTable t({"layer", "op", "fwd " + u, "bwd " + u, "host " + u, "GFLOP", "MB", "bound", "share %"});
    t.overflow(0, Overflow::shorten_middle);
    for (const auto* r : rows) {
        t.add_row({r->layer.str(), r->op.str(), unit(r->forward_gpu), unit(r->backward_gpu), unit(r->forward_host + r->backward_host),
                   format_number("%.2f", r->flops.value() / 1e9), format_number("%.1f", r->bytes.value() / 1e6),
                   std::string(to_string(r->bound)) + (r->flagged ? " (flagged)" : ""), format_number("%.1f", 100 * r->share)});
    }
    t.print(out);
}

void print_step_line(const Prediction& p, std::ostream& out) {
    const auto unit = TimeUnit::for_largest(p.step_time);
    const std::string u = std::string(" ") + unit.name;
    if (p.mode == StepMode::inference) {
        out << "forward " << unit(p.step_time) << u << " (GPU busy " << format_duration(p.gpu_time);
        if (p.gpu_gap_time.value() > 0) out << " + " << format_duration(p.gpu_gap_time) << " between kernels";
        out << ", host issue " << format_duration(p.host_time) << ", " << p.kernels.kernels.size() << " kernels; "
            << (p.host_time > p.gpu_time + p.gpu_gap_time ? "host-bound" : "GPU-bound") << ")\n";
        return;
    }
    out << "step " << unit(p.step_time) << u << " = ";
    if (p.zero_grad_time.value() > 0) out << "zero_grad " << unit(p.zero_grad_time) << " + ";
    out << "forward " << unit(p.forward_time) << " + backward " << unit(p.backward_time) << " + optimizer "
        << unit(p.optimizer_time) << " (GPU busy " << format_duration(p.gpu_time);
    if (p.gpu_gap_time.value() > 0) out << " + " << format_duration(p.gpu_gap_time) << " between kernels";
    out << ", host issue " << format_duration(p.host_time) << ", " << p.kernels.kernels.size() << " kernels)\n";
}

void print_flagged(const Prediction& p, std::ostream& out) {
    if (p.flagged_kernels == 0) return;
    out << "flagged: " << p.flagged_kernels << " kernels have no cost model (costed on the roofline from their bytes, "
        << format_duration(p.flagged_gpu_time) << ", " << format_number("%.1f", 100 * (p.flagged_gpu_time / p.gpu_time))
        << "% of GPU time; their real time is unknown):";
    std::map<std::string, int> ops;
    for (const auto* k : flagged_kernels(p.kernels)) ops[k->op.str()] += 1;
    for (const auto& [op, n] : ops) out << ' ' << op << " x" << n;
    out << '\n';
}

void print_prediction(const Prediction& p, std::size_t top, bool batch_max, std::ostream& out) {
    out << (p.mode == StepMode::inference ? "Inference forward of " : "Training step of ") << p.kernels.model << " on " << p.gpu_key << ", batch " << p.batch << ", " << to_string(p.precision)
        << (batch_max ? " (the largest batch that fits)" : "")
        << "\n  ceilings: " << p.ceilings_origin << "\n  host costs: " << p.host_costs_source << "\n\n";
    print_layer_table(layers_shown(p, top), out);
    if (top > 0 && top < p.layers.size()) out << "(top " << top << " of " << p.layers.size() << " rows by GPU time)\n";
    out << '\n';
    print_step_line(p, out);
    if (p.gpus > 1) {
        out << "data parallel (DDP) over " << p.gpus << " GPUs, batch " << p.batch << " each: all-reduce "
            << format_duration(p.communication_time) << " in " << p.buckets.size() << " buckets on its own stream, "
            << format_duration(p.communication_exposed) << " exposed\n  collectives: " << p.communication_source << "\n";
    }
    out << format_number("%.1f", static_cast<double>(p.batch) * p.gpus / p.step_time.value()) << " samples/s"
        << (p.gpus > 1 ? " over all GPUs" : "") << "; " << format_number("%.2f", p.parameters / 1e6) << " M parameters\n";
    const auto gib = [](Bytes b) { return format_number("%.2f", to_gib(b)); };
    out << "memory GiB: peak " << gib(p.memory.peak) << (p.memory_fit.fits() ? " fits " : " DOES NOT FIT ")
        << gib(p.memory_fit.usable()) << " usable (" << gib(p.memory_fit.capacity) << " less " << gib(p.memory_fit.context)
        << " CUDA context; allocator fragmentation not modelled)\n";
    if (p.mode == StepMode::inference) {
        out << "  = parameters " << gib(p.memory.parameters) << ", layer outputs alive at once " << gib(p.memory.activations)
            << ", inputs " << gib(p.memory.inputs) << ", autocast " << gib(p.memory.autocast_copies) << "\n";
        return print_flagged(p, out);
    }
    out << "  = parameters " << gib(p.memory.parameters)
        << ", gradients " << gib(p.memory.gradients) << ", optimizer " << gib(p.memory.optimizer_state)
        << (p.memory.master_weights.value() > 0 ? ", master weights " + gib(p.memory.master_weights) : std::string()) << ", activations "
        << gib(p.memory.activations) << ", inputs " << gib(p.memory.inputs) << ", autocast " << gib(p.memory.autocast_copies)
        << (p.gpus > 1 ? ", DDP buckets " + gib(p.memory.gradient_buckets) : std::string()) << "\n";
    print_flagged(p, out);
}

void print_operators(const Prediction& p, std::size_t top, std::ostream& out) {
    const auto ops = operators_shown(p, top);
    Seconds longest{0};
    for (const auto& o : ops) longest = std::max(longest, o.gpu_time);
    const auto unit = TimeUnit::for_largest(longest);
    TextTable t({"operator", "kind", "kernels", std::string("GPU ") + unit.name, "GFLOP", "MB", "share %"});
    t.overflow(0, Overflow::shorten_middle);
    for (const auto& o : ops) {
        t.add_row({o.op, std::string(to_string(o.kind)), std::to_string(o.kernels), unit(o.gpu_time),
                   format_number("%.2f", o.flops.value() / 1e9), format_number("%.1f", o.bytes.value() / 1e6),
                   format_number("%.1f", 100 * o.share)});
    }
    t.print(out);
    const auto total = time_by_operator(p).size();
    if (ops.size() < total) out << "(top " << ops.size() << " of " << total << " operators by GPU time; --by-op lists all)\n";
}

nlohmann::json operator_json(const OperatorTime& o) {
    return {{"operator", o.op},         {"kind", to_string(o.kind)}, {"kernels", o.kernels}, {"gpu_seconds", o.gpu_time.value()},
            {"flops", o.flops.value()}, {"bytes", o.bytes.value()},  {"share_of_gpu_time", o.share}};
}

/// The prediction as JSON: the library's document, its layers (the top K with --top) and its operators
/// (the top K with --by-op --top), with how many of each were left out.
nlohmann::json prediction_json(const Prediction& p, const CostContext& ctx, std::size_t top, bool by_op) {
    nlohmann::json j = with_kind(to_json(p), "roofsim-prediction");
    j["gemm_kernels"] = gemm_kernels_json(p, ctx);
    std::map<const LayerTime*, std::size_t> index;
    for (std::size_t i = 0; i < p.layers.size(); ++i) index[&p.layers[i]] = i;
    nlohmann::json layers = nlohmann::json::array();
    for (const auto* r : layers_shown(p, by_op ? 0 : top)) layers.push_back(j["layers"][index[r]]);
    j["layers"] = layers;
    j["layers_shown"] = layers.size();
    j["layers_total"] = p.layers.size();
    nlohmann::json ops = nlohmann::json::array();
    for (const auto& o : operators_shown(p, by_op ? top : 0)) ops.push_back(operator_json(o));
    j["operators"] = ops;
    j["operators_shown"] = ops.size();
    j["operators_total"] = time_by_operator(p).size();
    j["samples_per_second"] = static_cast<double>(p.batch) * p.gpus / p.step_time.value();
    nlohmann::json flagged = nlohmann::json::object();
    for (const auto* k : flagged_kernels(p.kernels)) flagged[k->op.str()] = flagged.value(k->op.str(), 0) + 1;
    j["flagged_ops"] = flagged;
    return j;
}

/// CSV, one row per layer (the top K with --top) or per operator (--by-op); every row starts with
/// the kind and the schema version.
void print_prediction_csv(const Prediction& p, std::size_t top, bool by_op, std::ostream& out) {
    if (by_op) {
        out << "kind,schema_version,operator,op_kind,kernels,gpu_seconds,flops,bytes,share\n";
        for (const auto& o : operators_shown(p, top)) {
            out << "roofsim-prediction-by-op,1," << csv_field(o.op) << ',' << to_string(o.kind) << ',' << o.kernels << ','
                << o.gpu_time.value() << ',' << o.flops.value() << ',' << o.bytes.value() << ',' << o.share << '\n';
        }
        return;
    }
    out << "kind,schema_version,layer,op,forward_gpu_seconds,backward_gpu_seconds,host_seconds,flops,bytes,bound,flagged_kernels,"
           "share\n";
    for (const auto* r : layers_shown(p, top)) {
        out << "roofsim-prediction,1," << csv_field(r->layer.str()) << ',' << csv_field(r->op.str()) << ','
            << r->forward_gpu.value() << ',' << r->backward_gpu.value() << ',' << (r->forward_host + r->backward_host).value()
            << ',' << r->flops.value() << ',' << r->bytes.value() << ',' << to_string(r->bound) << ',' << r->flagged << ','
            << r->share << '\n';
    }
}

/// What `predict --graph/--ir FILE` reads: a layer graph or a kernel IR, the file's `kind` says which.
ModelInput load_model_file(const std::string& path) {
    const nlohmann::json doc = detail::read_json_file(path);
    const std::string name = std::filesystem::path(path).filename().string();
    if (doc.is_object() && doc.contains("kind") && doc["kind"] == "roofsim-kernel-ir") return kernel_ir_from_json(doc, name);
    return graph_from_json(doc, name);
}

ModelInput load_input(const PredictOptions& o) {
    if (o.model.empty() && o.size > 0) throw UsageError(size_needs_model);
    if (!o.model.empty()) {
        auto g = zoo::model(o.model, o.size);
        if (!g) throw UsageError("unknown model '" + o.model + "'; built in: " + zoo::joined_model_names());
        return std::move(*g);
    }
    return load_model_file(o.graph.empty() ? o.ir : o.graph);
}

/// The IR's shapes and kernels are fixed when it is captured: options that would change them are refused.
void check_ir_options(const PredictOptions& o, const KernelIr& ir, OptimizerKind optimizer) {
    const std::string again = "; export the model again to change it";
    if (o.precision_option->count() > 0 && o.precision != to_string(ir.list.precision)) {
        throw UsageError("--precision " + o.precision + ": the IR was captured under " + std::string(to_string(ir.list.precision)) + again);
    }
    if (o.batch_max) throw UsageError("--batch max: the IR was captured at batch " + std::to_string(ir.batch) + again);
    if (o.batch_option->count() > 0 && o.batch != ir.batch) {
        throw UsageError("--batch " + std::to_string(o.batch) + ": the IR was captured at batch " + std::to_string(ir.batch) + again);
    }
    if ((o.optimizer_option->count() > 0 && optimizer != ir.optimizer.kind) ||
        (o.fused_option->count() > 0 && o.fused != ir.optimizer.fused)) {
        throw UsageError("--optimizer/--fused: the IR was captured with " + std::string(to_string(ir.optimizer.kind)) +
                         (ir.optimizer.fused ? " (fused)" : "") + again);
    }
    if (o.no_weight_decay_option->count() > 0 && ir.optimizer.weight_decay) {
        throw UsageError("--no-weight-decay: the IR was captured with weight decay" + again);
    }
    if (!o.emit_ir.empty()) throw UsageError("--emit-ir: the input is already a kernel IR");
    if (o.mode_option->count() > 0 && o.mode != to_string(ir.list.mode)) {
        throw UsageError("--mode " + o.mode + ": the IR was captured as " + std::string(to_string(ir.list.mode)) + again);
    }
    if (o.num_gpus != 1) {
        throw UsageError("--num-gpus: a kernel IR does not say which layer each parameter belongs to; predict data-parallel "
                         "training from a layer graph (--graph) or a built-in model (--model)");
    }
}

/// The lowering options the command line asks for (precision mode, batch, optimizer).
roofsim::PredictOptions predict_options(PredictOptions& o) {
    roofsim::PredictOptions options;
    const auto mode = precision_mode_from_key(o.precision);
    if (!mode) throw UsageError("unknown precision mode '" + o.precision + "'; use " + precision_mode_list);
    const auto optimizer = optimizer_from_key(o.optimizer);
    if (!optimizer) throw UsageError("unknown optimizer '" + o.optimizer + "'; use sgd, adam, adamw or none");
    options.lowering.mode = step_mode_arg(o.mode);
    if (options.lowering.mode == StepMode::inference) {
        if ((o.optimizer_option->count() > 0 && *optimizer != OptimizerKind::none) || o.fused_option->count() > 0 ||
            o.no_weight_decay_option->count() > 0) {
            throw UsageError("--optimizer/--fused/--no-weight-decay: an inference forward (--mode inference) has no optimizer step");
        }
        if (o.num_gpus != 1) throw UsageError("--num-gpus: data-parallel prediction is of training; --mode inference runs on one GPU");
    }
    if (o.batch_text == "max") {
        o.batch_max = true;
        o.batch = 1;
    } else {
        std::int64_t b = 0;
        const char* end = o.batch_text.data() + o.batch_text.size();
        const auto [ptr, ec] = std::from_chars(o.batch_text.data(), end, b);
        // PyTorch's sizes are int64: a batch beyond it is no batch
        if (ec == std::errc::result_out_of_range) throw UsageError("--batch " + o.batch_text + ": does not fit in a 64-bit integer");
        if (ec != std::errc() || ptr != end || b <= 0) {
            throw UsageError("--batch must be a positive integer or max, got '" + o.batch_text + "'");
        }
        o.batch = b;
    }
    if (o.num_gpus < 1 || o.num_gpus > 65535) throw UsageError("--num-gpus must be 1 to 65535, got " + std::to_string(o.num_gpus));
    options.data_parallel.gpus = static_cast<int>(o.num_gpus);
    options.lowering.batch = o.batch;
    options.lowering.precision = *mode;
    options.lowering.optimizer.kind = *optimizer;
    options.lowering.optimizer.fused = o.fused;
    options.lowering.optimizer.weight_decay = !o.no_weight_decay;
    options.host_time_scale = o.host_time_scale;
    return options;
}

void check_strict(const Prediction& p) {
    if (p.flagged_kernels == 0) return;
    std::ostringstream why;
    why << p.flagged_kernels << " kernels have no cost model (--strict):";
    for (const auto* k : flagged_kernels(p.kernels)) {
        why << "\n  " << (k->layer.empty() ? "(model code)" : k->layer) << ": " << k->op << " (" << k->flag << ")";
    }
    throw std::runtime_error(why.str());
}

void print_result(const PredictOptions& o, const Prediction& p, const CostContext& ctx, bool from_ir) {
    if (o.json) {
        nlohmann::json j = prediction_json(p, ctx, o.top, o.by_op);
        j["batch_is_largest_that_fits"] = o.batch_max;  // --batch max
        return void(std::cout << j.dump(2) << '\n');
    }
    if (o.csv) return print_prediction_csv(p, o.top, o.by_op, std::cout);
    std::ostringstream text;
    if (o.by_op) {
        print_operators(p, o.top, text);
    } else {
        print_prediction(p, o.top, o.batch_max, text);
        if (from_ir) {
            text << "\nGPU time by operator:\n";
            print_operators(p, 10, text);
        }
    }
    std::cout << wrap_lines(text.str());
}

void run_predict(PredictOptions& o, const Context& ctx) {
    if (o.graph.empty() && o.model.empty() && o.ir.empty()) throw UsageError("predict needs --graph FILE, --ir FILE or --model NAME");
    const auto& calibration = ctx.calibration;
    if (o.gpu.empty()) {
        if (!calibration || calibration->device.gpu_key.empty()) throw UsageError("predict needs --gpu KEY");
        o.gpu = calibration->device.gpu_key;
        // a key read from a file is bad data, not a bad option
        try {
            (void)gpu_or_throw(o.gpu);
        } catch (const std::invalid_argument& e) {
            throw std::runtime_error(std::string("the calibration's /device/gpu_key: ") + e.what());
        }
    }
    const auto& spec = gpu_arg(o.gpu);
    auto options = predict_options(o);
    const ModelInput input = load_input(o);
    if (const auto* ir = std::get_if<KernelIr>(&input)) check_ir_options(o, *ir, options.lowering.optimizer.kind);
    std::optional<FrameworkProfile> framework_file;
    if (!o.framework.empty()) framework_file = load_framework_profile(o.framework);
    options.framework = framework_file ? &*framework_file : default_framework_profile(spec.key);
    if (!o.emit_ir.empty() && o.num_gpus != 1) throw UsageError("--emit-ir writes one GPU's step: leave out --num-gpus");
    // the calibration given for this GPU; else its datasheet (--datasheet), or a profile derived from
    // the calibration given for another GPU; else the default: built in, measured or derived
    auto cost = calibration && calibration->device.gpu_key == spec.key ? make_cost_context(spec, &*calibration, options.framework)
                : o.datasheet ? make_cost_context(spec, nullptr, options.framework)
                : calibration && !calibration->device.gpu_key.empty() ? make_derived_cost_context(spec, *calibration, options.framework)
                : calibration ? make_cost_context(spec, nullptr, options.framework)
                              : make_default_cost_context(spec, options.framework);
    if (o.num_gpus > 1 && !o.datasheet) add_builtin_collectives(cost, spec.key);
    o.cluster.apply(cost, o.num_gpus);
    const auto* graph = std::get_if<Graph>(&input);
    const Prediction p = o.batch_max ? max_batch(*graph, cost, options).prediction
                         : graph     ? predict(*graph, cost, options)
                                     : predict(std::get<KernelIr>(input), cost, options);
    if (!p.memory_fit.fits()) {
        std::cerr << "warning: the step does not fit " << p.gpu_key << ": its predicted peak "
                  << format_number("%.2f", to_gib(p.memory_fit.peak)) << " GiB is over the "
                  << format_number("%.2f", to_gib(p.memory_fit.usable())) << " GiB usable\n";
    }
    if (o.strict) check_strict(p);
    // the files are written once the prediction has succeeded, each atomically
    if (graph && !o.emit_ir.empty() && o.num_gpus == 1) {
        write_file_atomically(o.emit_ir, to_json(to_kernel_ir(lower(*graph, options.lowering), options.lowering)).dump(1) + "\n");
    }
    if (!o.svg.empty()) write_file_atomically(o.svg, prediction_svg(p, cost.ceilings, o.top > 0 ? o.top : 20));
    print_result(o, p, cost, !graph);
}

void add_source_options(CLI::App* cmd, PredictOptions& o) {
    auto* graph = cmd->add_option("--graph", o.graph, "Layer graph JSON (docs/graph-format.md), or a kernel IR file (its kind says which)");
    auto* ir = cmd->add_option("--ir,--torch-ir", o.ir,
                               "Kernel IR JSON (docs/ir-format.md), e.g. from python3 -m roofsim_export; "
                               "its precision, batch and optimizer are the ones it was captured with")
                   ->excludes(graph);
    cmd->add_option("--model", o.model, "A built-in model: " + zoo::joined_model_names())->excludes(graph)->excludes(ir);
    cmd->add_option("--size", o.size, "Built-in model's image size or sequence length (default: its usual one, roofsim models)")
        ->check(positive_integer());
}

void add_training_options(CLI::App* cmd, PredictOptions& o) {
    cmd->add_option("--gpu", o.gpu, "GPU key or nvidia-smi name (default: the calibration's GPU)");
    o.mode_option = cmd->add_option("--mode", o.mode, step_mode_help)->capture_default_str();
    o.precision_option =
        cmd->add_option("--precision", o.precision, "PyTorch precision mode: fp32, fp32-strict, tf32, amp-bf16, amp-fp16, bf16, fp16-master (apex amp O2)")->capture_default_str();
    o.batch_option = cmd->add_option("--batch", o.batch_text,
                                     "Batch size (per GPU), or max: the largest whose predicted peak fits the GPU's memory "
                                     "less the CUDA context")
                         ->capture_default_str();
    cmd->add_option("--num-gpus", o.num_gpus,
                    "Data-parallel training over N GPUs (DistributedDataParallel's defaults: 25 MiB buckets, all-reduce "
                    "overlapped with the backward); a layer graph or built-in model only")
        ->capture_default_str();
    o.cluster.add_to(cmd);
    o.optimizer_option = cmd->add_option("--optimizer", o.optimizer, "sgd (momentum), adam, adamw, none")->capture_default_str();
    o.fused_option = cmd->add_flag("--fused", o.fused, "The optimizer's fused=True implementation (default: foreach)");
    o.no_weight_decay_option = cmd->add_flag(
        "--no-weight-decay", o.no_weight_decay,
        "The optimizer without weight decay (default: with it, as a training recipe has it: SGD's costs one more foreach "
        "pass and its own host time, AdamW's one more multiply)");
}

void add_cost_options(CLI::App* cmd, PredictOptions& o) {
    cmd->add_option("--framework", o.framework,
                    "Framework profile (host costs) from calibrate/torch_framework_probe.py (default: the built-in one)");
    cmd->add_option("--host-time-scale", o.host_time_scale,
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
    cmd->add_flag("--datasheet", o.datasheet, "Bare datasheet ceilings: no measured profile, and none derived from another GPU's (docs/derivation.md)");
    cmd->add_flag("--strict", o.strict, "Refuse a model with ops that have no cost model (flagged), listing them");
}

void add_output_options(CLI::App* cmd, PredictOptions& o) {
    cmd->add_flag("--by-op", o.by_op, "Table by operator (aten op or kernel) instead of by layer");
    cmd->add_option("--emit-ir", o.emit_ir, "Also write the kernel IR the graph or model lowers to (docs/ir-format.md)");
    cmd->add_option("--top", o.top,
                    "Show the K layers (with --by-op: operators) with the most GPU time, in every format and in the SVG's bars")
        ->check(positive_integer());
    auto* json = cmd->add_flag("--json", o.json, "Print JSON (kind roofsim-prediction)");
    auto* csv = cmd->add_flag("--csv", o.csv, "Print CSV, one row per layer (with --by-op: per operator)");
    json->excludes(csv);
    cmd->add_option("--svg", o.svg, "Write an SVG report: roofline with every layer as a point, per-layer time bars");
}

}  // namespace

Command add_predict_command(CLI::App& app) {
    auto o = std::make_shared<PredictOptions>();
    auto* cmd = app.add_subcommand("predict", "Predict one training step or inference forward: per-layer times, totals, memory");
    add_source_options(cmd, *o);
    add_training_options(cmd, *o);
    add_cost_options(cmd, *o);
    add_output_options(cmd, *o);
    return {cmd, [o](const Context& ctx) { run_predict(*o, ctx); }};
}

}  // namespace roofsim::cli
