#pragma once
/// Reading JSON text and files with errors that name where the text came from.

#include <roofsim/report/atomic_write.hpp>

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

/// Writes text atomically (write_file_atomically: a reader sees the old file or the new one, never
/// half of one; a failure leaves the old file as it was).
inline void write_text_atomically(const std::string& text, const std::filesystem::path& path) {
    write_file_atomically(path, text);
}

/// Writes a JSON document atomically, indented, with a final newline.
inline void write_json_atomically(const nlohmann::json& document, const std::filesystem::path& path) {
    write_text_atomically(document.dump(1) + "\n", path);
}

}  // namespace roofsim::detail
