// roofsim survey: the seed comparison, the main job of scripts/run. The seed workloads on the seed
// GPUs, each at its largest batch that fits, against the RTX A6000, with data-parallel scaling.

#include "commands.hpp"

#include <iostream>
#include <memory>
#include <sstream>

namespace roofsim::cli {
namespace {

/// A workload of the survey: a built-in model under one precision mode and optimizer.
struct Workload {
    std::string label, model;
    PrecisionMode precision;
    OptimizerKind optimizer;
};

/// The workloads the published A6000 / RTX 3090 / A100 comparisons train: ResNet-50 (SGD) and
/// BERT-large SQuAD (AdamW) in float32 (TF32) and AMP, and GPT-2 small (AdamW) in AMP.
const std::vector<Workload> seed_workloads = {
    {"resnet50 fp32", "resnet50", PrecisionMode::fp32, OptimizerKind::sgd},
    {"resnet50 amp-fp16", "resnet50", PrecisionMode::amp_fp16, OptimizerKind::sgd},
    {"bert-large tf32", "bert-large-squad", PrecisionMode::tf32, OptimizerKind::adamw},
    {"bert-large amp-fp16", "bert-large-squad", PrecisionMode::amp_fp16, OptimizerKind::adamw},
    {"gpt2-small amp-fp16", "gpt2-small", PrecisionMode::amp_fp16, OptimizerKind::adamw},
};

const std::vector<int> scaling_counts = {2, 4, 8};
constexpr std::string_view reference_gpu = "rtx-a6000";

struct SurveyOptions {
    std::string gpus;
    bool json = false, csv = false;
    CLI::Option* gpu_option = nullptr;
};

struct Row {
    const Workload* workload = nullptr;
    Comparison one;                     ///< one GPU at its largest batch
    std::optional<double> vs_reference;  ///< samples/s over the reference GPU's (none: no such row)
    std::vector<ScalingPoint> scaling;  ///< at the same batch per GPU (empty where batch 1 does not fit)
};

double rate(const Prediction& p) { return static_cast<double>(p.batch) * p.gpus / p.step_time.value(); }

std::vector<Row> survey(const std::vector<std::string>& keys) {
    std::vector<GpuContext> contexts;
    std::vector<ComparedGpu> gpus;
    contexts.reserve(keys.size());
    for (const auto& key : keys) {
        contexts.push_back(default_gpu_context(gpu_arg(key)));
        gpus.push_back({&contexts.back().ctx, contexts.back().framework});
    }
    std::vector<Row> rows;
    for (const Workload& w : seed_workloads) {
        const Graph graph = *zoo::model(w.model, 0);
        PredictOptions options;
        options.lowering.precision = w.precision;
        options.lowering.optimizer.kind = w.optimizer;
        std::vector<Comparison> one = compare(graph, gpus, options, true);
        std::optional<double> reference;
        for (const auto& c : one) {
            if (c.gpu_key == reference_gpu && c.largest_batch) reference = rate(c.prediction);
        }
        for (std::size_t i = 0; i < one.size(); ++i) {
            Row r;
            r.workload = &w;
            if (reference && one[i].largest_batch) r.vs_reference = rate(one[i].prediction) / *reference;
            if (one[i].largest_batch) {
                PredictOptions at = options;
                at.framework = gpus[i].framework;
                at.lowering.batch = *one[i].largest_batch;
                r.scaling = scale(graph, contexts[i].ctx, at, scaling_counts);
            }
            r.one = std::move(one[i]);
            rows.push_back(std::move(r));
        }
    }
    return rows;
}

std::string gib(Bytes b) { return format_number("%.1f", to_gib(b)); }

void run_survey(const SurveyOptions& o) {
    const std::vector<std::string> keys = o.gpu_option->count() == 0 ? seed_gpus : split_list(o.gpus);
    if (keys.empty()) throw UsageError("--gpu: no GPU given");
    const std::vector<Row> rows = survey(keys);
    if (o.json) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& r : rows) {
            const Prediction& p = r.one.prediction;
            nlohmann::json scaling = nlohmann::json::array();
            for (const auto& s : r.scaling) {
                scaling.push_back({{"gpus", s.gpus}, {"batch_per_gpu", s.prediction.batch}, {"samples_per_second", rate(s.prediction)},
                                   {"speedup", s.speedup}, {"efficiency", s.efficiency}, {"collectives", s.prediction.communication_source}});
            }
            out.push_back({{"workload", r.workload->label}, {"model", r.workload->model}, {"precision", to_string(r.workload->precision)},
                           {"optimizer", to_string(r.workload->optimizer)}, {"gpu", r.one.gpu_key}, {"profile", r.one.profile},
                           {"fits", r.one.largest_batch.has_value()},
                           {"largest_batch", r.one.largest_batch ? nlohmann::json(*r.one.largest_batch) : nlohmann::json(nullptr)},
                           {"step_seconds", p.step_time.value()}, {"samples_per_second", rate(p)},
                           {"vs_reference", r.vs_reference ? nlohmann::json(*r.vs_reference) : nlohmann::json(nullptr)},
                           {"peak_bytes", p.memory_fit.peak.value()}, {"usable_bytes", p.memory_fit.usable().value()},
                           {"host_costs", p.host_costs_source}, {"scaling", scaling}});
        }
        const nlohmann::json doc = {{"kind", "roofsim-survey"}, {"schema_version", 1}, {"reference_gpu", reference_gpu}, {"rows", out}};
        std::cout << doc.dump(2) << '\n';
        return;
    }
    if (o.csv) {
        std::cout << "kind,schema_version,workload,model,precision,optimizer,gpu,profile,fits,largest_batch,step_seconds,"
                     "samples_per_second,vs_reference,peak_bytes,usable_bytes";
        for (const int n : scaling_counts) std::cout << ",speedup_" << n << "_gpus,batch_per_gpu_" << n << "_gpus";
        std::cout << '\n';
        for (const auto& r : rows) {
            const Prediction& p = r.one.prediction;
            std::cout << "roofsim-survey,1," << r.workload->label << ',' << r.workload->model << ',' << to_string(r.workload->precision)
                      << ',' << to_string(r.workload->optimizer) << ',' << r.one.gpu_key << ',' << r.one.profile << ','
                      << (r.one.largest_batch ? 1 : 0) << ',' << (r.one.largest_batch ? std::to_string(*r.one.largest_batch) : "")
                      << ',' << p.step_time.value() << ',' << rate(p) << ','
                      << (r.vs_reference ? format_number("%.6g", *r.vs_reference) : std::string()) << ','
                      << p.memory_fit.peak.value() << ',' << p.memory_fit.usable().value();
            for (std::size_t i = 0; i < scaling_counts.size(); ++i) {
                if (i < r.scaling.size()) std::cout << ',' << r.scaling[i].speedup << ',' << r.scaling[i].prediction.batch;
                else std::cout << ",,";
            }
            std::cout << '\n';
        }
        return;
    }
    std::ostringstream text;
    text << "The seed comparison: each workload on each GPU at its largest batch that fits one GPU; samples/s against "
            "the RTX A6000's; data-parallel (DDP) speedup on 2, 4 and 8 GPUs of a kind at that batch per GPU "
            "(its largest with DDP's buckets where that one does not fit), over one GPU's.\n\n";
    TextTable t({"workload", "GPU", "profile", "batch", "step ms", "samples/s", "vs A6000", "peak / usable GiB", "2 GPUs",
                 "4 GPUs", "8 GPUs"});
    for (const auto& r : rows) {
        const Prediction& p = r.one.prediction;
        std::vector<std::string> cells = {r.workload->label, r.one.gpu_key, r.one.profile,
                                          r.one.largest_batch ? std::to_string(*r.one.largest_batch) : std::string("none"),
                                          format_number("%.1f", to_milliseconds(p.step_time)), format_number("%.1f", rate(p)),
                                          r.vs_reference ? format_number("%.2f", *r.vs_reference) : std::string("-"),
                                          gib(p.memory_fit.peak) + " / " + gib(p.memory_fit.usable())};
        for (std::size_t i = 0; i < scaling_counts.size(); ++i) {
            cells.push_back(i < r.scaling.size() ? format_number("%.2fx", r.scaling[i].speedup) : std::string("-"));
        }
        t.add_row(cells);
    }
    t.print(text);
    text << "Profiles: measured = the GPU's calibration and framework profile; derived = from a measured GPU's by the "
            "rules of docs/derivation.md. Collectives: measured NCCL where a profile has them (two H200s), else the ring "
            "rule on the link (NVLink joins 8 SXM GPUs or 2 bridged PCIe cards, else PCIe). batch none: batch 1 does "
            "not fit. Memory: less the CUDA context; allocator fragmentation not modelled.\n";
    std::cout << wrap_lines(text.str());
}

}  // namespace

Command add_survey_command(CLI::App& app) {
    auto o = std::make_shared<SurveyOptions>();
    auto* cmd = app.add_subcommand("survey",
                                   "The seed comparison (scripts/run): ResNet-50, BERT-large and GPT-2 small training on the seed GPUs at "
                                   "each one's largest batch, against the RTX A6000, and scaling to 2, 4 and 8 GPUs");
    o->gpu_option = cmd->add_option("--gpu", o->gpus,
                    "GPU keys, comma-separated (default: rtx-3090, rtx-a6000, a100-40gb-sxm, a100-80gb-sxm, h100-sxm, h200-sxm)");
    auto* json = cmd->add_flag("--json", o->json, "Print JSON (kind roofsim-survey)");
    auto* csv = cmd->add_flag("--csv", o->csv, "Print CSV, one row per workload and GPU");
    json->excludes(csv);
    return {cmd, [o](const Context&) { run_survey(*o); }};
}

}  // namespace roofsim::cli
