#pragma once
/// The largest batch that trains, as tools/validate/measure_max_batch.py found it on a GPU by trying
/// batches until out-of-memory, against roofsim's max_batch (plan.hpp); and the memory model near
/// capacity: the predicted peak against the measured one at every batch that trained.

#include <validate/validation.hpp>

#include <roofsim/plan.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

namespace roofsim {

/// One batch tried: whether it trained, and the allocator's peaks over it.
struct BatchTry {
    std::int64_t batch = 0;
    bool ok = false;
    double peak_allocated = 0, peak_reserved = 0;  ///< bytes
};

struct MaxBatchCase {
    std::string id;  ///< "resnet50/b3296x224/amp-bf16": the model at its largest batch
    Graph graph;
    LoweringOptions options;  ///< the precision and optimizer (the batch is what is sought)
    std::int64_t largest = 0, smallest_failed = 0;
    std::vector<BatchTry> tries;
};

struct MaxBatchRun {
    std::string origin, gpu_key;
    std::vector<MaxBatchCase> cases;
};

/// Reads a measure_max_batch.py file (kind roofsim-max-batch-validation); errors name the file and field.
[[nodiscard]] inline MaxBatchRun load_max_batch_run(const std::filesystem::path& path) {
    using detail::JsonCursor;
    const auto doc = detail::read_json_file(path);
    const JsonCursor root(doc, path.filename().string(), "");
    if (root.at("kind").string() != "roofsim-max-batch-validation") root.at("kind").fail("expected \"roofsim-max-batch-validation\"");
    if (root.at("schema_version").integer() != 1) root.at("schema_version").fail("expected 1");
    MaxBatchRun run;
    run.gpu_key = root.at("gpu").at("key").string();
    run.origin = path.filename().string() + ": " + root.at("gpu").at("name").string() + ", torch " +
                 root.at("software").at("torch").string() + ", " + root.at("date_utc").string();
    const auto cases = root.at("cases");
    for (std::size_t i = 0; i < cases.array_size(); ++i) {
        const auto c = cases.at(i);
        MaxBatchCase m;
        m.id = c.at("id").string();
        const std::int64_t size = c.has("image_size") ? c.at("image_size").positive_integer() : c.at("seq_len").positive_integer();
        auto graph = zoo::model(c.at("model").string(), size);
        if (!graph) c.at("model").fail("not a zoo model");
        m.graph = std::move(*graph);
        const auto mode = precision_mode_from_key(c.at("precision").string());
        if (!mode) c.at("precision").fail("unknown precision mode");
        m.options.precision = *mode;
        const auto opt = optimizer_from_key(c.at("optimizer").string());
        if (!opt) c.at("optimizer").fail("unknown optimizer");
        m.options.optimizer.kind = *opt;
        m.largest = c.at("largest_batch").positive_integer();
        m.smallest_failed = c.at("smallest_failed_batch").positive_integer();
        if (m.smallest_failed <= m.largest) c.at("smallest_failed_batch").fail("must be above largest_batch");
        const auto tries = c.at("tries");
        for (std::size_t k = 0; k < tries.array_size(); ++k) {
            const auto t = tries.at(k);
            m.tries.push_back({t.at("batch").positive_integer(), t.at("ok").boolean(), t.at("peak_allocated_bytes").non_negative(),
                               t.at("peak_reserved_bytes").non_negative()});
        }
        run.cases.push_back(std::move(m));
    }
    return run;
}

/// --batch max's bound (the what-if issue's): within 5 % of the largest batch measured.
inline constexpr double max_batch_bound = 0.05;

struct MaxBatchResult {
    const MaxBatchCase* c = nullptr;
    std::int64_t predicted = 0;
    double error = 0;  ///< predicted / measured largest batch - 1
    bool within = false;
    /// At the largest batch that trained: the allocator's peak (allocated, reserved) and roofsim's.
    double measured_peak = 0, reserved_peak = 0, predicted_peak = 0;
    /// The predicted peak's error at every batch that trained, the one of largest magnitude.
    double worst_peak_error = 0;
};

/// Each case's largest batch as roofsim finds it on `ctx` (whose memory capacity is the measured GPU's).
[[nodiscard]] inline std::vector<MaxBatchResult> evaluate_max_batch(const MaxBatchRun& run, const CostContext& ctx,
                                                                    const FrameworkProfile* framework) {
    std::vector<MaxBatchResult> out;
    for (const auto& c : run.cases) {
        MaxBatchResult r;
        r.c = &c;
        PredictOptions o;
        o.lowering = c.options;
        o.framework = framework;
        r.predicted = max_batch(c.graph, ctx, o).batch;
        r.error = static_cast<double>(r.predicted) / static_cast<double>(c.largest) - 1;
        r.within = std::abs(r.error) <= max_batch_bound;
        for (const auto& t : c.tries) {
            if (!t.ok) continue;
            o.lowering.batch = t.batch;
            const double peak = predict(c.graph, ctx, o).memory.peak.value();
            const double e = peak / t.peak_allocated - 1;
            if (std::abs(e) > std::abs(r.worst_peak_error)) r.worst_peak_error = e;
            if (t.batch == c.largest) {
                r.measured_peak = t.peak_allocated;
                r.reserved_peak = t.peak_reserved;
                r.predicted_peak = peak;
            }
        }
        out.push_back(r);
    }
    return out;
}

}  // namespace roofsim
