#pragma once
/// A calibration profile's JSON form, both ways, section by section: to_json, calibration_from_json,
/// load_calibration and save_calibration (validated on load and before a write; errors name the file
/// and the JSON path).

#include <roofsim/detail/json_file.hpp>
#include <roofsim/detail/json_read.hpp>
#include <roofsim/profile/calibration.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>
#include <nlohmann/json.hpp>

namespace roofsim {

namespace detail {

/// A method text split at its numbers: the text with "{}" where each number stood, and the numbers.
/// A number is a run of digits of at most 9 that does not start with 0 (or is "0"); longer runs and
/// runs with a leading zero stay in the text. `text` must hold no brace (a method never does).
struct MethodTemplate {
    std::string text;
    std::vector<std::int64_t> values;
};

[[nodiscard]] inline MethodTemplate split_method(std::string_view method) {
    if (method.find_first_of("{}") != std::string_view::npos) {
        throw std::invalid_argument("a measurement's method may not hold braces: " + std::string(method));
    }
    MethodTemplate t;
    std::size_t i = 0;
    while (i < method.size()) {
        if (method[i] < '0' || method[i] > '9') {
            t.text += method[i++];
            continue;
        }
        std::size_t end = i;
        while (end < method.size() && method[end] >= '0' && method[end] <= '9') ++end;
        const std::string_view run = method.substr(i, end - i);
        if (run.size() <= 9 && (run.size() == 1 || run[0] != '0')) {
            t.text += "{}";
            t.values.push_back(std::stoll(std::string(run)));
        } else {
            t.text += run;
        }
        i = end;
    }
    return t;
}

/// The profile's method texts factored out (schema_version 2): each measurement's "method" becomes
/// [index into the top-level "methods", its numbers...], "methods" holding each distinct template
/// once (a sweep's 1,300 methods are some 70 templates; the file shrinks by two fifths).
inline void factor_methods(nlohmann::json& root) {
    std::vector<std::string> templates;
    std::map<std::string, std::size_t, std::less<>> index;
    const auto visit = [&](auto&& self, nlohmann::json& j) -> void {
        if (j.is_object()) {
            for (auto it = j.begin(); it != j.end(); ++it) {
                if (it.key() == "method" && it.value().is_string()) {
                    MethodTemplate t = split_method(it.value().get<std::string>());
                    auto [found, added] = index.try_emplace(t.text, templates.size());
                    if (added) templates.push_back(t.text);
                    nlohmann::json ref = nlohmann::json::array({found->second});
                    for (const auto v : t.values) ref.push_back(v);
                    it.value() = std::move(ref);
                } else {
                    self(self, it.value());
                }
            }
        } else if (j.is_array()) {
            for (auto& e : j) self(self, e);
        }
    };
    visit(visit, root);
    root["methods"] = templates;
}

/// The inverse of factor_methods: every "method" reference written out as its text. A bad
/// reference is an error naming the file and the JSON path.
[[nodiscard]] inline nlohmann::json expand_methods(nlohmann::json root, std::string_view origin) {
    const JsonCursor top(root, std::string(origin), "");
    const JsonCursor methods = top.at("methods");
    std::vector<std::string> templates;
    for (std::size_t i = 0; i < methods.array_size(); ++i) templates.push_back(methods.at(i).string());
    const auto visit = [&](auto&& self, nlohmann::json& j, const std::string& path) -> void {
        if (j.is_object()) {
            for (auto it = j.begin(); it != j.end(); ++it) {
                const std::string at = path + "/" + it.key();
                if (it.key() != "method" || !it.value().is_array()) {
                    self(self, it.value(), at);
                    continue;
                }
                const auto fail = [&](const std::string& what) {
                    throw std::runtime_error(std::string(origin) + ": " + at + ": " + what);
                };
                const nlohmann::json& ref = it.value();
                if (ref.empty() || !ref[0].is_number_unsigned() || ref[0].get<std::size_t>() >= templates.size()) {
                    fail("expected [index into /methods, numbers...]");
                }
                const std::string& text = templates[ref[0].get<std::size_t>()];
                std::string out;
                std::size_t value = 1, from = 0;
                for (std::size_t brace = text.find("{}"); brace != std::string::npos; brace = text.find("{}", from)) {
                    if (value >= ref.size() || !ref[value].is_number_integer()) fail("fewer numbers than its method has places");
                    out.append(text, from, brace - from).append(std::to_string(ref[value++].get<std::int64_t>()));
                    from = brace + 2;
                }
                if (value != ref.size()) fail("more numbers than its method has places");
                it.value() = out.append(text, from, std::string::npos);
            }
        } else if (j.is_array()) {
            for (std::size_t i = 0; i < j.size(); ++i) self(self, j[i], path + "/" + std::to_string(i));
        }
    };
    visit(visit, root, "");
    root.erase("methods");
    return root;
}

inline nlohmann::json measurement_json(const Measurement& m, std::string_view unit) {
    return nlohmann::json{{"unit", unit},          {"median", m.median}, {"min", m.min},
                          {"max", m.max},          {"samples", m.samples}, {"method", m.method}};
}

inline nlohmann::json fit_json(const AffineFit& f, std::string_view rate_unit) {
    return nlohmann::json{{"overhead_seconds", f.overhead_seconds},
                          {"rate", f.rate_per_second},
                          {"rate_unit", rate_unit},
                          {"r2", f.r2},
                          {"points", f.points}};
}

inline nlohmann::json curve_json(const std::vector<BandwidthPoint>& c) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& p : c) a.push_back({{"bytes", p.working_set_bytes}, {"bytes_per_second", p.bytes_per_second}});
    return a;
}

inline nlohmann::json ceiling_json(const ComputeCeiling& c) {
    nlohmann::json j = measurement_json(c.flops_per_second, "flops_per_second");
    j["instruction"] = c.instruction;
    if (c.sm_clock_hz) j["sm_clock_hz"] = *c.sm_clock_hz;
    if (c.issue_peak_flops_per_second) j["issue_peak_flops_per_second"] = *c.issue_peak_flops_per_second;
    return j;
}

}  // namespace detail

/// The profile as JSON (schema in docs/calibration-format.md).
[[nodiscard]] inline nlohmann::json to_json(const Calibration& c) {
    using nlohmann::json;
    const auto& d = c.device;
    json dev = {{"name", d.name},
                {"gpu_key", d.gpu_key},
                {"compute_capability", std::to_string(d.compute_capability_major) + "." +
                                           std::to_string(d.compute_capability_minor)},
                {"sm_count", d.sm_count},
                {"l2_bytes", d.l2_bytes},
                {"memory_bytes", d.memory_bytes},
                {"sm_clock_max_hz", d.sm_clock_max_hz},
                {"memory_clock_max_hz", d.memory_clock_max_hz},
                {"memory_bus_width_bits", d.memory_bus_width_bits},
                {"device_count", d.device_count},
                {"driver_version", d.driver_version},
                {"cuda_driver_version", d.cuda_driver_version},
                {"cuda_runtime_version", d.cuda_runtime_version},
                {"cublas_version", d.cublas_version},
                {"cudnn_version", d.cudnn_version},
                {"nccl_version", d.nccl_version},
                {"date_utc", d.date_utc},
                {"tool_version", d.tool_version},
                {"command_line", d.command_line}};
    if (d.sm_clock_measured_hz) dev["sm_clock_measured"] = detail::measurement_json(*d.sm_clock_measured_hz, "hz");

    json bw = json::object();
    for (const auto& [level, patterns] : c.bandwidth) {
        json l = json::object();
        for (const auto& [p, m] : patterns) l[std::string(to_string(p))] = detail::measurement_json(m, "bytes_per_second");
        bw[std::string(to_string(level))] = l;
    }
    json curve = json::object();
    for (const auto& [p, pts] : c.bandwidth_curve) curve[std::string(to_string(p))] = detail::curve_json(pts);

    json probe = json::object(), lib = json::object(), intens = json::object();
    for (const auto& [u, ce] : c.probe_ceilings) probe[std::string(to_string(u))] = detail::ceiling_json(ce);
    for (const auto& [u, ce] : c.library_ceilings) lib[std::string(to_string(u))] = detail::ceiling_json(ce);
    for (const auto& [u, pts] : c.intensity_curves) {
        json a = json::array();
        for (const auto& p : pts)
            a.push_back({{"flops_per_byte", p.flops_per_byte},
                         {"flops_per_second", p.flops_per_second},
                         {"bytes_per_second", p.bytes_per_second}});
        intens[std::string(to_string(u))] = a;
    }

    json gemm = json::array();
    for (const auto& g : c.gemm_sweep)
        gemm.push_back({{"m", g.m}, {"n", g.n}, {"k", g.k}, {"unit", to_string(g.unit)},
                        {"seconds", detail::measurement_json(g.seconds, "seconds")},
                        {"flops_per_second", g.flops_per_second}, {"efficiency", g.efficiency},
                        {"layout", g.layout}, {"batch", g.batch}});
    json gfits = json::object();
    for (const auto& [u, f] : c.gemm_fits) gfits[std::string(to_string(u))] = detail::fit_json(f, "flops_per_second");

    json conv = json::array();
    for (const auto& v : c.conv_sweep) {
        conv.push_back({{"pass", to_string(v.pass)}, {"n", v.n}, {"c", v.c}, {"h", v.h}, {"w", v.w}, {"k", v.k},
                        {"r", v.r}, {"s", v.s}, {"stride", v.stride}, {"pad", v.pad}, {"unit", to_string(v.unit)},
                        {"algorithm", v.algorithm}, {"seconds", detail::measurement_json(v.seconds, "seconds")},
                        {"flops_per_second", v.flops_per_second}, {"efficiency", v.efficiency},
                        {"groups", v.groups}, {"dilation", v.dilation}, {"layout", v.layout}});
        if (v.stride_h) conv.back()["stride_h"] = *v.stride_h;
        if (v.pad_h) conv.back()["pad_h"] = *v.pad_h;
        if (v.dilation_h) conv.back()["dilation_h"] = *v.dilation_h;
    }

    json launch = json::object();
    if (c.launch_latency_seconds) launch["latency"] = detail::measurement_json(*c.launch_latency_seconds, "seconds");
    if (c.launch_interval_seconds) launch["interval"] = detail::measurement_json(*c.launch_interval_seconds, "seconds");
    if (c.launch_gpu_interval_seconds)
        launch["gpu_interval"] = detail::measurement_json(*c.launch_gpu_interval_seconds, "seconds");

    json mc = json::object();
    for (const auto& [k, f] : c.memcpy) {
        json e = detail::measurement_json(f.bytes_per_second, "bytes_per_second");
        e["curve"] = detail::curve_json(f.curve);
        if (f.fit) e["fit"] = detail::fit_json(*f.fit, "bytes_per_second");
        mc[std::string(to_string(k))] = e;
    }

    json coll = json::array();
    for (const auto& r : c.collectives)
        coll.push_back({{"op", r.op}, {"gpus", r.gpus}, {"bytes", r.bytes},
                        {"seconds", detail::measurement_json(r.seconds, "seconds")},
                        {"algorithm_bytes_per_second", r.algorithm_bytes_per_second},
                        {"bus_bytes_per_second", r.bus_bytes_per_second}});

    json miss = json::array();
    for (const auto& m : c.missing)
        miss.push_back({{"figure", m.figure}, {"reason", to_string(m.reason)}, {"detail", m.detail}});

    json out = {{"schema_version", c.schema_version},
                {"device", dev},
                {"bandwidth", bw},
                {"bandwidth_curve", curve},
                {"compute", {{"probe", probe}, {"library", lib}}},
                {"intensity_curves", intens},
                {"gemm_sweep", gemm},
                {"gemm_fits", gfits},
                {"conv_sweep", conv},
                {"launch", launch},
                {"memcpy", mc},
                {"collectives", coll},
                {"missing", miss}};
    if (c.l2_to_dram_step_bytes) out["l2_to_dram_step_bytes"] = *c.l2_to_dram_step_bytes;
    if (c.partial) out["partial"] = true;  // written only where true: a complete profile has no key
    if (c.derivation) {
        out["derivation"] = {{"reference_key", c.derivation->reference_key}, {"reference", c.derivation->reference},
                             {"rules", c.derivation->rules}};
    }
    detail::factor_methods(out);
    return out;
}

// ---------------------------------------------------------------------------------------------
// JSON: reading
// ---------------------------------------------------------------------------------------------

namespace detail {

inline Measurement read_measurement(const JsonCursor& j, std::string_view unit) {
    const std::string u = j.at("unit").string();
    if (u != unit) j.at("unit").fail("expected unit \"" + std::string(unit) + "\", got \"" + u + "\"");
    Measurement m;
    m.median = j.at("median").positive();
    m.min = j.at("min").positive();
    m.max = j.at("max").positive();
    m.samples = j.at("samples").positive_int32();
    m.method = j.at("method").string();
    if (!(m.min <= m.median)) j.at("min").fail("min must not exceed median");
    if (!(m.median <= m.max)) j.at("max").fail("max must not be below median");
    return m;
}

inline AffineFit read_fit(const JsonCursor& j, std::string_view rate_unit) {
    AffineFit f;
    f.overhead_seconds = j.at("overhead_seconds").non_negative();
    f.rate_per_second = j.at("rate").positive();
    const std::string u = j.at("rate_unit").string();
    if (u != rate_unit) j.at("rate_unit").fail("expected \"" + std::string(rate_unit) + "\", got \"" + u + "\"");
    f.r2 = j.at("r2").number();
    f.points = j.at("points").positive_int32();
    return f;
}

inline std::vector<BandwidthPoint> read_curve(const JsonCursor& j) {
    std::vector<BandwidthPoint> out;
    for (std::size_t i = 0; i < j.array_size(); ++i) {
        const JsonCursor p = j.at(i);
        out.push_back({p.at("bytes").positive(), p.at("bytes_per_second").positive()});
        if (i > 0 && !(out[i].working_set_bytes > out[i - 1].working_set_bytes))
            p.at("bytes").fail("sizes must increase along the curve");
    }
    return out;
}

inline ComputeCeiling read_ceiling(const JsonCursor& j) {
    ComputeCeiling c;
    c.flops_per_second = read_measurement(j, "flops_per_second");
    c.instruction = j.at("instruction").string();
    if (j.has("sm_clock_hz")) c.sm_clock_hz = j.at("sm_clock_hz").positive();
    if (j.has("issue_peak_flops_per_second")) c.issue_peak_flops_per_second = j.at("issue_peak_flops_per_second").positive();
    return c;
}

inline ComputeUnit read_unit(const JsonCursor& j) {
    const std::string s = j.string();
    auto u = compute_unit_from_key(s);
    if (!u) j.fail("unknown compute unit \"" + s + "\"");
    return *u;
}

inline ComputeUnit unit_key(const JsonCursor& parent, const std::string& key) {
    auto u = compute_unit_from_key(key);
    if (!u) parent.at(key).fail("unknown compute unit key \"" + key + "\"");
    return *u;
}

inline double efficiency(const JsonCursor& j) {
    const double e = j.number();
    if (!(e > 0.0 && e <= 1.0)) j.fail("efficiency must be in (0, 1], got " + JsonCursor::format(e));
    return e;
}

inline int read_int(const JsonCursor& j) { return j.int32(); }

}  // namespace detail

namespace detail {

/// The profile's schema_version: this build's, or an error.
inline void read_schema_version(const JsonCursor& root, Calibration& c) {
    const auto v = root.at("schema_version");
    c.schema_version = v.int32();
    if (c.schema_version != calibration_schema_version)
        v.fail("unsupported schema version " + std::to_string(c.schema_version) + " (this build reads " +
               std::to_string(calibration_schema_version) + ")");
}

/// The device the profile was measured on, and the software it ran.
inline void read_device(const JsonCursor& root, Calibration& c) {
    const auto d = root.at("device");
    auto& o = c.device;
    o.name = d.at("name").string();
    if (o.name.empty()) d.at("name").fail("must not be empty");
    o.gpu_key = d.at("gpu_key").string();
    const std::string cc = d.at("compute_capability").string();
    const auto dot = cc.find('.');
    if (dot == std::string::npos) d.at("compute_capability").fail("expected \"major.minor\", got \"" + cc + "\"");
    try {
        o.compute_capability_major = std::stoi(cc.substr(0, dot));
        o.compute_capability_minor = std::stoi(cc.substr(dot + 1));
    } catch (const std::exception&) {
        d.at("compute_capability").fail("expected \"major.minor\", got \"" + cc + "\"");
    }
    o.sm_count = d.at("sm_count").positive_int32();
    o.l2_bytes = d.at("l2_bytes").non_negative();
    o.memory_bytes = d.at("memory_bytes").non_negative();
    o.sm_clock_max_hz = d.at("sm_clock_max_hz").non_negative();
    o.memory_clock_max_hz = d.at("memory_clock_max_hz").non_negative();
    o.memory_bus_width_bits = detail::read_int(d.at("memory_bus_width_bits"));
    o.device_count = detail::read_int(d.at("device_count"));
    o.driver_version = d.at("driver_version").string();
    o.cuda_driver_version = detail::read_int(d.at("cuda_driver_version"));
    o.cuda_runtime_version = detail::read_int(d.at("cuda_runtime_version"));
    o.cublas_version = d.at("cublas_version").string();
    o.cudnn_version = d.at("cudnn_version").string();
    o.nccl_version = d.at("nccl_version").string();
    o.date_utc = d.at("date_utc").string();
    o.tool_version = d.at("tool_version").string();
    o.command_line = d.at("command_line").string();
    if (d.has("sm_clock_measured")) o.sm_clock_measured_hz = detail::read_measurement(d.at("sm_clock_measured"), "hz");
}

/// Bandwidth ceilings by memory level and access pattern, and the bandwidth-vs-working-set curves.
inline void read_bandwidth(const JsonCursor& root, Calibration& c) {
    const auto bw = root.at("bandwidth");
    for (const auto& [lk, lv] : bw.object().items()) {
        const auto level = memory_level_from_key(lk);
        if (!level) bw.at(lk).fail("unknown memory level \"" + lk + "\"");
        const auto lj = bw.at(lk);
        // a level is left out where it was not measured; present, it holds at least one measurement
        if (lj.object().empty()) lj.fail("no measurements (a memory level lists at least one access pattern, e.g. copy; leave out a level not measured)");
        for (const auto& [pk, pv] : lj.object().items()) {
            const auto pattern = access_pattern_from_key(pk);
            if (!pattern) lj.at(pk).fail("unknown access pattern \"" + pk + "\"");
            c.bandwidth[*level][*pattern] = detail::read_measurement(lj.at(pk), "bytes_per_second");
        }
    }
    const auto cv = root.at("bandwidth_curve");
    for (const auto& [pk, pv] : cv.object().items()) {
        const auto pattern = access_pattern_from_key(pk);
        if (!pattern) cv.at(pk).fail("unknown access pattern \"" + pk + "\"");
        c.bandwidth_curve[*pattern] = detail::read_curve(cv.at(pk));
    }
    if (root.has("l2_to_dram_step_bytes")) c.l2_to_dram_step_bytes = root.at("l2_to_dram_step_bytes").positive();
}

/// Compute ceilings (the probe's and the libraries') and the intensity curves.
inline void read_compute(const JsonCursor& root, Calibration& c) {
    const auto comp = root.at("compute");
    for (const char* table : {"probe", "library"}) {
        const auto t = comp.at(table);
        auto& dst = std::string_view(table) == "probe" ? c.probe_ceilings : c.library_ceilings;
        for (const auto& [uk, uv] : t.object().items()) dst[detail::unit_key(t, uk)] = detail::read_ceiling(t.at(uk));
    }
    const auto ic = root.at("intensity_curves");
    for (const auto& [uk, uv] : ic.object().items()) {
        const auto arr = ic.at(uk);
        auto& pts = c.intensity_curves[detail::unit_key(ic, uk)];
        for (std::size_t i = 0; i < arr.array_size(); ++i) {
            const auto p = arr.at(i);
            pts.push_back({p.at("flops_per_byte").positive(), p.at("flops_per_second").positive(),
                           p.at("bytes_per_second").positive()});
            if (i > 0 && !(pts[i].flops_per_byte > pts[i - 1].flops_per_byte))
                p.at("flops_per_byte").fail("intensities must increase along the curve");
        }
    }
}

/// The cuBLAS GEMM sweep, its fitted models, and the cuDNN convolution sweep.
inline void read_sweeps(const JsonCursor& root, Calibration& c) {
    const auto gs = root.at("gemm_sweep");
    for (std::size_t i = 0; i < gs.array_size(); ++i) {
        const auto g = gs.at(i);
        GemmRecord r;
        r.m = g.at("m").positive_integer();
        r.n = g.at("n").positive_integer();
        r.k = g.at("k").positive_integer();
        r.unit = detail::read_unit(g.at("unit"));
        r.seconds = detail::read_measurement(g.at("seconds"), "seconds");
        r.flops_per_second = g.at("flops_per_second").positive();
        r.efficiency = detail::efficiency(g.at("efficiency"));
        if (g.has("layout")) {  // optional: profiles before it was recorded measured "NN"
            r.layout = g.at("layout").string();
            if (!is_gemm_layout(r.layout)) g.at("layout").fail("must be NN, NT, TN or TT, got \"" + r.layout + "\"");
        }
        if (g.has("batch")) r.batch = g.at("batch").positive_integer();
        c.gemm_sweep.push_back(std::move(r));
    }
    const auto gf = root.at("gemm_fits");
    for (const auto& [uk, uv] : gf.object().items())
        c.gemm_fits[detail::unit_key(gf, uk)] = detail::read_fit(gf.at(uk), "flops_per_second");
    const auto cs = root.at("conv_sweep");
    for (std::size_t i = 0; i < cs.array_size(); ++i) {
        const auto v = cs.at(i);
        ConvRecord r;
        const std::string pass = v.at("pass").string();
        const auto p = conv_pass_from_key(pass);
        if (!p) v.at("pass").fail("unknown convolution pass \"" + pass + "\"");
        r.pass = *p;
        r.n = v.at("n").positive_integer();
        r.c = v.at("c").positive_integer();
        r.h = v.at("h").positive_integer();
        r.w = v.at("w").positive_integer();
        r.k = v.at("k").positive_integer();
        r.r = v.at("r").positive_integer();
        r.s = v.at("s").positive_integer();
        r.stride = v.at("stride").positive_integer();
        r.pad = v.at("pad").integer();
        if (r.pad < 0) v.at("pad").fail("must not be negative");
        r.unit = detail::read_unit(v.at("unit"));
        r.algorithm = v.at("algorithm").string();
        r.seconds = detail::read_measurement(v.at("seconds"), "seconds");
        r.flops_per_second = v.at("flops_per_second").positive();
        r.efficiency = detail::efficiency(v.at("efficiency"));
        if (v.has("groups")) r.groups = v.at("groups").positive_integer();
        if (r.c % r.groups != 0 || r.k % r.groups != 0) v.at("groups").fail("must divide c and k");
        if (v.has("dilation")) r.dilation = v.at("dilation").positive_integer();
        if (v.has("stride_h")) r.stride_h = v.at("stride_h").positive_integer();
        if (v.has("pad_h")) {
            r.pad_h = v.at("pad_h").integer();
            if (*r.pad_h < 0) v.at("pad_h").fail("must not be negative");
        }
        if (v.has("dilation_h")) r.dilation_h = v.at("dilation_h").positive_integer();
        // optional: profiles before it was recorded used NHWC for 16-bit types and NCHW for fp32
        r.layout = (r.unit == ComputeUnit::bf16_tensor || r.unit == ComputeUnit::fp16_tensor) ? "NHWC" : "NCHW";
        if (v.has("layout")) {
            r.layout = v.at("layout").string();
            if (r.layout != "NCHW" && r.layout != "NHWC") v.at("layout").fail("must be NCHW or NHWC, got \"" + r.layout + "\"");
        }
        c.conv_sweep.push_back(std::move(r));
    }
}

/// Launch latency and intervals.
inline void read_launch(const JsonCursor& root, Calibration& c) {
    const auto l = root.at("launch");
    (void)l.object();
    if (l.has("latency")) c.launch_latency_seconds = detail::read_measurement(l.at("latency"), "seconds");
    if (l.has("interval")) c.launch_interval_seconds = detail::read_measurement(l.at("interval"), "seconds");
    if (l.has("gpu_interval")) c.launch_gpu_interval_seconds = detail::read_measurement(l.at("gpu_interval"), "seconds");
}

/// Host-device copy bandwidths.
inline void read_memcpy(const JsonCursor& root, Calibration& c) {
    const auto mc = root.at("memcpy");
    for (const auto& [kk, kv] : mc.object().items()) {
        const auto kind = memcpy_kind_from_key(kk);
        if (!kind) mc.at(kk).fail("unknown copy kind \"" + kk + "\"");
        const auto e = mc.at(kk);
        MemcpyFigure f;
        f.bytes_per_second = detail::read_measurement(e, "bytes_per_second");
        f.curve = detail::read_curve(e.at("curve"));
        if (e.has("fit")) f.fit = detail::read_fit(e.at("fit"), "bytes_per_second");
        c.memcpy[*kind] = std::move(f);
    }
}

/// NCCL collective timings.
inline void read_collectives(const JsonCursor& root, Calibration& c) {
    const auto co = root.at("collectives");
    for (std::size_t i = 0; i < co.array_size(); ++i) {
        const auto e = co.at(i);
        CollectiveRecord r;
        r.op = e.at("op").string();
        r.gpus = e.at("gpus").positive_int32();
        r.bytes = e.at("bytes").positive();
        r.seconds = detail::read_measurement(e.at("seconds"), "seconds");
        r.algorithm_bytes_per_second = e.at("algorithm_bytes_per_second").positive();
        r.bus_bytes_per_second = e.at("bus_bytes_per_second").positive();
        c.collectives.push_back(std::move(r));
    }
}

/// The figures the calibration could not measure, and why.
inline void read_missing(const JsonCursor& root, Calibration& c) {
    const auto mi = root.at("missing");
    for (std::size_t i = 0; i < mi.array_size(); ++i) {
        const auto e = mi.at(i);
        MissingFigure m;
        m.figure = e.at("figure").string();
        const std::string reason = e.at("reason").string();
        const auto r = missing_reason_from_key(reason);
        if (!r) e.at("reason").fail("unknown reason \"" + reason + "\"");
        m.reason = *r;
        m.detail = e.at("detail").string();
        c.missing.push_back(std::move(m));
    }
}

/// Whether the profile is partial (Calibration::partial); absent means complete.
inline void read_partial(const JsonCursor& root, Calibration& c) {
    if (root.has("partial")) c.partial = root.at("partial").boolean();
}

/// A derived profile's origin (profile/derive.hpp), where the file has one.
inline void read_derivation(const JsonCursor& root, Calibration& c) {
    if (!root.has("derivation")) return;
    const auto d = root.at("derivation");
    Derivation out;
    out.reference_key = d.at("reference_key").string();
    out.reference = d.at("reference").string();
    const auto rules = d.at("rules");
    for (std::size_t i = 0; i < rules.array_size(); ++i) out.rules.push_back(rules.at(i).string());
    if (out.rules.empty()) rules.fail("a derived profile names at least one rule");
    c.derivation = std::move(out);
}

}  // namespace detail

/// Whether a loader takes a partial profile (Calibration::partial), one that a calibration that
/// stopped early wrote: refused by default, since its missing figures would come from elsewhere.
enum class PartialProfile { refuse, accept };

/// Parses and validates a profile; `origin` (usually the file name) prefixes every error message.
/// A partial profile is an error naming the probes it did not run unless `partial` is accept.
[[nodiscard]] inline Calibration calibration_from_json(const nlohmann::json& json, std::string_view origin,
                                                       PartialProfile partial = PartialProfile::refuse) {
    using detail::JsonCursor;
    (void)JsonCursor(json, std::string(origin), "").object();
    Calibration c;
    detail::read_schema_version(JsonCursor(json, std::string(origin), ""), c);  // before the format is read
    const nlohmann::json expanded = detail::expand_methods(json, origin);
    const JsonCursor root(expanded, std::string(origin), "");
    detail::read_device(root, c);
    detail::read_bandwidth(root, c);
    detail::read_compute(root, c);
    detail::read_sweeps(root, c);
    detail::read_launch(root, c);
    detail::read_memcpy(root, c);
    detail::read_collectives(root, c);
    detail::read_missing(root, c);
    detail::read_partial(root, c);
    detail::read_derivation(root, c);
    try {
        validate(c);
    } catch (const std::exception& e) {
        throw std::runtime_error(std::string(origin) + ": " + e.what());
    }
    if (c.partial && partial == PartialProfile::refuse) {
        throw std::runtime_error(std::string(origin) + ": a partial calibration: it stopped before " +
                                 probes_not_run_text(c) + " ran; load it with PartialProfile::accept to use it anyway");
    }
    return c;
}

/// Reads, parses and validates a profile file. Errors name the file and the JSON key path; a partial
/// profile is refused unless `partial` is accept.
[[nodiscard]] inline Calibration load_calibration(const std::filesystem::path& path,
                                                  PartialProfile partial = PartialProfile::refuse) {
    return calibration_from_json(detail::read_json_file(path), path.filename().string(), partial);
}

/// Writes the profile atomically: validate, write a temporary file in the same directory, flush,
/// then rename over the destination (a reader sees the old file or the new one, never half of one).
inline void save_calibration(const Calibration& c, const std::filesystem::path& path) {
    validate(c);
    detail::write_text_atomically(to_json(c).dump(2) + "\n", path);
}

// ---------------------------------------------------------------------------------------------
// Accessors the roofline uses
// ---------------------------------------------------------------------------------------------

}  // namespace roofsim
