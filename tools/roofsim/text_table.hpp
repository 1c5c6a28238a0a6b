#pragma once
// A plain-text table with right-aligned numeric columns, for the CLI's human-readable output.

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ostream>
#include <optional>
#include <string>
#include <vector>

namespace roofsim::cli {

class TextTable {
public:
    explicit TextTable(std::vector<std::string> header) : header_(std::move(header)) {}

    void add_row(std::vector<std::string> row) {
        row.resize(header_.size());
        rows_.push_back(std::move(row));
    }

    void print(std::ostream& out) const {
        std::vector<std::size_t> width(header_.size());
        for (std::size_t c = 0; c < header_.size(); ++c) {
            width[c] = header_[c].size();
            for (const auto& r : rows_) width[c] = std::max(width[c], r[c].size());
        }
        // Columns of numbers (or "-") are right-aligned, text columns left-aligned.
        std::vector<bool> numeric(header_.size(), !rows_.empty());
        for (const auto& r : rows_) {
            for (std::size_t c = 0; c < r.size(); ++c) {
                const char f = r[c].empty() ? 'x' : r[c][0];
                if (!(std::isdigit(static_cast<unsigned char>(f)) || r[c] == "-")) numeric[c] = false;
            }
        }
        auto line = [&](const std::vector<std::string>& cells) {
            std::string s;
            for (std::size_t c = 0; c < cells.size(); ++c) {
                const std::string pad(width[c] - cells[c].size(), ' ');
                s += (c ? "  " : "") + (numeric[c] ? pad + cells[c] : cells[c] + pad);
            }
            while (!s.empty() && s.back() == ' ') s.pop_back();
            out << s << '\n';
        };
        line(header_);
        std::vector<std::string> rule;
        for (auto w : width) rule.emplace_back(w, '-');
        line(rule);
        for (const auto& r : rows_) line(r);
    }

private:
    std::vector<std::string> header_;
    std::vector<std::vector<std::string>> rows_;
};

/// printf-style number formatting for table cells.
inline std::string format_number(const char* format, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, format, v);
    return buf;
}

/// A fraction as a percentage cell (`format`, e.g. "%+.1f", applied to 100 x it), "-" where there is none.
inline std::string percent_or_dash(const char* format, std::optional<double> fraction) {
    return fraction ? format_number(format, 100 * *fraction) : "-";
}

}  // namespace roofsim::cli
