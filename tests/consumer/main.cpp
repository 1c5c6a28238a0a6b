// Uses the installed headers, the embedded GPU table and the installed measured profiles
// (share/roofsim), the way a capacity planner would.
#include <roofsim/roofsim.hpp>

#include <cstdio>

int main() {
    const auto c = roofsim::ceilings_from_spec(roofsim::gpu_or_throw("rtx-a6000"));
    std::printf("consumer: rtx-a6000 tf32 ridge %.1f FLOP/B\n",
                roofsim::ridge_point(roofsim::ComputeUnit::tf32_tensor, roofsim::MemoryLevel::dram, c).value());
    const roofsim::Calibration* measured = roofsim::find_builtin_calibration("h200-sxm");
    std::printf("consumer: profiles from %s: h200-sxm %s\n", roofsim::builtin_data_dir().string().c_str(),
                measured ? "measured" : "missing");
    return measured ? 0 : 1;
}
