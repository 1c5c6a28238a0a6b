#pragma once
/// "Did you mean" suggestions: the known names closest to a mistyped one.

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace roofsim::detail {

/// Levenshtein distance, for "did you mean" suggestions.
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t above = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0u : 1u)});
            diagonal = above;
        }
    }
    return row[b.size()];
}

/// The names of `known` within a third of their length (at least 2 edits) of `typed`, closest first.
template <class Names>
[[nodiscard]] std::vector<std::string> close_matches(std::string_view typed, const Names& known, std::size_t at_most = 3) {
    std::vector<std::pair<std::size_t, std::string>> scored;
    for (const auto& name : known) {
        const std::string_view k(name);
        const std::size_t d = edit_distance(typed, k);
        if (d <= std::max<std::size_t>(2, k.size() / 3)) scored.emplace_back(d, std::string(k));
    }
    std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::string> out;
    for (auto& s : scored) {
        if (out.size() == at_most) break;
        out.push_back(std::move(s.second));
    }
    return out;
}

/// "; did you mean a or b?" for the close matches of `typed` among `known`, or empty.
template <class Names>
[[nodiscard]] std::string did_you_mean(std::string_view typed, const Names& known) {
    const auto close = close_matches(typed, known);
    if (close.empty()) return {};
    std::string out = "; did you mean ";
    for (std::size_t i = 0; i < close.size(); ++i) out += (i == 0 ? "" : i + 1 == close.size() ? " or " : ", ") + close[i];
    return out + "?";
}

}  // namespace roofsim::detail
