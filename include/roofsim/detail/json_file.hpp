#pragma once
/// Reading JSON text and files with errors that name where the text came from.

#include <roofsim/report/atomic_write.hpp>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace roofsim::detail {

/// Parses JSON text; a syntax error names the origin and the byte offset, and so does a number JSON
/// allows but a double cannot hold (1e400: nlohmann's out_of_range).
[[nodiscard]] inline nlohmann::json parse_json_text(std::string_view text, std::string_view origin) {
    try {
        return nlohmann::json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::parse_error& e) {
        throw std::runtime_error(std::string(origin) + ": not valid JSON: " + e.what());
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(std::string(origin) + ": not readable JSON: " + e.what());
    }
}

/// Reads and parses a JSON file; a missing or unreadable file, a directory, a FIFO or a device is an
/// error naming the path (a FIFO would block the read, a directory reads as nothing).
[[nodiscard]] inline nlohmann::json read_json_file(const std::filesystem::path& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    if (st.type() == fs::file_type::directory) throw std::runtime_error(path.string() + ": is a directory, not a file");
    if (st.type() == fs::file_type::fifo) throw std::runtime_error(path.string() + ": is a FIFO (named pipe), not a file");
    if (!ec && st.type() != fs::file_type::regular && st.type() != fs::file_type::not_found) {
        throw std::runtime_error(path.string() + ": is not a regular file");  // a device, a socket
    }
    errno = 0;
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        const int fault = errno;  // open(2)'s, where the library leaves it (libstdc++ does)
        throw std::runtime_error(path.string() + ": cannot open for reading" +
                                 (fault != 0 ? ": " + std::generic_category().message(fault) : std::string()));
    }
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
