// How long does a 4096^3 BF16 GEMM take on an A100 80GB SXM4 and on an RTX 3090, by the datasheet
// roofline, and what bounds it? Prints one line per GPU.
#include <roofsim/roofsim.hpp>

#include <cstdio>

int main() {
    using namespace roofsim;
    const double n = 4096;
    KernelWork gemm;
    gemm.unit = ComputeUnit::bf16_tensor;
    gemm.flops = Flops(2 * n * n * n);           // 2 m n k
    gemm.dram_bytes = Bytes(3 * n * n * 2);      // read A and B, write C, 2 bytes each, once
    for (const char* key : {"a100-80gb-sxm", "rtx-3090"}) {
        const Ceilings c = ceilings_from_spec(gpu_or_throw(key));
        const RooflineTime t = roofline_time(gemm, c);
        std::printf("%-14s bf16 GEMM 4096^3: %8.1f us, %s-bound, ridge %.0f FLOP/B\n", key,
                    to_microseconds(t.time), std::string(to_string(t.bound)).c_str(),
                    ridge_point(gemm.unit, MemoryLevel::dram, c).value());
    }
    return 0;
}
