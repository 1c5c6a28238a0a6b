// A capacity planner: which GPU for BERT-base fine-tuning? Each seed GPU at its largest batch that
// fits (compare), the RTX A6000's scaling to 2, 4 and 8 cards (scale), and the A6000's inference
// latency at batch 1.
#include <roofsim/roofsim.hpp>

#include <cstdio>
#include <vector>

int main() {
    using namespace roofsim;
    const Graph graph = *zoo::model("bert-base");
    PredictOptions options;
    options.lowering.precision = PrecisionMode::amp_bf16;
    options.lowering.optimizer.kind = OptimizerKind::adamw;

    std::vector<CostContext> contexts;
    std::vector<ComparedGpu> gpus;
    const std::vector<const char*> keys = {"rtx-3090", "rtx-a6000", "a100-80gb-sxm"};
    contexts.reserve(keys.size());
    for (const char* key : keys) {
        const FrameworkProfile* framework = find_builtin_framework_profile("h200-sxm");  // the host costs shipped
        contexts.push_back(make_default_cost_context(gpu_or_throw(key), framework));
        add_builtin_collectives(contexts.back(), key);
        gpus.push_back({&contexts.back(), framework});
    }
    for (const Comparison& c : compare(graph, gpus, options, true)) {
        std::printf("%-14s %-8s largest batch %lld, %.0f samples/s, x%.2f of the first\n", c.gpu_key.c_str(), c.profile.c_str(),
                    static_cast<long long>(c.largest_batch.value_or(0)),
                    static_cast<double>(c.prediction.batch) / c.prediction.step_time.value(), c.speedup);
    }
    options.framework = gpus[1].framework;
    options.lowering.batch = 64;
    for (const ScalingPoint& s : scale(graph, contexts[1], options, {2, 4, 8})) {
        std::printf("%d x rtx-a6000: speedup %.2f (%s)\n", s.gpus, s.speedup, s.prediction.communication_source.c_str());
    }
    options.lowering.batch = 1;
    options.lowering.mode = StepMode::inference;
    const Prediction latency = predict(graph, contexts[1], options);
    std::printf("rtx-a6000 inference, batch 1: %.2f ms\n", to_milliseconds(latency.step_time));
}
