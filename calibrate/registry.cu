// The probe registry: every probe, in the order roofsim-calibrate runs them.
#include "probe.hpp"

namespace roofsim::calib {

Probe make_launch_probe();
Probe make_memcpy_probe();
Probe make_bandwidth_probe();
Probe make_cuda_core_probe();
Probe make_tensor_mma_probe();
Probe make_cublas_peak_probe();
Probe make_gemm_sweep_probe();
Probe make_conv_probe();
Probe make_nccl_probe();

std::vector<Probe> make_probes() {
    return {make_launch_probe(),     make_memcpy_probe(),     make_bandwidth_probe(),
            make_cuda_core_probe(),  make_tensor_mma_probe(), make_cublas_peak_probe(),
            make_gemm_sweep_probe(), make_conv_probe(),       make_nccl_probe()};
}

}  // namespace roofsim::calib
