// Data-parallel training (DDP over N GPUs): the all-reduce cost, the buckets and kernels DDP adds,
// the communication stream in the step simulation, and the steps measured on two H200s
// (data/validation/ddp/, tools/validate/measure_ddp.py) against their prediction.
#include "catch.hpp"
#include "thrown.hpp"

#include <roofsim/roofsim.hpp>
#include <validate/ddp_validation.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

using namespace roofsim;
using Catch::Approx;

namespace {
const std::filesystem::path ddp_dir = std::filesystem::path(ROOFSIM_SOURCE_DIR) / "data" / "validation" / "ddp";

std::vector<DdpRun> measured_runs() {  // two runs of each world size, about six hours apart
    return {load_ddp_run(ddp_dir / "h200-sxm-x1-2026-12-04.json"), load_ddp_run(ddp_dir / "h200-sxm-x2-2026-12-04.json"),
            load_ddp_run(ddp_dir / "h200-sxm-x1-2026-12-04-run2.json"), load_ddp_run(ddp_dir / "h200-sxm-x2-2026-12-04-run2.json")};
}

CostContext h200_with_collectives() {
    const auto& spec = gpu_or_throw("h200-sxm");
    CostContext ctx = make_cost_context(spec, find_builtin_calibration("h200-sxm"), find_builtin_framework_profile("h200-sxm"));
    add_builtin_collectives(ctx, "h200-sxm");
    return ctx;
}

PredictOptions options(std::int64_t batch, PrecisionMode mode, OptimizerKind opt, int gpus) {
    PredictOptions o;
    o.lowering.batch = batch;
    o.lowering.precision = mode;
    o.lowering.optimizer.kind = opt;
    o.framework = find_builtin_framework_profile("h200-sxm");
    o.data_parallel.gpus = gpus;
    return o;
}
}  // namespace

TEST_CASE("all-reduce time: measured points, log-log between them, the last bus bandwidth beyond, the ring rule without") {
    CollectiveModel m;
    add_all_reduce_point(m, 2, {1e6, Seconds(20e-6)});
    add_all_reduce_point(m, 2, {1e3, Seconds(10e-6)});
    add_all_reduce_point(m, 2, {1e9, Seconds(4e-3)});
    m.link = BytesPerSecond(100e9);
    m.link_source = "test link";
    CHECK(all_reduce_time(1e3, 2, m).value() == Approx(10e-6));
    CHECK(all_reduce_time(1e6, 2, m).value() == Approx(20e-6));
    CHECK(all_reduce_time(10, 2, m).value() == Approx(10e-6));  // below the smallest: the latency floor
    // halfway in log(bytes) between 1e3 and 1e6: the geometric mean of the times
    CHECK(all_reduce_time(std::sqrt(1e3 * 1e6), 2, m).value() == Approx(std::sqrt(10e-6 * 20e-6)));
    CHECK(all_reduce_time(2e9, 2, m).value() == Approx(8e-3));  // beyond: the largest size's bus bandwidth
    std::string how;
    // 4 GPUs were not measured: NCCL's ring rule, 8.4 us + 2 (n-1) PCIe steps of 5.7 us + 2 (n-1)/n x bytes over the link
    CHECK(all_reduce_time(1e9, 4, m, &how).value() == Approx(8.4e-6 + 6 * 5.7e-6 + 1.5 * 1e9 / 100e9));
    CHECK(how == "ring rule on test link");
    CHECK(has(thrown_by([&] { (void)all_reduce_time(1e6, 1, m); }), "2 or more GPUs"));
    CHECK_THROWS(all_reduce_time(-1, 2, m));
    CollectiveModel none;
    CHECK(has(thrown_by([&] { (void)all_reduce_time(1e6, 2, none); }), "no link bandwidth"));
}

TEST_CASE("the measured collective profile of two H200s is built in and read for 2 GPUs only") {
    const CostContext ctx = h200_with_collectives();
    REQUIRE(ctx.collectives.all_reduce.count(2) == 1);
    CHECK(ctx.collectives.all_reduce.count(4) == 0);
    CHECK(ctx.collectives.all_reduce.at(2).size() >= 10);
    std::string how;
    const double t = all_reduce_time(256e6, 2, ctx.collectives, &how).value();
    CHECK(how.find("measured: NVIDIA H200 x2") == 0);
    // 256 MB at the measured bus bandwidth of 280-310 GB/s (2 (n-1)/n = 1): 0.8-0.95 ms
    CHECK(t > 0.75e-3);
    CHECK(t < 1.0e-3);
}

TEST_CASE("DDP's buckets are the ones PyTorch built, byte for byte in fp32") {
    // PyTorch's rebuilt buckets (DDP's logging data, recorded by measure_ddp.py) against roofsim's
    // assignment: gradients in the order they are ready, a bucket closed at >= 1 MiB (the first)
    // or >= 25 MiB. Under autocast a bias's gradient can come after its weight's: a bucket may
    // differ there by that bias.
    const CostContext ctx = h200_with_collectives();
    int checked = 0;
    for (const auto& run : measured_runs()) {
        for (const auto& c : run.cases) {
            REQUIRE_FALSE(c.pytorch_buckets.empty());
            PredictOptions o;
            o.lowering = c.step.options;
            o.framework = find_builtin_framework_profile("h200-sxm");
            o.data_parallel.gpus = 2;
            const Prediction p = predict(c.step.graph, ctx, o);
            INFO(c.step.id);
            REQUIRE(p.buckets.size() == c.pytorch_buckets.size());
            for (std::size_t i = 0; i < p.buckets.size(); ++i) {
                INFO("bucket " << i);
                if (c.step.precision == "fp32") {
                    CHECK(p.buckets[i].bytes == c.pytorch_buckets[i]);
                } else {
                    CHECK(std::abs(p.buckets[i].bytes - c.pytorch_buckets[i]) <= 4096);
                }
            }
            ++checked;
        }
    }
    CHECK(checked == 48);  // 12 cases, world sizes 1 and 2, two runs each
}

TEST_CASE("one GPU is the step without DDP, bit for bit; more GPUs add DDP's kernels and memory") {
    const CostContext ctx = h200_with_collectives();
    const Graph g = *zoo::model("resnet50", 224);
    PredictOptions plain = options(32, PrecisionMode::amp_bf16, OptimizerKind::sgd, 1);
    PredictOptions no_dp = plain;
    no_dp.data_parallel = DataParallelOptions{};
    const Prediction a = predict(g, ctx, plain);
    const Prediction b = predict(g, ctx, no_dp);
    CHECK(a.step_time.value() == b.step_time.value());
    CHECK(a.buckets.empty());
    CHECK(a.communication_time.value() == 0);
    CHECK(a.memory.gradient_buckets.value() == 0);

    const Prediction two = predict(g, ctx, options(32, PrecisionMode::amp_bf16, OptimizerKind::sgd, 2));
    CHECK(two.gpus == 2);
    CHECK(two.step_time > a.step_time);
    CHECK(two.communication_time.value() > 0);
    CHECK(two.communication_exposed <= two.communication_time);
    CHECK(two.memory.gradient_buckets == two.memory.gradients);  // a flat copy of every gradient
    CHECK(two.memory.peak == a.memory.peak + two.memory.gradient_buckets);
    // per parameter tensor: a copy into its bucket and one back, each after a dispatch marker; per
    // bucket: an all-reduce after its marker
    const std::size_t tensors = a.parameter_tensors;
    CHECK(two.kernels.kernels.size() == a.kernels.kernels.size() + 4 * tensors + 2 * two.buckets.size());
    // the GPU's own work grows by the copies alone: the all-reduces run on the other stream
    double copy_time = 0;
    int copies = 0;
    for (std::size_t i = 0; i + 1 < two.kernels.kernels.size(); ++i) {
        const auto& next = two.kernels.kernels[i + 1];
        if (two.kernels.kernels[i].host_op == ddp_reducer_host_op && next.kind != KernelKind::collective) {
            copy_time += two.timeline.kernels[i + 1].gpu_time.value();
            ++copies;
        }
    }
    CHECK(copies == static_cast<int>(2 * tensors));
    CHECK(two.gpu_time.value() == Approx(a.gpu_time.value() + copy_time).epsilon(1e-9));
}

TEST_CASE("the communication stream: all-reduces overlap the backward; the optimizer waits for the last") {
    // A slow link (no measured collective for 4 GPUs; 1 GB/s one way): the all-reduces outlast the
    // backward, and the step ends the last one's time after the backward's kernels at least.
    CostContext ctx = h200_with_collectives();
    ctx.collectives.link = BytesPerSecond(1e9);
    const Graph g = *zoo::model("resnet50", 224);
    const Prediction p = predict(g, ctx, options(32, PrecisionMode::fp32, OptimizerKind::sgd, 4));
    const double gradient_bytes = p.memory.gradients.value();
    // NCCL's ring over NVLink: each bucket 8.4 us + 6 steps of 3.4 us, and 2 (4 - 1) / 4 of its bytes over the link
    CHECK(p.communication_time.value() ==
          Approx(1.5 * gradient_bytes / 1e9 + static_cast<double>(p.buckets.size()) * (8.4e-6 + 6 * 3.4e-6)).epsilon(1e-6));
    CHECK(p.communication_exposed.value() > 0);
    CHECK(p.communication_exposed < p.communication_time);  // the earlier buckets ran during the backward
    // the step is at least the last bucket's all-reduce longer than the first all-reduce's start
    std::size_t first_collective = 0, waiting = 0;
    for (std::size_t i = 0; i < p.kernels.kernels.size(); ++i) {
        if (p.kernels.kernels[i].kind == KernelKind::collective && first_collective == 0) first_collective = i;
        if (p.kernels.kernels[i].waits_for_communication) waiting = i;
    }
    REQUIRE(first_collective > 0);
    REQUIRE(waiting > first_collective);
    const auto& first = p.timeline.kernels[first_collective];
    CHECK(p.timeline.kernels[waiting].start.value() >= first.start.value() + p.communication_time.value() - 1e-12);
    // nothing of the optimizer starts before the finalize's copies
    for (std::size_t i = 0; i < p.kernels.kernels.size(); ++i) {
        if (p.kernels.kernels[i].phase == Phase::optimizer && p.kernels.kernels[i].kind != KernelKind::host_only) {
            CHECK(p.timeline.kernels[i].start >= p.timeline.kernels[waiting].start);
        }
    }
}

TEST_CASE("data parallel: bad counts and a kernel IR are refused") {
    const CostContext ctx = h200_with_collectives();
    const Graph g = *zoo::model("resnet50", 224);
    CHECK(has(thrown_by([&] { (void)predict(g, ctx, options(8, PrecisionMode::fp32, OptimizerKind::sgd, 0)); }), "gpus must be 1 to 65535"));
    KernelIr ir = to_kernel_ir(lower(g, options(8, PrecisionMode::fp32, OptimizerKind::sgd, 1).lowering),
                               options(8, PrecisionMode::fp32, OptimizerKind::sgd, 1).lowering);
    CHECK(has(thrown_by([&] { (void)predict(ir, ctx, options(8, PrecisionMode::fp32, OptimizerKind::sgd, 2)); }), "needs a layer graph"));
}

TEST_CASE("a collective kernel in the IR's JSON: ranks written and read back, checked") {
    Kernel k;
    k.op = "nccl:all_reduce";
    k.kind = KernelKind::collective;
    k.phase = Phase::backward;
    k.layer = "fc";
    k.ranks = 8;
    k.bytes_read = Bytes(1e6);
    const nlohmann::json j = to_json(k);
    CHECK(j.at("kind") == "collective");
    CHECK(j.at("ranks") == 8);
    const Kernel back = detail::kernel_from_json(detail::JsonCursor(j, "k.json", ""));
    CHECK(back.ranks == 8);
    CHECK(back.kind == KernelKind::collective);
    nlohmann::json no_ranks = j;
    no_ranks.erase("ranks");
    CHECK(has(thrown_by([&] { (void)detail::kernel_from_json(detail::JsonCursor(no_ranks, "k.json", "")); }), "needs ranks"));
    nlohmann::json one = j;
    one["ranks"] = 1;
    CHECK(has(thrown_by([&] { (void)detail::kernel_from_json(detail::JsonCursor(one, "k.json", "")); }), "2 to 65535"));
    nlohmann::json on_gemm = j;
    on_gemm["kind"] = "elementwise";
    CHECK(has(thrown_by([&] { (void)detail::kernel_from_json(detail::JsonCursor(on_gemm, "k.json", "")); }), "only a collective kernel spans ranks"));
}

TEST_CASE("a case measured in several runs is one result over all their samples") {
    const CostContext ctx = h200_with_collectives();
    const DdpRun first = load_ddp_run(ddp_dir / "h200-sxm-x2-2026-12-04.json");
    DdpRun slower = first;  // the same run again, every sample half as long again
    for (auto& c : slower.cases) {
        for (double& v : c.step_samples) v *= 1.5;
        c.step.measured_seconds *= 1.5;
    }
    const std::vector<DdpRun> runs_one{first}, runs_both{first, slower};  // the results point into them
    const auto one = evaluate_ddp(runs_one, ctx, nullptr);
    const auto both = evaluate_ddp(runs_both, ctx, nullptr);
    REQUIRE(both.size() == one.size());
    for (std::size_t i = 0; i < both.size(); ++i) {
        const DdpCase& c = first.cases[i];
        INFO(c.step.id);
        CHECK(both[i].c->step.id == c.step.id);
        CHECK(one[i].runs == 1);
        CHECK(both[i].runs == 2);
        CHECK(one[i].measured == c.step.measured_seconds);
        CHECK(both[i].run_median_min == c.step.measured_seconds);
        CHECK(both[i].run_median_max == Catch::Approx(1.5 * c.step.measured_seconds));
        // the pooled samples: their median between the runs' medians, their spread over both runs
        std::vector<double> pooled = c.step_samples;
        for (const double v : c.step_samples) pooled.push_back(1.5 * v);
        std::sort(pooled.begin(), pooled.end());
        CHECK(both[i].measured == Catch::Approx((pooled[19] + pooled[20]) / 2));
        CHECK(both[i].p10 >= *std::min_element(c.step_samples.begin(), c.step_samples.end()));
        CHECK(both[i].p10 <= one[i].measured);
        CHECK(both[i].p90 > 1.3 * one[i].p90);
        CHECK(both[i].predicted == one[i].predicted);  // the prediction does not depend on the runs
    }
}

TEST_CASE("accuracy: DDP steps on two H200s against --num-gpus 2") {
    // Bounds: a GPU-paced step within 10 %; a host-paced one within the p10-p90 of its samples (both
    // runs') or 15 %. Known miss, with the reason (docs/validation.md, "Data-parallel steps"): the
    // host-paced Hugging Face BERT-base b128 under AMP, predicted host-bound at b32's time where its
    // GPU work is near the host's (its one-GPU step is short too).
    const std::vector<std::string> known_misses = {"bert-base/b128xs128/amp-bf16"};
    const CostContext ctx = h200_with_collectives();
    const auto runs = measured_runs();
    const auto results = evaluate_ddp(runs, ctx, find_builtin_framework_profile("h200-sxm"));
    REQUIRE(results.size() == 12);
    for (const auto& e : results) {
        INFO(e.c->step.id << ": measured " << e.measured << " s, predicted " << e.predicted << " s, error " << e.error);
        const bool known = std::find(known_misses.begin(), known_misses.end(), e.c->step.id) != known_misses.end();
        if (known) {
            CHECK_FALSE(e.within);                // mended: take it off the list
            CHECK(std::abs(e.error) <= 0.25);     // and no worse than today
        } else {
            CHECK(e.within);
        }
        // peak memory with DDP's buckets: within 10 % of the larger rank's
        REQUIRE(e.c->peak_bytes);
        REQUIRE(e.predicted_peak_bytes);
        CHECK(std::abs(*e.predicted_peak_bytes / *e.c->peak_bytes - 1) <= 0.10);
        // scaling efficiency of GPU-paced steps: within 0.06 of the measured one
        REQUIRE(e.measured_efficiency);
        if (!e.host_paced) CHECK(std::abs(e.predicted_efficiency - *e.measured_efficiency) <= 0.06);
    }
}
