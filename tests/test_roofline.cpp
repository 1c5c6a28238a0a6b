#include "catch.hpp"

#include <roofsim/roofline.hpp>

#include <cmath>
#include <string>
#include <vector>

using namespace roofsim;
using Catch::Approx;

namespace {
std::vector<std::string> all_keys() {
    std::vector<std::string> keys;
    for (const auto& g : builtin_gpus()) keys.push_back(g.key);
    return keys;
}

KernelWork work(double flops, double bytes, ComputeUnit unit) {
    KernelWork k;
    k.flops = Flops(flops);
    k.dram_bytes = Bytes(bytes);
    k.unit = unit;
    return k;
}
}  // namespace

TEST_CASE("roofline time is the largest of the ceiling times", "[roofline]") {
    const std::string key = GENERATE(from_range(all_keys()));
    const Ceilings c = ceilings_from_spec(gpu_or_throw(key));
    const double flops = GENERATE(0.0, 1e6, 3.7e9, 1e13);
    const double bytes = GENERATE(0.0, 4096.0, 1e8, 5e10);
    for (const auto& [unit, rate] : c.compute) {
        INFO(key << " " << to_string(unit) << " flops=" << flops << " bytes=" << bytes);
        const auto k = work(flops, bytes, unit);
        const RooflineTime t = roofline_time(k, c);
        const Seconds compute_bound = k.flops / rate.value;
        const Seconds memory_bound = k.dram_bytes / c.rate(MemoryLevel::dram);
        CHECK(t.time >= max(compute_bound, memory_bound));
        CHECK(t.time.value() == Approx(max(compute_bound, memory_bound).value()));
        CHECK(t.bound == (compute_bound >= memory_bound ? Bound::compute : Bound::dram));
    }
}

TEST_CASE("roofline time is monotonic in FLOPs and bytes", "[roofline]") {
    const std::string key = GENERATE(from_range(all_keys()));
    const Ceilings c = ceilings_from_spec(gpu_or_throw(key));
    for (const auto& [unit, rate] : c.compute) {
        double previous = 0;
        for (double f = 1e3; f < 1e15; f *= 3.3) {
            const double t = roofline_time(work(f, 1e9, unit), c).time.value();
            CHECK(t >= previous);
            previous = t;
        }
        previous = 0;
        for (double b = 1e3; b < 1e12; b *= 3.3) {
            const double t = roofline_time(work(1e11, b, unit), c).time.value();
            CHECK(t >= previous);
            previous = t;
        }
    }
}

TEST_CASE("compute and memory bounds cross at the ridge point", "[roofline]") {
    const std::string key = GENERATE(from_range(all_keys()));
    const Ceilings c = ceilings_from_spec(gpu_or_throw(key));
    for (const auto& [unit, rate] : c.compute) {
        INFO(key << " " << to_string(unit));
        const double ridge = ridge_point(unit, MemoryLevel::dram, c).value();
        const double bytes = 1e9;
        const RooflineTime at = roofline_time(work(ridge * bytes, bytes, unit), c);
        CHECK(at.compute_time.value() == Approx(at.dram_time.value()));
        CHECK(roofline_time(work(ridge * bytes * 0.99, bytes, unit), c).bound == Bound::dram);
        CHECK(roofline_time(work(ridge * bytes * 1.01, bytes, unit), c).bound == Bound::compute);
        // attainable = min(P, I * BW): below the ridge the slope, above it the flat roof
        CHECK(attainable(FlopsPerByte(ridge / 2), unit, MemoryLevel::dram, c).value() == Approx(rate.value.value() / 2));
        CHECK(attainable(FlopsPerByte(ridge * 2), unit, MemoryLevel::dram, c).value() == Approx(rate.value.value()));
    }
}

TEST_CASE("L2 and latency ceilings", "[roofline]") {
    Ceilings c = ceilings_from_spec(gpu_or_throw("a100-80gb-sxm"));
    REQUIRE(c.has(MemoryLevel::l2));  // the A100 whitepaper states L2 bytes per clock
    auto k = work(1e6, 1e6, ComputeUnit::fp32);
    k.l2_bytes = Bytes(1e9);
    const RooflineTime t = roofline_time(k, c);
    CHECK(t.bound == Bound::l2);
    CHECK(t.time.value() == Approx((Bytes(1e9) / c.rate(MemoryLevel::l2)).value()));

    c.launch_latency = Sourced<Seconds>{units::microseconds(2), "test"};
    const RooflineTime tiny = roofline_time(work(10, 10, ComputeUnit::fp32), c);
    CHECK(tiny.bound == Bound::latency);
    CHECK(tiny.time.value() == Approx(2e-6));
}

TEST_CASE("missing ceilings are errors that name the GPU", "[roofline]") {
    const Ceilings c = ceilings_from_spec(gpu_or_throw("rtx-3090"));
    CHECK_THROWS_WITH(roofline_time(work(1, 1, ComputeUnit::fp8_tensor), c),
                      Catch::Matchers::Contains("rtx-3090 has no fp8-tensor ceiling"));
    auto k = work(1, 1, ComputeUnit::fp32);
    k.l2_bytes = Bytes(1);
    CHECK_THROWS_WITH(roofline_time(k, c), Catch::Matchers::Contains("no l2 bandwidth"));
    CHECK_THROWS_AS(roofline_time(work(-1, 1, ComputeUnit::fp32), c), std::invalid_argument);
}

TEST_CASE("datasheet ceilings say where they came from", "[roofline]") {
    const Ceilings c = ceilings_from_spec(gpu_or_throw("h200-sxm"));
    CHECK(c.origin == "datasheet");
    for (const auto& [u, s] : c.compute) CHECK(s.source.rfind("datasheet: ", 0) == 0);
    CHECK(c.rate(ComputeUnit::bf16_tensor) == *gpu_or_throw("h200-sxm").peak(ComputeUnit::bf16_tensor));
}

TEST_CASE("calibrated ceilings replace datasheet ones, and only those measured", "[roofline][calibration]") {
    const GpuSpec& spec = gpu_or_throw("h200-sxm");
    Calibration cal;
    cal.device.name = "NVIDIA H200";
    cal.device.gpu_key = "h200-sxm";
    cal.device.date_utc = "2026-11-29T12:00:00Z";
    cal.device.tool_version = "0.1.0";
    cal.bandwidth[MemoryLevel::dram][AccessPattern::copy] = Measurement{4.3e12, 4.2e12, 4.4e12, 20, "copy"};
    cal.bandwidth[MemoryLevel::dram][AccessPattern::read] = Measurement{4.6e12, 4.5e12, 4.7e12, 20, "read"};
    ComputeCeiling fp32;
    fp32.flops_per_second = Measurement{6.3e13, 6.2e13, 6.4e13, 10, "FFMA"};
    fp32.instruction = "FFMA";
    cal.probe_ceilings[ComputeUnit::fp32] = fp32;
    cal.launch_interval_seconds = Measurement{2.1e-6, 2.0e-6, 2.5e-6, 100, "back-to-back"};

    const Ceilings c = ceilings_from_calibration(cal, spec);
    CHECK(c.rate(MemoryLevel::dram).value() == Approx(4.6e12));  // best access pattern
    CHECK(c.rate(ComputeUnit::fp32).value() == Approx(6.3e13));
    CHECK(c.compute.at(ComputeUnit::fp32).source.find("measured on NVIDIA H200, 2026-11-29") != std::string::npos);
    CHECK(c.rate(ComputeUnit::bf16_tensor) == *spec.peak(ComputeUnit::bf16_tensor));  // not measured: datasheet
    CHECK(c.compute.at(ComputeUnit::bf16_tensor).source.rfind("datasheet", 0) == 0);
    REQUIRE(c.launch_latency.has_value());
    CHECK(c.launch_latency->value.value() == Approx(2.1e-6));
    CHECK(c.origin.find("datasheet where not measured") != std::string::npos);
}
