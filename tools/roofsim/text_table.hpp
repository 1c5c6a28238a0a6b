#pragma once
// A plain-text table with right-aligned numeric columns, for the CLI's human-readable output. A table
// fits its width (120 columns unless told): headers wrap at spaces first, then the widest text columns
// give way (shortened with "..." at the end or in the middle, or wrapped, as each column says), and
// as a last resort the gap between columns narrows to one space.

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <numeric>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

namespace roofsim::cli {

/// The terminal width every table and paragraph of the CLI fits.
inline constexpr std::size_t max_columns = 120;

/// How a text cell wider than its column is shown.
enum class Overflow { shorten_end, shorten_middle, wrap };

/// `text` broken at spaces into lines of at most `width` characters (a longer word is cut).
inline std::vector<std::string> wrap_words(const std::string& text, std::size_t width) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    std::string word, line;
    while (in >> word) {
        while (word.size() > width) {
            if (!line.empty()) lines.push_back(line), line.clear();
            lines.push_back(word.substr(0, width));
            word.erase(0, width);
        }
        if (!line.empty() && line.size() + 1 + word.size() > width) lines.push_back(line), line.clear();
        line += (line.empty() ? "" : " ") + word;
    }
    if (!line.empty() || lines.empty()) lines.push_back(line);
    return lines;
}

/// `text` cut to `width` characters with "..." at the end, or in the middle.
inline std::string shorten(const std::string& text, std::size_t width, bool middle) {
    if (text.size() <= width) return text;
    if (width <= 3) return text.substr(0, width);
    if (!middle) return text.substr(0, width - 3) + "...";
    const std::size_t head = (width - 3 + 1) / 2, tail = width - 3 - head;
    return text.substr(0, head) + "..." + text.substr(text.size() - tail);
}

/// Every line of `text` longer than `width` wrapped at spaces; continuation lines are indented two
/// spaces more than the line they continue.
inline std::string wrap_lines(const std::string& text, std::size_t width = max_columns) {
    std::istringstream in(text);
    std::string line, out;
    while (std::getline(in, line)) {
        if (line.size() <= width) {
            out += line + '\n';
            continue;
        }
        const std::size_t indent = line.find_first_not_of(' ') == std::string::npos ? 0 : line.find_first_not_of(' ');
        const std::string lead(indent, ' '), more(indent + 2, ' ');
        const auto parts = wrap_words(line.substr(indent), width - indent - 2);
        for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? more : lead) + parts[i] + '\n';
    }
    return out;
}

class TextTable {
public:
    explicit TextTable(std::vector<std::string> header, std::size_t max_width = max_columns)
        : header_(std::move(header)), overflow_(header_.size(), Overflow::shorten_end), max_width_(max_width) {}

    /// How column `c` gives way when the table is too wide (text columns only; numbers never do).
    TextTable& overflow(std::size_t c, Overflow how) {
        overflow_.at(c) = how;
        return *this;
    }

    void add_row(std::vector<std::string> row) {
        row.resize(header_.size());
        rows_.push_back(std::move(row));
    }

    void print(std::ostream& out) const {
        const auto numeric = numeric_columns();
        // a narrower gap before any cell is shortened
        std::size_t gap = 2;
        auto width = fit(numeric, gap, false);
        if (total(width, gap) > max_width_) {
            const auto narrow = fit(numeric, 1, false);
            if (total(narrow, 1) <= max_width_) width = narrow, gap = 1;
            else width = fit(numeric, gap, true);
            if (total(width, gap) > max_width_) width = fit(numeric, gap = 1, true);
        }
        std::vector<std::vector<std::string>> head;
        for (std::size_t c = 0; c < header_.size(); ++c) head.push_back(wrap_words(header_[c], width[c]));
        print_row(out, head, width, numeric, gap);
        std::vector<std::vector<std::string>> rule;
        for (auto w : width) rule.push_back({std::string(w, '-')});
        print_row(out, rule, width, numeric, gap);
        for (const auto& r : rows_) {
            std::vector<std::vector<std::string>> cells;
            for (std::size_t c = 0; c < r.size(); ++c) cells.push_back(cell_lines(r[c], c, width[c]));
            print_row(out, cells, width, numeric, gap);
        }
    }

private:
    /// Columns of numbers (or "-") are right-aligned and never shortened.
    std::vector<bool> numeric_columns() const {
        std::vector<bool> numeric(header_.size(), !rows_.empty());
        for (const auto& r : rows_) {
            for (std::size_t c = 0; c < r.size(); ++c) {
                const char f = r[c].empty() ? 'x' : r[c][0];
                const bool number = std::isdigit(static_cast<unsigned char>(f)) ||
                                    ((f == '+' || f == '-') && r[c].size() > 1) || r[c] == "-";
                if (!number) numeric[c] = false;
            }
        }
        return numeric;
    }

    std::size_t total(const std::vector<std::size_t>& width, std::size_t gap) const {
        return std::accumulate(width.begin(), width.end(), std::size_t{0}) + gap * (width.empty() ? 0 : width.size() - 1);
    }

    std::vector<std::size_t> fit(const std::vector<bool>& numeric, std::size_t gap, bool shorten_cells) const {
        const std::size_t n = header_.size();
        std::vector<std::size_t> width(n), cells(n, 0), word(n, 0);
        for (std::size_t c = 0; c < n; ++c) {
            for (const auto& r : rows_) cells[c] = std::max(cells[c], r[c].size());
            std::istringstream in(header_[c]);
            for (std::string w; in >> w;) word[c] = std::max(word[c], w.size());
            width[c] = std::max(cells[c], header_[c].size());
        }
        // headers wrap at spaces: the column the most wider than its cells first
        for (bool again = true; again && total(width, gap) > max_width_;) {
            again = false;
            std::size_t best = n, slack = 0;
            for (std::size_t c = 0; c < n; ++c) {
                const std::size_t floor = std::max(cells[c], word[c]);
                if (width[c] > floor && width[c] - floor > slack) best = c, slack = width[c] - floor;
            }
            if (best < n) width[best] -= std::min(slack, total(width, gap) - max_width_), again = true;
        }
        // then text columns give way, the widest first, down to 10 columns or their longest header word
        while (shorten_cells && total(width, gap) > max_width_) {
            std::size_t best = n;
            for (std::size_t c = 0; c < n; ++c) {
                const std::size_t floor = std::max<std::size_t>(std::min<std::size_t>(cells[c], 10), word[c]);
                if (!numeric[c] && width[c] > floor && (best == n || width[c] > width[best])) best = c;
            }
            if (best == n) break;
            --width[best];
        }
        return width;
    }

    std::vector<std::string> cell_lines(const std::string& text, std::size_t c, std::size_t width) const {
        if (text.size() <= width) return {text};
        if (overflow_[c] == Overflow::wrap) return wrap_words(text, width);
        return {shorten(text, width, overflow_[c] == Overflow::shorten_middle)};
    }

    void print_row(std::ostream& out, const std::vector<std::vector<std::string>>& cells, const std::vector<std::size_t>& width,
                   const std::vector<bool>& numeric, std::size_t gap) const {
        std::size_t lines = 0;
        for (const auto& c : cells) lines = std::max(lines, c.size());
        for (std::size_t l = 0; l < lines; ++l) {
            std::string s;
            for (std::size_t c = 0; c < cells.size(); ++c) {
                const std::string cell = l < cells[c].size() ? cells[c][l] : "";
                const std::string pad(width[c] - std::min(width[c], cell.size()), ' ');
                s += (c ? std::string(gap, ' ') : "") + (numeric[c] ? pad + cell : cell + pad);
            }
            while (!s.empty() && s.back() == ' ') s.pop_back();
            out << s << '\n';
        }
    }

    std::vector<std::string> header_;
    std::vector<Overflow> overflow_;
    std::size_t max_width_;
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

/// Distinct long texts (sources) printed once, as numbered notes under a table; the table's cells
/// refer to them as "[n]".
class Notes {
public:
    /// The reference "[n]" of `text`, numbering it where it is new.
    std::string ref(const std::string& text) {
        auto it = std::find(texts_.begin(), texts_.end(), text);
        if (it == texts_.end()) it = texts_.insert(texts_.end(), text);
        return "[" + std::to_string(it - texts_.begin() + 1) + "]";
    }
    void print(std::ostream& out, std::size_t width = max_columns) const {
        for (std::size_t i = 0; i < texts_.size(); ++i) {
            const std::string tag = "[" + std::to_string(i + 1) + "] ";
            const auto lines = wrap_words(texts_[i], width - tag.size());
            for (std::size_t l = 0; l < lines.size(); ++l) out << (l ? std::string(tag.size(), ' ') : tag) << lines[l] << '\n';
        }
    }
    bool empty() const { return texts_.empty(); }

private:
    std::vector<std::string> texts_;
};

}  // namespace roofsim::cli
