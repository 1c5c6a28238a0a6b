// The validation loaders (what `roofsim validate` reads), chosen by the document's kind: PyTorch
// measurements (load_validation), the runs manifest (load_validation_runs), DDP and largest-batch
// measurements (load_ddp_run, load_max_batch_run); anything else as a published-throughput CSV
// (load_throughputs). Loaded measurements are then predicted, their first cases only (each is a
// whole model).

#include "fuzz_common.hpp"
#include "json_mutator.hpp"

#include <validate/ddp_validation.hpp>
#include <validate/max_batch_validation.hpp>
#include <validate/throughput_validation.hpp>
#include <validate/validation.hpp>

#include <map>
#include <optional>

namespace {

using namespace roofsim;

constexpr std::size_t cases_predicted = 2;

template <class T>
void keep_first(std::vector<T>& v) {
    if (v.size() > cases_predicted) v.resize(cases_predicted);
}

/// The GPU's default cost context (its measured or derived profile), made once per GPU.
const CostContext& context_of(const std::string& gpu_key, bool collectives) {
    static std::map<std::pair<std::string, bool>, CostContext> made;
    const GpuSpec& spec = gpu_or_throw(gpu_key);
    auto it = made.find({spec.key, collectives});
    if (it == made.end()) {
        CostContext c = make_default_cost_context(spec, find_builtin_framework_profile(spec.key));
        if (collectives) add_builtin_collectives(c, spec.key);
        it = made.emplace(std::pair{spec.key, collectives}, std::move(c)).first;
    }
    return it->second;
}

void measurements(const std::filesystem::path& path) {
    ValidationSet set = load_validation(path);
    keep_first(set.cases);
    const FrameworkProfile* framework = find_builtin_framework_profile(set.gpu_key);
    for (const auto& e : evaluate(set, context_of(set.gpu_key, false), framework, HostSpeed::measured)) {
        fuzz::require_figure(e.predicted_seconds, "predicted_seconds");
        fuzz::require_figure(e.predicted_peak_bytes.value_or(0), "predicted_peak_bytes");
    }
}

void ddp(const std::filesystem::path& path) {
    DdpRun run = load_ddp_run(path);
    keep_first(run.cases);
    const FrameworkProfile* framework = find_builtin_framework_profile(run.gpu_key);
    for (const auto& r : evaluate_ddp({run}, context_of(run.gpu_key, true), framework)) {
        fuzz::require_figure(r.predicted, "ddp predicted");
        fuzz::require_figure(r.communication, "ddp communication");
    }
}

void throughputs(const std::filesystem::path& path) {
    ThroughputFile file = load_throughputs(path);
    keep_first(file.rows);
    for (const auto& r : evaluate_throughputs(file).results) fuzz::require_figure(r.predicted, "predicted samples/s");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const nlohmann::json doc = nlohmann::json::parse(data, data + size, nullptr, false);
    const std::string kind = doc.is_object() && doc.contains("kind") && doc["kind"].is_string() ? doc["kind"].get<std::string>() : "";
    if (kind == "roofsim-validation") {
        fuzz::expect_errors([&] { measurements(fuzz::write_temporary(data, size, "measurements.json")); });
    } else if (kind == "roofsim-validation-runs") {
        fuzz::expect_errors([&] { (void)load_validation_runs(fuzz::write_temporary(data, size, "runs.json")); });
    } else if (kind == "roofsim-ddp-validation") {
        fuzz::expect_errors([&] { ddp(fuzz::write_temporary(data, size, "ddp.json")); });
    } else if (kind == "roofsim-max-batch-validation") {
        // loaded only: evaluate_max_batch searches batches of whole models, too slow for a fuzz input
        fuzz::expect_errors([&] { (void)load_max_batch_run(fuzz::write_temporary(data, size, "max-batch.json")); });
    } else {
        fuzz::expect_errors([&] { throughputs(fuzz::write_temporary(data, size, "throughputs.csv")); });
    }
    return 0;
}
