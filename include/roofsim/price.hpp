#pragma once
/// What a GPU-hour costs: a table of prices per GPU key, each with its source and the table's date
/// (data/prices/*.json, docs/prediction.md), and the time and cost of an epoch at a predicted throughput.

#include <roofsim/detail/json_file.hpp>
#include <roofsim/detail/json_read.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>

namespace roofsim {

/// One GPU's price per GPU-hour.
struct GpuPrice {
    double per_hour = 0;
    std::string source;
};

/// A dated, sourced table of prices per GPU-hour.
struct PriceTable {
    std::string origin;  ///< the file it was read from
    std::string currency, unit, date, source;
    std::map<std::string, GpuPrice> prices;  ///< by GPU key

    /// The price of `gpu_key`; an error naming the table and the GPUs it has where it has none.
    [[nodiscard]] const GpuPrice& at(const std::string& gpu_key) const {
        const auto it = prices.find(gpu_key);
        if (it != prices.end()) return it->second;
        std::string listed;
        for (const auto& [key, price] : prices) listed += (listed.empty() ? "" : ", ") + key;
        throw std::runtime_error(origin + ": no price for " + gpu_key + " (it prices " + (listed.empty() ? "nothing" : listed) +
                                 "); give --price-per-hour, or a table that prices every GPU compared");
    }
};

/// Reads a price table (kind roofsim-prices, schema_version 1); every price positive and finite.
[[nodiscard]] inline PriceTable parse_price_table(const nlohmann::json& j, const std::string& origin) {
    const detail::JsonCursor root(j, origin, "");
    root.check_fields({"kind", "schema_version", "currency", "unit", "date", "source", "prices"}, "a price table");
    if (root.at("kind").string() != "roofsim-prices") root.at("kind").fail("expected \"roofsim-prices\"");
    if (root.at("schema_version").integer() != 1) root.at("schema_version").fail("expected 1");
    PriceTable t;
    t.origin = origin;
    t.currency = root.at("currency").string();
    t.unit = root.at("unit").string();
    t.date = root.at("date").string();
    t.source = root.at("source").string();
    const auto prices = root.at("prices");
    if (prices.object().empty()) prices.fail("no prices");
    for (const auto& [key, value] : prices.object().items()) {
        const auto entry = prices.at(key);
        entry.check_fields({"value", "source"}, "a price");
        t.prices[key] = GpuPrice{entry.at("value").positive(), entry.at("source").string()};
    }
    return t;
}

/// Reads a price table file.
[[nodiscard]] inline PriceTable load_price_table(const std::filesystem::path& path) {
    return parse_price_table(detail::read_json_file(path), path.string());
}

/// The time of an epoch of `samples` at `samples_per_step` a step (batch x GPUs) of `step`: whole
/// steps, the last one possibly partial but as long as the others.
[[nodiscard]] inline double epoch_seconds(std::int64_t samples, double samples_per_step, double step_seconds) {
    if (samples < 1) throw std::invalid_argument("an epoch needs at least one sample, got " + std::to_string(samples));
    if (!(samples_per_step > 0) || !(step_seconds > 0)) throw std::invalid_argument("epoch_seconds: a step must take samples and time");
    return std::ceil(static_cast<double>(samples) / samples_per_step) * step_seconds;
}

/// The cost of `seconds` on `gpus` GPUs at `per_gpu_hour` each.
[[nodiscard]] inline double gpu_cost(double seconds, int gpus, double per_gpu_hour) { return seconds / 3600.0 * gpus * per_gpu_hour; }

}  // namespace roofsim
