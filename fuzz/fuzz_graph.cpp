// The layer-graph loader (graph_from_json, what `predict --graph` reads), then the step it describes
// lowered and predicted: shape arithmetic as well as parsing.

#include "fuzz_common.hpp"
#include "json_mutator.hpp"

#include <optional>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace roofsim;
    std::optional<Graph> graph;
    if (!fuzz::expect_errors([&] {
            const std::string_view text(reinterpret_cast<const char*>(data), size);
            graph = graph_from_json(detail::parse_json_text(text, "graph.json"), "graph.json");
        })) {
        return 0;
    }
    const std::uint64_t h = fuzz::input_hash(data, size);
    const PredictOptions o = fuzz::graph_options(h);
    fuzz::expect_errors([&] { fuzz::check_prediction(predict(*graph, fuzz::context(h >> 32, o.data_parallel.gpus > 1), o)); });
    return 0;
}
