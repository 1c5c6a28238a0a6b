// Uses the installed headers and the embedded GPU table, with no data files around.
#include <roofsim/roofsim.hpp>

#include <cstdio>

int main() {
    const auto c = roofsim::ceilings_from_spec(roofsim::gpu_or_throw("rtx-a6000"));
    std::printf("consumer: rtx-a6000 tf32 ridge %.1f FLOP/B\n",
                roofsim::ridge_point(roofsim::ComputeUnit::tf32_tensor, roofsim::MemoryLevel::dram, c).value());
    return 0;
}
