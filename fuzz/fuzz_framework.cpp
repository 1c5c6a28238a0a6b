// The framework-profile loader (framework_profile_from_json, what `--framework` reads), then the
// shipped small graph and IR, and the profile's first measured layer, predicted with its host costs.

#include "fuzz_common.hpp"
#include "json_mutator.hpp"

#include <optional>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace roofsim;
    std::optional<FrameworkProfile> profile;
    if (!fuzz::expect_errors([&] {
            const std::string_view text(reinterpret_cast<const char*>(data), size);
            profile = framework_profile_from_json(detail::parse_json_text(text, "framework.json"), "framework.json");
        })) {
        return 0;
    }
    const std::uint64_t h = fuzz::input_hash(data, size);
    PredictOptions o = fuzz::graph_options(h);
    o.framework = &*profile;
    const CostContext& ctx = fuzz::context(h >> 32, o.data_parallel.gpus > 1);
    fuzz::expect_errors([&] { fuzz::check_prediction(predict(fuzz::small_graph(), ctx, o)); });
    fuzz::expect_errors([&] { fuzz::check_prediction(predict(fuzz::small_ir(), ctx, framework_options(&*profile))); });
    if (!profile->op_timings.empty()) {
        PredictOptions one = framework_options(&*profile);
        one.lowering.precision = profile->op_timings.front().precision;
        fuzz::expect_errors([&] { fuzz::check_prediction(predict(profile->op_timings.front().graph, ctx, one)); });
    }
    return 0;
}
