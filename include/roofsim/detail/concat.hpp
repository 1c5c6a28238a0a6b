#pragma once
/// String joining without intermediate copies.

#include <string>
#include <string_view>

namespace roofsim::detail {

/// `a`, `b` and `c` in one string, allocated once.
[[nodiscard]] inline std::string concat(std::string_view a, std::string_view b, std::string_view c = {}) {
    std::string s;
    s.reserve(a.size() + b.size() + c.size());
    s.append(a).append(b).append(c);
    return s;
}

}  // namespace roofsim::detail
