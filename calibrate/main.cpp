// roofsim-calibrate: runs the probes on the GPU in hand and writes a calibration profile.
// Every probe runs inside its own try/catch: a failed, unsupported or timed-out probe is reported,
// listed in the profile's "missing" array, and the other probes still run. The output path is checked
// before the GPU is touched. SIGINT or SIGTERM stops the run after the probe in progress: what was
// measured is written as a partial profile and the exit code is 128 + the signal (130 for SIGINT);
// a second signal exits at once.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "assemble.hpp"
#include "probe.hpp"
#include <roofsim/profile/calibration_json.hpp>
#include <roofsim/report/atomic_write.hpp>
#if __has_include("roofsim/gpu.hpp")
#include <roofsim/gpu.hpp>
#define ROOFSIM_CALIBRATE_HAVE_GPU_TABLE 1
#endif

namespace roofsim::calib {

void ProbeContext::log(const std::string& line) const {
    if (verbose) std::printf("        %s\n", line.c_str());
    std::fflush(stdout);
}

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// The signal that asked the run to stop (0: none): set by on_stop_signal, read between probes and by
/// the watchdog. Lock-free, so the handler may store to it.
std::atomic<int> stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

/// SIGINT / SIGTERM: the first is remembered (the run stops after the probe in progress); a second
/// exits at once. Async-signal-safe: an atomic store or _Exit, no I/O.
void on_stop_signal(int sig) {
    if (stop_signal.exchange(sig) != 0) std::_Exit(128 + sig);
}

void install_stop_handlers() {
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
}

std::string signal_name(int sig) {
    if (sig == SIGINT) return "SIGINT";
    if (sig == SIGTERM) return "SIGTERM";
    return "signal " + std::to_string(sig);
}

/// The keys of the probes from `from` on.
std::vector<std::string> keys_from(const std::vector<const Probe*>& todo, std::size_t from) {
    std::vector<std::string> keys;
    for (std::size_t i = from; i < todo.size(); ++i) keys.push_back(todo[i]->key);
    return keys;
}

/// Whether a profile can be written to `path` (a file, or with `directory` the directory its default
/// name goes in); where not, says why, naming the path.
bool output_writable(const std::filesystem::path& path, bool directory = false) {
    try {
        if (directory) check_writable_directory(path);
        else check_writable_file(path);
        return true;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "roofsim-calibrate: cannot write the profile: %s (nothing was measured)\n", e.what());
        return false;
    }
}

std::string sanitize(std::string s) {
    for (char& ch : s) ch = std::isalnum(static_cast<unsigned char>(ch)) ? static_cast<char>(std::tolower(ch)) : '-';
    return s;
}

std::string fmt_s(double s) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f s", s);
    return b;
}

}  // namespace
}  // namespace roofsim::calib

int main(int argc, char** argv) {
    using namespace roofsim;
    using namespace roofsim::calib;
    CLI::App app{"roofsim-calibrate: measure this GPU's bandwidth and compute ceilings and efficiency curves"};
    std::string output;
    std::vector<std::string> only;
    bool quick = false, list = false, verbose = true, quiet = false;
    int device = 0;
    std::string gpu_key;
    double timeout_scale = 4.0;
    app.add_option("-o,--output", output, "profile to write (default: <gpu-key or name>.json in the current directory)");
    app.add_flag("--quick", quick, "fewer sizes and samples (under 30 s on an H200)");
    app.add_option("--only", only, "run only these probes (comma-separated keys; see --list)")->delimiter(',');
    app.add_flag("--list", list, "list the probes and exit");
    app.add_option("-d,--device", device, "CUDA device ordinal");
    app.add_option("--gpu-key", gpu_key, "datasheet key to record (e.g. h200-sxm); looked up from the device name if empty");
    app.add_option("--timeout-scale", timeout_scale, "a probe times out after this many times its estimate + 20 s");
    app.add_flag("-q,--quiet", quiet, "print only one line per probe");
    CLI11_PARSE(app, argc, argv);
    verbose = !quiet;

    const auto probes = make_probes();
    if (list) {
        for (const auto& p : probes) std::printf("%-12s %s\n", p.key.c_str(), p.description.c_str());
        return 0;
    }
    for (const auto& k : only) {
        if (std::none_of(probes.begin(), probes.end(), [&](const Probe& p) { return p.key == k; })) {
            std::fprintf(stderr, "roofsim-calibrate: unknown probe key '%s' (see --list)\n", k.c_str());
            return 2;
        }
    }
    // before the GPU: where the profile goes (its file name waits for the device's name by default)
    if (output.empty() ? !output_writable(".", true) : !output_writable(output)) return 2;
    install_stop_handlers();

    DeviceInfo dev;
    try {
        dev = query_device(device);
    } catch (const std::exception& e) {
        std::fprintf(stderr,
                     "roofsim-calibrate: no usable GPU: %s\n"
                     "  (needs an NVIDIA GPU, its driver, and a CUDA runtime the driver supports; nothing was measured "
                     "and no profile was written)\n",
                     e.what());
        return 3;
    }

    Calibration cal;
    fill_identity(cal.device, dev);
    if (gpu_key.empty()) {
#ifdef ROOFSIM_CALIBRATE_HAVE_GPU_TABLE
        if (const auto* spec = find_gpu_by_name(dev.name)) gpu_key = spec->key;
#endif
    }
    cal.device.gpu_key = gpu_key;
    {
        std::ostringstream cmd;
        cmd << "roofsim-calibrate";
        for (int i = 1; i < argc; ++i) cmd << ' ' << argv[i];
        cal.device.command_line = cmd.str();
    }
    if (output.empty()) {
        output = (gpu_key.empty() ? sanitize(dev.name) : gpu_key) + ".json";
        if (!output_writable(output)) return 2;
    }

    std::printf("roofsim-calibrate %s on %s (cc %d.%d, %d SMs, %.0f MiB L2, %.1f GiB), %s mode -> %s\n", tool_version,
                dev.name.c_str(), dev.cc_major, dev.cc_minor, dev.sm_count, static_cast<double>(dev.l2_bytes) / 1048576.0,
                static_cast<double>(dev.memory_bytes) / 1073741824.0, quick ? "quick" : "full", output.c_str());

    // Selected probes and their estimates (for the time-left figure).
    std::vector<const Probe*> todo;
    for (const auto& p : probes) {
        const bool selected = only.empty() || std::find(only.begin(), only.end(), p.key) != only.end();
        if (selected) todo.push_back(&p);
        else cal.missing.push_back({p.key, MissingReason::skipped, "not selected by --only"});
    }
    double est_left = 0.0;
    for (const auto* p : todo) est_left += quick ? p->estimate_quick_s : p->estimate_full_s;

    // Hard watchdog: if a probe overruns its cooperative deadline by 60 s (a hung kernel), save what
    // was measured so far with the probe listed as timed out (the probes after it as not run), and
    // exit. It also says, once, that a stop signal came.
    std::mutex mu;
    Calibration snapshot = cal;
    std::string running;
    std::size_t running_index = 0;
    Clock::time_point hard_deadline = Clock::time_point::max();
    std::atomic<bool> done{false};
    std::condition_variable cv;
    std::thread watchdog([&] {
        std::unique_lock<std::mutex> lk(mu);
        bool told_stop = false;
        while (!done) {
            cv.wait_for(lk, std::chrono::seconds(1));
            if (const int sig = stop_signal.load(); sig != 0 && !told_stop && !done) {
                told_stop = true;
                std::fprintf(stderr, "roofsim-calibrate: %s: stopping after the probe in progress; what was measured will be "
                             "written as a partial profile (%s again exits at once)\n", signal_name(sig).c_str(),
                             signal_name(sig).c_str());
                std::fflush(stderr);
            }
            if (!done && Clock::now() > hard_deadline) {
                std::fprintf(stderr, "roofsim-calibrate: probe '%s' did not finish (hung?); writing the figures measured so far\n",
                             running.c_str());
                Calibration c = snapshot;
                c.missing.push_back({running, MissingReason::timed_out, "probe did not return; the process was stopped"});
                try {
                    const Calibration written = save_stopped_profile(
                        std::move(c), keys_from(todo, running_index + 1),
                        "the calibration stopped at probe '" + running + "', which did not return", output);
                    std::fprintf(stderr, "roofsim-calibrate: %s written to %s\n",
                                 written.partial ? "partial profile" : "profile", output.c_str());
                } catch (const std::exception& e) {
                    std::fprintf(stderr, "roofsim-calibrate: could not write the partial profile: %s\n", e.what());
                }
                std::fflush(stderr);
                std::_Exit(4);
            }
        }
    });

    const auto t_start = Clock::now();
    double spent_est = 0.0, spent_real = 0.0;
    int failures = 0;
    std::size_t stopped_at = todo.size();  // the first probe not run after a stop signal
    for (std::size_t i = 0; i < todo.size(); ++i) {
        if (stop_signal.load() != 0) {
            stopped_at = i;
            break;
        }
        const Probe& p = *todo[i];
        const double est = quick ? p.estimate_quick_s : p.estimate_full_s;
        // time left: remaining estimates scaled by how the estimates have held so far
        const double scale = spent_est > 0.5 ? spent_real / spent_est : 1.0;
        std::printf("[%zu/%zu] %-12s %s (est. %s, ~%s left)\n", i + 1, todo.size(), p.key.c_str(), p.description.c_str(),
                    fmt_s(est * scale).c_str(), fmt_s(est_left * scale).c_str());
        std::fflush(stdout);
        const auto t0 = Clock::now();
        const std::string why = p.unsupported(dev);
        Calibration part;
        if (!why.empty()) {
            const MissingReason r = why.rfind("not built", 0) == 0 ? MissingReason::not_built : MissingReason::unsupported;
            part.missing.push_back({p.key, r, why});
            std::printf("        skipped: %s\n", why.c_str());
        } else {
            const double soft = est * timeout_scale + 20.0;
            {
                std::lock_guard<std::mutex> lk(mu);
                running = p.key;
                running_index = i;
                hard_deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(soft + 60.0));
            }
            ProbeContext ctx{dev, quick, part,
                             t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(soft)), verbose};
            try {
                p.run(ctx);
            } catch (const ProbeTimeout& e) {
                ++failures;
                part.missing.push_back({p.key, MissingReason::timed_out,
                                        std::string(e.what()) + " (after " + fmt_s(since(t0)) + "; partial results kept)"});
                std::printf("        TIMED OUT: %s\n", e.what());
            } catch (const std::exception& e) {
                ++failures;
                part.missing.push_back({p.key, MissingReason::failed, e.what()});
                std::printf("        FAILED: %s\n", e.what());
                // A sticky CUDA error poisons the context: later probes will fail and say so.
            }
        }
        const double took = since(t0);
        spent_est += est;
        spent_real += took;
        est_left -= est;
        std::printf("        done in %s\n", fmt_s(took).c_str());
        std::lock_guard<std::mutex> lk(mu);
        hard_deadline = Clock::time_point::max();
        merge(cal, std::move(part));
        snapshot = cal;
    }
    {
        std::lock_guard<std::mutex> lk(mu);
        done = true;
    }
    cv.notify_all();
    watchdog.join();

    const int sig = stop_signal.load();
    if (sig != 0 && stopped_at == 0) {
        std::fprintf(stderr, "roofsim-calibrate: %s before the first probe: nothing was measured and no profile was written\n",
                     signal_name(sig).c_str());
        return 128 + sig;
    }
    try {
        // a stop signal: the probes left listed as not run, the profile partial where any is left
        cal = stopped_profile(std::move(cal), keys_from(todo, stopped_at),
                              sig != 0 ? "the calibration was interrupted (" + signal_name(sig) + ") before this probe ran" : "");
        save_calibration(cal, output);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "roofsim-calibrate: could not write %s: %s\n", output.c_str(), e.what());
        return 1;
    }
    if (cal.partial) {
        std::fprintf(stderr, "roofsim-calibrate: %s: partial profile written to %s (not run: %s); roofsim refuses it "
                     "unless given --accept-partial\n", signal_name(sig).c_str(), output.c_str(), probes_not_run_text(cal).c_str());
    }
    std::printf("wrote %s in %s (%s)\n", output.c_str(), fmt_s(since(t_start)).c_str(), provenance(cal).c_str());
    if (const auto bw = bandwidth_ceiling(cal, MemoryLevel::dram)) std::printf("  DRAM bandwidth ceiling: %.3f TB/s\n", bw->value() / 1e12);
    if (const auto f = compute_ceiling(cal, ComputeUnit::fp32)) std::printf("  fp32 ceiling: %.1f TFLOP/s\n", f->value() / 1e12);
    if (const auto f = compute_ceiling(cal, ComputeUnit::bf16_tensor)) std::printf("  bf16 tensor ceiling: %.1f TFLOP/s\n", f->value() / 1e12);
    if (!cal.missing.empty()) {
        std::printf("  missing figures:\n");
        for (const auto& m : cal.missing)
            std::printf("    %-28s %-11s %s\n", m.figure.c_str(), std::string(to_string(m.reason)).c_str(), m.detail.c_str());
    }
    if (sig != 0) return 128 + sig;
    return failures == 0 ? 0 : 5;
}
