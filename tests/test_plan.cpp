// Capacity planning: whether a step fits a GPU's memory, the largest batch that fits, and that
// batch against the largest that trained on an H200 (data/validation/max-batch/,
// tools/validate/measure_max_batch.py).
#include "catch.hpp"
#include "thrown.hpp"

#include <roofsim/roofsim.hpp>
#include <validate/max_batch_validation.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

using namespace roofsim;
using Catch::Approx;

namespace {
PredictOptions training(std::int64_t batch, PrecisionMode mode, OptimizerKind opt) {
    PredictOptions o;
    o.lowering.batch = batch;
    o.lowering.precision = mode;
    o.lowering.optimizer.kind = opt;
    o.framework = find_builtin_framework_profile("h200-sxm");
    return o;
}
}  // namespace

TEST_CASE("a prediction states the GPU's memory, the CUDA context it leaves out, and whether the peak fits") {
    const Graph g = *zoo::model("resnet50", 224);
    const CostContext h200 = make_cost_context(gpu_or_throw("h200-sxm"), find_builtin_calibration("h200-sxm"));
    const Prediction p = predict(g, h200, training(64, PrecisionMode::amp_bf16, OptimizerKind::sgd));
    CHECK(p.memory_fit.capacity.value() == find_builtin_calibration("h200-sxm")->device.memory_bytes);  // as CUDA reported it
    CHECK(p.memory_fit.capacity_source.find("total memory as CUDA reports it") == 0);
    CHECK(p.memory_fit.context.value() == Approx(0.6766 * 1024 * 1024 * 1024));
    CHECK(p.memory_fit.peak == p.memory.peak);
    CHECK(p.memory_fit.fits());

    const CostContext rtx = make_cost_context(gpu_or_throw("rtx-3090"));
    const Prediction big = predict(g, rtx, training(512, PrecisionMode::fp32, OptimizerKind::sgd));
    CHECK(big.memory_fit.capacity.value() == 24.0 * 1024 * 1024 * 1024);  // the datasheet's 24 GiB
    CHECK(big.memory_fit.capacity_source.find("datasheet") == 0);
    CHECK_FALSE(big.memory_fit.fits());
}

TEST_CASE("max_batch: the largest batch that fits, one more does not; a model that never fits says by how much") {
    const CostContext rtx = make_cost_context(gpu_or_throw("rtx-3090"));
    const Graph g = *zoo::model("resnet50", 224);
    const auto o = training(1, PrecisionMode::amp_bf16, OptimizerKind::sgd);
    const MaxBatch m = max_batch(g, rtx, o);
    REQUIRE(m.batch > 1);
    CHECK(m.prediction.batch == m.batch);
    CHECK(m.prediction.memory_fit.fits());
    auto over = o;
    over.lowering.batch = m.batch + 1;
    CHECK_FALSE(predict(g, rtx, over).memory_fit.fits());

    const Graph long_gpt = *zoo::model("gpt2-small", 100000);
    const std::string why = thrown_by([&] { (void)max_batch(long_gpt, rtx, training(1, PrecisionMode::fp32, OptimizerKind::adamw)); });
    CHECK(has(why, "does not fit rtx-3090 even at batch 1"));
    CHECK(has(why, "GiB over the"));
}

TEST_CASE("accuracy: --batch max against the largest batch that trained on an H200") {
    // Bound 5 %. Known misses (docs/validation.md, "Largest batch"): GPT-2 small, where PyTorch's
    // caching allocator reserved 9.7-14.3 GiB beyond its allocated peak (fragmentation around the
    // 10-20 GB logits), and under autocast Hugging Face's output keeps the bf16 logits alive (peak
    // predicted 7.8 % short); ResNet-50 fp32, its peak predicted 7.1 % long.
    const std::vector<std::string> known = {"gpt2-small/b95xs1024/amp-bf16", "gpt2-small/b77xs1024/fp32", "resnet50/b1696x224/fp32"};
    const auto path = std::filesystem::path(ROOFSIM_SOURCE_DIR) / "data" / "validation" / "max-batch" / "h200-sxm-2026-12-04.json";
    const MaxBatchRun run = load_max_batch_run(path);
    const FrameworkProfile* fw = find_builtin_framework_profile("h200-sxm");
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"), find_builtin_calibration("h200-sxm"), fw);
    const auto results = evaluate_max_batch(run, ctx, fw);
    REQUIRE(results.size() == 6);
    for (const auto& r : results) {
        INFO(r.c->id << ": measured " << r.c->largest << ", predicted " << r.predicted);
        if (std::find(known.begin(), known.end(), r.c->id) != known.end()) {
            CHECK_FALSE(r.within);              // mended: take it off the list
            CHECK(std::abs(r.error) <= 0.20);   // and no worse than today
        } else {
            CHECK(r.within);
        }
        CHECK(std::abs(r.worst_peak_error) <= 0.10);  // the memory model near capacity, every batch that trained
        CHECK(r.measured_peak > 0);
    }
}

TEST_CASE("compare: a row per GPU, speedup over the first, each at its own largest batch with max") {
    const Graph g = *zoo::model("resnet50", 224);
    const CostContext rtx = make_cost_context(gpu_or_throw("rtx-3090"));
    const CostContext a100 = make_cost_context(gpu_or_throw("a100-80gb-sxm"));
    const auto o = training(32, PrecisionMode::amp_bf16, OptimizerKind::sgd);
    const auto rows = compare(g, {{&rtx}, {&a100}}, o, false);
    REQUIRE(rows.size() == 2);
    CHECK(rows[0].gpu_key == "rtx-3090");
    CHECK(rows[0].profile == "datasheet");
    CHECK(rows[0].speedup == 1.0);
    const double r0 = 32 / rows[0].prediction.step_time.value(), r1 = 32 / rows[1].prediction.step_time.value();
    CHECK(rows[1].speedup == Approx(r1 / r0));
    CHECK(rows[0].prediction.batch == 32);
    for (const auto& r : rows) {
        CHECK(r.compute_share + r.memory_share + r.idle_share == Approx(1.0));
        CHECK(r.compute_share >= 0);
        CHECK(r.memory_share >= 0);
        REQUIRE(r.largest_batch);
        CHECK(*r.largest_batch == max_batch(g, r.gpu_key == "rtx-3090" ? rtx : a100, o).batch);
    }
    const auto at_max = compare(g, {{&rtx}, {&a100}}, o, true);
    CHECK(at_max[0].prediction.batch == *rows[0].largest_batch);
    CHECK(at_max[1].prediction.batch == *rows[1].largest_batch);
    CHECK(at_max[1].prediction.batch > at_max[0].prediction.batch);  // 80 GB against 24 GB
    const CostContext h200 = make_cost_context(gpu_or_throw("h200-sxm"), find_builtin_calibration("h200-sxm"));
    CHECK(compare(g, {{&h200}}, o, false).front().profile == "measured");
}

TEST_CASE("the ring rule's link: NVLink among 8 SXM GPUs or a bridged pair of cards, PCIe beyond") {
    // one direction: half the datasheets' bidirectional 600 (A100 SXM4 NVLink), 112.5 (GA102 bridge), 64 GB/s (PCIe 4)
    const CostContext sxm = make_cost_context(gpu_or_throw("a100-80gb-sxm"));
    const CostContext rtx = make_cost_context(gpu_or_throw("rtx-3090"));
    const double gb = 1e9;
    // NCCL's ring: 8.4 us + 2 (n - 1) steps of 3.4 us (NVLink) or 5.7 us (PCIe) + 2 (n - 1) / n of 1 GB over the link
    CHECK(all_reduce_time(gb, 8, sxm.collectives).value() == Approx(8.4e-6 + 14 * 3.4e-6 + 2.0 * 7 / 8 * gb / 300e9));
    CHECK(all_reduce_time(gb, 2, rtx.collectives).value() == Approx(8.4e-6 + 2 * 3.4e-6 + 2.0 * 1 / 2 * gb / 56.25e9));
    CHECK(all_reduce_time(gb, 4, rtx.collectives).value() == Approx(8.4e-6 + 6 * 5.7e-6 + 2.0 * 3 / 4 * gb / 32e9));
    // a small message: the latency terms alone, 8 GPUs over NVLink
    CHECK(all_reduce_time(0, 8, sxm.collectives).value() == Approx(8.4e-6 + 14 * 3.4e-6));
    CHECK_THAT(all_reduce_source(2, rtx.collectives), Catch::Matchers::Contains("NVLink"));
    CHECK_THAT(all_reduce_source(4, rtx.collectives), Catch::Matchers::Contains("PCIe (beyond the 2 GPUs NVLink joins)"));
    CHECK_THAT(all_reduce_source(8, sxm.collectives), Catch::Matchers::Contains("NVLink"));
}

TEST_CASE("scale: data-parallel speedup over one GPU at the same batch per GPU, never above the GPU count") {
    const Graph g = *zoo::model("resnet50", 224);
    const CostContext rtx = make_cost_context(gpu_or_throw("rtx-3090"));
    auto o = training(16, PrecisionMode::amp_bf16, OptimizerKind::sgd);
    const auto points = scale(g, rtx, o, {2, 4, 8});
    REQUIRE(points.size() == 3);
    const double one = 16 / predict(g, rtx, o).step_time.value();
    for (const auto& p : points) {
        INFO(p.gpus << " GPUs");
        CHECK(p.prediction.gpus == p.gpus);
        CHECK(p.prediction.batch == 16);
        CHECK(p.speedup == Approx(16.0 * p.gpus / p.prediction.step_time.value() / one));
        CHECK(p.speedup <= p.gpus);
        CHECK(p.speedup > 1.0);
        CHECK(p.efficiency == Approx(p.speedup / p.gpus));
    }
    // beyond the bridged pair the ring runs over PCIe: 4 cards all-reduce for longer than 2
    CHECK(points[1].prediction.communication_time > 2 * points[0].prediction.communication_time);
    CHECK(points[1].efficiency <= points[0].efficiency);
    CHECK_THROWS_AS(scale(g, rtx, o, {0}), std::invalid_argument);
}

TEST_CASE("several nodes: GPUs fill whole nodes, a network joins them, NCCL's faster of ring and tree") {
    CostContext sxm = make_cost_context(gpu_or_throw("a100-80gb-sxm"));
    const double gb = 1e9;
    // beyond one node of 8 with no network: refused; 12 GPUs do not fill nodes of 8
    CHECK(has(thrown_by([&] { (void)all_reduce_time(gb, 16, sxm.collectives); }), "beyond one node's 8"));
    sxm.collectives.network = BytesPerSecond(25e9);  // 200 Gbit/s a node
    sxm.collectives.network_source = "test network";
    CHECK(has(thrown_by([&] { (void)all_reduce_time(gb, 12, sxm.collectives); }), "do not fill nodes of 8"));
    // 2 nodes x 8: the ring's bus bandwidth is the network's (less than NVLink's 300 GB/s); its
    // latency 8.4 us + (30 - 2) NVLink steps + 2 network steps of 9.6 us, x 1.9 for a large message
    const double ring = 1.9 * (8.4e-6 + 28 * 3.4e-6 + 2 * 9.6e-6) + 2.0 * 15 / 16 * gb / 25e9;
    const double tree = 2 * (7 * 28e-6 + 1 * (9.6e-6 + 40.4e-6)) + gb / (0.45 * 25e9);
    REQUIRE(ring < tree);  // large messages: the ring
    CHECK(all_reduce_time(gb, 16, sxm.collectives).value() == Approx(ring));
    // 64 nodes of 1 GPU, a small message: the tree's log2(64) = 6 network steps beat the ring's 126
    sxm.collectives.gpus_per_node = 1;
    const double bytes = 1e3;
    const double ring_small = 8.4e-6 + 126 * 9.6e-6 + 2.0 * 63 / 64 * bytes / 25e9;
    const double tree_small = 2 * (6 * (9.6e-6 + 40.4e-6)) + bytes / (0.45 * 25e9);
    REQUIRE(tree_small < ring_small);
    CHECK(all_reduce_time(bytes, 64, sxm.collectives).value() == Approx(tree_small));
    CHECK_THAT(all_reduce_source(64, sxm.collectives), Catch::Matchers::Contains("64 nodes of 1"));
    CHECK_THAT(all_reduce_source(64, sxm.collectives), Catch::Matchers::Contains("test network"));
    // a measured 2-GPU profile does not stand for 2 GPUs in two nodes
    const CostContext h200 = [] {
        CostContext c = make_cost_context(gpu_or_throw("h200-sxm"), find_builtin_calibration("h200-sxm"));
        add_builtin_collectives(c, "h200-sxm");
        c.collectives.gpus_per_node = 1;
        c.collectives.network = BytesPerSecond(50e9);
        c.collectives.network_source = "test network";
        return c;
    }();
    CHECK_THAT(all_reduce_source(2, h200.collectives), Catch::Matchers::Contains("test network"));
}

TEST_CASE("a prediction over more GPUs than a node holds needs a network, and costs more than one node's") {
    const Graph g = *zoo::model("bert-base", 128);
    CostContext ctx = make_cost_context(gpu_or_throw("a100-80gb-sxm"));
    auto o = training(32, PrecisionMode::amp_bf16, OptimizerKind::adamw);
    o.data_parallel.gpus = 16;
    CHECK(has(thrown_by([&] { (void)predict(g, ctx, o); }), "no network between nodes"));
    ctx.collectives.network = BytesPerSecond(12.5e9);  // 100 Gbit/s
    ctx.collectives.network_source = "test network";
    const Prediction two_nodes = predict(g, ctx, o);
    o.data_parallel.gpus = 8;
    const Prediction one_node = predict(g, ctx, o);
    CHECK(two_nodes.communication_time > one_node.communication_time);
    CHECK(two_nodes.step_time >= one_node.step_time);
}

TEST_CASE("throughput over batch: powers of two up to the largest batch, the largest itself last") {
    const Graph g = *zoo::model("resnet50", 224);
    const CostContext rtx = make_cost_context(gpu_or_throw("rtx-3090"));
    const auto o = training(1, PrecisionMode::amp_bf16, OptimizerKind::sgd);
    const auto points = throughput_over_batch(g, rtx, o, 100);
    std::vector<std::int64_t> batches;
    for (const auto& p : points) batches.push_back(p.batch);
    CHECK(batches == std::vector<std::int64_t>{1, 2, 4, 8, 16, 32, 64, 100});
    auto at = o;
    at.lowering.batch = 64;
    CHECK(points[6].samples_per_second == samples_per_second(predict(g, rtx, at)));
    CHECK(throughput_over_batch(g, rtx, o, 1).size() == 1);
    CHECK_THROWS(throughput_over_batch(g, rtx, o, 0));
}
