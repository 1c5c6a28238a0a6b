#pragma once
/// A tensor shape during lowering (a few dimensions, no allocation), and its element count.

#include <roofsim/graph.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace roofsim {

namespace detail {

/// A tensor shape while lowering: up to eight dimensions in place (no allocation), more on the heap;
/// its element count is remembered until the shape changes.
class Shape {
public:
    Shape() = default;
    Shape(std::initializer_list<std::int64_t> dims) { assign(dims.begin(), dims.end()); }
    explicit Shape(const std::vector<std::int64_t>& dims) { assign(dims.begin(), dims.end()); }

    [[nodiscard]] std::size_t size() const { return size_; }
    [[nodiscard]] bool empty() const { return size_ == 0; }
    [[nodiscard]] const std::int64_t* begin() const { return size_ <= in_place ? dims_.data() : more_.data(); }
    [[nodiscard]] const std::int64_t* end() const { return begin() + size_; }
    [[nodiscard]] std::int64_t* begin() {
        changed();  // the caller may write through it
        return size_ <= in_place ? dims_.data() : more_.data();
    }
    [[nodiscard]] std::int64_t* end() { return begin() + size_; }
    [[nodiscard]] auto rbegin() const { return std::make_reverse_iterator(end()); }
    [[nodiscard]] auto rend() const { return std::make_reverse_iterator(begin()); }
    [[nodiscard]] std::int64_t& operator[](std::size_t i) { return begin()[i]; }
    [[nodiscard]] std::int64_t operator[](std::size_t i) const { return begin()[i]; }
    [[nodiscard]] std::int64_t& back() { return end()[-1]; }
    [[nodiscard]] std::int64_t back() const { return end()[-1]; }
    [[nodiscard]] std::int64_t front() const { return *begin(); }

    void push_back(std::int64_t d) {
        changed();
        if (size_ < in_place) {
            dims_[size_] = d;
        } else {
            if (size_ == in_place) more_.assign(dims_.begin(), dims_.end());
            more_.push_back(d);
        }
        ++size_;
    }

    /// Replaces the dimensions with [first, last), which must not be this shape's own.
    template <class It>
    void assign(It first, It last) {
        size_ = 0;
        more_.clear();
        for (; first != last; ++first) push_back(*first);
    }

    /// The product of the dimensions.
    [[nodiscard]] double elements() const {
        if (elements_ < 0) {
            double n = 1;
            for (auto d : *this) n *= static_cast<double>(d);
            elements_ = n;
        }
        return elements_;
    }

    [[nodiscard]] std::vector<std::int64_t> to_vector() const { return {begin(), end()}; }

    friend bool operator==(const Shape& a, const Shape& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }

private:
    static constexpr std::size_t in_place = 8;
    std::array<std::int64_t, in_place> dims_{};
    std::vector<std::int64_t> more_;  ///< all the dimensions, when there are more than in_place
    std::size_t size_ = 0;
    mutable double elements_ = -1;    ///< the product, while known

    void changed() { elements_ = -1; }
};

/// Elements of a tensor of `shape`.
[[nodiscard]] inline double numel(const Shape& shape) { return shape.elements(); }

}  // namespace detail

}  // namespace roofsim
