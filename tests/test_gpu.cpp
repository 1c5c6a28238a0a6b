#include "catch.hpp"

#include <roofsim/gpu.hpp>

#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

using namespace roofsim;

namespace {
const std::filesystem::path data_dir = std::filesystem::path(ROOFSIM_SOURCE_DIR) / "data" / "gpus";

nlohmann::json a100_file() { return detail::read_json_file(data_dir / "a100-40gb-sxm.json"); }

std::string error_of(const nlohmann::json& j) {
    try {
        (void)gpu_spec_from_json(j, "test.json");
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return "no error";
}

bool has_source(const GpuSpec& g, const std::string& source) {
    return !source.empty() && (source.rfind("derived: ", 0) == 0 || g.sources.count(source) == 1);
}
}  // namespace

TEST_CASE("the built-in GPUs cover the issue's list", "[gpu]") {
    std::set<std::string> keys;
    for (const auto& g : builtin_gpus()) keys.insert(g.key);
    for (const char* k : {"rtx-3090", "rtx-a6000", "a40", "a10", "a100-40gb-pcie", "a100-40gb-sxm",
                          "a100-80gb-pcie", "a100-80gb-sxm", "h100-pcie", "h100-sxm", "h200-sxm"}) {
        INFO(k);
        CHECK(keys.count(k) == 1);
    }
}

TEST_CASE("every preset has every field, each with a source", "[gpu]") {
    for (const auto& g : builtin_gpus()) {
        INFO(g.key);
        CHECK(!g.name.empty());
        CHECK(!g.nvidia_smi_names.empty());
        CHECK(has_source(g, g.architecture.source));
        CHECK(has_source(g, g.chip.source));
        CHECK(has_source(g, g.compute_capability.source));
        CHECK(has_source(g, g.form_factor.source));
        CHECK(has_source(g, g.sm_count.source));
        CHECK(has_source(g, g.boost_clock.source));
        CHECK(has_source(g, g.memory_type.source));
        CHECK(has_source(g, g.memory_size.source));
        CHECK(has_source(g, g.memory_bandwidth.source));
        CHECK(has_source(g, g.l2_size.source));
        CHECK(has_source(g, g.tdp_watts.source));
        CHECK(has_source(g, g.pcie_generation.source));
        CHECK(has_source(g, g.pcie_bandwidth.source));
        CHECK(g.peak(ComputeUnit::fp32).has_value());
        CHECK(g.peak(ComputeUnit::fp64).has_value());
        for (const auto& [unit, p] : g.peak_compute) {
            INFO(to_string(unit));
            CHECK(p.value.value() > 0);
            CHECK(has_source(g, p.source));
        }
        CHECK(g.nvlink_generation.has_value() == g.nvlink_bandwidth.has_value());
        // Plausibility: rates, sizes and clocks in the range of real GPUs (catches unit slips).
        CHECK(g.boost_clock.value.value() > 1e9);
        CHECK(g.boost_clock.value.value() < 3e9);
        CHECK(g.memory_bandwidth.value.value() > 5e11);
        CHECK(g.memory_bandwidth.value.value() < 1e13);
        CHECK(g.memory_size.value.value() >= 16.0 * (1ull << 30));
        CHECK(g.l2_size.value.value() >= 4.0 * (1 << 20));
        if (auto tensor = g.peak(ComputeUnit::fp16_tensor)) CHECK(*tensor > *g.peak(ComputeUnit::fp32));
    }
}

TEST_CASE("Ampere and Hopper parts have the tensor formats PyTorch uses", "[gpu]") {
    for (const auto& g : builtin_gpus()) {
        if (g.architecture.value != "ampere" && g.architecture.value != "hopper") continue;
        INFO(g.key);
        CHECK(g.peak(ComputeUnit::tf32_tensor).has_value());
        CHECK(g.peak(ComputeUnit::bf16_tensor).has_value());
        CHECK(g.peak(ComputeUnit::fp16_tensor).has_value());
        CHECK(g.peak(ComputeUnit::fp8_tensor).has_value() == (g.architecture.value == "hopper"));
    }
}

// Spot check against datasheet figures typed here from the vendors' documents (not from data/):
// NVIDIA A100 whitepaper Table 1 / A100 datasheet, GA102 whitepaper Appendix A, H100 datasheet.
TEST_CASE("spot check against datasheet figures", "[gpu]") {
    using Catch::Approx;
    CHECK(to_tflops_per_second(*gpu_or_throw("a100-40gb-sxm").peak(ComputeUnit::tf32_tensor)) == Approx(156));
    CHECK(to_gb_per_second(gpu_or_throw("a100-80gb-sxm").memory_bandwidth.value) == Approx(2039));
    CHECK(to_tflops_per_second(*gpu_or_throw("rtx-3090").peak(ComputeUnit::fp16_tensor)) == Approx(71));
    CHECK(to_tflops_per_second(*gpu_or_throw("rtx-3090").peak(ComputeUnit::fp16_fp16acc_tensor)) == Approx(142));
    CHECK(to_tflops_per_second(*gpu_or_throw("rtx-a6000").peak(ComputeUnit::bf16_tensor)) == Approx(154.8));
    CHECK(gpu_or_throw("a100-40gb-sxm").sm_count.value == 108);
    CHECK(to_tflops_per_second(*gpu_or_throw("h100-sxm").peak(ComputeUnit::bf16_tensor)) == Approx(989.5).epsilon(0.01));
    CHECK(to_gb_per_second(gpu_or_throw("h200-sxm").memory_bandwidth.value) == Approx(4800));
}

TEST_CASE("lookup by key, by nvidia-smi name, and close matches", "[gpu]") {
    CHECK(find_gpu("rtx-a6000") != nullptr);
    CHECK(find_gpu("no-such-gpu") == nullptr);
    REQUIRE(find_gpu_by_name("NVIDIA H200") != nullptr);
    CHECK(find_gpu_by_name("NVIDIA H200")->key == "h200-sxm");
    REQUIRE(find_gpu_by_name("nvidia a100-sxm4-80gb") != nullptr);  // case and punctuation ignored
    CHECK(find_gpu_by_name("nvidia a100-sxm4-80gb")->key == "a100-80gb-sxm");
    CHECK(find_gpu_by_name("NVIDIA GeForce RTX 3090")->key == "rtx-3090");
    CHECK(&gpu_or_throw("NVIDIA RTX A6000") == find_gpu("rtx-a6000"));

    SECTION("every nvidia-smi name maps back to its own GPU") {
        for (const auto& g : builtin_gpus()) {
            for (const auto& n : g.nvidia_smi_names) {
                INFO(n);
                REQUIRE(find_gpu_by_name(n) != nullptr);
                CHECK(find_gpu_by_name(n)->key == g.key);
            }
        }
    }
    SECTION("a mistyped key lists close matches") {
        auto close = close_gpu_keys("a100-40gb-smx");
        REQUIRE(!close.empty());
        CHECK(close.front() == "a100-40gb-sxm");
        try {
            (void)gpu_or_throw("rtx-a600");
            FAIL("no exception");
        } catch (const std::invalid_argument& e) {
            CHECK(std::string(e.what()).find("rtx-a6000") != std::string::npos);
        }
    }
}

TEST_CASE("GPU spec JSON round-trips", "[gpu][json]") {
    for (const auto& g : builtin_gpus()) {
        INFO(g.key);
        const GpuSpec again = gpu_spec_from_json(to_json(g), "round-trip");
        CHECK(to_json(again) == to_json(g));
        CHECK(again.peak_compute.size() == g.peak_compute.size());
        CHECK(again.memory_bandwidth.value.value() == Catch::Approx(g.memory_bandwidth.value.value()));
        CHECK(again.sources == g.sources);
    }
}

TEST_CASE("bad GPU spec files give errors that name the field", "[gpu][json]") {
    auto j = a100_file();
    CHECK(error_of(j) == "no error");

    SECTION("missing required field") {
        j.erase("sm_count");
        CHECK(error_of(j) == "test.json: /sm_count: missing");
    }
    SECTION("wrong type") {
        j["peak_tflops"]["fp32"]["value"] = "fast";
        CHECK(error_of(j).find("/peak_tflops/fp32/value: expected a number") != std::string::npos);
    }
    SECTION("negative rate") {
        j["memory_bandwidth_gb_per_s"]["value"] = -1;
        CHECK(error_of(j).find("/memory_bandwidth_gb_per_s/value: must be positive") != std::string::npos);
    }
    SECTION("source that resolves to nothing") {
        j["l2_cache_mib"]["source"] = "my-memory";
        CHECK(error_of(j).find("/l2_cache_mib/source") != std::string::npos);
    }
    SECTION("unknown compute unit") {
        j["peak_tflops"]["fp4-tensor"] = {{"value", 1.0}, {"source", "derived: test"}};
        CHECK(error_of(j).find("/peak_tflops/fp4-tensor") != std::string::npos);
    }
    SECTION("fp32 peak is required") {
        j["peak_tflops"].erase("fp32");
        CHECK(error_of(j).find("/peak_tflops/fp32: missing") != std::string::npos);
    }
    SECTION("half an NVLink description") {
        j.erase("nvlink_generation");
        CHECK(error_of(j).find("nvlink_generation and nvlink_bidirectional_gb_per_s go together") != std::string::npos);
    }
    SECTION("future schema") {
        j["schema_version"] = 2;
        CHECK(error_of(j).find("/schema_version: unsupported version 2") != std::string::npos);
    }
    SECTION("not JSON at all") {
        CHECK_THROWS_WITH(detail::parse_json_text("{\"key\": ", "broken.json"),
                          Catch::Matchers::StartsWith("broken.json: not valid JSON"));
    }
}

TEST_CASE("a path that is not a readable JSON file is an error that says so", "[gpu][json]") {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("roofsim-json-file-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    CHECK_THROWS_WITH(detail::read_json_file(dir), dir.string() + ": is a directory, not a file");
    CHECK_THROWS_WITH(detail::read_json_file(dir / "absent.json"), (dir / "absent.json").string() + ": cannot open for reading: No such file or directory");
    const fs::path fifo = dir / "pipe.json";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THROWS_WITH(detail::read_json_file(fifo), fifo.string() + ": is a FIFO (named pipe), not a file");  // not a blocked read
    const fs::path huge = dir / "huge.json";
    std::ofstream(huge) << "{\"seconds\": 1e400}";
    // JSON allows the number, a double cannot hold it: the file is named, not a bare library error
    CHECK_THROWS_WITH(detail::read_json_file(huge), Catch::Matchers::StartsWith("huge.json: not readable JSON: ") &&
                                                     Catch::Matchers::Contains("1e400"));
    fs::remove_all(dir);
}
