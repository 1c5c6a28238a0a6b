#pragma once
/// The SVG picture of a comparison of GPUs: samples per second as one bar per GPU; throughput over
/// batch size per GPU, its largest batch that fits marked; data-parallel speedup over GPU count.
/// Every point given is drawn; the axes are sized to hold them all.

#include <roofsim/report/roofline_svg.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace roofsim {

/// One GPU of the picture.
struct ComparedSeries {
    std::string gpu;
    std::int64_t batch = 0;            ///< the batch of the bar
    double samples_per_second = 0;     ///< the bar
    bool fits = true;
    std::optional<std::int64_t> largest_batch;
    std::vector<std::pair<std::int64_t, double>> over_batch;  ///< (batch, samples/s), batches ascending
    std::vector<std::pair<int, double>> scaling;              ///< (GPUs, speedup over one GPU), ascending
};

namespace detail {

inline const char* series_colour(std::size_t i) {
    static const char* colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};
    return colours[i % 8];
}

/// A chart area: x on a log2 scale from x_lo to x_hi, y linear from 0 to y_hi.
struct LogLinChart {
    double left = 90, top = 40, width = 560, height = 260;
    double x_lo = 1, x_hi = 2, y_hi = 1;
    double x(double v) const { return left + width * std::log2(v / x_lo) / std::max(1e-9, std::log2(x_hi / x_lo)); }
    double y(double v) const { return top + height * (1 - v / y_hi); }
};

/// A round axis top at or above `v` (1, 2 or 5 x a power of ten), and its tick step.
inline std::pair<double, double> nice_top(double v) {
    if (!(v > 0)) return {1, 0.2};
    const double p = std::pow(10.0, std::floor(std::log10(v)));
    for (const double m : {1.0, 2.0, 5.0, 10.0}) {
        if (v <= m * p * (1 + 1e-12)) return {m * p, m * p / (m == 2.0 ? 4 : 5)};
    }
    return {10 * p, 2 * p};
}

inline std::string axes_svg(const LogLinChart& c, double y_step, const std::string& x_label, const std::string& y_label,
                            const std::vector<double>& x_ticks) {
    std::string s;
    for (double v = 0; v <= c.y_hi * (1 + 1e-9); v += y_step) {
        s += "<line x1=\"" + fmt("%.1f", c.left) + "\" y1=\"" + fmt("%.1f", c.y(v)) + "\" x2=\"" + fmt("%.1f", c.left + c.width) +
             "\" y2=\"" + fmt("%.1f", c.y(v)) + "\" stroke=\"#ddd\"/>\n";
        s += "<text x=\"" + fmt("%.1f", c.left - 6) + "\" y=\"" + fmt("%.1f", c.y(v) + 4) + "\" text-anchor=\"end\">" +
             fmt(y_step >= 1 ? "%.0f" : "%.2g", v) + "</text>\n";
    }
    for (const double t : x_ticks) {
        s += "<line x1=\"" + fmt("%.1f", c.x(t)) + "\" y1=\"" + fmt("%.1f", c.top + c.height) + "\" x2=\"" + fmt("%.1f", c.x(t)) +
             "\" y2=\"" + fmt("%.1f", c.top + c.height + 5) + "\" stroke=\"#333\"/>\n";
        s += "<text x=\"" + fmt("%.1f", c.x(t)) + "\" y=\"" + fmt("%.1f", c.top + c.height + 18) + "\" text-anchor=\"middle\">" +
             fmt("%.0f", t) + "</text>\n";
    }
    s += "<rect x=\"" + fmt("%.1f", c.left) + "\" y=\"" + fmt("%.1f", c.top) + "\" width=\"" + fmt("%.1f", c.width) + "\" height=\"" +
         fmt("%.1f", c.height) + "\" fill=\"none\" stroke=\"#333\"/>\n";
    s += "<text x=\"" + fmt("%.1f", c.left + c.width / 2) + "\" y=\"" + fmt("%.1f", c.top + c.height + 36) +
         "\" text-anchor=\"middle\">" + svg_escape(x_label) + "</text>\n";
    s += "<text transform=\"translate(" + fmt("%.1f", c.left - 62) + "," + fmt("%.1f", c.top + c.height / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">" + svg_escape(y_label) + "</text>\n";
    return s;
}

/// The powers of two from lo to hi (lo and hi included), thinned to at most 12.
inline std::vector<double> log2_ticks(double lo, double hi) {
    std::vector<double> t;
    for (double v = lo; v <= hi * (1 + 1e-12); v *= 2) t.push_back(v);
    while (t.size() > 12) {
        std::vector<double> every_other;
        for (std::size_t i = 0; i < t.size(); i += 2) every_other.push_back(t[i]);
        t = std::move(every_other);
    }
    return t;
}

}  // namespace detail

/// Renders the picture; `title` heads it. A panel whose series are all empty is left out.
[[nodiscard]] inline std::string comparison_svg(const std::vector<ComparedSeries>& gpus, const std::string& title) {
    using detail::fmt;
    using detail::svg_escape;
    const double width = 900, legend_x = 680;
    std::string body;
    double y0 = 50;
    body += "<text x=\"20\" y=\"30\" font-size=\"15\" font-weight=\"bold\">" + svg_escape(detail::fit_text(title, width - 40, 15)) +
            "</text>\n";

    // 1. bars: samples/s per GPU
    double most = 0;
    for (const auto& g : gpus) most = std::max(most, g.samples_per_second);
    const double bar_left = 230, bar_room = 400, bar_h = 22;
    for (std::size_t i = 0; i < gpus.size(); ++i) {
        const auto& g = gpus[i];
        const double y = y0 + bar_h * static_cast<double>(i);
        const double w = most > 0 ? bar_room * g.samples_per_second / most : 0;
        const std::string label = g.gpu + " (batch " + std::to_string(g.batch) + ")";
        body += "<g class=\"bar\"><title>" + svg_escape(label) + "</title>\n";
        body += "<text x=\"" + fmt("%.0f", bar_left - 6) + "\" y=\"" + fmt("%.1f", y + 15) + "\" text-anchor=\"end\">" +
                svg_escape(detail::fit_text(label, bar_left - 26, 12)) + "</text>\n";
        body += "<rect x=\"" + fmt("%.0f", bar_left) + "\" y=\"" + fmt("%.1f", y + 3) + "\" width=\"" + fmt("%.1f", w) +
                "\" height=\"" + fmt("%.1f", bar_h - 6) + "\" fill=\"" + (g.fits ? "#1f4e9c" : "#c0392b") + "\"/>\n";
        body += "<text x=\"" + fmt("%.1f", bar_left + w + 6) + "\" y=\"" + fmt("%.1f", y + 15) + "\">" +
                fmt("%.1f", g.samples_per_second) + " samples/s" + (g.fits ? "" : ", does not fit") + "</text>\n</g>\n";
    }
    y0 += bar_h * static_cast<double>(gpus.size()) + 30;

    // 2. throughput over batch, the largest batch that fits marked
    std::int64_t max_batch = 1;
    double most_rate = 0;
    bool any_curve = false;
    for (const auto& g : gpus) {
        for (const auto& [b, r] : g.over_batch) {
            max_batch = std::max(max_batch, b);
            most_rate = std::max(most_rate, r);
            any_curve = true;
        }
    }
    auto legend = [&](double top) {
        std::string s;
        for (std::size_t i = 0; i < gpus.size(); ++i) {
            const double y = top + 18 * static_cast<double>(i);
            s += "<rect x=\"" + fmt("%.0f", legend_x) + "\" y=\"" + fmt("%.1f", y) + "\" width=\"12\" height=\"12\" fill=\"" +
                 detail::series_colour(i) + "\"/><text x=\"" + fmt("%.0f", legend_x + 18) + "\" y=\"" + fmt("%.1f", y + 11) + "\">" +
                 svg_escape(detail::fit_text(gpus[i].gpu, width - legend_x - 30, 12)) + "</text>\n";
        }
        return s;
    };
    auto polyline = [&](const std::vector<std::pair<double, double>>& pts, const detail::LogLinChart& c, std::size_t i,
                        const std::string& what) {
        std::string s = "<polyline fill=\"none\" stroke=\"" + std::string(detail::series_colour(i)) + "\" stroke-width=\"2\" points=\"";
        for (const auto& [x, y] : pts) s += fmt("%.1f", c.x(x)) + "," + fmt("%.1f", c.y(y)) + " ";
        s += "\"/>\n";
        for (const auto& [x, y] : pts) {
            s += "<circle cx=\"" + fmt("%.1f", c.x(x)) + "\" cy=\"" + fmt("%.1f", c.y(y)) + "\" r=\"3\" fill=\"" + detail::series_colour(i) +
                 "\"><title>" + svg_escape(gpus[i].gpu + ": " + what + " " + fmt("%.0f", x) + ", " + fmt("%.3g", y)) + "</title></circle>\n";
        }
        return s;
    };
    if (any_curve) {
        detail::LogLinChart c;
        c.top = y0 + 24;
        c.x_hi = std::max<double>(2, static_cast<double>(max_batch));
        const auto [top, step] = detail::nice_top(most_rate * 1.05);
        c.y_hi = top;
        body += "<text x=\"20\" y=\"" + fmt("%.1f", y0 + 10) + "\" font-weight=\"bold\">Throughput over batch size; "
                "a ring marks each GPU's largest batch that fits</text>\n";
        body += detail::axes_svg(c, step, "batch size per GPU", "samples/s", detail::log2_ticks(1, c.x_hi));
        for (std::size_t i = 0; i < gpus.size(); ++i) {
            std::vector<std::pair<double, double>> pts;
            for (const auto& [b, r] : gpus[i].over_batch) pts.emplace_back(static_cast<double>(b), r);
            if (pts.empty()) continue;
            body += polyline(pts, c, i, "batch");
            if (gpus[i].largest_batch) {
                for (const auto& [b, r] : pts) {
                    if (static_cast<std::int64_t>(b) != *gpus[i].largest_batch) continue;
                    body += "<circle cx=\"" + fmt("%.1f", c.x(b)) + "\" cy=\"" + fmt("%.1f", c.y(r)) + "\" r=\"7\" fill=\"none\" stroke=\"" +
                            detail::series_colour(i) + "\" stroke-width=\"2\"><title>" +
                            svg_escape(gpus[i].gpu + ": largest batch that fits, " + fmt("%.0f", b)) + "</title></circle>\n";
                }
            }
        }
        body += legend(c.top);
        y0 = c.top + c.height + 60;
    }

    // 3. data-parallel speedup over GPU count
    int most_gpus = 1;
    double most_speedup = 1;
    bool any_scaling = false;
    for (const auto& g : gpus) {
        for (const auto& [n, s] : g.scaling) {
            most_gpus = std::max(most_gpus, n);
            most_speedup = std::max(most_speedup, s);
            any_scaling = true;
        }
    }
    if (any_scaling) {
        detail::LogLinChart c;
        c.top = y0 + 24;
        c.x_hi = std::max(2, most_gpus);
        const auto [top, step] = detail::nice_top(std::max<double>(most_speedup, most_gpus) * 1.05);
        c.y_hi = top;
        body += "<text x=\"20\" y=\"" + fmt("%.1f", y0 + 10) + "\" font-weight=\"bold\">Data-parallel speedup over one GPU "
                "(dashed: linear)</text>\n";
        body += detail::axes_svg(c, step, "GPUs", "speedup", detail::log2_ticks(1, c.x_hi));
        std::string linear;  // speedup = GPUs, through every power of two of the axis
        for (const double n : detail::log2_ticks(1, c.x_hi)) linear += fmt("%.1f", c.x(n)) + "," + fmt("%.1f", c.y(n)) + " ";
        linear += fmt("%.1f", c.x(c.x_hi)) + "," + fmt("%.1f", c.y(c.x_hi));
        body += "<polyline fill=\"none\" points=\"" + linear + "\" stroke=\"#999\" stroke-dasharray=\"5,4\"/>\n";
        for (std::size_t i = 0; i < gpus.size(); ++i) {
            std::vector<std::pair<double, double>> pts;
            for (const auto& [n, s] : gpus[i].scaling) pts.emplace_back(n, s);
            if (!pts.empty()) body += polyline(pts, c, i, "GPUs");
        }
        body += legend(c.top);
        y0 = c.top + c.height + 60;
    }

    const double height = y0 + 10;
    return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", width) + "\" height=\"" + fmt("%.0f", height) +
           "\" viewBox=\"0 0 " + fmt("%.0f", width) + " " + fmt("%.0f", height) +
           "\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<g font-family=\"sans-serif\" font-size=\"12\">\n" + body +
           "</g>\n</svg>\n";
}

}  // namespace roofsim
