#include "catch.hpp"

#include <roofsim/report/roofline_svg.hpp>

#include <regex>
#include <string>

using namespace roofsim;

namespace {
std::size_t count(const std::string& s, const std::string& what) {
    std::size_t n = 0;
    for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
    return n;
}
}  // namespace

TEST_CASE("the roofline SVG is a complete document with every ceiling labelled", "[svg]") {
    const Ceilings c = ceilings_from_spec(gpu_or_throw("a100-80gb-sxm"));
    const std::string svg = roofline_svg(c);
    CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
    CHECK(svg.find("</svg>") == svg.size() - 7);
    CHECK(count(svg, "<text") == count(svg, "</text>"));
    CHECK(svg.find("DRAM 2.04 TB/s") != std::string::npos);
    CHECK(svg.find("L2 7.22 TB/s") != std::string::npos);
    CHECK(svg.find("tf32-tensor 156 TFLOP/s") != std::string::npos);
    // equal ceilings share one label
    CHECK(svg.find("fp16-tensor, fp16-fp16acc-tensor, bf16-tensor 312 TFLOP/s") != std::string::npos);
    CHECK(svg.find("nan") == std::string::npos);
    CHECK(svg.find("inf") == std::string::npos);
}

TEST_CASE("one precision draws one compute ceiling; points are drawn", "[svg]") {
    const Ceilings c = ceilings_from_spec(gpu_or_throw("rtx-3090"));
    RooflineSvgOptions o;
    o.only_unit = ComputeUnit::fp32;
    o.points.push_back({"my kernel", FlopsPerByte(4), units::tflops_per_second(2)});
    const std::string svg = roofline_svg(c, o);
    CHECK(svg.find("fp32 35.6 TFLOP/s") != std::string::npos);
    CHECK(svg.find("tensor") == std::string::npos);
    CHECK(svg.find("<title>my kernel</title>") != std::string::npos);
    o.only_unit = ComputeUnit::fp8_tensor;
    CHECK_THROWS_AS(roofline_svg(c, o), std::invalid_argument);
}

#include <roofsim/report/svg.hpp>
#include <roofsim/zoo/zoo.hpp>

TEST_CASE("the prediction report draws layers on the roofline and the slowest layers as bars", "[svg][predict]") {
    const CostContext ctx = make_cost_context(gpu_or_throw("a100-80gb-sxm"));
    PredictOptions o;
    o.lowering.batch = 16;
    const Prediction p = predict(zoo::resnet50(), ctx, o);
    const std::string svg = prediction_svg(p, ctx.ceilings, 5);
    CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
    CHECK(count(svg, "<svg") == 2);  // the report and the nested roofline
    CHECK(count(svg, "</svg>") == 2);
    CHECK(count(svg, "<text") == count(svg, "</text>"));
    CHECK(svg.find("<title>conv1 (") != std::string::npos);
    CHECK(svg.find("<title>fc (") != std::string::npos);
    CHECK(svg.find("GPU time per layer: resnet50, batch 16") != std::string::npos);
    CHECK(count(svg, " ms, ") == 5);  // five bars, each labelled with its time and bound
    CHECK(svg.find("nan") == std::string::npos);
}

namespace {
/// Every x/y-like coordinate attribute of the elements in `svg`.
std::vector<std::pair<std::string, double>> coordinates(const std::string& svg) {
    std::vector<std::pair<std::string, double>> out;
    const std::regex attribute(R"re(\s(x|y|cx|cy|x1|y1|x2|y2)="(-?[0-9.]+)")re");
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), attribute); it != std::sregex_iterator(); ++it) {
        out.emplace_back((*it)[1].str(), std::stod((*it)[2].str()));
    }
    return out;
}

double attribute_of_root(const std::string& svg, const std::string& name) {
    return std::stod(svg.substr(svg.find(" " + name + "=\"") + name.size() + 3));
}

/// The estimated width of the first bold (title) text: 0.6 em a character at 15 px.
double title_width(const std::string& svg) {
    const auto start = svg.find('>', svg.find("font-weight=\"bold\"")) + 1;
    return 0.6 * 15 * static_cast<double>(svg.find("</text>", start) - start);
}

Prediction resnet_prediction(const CostContext& ctx) {
    PredictOptions o;
    o.lowering.batch = 16;
    return predict(zoo::resnet50(), ctx, o);
}
}  // namespace

TEST_CASE("every layer is a point on the report's roofline, memory-bound and FLOP-free layers too", "[svg][predict]") {
    const CostContext ctx = make_cost_context(gpu_or_throw("a100-80gb-sxm"));
    const Prediction p = resnet_prediction(ctx);
    const std::string svg = prediction_svg(p, ctx.ceilings, 10);
    CHECK(count(svg, "class=\"point\"") == p.layers.size());
    const auto no_flops = std::count_if(p.layers.begin(), p.layers.end(), [](const LayerTime& l) { return l.flops.value() == 0; });
    REQUIRE(no_flops > 0);  // batchnorm, relu, add, ...
    CHECK(count(svg, ": no FLOPs</title>") == static_cast<std::size_t>(no_flops));
    CHECK(svg.find("hollow: no FLOPs") != std::string::npos);  // the legend says how they are drawn
    CHECK(svg.find("<title>conv1.bn (batchnorm2d): no FLOPs</title>") != std::string::npos);  // a memory-bound layer
}

TEST_CASE("the report draws exactly K bars, one per layer", "[svg][predict]") {
    const CostContext ctx = make_cost_context(gpu_or_throw("h200-sxm"));
    const Prediction p = resnet_prediction(ctx);
    for (std::size_t k : {1u, 10u, 20u}) CHECK(count(prediction_svg(p, ctx.ceilings, k), "<g class=\"bar\">") == k);
    CHECK(count(prediction_svg(p, ctx.ceilings, 100000), "<g class=\"bar\">") == p.layers.size());
}

TEST_CASE("the roofline keeps every coordinate inside its view box, and its title inside its width", "[svg]") {
    Ceilings c = ceilings_from_spec(gpu_or_throw("h200-sxm"));
    c.origin = "measured on NVIDIA H200 SXM 141GB in a very long calibration run named at length, 2026-11-30, "
               "roofsim-calibrate 0.1.0, with a description longer than any chart is wide";
    RooflineSvgOptions o;
    o.points.push_back({"tiny", FlopsPerByte(1e-6), FlopsPerSecond(1e-3)});
    o.points.push_back({"huge", FlopsPerByte(1e9), FlopsPerSecond(1e30)});
    o.points.push_back({"memory only", FlopsPerByte(0), FlopsPerSecond(1e11), true});
    const std::string svg = roofline_svg(c, o);
    const double width = attribute_of_root(svg, "width"), height = attribute_of_root(svg, "height");
    CHECK(svg.find("viewBox=\"0 0 ") != std::string::npos);
    for (const auto& [name, v] : coordinates(svg)) {
        INFO(name << " = " << v);
        CHECK(v >= 0);
        CHECK(v <= (name[0] == 'x' || name[0] == 'c' && name[1] == 'x' ? width : height));
    }
    CHECK(title_width(svg) <= width - 20);
    CHECK(count(svg, "class=\"point\"") == 3);
}

TEST_CASE("the report's title and bars fit its width", "[svg][predict]") {
    const CostContext ctx = make_cost_context(gpu_or_throw("rtx-3090"));
    Prediction p = resnet_prediction(ctx);
    p.kernels.model = std::string(300, 'm');
    const std::string svg = prediction_svg(p, ctx.ceilings, 5);
    const double width = attribute_of_root(svg, "width");
    const auto bars = svg.substr(svg.find("</svg>"));  // the bar chart, after the nested roofline
    CHECK(title_width(bars) <= width - 20);
    for (const auto& [name, v] : coordinates(bars)) {
        if (name[0] == 'x') CHECK(v <= width);
    }
}
