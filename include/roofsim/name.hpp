#pragma once
/// Name: the string type of the names a kernel carries (its op, its layer's module path). A step has
/// hundreds of kernels with names a little too long for std::string's in-place buffer
/// ("aten::cudnn_convolution", "layer1.0.downsample.bn"); a Name holds them in place, and a longer
/// one as the address of its one copy in a process-wide pool, so a Name is a plain value: kernels
/// are made, copied and freed without allocating, and a vector of them is copied as bytes.

#include <array>
#include <compare>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_set>

namespace roofsim {

namespace detail {

/// The characters of every name longer than Name::in_place made in this process, each once: a Name
/// holds the address of its copy here. Kept for the process's life (a name costs its characters
/// once, however many kernels carry it, and however often a model is predicted); thread-safe.
class LongNamePool {
public:
    /// The pooled copy of `chars` (added where it has none), valid until the process ends.
    [[nodiscard]] static std::string_view intern(std::string_view chars) {
        // Recently interned names, per thread: a model's long names come back kernel after kernel.
        struct Recent {
            const char* from = nullptr;
            std::size_t size = 0;
            std::string_view pooled;
        };
        thread_local std::array<Recent, 64> recent{};
        Recent& r = recent[(reinterpret_cast<std::uintptr_t>(chars.data()) / 8 + chars.size()) % recent.size()];
        if (r.from == chars.data() && r.size == chars.size() && r.pooled == chars) return r.pooled;
        LongNamePool& pool = instance();
        std::string_view pooled;
        {
            const std::lock_guard<std::mutex> lock(pool.mutex_);
            pooled = *pool.names_.emplace(chars).first;  // a node's string never moves
        }
        r = {chars.data(), chars.size(), pooled};
        return pooled;
    }

private:
    std::mutex mutex_;
    std::unordered_set<std::string> names_;

    /// Never destroyed, so that a name read while static objects are destroyed still holds.
    [[nodiscard]] static LongNamePool& instance() {
        static LongNamePool* const pool = new LongNamePool;
        return *pool;
    }
};

}  // namespace detail

/// A name held in place up to `in_place` characters (a longer one pooled: detail::LongNamePool);
/// reads as a std::string_view, compares with strings, and is assigned from them. Trivially copyable:
/// a copy, or a move (which leaves the source as it was), copies its bytes.
class Name {
public:
    /// The longest name held in place.
    static constexpr std::size_t in_place = 31;

    /// The empty name.
    Name() noexcept = default;
    /// A copy of `s`.
    Name(std::string_view s) { assign(s); }
    /// A copy of the C string `s`.
    Name(const char* s) : Name(std::string_view(s)) {}
    /// A copy of `s`.
    Name(const std::string& s) : Name(std::string_view(s)) {}

    /// Copies the characters of any string (std::string_view, std::string, C string): `s` may be a
    /// view of this name.
    template <class String>
        requires(std::convertible_to<const String&, std::string_view> && !std::same_as<String, Name>)
    Name& operator=(const String& s) {
        assign(std::string_view(s));
        return *this;
    }

    /// Appends `s` (which may be a view of this name).
    Name& operator+=(std::string_view s) {
        if (s.empty()) return *this;
        const std::size_t old_size = size(), new_size = old_size + s.size();
        // In place before and after: `s`, even a view of this name, does not overlap where it goes.
        if (new_size <= in_place) {
            copy_short(bytes_.data() + old_size, s.data(), s.size());
            set_size(new_size);
            return *this;
        }
        std::string joined;
        joined.reserve(new_size);
        joined.append(view()).append(s);
        assign(joined);
        return *this;
    }

    /// The characters.
    [[nodiscard]] std::string_view view() const noexcept {
        return pooled() ? std::string_view(pooled_chars(), pooled_length()) : std::string_view(bytes_.data(), size_byte());
    }
    /// The characters, wherever a std::string_view is taken.
    operator std::string_view() const noexcept { return view(); }
    /// The characters as a std::string (an allocation for a long one, so never implicit).
    [[nodiscard]] std::string str() const { return std::string(view()); }
    /// str(), for std::string(name) and static_cast.
    explicit operator std::string() const { return str(); }

    /// The first character (not followed by a zero).
    [[nodiscard]] const char* data() const noexcept { return view().data(); }
    /// The number of characters.
    [[nodiscard]] std::size_t size() const noexcept { return view().size(); }
    /// Whether it has no characters (a pooled name has many).
    [[nodiscard]] bool empty() const noexcept { return size_byte() == 0; }
    /// The characters, as a range.
    [[nodiscard]] const char* begin() const noexcept { return data(); }
    /// The end of the characters.
    [[nodiscard]] const char* end() const noexcept { return data() + size(); }

    /// Compares the characters with any string (a Name, std::string, std::string_view, C string).
    template <class String>
        requires std::convertible_to<const String&, std::string_view>
    friend bool operator==(const Name& a, const String& b) noexcept {
        return a.view() == std::string_view(b);
    }
    /// Orders by the characters, as std::string_view does.
    template <class String>
        requires std::convertible_to<const String&, std::string_view>
    friend std::strong_ordering operator<=>(const Name& a, const String& b) noexcept {
        return a.view() <=> std::string_view(b);
    }
    /// Writes the characters.
    friend std::ostream& operator<<(std::ostream& out, const Name& n) { return out << n.view(); }

private:
    static constexpr std::uint8_t pooled_size = 0xff;  ///< the size byte of a pooled name
    static_assert(in_place < pooled_size && in_place >= sizeof(char*) + sizeof(std::size_t));

    /// In place: the characters, then (last) their count. Pooled: the address and the length of the
    /// pool's copy, stored bytewise, and `pooled_size` last. One array, so that a copy is a few wide moves.
    std::array<char, in_place + 1> bytes_{};

    [[nodiscard]] std::uint8_t size_byte() const noexcept { return static_cast<std::uint8_t>(bytes_[in_place]); }
    void set_size(std::size_t size) noexcept { bytes_[in_place] = static_cast<char>(static_cast<std::uint8_t>(size)); }
    [[nodiscard]] bool pooled() const noexcept { return size_byte() == pooled_size; }
    [[nodiscard]] const char* pooled_chars() const noexcept {
        const char* chars = nullptr;
        std::memcpy(&chars, bytes_.data(), sizeof chars);
        return chars;
    }
    [[nodiscard]] std::size_t pooled_length() const noexcept {
        std::size_t size = 0;
        std::memcpy(&size, bytes_.data() + sizeof(char*), sizeof size);
        return size;
    }

    /// Copies `n` characters (at most in_place) from `from` to `to`, which may overlap, without a call
    /// to memmove: words of 8 (or 4) characters from the start and from the end, overlapping where n is
    /// not a multiple, all loaded before any is stored.
    /// Copies n bytes, sizeof(Word) <= n <= 2 sizeof(Word), as two words that may overlap: the first
    /// and the last sizeof(Word), both loaded before either is stored.
    template <class Word>
    static void copy_head_tail(char* to, const char* from, std::size_t n) noexcept {
        Word head = 0, tail = 0;
        std::memcpy(&head, from, sizeof head);
        std::memcpy(&tail, from + n - sizeof tail, sizeof tail);
        std::memcpy(to, &head, sizeof head);
        std::memcpy(to + n - sizeof tail, &tail, sizeof tail);
    }

    static void copy_short(char* to, const char* from, std::size_t n) noexcept {
        const auto load = [](auto& word, const char* at) { std::memcpy(&word, at, sizeof word); };
        const auto store = [](char* at, const auto& word) { std::memcpy(at, &word, sizeof word); };
        if (n >= 16) {  // [0, 16), [16, 32) where longer than 32, and [n - 16, n)
            std::array<std::uint64_t, 6> words{};
            load(words[0], from);
            load(words[1], from + 8);
            if (n > 32) {
                load(words[2], from + 16);
                load(words[3], from + 24);
            }
            load(words[4], from + n - 16);
            load(words[5], from + n - 8);
            store(to, words[0]);
            store(to + 8, words[1]);
            if (n > 32) {
                store(to + 16, words[2]);
                store(to + 24, words[3]);
            }
            store(to + n - 16, words[4]);
            store(to + n - 8, words[5]);
        } else if (n >= 8) {
            copy_head_tail<std::uint64_t>(to, from, n);
        } else if (n >= 4) {
            copy_head_tail<std::uint32_t>(to, from, n);
        } else if (n > 0) {
            const char first = from[0], middle = from[n / 2], last = from[n - 1];
            to[0] = first;
            to[n / 2] = middle;
            to[n - 1] = last;
        }
    }

    /// Takes a copy of `s` (which may be a view of this name), over whatever the name held.
    void assign(std::string_view s) {
        if (s.size() <= in_place) {
            copy_short(bytes_.data(), s.data(), s.size());  // loads before it stores: `s` may be ours
            set_size(s.size());
            return;
        }
        const std::string_view kept = detail::LongNamePool::intern(s);
        const char* const chars = kept.data();
        const std::size_t size = kept.size();
        std::memcpy(bytes_.data(), &chars, sizeof chars);
        std::memcpy(bytes_.data() + sizeof chars, &size, sizeof size);
        set_size(pooled_size);
    }
};

static_assert(std::is_trivially_copyable_v<Name>, "kernels are copied as bytes");

}  // namespace roofsim
