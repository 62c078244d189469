// The report formats: llama-bench's JSON field names and types (so its readers
// read ours), its markdown columns, and its mean / sample standard deviation.
#include "bench/bench_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

namespace anymoe {
namespace {

BenchResult Result(BenchTest test, std::vector<uint64_t> samples_ns) {
  BenchResult r;
  r.model = {.filename = "m.gguf",
             .type = "llama 135M Q4_1",
             .size_bytes = 90 << 20,
             .n_params = 134515008};
  r.threads = 2;
  r.batch = 128;
  r.test = test;
  r.test_time = "2026-01-01T00:00:00Z";
  r.samples_ns = std::move(samples_ns);
  return r;
}

TEST(BenchStats, MeanAndSampleStddev) {
  const std::vector<double> v = {2, 4, 4, 4, 5, 5, 7, 9};
  EXPECT_DOUBLE_EQ(Mean(v), 5.0);
  EXPECT_NEAR(SampleStddev(v), std::sqrt(32.0 / 7.0), 1e-12);
  EXPECT_EQ(SampleStddev(std::vector<double>{3.0}), 0.0);
  EXPECT_EQ(Mean(std::vector<double>{}), 0.0);
}

TEST(BenchResult, TestNamesAndTokensPerSecond) {
  EXPECT_EQ((BenchTest{128, 0}).Name(), "pp128");
  EXPECT_EQ((BenchTest{0, 64}).Name(), "tg64");
  EXPECT_EQ((BenchTest{8, 4}).Name(), "pp8+tg4");
  const BenchResult r = Result({128, 0}, {1000000000, 500000000});
  EXPECT_EQ(r.samples_ts(), (std::vector<double>{128.0, 256.0}));
}

TEST(JsonReport, HasLlamaBenchFieldsAndTypes) {
  std::vector<BenchResult> results = {Result({128, 0}, {1000000000, 500000000}),
                                      Result({0, 64}, {2000000000, 2000000000, 2000000000})};
  results[1].kv_type = "f32";
  results[1].backend = "cuda";
  results[1].roofline = RooflineFigures{
      .bandwidth_gbs = 10,
      .bytes = {.other = 100000000, .embedding = 0, .embedding_row = 0, .routed_experts = 0}};
  const auto json = nlohmann::json::parse(JsonReport(results, "Some CPU"));
  ASSERT_TRUE(json.is_array());
  ASSERT_EQ(json.size(), 2u);
  for (const char* field :
       {"build_commit", "build_number", "cpu_info",       "gpu_info", "backends",  "model_filename",
        "model_type",   "model_size",   "model_n_params", "n_batch",  "n_ubatch",  "n_threads",
        "type_k",       "type_v",       "n_gpu_layers",   "n_cpu_moe", "n_prompt", "n_gen",   "n_depth",
        "test_time",    "avg_ns",       "stddev_ns",      "avg_ts",   "stddev_ts", "samples_ns",
        "samples_ts",   "backend"}) {
    EXPECT_TRUE(json[0].contains(field)) << field;
    EXPECT_TRUE(json[1].contains(field)) << field;
  }
  const auto& pp = json[0];
  EXPECT_TRUE(pp["model_size"].is_number_integer());
  EXPECT_TRUE(pp["model_n_params"].is_number_integer());
  EXPECT_TRUE(pp["avg_ns"].is_number_integer());
  EXPECT_TRUE(pp["avg_ts"].is_number_float());
  EXPECT_EQ(pp["backend"], "cpu");
  EXPECT_EQ(pp["backends"], "CPU");
  EXPECT_EQ(pp["type_k"], "f16");  // the cpu default
  EXPECT_EQ(pp["type_v"], "f16");
  EXPECT_EQ(json[1]["type_k"], "f32");
  EXPECT_EQ(json[1]["type_v"], "f32");
  EXPECT_EQ(json[1]["backend"], "cuda");
  EXPECT_EQ(json[1]["backends"], "CUDA");
  EXPECT_EQ(pp["cpu_info"], "Some CPU");
  EXPECT_EQ(pp["model_filename"], "m.gguf");
  EXPECT_EQ(pp["n_prompt"], 128);
  EXPECT_EQ(pp["n_gen"], 0);
  EXPECT_EQ(pp["n_threads"], 2);
  EXPECT_EQ(pp["avg_ns"], 750000000);
  EXPECT_DOUBLE_EQ(pp["avg_ts"].get<double>(), 192.0);
  EXPECT_NEAR(pp["stddev_ts"].get<double>(), std::sqrt(2 * 64.0 * 64.0), 1e-9);
  EXPECT_EQ(pp["samples_ns"].size(), 2u);
  EXPECT_FALSE(pp.contains("roofline_ts"));

  const auto& tg = json[1];
  EXPECT_DOUBLE_EQ(tg["avg_ts"].get<double>(), 32.0);
  EXPECT_EQ(tg["stddev_ts"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(tg["membw_gbs"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(tg["decode_bytes_per_token"].get<double>(), 1e8);
  EXPECT_DOUBLE_EQ(tg["roofline_ts"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(tg["roofline_pct"].get<double>(), 32.0);
}

TEST(Markdown, LlamaBenchColumns) {
  EXPECT_EQ(MarkdownHeader().substr(0, MarkdownHeader().find('\n')),
            "| model                          |       size |     params | backend    | threads |"
            "            test |                  t/s |");
  const std::string row = MarkdownRow(Result({128, 0}, {1000000000, 500000000}));
  EXPECT_EQ(row,
            "| llama 135M Q4_1                |  90.00 MiB |   134.52 M | cpu        |       2 |"
            "           pp128 |       192.00 ± 90.51 |\n");
}

TEST(Markdown, RooflineTable) {
  std::vector<BenchResult> results = {Result({0, 64}, {2000000000})};
  results[0].roofline = RooflineFigures{.bandwidth_gbs = 10,
                                        .bytes = {.other = 60 << 20,
                                                  .embedding = 1 << 20,
                                                  .embedding_row = 2048,
                                                  .routed_experts = 512 << 20,
                                                  .experts_per_token = 8,
                                                  .num_experts = 64}};
  const MembwResult bw{.threads = 2, .buffer_bytes = 1 << 30, .pass_gbs = {9, 10}};
  const std::string text = MarkdownRoofline({&bw, 1}, results);
  EXPECT_NE(text.find("best 10.00 GB/s, median 9.50 GB/s"), std::string::npos) << text;
  EXPECT_NE(
      text.find("other 60.00 MiB + embedding row 2.00 KiB + routed experts 512.00 MiB x 8/64"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("| llama 135M Q4_1"), std::string::npos) << text;
  EXPECT_NE(text.find("tg64"), std::string::npos) << text;
}

TEST(Markdown, DenseRooflineHasNoExpertTerm) {
  std::vector<BenchResult> results = {Result({0, 64}, {2000000000})};
  results[0].roofline =
      RooflineFigures{.bandwidth_gbs = 10,
                      .bytes = {.other = 60 << 20, .embedding = 1 << 20, .embedding_row = 2048}};
  const std::string text = MarkdownRoofline({}, results);
  EXPECT_NE(text.find("other 60.00 MiB + embedding row 2.00 KiB = 60.00 MiB"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("routed experts"), std::string::npos) << text;
}

}  // namespace
}  // namespace anymoe
