// The quality meter against transformers (tests/golden/perplexity, from
// tools/gen_perplexity_golden.py): perplexity with llama-perplexity's error of
// tests/golden/llama_tiny over 2 chunks of 32 tokens, and the KL divergence of
// llama_tiny_tied from it through a saved base file; plus the file's checks.
#include "runtime/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/model_file.h"
#include "testing/test_files.h"

namespace anymoe {
namespace {

const std::string kGolden = std::string(ANYMOE_GOLDEN_DIR) + "/";

class PerplexityTest : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    std::ifstream in(kGolden + "perplexity/golden.json");
    golden_ = nlohmann::json::parse(in);
    ids_ = golden_["ids"].get<std::vector<int32_t>>();
  }
  struct Loaded {
    ModelFile file;
    std::unique_ptr<Backend> backend;
    std::unique_ptr<Model> model;
  };
  Loaded Load(const std::string& name) {
    Loaded l;
    l.file = std::move(OpenModelFile(kGolden + name)).value();
    BackendOptions options{.num_threads = 2};
    options.exact_matmul = true;
    l.backend = std::move(CreateBackend("cpu", options)).value();
    l.model = std::move(LoadModel(l.file, *l.backend, LoadOptions{.max_step_tokens = 16})).value();
    return l;
  }
  PerplexityOptions Options() {
    PerplexityOptions o;
    o.context = golden_["context"].get<int64_t>();
    return o;
  }
  nlohmann::json golden_;
  std::vector<int32_t> ids_;
};

TEST_F(PerplexityTest, MatchesTransformersOnTheSameWindows) {
  Loaded base = Load("llama_tiny");
  std::vector<int64_t> chunks_seen;
  auto r = MeasurePerplexity(*base.model, ids_, Options(),
                             [&](int64_t chunk, double) { chunks_seen.push_back(chunk); });
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->chunks, 2);
  EXPECT_EQ(r->scored, golden_["scored"].get<int64_t>());
  EXPECT_EQ(chunks_seen, (std::vector<int64_t>{0, 1}));
  const double ppl = golden_["ppl"], err = golden_["ppl_error"];
  EXPECT_NEAR(r->ppl.value / ppl, 1.0, 1e-4) << r->ppl.value << " vs " << ppl;
  EXPECT_NEAR(r->ppl.error / err, 1.0, 1e-3) << r->ppl.error << " vs " << err;
}

TEST_F(PerplexityTest, KlDivergenceThroughABaseFile) {
  const std::string base_path = Path("base.kld");
  Loaded base = Load("llama_tiny");
  PerplexityOptions o = Options();
  o.save_base = base_path;
  auto saved = MeasurePerplexity(*base.model, ids_, o);
  ASSERT_TRUE(saved.ok()) << saved.status().message();

  // Against itself: the 16-bit base rows cost well under 1e-4 nats.
  auto self = MeasureKlDivergence(*base.model, base_path, -1);
  ASSERT_TRUE(self.ok()) << self.status().message();
  ASSERT_TRUE(self->kld.has_value());
  EXPECT_LT(self->kld->kld.value, 1e-4);
  EXPECT_EQ(self->kld->same_top.value, 1.0);
  EXPECT_NEAR(self->kld->ppl_base.value / saved->ppl.value, 1.0, 1e-3);

  Loaded other = Load("llama_tiny_tied");
  auto r = MeasureKlDivergence(*other.model, base_path, -1);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const double kld = golden_["kld_mean"], kld_max = golden_["kld_max"];
  EXPECT_NEAR(r->kld->kld.value / kld, 1.0, 2e-3) << r->kld->kld.value << " vs " << kld;
  EXPECT_NEAR(r->kld->kld_max / kld_max, 1.0, 2e-3);
  EXPECT_NEAR(r->kld->same_top.value, golden_["same_top"].get<double>(), 1e-9);
  EXPECT_LE(r->kld->kld_p99, r->kld->kld_max);
  EXPECT_LE(r->kld->kld_median, r->kld->kld_p99);
}

TEST_F(PerplexityTest, BadInputsAreOneLineErrors) {
  Loaded base = Load("llama_tiny");
  const std::vector<int32_t> short_text(ids_.begin(), ids_.begin() + 40);
  auto r = MeasurePerplexity(*base.model, short_text, Options());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("the text has 40 tokens; a context of 32 needs at least 64"),
            std::string::npos)
      << r.status().message();
  const std::string junk = WriteText("junk.kld", "not a base file at all");
  auto j = MeasureKlDivergence(*base.model, junk, -1);
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("not a KL-divergence base file"), std::string::npos);
  // A truncated base: its size no longer matches its header.
  PerplexityOptions o = Options();
  o.save_base = Path("cut.kld");
  ASSERT_TRUE(MeasurePerplexity(*base.model, ids_, o).ok());
  std::filesystem::resize_file(o.save_base, std::filesystem::file_size(o.save_base) - 2);
  auto cut = MeasureKlDivergence(*base.model, o.save_base, -1);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("but its header needs"), std::string::npos)
      << cut.status().message();
}

}  // namespace
}  // namespace anymoe
