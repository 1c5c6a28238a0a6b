#include "catch.hpp"

#include <roofsim/roofline_svg.hpp>

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

#include <roofsim/report_svg.hpp>
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
    CHECK(svg.find("<title>conv1 forward</title>") != std::string::npos);
    CHECK(svg.find("<title>fc backward</title>") != std::string::npos);
    CHECK(svg.find("GPU time per layer: resnet50, batch 16") != std::string::npos);
    CHECK(count(svg, " ms, ") == 5);  // five bars, each labelled with its time and bound
    CHECK(svg.find("nan") == std::string::npos);
}
