#pragma once
// Parses command-line amounts. A FLOP amount: a plain number, an optional decimal suffix k M G T P
// (powers of 1000) and an optional "FLOP" or "FLOPs" ("1e12", "4.5G", "300TFLOP"). A byte amount: a
// plain number, an optional decimal suffix k M G T P or binary suffix Ki Mi Gi Ti (powers of 1024) and
// an optional "B" ("2GiB", "300MB", "4096"). Anything else, negative numbers and non-finite values
// give nullopt.

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

namespace roofsim::cli {

namespace detail {

/// The number at the start of `text` (digits or a point first: no sign, no "nan", no "inf") and the rest.
inline std::optional<std::pair<double, std::string>> leading_number(const std::string& text) {
    if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '.')) return std::nullopt;
    if (text.size() > 1 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) return std::nullopt;
    const char* begin = text.c_str();
    char* end = nullptr;
    const double number = std::strtod(begin, &end);
    if (end == begin) return std::nullopt;
    return std::pair{number, std::string(end)};
}

/// `suffix` without its unit word, when it ends with one of `units`.
inline std::string drop_unit(std::string suffix, std::initializer_list<const char*> units) {
    for (const char* unit : units) {
        const std::string u(unit);
        if (suffix.size() >= u.size() && suffix.compare(suffix.size() - u.size(), u.size(), u) == 0) {
            return suffix.erase(suffix.size() - u.size());
        }
    }
    return suffix;
}

inline std::optional<double> decimal_scale(const std::string& s) {
    if (s.empty()) return 1.0;
    if (s == "k" || s == "K") return 1e3;
    if (s == "M") return 1e6;
    if (s == "G") return 1e9;
    if (s == "T") return 1e12;
    if (s == "P") return 1e15;
    return std::nullopt;
}

inline std::optional<double> binary_scale(const std::string& s) {
    if (s == "Ki") return 1024.0;
    if (s == "Mi") return 1024.0 * 1024.0;
    if (s == "Gi") return 1024.0 * 1024.0 * 1024.0;
    if (s == "Ti") return 1024.0 * 1024.0 * 1024.0 * 1024.0;
    return std::nullopt;
}

inline std::optional<double> finite_product(double number, std::optional<double> scale) {
    if (!scale) return std::nullopt;
    const double value = number * *scale;
    if (!std::isfinite(value) || value < 0) return std::nullopt;
    return value;
}

}  // namespace detail

/// A FLOP amount: "1e12", "4.5G", "300TFLOP", "2 PFLOPs" is refused (no spaces); never bytes.
inline std::optional<double> parse_flops(const std::string& text) {
    const auto n = detail::leading_number(text);
    if (!n) return std::nullopt;
    const std::string suffix = detail::drop_unit(n->second, {"FLOPs", "FLOPS", "FLOP", "flops", "flop"});
    return detail::finite_product(n->first, detail::decimal_scale(suffix));
}

/// A byte amount: "4096", "300M", "2GiB", "1.5TB".
inline std::optional<double> parse_bytes(const std::string& text) {
    const auto n = detail::leading_number(text);
    if (!n) return std::nullopt;
    const std::string suffix = detail::drop_unit(n->second, {"B"});
    auto scale = detail::decimal_scale(suffix);
    if (!scale) scale = detail::binary_scale(suffix);
    return detail::finite_product(n->first, scale);
}

}  // namespace roofsim::cli
