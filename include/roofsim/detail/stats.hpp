#pragma once
/// Order statistics of measured or predicted figures.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace roofsim::detail {

/// The q-quantile (0..1) of `v`, linear between order statistics (q = 0.5: the median); 0 for none.
/// Infinite values take part as themselves (a median of {1, inf, inf} is inf).
[[nodiscard]] inline double quantile(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const double pos = q * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const auto hi = std::min(lo + 1, v.size() - 1);
    const double fraction = pos - static_cast<double>(lo);
    if (fraction == 0 || v[hi] == v[lo]) return v[lo];
    return v[lo] + (v[hi] - v[lo]) * fraction;
}

}  // namespace roofsim::detail
