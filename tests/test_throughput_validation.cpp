// Published single-GPU training throughputs against roofsim's predictions (`roofsim validate
// --throughputs`, tools/validate/throughput_validation.hpp): the reader and its errors, the mapping of
// published names, and the arithmetic of the summary, the pair ordering and the ratios. No accuracy
// bound here: the rows check the model, and their bounds are set elsewhere.
#include "catch.hpp"
#include "thrown.hpp"

#include <roofsim/roofsim.hpp>
#include <validate/scaling_validation.hpp>
#include <validate/throughput_validation.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace roofsim;
using Catch::Approx;

namespace {

std::filesystem::path fixture(const std::string& name) { return std::filesystem::path(ROOFSIM_SOURCE_DIR) / "tests" / "data" / name; }

/// A throughput file of `text` in the temporary directory, named after `name`.
std::filesystem::path written(const std::string& name, const std::string& text) {
    const auto path = std::filesystem::temp_directory_path() / ("roofsim-test-throughputs-" + name + ".csv");
    std::ofstream(path) << text;
    return path;
}

const std::string header = "gpu,num_gpus,model,precision,batch_size,throughput\n";

/// The message of loading a file of the header and one row.
std::string error_of_row(const std::string& name, const std::string& row) {
    const auto path = written(name, header + row + "\n");
    std::string message = thrown_by([&] { (void)load_throughputs(path); });
    std::filesystem::remove(path);
    return message;
}

/// A hand-made result: `error` over a measured 100 samples/s.
ThroughputResult result(const std::string& gpu, const std::string& model, const std::string& precision, double measured,
                        double predicted) {
    ThroughputResult r;
    r.gpu_key = gpu;
    r.model = model;
    r.precision = precision;
    r.measured = measured;
    r.predicted = predicted;
    r.error = predicted / measured - 1;
    return r;
}

}  // namespace

TEST_CASE("every published GPU name maps to a GPU roofsim knows; models, optimizers and precisions map as documented") {
    for (const auto& g : published_gpus) {
        INFO(std::string(g.name));
        const GpuSpec* spec = find_gpu(g.key);
        REQUIRE(spec != nullptr);
        CHECK(find_published_gpu(g.name) == &g);
    }
    CHECK(find_published_gpu("A10")->key == "a10");
    CHECK(find_published_gpu("RTX 3090")->key == "rtx-3090");
    CHECK(find_published_gpu("RTX 4090")->key == "rtx-4090");
    CHECK(find_published_gpu("RTX A6000")->key == "rtx-a6000");
    CHECK(find_published_gpu("H200 SXM 141GB")->key == "h200-sxm");
    CHECK(find_published_gpu("A100 PCIe 40GB")->key == "a100-40gb-pcie");
    CHECK(find_published_gpu("A100 PCIe 80GB")->key == "a100-80gb-pcie");
    CHECK(find_published_gpu("A100 SXM4 80GB")->key == "a100-80gb-sxm");
    CHECK(find_published_gpu("H100 PCIe 80GB")->key == "h100-pcie");
    CHECK(find_published_gpu("H100 SXM5 80GB")->key == "h100-sxm");
    // the 16 GB V100 is predicted as the 32 GB one, and says so
    const PublishedGpu* v100 = find_published_gpu("V100 SXM2 16GB");
    REQUIRE(v100 != nullptr);
    CHECK(v100->key == "v100-sxm2-32gb");
    CHECK(has(std::string(v100->note), "16 GB"));
    CHECK(find_published_gpu("A100") == nullptr);

    const PublishedModel* resnet = find_published_model("resnet50");
    REQUIRE(resnet != nullptr);
    CHECK(resnet->zoo_name == "resnet50");
    CHECK(resnet->size == 224);
    CHECK(resnet->optimizer.kind == OptimizerKind::sgd);
    CHECK(resnet->optimizer.momentum);
    CHECK(resnet->optimizer.weight_decay);
    CHECK_FALSE(resnet->optimizer.fused);
    CHECK(zoo::model(resnet->zoo_name, resnet->size).has_value());
    const PublishedModel* bert = find_published_model("bert_large_squad");
    REQUIRE(bert != nullptr);
    CHECK(bert->zoo_name == "bert-large-squad");
    CHECK(bert->size == 384);
    CHECK(bert->optimizer.kind == OptimizerKind::adamw);
    CHECK(bert->optimizer.fused);
    // what amp means for each script: ResNet-50's --amp is autocast, run_squad.py's --fp16 apex amp O2
    CHECK(resnet->amp == PrecisionMode::amp_fp16);
    CHECK(bert->amp == PrecisionMode::fp16_master);

    CHECK(published_precision_mode("tf32") == PrecisionMode::tf32);
    CHECK(published_precision_mode("amp") == PrecisionMode::amp_fp16);
    CHECK(published_precision_mode("fp32") == PrecisionMode::fp32);
    CHECK_FALSE(published_precision_mode("bf16").has_value());
    // no TF32 tensor cores (the V100): fp32 and tf32 are plain FP32; elsewhere the modes stay
    const Ceilings volta = ceilings_from_spec(gpu_or_throw("v100-sxm2-32gb"));
    const Ceilings ampere = ceilings_from_spec(gpu_or_throw("a100-80gb-sxm"));
    CHECK(published_mode_on(PrecisionMode::fp32, volta) == PrecisionMode::fp32_strict);
    CHECK(published_mode_on(PrecisionMode::tf32, volta) == PrecisionMode::fp32_strict);
    CHECK(published_mode_on(PrecisionMode::amp_fp16, volta) == PrecisionMode::amp_fp16);
    CHECK(published_mode_on(PrecisionMode::fp32, ampere) == PrecisionMode::fp32);
    CHECK(published_mode_on(PrecisionMode::tf32, ampere) == PrecisionMode::tf32);
}

TEST_CASE("a throughput file is read row by row: quoted fields, repeated rows, optional columns") {
    const ThroughputFile f = load_throughputs(fixture("throughputs-small.csv"));
    CHECK(f.origin == "throughputs-small.csv");
    REQUIRE(f.rows.size() == 8);
    const ThroughputRow& first = f.rows[0];
    CHECK(first.row == 1);
    CHECK(first.line == 2);
    CHECK(first.gpu_name == "RTX 3090");
    CHECK(first.gpu_key == "rtx-3090");
    CHECK(first.num_gpus == 1);
    CHECK(first.model == "resnet50");
    CHECK(first.precision == "tf32");
    CHECK(first.batch == 224);
    CHECK(first.throughput == 513);
    CHECK(first.unit == "images/s");
    CHECK(first.bench_round == "v1");
    CHECK(first.software == "NGC pytorch 22.09/22.10 (PyTorch 1.13.0a0+d0d6b1f, CUDA 11.8)");  // its comma kept
    CHECK(first.precision_config == "PyTorch_resnet50_FP32");
    CHECK(first.notes.empty());
    CHECK(f.rows[3].num_gpus == 2);
    CHECK(f.rows[5].notes == "Lambda Cloud/bare-metal host");

    // the optional columns may be left out; blank lines and CRLF line ends are fine
    const auto path = written("minimal", header + "A10,1,resnet50,amp,448,638.5\r\n\r\nA10,1,resnet50,tf32,224,349\r\n");
    const ThroughputFile m = load_throughputs(path);
    std::filesystem::remove(path);
    REQUIRE(m.rows.size() == 2);
    CHECK(m.rows[0].throughput == 638.5);
    CHECK(m.rows[1].row == 2);
    CHECK(m.rows[1].line == 4);
    CHECK(m.rows[1].bench_round.empty());
}

TEST_CASE("a bad throughput file is refused with its file, row and column named") {
    SECTION("an unknown GPU: the row and the name") {
        const std::string why = thrown_by([] { (void)load_throughputs(fixture("throughputs-bad-gpu.csv")); });
        CHECK(has(why, "throughputs-bad-gpu.csv: row 2 (line 3), column 'gpu': unknown GPU 'RTX 9090'"));
        CHECK(has(why, "RTX A6000"));  // the known names listed
    }
    SECTION("an unknown column, by name") {
        const std::string why = thrown_by([] { (void)load_throughputs(fixture("throughputs-bad-column.csv")); });
        CHECK(has(why, "throughputs-bad-column.csv: header, column 7: unknown column 'watts'"));
    }
    SECTION("a column twice") {
        const auto path = written("twice", header.substr(0, header.size() - 1) + ",gpu\nA10,1,resnet50,amp,448,638,A10\n");
        const std::string why = thrown_by([&] { (void)load_throughputs(path); });
        std::filesystem::remove(path);
        CHECK(has(why, "header: column 'gpu' appears twice"));
    }
    SECTION("a missing column") {
        const std::string why = thrown_by([] { (void)load_throughputs(fixture("throughputs-missing-column.csv")); });
        CHECK(has(why, "throughputs-missing-column.csv: header: missing column 'batch_size'"));
    }
    SECTION("a throughput that is not a number") {
        const std::string why = thrown_by([] { (void)load_throughputs(fixture("throughputs-bad-number.csv")); });
        CHECK(has(why, "throughputs-bad-number.csv: row 2 (line 3), column 'throughput': expected a number above 0, got 'fast'"));
    }
    SECTION("numbers out of range") {
        CHECK(has(error_of_row("zero-throughput", "A10,1,resnet50,amp,448,0"), "row 1 (line 2), column 'throughput': expected a number above 0, got '0'"));
        CHECK(has(error_of_row("negative-throughput", "A10,1,resnet50,amp,448,-3"), "column 'throughput': expected a number above 0"));
        CHECK(has(error_of_row("inf-throughput", "A10,1,resnet50,amp,448,inf"), "column 'throughput': expected a number above 0"));
        CHECK(has(error_of_row("zero-batch", "A10,1,resnet50,amp,0,638"), "column 'batch_size': expected a whole number of at least 1, got '0'"));
        CHECK(has(error_of_row("fraction-batch", "A10,1,resnet50,amp,4.5,638"), "column 'batch_size': expected a whole number"));
        CHECK(has(error_of_row("zero-gpus", "A10,0,resnet50,amp,448,638"), "column 'num_gpus': expected a whole number of at least 1, got '0'"));
        CHECK(has(error_of_row("fraction-gpus", "A10,1.5,resnet50,amp,448,638"), "column 'num_gpus': expected a whole number of at least 1, got '1.5'"));
        CHECK(has(error_of_row("empty-gpus", "A10,,resnet50,amp,448,638"), "column 'num_gpus': expected a whole number of at least 1, got ''"));
    }
    SECTION("an unknown model or precision") {
        CHECK(has(error_of_row("model", "A10,1,resnet101,amp,448,638"), "row 1 (line 2), column 'model': unknown model 'resnet101'"));
        CHECK(has(error_of_row("precision", "A10,1,resnet50,bf16,448,638"), "row 1 (line 2), column 'precision': unknown precision 'bf16'"));
    }
    SECTION("a row of another field count, an open quote, no rows") {
        CHECK(has(error_of_row("fields", "A10,1,resnet50,amp,448"), "row 1 (line 2): 5 fields, the header has 6"));
        CHECK(has(error_of_row("quote", "\"A10,1,resnet50,amp,448,638"), "row 1 (line 2): a quote is not closed"));
        const auto path = written("empty", header);
        CHECK(has(thrown_by([&] { (void)load_throughputs(path); }), "no rows"));
        std::filesystem::remove(path);
    }
}

TEST_CASE("the summary: median and max |error| per model and over all, computed by hand") {
    // resnet50: |errors| .10 .30 .05 -> median .10, max .30 (the -30 % row);
    // bert: .20 .40 .01 .02 -> median (.02 + .20) / 2 = .11, max .40;
    // all: .01 .02 .05 .10 .20 .30 .40 -> median .10, max .40
    const std::vector<ThroughputResult> results = {
        result("a10", "resnet50", "tf32", 100, 110),         result("rtx-3090", "resnet50", "tf32", 100, 70),
        result("a10", "resnet50", "amp", 100, 105),          result("a10", "bert_large_squad", "amp", 100, 80),
        result("rtx-3090", "bert_large_squad", "amp", 100, 140), result("h100-sxm", "bert_large_squad", "amp", 100, 101),
        result("h200-sxm", "bert_large_squad", "amp", 100, 98),
    };
    const auto s = summarize_throughput_errors(results);
    REQUIRE(s.size() == 3);
    CHECK(s[0].model == "bert_large_squad");
    CHECK(s[0].rows == 4);
    CHECK(s[0].median_abs_error == Approx(0.11));
    CHECK(s[0].max_abs_error == Approx(0.40));
    REQUIRE(s[0].worst != nullptr);
    CHECK(s[0].worst->gpu_key == "rtx-3090");
    CHECK(s[1].model == "resnet50");
    CHECK(s[1].rows == 3);
    CHECK(s[1].median_abs_error == Approx(0.10));
    CHECK(s[1].max_abs_error == Approx(0.30));
    REQUIRE(s[1].worst != nullptr);
    CHECK(s[1].worst->error == Approx(-0.30));
    CHECK(s[2].model == "all");
    CHECK(s[2].rows == 7);
    CHECK(s[2].median_abs_error == Approx(0.10));
    CHECK(s[2].max_abs_error == Approx(0.40));
    CHECK(summarize_throughput_errors({}).empty());
}

TEST_CASE("pair ordering: pairs more than 5 % apart as published, one predicted in the other order") {
    // resnet50 tf32: a100 (two rounds, 990 and 1010: median 1000) predicted 900; rtx-a6000 800 predicted
    // 950: faster than the a100 as predicted, the inversion; rtx-3090 780 predicted 500: 2.6 % from the
    // a6000 (not compared), 28 % from the a100 (in order). resnet50 amp: two GPUs in order.
    const std::vector<ThroughputResult> results = {
        result("a100-80gb-sxm", "resnet50", "tf32", 990, 900), result("a100-80gb-sxm", "resnet50", "tf32", 1010, 900),
        result("rtx-a6000", "resnet50", "tf32", 800, 950),     result("rtx-3090", "resnet50", "tf32", 780, 500),
        result("h100-sxm", "resnet50", "amp", 500, 400),       result("a10", "resnet50", "amp", 400, 300),
    };
    const PairOrdering o = order_pairs(results);
    REQUIRE(o.groups.size() == 2);
    CHECK(o.groups[0].precision == "amp");
    CHECK(o.groups[0].gpus == 2);
    CHECK(o.groups[0].pairs == 1);
    CHECK(o.groups[0].disagreeing == 0);
    CHECK(o.groups[1].precision == "tf32");
    CHECK(o.groups[1].gpus == 3);
    CHECK(o.groups[1].pairs == 2);
    CHECK(o.groups[1].disagreeing == 1);
    REQUIRE(o.pairs.size() == 3);
    CHECK(o.disagreeing() == 1);
    const auto inverted = std::find_if(o.pairs.begin(), o.pairs.end(), [](const ThroughputPair& p) { return !p.agrees; });
    REQUIRE(inverted != o.pairs.end());
    CHECK(inverted->faster.gpu_key == "a100-80gb-sxm");
    CHECK(inverted->faster.rows == 2);
    CHECK(inverted->faster.measured == Approx(1000));
    CHECK(inverted->slower.gpu_key == "rtx-a6000");
    // the 2.6 % pair is not compared; at a gap of 2 % it is, and in order
    CHECK(order_pairs(results, 0.02).pairs.size() == 4);
    CHECK(order_pairs(results, 0.02).disagreeing() == 1);
}

TEST_CASE("ratios beside the published ones: A6000 / 3090 and A100 SXM4 80GB / A6000 where both rows exist") {
    const std::vector<ThroughputResult> results = {
        result("rtx-3090", "resnet50", "tf32", 513, 297.6),      result("rtx-a6000", "resnet50", "tf32", 514, 376.5),
        result("a100-80gb-sxm", "resnet50", "tf32", 1066, 854.4), result("rtx-3090", "resnet50", "amp", 905, 511.3),
        result("a100-80gb-sxm", "resnet50", "amp", 1582, 1138.3),  // amp: no A6000, no ratio
    };
    const auto r = throughput_ratios(results);
    REQUIRE(r.size() == 2);
    CHECK(r[0].numerator == "rtx-a6000");
    CHECK(r[0].denominator == "rtx-3090");
    CHECK(r[0].precision == "tf32");
    CHECK(r[0].measured == Approx(514.0 / 513.0));
    CHECK(r[0].predicted == Approx(376.5 / 297.6));
    CHECK(r[0].difference() == Approx(376.5 / 297.6 - 514.0 / 513.0));
    CHECK(r[0].error() == Approx((376.5 / 297.6) / (514.0 / 513.0) - 1));
    CHECK(r[1].numerator == "a100-80gb-sxm");
    CHECK(r[1].denominator == "rtx-a6000");
    CHECK(r[1].measured == Approx(1066.0 / 514.0));
    CHECK(r[1].predicted == Approx(854.4 / 376.5));
}

TEST_CASE("the next power of two above a batch") {
    CHECK(next_power_of_two_above(1) == 2);
    CHECK(next_power_of_two_above(28) == 32);
    CHECK(next_power_of_two_above(224) == 256);
    CHECK(next_power_of_two_above(256) == 512);
    CHECK(next_power_of_two_above(2560) == 4096);
}

TEST_CASE("the small file evaluated: one-GPU rows predicted, the others counted, repeated rows share a prediction") {
    const ThroughputFile f = load_throughputs(fixture("throughputs-small.csv"));
    const ThroughputValidation v = evaluate_throughputs(f);
    CHECK(v.multi_gpu_rows == 1);
    const bool bert_built_in = zoo::model("bert-large-squad").has_value();
    CHECK(v.results.size() == (bert_built_in ? 7u : 6u));
    CHECK(v.not_built_in.size() == (bert_built_in ? 0u : 1u));
    for (const auto& r : v.results) {
        INFO(r.gpu_key);
        REQUIRE(r.row != nullptr);
        CHECK(r.predicted > 0);
        CHECK(r.predicted == Approx(static_cast<double>(r.batch) / r.step_seconds));
        CHECK(r.error == Approx(r.predicted / r.measured - 1));
        CHECK((r.profile == "measured" || r.profile == "derived" || r.profile == "datasheet"));
    }
    for (const auto& r : v.results) {  // the next power of two above the batch, and its larger peak
        CHECK(r.next_batch > r.batch);
        CHECK(r.next_batch <= 2 * r.batch);
        CHECK((r.next_batch & (r.next_batch - 1)) == 0);
        CHECK(r.next_peak_bytes > r.peak_bytes);
        CHECK(r.batch_agrees() == (r.fits && !r.next_fits));
    }
    // the two H100 PCIe rounds: one prediction, two errors
    std::vector<const ThroughputResult*> h100;
    for (const auto& r : v.results) {
        if (r.gpu_key == "h100-pcie") h100.push_back(&r);
    }
    REQUIRE(h100.size() == 2);
    CHECK(h100[0]->predicted == h100[1]->predicted);
    CHECK(h100[0]->error != h100[1]->error);
    // the V100: fp32 predicted as fp32-strict, and both notes given
    const auto v100 = std::find_if(v.results.begin(), v.results.end(), [](const ThroughputResult& r) { return r.gpu_key == "v100-sxm2-32gb"; });
    REQUIRE(v100 != v.results.end());
    CHECK(v100->mode == PrecisionMode::fp32_strict);
    REQUIRE(v.notes.size() == 2);
    CHECK(has(v.notes[0], "V100 SXM2 16GB"));
    CHECK(has(v.notes[1], "fp32-strict"));
}

// The published single-GPU rows (data/validation/published/lambda-dev.csv, a copy of the reference
// subset) against each GPU's default profile (docs/derivation.md). Issue bounds: median |error| <= 8 %,
// max <= 20 %, no pair in the wrong order, the A6000 / 3090 ResNet-50 TF32 ratio within 0.05 of the
// published one. None is met yet; these checks hold today's figures (docs/validation.md, "Published
// throughputs") so that a change that moves them shows, and the bare datasheet's are worse on each.
TEST_CASE("published throughputs: the derived profiles hold their figures, and beat the bare datasheets") {
    const ThroughputFile file = load_throughputs(std::filesystem::path(ROOFSIM_SOURCE_DIR) / "data" / "validation" / "published" / "lambda-dev.csv");
    const auto overall = [](const ThroughputValidation& v) { return summarize_throughput_errors(v.results).back(); };
    const ThroughputValidation derived = evaluate_throughputs(file);
    const ThroughputValidation datasheet = evaluate_throughputs(file, true);
    REQUIRE(derived.results.size() == 56);
    const ThroughputErrorSummary d = overall(derived), s = overall(datasheet);
    CHECK(d.model == s.model);
    CHECK(d.median_abs_error <= 0.18);  // 17.9 %
    CHECK(d.max_abs_error <= 0.46);     // 45.4 %
    CHECK(s.median_abs_error > d.median_abs_error + 0.2);  // 43.6 %
    CHECK(s.max_abs_error > d.max_abs_error);              // 115 %
    CHECK(order_pairs(derived.results).disagreeing() <= 4);
    CHECK(order_pairs(datasheet.results).disagreeing() > order_pairs(derived.results).disagreeing());
    for (const auto& r : derived.results) CHECK(r.profile != "datasheet");
    // Each published batch was the largest that fit its card: every one fits, but the next power of
    // two fits too on 21 of the 56 rows today (docs/validation.md says which and why). The bound is none.
    std::size_t next_fits = 0;
    for (const auto& r : derived.results) {
        INFO("row " << r.row->row << " " << r.gpu_key << " " << r.model << " batch " << r.batch);
        CHECK(r.fits);
        next_fits += r.next_fits ? 1 : 0;
    }
    CHECK(next_fits <= 21);
}

// The published multi-GPU rows against roofsim's data-parallel scaling (tools/validate/
// scaling_validation.hpp). ResNet-50 scales as published to within 0.14 on every row (the 8-GPU A100
// rows of round v1 are the furthest); BERT-large SQuAD scales worse than roofsim predicts on the A100,
// V100 and the PCIe cards (published 0.61-0.88 where roofsim says 0.98-0.995): a known miss
// (docs/validation.md, "Data-parallel scaling"). These checks hold today's figures.
TEST_CASE("published data-parallel scaling: ResNet-50 within 0.14, BERT-large predicted above the published") {
    const ThroughputFile file = load_throughputs(std::filesystem::path(ROOFSIM_SOURCE_DIR) / "data" / "validation" / "published" / "lambda-dev.csv");
    const ScalingValidation v = evaluate_scaling(file);
    REQUIRE(v.results.size() == 80);
    CHECK(v.unpaired == 0);
    std::size_t resnet = 0, anomalies = 0;
    for (const auto& r : v.results) {
        CHECK(r.published > 0);
        CHECK(r.predicted > 0.9);
        CHECK(r.predicted <= 1.0);
        anomalies += r.anomaly ? 1 : 0;
        if (r.model == "resnet50") {
            ++resnet;
            CHECK(std::abs(r.difference()) < 0.14);
        } else if (r.published < 0.9) {
            CHECK(r.difference() > 0);  // the known miss: roofsim scales BERT-large better than published
        }
    }
    CHECK(resnet == 40);
    CHECK(anomalies == 1);  // A100 SXM4 80GB, 8 GPUs, BERT-large TF32: 0.42
}

TEST_CASE("scaling efficiency pairs each multi-GPU row with the one-GPU row of its batch and round") {
    const std::string csv = "gpu,num_gpus,model,precision,batch_size,throughput,bench_round\n"
                            "A100 SXM4 80GB,1,resnet50,tf32,640,1000,v1\n"
                            "A100 SXM4 80GB,2,resnet50,tf32,640,1900,v1\n"
                            "A100 SXM4 80GB,4,resnet50,tf32,640,3600,v2\n";  // no one-GPU row of round v2
    const auto path = std::filesystem::temp_directory_path() / "roofsim-scaling-pairs.csv";
    std::ofstream(path) << csv;
    const ScalingValidation v = evaluate_scaling(load_throughputs(path));
    std::filesystem::remove(path);
    REQUIRE(v.results.size() == 1);
    CHECK(v.unpaired == 1);
    CHECK(v.results[0].gpus == 2);
    CHECK(v.results[0].published == Approx(1900.0 / (2 * 1000)));
    CHECK(v.results[0].communication.find("ring rule on NVLink") == 0);
}
