// roofsim compare: one model's training step on several GPUs, side by side.

#include "commands.hpp"

#include <charconv>
#include <cmath>
#include <iostream>
#include <memory>
#include <sstream>

namespace roofsim::cli {
namespace {

struct CompareOptions {
    std::string model, graph, gpus, precision = "fp32", optimizer = "sgd", batch = "32", framework, mode = "training";
    std::string prices, svg;
    CLI::Option* optimizer_option = nullptr;
    std::int64_t size = 0, num_gpus = 1, samples = 0;
    double price_per_hour = 0;
    ClusterOptions cluster;
    bool json = false, csv = false;
};

/// One row's epoch time and cost, where --samples and a price are given.
struct RowCost {
    std::optional<double> epoch_seconds, price, cost_per_epoch, cost_per_million;
    std::string price_source;
};

/// The price table --prices names: a file, or "builtin" (the newest table in data/prices).
std::optional<PriceTable> price_table_arg(const std::string& arg) {
    if (arg.empty()) return std::nullopt;
    if (arg != "builtin") return load_price_table(arg);
    const auto files = detail::json_files_in(builtin_data_dir() / "prices");
    if (files.empty()) throw std::runtime_error((builtin_data_dir() / "prices").string() + ": no built-in price table");
    return load_price_table(files.back());
}

RowCost row_cost(const CompareOptions& o, const std::optional<PriceTable>& table, const Comparison& r) {
    RowCost c;
    const Prediction& p = r.prediction;
    if (o.price_per_hour > 0) {
        c.price = o.price_per_hour;
        c.price_source = "--price-per-hour";
    } else if (table) {
        const GpuPrice& price = table->at(r.gpu_key);
        c.price = price.per_hour;
        c.price_source = table->date + ", " + price.source;
    }
    const double rate = samples_per_second(p);
    if (c.price) c.cost_per_million = gpu_cost(1e6 / rate, p.gpus, *c.price);
    if (o.samples > 0) {
        c.epoch_seconds = epoch_seconds(o.samples, static_cast<double>(p.batch) * p.gpus, p.step_time.value());
        if (c.price) c.cost_per_epoch = gpu_cost(*c.epoch_seconds, p.gpus, *c.price);
    }
    return c;
}

std::string optional_csv(const std::optional<double>& v) {
    if (!v) return "";
    std::ostringstream s;
    s << *v;
    return s.str();
}

/// "3.2 h", "41 min", "52 s".
std::string human_duration(double seconds) {
    if (seconds >= 2 * 86400) return format_number("%.1f d", seconds / 86400);
    if (seconds >= 2 * 3600) return format_number("%.1f h", seconds / 3600);
    if (seconds >= 120) return format_number("%.0f min", seconds / 60);
    return format_number("%.1f s", seconds);
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
    if (o.price_per_hour < 0 || !std::isfinite(o.price_per_hour)) throw UsageError("--price-per-hour must be a positive number");
    return s;
}

std::string gib(Bytes b) { return format_number("%.1f", to_gib(b)); }

void run_compare(const CompareOptions& o) {
    Setup s = setup(o);
    const Graph graph = graph_input_arg(o.model, o.graph, o.size, "compare");
    std::vector<std::string> keys = o.gpus.empty() ? seed_gpus : split_list(o.gpus);
    if (keys.empty()) throw UsageError("--gpu: no GPU given");
    std::optional<FrameworkProfile> framework_file;
    if (!o.framework.empty()) framework_file = load_framework_profile(o.framework);
    std::vector<GpuContext> contexts;
    contexts.reserve(keys.size());
    for (const auto& key : keys) {
        contexts.push_back(default_gpu_context(gpu_arg(key), framework_file ? &*framework_file : nullptr));
        o.cluster.apply(contexts.back().ctx, o.num_gpus);
    }
    const std::optional<PriceTable> table = price_table_arg(o.prices);
    // each GPU with its own framework profile (the host costs of the host it was measured on)
    std::vector<ComparedGpu> gpus;
    for (const auto& c : contexts) gpus.push_back({&c.ctx, c.framework});
    const std::vector<Comparison> rows = compare(graph, gpus, s.options, s.at_largest);
    const auto rate = [](const Prediction& p) { return samples_per_second(p); };
    std::vector<RowCost> costs;
    for (const auto& r : rows) costs.push_back(row_cost(o, table, r));
    const bool costed = o.samples > 0 || o.price_per_hour > 0 || table;
    const bool inference = s.options.lowering.mode == StepMode::inference;
    if (!o.svg.empty()) {
        std::vector<ComparedSeries> series;
        for (std::size_t i = 0; i < rows.size(); ++i) {
            const Prediction& p = rows[i].prediction;
            ComparedSeries g{rows[i].gpu_key, p.batch, rate(p), p.memory_fit.fits(), rows[i].largest_batch, {}, {}};
            PredictOptions at = s.options;
            at.framework = gpus[i].framework ? gpus[i].framework : s.options.framework;
            if (rows[i].largest_batch) {
                for (const auto& point : throughput_over_batch(graph, contexts[i].ctx, at, *rows[i].largest_batch)) {
                    g.over_batch.emplace_back(point.batch, point.samples_per_second);
                }
            }
            if (!inference && rows[i].largest_batch) {
                at.lowering.batch = p.batch;
                at.data_parallel.gpus = 1;
                std::vector<int> counts;
                for (int n = 1; n <= std::min<std::int64_t>(8, o.cluster.gpus_per_node); n *= 2) counts.push_back(n);
                for (const auto& point : scale(graph, contexts[i].ctx, at, counts)) g.scaling.emplace_back(point.gpus, point.speedup);
            }
            series.push_back(std::move(g));
        }
        const std::string title = (inference ? "Inference of " : "Training of ") + graph.name + ", " + o.precision + ", batch " +
                                  (s.at_largest ? std::string("max") : std::to_string(s.options.lowering.batch)) + " (predicted)";
        write_file_atomically(o.svg, comparison_svg(series, title));
    }

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
            const RowCost& c = costs[static_cast<std::size_t>(&r - rows.data())];
            // the figures of --samples and a price, where they were asked for
            if (c.epoch_seconds) out.back()["epoch_seconds"] = *c.epoch_seconds;
            if (c.price) {
                out.back()["price_per_gpu_hour"] = *c.price;
                out.back()["price_source"] = c.price_source;
                out.back()["cost_per_million_samples"] = *c.cost_per_million;
            }
            if (c.cost_per_epoch) out.back()["cost_per_epoch"] = *c.cost_per_epoch;
            out.back()["communication"] = p.communication_source;
        }
        nlohmann::json doc = {{"kind", "roofsim-comparison"}, {"schema_version", 3}, {"model", graph.name},
                              {"mode", o.mode}, {"precision", o.precision},
                              {"optimizer", to_string(s.options.lowering.optimizer.kind)},
                              {"batch", s.at_largest ? nlohmann::json("max") : nlohmann::json(s.options.lowering.batch)},
                              {"gpus_per_node", o.cluster.gpus_per_node}, {"rows", out}};
        if (o.samples > 0) doc["samples"] = o.samples;
        if (table) doc["currency"] = table->currency;
        if (o.price_per_hour > 0) doc["currency"] = "as given";
        std::cout << doc.dump(2) << '\n';
        return;
    }
    if (o.csv) {
        std::cout << "kind,schema_version,mode,gpu,profile,batch,gpus,step_seconds,samples_per_second,speedup,peak_bytes,usable_bytes,"
                     "fits,largest_batch,compute_share,memory_share,idle_share,epoch_seconds,price_per_gpu_hour,cost_per_epoch,"
                     "cost_per_million_samples\n";
        for (const auto& r : rows) {
            const Prediction& p = r.prediction;
            const RowCost& c = costs[static_cast<std::size_t>(&r - rows.data())];
            std::cout << "roofsim-comparison,3," << o.mode << ',' << r.gpu_key << ',' << r.profile << ',' << p.batch << ',' << p.gpus << ','
                      << p.step_time.value() << ',' << rate(p) << ',' << r.speedup << ',' << p.memory_fit.peak.value() << ','
                      << p.memory_fit.usable().value() << ',' << (p.memory_fit.fits() ? 1 : 0) << ','
                      << (r.largest_batch ? std::to_string(*r.largest_batch) : std::string()) << ',' << r.compute_share << ','
                      << r.memory_share << ',' << r.idle_share << ',' << optional_csv(c.epoch_seconds) << ',' << optional_csv(c.price)
                      << ',' << optional_csv(c.cost_per_epoch) << ',' << optional_csv(c.cost_per_million) << '\n';
        }
        return;
    }
    std::ostringstream text;
    text << (inference ? "Inference forward of " : "Training step of ") << graph.name << ", " << o.precision
         << (inference ? std::string() : ", " + o.optimizer) << ", batch "
         << (s.at_largest ? std::string("max (each GPU's largest that fits)") : std::to_string(s.options.lowering.batch))
         << (s.options.data_parallel.gpus > 1 ? " per GPU, " + o.cluster.describe(o.num_gpus) + " each (DDP)" : std::string())
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
    if (costed) {
        text << "\n"
             << (o.samples > 0 ? "Epoch: " + std::to_string(o.samples) + " samples in whole steps. " : std::string())
             << "Cost: the price per GPU-hour x GPUs x time.\n\n";
        TextTable c({"GPU", "GPUs", "epoch", "price / GPU-h", "cost / epoch", "cost / 1M samples", "price source"});
        for (std::size_t i = 0; i < rows.size(); ++i) {
            const RowCost& rc = costs[i];
            const auto money = [](const std::optional<double>& v) { return v ? format_number(*v >= 100 ? "%.0f" : "%.2f", *v) : std::string("-"); };
            c.add_row({rows[i].gpu_key, std::to_string(rows[i].prediction.gpus), rc.epoch_seconds ? human_duration(*rc.epoch_seconds) : "-",
                       money(rc.price), money(rc.cost_per_epoch), money(rc.cost_per_million),
                       rc.price ? rc.price_source.substr(0, 40) + (rc.price_source.size() > 40 ? "..." : "") : std::string("-")});
        }
        c.print(text);
        if (table) text << "Prices: " << table->origin << " (" << table->currency << ", " << table->unit << ", " << table->date << "): "
                        << table->source << "\n";
    }
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
    cmd->add_option("--size", o->size, "Built-in model's image size or sequence length (default: its usual one, roofsim models)")
        ->check(positive_integer());
    cmd->add_option("--gpu", o->gpus,
                    "GPU keys, comma-separated (default: rtx-3090, rtx-a6000, a100-40gb-sxm, a100-80gb-sxm, h100-sxm, h200-sxm)");
    cmd->add_option("--precision", o->precision, "PyTorch precision mode: fp32, fp32-strict, tf32, amp-bf16, amp-fp16, bf16, fp16-master (apex amp O2)")
        ->capture_default_str();
    o->optimizer_option = cmd->add_option("--optimizer", o->optimizer, "sgd (momentum), adam, adamw, none")->capture_default_str();
    cmd->add_option("--mode", o->mode, step_mode_help)->capture_default_str();
    cmd->add_option("--batch", o->batch, "Batch size per GPU, or max: each GPU at its largest batch that fits")->capture_default_str();
    cmd->add_option("--num-gpus", o->num_gpus, "Data-parallel training over N GPUs of each kind (DDP)")->capture_default_str();
    o->cluster.add_to(cmd);
    cmd->add_option("--framework", o->framework, "Framework profile (host costs) for every GPU (default: the built-in ones)");
    cmd->add_option("--samples", o->samples, "Samples in an epoch: adds its time (and cost, with a price)")->check(positive_integer());
    auto* price = cmd->add_option("--price-per-hour", o->price_per_hour, "Price of one GPU-hour, for every GPU compared")
                      ->check(CLI::PositiveNumber);
    cmd->add_option("--prices", o->prices,
                    "Price table (docs/prediction.md), or builtin: the dated, sourced table in data/prices; every GPU compared must be in it")
        ->excludes(price);
    cmd->add_option("--svg", o->svg, "Write an SVG: samples/s per GPU, throughput over batch with the largest that fits, speedup over GPUs");
    auto* json = cmd->add_flag("--json", o->json, "Print JSON (kind roofsim-comparison)");
    auto* csv = cmd->add_flag("--csv", o->csv, "Print CSV, one row per GPU");
    json->excludes(csv);
    return {cmd, [o](const Context&) { run_compare(*o); }};
}

}  // namespace roofsim::cli
