#pragma once
/// A log-log roofline chart as a standalone SVG document: one horizontal line per compute ceiling,
/// one slanted line per memory level, labelled with their rates, and optional kernel points.

#include <roofsim/roofline.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace roofsim {

/// A kernel drawn on the chart: intensity (FLOP per DRAM byte) and the rate it attains. A point
/// `at_floor` (a layer with no FLOPs) is drawn hollow at the chart's lowest intensity, as high as the
/// rate it would attain there (`attained` then holds that rate, 0 for none: the chart's floor).
struct RooflinePoint {
    std::string label;
    FlopsPerByte intensity{0};
    FlopsPerSecond attained{0};
    bool at_floor = false;
};

struct RooflineSvgOptions {
    std::optional<ComputeUnit> only_unit;  ///< draw this ceiling alone; all when empty
    std::vector<RooflinePoint> points;
    double plot_width_px = 560;  ///< the plot area; margins are added around it
    double plot_height_px = 480;
};

namespace detail {
inline std::string svg_escape(std::string_view s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            default: out += c;
        }
    }
    return out;
}

inline std::string fmt(const char* format, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, format, v);
    return buf;
}

/// The width of `text` in a sans-serif font of `font_px` (an estimate on the wide side: 0.6 em a character).
inline double text_width(std::string_view text, double font_px) { return 0.6 * font_px * static_cast<double>(text.size()); }

/// `text` shortened with "..." to fit `width_px` at `font_px`.
inline std::string fit_text(const std::string& text, double width_px, double font_px) {
    const auto chars = static_cast<std::size_t>(std::max(4.0, width_px / (0.6 * font_px)));
    return text.size() <= chars ? text : text.substr(0, chars - 3) + "...";
}

/// A text element with a white halo, so that no line strikes through it.
inline std::string halo_text(double x, double y, const std::string& attributes, const std::string& text) {
    return "<text x=\"" + fmt("%.1f", x) + "\" y=\"" + fmt("%.1f", y) + "\" " + attributes +
           " paint-order=\"stroke\" stroke=\"white\" stroke-width=\"4\" stroke-linejoin=\"round\">" + text + "</text>\n";
}

/// "989 TFLOP/s" / "4.80 TB/s" with three significant digits.
inline std::string human_rate(double v, const char* unit) {
    const char* prefixes[] = {"", "k", "M", "G", "T", "P"};
    int p = 0;
    while (v >= 1000.0 && p < 5) { v /= 1000.0; ++p; }
    const char* f = v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : "%.2f";
    return fmt(f, v) + " " + prefixes[p] + unit;
}
}  // namespace detail

/// Renders the roofline of `c` as an SVG document (log-log; x: FLOP/byte, y: FLOP/s).
[[nodiscard]] inline std::string roofline_svg(const Ceilings& c, const RooflineSvgOptions& options = {}) {
    using detail::fmt;
    std::map<ComputeUnit, FlopsPerSecond> units;
    for (const auto& [u, s] : c.compute) {
        if (!options.only_unit || *options.only_unit == u) units[u] = s.value;
    }
    if (units.empty() && options.only_unit) (void)c.rate(*options.only_unit);  // throws, naming the unit
    const BytesPerSecond dram = c.rate(MemoryLevel::dram);

    double peak_max = 0, peak_min = 1e300;
    for (const auto& [u, r] : units) {
        peak_max = std::max(peak_max, r.value());
        peak_min = std::min(peak_min, r.value());
    }
    const double x_min = 1.0 / 8.0;
    double x_max = 64.0;
    while (x_max < 4.0 * peak_max / dram.value()) x_max *= 2.0;
    double y_max = std::pow(10.0, std::ceil(std::log10(peak_max * 1.5)));
    double y_min = std::pow(10.0, std::floor(std::log10(std::min(dram.value() * x_min, peak_min / 10.0))));
    for (const auto& p : options.points) {
        if (p.attained.value() > 0) y_min = std::min(y_min, std::pow(10.0, std::floor(std::log10(std::max(p.attained.value(), 1.0)))));
    }

    // Equal ceilings share one line and one label; the right margin fits the longest label.
    std::map<double, std::string, std::greater<>> by_rate;
    for (const auto& [u, r] : units) {
        auto& names = by_rate[r.value()];
        names += (names.empty() ? "" : ", ") + std::string(to_string(u));
    }
    std::size_t longest_label = 0;
    for (const auto& [rate, names] : by_rate) longest_label = std::max(longest_label, names.size() + 14);
    const bool any_floor = std::any_of(options.points.begin(), options.points.end(), [](const auto& p) { return p.at_floor; });
    const double left = 118, top = 58, bottom = any_floor ? 96 : 60;
    const double right = std::max(120.0, detail::text_width(std::string(longest_label, 'x'), 12) + 16.0);
    const double plot_w = options.plot_width_px, plot_h = options.plot_height_px;
    const double width = left + plot_w + right, height = top + plot_h + bottom;
    auto X = [&](double x) { return left + plot_w * std::log(x / x_min) / std::log(x_max / x_min); };
    auto Y = [&](double y) { return top + plot_h * (1.0 - std::log(y / y_min) / std::log(y_max / y_min)); };

    std::string s;
    s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", width) + "\" height=\"" +
         fmt("%.0f", height) + "\" viewBox=\"0 0 " + fmt("%.0f", width) + " " + fmt("%.0f", height) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n";
    s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
    // the title and the ceilings' origin on two lines, each shortened to the width
    s += "<text x=\"20\" y=\"24\" font-size=\"15\" font-weight=\"bold\">" +
         detail::svg_escape(detail::fit_text("Roofline: " + c.gpu_name, width - 40, 15)) + "</text>\n";
    s += "<text x=\"20\" y=\"42\" font-size=\"12\">" +
         detail::svg_escape(detail::fit_text("ceilings: " + c.origin, width - 40, 12)) + "</text>\n";

    // Grid and axes: one line per power of two on x, per decade on y.
    for (double x = x_min; x <= x_max * 1.0001; x *= 2) {
        s += "<line x1=\"" + fmt("%.1f", X(x)) + "\" y1=\"" + fmt("%.1f", top) + "\" x2=\"" + fmt("%.1f", X(x)) +
             "\" y2=\"" + fmt("%.1f", top + plot_h) + "\" stroke=\"#e5e5e5\"/>\n";
        const std::string label = x < 1 ? "1/" + fmt("%.0f", 1 / x) : fmt("%.0f", x);
        s += "<text x=\"" + fmt("%.1f", X(x)) + "\" y=\"" + fmt("%.1f", top + plot_h + 16) +
             "\" text-anchor=\"middle\">" + label + "</text>\n";
    }
    for (double y = y_min; y <= y_max * 1.0001; y *= 10) {
        s += "<line x1=\"" + fmt("%.1f", left) + "\" y1=\"" + fmt("%.1f", Y(y)) + "\" x2=\"" +
             fmt("%.1f", left + plot_w) + "\" y2=\"" + fmt("%.1f", Y(y)) + "\" stroke=\"#e5e5e5\"/>\n";
        s += "<text x=\"" + fmt("%.1f", left - 6) + "\" y=\"" + fmt("%.1f", Y(y) + 4) + "\" text-anchor=\"end\">" +
             detail::human_rate(y, "FLOP/s") + "</text>\n";
    }
    s += "<rect x=\"" + fmt("%.1f", left) + "\" y=\"" + fmt("%.1f", top) + "\" width=\"" + fmt("%.1f", plot_w) +
         "\" height=\"" + fmt("%.1f", plot_h) + "\" fill=\"none\" stroke=\"black\"/>\n";
    s += "<text x=\"" + fmt("%.1f", left + plot_w / 2) + "\" y=\"" + fmt("%.1f", top + plot_h + 40) +
         "\" text-anchor=\"middle\">Arithmetic intensity (FLOP per byte of DRAM traffic)</text>\n";
    s += "<text transform=\"translate(16," + fmt("%.1f", top + plot_h / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">Attainable rate (FLOP/s)</text>\n";

    // Memory ceilings: y = I * BW, drawn up to the highest compute ceiling.
    const char* memory_colours[] = {"#1f4e9c", "#7a9cd6"};
    int m_index = 0;
    for (const auto& [level, bw] : c.bandwidth) {
        const double b = bw.value.value();
        const double x0 = std::max(x_min, y_min / b), x1 = std::min(x_max, peak_max / b);
        s += "<line x1=\"" + fmt("%.1f", X(x0)) + "\" y1=\"" + fmt("%.1f", Y(x0 * b)) + "\" x2=\"" +
             fmt("%.1f", X(x1)) + "\" y2=\"" + fmt("%.1f", Y(x1 * b)) + "\" stroke=\"" + memory_colours[m_index % 2] +
             "\" stroke-width=\"2.5\"" + (level == MemoryLevel::l2 ? " stroke-dasharray=\"8 4\"" : "") + "/>\n";
        // the label above its line, along it
        const double xl = std::max(x0 * 1.6, x_min * 1.6);
        const double angle = std::atan2(Y(x1 * b) - Y(x0 * b), X(x1) - X(x0)) * 180.0 / 3.14159265358979;
        s += detail::halo_text(X(xl) + 4, Y(xl * b) - 6,
                               "fill=\"" + std::string(memory_colours[m_index % 2]) + "\" transform=\"rotate(" + fmt("%.1f", angle) +
                                   " " + fmt("%.1f", X(xl) + 4) + " " + fmt("%.1f", Y(xl * b) - 6) + ")\"",
                               std::string(level == MemoryLevel::dram ? "DRAM " : "L2 ") + detail::human_rate(b, "B/s"));
        ++m_index;
    }

    // Compute ceilings, from the ridge against DRAM to the right edge.
    const char* compute_colours[] = {"#b22222", "#d2691e", "#2e8b57", "#6a3d9a", "#8b4513", "#c71585", "#008080"};
    int c_index = 0;
    double last_label_y = -1e9;
    for (const auto& [rate, names] : by_rate) {
        const double x0 = std::max(x_min, rate / dram.value());
        const char* colour = compute_colours[c_index++ % 7];
        s += "<line x1=\"" + fmt("%.1f", X(x0)) + "\" y1=\"" + fmt("%.1f", Y(rate)) + "\" x2=\"" +
             fmt("%.1f", left + plot_w) + "\" y2=\"" + fmt("%.1f", Y(rate)) + "\" stroke=\"" + colour +
             "\" stroke-width=\"2\"/>\n";
        double label_y = Y(rate) + 4;
        if (label_y < last_label_y + 14) label_y = last_label_y + 14;  // keep labels apart
        label_y = std::min(label_y, height - 4);
        last_label_y = label_y;
        s += detail::halo_text(left + plot_w + 6, label_y, "fill=\"" + std::string(colour) + "\"",
                               detail::svg_escape(names) + " " + detail::human_rate(rate, "FLOP/s"));
        // ridge marker against DRAM
        s += "<circle cx=\"" + fmt("%.1f", X(x0)) + "\" cy=\"" + fmt("%.1f", Y(rate)) + "\" r=\"3\" fill=\"" + colour +
             "\"><title>ridge " + fmt("%.1f", rate / dram.value()) + " FLOP/B</title></circle>\n";
    }

    // every point, inside the plot: a layer without FLOPs hollow at the lowest intensity
    for (const auto& p : options.points) {
        const double px = p.at_floor ? x_min : std::clamp(p.intensity.value() > 0 ? p.intensity.value() : x_min, x_min, x_max);
        const double py = std::clamp(p.attained.value() > 0 ? p.attained.value() : y_min, y_min, y_max);
        s += "<circle class=\"point\" cx=\"" + fmt("%.1f", X(px)) + "\" cy=\"" + fmt("%.1f", Y(py)) + "\" r=\"4\" " +
             (p.at_floor ? "fill=\"none\" stroke=\"#555\" stroke-width=\"1.5\"" : "fill=\"black\" fill-opacity=\"0.6\"") +
             "><title>" + detail::svg_escape(p.label) + "</title></circle>\n";
    }
    if (any_floor) {
        const double ly = top + plot_h + 66;
        s += "<circle cx=\"" + fmt("%.1f", left + 6) + "\" cy=\"" + fmt("%.1f", ly - 4) +
             "\" r=\"4\" fill=\"none\" stroke=\"#555\" stroke-width=\"1.5\"/>\n";
        s += "<text x=\"" + fmt("%.1f", left + 16) + "\" y=\"" + fmt("%.1f", ly) + "\">" +
             detail::svg_escape(detail::fit_text("hollow: no FLOPs, drawn at 1/8 FLOP/B, as high as its DRAM bandwidth x 1/8",
                                                 plot_w + right - 20, 12)) +
             "</text>\n";
    }
    s += "</svg>\n";
    return s;
}

}  // namespace roofsim
