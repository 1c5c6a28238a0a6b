#pragma once
/// Reading JSON text and files with errors that name where the text came from.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace roofsim::detail {

/// Parses JSON text; a syntax error names the origin and the byte offset.
[[nodiscard]] inline nlohmann::json parse_json_text(std::string_view text, std::string_view origin) {
    try {
        return nlohmann::json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::parse_error& e) {
        throw std::runtime_error(std::string(origin) + ": not valid JSON: " + e.what());
    }
}

/// Reads and parses a JSON file; a missing or unreadable file is an error naming the path.
[[nodiscard]] inline nlohmann::json read_json_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path.string() + ": cannot open for reading");
    std::ostringstream text;
    text << in.rdbuf();
    return parse_json_text(text.str(), path.filename().string());
}

}  // namespace roofsim::detail
