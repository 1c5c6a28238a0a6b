#pragma once
/// The SVG report of a prediction: the GPU's roofline with every layer as a point (FLOPs per DRAM
/// byte, FLOP/s attained over its forward and backward GPU time; a layer without FLOPs hollow at the
/// chart's lowest intensity), and a bar chart of the layers that take the most GPU time, one bar per
/// layer (forward and backward stacked).

#include <roofsim/predict.hpp>
#include <roofsim/report/roofline_svg.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace roofsim {

namespace detail {

/// One roofline point per layer; a layer with no FLOPs at the floor, as high as its bandwidth allows there.
inline std::vector<RooflinePoint> layer_points(const Prediction& p) {
    std::vector<RooflinePoint> points;
    for (const auto& l : p.layers) {
        const Seconds time = l.forward_gpu + l.backward_gpu;
        const std::string label = l.layer.str() + " (" + l.op.str() + ")";
        if (l.flops.value() > 0) {
            const double intensity = l.bytes.value() > 0 ? (l.flops / l.bytes).value() : 1e300;
            const double rate = time.value() > 0 ? l.flops.value() / time.value() : 0;
            points.push_back({label, FlopsPerByte(intensity), FlopsPerSecond(rate), false});
        } else {
            const double rate = time.value() > 0 ? l.bytes.value() / time.value() / 8.0 : 0;
            points.push_back({label + ": no FLOPs", FlopsPerByte(0), FlopsPerSecond(rate), true});
        }
    }
    return points;
}

/// The `bars` layers with the most GPU time, most first.
inline std::vector<const LayerTime*> slowest_layers(const Prediction& p, std::size_t bars) {
    std::vector<const LayerTime*> rows;
    for (const auto& l : p.layers) rows.push_back(&l);
    std::stable_sort(rows.begin(), rows.end(), [](const LayerTime* a, const LayerTime* b) {
        return (a->forward_gpu + a->backward_gpu) > (b->forward_gpu + b->backward_gpu);
    });
    if (rows.size() > bars) rows.resize(bars);
    return rows;
}

/// `text` shortened in the middle to `chars` characters.
inline std::string shorten_middle(const std::string& text, std::size_t chars) {
    if (text.size() <= chars || chars < 5) return text;
    const std::size_t head = (chars - 3 + 1) / 2, tail = chars - 3 - head;
    return text.substr(0, head) + "..." + text.substr(text.size() - tail);
}

struct BarLayout {
    double left = 260, bar_h = 18, top = 60, width = 900, label_room = 170;
    double chart_w() const { return width - left - label_room; }
};

inline std::string bar_svg(const LayerTime& r, std::size_t i, double longest, const BarLayout& b) {
    const double y = b.top + b.bar_h * static_cast<double>(i);
    const double fw = longest > 0 ? b.chart_w() * r.forward_gpu.value() / longest : 0;
    const double bw = longest > 0 ? b.chart_w() * r.backward_gpu.value() / longest : 0;
    const auto name_chars = static_cast<std::size_t>((b.left - 16) / (0.6 * 12));
    std::string s = "<g class=\"bar\"><title>" + svg_escape(r.layer.str()) + "</title>\n";
    s += "<text x=\"" + fmt("%.0f", b.left - 6) + "\" y=\"" + fmt("%.1f", y + 13) + "\" text-anchor=\"end\">" +
         svg_escape(shorten_middle(r.layer.str(), name_chars)) + "</text>\n";
    s += "<rect x=\"" + fmt("%.1f", b.left) + "\" y=\"" + fmt("%.1f", y + 2) + "\" width=\"" + fmt("%.1f", fw) + "\" height=\"" +
         fmt("%.1f", b.bar_h - 4) + "\" fill=\"#1f4e9c\"/>\n";
    s += "<rect x=\"" + fmt("%.1f", b.left + fw) + "\" y=\"" + fmt("%.1f", y + 2) + "\" width=\"" + fmt("%.1f", bw) +
         "\" height=\"" + fmt("%.1f", b.bar_h - 4) + "\" fill=\"#9fb8e0\"/>\n";
    s += "<text x=\"" + fmt("%.1f", b.left + fw + bw + 6) + "\" y=\"" + fmt("%.1f", y + 13) + "\">" +
         fmt("%.3f", to_milliseconds(r.forward_gpu + r.backward_gpu)) + " ms, " + std::string(to_string(r.bound)) + "</text>\n";
    return s + "</g>\n";
}

}  // namespace detail

/// Renders the report; `bars` is how many layers the bar chart shows (one bar each).
[[nodiscard]] inline std::string prediction_svg(const Prediction& p, const Ceilings& ceilings, std::size_t bars = 20) {
    using detail::fmt;
    RooflineSvgOptions options;
    options.points = detail::layer_points(p);
    const std::string roofline = roofline_svg(ceilings, options);
    const auto rows = detail::slowest_layers(p, bars);
    double longest = 0;
    for (const auto* r : rows) longest = std::max(longest, (r->forward_gpu + r->backward_gpu).value());

    detail::BarLayout layout;
    const double height = layout.top + layout.bar_h * static_cast<double>(rows.size()) + 40;
    const std::string title = "GPU time per layer: " + p.kernels.model + ", batch " + std::to_string(p.batch) + ", " +
                              std::string(to_string(p.precision)) + " (top " + std::to_string(rows.size()) + "; step " +
                              fmt("%.3f", to_milliseconds(p.step_time)) + " ms)";
    std::string bars_svg = "<g font-family=\"sans-serif\" font-size=\"12\">\n";
    bars_svg += "<text x=\"20\" y=\"30\" font-size=\"15\" font-weight=\"bold\">" +
                detail::svg_escape(detail::fit_text(title, layout.width - 40, 15)) + "</text>\n";
    bars_svg += "<rect x=\"" + fmt("%.0f", layout.left) + "\" y=\"38\" width=\"12\" height=\"10\" fill=\"#1f4e9c\"/><text x=\"" +
                fmt("%.0f", layout.left + 16) + "\" y=\"47\">forward</text><rect x=\"" + fmt("%.0f", layout.left + 90) +
                "\" y=\"38\" width=\"12\" height=\"10\" fill=\"#9fb8e0\"/><text x=\"" + fmt("%.0f", layout.left + 106) +
                "\" y=\"47\">backward</text>\n";
    for (std::size_t i = 0; i < rows.size(); ++i) bars_svg += detail::bar_svg(*rows[i], i, longest, layout);
    bars_svg += "</g>\n";

    // The roofline document nests as it is; the bar chart sits below it.
    const double roofline_w = std::stod(roofline.substr(roofline.find("width=\"") + 7));
    const double roofline_h = std::stod(roofline.substr(roofline.find("height=\"") + 8));
    const double width = std::max(layout.width, roofline_w), total_h = roofline_h + height;
    std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", width) + "\" height=\"" +
                    fmt("%.0f", total_h) + "\" viewBox=\"0 0 " + fmt("%.0f", width) + " " + fmt("%.0f", total_h) +
                    "\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
    s += roofline;
    s += "<g transform=\"translate(0," + fmt("%.0f", roofline_h) + ")\">\n" + bars_svg + "</g>\n</svg>\n";
    return s;
}

}  // namespace roofsim
