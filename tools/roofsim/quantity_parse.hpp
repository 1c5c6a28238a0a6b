#pragma once
// Parses command-line amounts such as "1e12", "4.5G", "2GiB", "300T": decimal suffixes k M G T P
// (powers of 1000) and binary suffixes Ki Mi Gi Ti (powers of 1024); a trailing "B" or "FLOP" is
// allowed and ignored. Returns nullopt for anything else, negative numbers and non-finite values.

#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

namespace roofsim::cli {

inline std::optional<double> parse_amount(const std::string& text) {
    if (text.empty()) return std::nullopt;
    const char* begin = text.c_str();
    char* end = nullptr;
    const double number = std::strtod(begin, &end);
    if (end == begin) return std::nullopt;
    std::string suffix(end);
    for (const char* unit : {"FLOPs", "FLOP", "flops", "flop", "B"}) {
        const std::string u(unit);
        if (suffix.size() >= u.size() && suffix.compare(suffix.size() - u.size(), u.size(), u) == 0) {
            suffix.erase(suffix.size() - u.size());
            break;
        }
    }
    double scale = 1.0;
    if (suffix.empty()) scale = 1.0;
    else if (suffix == "k" || suffix == "K") scale = 1e3;
    else if (suffix == "M") scale = 1e6;
    else if (suffix == "G") scale = 1e9;
    else if (suffix == "T") scale = 1e12;
    else if (suffix == "P") scale = 1e15;
    else if (suffix == "Ki") scale = 1024.0;
    else if (suffix == "Mi") scale = 1024.0 * 1024.0;
    else if (suffix == "Gi") scale = 1024.0 * 1024.0 * 1024.0;
    else if (suffix == "Ti") scale = 1024.0 * 1024.0 * 1024.0 * 1024.0;
    else return std::nullopt;
    const double value = number * scale;
    if (!std::isfinite(value) || value < 0) return std::nullopt;
    return value;
}

}  // namespace roofsim::cli
