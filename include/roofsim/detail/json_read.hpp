#pragma once
/// Path-aware JSON reading: every required key is read with `.at()` semantics, and every error names
/// the file (origin) and the JSON pointer of the offending value, e.g.
/// `h200.json: /bandwidth/dram/copy/median: missing`.

#include <roofsim/detail/close_matches.hpp>

#include <cmath>
#include <initializer_list>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace roofsim::detail {

/// A JSON value together with where it came from (file name and JSON pointer), for error messages.
class JsonCursor {
public:
    JsonCursor(const nlohmann::json& value, std::string origin, std::string pointer)
        : value_(&value), origin_(std::move(origin)), pointer_(std::move(pointer)) {}

    [[nodiscard]] const nlohmann::json& json() const { return *value_; }
    [[nodiscard]] const std::string& pointer() const { return pointer_; }
    [[nodiscard]] const std::string& origin() const { return origin_; }

    /// Throws std::runtime_error "<origin>: <pointer>: <what>".
    [[noreturn]] void fail(std::string_view what) const {
        throw std::runtime_error(origin_ + ": " + (pointer_.empty() ? std::string("/") : pointer_) +
                                 ": " + std::string(what));
    }

    [[nodiscard]] bool has(std::string_view key) const {
        return value_->is_object() && value_->contains(std::string(key));
    }

    /// A required member of an object.
    [[nodiscard]] JsonCursor at(std::string_view key) const {
        if (!value_->is_object()) fail(std::string("expected an object, got ") + value_->type_name());
        auto it = value_->find(std::string(key));
        if (it == value_->end()) child_path(key).fail("missing");
        return JsonCursor(*it, origin_, pointer_ + "/" + std::string(key));
    }

    /// A required element of an array.
    [[nodiscard]] JsonCursor at(std::size_t index) const {
        if (!value_->is_array()) fail(std::string("expected an array, got ") + value_->type_name());
        if (index >= value_->size()) fail("index " + std::to_string(index) + " out of range");
        return JsonCursor((*value_)[index], origin_, pointer_ + "/" + std::to_string(index));
    }

    [[nodiscard]] std::size_t array_size() const {
        if (!value_->is_array()) fail(std::string("expected an array, got ") + value_->type_name());
        return value_->size();
    }

    [[nodiscard]] const nlohmann::json& object() const {
        if (!value_->is_object()) fail(std::string("expected an object, got ") + value_->type_name());
        return *value_;
    }

    [[nodiscard]] double number() const {
        if (!value_->is_number()) fail(std::string("expected a number, got ") + value_->type_name());
        const double v = value_->get<double>();
        if (!std::isfinite(v)) fail("not a finite number");
        return v;
    }

    /// A number that must be > 0.
    [[nodiscard]] double positive() const {
        const double v = number();
        if (!(v > 0.0)) fail("must be positive, got " + format(v));
        return v;
    }

    /// A number that must be >= 0.
    [[nodiscard]] double non_negative() const {
        const double v = number();
        if (v < 0.0) fail("must not be negative, got " + format(v));
        return v;
    }

    [[nodiscard]] std::int64_t integer() const {
        if (!value_->is_number_integer()) fail(std::string("expected an integer, got ") + value_->type_name());
        // nlohmann reads 2^63 and above as unsigned: as int64 it would wrap to a negative number
        if (value_->is_number_unsigned() && value_->get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
            fail(value_->dump() + ": does not fit in a 64-bit integer");
        }
        return value_->get<std::int64_t>();
    }

    /// An integer that a C++ int holds (counts of SMs, samples, versions).
    [[nodiscard]] int int32() const {
        const std::int64_t v = integer();
        if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) fail(std::to_string(v) + ": does not fit in a 32-bit integer");
        return static_cast<int>(v);
    }

    [[nodiscard]] std::int64_t positive_integer() const {
        const std::int64_t v = integer();
        if (v <= 0) fail("must be a positive integer, got " + std::to_string(v));
        return v;
    }

    /// A positive integer that a C++ int holds.
    [[nodiscard]] int positive_int32() const {
        const int v = int32();
        if (v <= 0) fail("must be a positive integer, got " + std::to_string(v));
        return v;
    }

    [[nodiscard]] std::string string() const {
        if (!value_->is_string()) fail(std::string("expected a string, got ") + value_->type_name());
        return value_->get<std::string>();
    }

    [[nodiscard]] bool boolean() const {
        if (!value_->is_boolean()) fail(std::string("expected a boolean, got ") + value_->type_name());
        return value_->get<bool>();
    }

    /// Refuses members of this object that the format does not define (the format defines its
    /// fields: an unknown one is a typo, never ignored), suggesting the close matches; `listed_in`
    /// names the document that lists the fields.
    void check_fields(std::initializer_list<std::string_view> known, std::string_view listed_in) const {
        for (const auto& [key, value] : object().items()) {
            bool ok = false;
            for (const auto k : known) ok = ok || k == key;
            if (!ok) at(key).fail("unknown field" + did_you_mean(key, known) + " (" + std::string(listed_in) + " lists the fields)");
        }
    }

    [[nodiscard]] static std::string format(double v) {
        nlohmann::json j = v;
        return j.dump();
    }

private:
    [[nodiscard]] JsonCursor child_path(std::string_view key) const {
        return JsonCursor(*value_, origin_, pointer_ + "/" + std::string(key));
    }

    const nlohmann::json* value_;
    std::string origin_;
    std::string pointer_;
};

}  // namespace roofsim::detail
