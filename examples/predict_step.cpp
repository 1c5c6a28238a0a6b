// Predicts one training step of a small MLP built in C++, on an A100 by the profile roofsim derives
// for it from the measured H200's (docs/derivation.md), on the H200 with the measured profile and
// framework costs that ship with roofsim, and data-parallel over two H200s with the NCCL times
// measured on such a pair.
#include <roofsim/roofsim.hpp>

#include <cstdio>

int main() {
    using namespace roofsim;
    GraphBuilder b("mlp");
    auto x = b.input("x", {GraphBuilder::batch, 1024});
    auto labels = b.input("labels", {GraphBuilder::batch}, DType::i64);
    auto h = b.layer("fc1", "linear", {x}, {{"in_features", std::int64_t(1024)}, {"out_features", std::int64_t(4096)}});
    h = b.layer("act", "gelu", {h});
    h = b.layer("fc2", "linear", {h}, {{"in_features", std::int64_t(4096)}, {"out_features", std::int64_t(1000)}});
    b.layer("loss", "cross_entropy", {h, labels});
    const Graph graph = std::move(b).build();

    PredictOptions options;
    options.lowering.batch = 4096;
    options.lowering.precision = PrecisionMode::amp_bf16;
    options.lowering.optimizer.kind = OptimizerKind::adamw;

    const FrameworkProfile* framework = find_builtin_framework_profile("h200-sxm");
    options.framework = framework;
    const Prediction derived = predict(graph, make_default_cost_context(gpu_or_throw("a100-80gb-sxm"), framework), options);
    std::printf("a100-80gb-sxm (%s profile): step %.3f ms, peak memory %.2f GiB\n", derived.profile_kind.c_str(),
                to_milliseconds(derived.step_time), to_gib(derived.memory.peak));

    const CostContext h200 = make_cost_context(gpu_or_throw("h200-sxm"), find_builtin_calibration("h200-sxm"), framework);
    const Prediction measured = predict(graph, h200, options);
    std::printf("h200-sxm (measured profile): step %.3f ms, %zu kernels\n", to_milliseconds(measured.step_time),
                measured.kernels.kernels.size());

    CostContext pair = h200;
    add_builtin_collectives(pair, "h200-sxm");
    options.data_parallel.gpus = 2;
    const Prediction two = predict(graph, pair, options);
    std::printf("2 x h200-sxm (DDP): step %.3f ms, all-reduce %.3f ms in %zu buckets, %.3f ms of it exposed\n",
                to_milliseconds(two.step_time), to_milliseconds(two.communication_time), two.buckets.size(),
                to_milliseconds(two.communication_exposed));
    return 0;
}
