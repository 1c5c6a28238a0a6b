#pragma once
/// A fixed-size memo of values by key, with no allocation: the cost memos' store.

#include <array>
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>

namespace roofsim::detail {

/// Values remembered by key in `slots` slots, the slot picked by the key's hash(); a key that lands
/// on a slot another holds replaces it (recomputed when that one comes back). For the few dozen
/// distinct keys a step's kernels repeat, with no allocation. A memo is made once per prediction:
/// only its slots' filled bits are cleared then, not the slots (some 20 KB for a step's memos).
template <class Key, class Value, std::size_t slots>
class SlotMemo {
    static_assert(std::is_trivially_copyable_v<Key> && std::is_trivially_destructible_v<Key> &&
                      std::is_trivially_copyable_v<Value> && std::is_trivially_destructible_v<Value>,
                  "slots are written over in place, never destroyed");

public:
    /// No slot filled. (User-provided, so that a memo value-initialized, `SlotMemo<...> m{}`, is not
    /// zero-filled whole first.)
    SlotMemo() noexcept {}

    /// The value remembered for `key`, or compute()'s, remembered.
    template <class Compute>
    [[nodiscard]] Value get(const Key& key, Compute&& compute) {
        const std::size_t i = key.hash() % slots;
        std::uint64_t& word = filled_[i / 64];
        const std::uint64_t bit = std::uint64_t{1} << (i % 64);
        if ((word & bit) != 0) {
            const Slot& slot = *std::launder(reinterpret_cast<const Slot*>(storage_ + i * sizeof(Slot)));
            if (slot.key == key) return slot.value;
        }
        const Slot* slot = ::new (storage_ + i * sizeof(Slot)) Slot{key, compute()};
        word |= bit;
        return slot->value;
    }

private:
    struct Slot {
        Key key;
        Value value;
    };
    std::array<std::uint64_t, (slots + 63) / 64> filled_{};  ///< bit i: slot i holds a key
    alignas(Slot) std::byte storage_[slots * sizeof(Slot)];  ///< the slots, each made when first filled
};

}  // namespace roofsim::detail
