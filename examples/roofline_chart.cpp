// Draws the datasheet roofline of an H200 to roofline-h200.svg and prints its ridge points.
#include <roofsim/roofsim.hpp>

#include <cstdio>
#include <fstream>

int main() {
    using namespace roofsim;
    const Ceilings c = ceilings_from_spec(gpu_or_throw("h200-sxm"));
    for (ComputeUnit u : {ComputeUnit::fp32, ComputeUnit::tf32_tensor, ComputeUnit::bf16_tensor}) {
        std::printf("%-12s ridge %6.1f FLOP/B\n", std::string(to_string(u)).c_str(),
                    ridge_point(u, MemoryLevel::dram, c).value());
    }
    std::ofstream("roofline-h200.svg") << roofline_svg(c);
    std::printf("wrote roofline-h200.svg\n");
    return 0;
}
