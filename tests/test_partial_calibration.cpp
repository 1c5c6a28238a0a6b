// A partial calibration profile (roofsim-calibrate stopped before all its probes ran): how
// roofsim-calibrate assembles and writes it (calibrate/assemble.hpp, GPU-free), how the loader
// refuses or accepts it, and the check of the output path made before any probe runs.
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "assemble.hpp"
#include "catch.hpp"
#include "thrown.hpp"
#include <roofsim/profile/calibration_json.hpp>
#include <roofsim/report/atomic_write.hpp>

using namespace roofsim;
namespace fs = std::filesystem;

namespace {

const fs::path interrupted = fs::path(ROOFSIM_SOURCE_DIR) / "tests/data/calibration-interrupted.json";
const std::vector<std::string> interrupted_not_run = {"compute",    "tensor_mma", "cublas_peak",
                                                      "gemm_sweep", "conv_sweep", "nccl"};

/// A fresh directory under the system's temporary one, removed at the end of its scope.
struct TempDir {
    fs::path path;
    TempDir() {
        std::random_device rng;
        path = fs::temp_directory_path() / ("roofsim-partial-" + std::to_string(rng()));
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    [[nodiscard]] std::vector<std::string> names() const {
        std::vector<std::string> out;
        for (const auto& e : fs::directory_iterator(path)) out.push_back(e.path().filename().string());
        return out;
    }
};

Measurement meas(double median) { return Measurement{median, median * 0.98, median * 1.01, 10, "test"}; }

/// What the probes before the interruption measured, each probe's part merged as the tool merges it.
Calibration measured_before_stop() {
    Calibration c;
    c.device.name = "NVIDIA H200";
    c.device.gpu_key = "h200-sxm";
    c.device.compute_capability_major = 9;
    c.device.sm_count = 132;
    Calibration launch;
    launch.launch_latency_seconds = meas(4e-6);
    launch.launch_interval_seconds = meas(2e-6);
    calib::merge(c, std::move(launch));
    Calibration bandwidth;
    bandwidth.bandwidth[MemoryLevel::dram][AccessPattern::copy] = meas(4.2e12);
    calib::merge(c, std::move(bandwidth));
    Calibration gemm;
    gemm.library_ceilings[ComputeUnit::bf16_tensor] = ComputeCeiling{meas(800e12), "cublasGemmEx", {}, {}};
    GemmRecord g;
    g.m = g.n = g.k = 4096;
    g.seconds = meas(0.25e-3);
    g.flops_per_second = 400e12;
    g.efficiency = 1.0;  // set against the unit's best once the profile is assembled
    gemm.gemm_sweep.push_back(g);
    gemm.missing.push_back({"library/fp8-tensor", MissingReason::unsupported, "no fp8 on this device"});
    calib::merge(c, std::move(gemm));
    return c;
}

}  // namespace

TEST_CASE("an interrupted calibration's profile is refused unless accepted", "[calibration][partial]") {
    SECTION("refused: the error names the file and the probes not run") {
        const std::string error = thrown_by([] { (void)load_calibration(interrupted); });
        CHECK(has(error, "calibration-interrupted.json: a partial calibration"));
        CHECK(has(error, "compute, tensor_mma, cublas_peak, gemm_sweep, conv_sweep, nccl"));
    }
    SECTION("accepted: the figures as in the file, the missing ones absent") {
        const Calibration c = load_calibration(interrupted, PartialProfile::accept);
        CHECK(c.partial);
        CHECK(c.device.gpu_key == "a100-80gb-sxm");
        const Measurement& copy = c.bandwidth.at(MemoryLevel::dram).at(AccessPattern::copy);
        CHECK(copy.median == 1.7e12);
        CHECK(copy.min == 1.69e12);
        CHECK(copy.max == 1.72e12);
        CHECK(copy.samples == 10);
        REQUIRE(launch_latency(c).has_value());
        CHECK(launch_latency(c)->value() == 4.1e-6);
        REQUIRE(launch_interval(c).has_value());
        CHECK(launch_interval(c)->value() == 2.2e-6);
        CHECK_FALSE(compute_ceiling(c, ComputeUnit::bf16_tensor).has_value());
        CHECK(c.gemm_sweep.empty());
        CHECK(probes_not_run(c) == interrupted_not_run);
        REQUIRE(c.missing.size() == 7);
        CHECK(c.missing[0].reason == MissingReason::failed);  // a failure before the interruption stays one
        CHECK(has(provenance(c), "(partial; not run: compute, tensor_mma, cublas_peak, gemm_sweep, conv_sweep, nccl)"));
    }
    SECTION("a profile of the probes --only selected is complete: it loads as before") {
        const Calibration c = load_calibration(fs::path(ROOFSIM_SOURCE_DIR) / "tests/data/calibration-partial.json");
        CHECK_FALSE(c.partial);
        CHECK(probes_not_run(c).empty());
        CHECK_FALSE(has(provenance(c), "partial"));
    }
}

TEST_CASE("partial and not-run go together", "[calibration][partial]") {
    Calibration c = load_calibration(interrupted, PartialProfile::accept);
    REQUIRE_NOTHROW(validate(c));
    SECTION("a not-run probe in a complete profile") {
        c.partial = false;
        CHECK(has(thrown_by([&] { validate(c); }), "not-run is listed only by a partial profile"));
    }
    SECTION("a partial profile that names no probe not run") {
        c.missing.resize(1);
        CHECK(has(thrown_by([&] { validate(c); }), "partial: a partial profile lists the probes it did not run"));
    }
    SECTION("the JSON key: written only where true, read as a boolean") {
        nlohmann::json j = to_json(c);
        CHECK(j.at("partial") == true);
        CHECK(calibration_from_json(j, "again.json", PartialProfile::accept).partial);
        j["partial"] = "yes";
        CHECK(has(thrown_by([&] { (void)calibration_from_json(j, "bad.json", PartialProfile::accept); }), "bad.json: /partial"));
        c.partial = false;
        c.missing.resize(1);
        CHECK_FALSE(to_json(c).contains("partial"));
    }
}

TEST_CASE("a stopped calibration writes what it measured as a partial profile", "[calibrate][partial]") {
    const TempDir dir;
    const fs::path out = dir.path / "h200.json";
    const std::string why = "the calibration was interrupted (SIGINT) before this probe ran";
    SECTION("probes left: partial, each listed as not run, the figures measured kept") {
        const Calibration written = calib::save_stopped_profile(measured_before_stop(), {"conv_sweep", "nccl"}, why, out);
        CHECK(written.partial);
        CHECK(dir.names() == std::vector<std::string>{"h200.json"});  // written atomically: no temporary file left
        CHECK(has(thrown_by([&] { (void)load_calibration(out); }), "h200.json: a partial calibration: it stopped before conv_sweep, nccl ran"));
        const Calibration back = load_calibration(out, PartialProfile::accept);
        CHECK(back.partial);
        CHECK(probes_not_run(back) == std::vector<std::string>{"conv_sweep", "nccl"});
        REQUIRE(back.missing.size() == 3);
        CHECK(back.missing[0].figure == "library/fp8-tensor");
        CHECK(back.missing[1].detail == why);
        CHECK(launch_latency(back)->value() == 4e-6);
        CHECK(launch_interval(back)->value() == 2e-6);
        CHECK(bandwidth_of(back, MemoryLevel::dram, AccessPattern::copy)->value() == 4.2e12);
        CHECK(compute_ceiling(back, ComputeUnit::bf16_tensor)->value() == 800e12);
        REQUIRE(back.gemm_sweep.size() == 1);
        CHECK_THAT(back.gemm_sweep[0].efficiency, Catch::Matchers::WithinRel(0.5, 1e-12));  // 400 of the best 800 TFLOP/s
    }
    SECTION("no probe left (the signal came during the last one): a complete profile") {
        const Calibration written = calib::save_stopped_profile(measured_before_stop(), {}, why, out);
        CHECK_FALSE(written.partial);
        const Calibration back = load_calibration(out);
        CHECK_FALSE(back.partial);
        CHECK(back.missing.size() == 1);
    }
    SECTION("an unwritable path: an error naming it, no file") {
        const fs::path nowhere = dir.path / "no-such-dir" / "h200.json";
        CHECK(has(thrown_by([&] { (void)calib::save_stopped_profile(measured_before_stop(), {"nccl"}, why, nowhere); }),
                  nowhere.string()));
        CHECK_FALSE(fs::exists(nowhere));
    }
}

TEST_CASE("the output path is checked before anything is measured", "[calibrate][atomic_write]") {
    const TempDir dir;
    SECTION("a directory that does not exist") {
        const std::string error = thrown_by([] { check_writable_file("/nonexistent/dir/x.json"); });
        CHECK(has(error, "/nonexistent/dir/x.json: the directory /nonexistent/dir does not exist"));
    }
    SECTION("a directory given as the file") {
        CHECK(has(thrown_by([&] { check_writable_file(dir.path); }), dir.path.string() + ": is a directory"));
    }
    SECTION("a link to a directory") {
        fs::create_directory(dir.path / "sub");
        fs::create_directory_symlink(dir.path / "sub", dir.path / "link.json");
        CHECK(has(thrown_by([&] { check_writable_file(dir.path / "link.json"); }), "link.json: is a directory"));
    }
    SECTION("a regular file as the directory") {
        std::ofstream(dir.path / "file") << "x";
        CHECK(has(thrown_by([&] { check_writable_file(dir.path / "file" / "x.json"); }), "file is not a directory"));
    }
    SECTION("a directory that takes no file") {
        CHECK(has(thrown_by([] { check_writable_file("/proc/roofsim-x.json"); }), "/proc/roofsim-x.json: cannot create a file in /proc"));
        CHECK(has(thrown_by([] { check_writable_directory("/proc"); }), "/proc: cannot create a file in /proc"));
    }
    SECTION("a new file, an existing file and a link to one: fine, and left as they were") {
        std::ofstream(dir.path / "old.json") << "old";
        fs::create_symlink(dir.path / "old.json", dir.path / "link.json");
        fs::create_symlink(dir.path / "new-target.json", dir.path / "dangling.json");
        const auto before = dir.names();
        CHECK(thrown_by([&] { check_writable_file(dir.path / "new.json"); }).empty());
        CHECK(thrown_by([&] { check_writable_file(dir.path / "old.json"); }).empty());
        CHECK(thrown_by([&] { check_writable_file(dir.path / "link.json"); }).empty());
        CHECK(thrown_by([&] { check_writable_file(dir.path / "dangling.json"); }).empty());
        CHECK(thrown_by([&] { check_writable_directory(dir.path); }).empty());
        CHECK(dir.names().size() == before.size());
        std::ifstream in(dir.path / "old.json");
        std::stringstream text;
        text << in.rdbuf();
        CHECK(text.str() == "old");
    }
}
