// The GPU-profile loader (calibration_from_json, what `--calibration` reads), then the shipped small
// graph and IR predicted with the profile on its own GPU and with a profile derived from it.

#include "fuzz_common.hpp"
#include "json_mutator.hpp"

#include <optional>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace roofsim;
    std::optional<Calibration> calibration;
    if (!fuzz::expect_errors([&] {
            const std::string_view text(reinterpret_cast<const char*>(data), size);
            calibration = calibration_from_json(detail::parse_json_text(text, "calibration.json"), "calibration.json");
        })) {
        return 0;
    }
    const std::uint64_t h = fuzz::input_hash(data, size);
    const PredictOptions o = fuzz::graph_options(h);
    const GpuSpec* own = find_gpu(calibration->device.gpu_key);
    fuzz::expect_errors([&] {
        const CostContext ctx = make_cost_context(own ? *own : gpu_or_throw("h200-sxm"), &*calibration);
        fuzz::check_prediction(predict(fuzz::small_graph(), ctx, o));
        fuzz::check_prediction(predict(fuzz::small_ir(), ctx, PredictOptions{}));
    });
    fuzz::expect_errors([&] {
        const CostContext ctx = make_derived_cost_context(gpu_or_throw("a10"), *calibration, nullptr);
        fuzz::check_prediction(predict(fuzz::small_graph(), ctx, o));
    });
    return 0;
}
