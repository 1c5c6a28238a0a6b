#pragma once
/// Data-parallel validation: DDP training steps that tools/validate/measure_ddp.py measured at a
/// world size of 1 and of N GPUs, against roofsim's data-parallel prediction (lower/data_parallel.hpp).
/// The measurements only check the model.

#include <validate/validation.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace roofsim {

/// One measured DDP case: the step at its world size, and what else the file says of it.
struct DdpCase {
    ValidationCase step;                  ///< the model, batch per GPU, precision, optimizer; the step's median
    int world = 1;                        ///< GPUs (processes) it ran on
    std::vector<double> step_samples;     ///< every timed step (the slowest rank's)
    double no_sync_seconds = 0;           ///< the same step inside DDP.no_sync(): no all-reduce
    std::vector<double> pytorch_buckets;  ///< the gradient buckets DDP built (bytes, in all-reduce order), if recorded
    std::optional<double> peak_bytes;     ///< the largest rank's peak memory (torch.cuda.max_memory_allocated)
};

struct DdpRun {
    std::string origin;  ///< file, GPUs, torch version, date
    std::string gpu_key;
    int world = 1;
    std::vector<DdpCase> cases;
};

namespace detail {
inline std::vector<double> numbers_in_list(const std::string& text) {  // "8196000, 31502336" -> numbers
    std::vector<double> out;
    std::size_t i = 0;
    while (i < text.size()) {
        while (i < text.size() && (text[i] < '0' || text[i] > '9')) ++i;
        std::size_t j = i;
        while (j < text.size() && text[j] >= '0' && text[j] <= '9') ++j;
        if (j > i) out.push_back(std::stod(text.substr(i, j - i)));
        i = j;
    }
    return out;
}
}  // namespace detail

/// Reads a measure_ddp.py file (kind roofsim-ddp-validation); errors name the file and the field.
[[nodiscard]] inline DdpRun load_ddp_run(const std::filesystem::path& path) {
    using detail::JsonCursor;
    const auto doc = detail::read_json_file(path);
    const JsonCursor root(doc, path.filename().string(), "");
    if (root.at("kind").string() != "roofsim-ddp-validation") root.at("kind").fail("expected \"roofsim-ddp-validation\"");
    if (root.at("schema_version").integer() != 1) root.at("schema_version").fail("expected 1");
    DdpRun run;
    run.gpu_key = root.at("gpu").at("key").string();
    run.world = root.at("world_size").positive_int32();
    run.origin = path.filename().string() + ": " + std::to_string(run.world) + " x " + root.at("gpu").at("name").string() +
                 ", torch " + root.at("software").at("torch").string() + ", " + root.at("date_utc").string();
    const auto cases = root.at("model_cases");
    for (std::size_t i = 0; i < cases.array_size(); ++i) {
        const auto c = cases.at(i);
        DdpCase d;
        d.step = detail::model_case(c);
        if (!d.step.in_zoo) c.at("model").fail("not a zoo model");
        d.world = c.at("world_size").positive_int32();
        if (d.world != run.world) c.at("world_size").fail("differs from the file's world_size");
        const auto values = c.at("step_seconds").at("values");
        for (std::size_t k = 0; k < values.array_size(); ++k) d.step_samples.push_back(values.at(k).positive());
        if (d.step_samples.empty()) c.at("step_seconds").at("values").fail("no samples");
        d.no_sync_seconds = c.at("step_no_sync_seconds").at("median").positive();
        if (c.has("ddp") && c.at("ddp").has("buckets") && c.at("ddp").at("buckets").has("rebuilt_bucket_sizes")) {
            d.pytorch_buckets = detail::numbers_in_list(c.at("ddp").at("buckets").at("rebuilt_bucket_sizes").string());
        }
        if (c.has("peak_memory_bytes_per_rank")) {
            const auto peaks = c.at("peak_memory_bytes_per_rank");
            for (std::size_t k = 0; k < peaks.array_size(); ++k) {
                if (!peaks.at(k).json().is_null()) d.peak_bytes = std::max(d.peak_bytes.value_or(0), peaks.at(k).positive());
            }
        }
        run.cases.push_back(std::move(d));
    }
    return run;
}

/// Bounds of a data-parallel step (the multi-GPU issues'): a GPU-paced step within 10 %; a host-paced
/// one within the 10th-90th percentiles of its samples (over every run of the case given), or 15 %,
/// whichever is wider.
inline constexpr double ddp_gpu_paced_bound = 0.10;
inline constexpr double ddp_host_paced_bound = 0.15;

/// One DDP case predicted: the step over its GPUs, and on one GPU for the scaling efficiency.
struct DdpResult {
    const DdpCase* c = nullptr;             ///< the case as its first run measured it
    int runs = 0;                           ///< runs of the case (files of its world size holding it)
    double run_median_min = 0, run_median_max = 0;  ///< the lowest and highest of the runs' medians
    double measured = 0, p10 = 0, p90 = 0;  ///< the median and 10th / 90th percentiles of every run's samples
    double predicted = 0, error = 0;        ///< over the case's GPUs; predicted / measured - 1
    double predicted_one_gpu = 0;           ///< the same step on one GPU (no DDP)
    double communication = 0, exposed = 0;  ///< predicted all-reduce time, and the part the compute stream waited for
    bool host_paced = false;                ///< the host's swing (validation_host_swing) moves the prediction by 5 % or more
    bool within = false;                    ///< within its bound (above)
    std::vector<double> buckets;            ///< the buckets roofsim predicts (bytes, in all-reduce order)
    std::optional<double> predicted_peak_bytes;
    /// Scaling efficiency (throughput over N GPUs / N x one GPU's): measured, the one-GPU step being
    /// the world-size-1 run's step under no_sync (DDP without its all-reduce and reducer work), where a
    /// world-size-1 file of the case is given; predicted, the one-GPU prediction over the N-GPU one.
    std::optional<double> measured_efficiency;
    double predicted_efficiency = 0;
};

/// Predicts every case of the runs of 2 or more GPUs; a world-size-1 run gives their one-GPU steps.
/// A case that several runs of one world size hold (the same measurement repeated, minutes or days
/// apart) is one result over all their samples: a host-paced step's median moves from run to run by
/// more than its spread within a run.
[[nodiscard]] inline std::vector<DdpResult> evaluate_ddp(const std::vector<DdpRun>& runs, const CostContext& ctx,
                                                         const FrameworkProfile* framework) {
    std::map<std::string, std::vector<double>> one_gpu;  // the world-size-1 runs' no_sync medians, by case
    std::vector<std::pair<std::pair<int, std::string>, std::vector<const DdpCase*>>> multi;  // in first-seen order
    for (const auto& r : runs) {
        for (const auto& c : r.cases) {
            if (r.world == 1) {
                one_gpu[c.step.id].push_back(c.no_sync_seconds);
                continue;
            }
            const std::pair<int, std::string> key{r.world, c.step.id};
            auto it = std::find_if(multi.begin(), multi.end(), [&key](const auto& m) { return m.first == key; });
            if (it == multi.end()) it = multi.insert(multi.end(), {key, {}});
            it->second.push_back(&c);
        }
    }
    std::vector<DdpResult> out;
    for (const auto& [key, of_case] : multi) {
        const DdpCase& c = *of_case.front();
        DdpResult e;
        e.c = &c;
        e.runs = static_cast<int>(of_case.size());
        std::vector<double> samples;
        e.run_median_min = e.run_median_max = c.step.measured_seconds;
        for (const DdpCase* run : of_case) {
            samples.insert(samples.end(), run->step_samples.begin(), run->step_samples.end());
            e.run_median_min = std::min(e.run_median_min, run->step.measured_seconds);
            e.run_median_max = std::max(e.run_median_max, run->step.measured_seconds);
        }
        e.measured = e.runs == 1 ? c.step.measured_seconds : detail::quantile(samples, 0.5);
        e.p10 = detail::quantile(samples, 0.1);
        e.p90 = detail::quantile(samples, 0.9);
        PredictOptions o;
        o.lowering = c.step.options;
        o.framework = framework;
        o.data_parallel.gpus = c.world;
        const Prediction p = predict(c.step.graph, ctx, o);
        e.predicted = p.step_time.value();
        e.error = e.predicted / e.measured - 1;
        e.communication = p.communication_time.value();
        e.exposed = p.communication_exposed.value();
        for (const auto& b : p.buckets) e.buckets.push_back(b.bytes);
        e.predicted_peak_bytes = p.memory.peak.value();
        o.host_time_scale = validation_host_swing;
        e.host_paced = predict(c.step.graph, ctx, o).step_time.value() / e.predicted - 1 >= validation_host_swing_bound;
        e.within = std::abs(e.error) <= ddp_gpu_paced_bound ||
                   (e.host_paced && ((e.predicted >= e.p10 && e.predicted <= e.p90) || std::abs(e.error) <= ddp_host_paced_bound));
        o.host_time_scale = 1;
        o.data_parallel.gpus = 1;
        e.predicted_one_gpu = predict(c.step.graph, ctx, o).step_time.value();
        e.predicted_efficiency = e.predicted_one_gpu / e.predicted;
        if (const auto it = one_gpu.find(c.step.id); it != one_gpu.end()) {
            e.measured_efficiency = detail::quantile(it->second, 0.5) / e.measured;
        }
        out.push_back(std::move(e));
    }
    return out;
}

}  // namespace roofsim
