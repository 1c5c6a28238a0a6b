// Planners' tools: a step lowered once and costed on several GPUs, the sweep over a grid, the price
// table and an epoch's time and cost, and the comparison picture.
#include "catch.hpp"
#include "thrown.hpp"

#include <roofsim/roofsim.hpp>

#include <cmath>
#include <regex>
#include <string>
#include <vector>

using namespace roofsim;
using Catch::Approx;

namespace {
PredictOptions options(std::int64_t batch, PrecisionMode mode) {
    PredictOptions o;
    o.lowering.batch = batch;
    o.lowering.precision = mode;
    o.framework = find_builtin_framework_profile("h200-sxm");
    return o;
}

bool same(const Prediction& a, const Prediction& b) {
    return a.step_time == b.step_time && a.gpu_time == b.gpu_time && a.memory.peak == b.memory.peak && a.layers.size() == b.layers.size() &&
           a.kernels.kernels.size() == b.kernels.kernels.size() && a.layers.front().op == b.layers.front().op &&
           a.layers.back().forward_gpu == b.layers.back().forward_gpu;
}
}  // namespace

TEST_CASE("a step prepared once predicts on each GPU exactly what predict() does") {
    const Graph g = *zoo::model("resnet50", 224);
    const CostContext h200 = make_cost_context(gpu_or_throw("h200-sxm"), find_builtin_calibration("h200-sxm"));
    const CostContext rtx = make_cost_context(gpu_or_throw("rtx-3090"));
    auto o = options(32, PrecisionMode::amp_bf16);
    o.data_parallel.gpus = 2;
    const PreparedStep step = prepare(g, o);
    CHECK(same(predict(step, h200), predict(g, h200, o)));
    CHECK(same(predict(step, rtx), predict(g, rtx, o)));
    CHECK(predict(step, rtx).step_time != predict(step, h200).step_time);
}

TEST_CASE("sweep: every configuration of the grid, in grid order, each as predict() gives it") {
    const Graph g = *zoo::model("resnet50", 224);
    const CostContext h200 = make_cost_context(gpu_or_throw("h200-sxm"), find_builtin_calibration("h200-sxm"));
    const CostContext a6000 = make_default_cost_context(gpu_or_throw("rtx-a6000"), find_builtin_framework_profile("h200-sxm"));
    SweepGrid grid;
    grid.gpus = {{&h200, nullptr}, {&a6000, nullptr}};
    grid.batches = {8, 48};
    grid.precisions = {PrecisionMode::fp32, PrecisionMode::amp_fp16};
    grid.gpu_counts = {1, 4};
    const auto base = options(1, PrecisionMode::fp32);
    const auto rows = sweep(g, grid, base, 2);
    REQUIRE(rows.size() == 16);
    std::size_t i = 0;
    for (const auto b : grid.batches) {
        for (const auto p : grid.precisions) {
            for (const int n : grid.gpu_counts) {
                for (std::size_t gpu = 0; gpu < 2; ++gpu, ++i) {
                    const SweepRow& r = rows[i];
                    CHECK(r.gpu == gpu);
                    CHECK(r.batch == b);
                    CHECK(r.precision == p);
                    CHECK(r.gpus == n);
                    auto o = options(b, p);
                    o.data_parallel.gpus = n;
                    const Prediction expected = predict(g, *grid.gpus[gpu].ctx, o);
                    CHECK(r.step == expected.step_time);
                    CHECK(r.peak == expected.memory_fit.peak);
                    CHECK(r.fits == expected.memory_fit.fits());
                    CHECK(r.samples_per_second == Approx(static_cast<double>(b) * n / expected.step_time.value()));
                }
            }
        }
    }
    // one thread gives the same rows as two
    const auto serial = sweep(g, grid, base, 1);
    for (std::size_t k = 0; k < rows.size(); ++k) CHECK(serial[k].step == rows[k].step);
}

TEST_CASE("sweep: an empty axis, and a configuration that cannot be costed, are errors") {
    const Graph g = *zoo::model("resnet50", 224);
    const CostContext v100 = make_default_cost_context(gpu_or_throw("v100-sxm2-32gb"), nullptr);
    SweepGrid grid;
    grid.gpus = {{&v100, nullptr}};
    grid.batches = {8};
    grid.precisions = {PrecisionMode::amp_bf16};  // the V100 has no bf16 tensor cores
    CHECK(has(thrown_by([&] { (void)sweep(g, grid, options(1, PrecisionMode::fp32)); }), "bf16"));
    grid.batches.clear();
    CHECK(has(thrown_by([&] { (void)sweep(g, grid, options(1, PrecisionMode::fp32)); }), "every axis"));
}

TEST_CASE("price table: read with its date and sources, a missing GPU named, bad prices refused") {
    const PriceTable t = load_price_table(std::string(ROOFSIM_SOURCE_DIR) + "/data/prices/lambda-on-demand-2026-05.json");
    CHECK(t.currency == "USD");
    CHECK(t.date == "2026-05-07");
    CHECK(t.at("h100-sxm").per_hour == 3.78);  // the source's "$3.78/hr"
    CHECK_FALSE(t.at("h100-sxm").source.empty());
    const std::string missing = thrown_by([&] { (void)t.at("rtx-3090"); });
    CHECK(has(missing, "no price for rtx-3090"));
    CHECK(has(missing, "h100-sxm"));  // what it does price
    auto table = [](const std::string& prices) {
        return nlohmann::json::parse(R"({"kind": "roofsim-prices", "schema_version": 1, "currency": "USD", "unit": "per GPU-hour",
                                         "date": "2026-01-01", "source": "test", "prices": )" + prices + "}");
    };
    CHECK(parse_price_table(table(R"({"a10": {"value": 1.5, "source": "s"}})"), "t.json").at("a10").per_hour == 1.5);
    CHECK(has(thrown_by([&] { (void)parse_price_table(table(R"({"a10": {"value": -1, "source": "s"}})"), "t.json"); }),
              "t.json: /prices/a10/value"));
    CHECK(has(thrown_by([&] { (void)parse_price_table(table(R"({"a10": {"value": 1, "sourse": "s"}})"), "t.json"); }), "sourse"));
    CHECK(has(thrown_by([&] { (void)parse_price_table(table("{}"), "t.json"); }), "no prices"));
}

TEST_CASE("an epoch is whole steps; its cost the GPU-hours times the price") {
    // 1,000 samples at 64 a step: 16 steps (the last one partial), 0.5 s each
    CHECK(epoch_seconds(1000, 64, 0.5) == 8.0);
    CHECK(epoch_seconds(1024, 64, 0.5) == 8.0);
    CHECK(epoch_seconds(1025, 64, 0.5) == 8.5);
    CHECK(has(thrown_by([&] { (void)epoch_seconds(0, 64, 0.5); }), "at least one sample"));
    // 2 hours on 8 GPUs at 2.5 a GPU-hour
    CHECK(gpu_cost(7200, 8, 2.5) == Approx(40.0));
}

TEST_CASE("the comparison picture draws every point it is given, inside its canvas") {
    ComparedSeries a{"gpu-a", 64, 1000, true, 128, {{1, 50}, {2, 90}, {4, 160}, {128, 1100}}, {{1, 1}, {2, 1.9}, {4, 3.7}, {8, 7.1}}};
    ComparedSeries b{"gpu-b", 32, 400, false, std::nullopt, {}, {}};
    const std::string svg = comparison_svg({a, b}, "test");
    // circles: 4 batch points + the ring of the largest batch + 4 scaling points
    const std::regex circle("<circle cx=\"([0-9.]+)\" cy=\"([0-9.]+)\"");
    int circles = 0;
    const std::regex size("width=\"([0-9.]+)\" height=\"([0-9.]+)\" viewBox");
    std::smatch m;
    REQUIRE(std::regex_search(svg, m, size));
    const double width = std::stod(m[1]), height = std::stod(m[2]);
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), circle); it != std::sregex_iterator(); ++it) {
        ++circles;
        const double x = std::stod((*it)[1]), y = std::stod((*it)[2]);
        CHECK(x > 0);
        CHECK(x < width);
        CHECK(y > 0);
        CHECK(y < height);
    }
    CHECK(circles == 9);
    CHECK(svg.find("gpu-b (batch 32)") != std::string::npos);
    CHECK(svg.find("does not fit") != std::string::npos);
    // no series with curves: the bars alone
    const std::string bars = comparison_svg({b}, "bars");
    CHECK(bars.find("<circle") == std::string::npos);
    CHECK(bars.find("Throughput over batch") == std::string::npos);
}
