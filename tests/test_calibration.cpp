// Calibration profile: JSON round trip, loud validation of corrupt and partial files, atomic save,
// accessors, and the least-squares fits used by roofsim-calibrate.
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "catch.hpp"
#include <roofsim/profile/calibration_json.hpp>

#include <algorithm>
#include <roofsim/detail/fit.hpp>

using namespace roofsim;
namespace fs = std::filesystem;

namespace {

Measurement meas(double median, std::string method = "test") {
    return Measurement{median, median * 0.98, median * 1.01, 10, std::move(method)};
}

Calibration make_full() {
    Calibration c;
    c.device.name = "NVIDIA H200";
    c.device.gpu_key = "h200-sxm";
    c.device.compute_capability_major = 9;
    c.device.compute_capability_minor = 0;
    c.device.sm_count = 132;
    c.device.l2_bytes = 62914560;
    c.device.memory_bytes = 150e9;
    c.device.sm_clock_max_hz = 1.98e9;
    c.device.memory_clock_max_hz = 3.2e9;
    c.device.memory_bus_width_bits = 6144;
    c.device.sm_clock_measured_hz = meas(1.98e9);
    c.device.device_count = 1;
    c.device.driver_version = "580.159.04";
    c.device.cuda_driver_version = 13000;
    c.device.cuda_runtime_version = 13000;
    c.device.cublas_version = "13.1.0";
    c.device.date_utc = "2026-11-29T10:00:00Z";
    c.device.tool_version = "0.1.0";
    c.device.command_line = "roofsim-calibrate -o x.json";
    for (AccessPattern p : all_access_patterns) {
        c.bandwidth[MemoryLevel::dram][p] = meas(4.4e12);
        c.bandwidth[MemoryLevel::l2][p] = meas(10e12);
    }
    c.bandwidth[MemoryLevel::dram][AccessPattern::read] = meas(4.6e12);
    c.bandwidth_curve[AccessPattern::copy] = {{4096, 1e11}, {1 << 20, 8e12}, {1e9, 4.3e12}};
    c.l2_to_dram_step_bytes = 5e7;
    c.probe_ceilings[ComputeUnit::fp32] = {meas(64e12), "FFMA", 1.98e9, 66.9e12};
    c.probe_ceilings[ComputeUnit::bf16_tensor] = {meas(600e12), "mma.sync m16n8k16", 1.9e9, std::nullopt};
    c.library_ceilings[ComputeUnit::bf16_tensor] = {meas(750e12), "cublasGemmEx", std::nullopt, std::nullopt};
    c.library_ceilings[ComputeUnit::fp32] = {meas(51e12), "cublasGemmEx", std::nullopt, std::nullopt};
    c.intensity_curves[ComputeUnit::fp32] = {{0.25, 1e12, 4e12}, {1.0, 4e12, 4e12}, {64, 63e12, 1e12}};
    c.gemm_sweep.push_back({4096, 4096, 4096, ComputeUnit::bf16_tensor, meas(2e-4), 687e12, 0.9});
    c.gemm_sweep.push_back({1024, 1024, 64, ComputeUnit::bf16_tensor, meas(1e-4), 2.6e14, 0.4, "TN", 192});
    c.gemm_fits[ComputeUnit::bf16_tensor] = {5e-6, 760e12, 0.99, 12};
    c.conv_sweep.push_back({ConvPass::backward_filter, 32, 64, 56, 56, 64, 3, 3, 1, 1, ComputeUnit::bf16_tensor,
                            "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1", meas(1e-4), 3.7e14, 0.5});
    c.launch_latency_seconds = meas(5e-6);
    c.launch_interval_seconds = meas(2.2e-6);
    c.launch_gpu_interval_seconds = meas(1.1e-6);
    c.memcpy[MemcpyKind::h2d_pinned] = {meas(55e9), {{4096, 1e9}, {1 << 26, 54e9}}, AffineFit{4e-6, 55e9, 0.999, 2}};
    c.collectives.push_back({"all-reduce", 2, 1 << 28, meas(1e-3), 268e9, 268e9});
    c.missing.push_back({"nccl", MissingReason::unsupported, "one GPU visible"});
    return c;
}

fs::path temp_dir() {
    const fs::path d = fs::temp_directory_path() / ("roofsim-cal-test-" + std::to_string(std::random_device{}()));
    fs::create_directories(d);
    return d;
}

void write_text(const fs::path& p, const std::string& text) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << text;
}

/// Runs calibration_from_json on `j` and returns the error message (empty when it loaded).
std::string load_error(const nlohmann::json& j) {
    try {
        (void)calibration_from_json(j, "h200.json");
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return {};
}

}  // namespace

TEST_CASE("a profile survives to_json / calibration_from_json unchanged", "[calibration]") {
    const Calibration c = make_full();
    const nlohmann::json j = to_json(c);
    const Calibration back = calibration_from_json(j, "roundtrip");
    CHECK(to_json(back) == j);
    CHECK(back.device.name == "NVIDIA H200");
    CHECK(back.device.compute_capability_major == 9);
    REQUIRE(back.gemm_sweep.size() == 2);
    CHECK(back.gemm_sweep[0].layout == "NN");
    CHECK(back.gemm_sweep[0].batch == 1);
    CHECK(back.gemm_sweep[1].layout == "TN");
    CHECK(back.gemm_sweep[1].batch == 192);
    CHECK(j.at("launch").at("gpu_interval").at("unit") == "seconds");
    CHECK(back.conv_sweep.at(0).pass == ConvPass::backward_filter);
    CHECK(back.memcpy.at(MemcpyKind::h2d_pinned).fit->rate_per_second == 55e9);
    CHECK(back.missing.at(0).reason == MissingReason::unsupported);
    CHECK(j.at("schema_version") == 2);
    CHECK(j.at("methods").is_array());  // the method texts, each once, referred to by index
    CHECK(back.bandwidth.at(MemoryLevel::dram).at(AccessPattern::copy).method == c.bandwidth.at(MemoryLevel::dram).at(AccessPattern::copy).method);
    CHECK(j.at("bandwidth").at("dram").at("copy").at("unit") == "bytes_per_second");
}

TEST_CASE("optional sweep fields default when absent and are checked when present", "[calibration]") {
    Calibration full = make_full();
    full.conv_sweep.push_back(full.conv_sweep[0]);
    full.conv_sweep[1].unit = ComputeUnit::tf32_tensor;
    full.conv_sweep[1].groups = 64;
    full.conv_sweep[1].dilation = 2;
    full.conv_sweep.push_back(full.conv_sweep[0]);  // a 1-D convolution: H = R = 1, no padding in H
    full.conv_sweep[2].h = full.conv_sweep[2].r = 1;
    full.conv_sweep[2].stride_h = 1;
    full.conv_sweep[2].pad_h = 0;
    full.conv_sweep[2].dilation_h = 1;
    nlohmann::json j = to_json(full);
    SECTION("a profile written before layout, batch, groups, dilation and gpu_interval loads") {
        for (auto& g : j.at("gemm_sweep")) { g.erase("layout"); g.erase("batch"); }
        for (auto& v : j.at("conv_sweep")) { v.erase("groups"); v.erase("dilation"); v.erase("layout"); }
        j.at("launch").erase("gpu_interval");
        const Calibration c = calibration_from_json(j, "old.json");
        CHECK(c.gemm_sweep[1].layout == "NN");
        CHECK(c.gemm_sweep[1].batch == 1);
        CHECK(c.conv_sweep[0].groups == 1);
        CHECK(c.conv_sweep[0].dilation == 1);
        CHECK(c.conv_sweep[0].layout == "NHWC");  // the old convention: NHWC for 16-bit types
        CHECK(c.conv_sweep[1].layout == "NCHW");  // and NCHW for fp32
        CHECK_FALSE(c.conv_sweep[0].pad_h.has_value());  // H's figures are W's
        CHECK(c.conv_sweep[0].pad_along_h() == c.conv_sweep[0].pad);
        CHECK_FALSE(launch_gpu_interval(c).has_value());
    }
    SECTION("present fields round-trip") {
        const Calibration c = calibration_from_json(j, "new.json");
        CHECK(c.conv_sweep[1].groups == 64);
        CHECK(c.conv_sweep[1].dilation == 2);
        CHECK(c.conv_sweep[1].layout == "NCHW");
        CHECK(c.conv_sweep[2].pad_along_h() == 0);
        CHECK(c.conv_sweep[2].pad == 1);
        CHECK(c.conv_sweep[2].stride_along_h() == 1);
        CHECK(c.conv_sweep[2].dilation_along_h() == 1);
        CHECK(to_json(c) == j);
    }
    SECTION("bad values are refused with their path") {
        j["gemm_sweep"][1]["layout"] = "XN";
        CHECK_THAT(load_error(j), Catch::Matchers::Contains("/gemm_sweep/1/layout"));
        j = to_json(full);
        j["gemm_sweep"][1]["batch"] = 0;
        CHECK_THAT(load_error(j), Catch::Matchers::Contains("/gemm_sweep/1/batch"));
        j = to_json(full);
        j["conv_sweep"][1]["groups"] = 3;
        CHECK_THAT(load_error(j), Catch::Matchers::Contains("/conv_sweep/1/groups"));
        j = to_json(full);
        j["conv_sweep"][0]["layout"] = "CHWN";
        CHECK_THAT(load_error(j), Catch::Matchers::Contains("/conv_sweep/0/layout"));
        j = to_json(full);
        j["conv_sweep"][2]["pad_h"] = -1;
        CHECK_THAT(load_error(j), Catch::Matchers::Contains("/conv_sweep/2/pad_h"));
    }
    SECTION("validate refuses an unknown layout") {
        full.gemm_sweep[0].layout = "nn";
        CHECK_THROWS(validate(full));
    }
}

TEST_CASE("accessors pick the best measured figure", "[calibration]") {
    const Calibration c = make_full();
    SECTION("compute ceiling is the better of probe and library") {
        CHECK(compute_ceiling(c, ComputeUnit::bf16_tensor)->value() == 750e12);
        CHECK(compute_ceiling(c, ComputeUnit::fp32)->value() == 64e12);
        CHECK_FALSE(compute_ceiling(c, ComputeUnit::fp8_tensor).has_value());
    }
    SECTION("bandwidth ceiling is the best pattern at the level") {
        CHECK(bandwidth_ceiling(c, MemoryLevel::dram)->value() == 4.6e12);
        CHECK(bandwidth_ceiling(c, MemoryLevel::l2)->value() == 10e12);
        CHECK(bandwidth_of(c, MemoryLevel::dram, AccessPattern::copy)->value() == 4.4e12);
    }
    SECTION("launch and provenance") {
        CHECK(launch_latency(c)->value() == 5e-6);
        CHECK(launch_interval(c)->value() == 2.2e-6);
        CHECK(launch_gpu_interval(c)->value() == 1.1e-6);
        CHECK(provenance(c) == "measured on NVIDIA H200, 2026-11-29, roofsim-calibrate 0.1.0");
        CHECK(is_missing(c, "nccl"));
    }
}

TEST_CASE("corrupt and inconsistent profiles fail with the key path", "[calibration]") {
    nlohmann::json j = to_json(make_full());
    SECTION("missing key") {
        j["bandwidth"]["dram"]["copy"].erase("median");
        CHECK(load_error(j) == "h200.json: /bandwidth/dram/copy/median: missing");
    }
    SECTION("an empty DRAM section") {
        j["bandwidth"]["dram"] = nlohmann::json::object();
        CHECK(load_error(j) == "h200.json: /bandwidth/dram: no measurements (a memory level lists at least one access pattern, e.g. "
                               "copy; leave out a level not measured)");
    }
    SECTION("missing top-level section") {
        j.erase("device");
        CHECK(load_error(j) == "h200.json: /device: missing");
    }
    SECTION("wrong type") {
        j["device"]["sm_count"] = "132";
        CHECK(load_error(j) == "h200.json: /device/sm_count: expected an integer, got string");
    }
    SECTION("negative value") {
        j["compute"]["library"]["bf16-tensor"]["min"] = -1.0;
        CHECK_THAT(load_error(j), Catch::Matchers::Contains("/compute/library/bf16-tensor/min") &&
                                      Catch::Matchers::Contains("positive"));
    }
    SECTION("min above median") {
        j["bandwidth"]["l2"]["read"]["min"] = 11e12;
        CHECK_THAT(load_error(j), Catch::Matchers::Contains("/bandwidth/l2/read/min: min must not exceed median"));
    }
    SECTION("wrong unit") {
        j["launch"]["latency"]["unit"] = "microseconds";
        CHECK_THAT(load_error(j), Catch::Matchers::Contains("/launch/latency/unit"));
    }
    SECTION("efficiency above one") {
        j["gemm_sweep"][0]["efficiency"] = 1.2;
        CHECK_THAT(load_error(j), Catch::Matchers::Contains("/gemm_sweep/0/efficiency"));
    }
    SECTION("unsorted curve") {
        j["bandwidth_curve"]["copy"][2]["bytes"] = 100.0;
        CHECK_THAT(load_error(j), Catch::Matchers::Contains("/bandwidth_curve/copy/2/bytes"));
    }
    SECTION("unknown compute unit") {
        j["compute"]["probe"]["fp7"] = j["compute"]["probe"]["fp32"];
        CHECK_THAT(load_error(j), Catch::Matchers::Contains("/compute/probe/fp7"));
    }
    SECTION("another schema version") {
        j["schema_version"] = 1;  // method texts written out in full: an earlier format
        CHECK_THAT(load_error(j), Catch::Matchers::Contains("/schema_version: unsupported schema version 1 (this build reads 2)"));
        j["schema_version"] = 3;
        CHECK_THAT(load_error(j), Catch::Matchers::Contains("/schema_version: unsupported schema version 3"));
    }
    SECTION("a method reference out of range, or with the wrong count of numbers") {
        j["bandwidth"]["dram"]["copy"]["method"] = nlohmann::json::array({j["methods"].size()});
        CHECK_THAT(load_error(j), Catch::Matchers::Contains("/bandwidth/dram/copy/method: expected [index into /methods"));
        j["methods"].push_back("copy of {} MiB, {} samples");
        j["bandwidth"]["dram"]["copy"]["method"] = nlohmann::json::array({j["methods"].size() - 1, 64});
        CHECK_THAT(load_error(j), Catch::Matchers::Contains("/bandwidth/dram/copy/method: fewer numbers"));
        j["bandwidth"]["dram"]["copy"]["method"] = nlohmann::json::array({j["methods"].size() - 1, 64, 5, 7});
        CHECK_THAT(load_error(j), Catch::Matchers::Contains("/bandwidth/dram/copy/method: more numbers"));
    }
    SECTION("no methods table") {
        j.erase("methods");
        CHECK_THAT(load_error(j), Catch::Matchers::Contains("/methods: missing"));
    }
    SECTION("not an object") {
        CHECK_THAT(load_error(nlohmann::json::array()), Catch::Matchers::Contains("expected an object"));
    }
}

TEST_CASE("load_calibration names the file on corrupt input", "[calibration]") {
    SECTION("truncated JSON") {
        const fs::path p = fs::path(ROOFSIM_SOURCE_DIR) / "tests/data/calibration-truncated.json";
        CHECK_THROWS_WITH(load_calibration(p), Catch::Matchers::Contains("calibration-truncated.json: not valid JSON"));
    }
    SECTION("a file that does not exist") {
        CHECK_THROWS_WITH(load_calibration("/nonexistent/x.json"), Catch::Matchers::Contains("cannot open"));
    }
    SECTION("a fixture missing a required key") {
        const fs::path p = fs::path(ROOFSIM_SOURCE_DIR) / "tests/data/calibration-missing-key.json";
        CHECK_THROWS_WITH(load_calibration(p),
                          "calibration-missing-key.json: /bandwidth/dram/copy/median: missing");
    }
}

TEST_CASE("a partial profile loads and its missing figures read as nullopt", "[calibration]") {
    const fs::path p = fs::path(ROOFSIM_SOURCE_DIR) / "tests/data/calibration-partial.json";
    const Calibration c = load_calibration(p);
    CHECK(c.device.name == "NVIDIA A100-SXM4-80GB");
    CHECK(bandwidth_ceiling(c, MemoryLevel::dram).has_value());
    CHECK_FALSE(bandwidth_ceiling(c, MemoryLevel::l2).has_value());
    CHECK_FALSE(compute_ceiling(c, ComputeUnit::bf16_tensor).has_value());
    CHECK_FALSE(launch_latency(c).has_value());
    CHECK(is_missing(c, "cublas_peak"));
    CHECK(c.missing.size() == 3);
}

TEST_CASE("validate rejects what the loader would reject", "[calibration]") {
    Calibration c = make_full();
    REQUIRE_NOTHROW(validate(c));
    SECTION("min above median") {
        c.launch_latency_seconds->min = 1.0;
        CHECK_THROWS_WITH(validate(c), Catch::Matchers::Contains("launch/latency"));
    }
    SECTION("zero efficiency") {
        c.gemm_sweep[0].efficiency = 0.0;
        CHECK_THROWS_WITH(validate(c), Catch::Matchers::Contains("gemm_sweep/0/efficiency"));
    }
    SECTION("no device name") {
        c.device.name.clear();
        CHECK_THROWS_WITH(validate(c), Catch::Matchers::Contains("device/name"));
    }
}

TEST_CASE("save_calibration is atomic and replaces an existing file", "[calibration]") {
    const fs::path dir = temp_dir();
    const fs::path p = dir / "h200.json";
    write_text(p, "old contents");
    Calibration c = make_full();
    save_calibration(c, p);
    std::size_t files = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
        ++files;
        CHECK(e.path().filename() == "h200.json");
    }
    CHECK(files == 1);
    const Calibration back = load_calibration(p);
    CHECK(to_json(back) == to_json(c));
    SECTION("an invalid profile is not written and the old file stays") {
        c.device.sm_count = 0;
        CHECK_THROWS(save_calibration(c, p));
        CHECK(load_calibration(p).device.sm_count == 132);
    }
    fs::remove_all(dir);
}

TEST_CASE("summarize gives median, min, max of a sample set", "[calibration]") {
    const Measurement m = summarize({3.0, 1.0, 2.0, 10.0}, "x");
    CHECK(m.median == 2.5);
    CHECK(m.min == 1.0);
    CHECK(m.max == 10.0);
    CHECK(m.samples == 4);
    CHECK(summarize({5.0, 1.0, 3.0}).median == 3.0);
    CHECK_THROWS(summarize({}));
}

TEST_CASE("fits recover known parameters from synthetic data", "[calibration][fit]") {
    SECTION("latency + bytes / bandwidth") {
        const double overhead = 8e-6, rate = 50e9;
        std::vector<double> x, y;
        for (double b = 4096; b <= 1 << 28; b *= 4) {
            x.push_back(b);
            y.push_back(overhead + b / rate);
        }
        const AffineFit f = detail::fit_overhead_and_rate(x, y);
        CHECK_THAT(f.overhead_seconds, Catch::Matchers::WithinRel(overhead, 1e-6));
        CHECK_THAT(f.rate_per_second, Catch::Matchers::WithinRel(rate, 1e-6));
        CHECK_THAT(f.r2, Catch::Matchers::WithinAbs(1.0, 1e-9));
        CHECK(f.points == static_cast<int>(x.size()));
    }
    SECTION("noisy GEMM times still give the rate within 2%") {
        const double overhead = 4e-6, rate = 750e12;
        std::vector<double> x, y;
        int i = 0;
        for (double n = 256; n <= 8192; n *= 2, ++i) {
            const double flops = 2 * n * n * n;
            x.push_back(flops);
            y.push_back((overhead + flops / rate) * (i % 2 == 0 ? 1.01 : 0.99));
        }
        const AffineFit f = detail::fit_overhead_and_rate(x, y);
        CHECK_THAT(f.rate_per_second, Catch::Matchers::WithinRel(rate, 0.02));
    }
    SECTION("degenerate input is refused") {
        CHECK_THROWS(detail::fit_overhead_and_rate({1.0}, {1.0}));
        CHECK_THROWS(detail::fit_overhead_and_rate({1.0, 2.0}, {2.0, 1.0}));
    }
    SECTION("cache step of a ramp") {
        std::vector<BandwidthPoint> ramp;
        for (double b = 1 << 20; b <= 1 << 30; b *= 2) ramp.push_back({b, b <= 32e6 ? 10e12 : 4e12});
        const double step = detail::find_cache_step(ramp, 50e6);
        CHECK(step > 16.7e6);  // last cache point is 2^24, first DRAM point 2^25
        CHECK(step < 33.6e6);
        std::vector<BandwidthPoint> flat = {{1e6, 4e12}, {1e7, 4e12}, {1e8, 4e12}};
        CHECK(detail::find_cache_step(flat, 50e6) < 0.0);
    }
}

TEST_CASE("the committed H200 profile loads, validates and has its headline figures", "[calibration]") {
    const fs::path p = fs::path(ROOFSIM_SOURCE_DIR) / "data/calibrations/h200-sxm.json";
    const Calibration c = load_calibration(p);
    CHECK(c.device.gpu_key == "h200-sxm");
    CHECK(c.device.sm_count == 132);
    REQUIRE(bandwidth_ceiling(c, MemoryLevel::dram).has_value());
    CHECK(bandwidth_ceiling(c, MemoryLevel::dram)->value() > 4.0e12);
    REQUIRE(compute_ceiling(c, ComputeUnit::bf16_tensor).has_value());
    CHECK(compute_ceiling(c, ComputeUnit::bf16_tensor)->value() > 700e12);
    CHECK(launch_latency(c).has_value());
    CHECK(is_missing(c, "nccl"));
    CHECK(provenance(c).rfind("measured on NVIDIA H200, 2026-11-30", 0) == 0);
}

TEST_CASE("a method text splits at its numbers and comes back whole", "[calibration]") {
    for (const std::string text : {"cublasGemmEx NN, bf16 in/out, 200 sets (to span 2 x L2), median of 5 samples", "no numbers",
                                   "07 and 1234567890 stay whole, 0 and 12 do not", "", "3"}) {
        const detail::MethodTemplate t = detail::split_method(text);
        nlohmann::json doc = {{"m", {{"method", text}}}};
        detail::factor_methods(doc);
        CHECK(doc.at("methods").size() == 1);
        CHECK(detail::expand_methods(doc, "test").at("m").at("method") == text);
        INFO(text << " -> " << t.text);
        CHECK(t.values.size() == static_cast<std::size_t>(std::count(t.text.begin(), t.text.end(), '{')));
    }
    CHECK(detail::split_method("07 and 1234567890, 0 and 12").text == "07 and 1234567890, {} and {}");
    CHECK(detail::split_method("bf16 x 200").values == std::vector<std::int64_t>{16, 200});
    CHECK_THROWS_AS(detail::split_method("a {brace}"), std::invalid_argument);
    // alike methods share one template
    nlohmann::json two = {{"a", {{"method", "200 calls, 4 replays"}}}, {"b", {{"method", "8 calls, 1 replays"}}}};
    detail::factor_methods(two);
    CHECK(two.at("methods") == nlohmann::json::array({"{} calls, {} replays"}));
    CHECK(two.at("b").at("method") == nlohmann::json::array({0, 8, 1}));
}
