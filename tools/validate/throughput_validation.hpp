#pragma once
/// Published single-GPU training throughputs (Lambda Labs' PyTorch benchmarks of NVIDIA's
/// DeepLearningExamples: data/reference's lambda-dev.csv) against roofsim's prediction on each GPU
/// with the library's default cost context (cost/default_context.hpp): what roofsim predicts for GPUs
/// that are not at hand. The rows only check the model: nothing is fitted to them, and no GPU gets a
/// factor of its own.

#include <roofsim/cost/default_context.hpp>
#include <roofsim/detail/stats.hpp>
#include <roofsim/gpu.hpp>
#include <roofsim/optimizer.hpp>
#include <roofsim/precision_mode.hpp>
#include <roofsim/predict.hpp>
#include <roofsim/profile/builtin.hpp>
#include <roofsim/roofline.hpp>
#include <roofsim/zoo/zoo.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

namespace roofsim {

/// A GPU as the published table names it, and the built-in GPU roofsim predicts it as.
struct PublishedGpu {
    std::string_view name;  ///< as in the file's `gpu` column
    std::string_view key;   ///< roofsim's GPU key (data/gpus/<key>.json)
    std::string_view note;  ///< where the key is not that exact card: what differs ("" where it is)
};

/// Every GPU name the published table uses, and its key: the one table of the mapping.
inline constexpr std::array<PublishedGpu, 11> published_gpus = {{
    {"A10", "a10", ""},
    {"RTX 3090", "rtx-3090", ""},
    {"RTX 4090", "rtx-4090", ""},
    {"RTX A6000", "rtx-a6000", ""},
    {"H200 SXM 141GB", "h200-sxm", ""},
    // roofsim's only V100 is the 32 GB SXM2 card: the same chip, clocks and HBM2 bandwidth as the 16 GB
    // one, twice its memory. Step times carry over; memory capacity (and so whether a batch fits) does not.
    {"V100 SXM2 16GB", "v100-sxm2-32gb",
     "V100 SXM2 16GB predicted as v100-sxm2-32gb (roofsim's only V100): same chip and bandwidth, but 32 GB of memory "
     "where the published card has 16 GB, so its 'fits' is against 32 GB"},
    {"A100 PCIe 40GB", "a100-40gb-pcie", ""},
    {"A100 PCIe 80GB", "a100-80gb-pcie", ""},
    {"A100 SXM4 80GB", "a100-80gb-sxm", ""},
    {"H100 PCIe 80GB", "h100-pcie", ""},
    {"H100 SXM5 80GB", "h100-sxm", ""},
}};

/// The published GPU of that name; nullptr for an unknown one.
[[nodiscard]] inline const PublishedGpu* find_published_gpu(std::string_view name) {
    for (const auto& g : published_gpus) {
        if (g.name == name) return &g;
    }
    return nullptr;
}

/// A published model: the built-in model and size it is predicted as, and the optimizer its training
/// script runs.
struct PublishedModel {
    std::string_view name;      ///< as in the file's `model` column
    std::string_view zoo_name;  ///< zoo::model's name
    std::int64_t size = 0;      ///< image size or sequence length
    OptimizerOptions optimizer;
    PrecisionMode amp = PrecisionMode::amp_fp16;  ///< what the table's amp means for its training script
};

/// The models and their optimizers, in one place. ResNet-50 v1.5 as DeepLearningExamples trains it
/// (224 x 224): SGD with momentum and weight decay, torch.optim's foreach implementation (roofsim's
/// default sgd). BERT-large SQuAD v1.1 fine-tuning (sequence 384, the examples' default): run_squad.py
/// steps with apex's FusedAdam (Adam with decoupled weight decay, one fused kernel per step), which
/// roofsim models as adamw with fused = true; its --fp16 is apex amp's opt_level O2 (run_squad.py:
/// amp.initialize(..., opt_level="O2")), roofsim's fp16-master, where ResNet-50's --amp is autocast.
inline const std::array<PublishedModel, 2>& published_models() {
    static const std::array<PublishedModel, 2> models = {{
        {"resnet50", "resnet50", 224, OptimizerOptions{OptimizerKind::sgd, true, true, false}, PrecisionMode::amp_fp16},
        {"bert_large_squad", "bert-large-squad", 384, OptimizerOptions{OptimizerKind::adamw, true, true, true},
         PrecisionMode::fp16_master},
    }};
    return models;
}

/// The published model of that name; nullptr for an unknown one.
[[nodiscard]] inline const PublishedModel* find_published_model(std::string_view name) {
    for (const auto& m : published_models()) {
        if (m.name == name) return &m;
    }
    return nullptr;
}

/// The precision modes the table uses: tf32 (Lambda's FP32 configuration on Ampere and newer: TF32
/// convolutions and matmuls), amp (DeepLearningExamples' AMP: float16 autocast with a loss scale) and
/// fp32 (the V100 rows).
struct PublishedPrecision {
    std::string_view name;
    PrecisionMode mode;
};
inline constexpr std::array<PublishedPrecision, 3> published_precisions = {{
    {"tf32", PrecisionMode::tf32},
    {"amp", PrecisionMode::amp_fp16},
    {"fp32", PrecisionMode::fp32},
}};

[[nodiscard]] inline std::optional<PrecisionMode> published_precision_mode(std::string_view name) {
    for (const auto& p : published_precisions) {
        if (p.name == name) return p.mode;
    }
    return std::nullopt;
}

/// The mode a published precision is predicted in on a GPU of `ceilings`: its published_precisions
/// mode, except that fp32 and tf32 on a GPU without TF32 tensor cores (before Ampere: the V100) are
/// plain FP32, fp32-strict. There PyTorch's TF32 flags change nothing and cuDNN and cuBLAS run FP32 on
/// the CUDA cores, while roofsim's fp32 mode puts float32 convolutions on TF32 tensor cores (PyTorch's
/// default on Ampere and newer), which such a GPU lacks.
[[nodiscard]] inline PrecisionMode published_mode_on(PrecisionMode published, const Ceilings& ceilings) {
    if ((published == PrecisionMode::fp32 || published == PrecisionMode::tf32) && !ceilings.has(ComputeUnit::tf32_tensor)) {
        return PrecisionMode::fp32_strict;
    }
    return published;
}

/// One row of the published table, checked.
struct ThroughputRow {
    std::size_t row = 0, line = 0;  ///< data row (1: the first after the header) and line of the file
    std::string gpu_name;           ///< as published
    std::string gpu_key;            ///< roofsim's (published_gpus)
    int num_gpus = 1;
    std::string model, precision;  ///< as published
    std::int64_t batch = 0;        ///< per GPU
    double throughput = 0;         ///< samples per second over all the GPUs
    std::string unit, bench_round, software, precision_config, notes;  ///< "" where the file has no such column
};

struct ThroughputFile {
    std::string origin;  ///< the file's name
    std::vector<ThroughputRow> rows;
};

/// The columns a throughput file may have; the first six it must have.
inline constexpr std::array<std::string_view, 11> throughput_columns = {
    "gpu", "num_gpus", "model", "precision", "batch_size", "throughput", "unit", "bench_round", "software", "precision_config", "notes"};
inline constexpr std::size_t throughput_required_columns = 6;

namespace detail {

/// The fields of one CSV line: commas separate; a field in double quotes may hold commas, and a doubled
/// quote inside stands for one. nullopt where a quote is not closed on the line.
inline std::optional<std::vector<std::string>> quoted_csv_fields(const std::string& line) {
    std::vector<std::string> out(1);
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (quoted) {
            if (c != '"') {
                out.back() += c;
            } else if (i + 1 < line.size() && line[i + 1] == '"') {
                out.back() += '"';
                ++i;
            } else {
                quoted = false;
            }
        } else if (c == '"') {
            quoted = true;
        } else if (c == ',') {
            out.emplace_back();
        } else {
            out.back() += c;
        }
    }
    if (quoted) return std::nullopt;
    return out;
}

/// The names joined with ", ", for error messages.
template <class Range, class Name>
std::string joined_names(const Range& range, Name name) {
    std::string out;
    for (const auto& x : range) {
        if (!out.empty()) out += ", ";
        out += name(x);
    }
    return out;
}

}  // namespace detail

/// Reads a throughput table (a CSV file with a header row: throughput_columns). Errors name the file,
/// the row (and its line) and the column: a missing or unknown column, an unknown GPU, model or
/// precision, a batch or throughput that is not above 0, a GPU count that is not a whole number of at
/// least 1.
[[nodiscard]] inline ThroughputFile load_throughputs(const std::filesystem::path& path) {
    ThroughputFile file;
    file.origin = path.filename().string();
    std::ifstream in(path);
    if (!in) throw std::runtime_error(path.string() + ": cannot open");
    std::string line;
    if (!std::getline(in, line)) throw std::runtime_error(file.origin + ": empty (expected a header row)");
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const auto header = detail::quoted_csv_fields(line);
    if (!header) throw std::runtime_error(file.origin + ": line 1 (header): a quote is not closed");
    std::array<std::optional<std::size_t>, throughput_columns.size()> at{};  // each column's field index
    for (std::size_t f = 0; f < header->size(); ++f) {
        const std::string& name = (*header)[f];
        const auto known = std::find(throughput_columns.begin(), throughput_columns.end(), name);
        if (known == throughput_columns.end()) {
            throw std::runtime_error(file.origin + ": header, column " + std::to_string(f + 1) + ": unknown column '" + name +
                                     "' (known: " + detail::joined_names(throughput_columns, [](std::string_view s) { return s; }) + ")");
        }
        auto& slot = at[static_cast<std::size_t>(known - throughput_columns.begin())];
        if (slot) throw std::runtime_error(file.origin + ": header: column '" + name + "' appears twice");
        slot = f;
    }
    for (std::size_t c = 0; c < throughput_required_columns; ++c) {
        if (!at[c]) throw std::runtime_error(file.origin + ": header: missing column '" + std::string(throughput_columns[c]) + "'");
    }
    std::size_t line_number = 1;
    while (std::getline(in, line)) {
        ++line_number;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find_first_not_of(" \t") == std::string::npos) continue;
        ThroughputRow r;
        r.row = file.rows.size() + 1;
        r.line = line_number;
        const std::string where = file.origin + ": row " + std::to_string(r.row) + " (line " + std::to_string(line_number) + ")";
        const auto fields = detail::quoted_csv_fields(line);
        if (!fields) throw std::runtime_error(where + ": a quote is not closed");
        if (fields->size() != header->size()) {
            throw std::runtime_error(where + ": " + std::to_string(fields->size()) + " fields, the header has " +
                                     std::to_string(header->size()));
        }
        const auto field = [&](std::size_t c) -> std::string { return at[c] ? (*fields)[*at[c]] : std::string(); };
        const auto fail = [&](std::size_t c, const std::string& what) {
            throw std::runtime_error(where + ", column '" + std::string(throughput_columns[c]) + "': " + what);
        };
        const auto integer = [&](std::size_t c) {
            const std::string s = field(c);
            std::int64_t v = 0;
            const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
            if (ec != std::errc() || end != s.data() + s.size() || v < 1) fail(c, "expected a whole number of at least 1, got '" + s + "'");
            return v;
        };
        r.gpu_name = field(0);
        const PublishedGpu* gpu = find_published_gpu(r.gpu_name);
        if (!gpu) {
            fail(0, "unknown GPU '" + r.gpu_name + "' (known: " +
                        detail::joined_names(published_gpus, [](const PublishedGpu& g) { return g.name; }) + ")");
        }
        r.gpu_key = std::string(gpu->key);
        const std::int64_t gpus = integer(1);
        if (gpus > 65535) fail(1, "more than 65535 GPUs: '" + field(1) + "'");
        r.num_gpus = static_cast<int>(gpus);
        r.model = field(2);
        if (!find_published_model(r.model)) {
            fail(2, "unknown model '" + r.model + "' (known: " +
                        detail::joined_names(published_models(), [](const PublishedModel& m) { return m.name; }) + ")");
        }
        r.precision = field(3);
        if (!published_precision_mode(r.precision)) {
            fail(3, "unknown precision '" + r.precision + "' (known: " +
                        detail::joined_names(published_precisions, [](const PublishedPrecision& p) { return p.name; }) + ")");
        }
        r.batch = integer(4);
        const std::string t = field(5);
        const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), r.throughput);
        if (ec != std::errc() || end != t.data() + t.size() || !std::isfinite(r.throughput) || r.throughput <= 0) {
            fail(5, "expected a number above 0, got '" + t + "'");
        }
        r.unit = field(6);
        r.bench_round = field(7);
        r.software = field(8);
        r.precision_config = field(9);
        r.notes = field(10);
        file.rows.push_back(std::move(r));
    }
    if (file.rows.empty()) throw std::runtime_error(file.origin + ": no rows");
    return file;
}

/// One published row against its prediction.
struct ThroughputResult {
    const ThroughputRow* row = nullptr;  ///< the row it checks (none in a hand-made result)
    std::string gpu_key;                 ///< roofsim's
    std::string model, precision;        ///< as published
    PrecisionMode mode = PrecisionMode::fp32;  ///< the mode predicted in (published_mode_on)
    std::int64_t batch = 0;
    double measured = 0;   ///< samples/s, published
    double predicted = 0;  ///< samples/s: batch / predicted step time
    double error = 0;      ///< predicted / measured - 1
    std::string profile;   ///< the kind of profile predicted on: "measured", "derived" or "datasheet" (Ceilings::kind)
    bool fits = true;      ///< the predicted peak memory fits the GPU (MemoryFit::fits)
    double peak_bytes = 0, usable_bytes = 0;
    double step_seconds = 0;
    /// The published batch was the largest that fit the card, so the next power of two above it should
    /// not fit: that batch, whether its predicted peak fits, and the peak.
    std::int64_t next_batch = 0;
    bool next_fits = false;
    double next_peak_bytes = 0;
    /// Whether roofsim's memory model agrees with the published choice: the batch fits, the next does not.
    [[nodiscard]] bool batch_agrees() const { return fits && !next_fits; }
};

/// The smallest power of two above `batch` (the next batch a benchmark that doubles would have tried).
[[nodiscard]] inline std::int64_t next_power_of_two_above(std::int64_t batch) {
    std::int64_t n = 1;
    while (n <= batch) n *= 2;
    return n;
}

/// The predictions of a table's rows, and what was not predicted.
struct ThroughputValidation {
    std::vector<ThroughputResult> results;  ///< one per predicted row, in the file's order
    std::size_t multi_gpu_rows = 0;         ///< rows of 2 or more GPUs: not predicted (yet)
    /// Rows skipped because roofsim does not build their model (yet), by published model name.
    std::map<std::string, std::size_t> not_built_in;
    /// Where a GPU is predicted as another card (published_gpus' notes), or a precision in another mode
    /// (published_mode_on).
    std::vector<std::string> notes;
};

/// Predicts every one-GPU row of `file` on its GPU with the default cost context
/// (make_default_cost_context) and the built-in framework profile the way `roofsim compare` takes it:
/// the GPU's own, else the first built-in one. Rows that repeat (another round) share one prediction.
/// With `datasheet`, every GPU is predicted on its bare datasheet instead (no measured or derived
/// profile), to compare with.
[[nodiscard]] inline ThroughputValidation evaluate_throughputs(const ThroughputFile& file, bool datasheet = false) {
    ThroughputValidation v;
    std::map<std::string, CostContext> contexts;
    std::map<std::string, const FrameworkProfile*> frameworks;
    std::map<std::string, std::optional<Graph>> graphs;
    std::map<std::tuple<std::string, std::string, std::string, std::int64_t>, Prediction> predictions;
    std::map<std::tuple<std::string, std::string, std::string, std::int64_t>, MemoryFit> next_fits;  // at next_power_of_two_above
    for (const auto& r : file.rows) {
        if (r.num_gpus != 1) {
            ++v.multi_gpu_rows;
            continue;
        }
        const PublishedModel* model = find_published_model(r.model);
        const std::optional<PrecisionMode> published = published_precision_mode(r.precision);
        if (!model || !published) {  // a row load_throughputs did not read
            throw std::runtime_error(file.origin + ": row " + std::to_string(r.row) + ": unknown model '" + r.model + "' or precision '" +
                                     r.precision + "'");
        }
        auto graph = graphs.find(r.model);
        if (graph == graphs.end()) graph = graphs.emplace(r.model, zoo::model(model->zoo_name, model->size)).first;
        if (!graph->second) {
            ++v.not_built_in[r.model];
            continue;
        }
        auto ctx = contexts.find(r.gpu_key);
        if (ctx == contexts.end()) {
            const GpuSpec& spec = gpu_or_throw(r.gpu_key);
            const FrameworkProfile* fw = default_framework_profile(spec.key);
            frameworks[r.gpu_key] = fw;
            ctx = contexts.emplace(r.gpu_key, datasheet ? make_cost_context(spec, nullptr, fw) : make_default_cost_context(spec, fw)).first;
            const PublishedGpu* published_gpu = find_published_gpu(r.gpu_name);
            if (published_gpu && !published_gpu->note.empty()) v.notes.emplace_back(published_gpu->note);
        }
        const PrecisionMode mode = published_mode_on(*published == PrecisionMode::amp_fp16 ? model->amp : *published, ctx->second.ceilings);
        if (mode != *published && *published != PrecisionMode::amp_fp16) {
            const std::string note = r.gpu_key + ": " + r.precision + " rows predicted as " + std::string(to_string(mode)) +
                                     " (no TF32 tensor cores: PyTorch's TF32 flags change nothing there)";
            if (std::find(v.notes.begin(), v.notes.end(), note) == v.notes.end()) v.notes.push_back(note);
        }
        const auto key = std::make_tuple(r.gpu_key, r.model, r.precision, r.batch);
        auto p = predictions.find(key);
        if (p == predictions.end()) {
            PredictOptions o;
            o.lowering.batch = r.batch;
            o.lowering.precision = mode;
            o.lowering.optimizer = model->optimizer;
            o.framework = frameworks[r.gpu_key];
            try {
                p = predictions.emplace(key, predict(*graph->second, ctx->second, o)).first;
                o.lowering.batch = next_power_of_two_above(r.batch);
                next_fits.emplace(key, predict(*graph->second, ctx->second, o).memory_fit);
            } catch (const std::exception& e) {
                throw std::runtime_error(file.origin + ": row " + std::to_string(r.row) + " (" + r.gpu_key + ", " + r.model + ", " +
                                         r.precision + ", batch " + std::to_string(r.batch) + "): " + e.what());
            }
        }
        const Prediction& pred = p->second;
        ThroughputResult t;
        t.row = &r;
        t.gpu_key = r.gpu_key;
        t.model = r.model;
        t.precision = r.precision;
        t.mode = mode;
        t.batch = r.batch;
        t.measured = r.throughput;
        t.step_seconds = pred.step_time.value();
        t.predicted = static_cast<double>(r.batch) / t.step_seconds;
        t.error = t.predicted / t.measured - 1;
        t.profile = ctx->second.ceilings.kind;
        t.fits = pred.memory_fit.fits();
        t.peak_bytes = pred.memory_fit.peak.value();
        t.usable_bytes = pred.memory_fit.usable().value();
        const MemoryFit& next = next_fits.at(key);
        t.next_batch = next_power_of_two_above(r.batch);
        t.next_fits = next.fits();
        t.next_peak_bytes = next.peak.value();
        v.results.push_back(std::move(t));
    }
    return v;
}

/// The errors of one model's rows, or of all rows (model "all").
struct ThroughputErrorSummary {
    std::string model;
    std::size_t rows = 0;
    double median_abs_error = 0;  ///< the median |error| (the mean of the middle two of an even count)
    double max_abs_error = 0;
    const ThroughputResult* worst = nullptr;  ///< the row of the largest |error|
};

/// One summary per model (by published name), then one over all rows; none for no rows.
[[nodiscard]] inline std::vector<ThroughputErrorSummary> summarize_throughput_errors(const std::vector<ThroughputResult>& results) {
    std::map<std::string, std::vector<const ThroughputResult*>> groups;
    for (const auto& r : results) groups[r.model].push_back(&r);
    std::vector<ThroughputErrorSummary> out;
    const auto summary = [](const std::string& name, const std::vector<const ThroughputResult*>& rows) {
        ThroughputErrorSummary s;
        s.model = name;
        s.rows = rows.size();
        std::vector<double> a;
        for (const auto* r : rows) {
            a.push_back(std::abs(r->error));
            if (!s.worst || std::abs(r->error) > s.max_abs_error) {
                s.worst = r;
                s.max_abs_error = std::abs(r->error);
            }
        }
        s.median_abs_error = detail::quantile(a, 0.5);
        return s;
    };
    std::vector<const ThroughputResult*> all;
    for (const auto& [model, rows] : groups) {
        out.push_back(summary(model, rows));
        all.insert(all.end(), rows.begin(), rows.end());
    }
    if (!all.empty()) out.push_back(summary("all", all));
    return out;
}

/// One GPU's rows of a (model, precision) group: the median of the published throughputs and of the
/// predictions (the same but where the rows' batches differ).
struct GpuThroughput {
    std::string gpu_key;
    std::size_t rows = 0;
    double measured = 0, predicted = 0;  ///< samples/s
};

/// The GPUs of each (model, precision) group, fastest measured first.
[[nodiscard]] inline std::map<std::pair<std::string, std::string>, std::vector<GpuThroughput>> gpu_throughputs(
    const std::vector<ThroughputResult>& results) {
    std::map<std::pair<std::string, std::string>, std::map<std::string, std::pair<std::vector<double>, std::vector<double>>>> rows;
    for (const auto& r : results) {
        auto& gpu = rows[{r.model, r.precision}][r.gpu_key];
        gpu.first.push_back(r.measured);
        gpu.second.push_back(r.predicted);
    }
    std::map<std::pair<std::string, std::string>, std::vector<GpuThroughput>> out;
    for (const auto& [group, gpus] : rows) {
        auto& list = out[group];
        for (const auto& [key, values] : gpus) {
            list.push_back({key, values.first.size(), detail::quantile(values.first, 0.5), detail::quantile(values.second, 0.5)});
        }
        std::stable_sort(list.begin(), list.end(), [](const GpuThroughput& a, const GpuThroughput& b) { return a.measured > b.measured; });
    }
    return out;
}

/// Two GPUs of a group whose published throughputs differ by more than pair_order_min_gap: does the
/// prediction put them in the same order?
inline constexpr double pair_order_min_gap = 0.05;

struct ThroughputPair {
    std::string model, precision;
    GpuThroughput faster, slower;  ///< by the published throughputs
    bool agrees = true;            ///< the prediction has `faster` faster too
};

struct PairOrderGroup {
    std::string model, precision;
    std::size_t gpus = 0, pairs = 0, disagreeing = 0;  ///< pairs: those more than the gap apart
};

struct PairOrdering {
    std::vector<PairOrderGroup> groups;
    std::vector<ThroughputPair> pairs;  ///< every pair compared, group by group, fastest measured first
    [[nodiscard]] std::size_t disagreeing() const {
        return static_cast<std::size_t>(std::count_if(pairs.begin(), pairs.end(), [](const ThroughputPair& p) { return !p.agrees; }));
    }
};

/// Every pair of distinct GPUs of each (model, precision) group whose published throughputs (each
/// GPU's median over its rows) differ by more than `min_gap` (faster / slower - 1), and whether the
/// predictions order them the same way.
[[nodiscard]] inline PairOrdering order_pairs(const std::vector<ThroughputResult>& results, double min_gap = pair_order_min_gap) {
    PairOrdering out;
    for (const auto& [group, gpus] : gpu_throughputs(results)) {
        PairOrderGroup g{group.first, group.second, gpus.size(), 0, 0};
        for (std::size_t i = 0; i < gpus.size(); ++i) {
            for (std::size_t j = i + 1; j < gpus.size(); ++j) {
                if (gpus[i].measured / gpus[j].measured - 1 <= min_gap) continue;
                ThroughputPair p{group.first, group.second, gpus[i], gpus[j], gpus[i].predicted > gpus[j].predicted};
                ++g.pairs;
                if (!p.agrees) ++g.disagreeing;
                out.pairs.push_back(std::move(p));
            }
        }
        out.groups.push_back(g);
    }
    return out;
}

/// The throughput ratios the published tables invite (numerator GPU over denominator GPU).
inline constexpr std::array<std::pair<std::string_view, std::string_view>, 2> published_ratio_pairs = {{
    {"rtx-a6000", "rtx-3090"},
    {"a100-80gb-sxm", "rtx-a6000"},
}};

struct ThroughputRatio {
    std::string model, precision, numerator, denominator;
    double measured = 0, predicted = 0;  ///< numerator's samples/s over the denominator's
    [[nodiscard]] double difference() const { return predicted - measured; }
    [[nodiscard]] double error() const { return predicted / measured - 1; }
};

/// Each published_ratio_pairs ratio in each (model, precision) group that has both GPUs (each GPU's
/// median over its rows), measured and predicted.
[[nodiscard]] inline std::vector<ThroughputRatio> throughput_ratios(const std::vector<ThroughputResult>& results) {
    std::vector<ThroughputRatio> out;
    for (const auto& [group, gpus] : gpu_throughputs(results)) {
        const auto gpu = [&gpus = gpus](std::string_view key) -> const GpuThroughput* {
            for (const auto& g : gpus) {
                if (g.gpu_key == key) return &g;
            }
            return nullptr;
        };
        for (const auto& [num, den] : published_ratio_pairs) {
            const GpuThroughput* a = gpu(num);
            const GpuThroughput* b = gpu(den);
            if (!a || !b) continue;
            out.push_back({group.first, group.second, std::string(num), std::string(den), a->measured / b->measured,
                           a->predicted / b->predicted});
        }
    }
    return out;
}

}  // namespace roofsim
