// A capacity planner: which GPU for BERT-base fine-tuning? Each seed GPU at its largest batch that
// fits (compare) with the time and cost of an epoch at a price of your own, the RTX A6000's scaling to
// 2, 4 and 8 cards (scale), a sweep over batches on every core (sweep), and the A6000's inference
// latency at batch 1.
#include <roofsim/roofsim.hpp>

#include <cstdio>
#include <string>
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
    const double price_per_gpu_hour = 1.0;  // yours: the example assumes one unit of money an hour
    for (const Comparison& c : compare(graph, gpus, options, true)) {
        const Prediction& p = c.prediction;
        const double epoch = epoch_seconds(392702, static_cast<double>(p.batch) * p.gpus, p.step_time.value());  // MNLI's train set
        std::printf("%-14s %-8s largest batch %lld, %.0f samples/s, x%.2f of the first; epoch %.0f min, %.2f at %.2f an hour\n",
                    c.gpu_key.c_str(), c.profile.c_str(), static_cast<long long>(c.largest_batch.value_or(0)), samples_per_second(p),
                    c.speedup, epoch / 60, gpu_cost(epoch, p.gpus, price_per_gpu_hour), price_per_gpu_hour);
    }
    options.framework = gpus[1].framework;
    options.lowering.batch = 64;
    for (const ScalingPoint& s : scale(graph, contexts[1], options, {2, 4, 8})) {
        std::printf("%d x rtx-a6000: speedup %.2f (%s)\n", s.gpus, s.speedup, s.prediction.communication_source.c_str());
    }
    SweepGrid grid;
    grid.gpus = gpus;
    grid.batches = {16, 32, 64, 128};
    grid.precisions = {PrecisionMode::amp_bf16, PrecisionMode::tf32};
    for (const SweepRow& r : sweep(graph, grid, options)) {
        std::printf("sweep: %-14s %-8s batch %3lld: %.0f samples/s%s\n", keys[r.gpu], std::string(to_string(r.precision)).c_str(),
                    static_cast<long long>(r.batch), r.samples_per_second, r.fits ? "" : " (does not fit)");
    }
    options.lowering.batch = 1;
    options.lowering.mode = StepMode::inference;
    const Prediction latency = predict(graph, contexts[1], options);
    std::printf("rtx-a6000 inference, batch 1: %.2f ms\n", to_milliseconds(latency.step_time));
}
