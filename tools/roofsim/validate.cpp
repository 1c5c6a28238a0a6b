// roofsim validate: predictions against PyTorch timings (tools/validate/measure_pytorch.py).

#include "commands.hpp"

#include <validate/ddp_validation.hpp>
#include <validate/kernel_corpus.hpp>
#include <validate/max_batch_validation.hpp>
#include <validate/scaling_validation.hpp>
#include <validate/throughput_validation.hpp>
#include <validate/kernel_fit.hpp>
#include <validate/validation.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

namespace roofsim::cli {
namespace {

struct ValidateOptions {
    std::string measurements, framework, runs, exported, host_speed = "profiled", kernels, half = "test";
    std::vector<std::string> ddp;
    std::string max_batch;
    std::string throughputs;
    bool datasheet = false;
    bool csv = false;
    bool cases = false, phases = false, passes = false;
};

/// Errors (fractions) by (op or model, precision mode).
using ErrorGroups = std::map<std::pair<std::string, std::string>, std::vector<double>>;

/// One row per group: its case count, the median |error| (the upper one of an even count) and the worst.
void print_error_groups(const ErrorGroups& groups, const std::string& what, std::ostream& out) {
    TextTable t({"op or model", "mode", "cases", "median |" + what + "| %", "worst " + what + " %"});
    t.overflow(0, Overflow::shorten_middle);
    for (const auto& [key, errors] : groups) {
        std::vector<double> a;
        for (double x : errors) a.push_back(std::abs(x));
        std::sort(a.begin(), a.end());
        const double worst =
            *std::max_element(errors.begin(), errors.end(), [](double x, double y) { return std::abs(x) < std::abs(y); });
        t.add_row({key.first, key.second, std::to_string(errors.size()), format_number("%.1f", 100 * a[a.size() / 2]),
                   format_number("%+.1f", 100 * worst)});
    }
    t.print(out);
}

/// `roofsim validate --runs --phases`: each model case's phases, each timed on its own, measured
/// against predicted, run by run.
void print_phases(const RunsEvaluation& v, std::ostream& out) {
    Seconds longest{0};
    for (const auto* cases : {&v.cases, &v.exported}) {
        for (const auto& c : *cases) {
            for (const auto& [m, p] : c.phases) longest = std::max({longest, m.forward_backward, p.forward_backward, m.optimizer, p.optimizer});
        }
    }
    const auto unit = TimeUnit::for_largest(longest);
    out << "\nModel steps by phase, each timed on its own between two synchronizes (" << unit.name
        << ", measured / predicted;\nthe runs newest first; forward + backward minus forward in brackets):\n";
    TextTable t({"case", "path", "run", "forward", "forward + backward", "(backward)", "optimizer"});
    t.overflow(0, Overflow::shorten_middle);
    const auto pair = [&](Seconds measured, Seconds predicted) { return unit(measured) + " / " + unit(predicted); };
    for (const auto& [path, cases] : {std::pair{"zoo", &v.cases}, std::pair{"exported", &v.exported}}) {
        for (const auto& c : *cases) {
            for (std::size_t i = 0; i < c.phases.size(); ++i) {
                const auto& [m, p] = c.phases[i];
                t.add_row({c.id, path, std::to_string(i + 1), pair(m.forward, p.forward),
                           pair(m.forward_backward, p.forward_backward),
                           pair(m.forward_backward - m.forward, p.forward_backward - p.forward), pair(m.optimizer, p.optimizer)});
            }
        }
    }
    t.print(out);
}

/// Median, lowest and highest of a list of errors as "%+.1f" cells; dashes for none.
std::array<std::string, 3> error_range(const std::vector<double>& errors) {
    if (errors.empty()) return {"-", "-", "-"};
    const auto [lowest, highest] = std::minmax_element(errors.begin(), errors.end());
    return {format_number("%+.1f", 100 * detail::quantile(errors, 0.5)), format_number("%+.1f", 100 * *lowest),
            format_number("%+.1f", 100 * *highest)};
}

/// `roofsim validate --runs --passes`: each model case's passes over the runs, each pass's median
/// step against the prediction at the profile's host speed and at its own canary's.
void print_passes(const RunsEvaluation& v, std::ostream& out) {
    out << "\nModel steps pass by pass (each pass's median step, passes minutes apart in one process; the error %\n"
           "at the framework profile's host speed, and at the host speed of the pass's own canary: median, lowest,\n"
           "highest over every pass of every run whose passes are known):\n";
    TextTable t({"case", "path", "passes", "at profile's host", "lowest", "highest", "at pass's canary", "lowest", "highest",
                 "canary x"});
    t.overflow(0, Overflow::shorten_middle);
    for (const auto& [path, cases] : {std::pair{"zoo", &v.cases}, std::pair{"exported", &v.exported}}) {
        for (const auto& c : *cases) {
            if (c.passes.empty()) continue;
            std::vector<double> at_profiled, at_canary, scales;
            for (const auto& p : c.passes) {
                at_profiled.push_back(p.error_at_profiled);
                if (p.error_at_canary && p.host_time_scale) {
                    at_canary.push_back(*p.error_at_canary);
                    scales.push_back(*p.host_time_scale);
                }
            }
            const auto profiled = error_range(at_profiled);
            const auto canary = error_range(at_canary);
            std::string scale_range = "-";
            if (!scales.empty()) {
                const auto [lowest, highest] = std::minmax_element(scales.begin(), scales.end());
                scale_range = format_number("%.2f", *lowest) + "-" + format_number("%.2f", *highest);
            }
            t.add_row({c.id, path, std::to_string(c.passes.size()), profiled[0], profiled[1], profiled[2], canary[0], canary[1],
                       canary[2], scale_range});
        }
    }
    t.print(out);
}

void print_run_lines(const RunsEvaluation& v, std::ostream& out) {
    for (const auto& r : v.runs) {
        out << "  " << r.name << " (" << r.origin << "): layer cases median |error| " << format_number("%.1f", 100 * r.layer_median)
            << "%, 90th percentile " << format_number("%.1f", 100 * r.layer_p90) << "%; model steps worst "
            << format_number("%.1f", 100 * r.model_worst) << "%";
        if (r.host_canary) {  // how fast and how steady the host was while its probe measured
            out << "; the probe's canary " << format_number("%.2f", 1e6 * r.host_canary->value()) << " us";
            if (r.host_canary_p10 && r.host_canary_p90) {
                out << " (10th-90th percentile " << format_number("%.2f", 1e6 * r.host_canary_p10->value()) << "-"
                    << format_number("%.2f", 1e6 * r.host_canary_p90->value()) << ")";
            }
        }
        out << "\n";
    }
}

std::string errors_by_run(const CaseOverRuns& c) {
    std::string text;
    for (double e : c.errors) {
        if (!text.empty()) text += ' ';
        text += format_number("%+.1f", 100 * e);
    }
    return text;
}

void print_cases_over_runs(const std::vector<CaseOverRuns>& cases, bool models_only, std::ostream& out) {
    TextTable t({"case", "runs", "median error %", "errors % by run, newest first", "paced by", "host / GPU",
                 "step on a host " + format_number("%.1f", validation_host_swing) + "x slower %", "passes apart %",
                 "median memory error %"});
    t.overflow(0, Overflow::shorten_middle).overflow(3, Overflow::wrap);
    for (const auto& c : cases) {
        if (models_only && !c.model) continue;
        t.add_row({c.id, std::to_string(c.errors.size()), format_number("%+.1f", 100 * c.median_error()), errors_by_run(c),
                   c.host_bound() ? "host" : "GPU",
                   std::isfinite(c.median_host_over_gpu()) ? format_number("%.2f", c.median_host_over_gpu()) : "no GPU work",
                   c.model ? format_number("%+.1f", 100 * c.median_host_swing_effect()) : "-",
                   percent_or_dash("%.1f", c.median_pass_spread()), percent_or_dash("%+.1f", c.median_memory_error())});
    }
    t.print(out);
}

void print_validation_runs(const RunsEvaluation& v, const ValidateOptions& o, HostSpeed speed, std::ostream& out) {
    out << "Validation over " << v.runs.size() << " runs (" << o.runs
        << "), each predicted with the framework profile and calibration measured with it, at "
        << (speed == HostSpeed::measured ? "each case's canary host speed" : "the framework profile's host speed") << ":\n";
    print_run_lines(v, out);
    out << '\n';
    if (o.cases) {
        print_cases_over_runs(v.cases, false, out);
    } else {
        ErrorGroups groups;
        for (const auto& c : v.cases) groups[{c.family, c.precision}].push_back(c.median_error());
        print_error_groups(groups, "median error", out);
        out << "\nModel steps:\n";
        print_cases_over_runs(v.cases, true, out);
    }
    const auto layers = [](const CaseOverRuns& c) { return !c.model; };
    const auto models = [](const CaseOverRuns& c) { return c.model; };
    out << "\nover the runs (each case's median error): layer cases: median |error| "
        << format_number("%.1f", 100 * median_error_quantile(v.cases, 0.5, layers)) << "%, 90th percentile "
        << format_number("%.1f", 100 * median_error_quantile(v.cases, 0.9, layers)) << "%; model steps: median "
        << format_number("%.1f", 100 * median_error_quantile(v.cases, 0.5, models)) << "%, worst "
        << format_number("%.1f", 100 * median_error_quantile(v.cases, 1.0, models)) << "%\n";
    if (!v.exported.empty()) {
        out << "\nModel steps predicted from the exported IRs:\n";
        print_cases_over_runs(v.exported, true, out);
    }
    if (o.phases) print_phases(v, out);
    if (o.passes) print_passes(v, out);
}

/// One validation file's evaluation: the cases at the chosen host speed and at the other one.
struct SetEvaluation {
    const ValidationSet* set = nullptr;
    const FrameworkProfile* framework = nullptr;
    HostSpeed speed = HostSpeed::profiled, other_speed = HostSpeed::measured;
    std::vector<CaseError> errors, other;
    const char* other_error_header() const {
        return speed == HostSpeed::measured ? "error % at profile's host" : "error % at canary's host";
    }
};

void print_set_header(const SetEvaluation& e, const CostContext& ctx, std::ostream& out) {
    out << e.set->origin << "\n  ceilings: " << ctx.ceilings.origin
        << "\n  host costs: " << (e.framework ? e.framework->provenance() : std::string("launch rate only"));
    if (const auto host = e.framework ? e.framework->host_seconds_per_op() : std::nullopt) {
        out << ", on a host of " << format_number("%.2f", host->value() * 1e6) << " us per tiny add";
    }
    out << "\n  cases predicted at "
        << (e.speed == HostSpeed::measured ? "each case's canary host speed (host costs x canary x)"
                                           : "the framework profile's host speed")
        << "\n\n";
}

/// The unit for a column of measured and predicted times: the one that suits the longest.
TimeUnit unit_for_cases(const std::vector<CaseError>& errors) {
    double longest = 0;
    for (const auto& e : errors) longest = std::max({longest, e.c->measured_seconds, e.predicted_seconds});
    return TimeUnit::for_largest(Seconds(longest));
}

void print_set_cases(const SetEvaluation& v, std::ostream& out) {
    const auto unit = unit_for_cases(v.errors);
    const std::string u = unit.name;
    TextTable t({"case", "measured " + u, "predicted " + u, "host " + u, "GPU " + u, "error %", "paced by", "canary x",
                 v.other_error_header(), "passes apart %"});
    t.overflow(0, Overflow::shorten_middle);
    for (std::size_t i = 0; i < v.errors.size(); ++i) {
        const auto& e = v.errors[i];
        t.add_row({e.c->id, unit(Seconds(e.c->measured_seconds)), unit(Seconds(e.predicted_seconds)),
                   unit(Seconds(e.predicted_host_seconds)), unit(Seconds(e.predicted_gpu_seconds)),
                   format_number("%+.1f", 100 * e.error), e.host_bound() ? "host" : "GPU",
                   format_number("%.2f", host_time_scale(*e.c, v.framework, HostSpeed::measured)),
                   format_number("%+.1f", 100 * v.other[i].error), percent_or_dash("%.1f", e.c->pass_spread())});
    }
    t.print(out);
    out << '\n';
}

/// "<median label> X%, <upper label> Y%" of the cases `pick` selects; "none" where it selects none
/// (a file of layer cases only, or of model cases only).
template <class Pick>
std::string errors_of(const std::vector<CaseError>& list, Pick pick, const char* median_label, double upper,
                      const char* upper_label) {
    if (std::none_of(list.begin(), list.end(), pick)) return "none";
    return std::string(median_label) + " " + format_number("%.1f", 100 * error_quantile(list, 0.5, pick)) + "%, " +
           upper_label + " " + format_number("%.1f", 100 * error_quantile(list, upper, pick)) + "%";
}

void print_set_summary(const SetEvaluation& v, std::ostream& out) {
    const auto layers = [](const CaseError& e) { return !e.c->model; };
    const auto models = [](const CaseError& e) { return e.c->model; };
    const auto summary = [&](const std::vector<CaseError>& list, const char* what) {
        out << what << ": layer cases: " << errors_of(list, layers, "median |error|", 0.9, "90th percentile")
            << "; model steps: " << errors_of(list, models, "median", 1.0, "worst") << "\n";
    };
    const bool measured = v.speed == HostSpeed::measured;
    out << '\n';
    summary(measured ? v.other : v.errors, "at the profile's host speed");
    summary(measured ? v.errors : v.other, "at each case's canary host speed");
    for (const auto& e : v.errors) {
        if (e.memory_error) {
            out << "peak memory " << e.c->id << ": measured " << format_number("%.2f", *e.c->measured_peak_bytes / 1073741824.0)
                << " GiB, predicted " << format_number("%.2f", *e.predicted_peak_bytes / 1073741824.0) << " GiB ("
                << format_number("%+.1f", 100 * *e.memory_error) << "%)\n";
        }
    }
    for (const auto& [id, why] : v.set->not_modelled) out << "not modelled: " << id << " (" << why << ")\n";
}

void print_exported(const SetEvaluation& v, const std::string& dir, const CostContext& ctx, std::ostream& out) {
    const auto exported = evaluate_exported(*v.set, dir, ctx, v.framework, v.speed);
    const auto exported_other = evaluate_exported(*v.set, dir, ctx, v.framework, v.other_speed);
    out << "\nModel steps predicted from the exported IRs in " << dir << ":\n";
    const auto unit = unit_for_cases(exported);
    const std::string u = unit.name;
    TextTable table({"case", "measured " + u, "predicted " + u, "error %", "paced by", "canary x", v.other_error_header(),
                     "measured peak GiB", "predicted peak GiB", "memory error %"});
    table.overflow(0, Overflow::shorten_middle);
    const auto gib = [](std::optional<double> b) { return b ? format_number("%.2f", *b / 1073741824.0) : "-"; };
    for (std::size_t i = 0; i < exported.size(); ++i) {
        const auto& e = exported[i];
        table.add_row({e.c->id, unit(Seconds(e.c->measured_seconds)), unit(Seconds(e.predicted_seconds)),
                       format_number("%+.1f", 100 * e.error), e.host_bound() ? "host" : "GPU",
                       format_number("%.2f", host_time_scale(*e.c, v.framework, HostSpeed::measured)),
                       format_number("%+.1f", 100 * exported_other[i].error), gib(e.c->measured_peak_bytes),
                       gib(e.predicted_peak_bytes), percent_or_dash("%+.1f", e.memory_error)});
    }
    table.print(out);
    if (exported.empty()) out << "(no IR file matches a model case)\n";
}

HostSpeed host_speed(const ValidateOptions& o) {
    return o.host_speed == "profiled" ? HostSpeed::profiled : HostSpeed::measured;
}

void run_validate_file(const ValidateOptions& o, const Context& context, std::ostream& out) {
    if (o.measurements.empty()) throw UsageError(
        "validate needs one of: --measurements FILE, --runs FILE, --kernels DIR, --ddp FILE..., --max-batch FILE, --throughputs FILE");
    const ValidationSet set = load_validation(o.measurements);
    const auto& spec = gpu_or_throw(set.gpu_key);
    const auto& calibration = context.calibration;
    const Calibration* measured =
        calibration && calibration->device.gpu_key == spec.key ? &*calibration : find_builtin_calibration(spec.key);
    std::optional<FrameworkProfile> framework_file;
    if (!o.framework.empty()) framework_file = load_framework_profile(o.framework);
    SetEvaluation v;
    v.set = &set;
    v.framework = framework_file ? &*framework_file : find_builtin_framework_profile(spec.key);
    // --datasheet: the GPU as if it had not been measured (its datasheet, the kernel models of its family)
    const auto ctx = make_cost_context(spec, o.datasheet ? nullptr : measured, v.framework);
    v.speed = host_speed(o);
    v.other_speed = v.speed == HostSpeed::measured ? HostSpeed::profiled : HostSpeed::measured;
    v.errors = evaluate(set, ctx, v.framework, v.speed);
    v.other = evaluate(set, ctx, v.framework, v.other_speed);
    print_set_header(v, ctx, out);
    if (o.cases) print_set_cases(v, out);
    ErrorGroups groups;
    for (const auto& e : v.errors) groups[{e.c->family, e.c->precision}].push_back(e.error);
    print_error_groups(groups, "error", out);
    print_set_summary(v, out);
    if (!o.exported.empty()) print_exported(v, o.exported, ctx, out);
}

/// `roofsim validate --kernels DIR`: the kernel corpus's errors by family, unit and group, for one half.
void print_kernel_corpus(const ValidateOptions& o, std::ostream& out) {
    const KernelCorpus corpus = load_kernel_corpus(o.kernels);
    const CostContext ctx = kernel_corpus_context(corpus);
    const auto errors = evaluate_kernel_corpus(corpus, ctx, o.half);
    if (o.csv) {
        // every case of the half: what the table groups, with the GEMM the model placed and its choice
        out << "kind,schema_version,family,half,unit,group,case,measured_seconds,p10_seconds,p90_seconds,predicted_seconds,error,"
               "gemm_m,gemm_n,gemm_k,gemm_batch,tile_m,tile_n,split,waves,aligned,efficiency\n";
        for (const auto& e : errors) {
            out << "roofsim-kernel-validation,1," << e.c->family << ',' << e.c->half << ',' << e.c->unit << ',' << e.c->group << ','
                << e.c->label << ',' << format_number("%.6e", e.c->measured.value()) << ',' << format_number("%.6e", e.c->p10.value())
                << ',' << format_number("%.6e", e.c->p90.value()) << ',' << format_number("%.6e", e.predicted.value()) << ','
                << format_number("%.5f", e.error);
            if (e.gemm) {
                out << ',' << e.gemm->m << ',' << e.gemm->n << ',' << e.gemm->k << ',' << e.gemm->batch << ',' << e.choice.tile_m << ','
                    << e.choice.tile_n << ',' << e.choice.split << ',' << e.choice.waves << ',' << (e.choice.aligned ? 1 : 0) << ','
                    << format_number("%.4f", e.choice.efficiency) << '\n';
            } else {
                out << ",,,,,,,,,,\n";
            }
        }
        return;
    }
    out << "Kernel corpus " << o.kernels << ": " << corpus.provenance << "\n";
    out << "Predicted on " << ctx.ceilings.gpu_name << " with its built-in profiles; the " << o.half
        << (o.half == "all" ? " cases" : " half") << ", error = predicted / measured - 1.\n\n";
    if (o.cases) {
        auto sorted = errors;
        std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return std::abs(a.error) > std::abs(b.error); });
        TextTable t({"family", "unit", "group", "case", "measured", "predicted", "error %"});
        t.overflow(3, Overflow::shorten_middle);
        for (const auto& e : sorted) {
            t.add_row({e.c->family, e.c->unit, e.c->group, e.c->label, format_duration(e.c->measured), format_duration(e.predicted),
                       format_number("%+.1f", 100 * e.error)});
        }
        t.print(out);
        out << "\n";
    }
    // groups: each (family, unit, group), then each (family, unit), then each family
    std::map<std::tuple<std::string, std::string, std::string>, std::vector<double>> groups;
    for (const auto& e : errors) {
        groups[{e.c->family, e.c->unit, e.c->group}].push_back(e.error);
        groups[{e.c->family, e.c->unit, "(all)"}].push_back(e.error);
        groups[{e.c->family, "(all)", "(all)"}].push_back(e.error);
    }
    TextTable t({"family", "unit", "group", "cases", "median |error| %", "p90 |error| %", "median error %"});
    for (const auto& [key, v] : groups) {
        std::vector<double> a;
        for (double x : v) a.push_back(std::abs(x));
        t.add_row({std::get<0>(key), std::get<1>(key), std::get<2>(key), std::to_string(v.size()),
                   format_number("%.1f", 100 * detail::quantile(a, 0.5)), format_number("%.1f", 100 * detail::quantile(a, 0.9)),
                   format_number("%+.1f", 100 * detail::quantile(v, 0.5))});
    }
    t.print(out);
}

/// `roofsim validate --ddp FILE...`: data-parallel steps measured over N GPUs against their prediction.
void print_ddp(const ValidateOptions& o, std::ostream& out) {
    std::vector<DdpRun> runs;
    for (const auto& f : o.ddp) runs.push_back(load_ddp_run(f));
    const std::string key = runs.front().gpu_key;
    for (const auto& r : runs) {
        if (r.gpu_key != key) throw std::runtime_error(r.origin + ": GPU " + r.gpu_key + ", but " + runs.front().origin + " is " + key);
    }
    const auto& spec = gpu_or_throw(key);
    std::optional<FrameworkProfile> framework_file;
    if (!o.framework.empty()) framework_file = load_framework_profile(o.framework);
    const FrameworkProfile* framework = framework_file ? &*framework_file : find_builtin_framework_profile(key);
    CostContext ctx = make_cost_context(spec, find_builtin_calibration(key), framework);
    add_builtin_collectives(ctx, key);
    const auto results = evaluate_ddp(runs, ctx, framework);
    if (results.empty()) throw std::runtime_error("--ddp: no file of 2 or more GPUs among the ones given");
    if (o.csv) {
        out << "kind,schema_version,case,gpus,runs,measured_seconds,p10_seconds,p90_seconds,run_median_min_seconds,"
               "run_median_max_seconds,predicted_seconds,error,paced,within,communication_seconds,exposed_communication_seconds,"
               "measured_efficiency,predicted_efficiency,buckets\n";
        for (const auto& e : results) {
            out << "roofsim-ddp-validation-result,2," << e.c->step.id << ',' << e.c->world << ',' << e.runs << ',' << e.measured << ','
                << e.p10 << ',' << e.p90 << ',' << e.run_median_min << ',' << e.run_median_max << ',' << e.predicted << ',' << e.error << ',' << (e.host_paced ? "host" : "gpu") << ','
                << (e.within ? 1 : 0) << ',' << e.communication << ',' << e.exposed << ','
                << (e.measured_efficiency ? format_number("%.6g", *e.measured_efficiency) : std::string()) << ','
                << e.predicted_efficiency << ',' << e.buckets.size() << '\n';
        }
        return;
    }
    for (const auto& r : runs) out << "DDP steps " << r.origin << "\n";
    out << "Predicted on " << key << " with its built-in profiles; all-reduce: " << all_reduce_source(results.front().c->world, ctx.collectives)
        << ".\nerror = predicted / measured - 1; bound: GPU-paced " << format_number("%.0f", 100 * ddp_gpu_paced_bound)
        << " %, host-paced the p10-p90 of its samples or " << format_number("%.0f", 100 * ddp_host_paced_bound)
        << " %; efficiency: N-GPU throughput over N x one GPU's.\nA case measured in several runs: the median and "
           "p10-p90 of all their samples.\n\n";
    TextTable t({"case", "GPUs", "measured ms", "p10-p90 ms", "predicted ms", "error %", "paced", "ok", "comm ms", "exposed ms",
                 "efficiency m/p"});
    t.overflow(0, Overflow::shorten_middle);
    int within = 0;
    for (const auto& e : results) {
        within += e.within ? 1 : 0;
        t.add_row({e.c->step.id, std::to_string(e.c->world), format_number("%.2f", 1e3 * e.measured),
                   format_number("%.1f", 1e3 * e.p10) + "-" + format_number("%.1f", 1e3 * e.p90), format_number("%.2f", 1e3 * e.predicted),
                   format_number("%+.1f", 100 * e.error), e.host_paced ? "host" : "GPU", e.within ? "yes" : "NO",
                   format_number("%.2f", 1e3 * e.communication), format_number("%.2f", 1e3 * e.exposed),
                   (e.measured_efficiency ? format_number("%.2f", *e.measured_efficiency) : std::string("-")) + " / " +
                       format_number("%.2f", e.predicted_efficiency)});
    }
    t.print(out);
    out << within << " of " << results.size() << " steps within their bound.\n";
    bool heading = false;
    for (const auto& e : results) {
        if (e.runs < 2 || e.run_median_max < 1.05 * e.run_median_min) continue;
        if (!heading) out << "Runs whose medians differ by 5 % or more:\n";
        heading = true;
        out << "  " << e.c->step.id << " on " << e.c->world << " GPUs: " << e.runs << " runs, medians "
            << format_number("%.2f", 1e3 * e.run_median_min) << " to " << format_number("%.2f", 1e3 * e.run_median_max) << " ms\n";
    }
}

/// `roofsim validate --max-batch FILE`: the largest batch that trained against --batch max.
void print_max_batch(const ValidateOptions& o, std::ostream& out) {
    const MaxBatchRun run = load_max_batch_run(o.max_batch);
    const auto& spec = gpu_or_throw(run.gpu_key);
    const FrameworkProfile* framework = find_builtin_framework_profile(run.gpu_key);
    const CostContext ctx = make_cost_context(spec, find_builtin_calibration(run.gpu_key), framework);
    const auto results = evaluate_max_batch(run, ctx, framework);
    if (o.csv) {
        out << "kind,schema_version,case,measured_largest_batch,predicted_largest_batch,error,within,measured_peak_bytes,"
               "reserved_peak_bytes,predicted_peak_bytes,worst_peak_error\n";
        for (const auto& r : results) {
            out << "roofsim-max-batch-validation-result,1," << r.c->id << ',' << r.c->largest << ',' << r.predicted << ',' << r.error
                << ',' << (r.within ? 1 : 0) << ',' << r.measured_peak << ',' << r.reserved_peak << ',' << r.predicted_peak << ','
                << r.worst_peak_error << '\n';
        }
        return;
    }
    out << "Largest batches " << run.origin << "\nPredicted on " << run.gpu_key << " (" << format_number("%.2f", to_gib(ctx.memory_capacity))
        << " GiB, less " << format_number("%.2f", cuda_context_bytes / (1024.0 * 1024 * 1024))
        << " GiB CUDA context); bound " << format_number("%.0f", 100 * max_batch_bound)
        << " %. Peaks in GiB at the largest batch that trained (allocated, reserved by the allocator, predicted);\n"
           "worst peak error: over every batch that trained.\n\n";
    TextTable t({"case", "largest", "predicted", "error %", "ok", "allocated", "reserved", "predicted GiB", "worst peak error %"});
    t.overflow(0, Overflow::shorten_middle);
    int within = 0;
    for (const auto& r : results) {
        within += r.within ? 1 : 0;
        t.add_row({r.c->id, std::to_string(r.c->largest), std::to_string(r.predicted), format_number("%+.1f", 100 * r.error),
                   r.within ? "yes" : "NO", format_number("%.2f", r.measured_peak / (1024.0 * 1024 * 1024)),
                   format_number("%.2f", r.reserved_peak / (1024.0 * 1024 * 1024)),
                   format_number("%.2f", r.predicted_peak / (1024.0 * 1024 * 1024)), format_number("%+.1f", 100 * r.worst_peak_error)});
    }
    t.print(out);
    out << within << " of " << results.size() << " within " << format_number("%.0f", 100 * max_batch_bound) << " %.\n";
}

/// A published row's model and precision by roofsim's names (the zoo model, the precision mode).
std::string zoo_name(const std::string& published) { return std::string(find_published_model(published)->zoo_name); }
std::string mode_name(const std::string& published) { return std::string(to_string(*published_precision_mode(published))); }

/// The columns of `validate --throughputs --csv`: one header for every record; each record fills
/// the columns it has (docs in the option's help).
constexpr std::array<const char*, 28> throughput_csv_columns = {
    "kind", "schema_version", "record", "row", "gpu", "gpu_b", "model", "precision", "bench_round", "batch", "measured",
    "predicted", "error", "difference", "profile", "fits", "peak_bytes", "usable_bytes", "next_batch", "next_fits",
    "next_peak_bytes", "rows", "gpus", "pairs", "disagreeing", "median_abs_error", "max_abs_error", "note"};

/// |difference| of published and predicted scaling efficiency: median and max over the non-anomalous
/// configurations.
std::pair<double, double> scaling_differences(const ScalingValidation& scaling) {
    std::vector<double> d;
    for (const auto& r : scaling.results) {
        if (!r.anomaly) d.push_back(std::abs(r.difference()));
    }
    if (d.empty()) return {0, 0};
    return {detail::quantile(d, 0.5), *std::max_element(d.begin(), d.end())};
}

void print_throughput_csv(const ThroughputValidation& v, const std::vector<ThroughputErrorSummary>& summaries,
                          const PairOrdering& ordering, const std::vector<ThroughputRatio>& ratios, const ScalingValidation& scaling,
                          std::ostream& out) {
    for (std::size_t c = 0; c < throughput_csv_columns.size(); ++c) out << (c ? "," : "") << throughput_csv_columns[c];
    out << '\n';
    using Fields = std::map<std::string, std::string>;
    const auto record = [&](const std::string& kind, Fields f) {
        f["kind"] = "roofsim-throughput-validation-result";
        f["schema_version"] = "2";
        f["record"] = kind;
        for (std::size_t c = 0; c < throughput_csv_columns.size(); ++c) {
            const auto it = f.find(throughput_csv_columns[c]);
            out << (c ? "," : "") << (it == f.end() ? std::string() : csv_field(it->second));
        }
        out << '\n';
    };
    const auto number = [](double x) { return format_number("%.9g", x); };
    for (const auto& r : v.results) {
        record("row", {{"row", r.row ? std::to_string(r.row->row) : std::string()},
                       {"gpu", r.gpu_key},
                       {"model", zoo_name(r.model)},
                       {"precision", std::string(to_string(r.mode))},
                       {"bench_round", r.row ? r.row->bench_round : std::string()},
                       {"batch", std::to_string(r.batch)},
                       {"measured", number(r.measured)},
                       {"predicted", number(r.predicted)},
                       {"error", number(r.error)},
                       {"profile", r.profile},
                       {"fits", r.fits ? "1" : "0"},
                       {"peak_bytes", number(r.peak_bytes)},
                       {"usable_bytes", number(r.usable_bytes)},
                       {"next_batch", std::to_string(r.next_batch)},
                       {"next_fits", r.next_fits ? "1" : "0"},
                       {"next_peak_bytes", number(r.next_peak_bytes)}});
    }
    for (const auto& s : summaries) {
        record("summary", {{"model", s.model == "all" ? s.model : zoo_name(s.model)},
                           {"rows", std::to_string(s.rows)},
                           {"median_abs_error", number(s.median_abs_error)},
                           {"max_abs_error", number(s.max_abs_error)},
                           {"row", s.worst && s.worst->row ? std::to_string(s.worst->row->row) : std::string()},
                           {"gpu", s.worst ? s.worst->gpu_key : std::string()}});
    }
    for (const auto& g : ordering.groups) {
        record("pair_group", {{"model", zoo_name(g.model)},
                              {"precision", mode_name(g.precision)},
                              {"gpus", std::to_string(g.gpus)},
                              {"pairs", std::to_string(g.pairs)},
                              {"disagreeing", std::to_string(g.disagreeing)}});
    }
    for (const auto& p : ordering.pairs) {
        record("pair", {{"model", zoo_name(p.model)},
                        {"precision", mode_name(p.precision)},
                        {"gpu", p.faster.gpu_key},
                        {"gpu_b", p.slower.gpu_key},
                        {"measured", number(p.faster.measured / p.slower.measured)},
                        {"predicted", number(p.faster.predicted / p.slower.predicted)},
                        {"disagreeing", p.agrees ? "0" : "1"}});
    }
    for (const auto& r : ratios) {
        record("ratio", {{"model", zoo_name(r.model)},
                         {"precision", mode_name(r.precision)},
                         {"gpu", r.numerator},
                         {"gpu_b", r.denominator},
                         {"measured", number(r.measured)},
                         {"predicted", number(r.predicted)},
                         {"difference", number(r.difference())},
                         {"error", number(r.error())}});
    }
    for (const auto& r : scaling.results) {
        record("scaling", {{"gpu", r.gpu_key},
                           {"model", zoo_name(r.model)},
                           {"precision", std::string(to_string(r.mode))},
                           {"bench_round", r.bench_round},
                           {"batch", std::to_string(r.batch)},
                           {"gpus", std::to_string(r.gpus)},
                           {"rows", std::to_string(r.rows)},
                           {"measured", number(r.published)},
                           {"predicted", number(r.predicted)},
                           {"difference", number(r.difference())},
                           {"note", (r.anomaly ? "published scaling anomaly; " : "") + r.communication}});
    }
    if (!scaling.results.empty()) {
        const auto [median, most] = scaling_differences(scaling);
        record("scaling_summary", {{"rows", std::to_string(scaling.results.size())},
                                   {"median_abs_error", number(median)},
                                   {"max_abs_error", number(most)},
                                   {"note", "|predicted - published| scaling efficiency, anomalies left out"}});
    }
    if (scaling.unpaired) {
        record("skipped", {{"rows", std::to_string(scaling.unpaired)}, {"note", "multi-GPU configurations without a one-GPU row to pair"}});
    }
    for (const auto& [model, rows] : v.not_built_in) {
        record("skipped", {{"model", model}, {"rows", std::to_string(rows)}, {"note", "model not built in"}});
    }
    for (const auto& n : v.notes) record("note", {{"note", n}});
}

/// Whether the memory model agrees with each published batch (the largest that fit its card): the
/// batch fits and the next power of two does not; the rows where it does not, with both peaks.
void print_published_batches(const ThroughputValidation& v, std::ostream& out) {
    std::size_t fits = 0, next_fits = 0;
    for (const auto& r : v.results) {
        fits += r.fits ? 1 : 0;
        next_fits += r.next_fits ? 1 : 0;
    }
    out << "\nPublished batches (each the largest that fit its card): the batch fits on " << fits << " of " << v.results.size()
        << " rows; the next power of two fits on " << next_fits << " (it should on none).\n";
    TextTable t({"row", "GPU", "model", "precision", "batch", "peak GiB", "usable GiB", "next", "next peak GiB", "why"});
    bool any = false;
    for (const auto& r : v.results) {
        if (r.batch_agrees()) continue;
        any = true;
        t.add_row({r.row ? std::to_string(r.row->row) : "-", r.gpu_key, zoo_name(r.model), std::string(to_string(r.mode)),
                   std::to_string(r.batch), format_number("%.1f", r.peak_bytes / (1024.0 * 1024 * 1024)),
                   format_number("%.1f", r.usable_bytes / (1024.0 * 1024 * 1024)), std::to_string(r.next_batch),
                   format_number("%.1f", r.next_peak_bytes / (1024.0 * 1024 * 1024)),
                   !r.fits ? "batch over" : "next fits"});
    }
    if (any) t.print(out);
}

/// The published data-parallel scaling beside roofsim's (scaling_validation.hpp).
void print_scaling(const ScalingValidation& scaling, std::ostream& out) {
    if (scaling.results.empty()) return;
    const auto [median, most] = scaling_differences(scaling);
    out << "\nData-parallel scaling (one node, DDP at the published batch per GPU): efficiency = N-GPU samples/s over N x one "
           "GPU's of the same round; |predicted - published| median "
        << format_number("%.3f", median) << ", max " << format_number("%.3f", most) << " (anomalies left out). exposed %: of "
        << "the predicted N-GPU step, the backward waiting on all-reduces.\n";
    TextTable t({"GPU", "model", "precision", "round", "batch", "GPUs", "published", "predicted", "difference", "exposed %", "note"});
    for (const auto& r : scaling.results) {
        t.add_row({r.gpu_key, zoo_name(r.model), std::string(to_string(r.mode)), r.bench_round.empty() ? "-" : r.bench_round,
                   std::to_string(r.batch), std::to_string(r.gpus), format_number("%.3f", r.published), format_number("%.3f", r.predicted),
                   format_number("%+.3f", r.difference()), format_number("%.1f", 100 * r.exposed_share),
                   r.anomaly ? "published anomaly" : ""});
    }
    t.print(out);
    if (scaling.unpaired) out << "(" << scaling.unpaired << " configurations without a one-GPU row to pair)\n";
}

/// `roofsim validate --throughputs FILE`: published single-GPU training throughputs against the
/// predictions on each GPU's default profile.
void print_throughputs(const ValidateOptions& o, std::ostream& out) {
    const ThroughputFile file = load_throughputs(o.throughputs);
    const ThroughputValidation v = evaluate_throughputs(file, o.datasheet);
    const auto summaries = summarize_throughput_errors(v.results);
    const PairOrdering ordering = order_pairs(v.results);
    const auto ratios = throughput_ratios(v.results);
    const ScalingValidation scaling = evaluate_scaling(file);
    if (o.csv) {
        print_throughput_csv(v, summaries, ordering, ratios, scaling, out);
        return;
    }
    out << "Published training throughputs " << file.origin << " (" << file.rows.size()
        << " rows), each one-GPU row predicted on its GPU with roofsim's default profile "
        << (o.datasheet ? "(--datasheet: every GPU on its bare datasheet)" : "(measured, else derived, else datasheet)")
        << " and the GPU's built-in framework profile, else the first built-in one.\n"
           "samples/s = batch / predicted step; error = predicted / measured - 1. resnet50 at 224 px with SGD (momentum, "
           "weight decay, foreach); bert-large-squad at sequence 384 with AdamW fused (apex FusedAdam); amp = amp-fp16 "
           "(resnet50), fp16-master (bert-large-squad: apex amp O2).\n";
    if (v.multi_gpu_rows) out << "note: rows of 2 or more GPUs: their scaling over one GPU, at the end.\n";
    for (const auto& [model, rows] : v.not_built_in) out << "note: " << model << " rows skipped: " << rows << ", model not built in.\n";
    for (const auto& n : v.notes) out << "note: " << n << ".\n";
    out << '\n';
    if (v.results.empty()) {
        out << "No row predicted.\n";
        return;
    }
    TextTable t({"row", "GPU", "model", "precision", "round", "batch", "measured samples/s", "predicted samples/s", "error %",
                 "profile", "fits"});
    for (const auto& r : v.results) {
        t.add_row({r.row ? std::to_string(r.row->row) : "-", r.gpu_key, zoo_name(r.model), std::string(to_string(r.mode)),
                   r.row && !r.row->bench_round.empty() ? r.row->bench_round : "-", std::to_string(r.batch),
                   format_number("%.1f", r.measured), format_number("%.1f", r.predicted), format_number("%+.1f", 100 * r.error),
                   r.profile, r.fits ? "yes" : "NO"});
    }
    t.print(out);

    out << "\nErrors by model (|error| over the rows; a repeated row counts each time):\n";
    TextTable s({"model", "rows", "median |error| %", "max |error| %", "worst row"});
    for (const auto& e : summaries) {
        std::string worst = "-";
        if (e.worst) {
            worst = (e.worst->row ? "row " + std::to_string(e.worst->row->row) + ", " : std::string()) + e.worst->gpu_key + " " +
                    std::string(to_string(e.worst->mode)) + " (" + format_number("%+.1f", 100 * e.worst->error) + " %)";
        }
        s.add_row({e.model == "all" ? e.model : zoo_name(e.model), std::to_string(e.rows), format_number("%.1f", 100 * e.median_abs_error),
                   format_number("%.1f", 100 * e.max_abs_error), worst});
    }
    s.print(out);

    std::size_t pairs = 0;
    for (const auto& g : ordering.groups) pairs += g.pairs;
    out << "\nPair ordering: GPUs of one model and precision whose published throughputs differ by more than "
        << format_number("%.0f", 100 * pair_order_min_gap) << " % (a GPU of several rows: their median): " << ordering.disagreeing()
        << " of " << pairs << " pairs predicted in the other order.\n";
    TextTable g({"model", "precision", "GPUs", "pairs", "predicted in the other order"});
    for (const auto& e : ordering.groups) {
        g.add_row({zoo_name(e.model), mode_name(e.precision), std::to_string(e.gpus), std::to_string(e.pairs), std::to_string(e.disagreeing)});
    }
    g.print(out);
    print_published_batches(v, out);
    if (ordering.disagreeing() > 0) {
        out << "\nPairs predicted in the other order (faster / slower as published):\n";
        TextTable d({"model", "precision", "faster", "slower", "measured ratio", "predicted ratio"});
        for (const auto& p : ordering.pairs) {
            if (p.agrees) continue;
            d.add_row({zoo_name(p.model), mode_name(p.precision), p.faster.gpu_key, p.slower.gpu_key,
                       format_number("%.3f", p.faster.measured / p.slower.measured),
                       format_number("%.3f", p.faster.predicted / p.slower.predicted)});
        }
        d.print(out);
    }

    out << "\nRatios beside the published ones (samples/s of one GPU over another's, each at its own published batch):\n";
    if (ratios.empty()) {
        out << "(no model and precision has both GPUs of a ratio)\n";
    } else {
        TextTable r({"model", "precision", "ratio", "measured", "predicted", "difference", "error %"});
        for (const auto& x : ratios) {
            r.add_row({zoo_name(x.model), mode_name(x.precision), x.numerator + " / " + x.denominator, format_number("%.3f", x.measured),
                       format_number("%.3f", x.predicted), format_number("%+.3f", x.difference()), format_number("%+.1f", 100 * x.error())});
        }
        r.print(out);
    }
    print_scaling(scaling, out);
}

void run_validate(const ValidateOptions& o, const Context& context) {
    std::ostringstream text;
    if (!o.throughputs.empty()) {
        print_throughputs(o, o.csv ? std::cout : text);
        std::cout << wrap_lines(text.str());
        return;
    }
    if (!o.max_batch.empty()) {
        print_max_batch(o, o.csv ? std::cout : text);
        std::cout << wrap_lines(text.str());
        return;
    }
    if (!o.ddp.empty()) {
        print_ddp(o, o.csv ? std::cout : text);
        std::cout << wrap_lines(text.str());
        return;
    }
    if (!o.kernels.empty() && o.csv) {
        print_kernel_corpus(o, std::cout);
        return;
    }
    if (!o.kernels.empty()) {
        print_kernel_corpus(o, text);
    } else if (o.runs.empty()) {
        run_validate_file(o, context, text);
    } else {
        const auto speed = host_speed(o);
        print_validation_runs(evaluate_runs(load_validation_runs(o.runs), speed, o.datasheet), o, speed, text);
    }
    std::cout << wrap_lines(text.str());
}

}  // namespace

Command add_validate_command(CLI::App& app) {
    auto o = std::make_shared<ValidateOptions>();
    auto* cmd = app.add_subcommand("validate", "Compare predictions with PyTorch timings from tools/validate/measure_pytorch.py");
    auto* measurements = cmd->add_option("--measurements", o->measurements, "A data/validation/*.json file");
    auto* runs = cmd->add_option("--runs", o->runs,
                                 "A list of validation runs (data/validation/runs.json): each predicted with its own framework "
                                 "profile and calibration, each case's error the median over the runs");
    measurements->excludes(runs);
    auto* framework = cmd->add_option("--framework", o->framework, "Framework profile (default: the built-in one of the measured GPU)");
    framework->excludes(runs);
    cmd->add_flag("--cases", o->cases, "Print every case, not only the summary per op and mode");
    cmd->add_flag("--phases", o->phases,
                  "With --runs: each model case's forward, forward + backward and optimizer step, each timed on its own, "
                  "measured against predicted (each phase simulated on its own), run by run")
        ->needs(runs);
    cmd->add_flag("--passes", o->passes,
                  "With --runs: each model case pass by pass (the passes of measure_pytorch.py --model-rounds): each "
                  "pass's median step against the prediction at the profile's host speed and at its own canary's")
        ->needs(runs);
    cmd->add_option("--host-speed", o->host_speed,
                    "Host speed the cases are predicted on: profiled (the framework profile's, as any prediction) or "
                    "measured (host costs scaled by each case's canary over the profile's, where both have one: an "
                    "analysis, docs/validation.md); the table of --cases shows the other too")
        ->check(CLI::IsMember({"measured", "profiled"}))
        ->capture_default_str();
    cmd->add_option("--exported", o->exported,
                    "Directory of kernel IRs exported from the measured models (roofsim_export), one per model case "
                    "named <case id with / as _>.json: also predict the model cases from them")
        ->check(CLI::ExistingDirectory);
    auto* kernels = cmd->add_option("--kernels", o->kernels,
                                    "A kernel corpus folder (tools/validate/kernel_corpus.py; data/validation/kernels/*): its "
                                    "GEMMs, convolutions and attention calls, measured against predicted")
                        ->check(CLI::ExistingDirectory);
    kernels->excludes(measurements)->excludes(runs);
    auto* ddp = cmd->add_option("--ddp", o->ddp,
                                "Data-parallel steps measured with tools/validate/measure_ddp.py (data/validation/ddp/*.json): "
                                "the files of 2 or more GPUs against roofsim's --num-gpus prediction, a world-size-1 file "
                                "giving their one-GPU steps (scaling efficiency); a case in several files of one world size "
                                "(repeated runs) is judged over all their samples")
                    ->check(CLI::ExistingFile);
    ddp->excludes(measurements)->excludes(runs)->excludes(kernels);
    auto* max_batch_file = cmd->add_option("--max-batch", o->max_batch,
                                      "Largest batches measured with tools/validate/measure_max_batch.py "
                                      "(data/validation/max-batch/*.json) against --batch max, and the predicted peak memory at "
                                      "every batch that trained")
                          ->check(CLI::ExistingFile);
    max_batch_file->excludes(measurements)->excludes(runs)->excludes(kernels)->excludes(ddp);
    cmd->add_option("--throughputs", o->throughputs,
                    "Published single-GPU training throughputs (a CSV file: gpu, num_gpus, model, precision, batch_size, "
                    "throughput...; the reference data's lambda-dev.csv), each one-GPU row against the prediction on that "
                    "GPU's default profile: errors, the GPUs' order, published ratios. Checks only: nothing is fitted")
        ->check(CLI::ExistingFile)
        ->excludes(measurements)
        ->excludes(runs)
        ->excludes(kernels)
        ->excludes(ddp)
        ->excludes(max_batch_file)
        ->excludes(framework);
    cmd->add_flag("--datasheet", o->datasheet,
                  "With --throughputs: every GPU on its bare datasheet (no measured or derived profile), to compare with; "
                  "with --measurements or --runs: the GPU as if unmeasured (its datasheet), against its own measurements");
    cmd->add_option("--half", o->half, "With --kernels: the cases of the test half, the fit half, or all")
        ->check(CLI::IsMember({"test", "fit", "all"}))
        ->capture_default_str()
        ->needs(kernels);
    auto* csv = cmd->add_flag("--csv", o->csv,
                              "With --kernels: print CSV, one row per case (kind roofsim-kernel-validation), with the GEMM the "
                              "kernel model placed (a convolution's implicit GEMM) and its tile, split of K, waves and "
                              "efficiency. With --ddp: one row per step (kind roofsim-ddp-validation-result). With --max-batch: one row "
                              "per case (kind roofsim-max-batch-validation-result). With --throughputs: kind "
                              "roofsim-throughput-validation-result, a `record` column saying what each line is: row (a "
                              "published row: measured and predicted samples/s, error), summary (per model and all), "
                              "pair_group and pair (measured and predicted ratio of the faster GPU over the slower), ratio, "
                              "skipped, note");
    csv->excludes(measurements)->excludes(runs);
    return {cmd, [o](const Context& ctx) { run_validate(*o, ctx); }};
}

Command add_fit_kernels_command(CLI::App& app) {
    struct Options {
        std::string kernels, out;
    };
    auto o = std::make_shared<Options>();
    auto* cmd = app.add_subcommand("fit-kernels",
                                   "Fit the GEMM kernel model's parameters of a GPU's architecture family to the fit half of a "
                                   "kernel corpus (tools/validate/kernel_corpus.py), and write the kernel-model profile");
    cmd->add_option("--kernels", o->kernels, "A kernel corpus folder (data/validation/kernels/*)")->required()->check(CLI::ExistingDirectory);
    cmd->add_option("--out", o->out, "The kernel-model profile to write (data/kernel_models/<chip>.json)")->required();
    return {cmd, [o](const Context&) {
                const KernelCorpus corpus = load_kernel_corpus(o->kernels);
                const KernelModelProfile profile = fit_kernel_model(corpus, std::filesystem::path(o->kernels).filename().string());
                write_file_atomically(o->out, to_json(profile).dump(1) + "\n");
                std::cout << "wrote " << o->out << ": the GEMM kernel model of " << profile.chip << ", " << profile.provenance << "\n";
            }};
}

}  // namespace roofsim::cli
