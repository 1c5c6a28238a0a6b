#pragma once
/// roofsim: how long one PyTorch training step takes on a GPU, and where the time goes.
/// This header includes the whole library, room by room along the spine:
/// profiles -> lowering -> cost -> simulation -> memory -> prediction -> reports.

// Units, names and the vocabulary every room shares.
#include <roofsim/units.hpp>
#include <roofsim/compute_unit.hpp>
#include <roofsim/dtype.hpp>
#include <roofsim/precision_mode.hpp>
#include <roofsim/step_mode.hpp>
#include <roofsim/optimizer.hpp>
#include <roofsim/name.hpp>
#include <roofsim/gpu.hpp>
#include <roofsim/ir.hpp>
#include <roofsim/ir_json.hpp>
#include <roofsim/graph.hpp>

// Profiles: the GPU calibration and the framework (PyTorch host) profile, and the built-in ones.
#include <roofsim/profile/calibration.hpp>
#include <roofsim/profile/calibration_json.hpp>
#include <roofsim/profile/framework.hpp>
#include <roofsim/profile/builtin.hpp>
#include <roofsim/roofline.hpp>

// Lowering: a layer graph to the kernels of one training step.
#include <roofsim/lower/lower.hpp>
#include <roofsim/lower/data_parallel.hpp>

// Cost: one small model per kernel kind, and the per-op efficiencies.
#include <roofsim/cost/collective.hpp>
#include <roofsim/cost/context.hpp>
#include <roofsim/cost/gemm.hpp>
#include <roofsim/cost/conv.hpp>
#include <roofsim/cost/attention.hpp>
#include <roofsim/cost/streaming.hpp>
#include <roofsim/cost/op_factor.hpp>
#include <roofsim/cost/kernel_cost.hpp>
#include <roofsim/cost/op_factor_calibration.hpp>
#include <roofsim/cost/default_context.hpp>

// Simulation: host costs and the discrete-event step.
#include <roofsim/sim/host_costs.hpp>
#include <roofsim/sim/host_costs_from_profile.hpp>
#include <roofsim/sim/simulate.hpp>

// Memory, prediction, reports, and the built-in models.
#include <roofsim/memory.hpp>
#include <roofsim/predict.hpp>
#include <roofsim/plan.hpp>
#include <roofsim/price.hpp>
#include <roofsim/sweep.hpp>
#include <roofsim/report/atomic_write.hpp>
#include <roofsim/report/comparison_svg.hpp>
#include <roofsim/report/json.hpp>
#include <roofsim/report/operators.hpp>
#include <roofsim/report/roofline_svg.hpp>
#include <roofsim/report/svg.hpp>
#include <roofsim/zoo/zoo.hpp>
