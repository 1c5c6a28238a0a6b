#pragma once
/// A grid of predictions for planners: GPUs x batch sizes x precision modes x GPU counts of one
/// graph. The graph is lowered once per batch, precision and GPU count (prepare()), and that step is
/// costed on every GPU; the lowerings are shared out over threads.

#include <roofsim/plan.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace roofsim {

/// The grid's axes. Each list is taken in its order; none may be empty.
struct SweepGrid {
    std::vector<ComparedGpu> gpus;
    std::vector<std::int64_t> batches;
    std::vector<PrecisionMode> precisions;
    std::vector<int> gpu_counts = {1};
};

/// One configuration of the grid and its prediction's headline figures.
struct SweepRow {
    std::size_t gpu = 0;  ///< index into SweepGrid::gpus
    PrecisionMode precision = PrecisionMode::fp32;
    std::int64_t batch = 0;  ///< per GPU
    int gpus = 1;
    Seconds step{0};
    double samples_per_second = 0;
    Bytes peak{0}, usable{0};
    bool fits = false;
};

/// Predicts every configuration of `grid` with `options`' other settings, on up to `threads`
/// threads (0: as many as the machine has). Rows come in grid order: batch, then precision, then
/// GPU count, then GPU. The first error met (a lowering or a cost that throws) is rethrown.
[[nodiscard]] inline std::vector<SweepRow> sweep(const Graph& graph, const SweepGrid& grid, const PredictOptions& options,
                                                 unsigned threads = 0) {
    if (grid.gpus.empty() || grid.batches.empty() || grid.precisions.empty() || grid.gpu_counts.empty()) {
        throw std::invalid_argument("sweep: every axis of the grid needs at least one value");
    }
    struct Task {
        std::int64_t batch;
        PrecisionMode precision;
        int gpus;
    };
    std::vector<Task> tasks;
    for (const auto b : grid.batches) {
        for (const auto p : grid.precisions) {
            for (const int n : grid.gpu_counts) tasks.push_back({b, p, n});
        }
    }
    std::vector<SweepRow> rows(tasks.size() * grid.gpus.size());
    std::atomic<std::size_t> next{0};
    std::exception_ptr failure;
    std::mutex failure_mutex;
    auto work = [&] {
        for (std::size_t t = next++; t < tasks.size(); t = next++) {
            try {
                PredictOptions o = options;
                o.lowering.batch = tasks[t].batch;
                o.lowering.precision = tasks[t].precision;
                o.data_parallel.gpus = tasks[t].gpus;
                PreparedStep step = prepare(graph, o);
                for (std::size_t g = 0; g < grid.gpus.size(); ++g) {
                    step.options.framework = grid.gpus[g].framework ? grid.gpus[g].framework : options.framework;
                    const Prediction p = predict(step, *grid.gpus[g].ctx);
                    rows[t * grid.gpus.size() + g] = {g, o.lowering.precision, o.lowering.batch, o.data_parallel.gpus, p.step_time,
                                                      samples_per_second(p), p.memory_fit.peak, p.memory_fit.usable(),
                                                      p.memory_fit.fits()};
                }
            } catch (...) {
                const std::lock_guard<std::mutex> lock(failure_mutex);
                if (!failure) failure = std::current_exception();
                next = tasks.size();
            }
        }
    };
    const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
    const auto count = static_cast<unsigned>(std::min<std::size_t>(threads == 0 ? hardware : threads, tasks.size()));
    std::vector<std::thread> pool;
    for (unsigned i = 1; i < count; ++i) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
    if (failure) std::rethrow_exception(failure);
    return rows;
}

}  // namespace roofsim
