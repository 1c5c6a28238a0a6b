#pragma once
// A structure-aware mutator for the JSON targets (libFuzzer's LLVMFuzzerCustomMutator): an input that
// parses as JSON is changed as a document (a number to a boundary value, a key dropped or misspelt, an
// array element repeated, a value of another type, one subtree copied over another) and written back;
// anything else, and one mutation in eight, goes to libFuzzer's byte mutator. Built only into the
// libFuzzer targets (ROOFSIM_FUZZ_LIBFUZZER); the replay driver has no mutator.

#ifdef ROOFSIM_FUZZ_LIBFUZZER

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

extern "C" std::size_t LLVMFuzzerMutate(std::uint8_t* data, std::size_t size, std::size_t max_size);

namespace roofsim::fuzz::detail {

inline void collect_nodes(nlohmann::json& j, std::vector<nlohmann::json*>& out) {
    out.push_back(&j);
    if (j.is_object() || j.is_array()) {
        for (auto& child : j) collect_nodes(child, out);
    }
}

inline nlohmann::json boundary_number(std::mt19937_64& rng, const nlohmann::json& old) {
    switch (rng() % 16) {
        case 0: return 0;
        case 1: return -1;
        case 2: return 1;
        case 3: return 1e308;
        case 4: return -1e308;
        case 5: return std::uint64_t(1) << 63;                    // 2^63: one past int64
        case 6: return std::numeric_limits<std::int64_t>::max();  // 2^63 - 1
        case 7: return std::numeric_limits<std::int64_t>::min();
        case 8: return std::numeric_limits<std::uint64_t>::max();
        case 9: return 4.9e-324;
        case 10: return 0.5;
        case 11: return std::int64_t(1) << 31;
        case 12: return std::int64_t(3037000500);  // its square passes 2^63
        case 13: return old.is_number() ? nlohmann::json(-old.get<double>()) : nlohmann::json(-2);
        case 14:  // times 1024, wrapping
            return old.is_number_integer() ? nlohmann::json(static_cast<std::int64_t>(old.get<std::uint64_t>() * 1024u + 1u))
                                           : nlohmann::json(1e19);
        default: return 1e-9;
    }
}

inline nlohmann::json odd_string(std::mt19937_64& rng) {
    static const char* const strings[] = {"NaN", "nan", "inf", "-inf", "1e400", "", "batch", "-1", "0", "float16", "none",
                                          "h200-sxm", "a10", "backward", "forward", "inference"};
    if (rng() % 8 == 0) return std::string(1 + rng() % 300, 'x');
    return strings[rng() % (sizeof strings / sizeof strings[0])];
}

inline std::string near_miss(std::mt19937_64& rng, std::string key) {
    if (key.empty()) return "x";
    const std::size_t at = rng() % key.size();
    switch (rng() % 4) {
        case 0: key.erase(at, 1); break;                       // one letter dropped
        case 1: key.insert(at, 1, key[at]); break;             // one letter doubled
        case 2: key[at] = static_cast<char>('a' + rng() % 26); break;
        default: key += 's'; break;
    }
    return key;
}

/// One structural change somewhere in `doc`.
inline void mutate_document(nlohmann::json& doc, std::mt19937_64& rng) {
    std::vector<nlohmann::json*> nodes;
    collect_nodes(doc, nodes);
    nlohmann::json& node = *nodes[rng() % nodes.size()];
    switch (rng() % 8) {
        case 0:
        case 1:  // a number (or anything) to a boundary value
            node = boundary_number(rng, node);
            break;
        case 2:  // a key or element dropped
            if (node.is_object() && !node.empty()) {
                auto it = node.begin();
                std::advance(it, static_cast<std::ptrdiff_t>(rng() % node.size()));
                node.erase(it);
            } else if (node.is_array() && !node.empty()) {
                node.erase(node.begin() + static_cast<std::ptrdiff_t>(rng() % node.size()));
            } else {
                node = nullptr;
            }
            break;
        case 3:  // an array element repeated
            if (node.is_array() && !node.empty()) {
                const nlohmann::json copy = node[rng() % node.size()];
                node.insert(node.begin() + static_cast<std::ptrdiff_t>(rng() % (node.size() + 1)), copy);
            } else {
                node = nlohmann::json::array({node, node});
            }
            break;
        case 4: {  // another type
            static const nlohmann::json others[] = {nullptr, true, false, nlohmann::json::object(), nlohmann::json::array(),
                                                    "x", 1, 1.5, nlohmann::json::array({1, 2})};
            node = others[rng() % (sizeof others / sizeof others[0])];
            break;
        }
        case 5:  // a key misspelt
            if (node.is_object() && !node.empty()) {
                auto it = node.begin();
                std::advance(it, static_cast<std::ptrdiff_t>(rng() % node.size()));
                const std::string key = it.key();
                nlohmann::json value = std::move(it.value());
                node.erase(key);
                node[near_miss(rng, key)] = std::move(value);
            } else {
                node = odd_string(rng);
            }
            break;
        case 6:  // a string to an odd one
            node = odd_string(rng);
            break;
        default: {  // another subtree copied over this one
            const nlohmann::json copy = *nodes[rng() % nodes.size()];
            node = copy;
            break;
        }
    }
}

}  // namespace roofsim::fuzz::detail

extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size, std::size_t max_size, unsigned int seed) {
    std::mt19937_64 rng(seed);
    if (rng() % 8 != 0) {
        nlohmann::json doc = nlohmann::json::parse(data, data + size, nullptr, false);
        if (!doc.is_discarded()) {
            const int changes = 1 + static_cast<int>(rng() % 3);
            for (int i = 0; i < changes; ++i) roofsim::fuzz::detail::mutate_document(doc, rng);
            const std::string text = doc.dump(rng() % 4 == 0 ? 1 : -1, ' ', false, nlohmann::json::error_handler_t::replace);
            if (text.size() <= max_size) {
                std::memcpy(data, text.data(), text.size());
                return text.size();
            }
        }
    }
    return LLVMFuzzerMutate(data, size, max_size);
}

#endif  // ROOFSIM_FUZZ_LIBFUZZER
