#pragma once
/// Least-squares fits used by roofsim-calibrate to turn sweeps into curves (Eigen 3.4).
/// Not included by calibration.hpp: the profile stores the fitted parameters, so readers of a
/// profile need no Eigen. Only the calibrate program and the tests include this header.

#include <cmath>
#include <stdexcept>
#include <vector>

#if __has_include(<Eigen/Dense>)
#include <Eigen/Dense>
#else
#include <eigen3/Eigen/Dense>
#endif

#include <roofsim/profile/calibration.hpp>

namespace roofsim::detail {

/// Fits seconds = overhead + amount / rate by least squares, each point weighted by 1/seconds so that
/// small and large sizes count alike (relative error). `amount` is bytes or FLOP.
/// Throws std::invalid_argument with fewer than 2 distinct amounts or a non-positive slope.
[[nodiscard]] inline AffineFit fit_overhead_and_rate(const std::vector<double>& amount,
                                                     const std::vector<double>& seconds) {
    if (amount.size() != seconds.size()) throw std::invalid_argument("fit: x and y differ in length");
    const auto n = static_cast<Eigen::Index>(amount.size());
    if (n < 2) throw std::invalid_argument("fit: needs at least 2 points");
    Eigen::MatrixXd a(n, 2);
    Eigen::VectorXd b(n);
    for (Eigen::Index i = 0; i < n; ++i) {
        const auto u = static_cast<std::size_t>(i);
        if (!(seconds[u] > 0.0) || !(amount[u] > 0.0)) throw std::invalid_argument("fit: values must be positive");
        const double w = 1.0 / seconds[u];
        a(i, 0) = w;
        a(i, 1) = amount[u] * w;
        b(i) = 1.0;  // seconds * w
    }
    const Eigen::Vector2d x = a.colPivHouseholderQr().solve(b);
    const double overhead = x(0), slope = x(1);
    if (!(slope > 0.0) || !std::isfinite(slope)) throw std::invalid_argument("fit: slope is not positive");
    double mean = 0.0;
    for (double s : seconds) mean += s;
    mean /= static_cast<double>(n);
    double ss_res = 0.0, ss_tot = 0.0;
    for (std::size_t i = 0; i < seconds.size(); ++i) {
        const double pred = overhead + slope * amount[i];
        ss_res += (seconds[i] - pred) * (seconds[i] - pred);
        ss_tot += (seconds[i] - mean) * (seconds[i] - mean);
    }
    AffineFit f;
    f.overhead_seconds = overhead < 0.0 ? 0.0 : overhead;  // a tiny negative intercept is noise
    f.rate_per_second = 1.0 / slope;
    f.r2 = ss_tot > 0.0 ? 1.0 - ss_res / ss_tot : 1.0;
    f.points = static_cast<int>(n);
    return f;
}

/// The working-set size at which a bandwidth ramp crosses half-way (in log bandwidth) between its
/// cache plateau (max over sizes below `cache_bytes`) and its DRAM plateau (the value at the largest
/// size), interpolated in log-log space. Returns a negative number when the ramp has no step.
[[nodiscard]] inline double find_cache_step(const std::vector<BandwidthPoint>& curve, double cache_bytes) {
    if (curve.size() < 3) return -1.0;
    double hi = 0.0;
    for (const auto& p : curve)
        if (p.working_set_bytes <= cache_bytes) hi = std::max(hi, p.bytes_per_second);
    const double lo = curve.back().bytes_per_second;
    if (!(hi > lo * 1.05)) return -1.0;
    const double mid = std::sqrt(hi * lo);
    std::size_t peak = 0;
    for (std::size_t i = 0; i < curve.size(); ++i)
        if (curve[i].bytes_per_second >= hi) { peak = i; }
    for (std::size_t i = peak + 1; i < curve.size(); ++i) {
        if (curve[i].bytes_per_second <= mid) {
            const auto& p0 = curve[i - 1];
            const auto& p1 = curve[i];
            const double t = (std::log(p0.bytes_per_second) - std::log(mid)) /
                             (std::log(p0.bytes_per_second) - std::log(p1.bytes_per_second));
            return std::exp(std::log(p0.working_set_bytes) +
                            t * (std::log(p1.working_set_bytes) - std::log(p0.working_set_bytes)));
        }
    }
    return -1.0;
}

}  // namespace roofsim::detail
