#pragma once
/// Published data-parallel scaling (the multi-GPU rows of a published throughput table, e.g. the
/// reference data's lambda-dev.csv) against roofsim's: a row of N GPUs over N times the one-GPU row
/// of the same GPU, model, precision, batch per GPU and benchmark round, beside roofsim's N-GPU step
/// (DDP, cost/collective.hpp) over its one-GPU step at that batch. Scaling efficiency cancels most of
/// a GPU's one-GPU error, so it checks the data-parallel model on GPUs that are not at hand. Nothing is
/// fitted to it.

#include <validate/throughput_validation.hpp>

#include <roofsim/cost/context.hpp>
#include <roofsim/predict.hpp>

#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace roofsim {

/// One published multi-GPU configuration (its rows of one round merged: their median) and roofsim's.
struct ScalingResult {
    std::string gpu_key, model, precision, bench_round;
    PrecisionMode mode = PrecisionMode::fp32;
    int gpus = 2;
    std::int64_t batch = 0;
    std::size_t rows = 0;              ///< published rows of N GPUs merged
    double published = 0;              ///< N-GPU throughput / (N x one-GPU throughput)
    double predicted = 0;              ///< one-GPU step / N-GPU step (weak scaling at the same batch per GPU)
    double exposed_share = 0;          ///< of the predicted N-GPU step: the compute stream waiting on all-reduces
    std::string communication;         ///< where the all-reduce times come from
    bool anomaly = false;              ///< a row the table flags "scaling anomaly"
    [[nodiscard]] double difference() const { return predicted - published; }
};

struct ScalingValidation {
    std::vector<ScalingResult> results;
    std::size_t unpaired = 0;  ///< multi-GPU configurations with no one-GPU row of the same batch and round
};

/// Every multi-GPU configuration of `file` with its one-GPU partner, predicted with the GPU's default
/// profile and the built-in collective measurements (two H200s), one node of the GPU's kind.
[[nodiscard]] inline ScalingValidation evaluate_scaling(const ThroughputFile& file) {
    using Key = std::tuple<std::string, std::string, std::string, std::int64_t, std::string, int>;  // gpu, model, precision, batch, round, gpus
    std::map<Key, std::vector<const ThroughputRow*>> groups;
    for (const auto& r : file.rows) groups[{r.gpu_key, r.model, r.precision, r.batch, r.bench_round, r.num_gpus}].push_back(&r);
    const auto median = [](const std::vector<const ThroughputRow*>& rows) {
        std::vector<double> v;
        for (const auto* r : rows) v.push_back(r->throughput);
        return detail::quantile(v, 0.5);
    };
    ScalingValidation out;
    std::map<std::string, CostContext> contexts;
    std::map<std::string, std::optional<Graph>> graphs;
    for (const auto& [key, rows] : groups) {
        const auto& [gpu_key, model_name, precision, batch, round, n] = key;
        if (n == 1) continue;
        const auto one = groups.find({gpu_key, model_name, precision, batch, round, 1});
        const PublishedModel* model = find_published_model(model_name);
        const auto published_mode = published_precision_mode(precision);
        if (one == groups.end() || !model || !published_mode) {
            ++out.unpaired;
            continue;
        }
        auto graph = graphs.find(model_name);
        if (graph == graphs.end()) graph = graphs.emplace(model_name, zoo::model(model->zoo_name, model->size)).first;
        if (!graph->second) {
            ++out.unpaired;
            continue;
        }
        auto ctx = contexts.find(gpu_key);
        if (ctx == contexts.end()) {
            const GpuSpec& spec = gpu_or_throw(gpu_key);
            const FrameworkProfile* fw = default_framework_profile(spec.key);
            ctx = contexts.emplace(gpu_key, make_default_cost_context(spec, fw)).first;
            add_builtin_collectives(ctx->second, spec.key);
        }
        ScalingResult s;
        s.gpu_key = gpu_key;
        s.model = model_name;
        s.precision = precision;
        s.bench_round = round;
        s.gpus = n;
        s.batch = batch;
        s.rows = rows.size();
        s.mode = published_mode_on(*published_mode == PrecisionMode::amp_fp16 ? model->amp : *published_mode, ctx->second.ceilings);
        s.published = median(rows) / (n * median(one->second));
        for (const auto* r : rows) s.anomaly = s.anomaly || r->notes.find("scaling anomaly") != std::string::npos;
        PredictOptions o;
        o.lowering.batch = batch;
        o.lowering.precision = s.mode;
        o.lowering.optimizer = model->optimizer;
        o.framework = default_framework_profile(gpu_key);
        try {
            // at the published batch, whether or not roofsim's memory model has it fit beside DDP's buckets
            const Prediction single = predict(*graph->second, ctx->second, o);
            o.data_parallel.gpus = n;
            const Prediction p = predict(*graph->second, ctx->second, o);
            s.predicted = single.step_time / p.step_time;
            s.exposed_share = p.communication_exposed.value() / p.step_time.value();
            s.communication = p.communication_source;
        } catch (const std::exception& e) {
            throw std::runtime_error(file.origin + ": " + gpu_key + ", " + model_name + ", " + precision + ", batch " + std::to_string(batch) +
                                     ", " + std::to_string(n) + " GPUs: " + e.what());
        }
        out.results.push_back(std::move(s));
    }
    return out;
}

}  // namespace roofsim
