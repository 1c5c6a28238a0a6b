#pragma once
/// The SVG report of a prediction: the GPU's roofline with every layer's forward and backward pass
/// as a point (FLOPs per DRAM byte, FLOP/s attained), and a bar chart of the layers that take the
/// most GPU time.

#include <roofsim/predict.hpp>
#include <roofsim/roofline_svg.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace roofsim {

/// Renders the report; `bars` is how many layers the bar chart shows.
[[nodiscard]] inline std::string prediction_svg(const Prediction& p, const Ceilings& ceilings, std::size_t bars = 20) {
    using detail::fmt;
    RooflineSvgOptions options;
    for (const auto& l : p.layers) {
        auto point = [&](const char* pass, Flops flops, Bytes bytes, Seconds time) {
            if (flops.value() > 0 && bytes.value() > 0 && time.value() > 0) {
                options.points.push_back({l.layer.str() + " " + pass, flops / bytes, flops / time});
            }
        };
        point("forward", l.forward_flops, l.forward_bytes, l.forward_gpu);
        point("backward", l.flops - l.forward_flops, l.bytes - l.forward_bytes, l.backward_gpu);
    }
    const std::string roofline = roofline_svg(ceilings, options);

    std::vector<const LayerTime*> rows;
    for (const auto& l : p.layers) rows.push_back(&l);
    std::sort(rows.begin(), rows.end(), [](const LayerTime* a, const LayerTime* b) {
        return (a->forward_gpu + a->backward_gpu) > (b->forward_gpu + b->backward_gpu);
    });
    if (rows.size() > bars) rows.resize(bars);
    double longest = 0;
    for (const auto* r : rows) longest = std::max(longest, (r->forward_gpu + r->backward_gpu).value());

    const double left = 260, bar_h = 18, top = 60, width = 900;
    const double chart_w = width - left - 120;
    const double height = top + bar_h * static_cast<double>(rows.size()) + 40;
    std::string bars_svg = "<g font-family=\"sans-serif\" font-size=\"12\">\n";
    bars_svg += "<text x=\"20\" y=\"30\" font-size=\"15\" font-weight=\"bold\">GPU time per layer: " +
                detail::svg_escape(p.kernels.model) + ", batch " + std::to_string(p.batch) + ", " +
                detail::svg_escape(std::string(to_string(p.precision))) + " (top " + std::to_string(rows.size()) + "; step " +
                fmt("%.3f", to_milliseconds(p.step_time)) + " ms)</text>\n";
    bars_svg += "<rect x=\"" + fmt("%.0f", left) + "\" y=\"38\" width=\"12\" height=\"10\" fill=\"#1f4e9c\"/><text x=\"" +
                fmt("%.0f", left + 16) + "\" y=\"47\">forward</text><rect x=\"" + fmt("%.0f", left + 90) +
                "\" y=\"38\" width=\"12\" height=\"10\" fill=\"#9fb8e0\"/><text x=\"" + fmt("%.0f", left + 106) +
                "\" y=\"47\">backward</text>\n";
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const LayerTime& r = *rows[i];
        const double y = top + bar_h * static_cast<double>(i);
        const double fw = longest > 0 ? chart_w * r.forward_gpu.value() / longest : 0;
        const double bw = longest > 0 ? chart_w * r.backward_gpu.value() / longest : 0;
        bars_svg += "<text x=\"" + fmt("%.0f", left - 6) + "\" y=\"" + fmt("%.1f", y + 13) + "\" text-anchor=\"end\">" +
                    detail::svg_escape(r.layer) + "</text>\n";
        bars_svg += "<rect x=\"" + fmt("%.1f", left) + "\" y=\"" + fmt("%.1f", y + 2) + "\" width=\"" + fmt("%.1f", fw) +
                    "\" height=\"" + fmt("%.1f", bar_h - 4) + "\" fill=\"#1f4e9c\"/>\n";
        bars_svg += "<rect x=\"" + fmt("%.1f", left + fw) + "\" y=\"" + fmt("%.1f", y + 2) + "\" width=\"" + fmt("%.1f", bw) +
                    "\" height=\"" + fmt("%.1f", bar_h - 4) + "\" fill=\"#9fb8e0\"/>\n";
        bars_svg += "<text x=\"" + fmt("%.1f", left + fw + bw + 6) + "\" y=\"" + fmt("%.1f", y + 13) + "\">" +
                    fmt("%.3f", to_milliseconds(r.forward_gpu + r.backward_gpu)) + " ms, " + std::string(to_string(r.bound)) +
                    "</text>\n";
    }
    bars_svg += "</g>\n";

    // The roofline document nests as it is; the bar chart sits below it.
    const double roofline_w = std::stod(roofline.substr(roofline.find("width=\"") + 7));
    const double roofline_h = std::stod(roofline.substr(roofline.find("height=\"") + 8));
    std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", std::max(width, roofline_w)) + "\" height=\"" +
                    fmt("%.0f", roofline_h + height) + "\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
    s += roofline;
    s += "<g transform=\"translate(0," + fmt("%.0f", roofline_h) + ")\">\n" + bars_svg + "</g>\n</svg>\n";
    return s;
}

}  // namespace roofsim
