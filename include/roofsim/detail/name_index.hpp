#pragma once
/// Names to small ids for the predictor's inner loops (layer names, tensor names, op names): open
/// addressing over a power-of-two table of (name, id), with no allocation per name. The names are
/// views: the strings they point into must outlive the index.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string_view>
#include <vector>

namespace roofsim::detail {

/// a == b for the short names of a step, eight bytes at a time in place (no call to memcmp).
[[nodiscard]] inline bool same_name(std::string_view a, std::string_view b) noexcept {
    const std::size_t n = a.size();
    if (n != b.size()) return false;
    if (n < 8) {
        for (std::size_t i = 0; i < n; ++i) {
            if (a[i] != b[i]) return false;
        }
        return true;
    }
    const auto word = [](std::string_view s, std::size_t at) {
        std::uint64_t w = 0;
        std::memcpy(&w, s.data() + at, 8);
        return w;
    };
    for (std::size_t i = 0; i + 8 < n; i += 8) {  // the last word overlaps the one before
        if (word(a, i) != word(b, i)) return false;
    }
    return word(a, n - 8) == word(b, n - 8);
}

class NameIndex {
public:
    static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();

    /// An index sized for `expected` names (it grows past them).
    explicit NameIndex(std::size_t expected = 0) { slots_.resize(capacity_for(expected)); }

    /// Gives `name` the id `id` unless it has one already; returns its id.
    std::size_t insert(std::string_view name, std::size_t id) {
        if (2 * (size_ + 1) > slots_.size()) grow();
        Slot& slot = slots_[probe(name)];
        if (slot.id == none) {
            slot = {name, id};
            ++size_;
        }
        return slot.id;
    }

    /// The id of `name`, or none.
    [[nodiscard]] std::size_t find(std::string_view name) const { return slots_[probe(name)].id; }

private:
    struct Slot {
        std::string_view name;
        std::size_t id = none;
    };
    std::vector<Slot> slots_;
    std::size_t size_ = 0;

    [[nodiscard]] static std::size_t capacity_for(std::size_t names) {
        std::size_t capacity = 16;
        while (capacity < 2 * names) capacity *= 2;
        return capacity;
    }

    /// A hash of short names, eight bytes at a time (multiply, fold the high half into the low); the
    /// last word of a longer name overlaps the one before.
    [[nodiscard]] static std::size_t hash(std::string_view name) {
        constexpr std::uint64_t multiplier = 0x9e3779b97f4a7c15;
        const std::size_t n = name.size();
        std::uint64_t h = n * multiplier;
        const auto mix = [&](std::uint64_t word) {
            h = (h ^ word) * multiplier;
            h ^= h >> 32;
        };
        if (n < 8) {
            std::uint64_t word = 0;
            for (std::size_t i = 0; i < n; ++i) word |= std::uint64_t{static_cast<unsigned char>(name[i])} << (8 * i);
            mix(word);
        } else {
            std::uint64_t word = 0;
            for (std::size_t i = 0; i + 8 < n; i += 8) {
                std::memcpy(&word, name.data() + i, 8);
                mix(word);
            }
            std::memcpy(&word, name.data() + n - 8, 8);
            mix(word);
        }
        return static_cast<std::size_t>(h);
    }

    /// The slot that holds `name`, or the empty slot where it would go (the table is never full).
    [[nodiscard]] std::size_t probe(std::string_view name) const {
        const std::size_t mask = slots_.size() - 1;
        std::size_t i = hash(name) & mask;
        while (slots_[i].id != none && !same_name(slots_[i].name, name)) i = (i + 1) & mask;
        return i;
    }

    void grow() {
        std::vector<Slot> old(slots_.size() * 2);
        old.swap(slots_);
        for (const Slot& s : old) {
            if (s.id != none) slots_[probe(s.name)] = s;
        }
    }
};

}  // namespace roofsim::detail
