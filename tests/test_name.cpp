#include "catch.hpp"

#include <roofsim/ir.hpp>
#include <roofsim/name.hpp>

#include <nlohmann/json.hpp>

#include <map>
#include <sstream>
#include <thread>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

using namespace roofsim;

// A name reads as a std::string_view; a std::string costs an allocation, so it is asked for.
static_assert(std::is_convertible_v<Name, std::string_view>);
static_assert(!std::is_convertible_v<Name, std::string>);
static_assert(std::is_constructible_v<std::string, Name>);
static_assert(std::is_convertible_v<const char*, Name>);
static_assert(std::is_convertible_v<std::string, Name>);
static_assert(std::is_convertible_v<std::string_view, Name>);
static_assert(std::is_nothrow_move_constructible_v<Name> && std::is_nothrow_move_assignable_v<Name>);
static_assert(sizeof(Name) == Name::in_place + 1);
// A name, and so a kernel, is a plain value: copied and freed as bytes.
static_assert(std::is_trivially_copyable_v<Name> && std::is_trivially_destructible_v<Name>);
static_assert(std::is_trivially_copyable_v<Kernel> && std::is_trivially_destructible_v<Kernel>);

namespace {

/// A name of `size` characters, none alike in a row: "abcd...".
std::string text(std::size_t size) {
    std::string s;
    for (std::size_t i = 0; i < size; ++i) s.push_back(static_cast<char>('a' + i % 26));
    return s;
}

// Lengths either side of the in-place limit, and one well past it.
const std::vector<std::size_t> sizes = {0, 1, 15, 16, Name::in_place - 1, Name::in_place, Name::in_place + 1, 200};

}  // namespace

TEST_CASE("a name holds its characters, in place or pooled", "[name]") {
    CHECK(Name().empty());
    CHECK(Name().size() == 0);
    CHECK(Name() == "");
    for (const std::size_t size : sizes) {
        const std::string s = text(size);
        const Name from_view(std::string_view{s}), from_string(s), from_c_string(s.c_str());
        for (const Name* n : {&from_view, &from_string, &from_c_string}) {
            CHECK(n->view() == s);
            CHECK(n->size() == size);
            CHECK(n->empty() == (size == 0));
            CHECK(std::string(n->begin(), n->end()) == s);
            CHECK(std::string_view(n->data(), n->size()) == s);
            CHECK(n->str() == s);
            CHECK(static_cast<std::string>(*n) == s);
        }
    }
}

TEST_CASE("a name copies and moves, in place or pooled", "[name]") {
    for (const std::size_t size : sizes) {
        const std::string s = text(size);
        Name original(s);
        Name copy(original);
        CHECK(copy == s);
        CHECK(original == s);
        // in place: characters of its own; pooled: the pool's one copy, whoever made the name
        if (size > 0) CHECK((copy.data() != original.data()) == (size <= Name::in_place));
        if (size > Name::in_place) CHECK(Name(std::string(s)).data() == original.data());
        CHECK(original.data() != s.data());  // never a view of the string it was made from
        Name moved(std::move(copy));
        CHECK(moved == s);
        for (const std::size_t other : sizes) {
            const std::string t = text(other) + "!";
            Name assigned(t);
            assigned = original;
            CHECK(assigned == s);
            Name move_assigned(t);
            move_assigned = std::move(assigned);
            CHECK(move_assigned == s);
            Name from_string(t);
            from_string = s;
            CHECK(from_string == s);
            from_string = from_string.view().substr(0, size / 2);  // a view of itself
            CHECK(from_string == s.substr(0, size / 2));
        }
        Name& self = original;
        original = self;
        CHECK(original == s);
        original = std::move(self);
        CHECK(original == s);
    }
}

TEST_CASE("a pooled name outlives the string it was made from, and the same characters pool once", "[name]") {
    Name first, second;
    {
        std::string made = text(Name::in_place + 10);
        first = made;
        made[0] = '#';  // the same buffer, other characters: not taken for the name before
        second = made;
    }  // both strings freed
    CHECK(first == text(Name::in_place + 10));
    std::string expected = text(Name::in_place + 10);
    expected[0] = '#';
    CHECK(second == expected);
    CHECK(first.data() != second.data());
    CHECK(Name(text(Name::in_place + 10)).data() == first.data());
}

TEST_CASE("a name is appended to, across the in-place limit", "[name]") {
    for (const std::size_t size : sizes) {
        for (const std::size_t more : sizes) {
            const std::string a = text(size), b = std::string(more, '.');
            Name n(a);
            n += b;
            CHECK(n == a + b);
        }
        // appending the name to itself
        Name twice(text(size));
        twice += twice;
        CHECK(twice == text(size) + text(size));
        Name prefix(text(size));
        prefix += prefix.view().substr(0, size / 2);
        CHECK(prefix == text(size) + text(size / 2));
    }
    Name op = "dispatch ";
    op += "conv2d";
    CHECK(op == "dispatch conv2d");
    Name long_name(text(60));
    long_name += std::string_view();  // no characters, not even an address
    CHECK(long_name == text(60));
}

TEST_CASE("a name compares and orders with every kind of string", "[name]") {
    const Name conv("aten::cudnn_convolution");
    const std::string conv_string = "aten::cudnn_convolution";
    const std::string_view conv_view = conv_string;
    CHECK(conv == "aten::cudnn_convolution");
    CHECK("aten::cudnn_convolution" == conv);
    CHECK(conv == conv_string);
    CHECK(conv_string == conv);
    CHECK(conv == conv_view);
    CHECK(conv_view == conv);
    CHECK(conv == Name(conv_string));
    CHECK(conv != "aten::cudnn_convolution_backward");
    CHECK("aten::mm" != conv);
    CHECK(Name("aten::addmm") < Name("aten::mm"));
    CHECK(Name("aten::addmm") < "aten::mm");
    CHECK("aten::addmm" < Name("aten::mm"));
    CHECK(Name("layer1") < Name("layer1.0"));
    CHECK((Name(text(100)) <=> Name(text(100))) == std::strong_ordering::equal);
    CHECK((Name(text(100)) <=> std::string_view(text(101))) == std::strong_ordering::less);
    // as a map key, found by a view
    std::map<Name, int, std::less<>> by_layer{{"layer1.0.conv1", 1}, {"layer1.0.downsample.bn", 2}};
    CHECK(by_layer.find(std::string_view("layer1.0.downsample.bn"))->second == 2);
}

TEST_CASE("names are pooled from several threads at once, each long name once", "[name]") {
    // eight threads make the same and their own long names, over and over
    constexpr int threads = 8, rounds = 2000;
    std::vector<std::vector<Name>> made(threads);
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([t, &made] {
            for (int i = 0; i < rounds; ++i) {
                const std::string shared = "encoder.layer." + std::to_string(i % 50) + ".attention.output.dense.shared";
                const std::string own = "thread." + std::to_string(t) + ".layer." + std::to_string(i) + ".attention.output.dense";
                made[static_cast<std::size_t>(t)].emplace_back(shared);
                made[static_cast<std::size_t>(t)].emplace_back(own);
            }
        });
    }
    for (auto& w : workers) w.join();
    for (int t = 0; t < threads; ++t) {
        const auto& names = made[static_cast<std::size_t>(t)];
        REQUIRE(names.size() == 2 * rounds);
        for (int i = 0; i < rounds; ++i) {
            const std::string shared = "encoder.layer." + std::to_string(i % 50) + ".attention.output.dense.shared";
            const std::string own = "thread." + std::to_string(t) + ".layer." + std::to_string(i) + ".attention.output.dense";
            CHECK(names[static_cast<std::size_t>(2 * i)] == shared);
            CHECK(names[static_cast<std::size_t>(2 * i + 1)] == own);
            // one pooled copy of a name, whichever thread made it
            CHECK(names[static_cast<std::size_t>(2 * i)].data() == made[0][static_cast<std::size_t>(2 * i)].data());
        }
    }
}

TEST_CASE("a name prints and converts to JSON as its characters", "[name]") {
    std::ostringstream out;
    out << Name("layer1.0.conv1") << '|' << Name(text(60));
    CHECK(out.str() == "layer1.0.conv1|" + text(60));
    CHECK(nlohmann::json(Name("layer1.0.conv1")) == nlohmann::json("layer1.0.conv1"));
    CHECK(nlohmann::json(Name(text(60))).dump() == '"' + text(60) + '"');
}

TEST_CASE("kernels built by hand keep their names through copies and reallocation", "[name]") {
    std::vector<Kernel> kernels;
    for (int i = 0; i < 100; ++i) {
        Kernel k;
        k.op = "aten::cudnn_convolution";
        k.layer = std::string("encoder.layer.") + std::to_string(i) + ".attention.output.dense.very.long.path";
        k.source_op = std::string_view("conv2d");
        k.host_op = k.source_op;
        kernels.push_back(k);
    }
    const std::vector<Kernel> copies = kernels;
    for (int i = 0; i < 100; ++i) {
        const std::string layer = "encoder.layer." + std::to_string(i) + ".attention.output.dense.very.long.path";
        CHECK(copies[static_cast<std::size_t>(i)].layer == layer);
        CHECK(copies[static_cast<std::size_t>(i)].op == "aten::cudnn_convolution");
        CHECK(kernels[static_cast<std::size_t>(i)].host_op == "conv2d");
    }
}
