// roofsim models: the built-in models, each with its configuration, parameters, FLOPs per sample and
// the code its graph follows.

#include "commands.hpp"

#include <iostream>
#include <memory>
#include <sstream>

namespace roofsim::cli {
namespace {

struct ModelsOptions {
    bool json = false, csv = false;
};

/// A model's figures at its usual size: parameters, and FLOPs per sample of the forward and of a
/// training step (forward and backward; the optimizer's do not grow with the batch): the lowered
/// step's at batch 2 less its at batch 1.
struct ModelFigures {
    const zoo::ModelInfo* info = nullptr;
    std::int64_t parameters = 0;
    double forward_flops = 0, training_flops = 0;
};

ModelFigures figures(const zoo::ModelInfo& m) {
    const Graph g = m.build(m.default_size);
    auto flops = [&](std::int64_t batch) {
        LoweringOptions o;
        o.batch = batch;
        o.optimizer.kind = OptimizerKind::none;
        const LoweredStep s = lower(g, o);
        double forward = 0, training = 0;
        for (const Kernel& k : s.kernels.kernels) {
            if (k.phase == Phase::optimizer) continue;
            training += k.flops.value();
            if (k.phase == Phase::forward) forward += k.flops.value();
        }
        return std::make_tuple(s.parameter_count(), forward, training);
    };
    const auto [parameters, f1, t1] = flops(1);
    const auto [unused, f2, t2] = flops(2);
    (void)unused;
    return {&m, static_cast<std::int64_t>(parameters), f2 - f1, t2 - t1};
}

void run_models(const ModelsOptions& o) {
    std::vector<ModelFigures> rows;
    for (const auto& m : zoo::models) rows.push_back(figures(m));
    if (o.json) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& r : rows) {
            out.push_back({{"name", r.info->name}, {"size_meaning", r.info->size_meaning}, {"default_size", r.info->default_size},
                           {"configuration", r.info->configuration}, {"source", r.info->source}, {"parameters", r.parameters},
                           {"forward_flops_per_sample", r.forward_flops}, {"training_flops_per_sample", r.training_flops}});
        }
        std::cout << nlohmann::json{{"kind", "roofsim-models"}, {"schema_version", 1}, {"models", out}}.dump(2) << '\n';
        return;
    }
    if (o.csv) {
        std::cout << "kind,schema_version,name,size_meaning,default_size,parameters,forward_flops_per_sample,training_flops_per_sample,"
                     "configuration,source\n";
        for (const auto& r : rows) {
            std::cout << "roofsim-models,1," << r.info->name << ',' << r.info->size_meaning << ',' << r.info->default_size << ','
                      << r.parameters << ',' << r.forward_flops << ',' << r.training_flops << ',' << csv_field(std::string(r.info->configuration))
                      << ',' << csv_field(std::string(r.info->source)) << '\n';
        }
        return;
    }
    std::ostringstream text;
    text << "The built-in models (predict --model NAME [--size N]), each at its usual size. FLOPs per sample: the forward, and "
            "a training step's forward and backward, as roofsim lowers them (fp32; 2 FLOPs a multiply-add).\n\n";
    TextTable t({"model", "size", "parameters", "forward GFLOP", "training GFLOP", "configuration"});
    t.overflow(5, Overflow::wrap);
    for (const auto& r : rows) {
        t.add_row({std::string(r.info->name), std::string(r.info->size_meaning) + " " + std::to_string(r.info->default_size),
                   format_number("%.2f M", static_cast<double>(r.parameters) / 1e6), format_number("%.2f", r.forward_flops / 1e9),
                   format_number("%.2f", r.training_flops / 1e9), std::string(r.info->configuration)});
    }
    t.print(text);
    text << "\nDefinitions:\n";
    for (const auto& r : rows) text << "  " << r.info->name << ": " << r.info->source << "\n";
    std::cout << wrap_lines(text.str());
}

}  // namespace

Command add_models_command(CLI::App& app) {
    auto o = std::make_shared<ModelsOptions>();
    auto* cmd = app.add_subcommand("models", "The built-in models: configuration, parameters, FLOPs per sample, source");
    auto* json = cmd->add_flag("--json", o->json, "Print JSON (kind roofsim-models)");
    auto* csv = cmd->add_flag("--csv", o->csv, "Print CSV, one row per model");
    json->excludes(csv);
    return {cmd, [o](const Context&) { run_models(*o); }};
}

}  // namespace roofsim::cli
