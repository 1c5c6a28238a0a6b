#pragma once
/// roofsim: how long one PyTorch training step takes on a GPU, and where the time goes.
/// This header includes the whole library.

#include <roofsim/units.hpp>
#include <roofsim/precision.hpp>
#include <roofsim/gpu.hpp>
#include <roofsim/calibration.hpp>
#include <roofsim/roofline.hpp>
#include <roofsim/roofline_svg.hpp>
