#pragma once
// What a call throws, for tests that check an error's message: Catch2 v2 and v3 spell their string
// matchers apart, so the tests compare the message themselves.

#include <exception>
#include <string>

/// The message of what `f` throws ("" where it throws nothing).
template <class F>
std::string thrown_by(F&& f) {
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

/// Whether `text` holds `part`.
inline bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
