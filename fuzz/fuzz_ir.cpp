// The kernel-IR loader (kernel_ir_from_json, what `predict --ir` reads), then the step predicted from
// its kernels.

#include "fuzz_common.hpp"
#include "json_mutator.hpp"

#include <optional>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace roofsim;
    std::optional<KernelIr> ir;
    if (!fuzz::expect_errors([&] {
            const std::string_view text(reinterpret_cast<const char*>(data), size);
            ir = kernel_ir_from_json(detail::parse_json_text(text, "ir.json"), "ir.json");
        })) {
        return 0;
    }
    const std::uint64_t h = fuzz::input_hash(data, size);
    PredictOptions o = framework_options(h % 2 == 0 ? find_builtin_framework_profile("h200-sxm") : nullptr,
                                         (h >> 1) % 3 == 0 ? 2.5 : 1.0);
    fuzz::expect_errors([&] { fuzz::check_prediction(predict(*ir, fuzz::context(h >> 8), o)); });
    return 0;
}
