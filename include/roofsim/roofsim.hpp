#pragma once
/// roofsim: how long one PyTorch training step takes on a GPU, and where the time goes.
/// This header includes the whole library.

#include <roofsim/units.hpp>
#include <roofsim/precision.hpp>
#include <roofsim/gpu.hpp>
#include <roofsim/calibration.hpp>
#include <roofsim/roofline.hpp>
#include <roofsim/roofline_svg.hpp>
#include <roofsim/framework.hpp>
#include <roofsim/builtin_profiles.hpp>
#include <roofsim/name.hpp>
#include <roofsim/ir.hpp>
#include <roofsim/ir_json.hpp>
#include <roofsim/graph.hpp>
#include <roofsim/precision_mode.hpp>
#include <roofsim/lower.hpp>
#include <roofsim/cost.hpp>
#include <roofsim/sim.hpp>
#include <roofsim/memory.hpp>
#include <roofsim/predict.hpp>
#include <roofsim/predict_ir.hpp>
#include <roofsim/report_svg.hpp>
#include <roofsim/zoo/zoo.hpp>
