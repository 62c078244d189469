// Perplexity and KL divergence over chunks of a text (see perplexity.h). The
// per-token arithmetic follows llama-perplexity's: f32 logits, a double sum of
// expf(logit - max), and the base run's log-probabilities stored as 16-bit
// steps over the 16 nats below the top one, so both tools print the same
// numbers for the same logits.
#include "runtime/perplexity.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

namespace anymoe {
namespace {

constexpr char kMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
constexpr float kBaseRange = 16.0f;  // nats of log-probability kept below the top one
constexpr int64_t kMaxContext = 1 << 20;

// uint16 per stored row: two f32 (step, lowest log-prob), then one per vocab entry
// rounded up to an even count.
int64_t RowWords(int64_t vocab) { return 2 * ((vocab + 1) / 2) + 4; }

struct Moments {
  double sum = 0, sum2 = 0;
  void Add(double v) {
    sum += v;
    sum2 += v * v;
  }
};

Estimate MeanAndError(const Moments& m, int64_t n) {
  if (n < 1) return {};
  const double mean = m.sum / double(n);
  const double var = m.sum2 / double(n) - mean * mean;
  return {mean, var > 0 && n > 10 ? std::sqrt(var / double(n - 1)) : 0.0};
}

// Max logit (its first index) and ln(sum exp(logit - max)), as llama.cpp sums.
struct LogSumExp {
  float max = 0;
  int64_t argmax = 0;
  double sum_exp = 0;
};
LogSumExp Reduce(std::span<const float> logits) {
  LogSumExp r{logits[0], 0, 0.0};
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > r.max) {
      r.max = logits[i];
      r.argmax = int64_t(i);
    }
  }
  for (float v : logits) r.sum_exp += std::exp(v - r.max);
  return r;
}

// Writes the row of base log-probabilities as 16-bit steps; returns the NLL of `tok`.
double StoreBaseRow(std::span<const float> logits, int32_t tok, uint16_t* row) {
  const LogSumExp r = Reduce(logits);
  float min_logit = *std::min_element(logits.begin(), logits.end());
  min_logit = std::max(min_logit, r.max - kBaseRange);
  const float log_sum_exp = float(std::log(r.sum_exp));
  const float min_log_prob = min_logit - r.max - log_sum_exp;
  const float step = (r.max - min_logit) / 65535.f;
  std::memcpy(row, &step, 4);
  std::memcpy(row + 2, &min_log_prob, 4);
  uint16_t* q = row + 4;
  if (step != 0) {
    const float inv = 1 / step;
    for (size_t i = 0; i < logits.size(); ++i) {
      q[i] = logits[i] > min_logit ? uint16_t(std::lrint(inv * (logits[i] - min_logit))) : 0;
    }
  } else {
    std::fill(q, q + logits.size(), uint16_t(0));
  }
  return double(r.max + log_sum_exp - logits[size_t(tok)]);
}

struct KldAccumulator {
  Moments nll, nll_base, kld, dp2;
  double nll_nll_base = 0;
  int64_t same_top = 0, count = 0;
  std::vector<float> klds;
};

// One scored token against its stored base row.
double CompareRow(std::span<const float> logits, int32_t tok, const uint16_t* row,
                  KldAccumulator& acc) {
  const LogSumExp r = Reduce(logits);
  const float log_sum_exp = float(std::log(r.sum_exp));
  float step, min_log_prob;
  std::memcpy(&step, row, 4);
  std::memcpy(&min_log_prob, row + 2, 4);
  const uint16_t* q = row + 4;
  const float nll = r.max + log_sum_exp - logits[size_t(tok)];
  const float nll_base = -(step * float(q[tok]) + min_log_prob);
  acc.nll.Add(nll);
  acc.nll_base.Add(nll_base);
  acc.nll_nll_base += double(nll) * double(nll_base);
  const float log_norm = r.max + log_sum_exp;
  double kld = 0;
  int64_t argmax_base = 0;
  float top_base = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float lp_base = step * float(q[i]) + min_log_prob;
    if (i == 0 || lp_base > top_base) {
      top_base = lp_base;
      argmax_base = int64_t(i);
    }
    if (lp_base > -kBaseRange) kld += std::exp(lp_base) * (lp_base - logits[i] + log_norm);
  }
  acc.kld.Add(kld);
  acc.klds.push_back(float(kld));
  acc.same_top += r.argmax == argmax_base;
  const float dp = std::exp(-nll) - std::exp(-nll_base);
  acc.dp2.Add(double(dp * dp));
  ++acc.count;
  return nll;
}

// Runs one chunk (its first token replaced by BOS when given) from an empty
// cache and calls `row(p, logits)` for every position p in [first, n - 2].
Status RunChunk(Model& model, std::span<const int32_t> chunk, int32_t bos_id, int64_t first,
                const std::function<void(int64_t, std::span<const float>)>& row) {
  const int64_t n = int64_t(chunk.size()), vocab = model.config().vocab_size;
  std::vector<int32_t> ids(chunk.begin(), chunk.end());
  if (bos_id >= 0) ids[0] = bos_id;
  ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache, model.NewCache(n));
  std::vector<float> logits;
  for (int64_t p = 0; p < n;) {
    const int64_t step = std::min(model.max_step_tokens(), n - p);
    ASSIGN_OR_RETURN(Tensor out, model.Forward(std::span(ids).subspan(size_t(p), size_t(step)),
                                               *cache, /*all_logits=*/true));
    if (p + step > first) {
      logits.resize(size_t(out.elements()));
      model.backend().ReadF32(out, logits);
      for (int64_t i = std::max(p, first); i < std::min(p + step, n - 1); ++i) {
        row(i, std::span(logits).subspan(size_t((i - p) * vocab), size_t(vocab)));
      }
    }
    p += step;
  }
  return Status::Ok();
}

double Percentile(const std::vector<float>& sorted, double fraction) {
  const double p = fraction * double(sorted.size() - 1);
  const size_t i = size_t(p);
  const double f = p - double(i);
  return (1 - f) * sorted[i] + f * sorted[std::min(i + 1, sorted.size() - 1)];
}

Estimate PerplexityOf(const Moments& m, int64_t n) {
  const Estimate ln = MeanAndError(m, n);
  return {std::exp(ln.value), std::exp(ln.value) * ln.error};
}

// The base file: magic, u32 context, i32 vocab, i32 chunks, i32 tokens
// [chunks * context], then per chunk (context - 1 - context / 2) rows.
struct BaseHeader {
  int64_t context = 0, vocab = 0, chunks = 0;
  std::vector<int32_t> tokens;
};

Expected<BaseHeader> ReadBaseHeader(std::ifstream& in, const std::string& path, int64_t vocab) {
  in.seekg(0, std::ios::end);
  const int64_t size = int64_t(in.tellg());
  in.seekg(0);
  char magic[8];
  uint32_t context;
  int32_t file_vocab, chunks;
  in.read(magic, 8);
  in.read(reinterpret_cast<char*>(&context), 4);
  in.read(reinterpret_cast<char*>(&file_vocab), 4);
  in.read(reinterpret_cast<char*>(&chunks), 4);
  if (!in || std::memcmp(magic, kMagic, 8) != 0) {
    return Status::Error(path + ": not a KL-divergence base file (no \"_logits_\" header)");
  }
  if (context < 4 || context > kMaxContext || chunks < 1 || file_vocab != vocab) {
    return Status::Error(path + ": base of context " + std::to_string(context) + ", vocab " +
                         std::to_string(file_vocab) + ", " + std::to_string(chunks) +
                         " chunks does not fit this model (vocab " + std::to_string(vocab) + ")");
  }
  BaseHeader h{int64_t(context), vocab, chunks, {}};
  const int64_t rows = h.context - 1 - h.context / 2;
  const double want = 20.0 + 4.0 * double(h.context) * double(chunks) +
                      2.0 * double(chunks) * double(rows) * double(RowWords(vocab));
  if (double(size) != want) {
    return Status::Error(path + ": " + std::to_string(size) + " bytes, but its header needs " +
                         std::to_string(int64_t(want)));
  }
  h.tokens.resize(size_t(h.context * chunks));
  in.read(reinterpret_cast<char*>(h.tokens.data()), std::streamsize(h.tokens.size() * 4));
  for (int32_t t : h.tokens) {
    if (t < 0 || t >= vocab) {
      return Status::Error(path + ": token id " + std::to_string(t) + " outside the vocabulary");
    }
  }
  return h;
}

}  // namespace

Expected<PerplexityResult> MeasurePerplexity(Model& model, std::span<const int32_t> tokens,
                                             const PerplexityOptions& options,
                                             const ChunkCallback& on_chunk) {
  const int64_t n_ctx = options.context, vocab = model.config().vocab_size;
  if (n_ctx < 4 || n_ctx > kMaxContext) {
    return Status::Error("perplexity: context " + std::to_string(n_ctx) + " is outside [4, " +
                         std::to_string(kMaxContext) + "]");
  }
  if (int64_t(tokens.size()) < 2 * n_ctx) {
    return Status::Error("perplexity: the text has " + std::to_string(tokens.size()) +
                         " tokens; a context of " + std::to_string(n_ctx) + " needs at least " +
                         std::to_string(2 * n_ctx));
  }
  int64_t chunks = int64_t(tokens.size()) / n_ctx;
  if (options.chunks >= 0) chunks = std::min(chunks, options.chunks);
  const int64_t first = n_ctx / 2, rows = n_ctx - 1 - first;

  std::ofstream base;
  std::vector<uint16_t> base_rows;
  if (!options.save_base.empty()) {
    base.open(options.save_base, std::ios::binary | std::ios::trunc);
    if (!base) return Status::Error(options.save_base + ": cannot open for writing");
    const uint32_t ctx32 = uint32_t(n_ctx);
    const int32_t vocab32 = int32_t(vocab), chunks32 = int32_t(chunks);
    base.write(kMagic, 8);
    base.write(reinterpret_cast<const char*>(&ctx32), 4);
    base.write(reinterpret_cast<const char*>(&vocab32), 4);
    base.write(reinterpret_cast<const char*>(&chunks32), 4);
    base.write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(chunks * n_ctx * 4));
    base_rows.resize(size_t(rows * RowWords(vocab)));
  }

  PerplexityResult result;
  result.chunks = chunks;
  result.context = n_ctx;
  Moments nll;
  for (int64_t c = 0; c < chunks; ++c) {
    const auto chunk = tokens.subspan(size_t(c * n_ctx), size_t(n_ctx));
    RETURN_IF_ERROR(RunChunk(model, chunk, options.bos_id, first,
                             [&](int64_t p, std::span<const float> logits) {
                               const int32_t next = chunk[size_t(p + 1)];
                               double v;
                               if (base.is_open()) {
                                 v = StoreBaseRow(logits, next,
                                                  base_rows.data() + (p - first) * RowWords(vocab));
                               } else {  // llama-perplexity's own form of the same value
                                 const LogSumExp r = Reduce(logits);
                                 v = -((logits[size_t(next)] - r.max) - std::log(r.sum_exp));
                               }
                               nll.Add(v);
                             }));
    result.scored += rows;
    if (base.is_open()) {
      base.write(reinterpret_cast<const char*>(base_rows.data()),
                 std::streamsize(base_rows.size() * 2));
    }
    result.running_ppl.push_back(std::exp(nll.sum / double(result.scored)));
    if (on_chunk) on_chunk(c, result.running_ppl.back());
  }
  if (base.is_open() && !base.flush()) return Status::Error(options.save_base + ": write failed");
  // llama-perplexity's error: the standard deviation of the mean NLL, times PPL.
  const double mean = nll.sum / double(result.scored);
  const double var = nll.sum2 / double(result.scored) - mean * mean;
  result.ppl = {std::exp(mean),
                var > 0 ? std::exp(mean) * std::sqrt(var / double(result.scored - 1)) : 0.0};
  return result;
}

Expected<PerplexityResult> MeasureKlDivergence(Model& model, const std::string& base_path,
                                               int32_t bos_id, const ChunkCallback& on_chunk) {
  std::ifstream in(base_path, std::ios::binary);
  if (!in) return Status::Error(base_path + ": cannot open");
  ASSIGN_OR_RETURN(const BaseHeader h, ReadBaseHeader(in, base_path, model.config().vocab_size));
  const int64_t n_ctx = h.context, first = n_ctx / 2, rows = n_ctx - 1 - first;
  const int64_t words = RowWords(h.vocab);
  std::vector<uint16_t> base_rows(size_t(rows * words));
  KldAccumulator acc;
  acc.klds.reserve(size_t(rows * h.chunks));
  PerplexityResult result;
  result.chunks = h.chunks;
  result.context = n_ctx;
  for (int64_t c = 0; c < h.chunks; ++c) {
    in.read(reinterpret_cast<char*>(base_rows.data()), std::streamsize(base_rows.size() * 2));
    if (!in) return Status::Error(base_path + ": truncated in chunk " + std::to_string(c));
    const auto chunk = std::span(h.tokens).subspan(size_t(c * n_ctx), size_t(n_ctx));
    RETURN_IF_ERROR(RunChunk(model, chunk, bos_id, first,
                             [&](int64_t p, std::span<const float> logits) {
                               CompareRow(logits, chunk[size_t(p + 1)],
                                          base_rows.data() + (p - first) * words, acc);
                             }));
    result.scored += rows;
    result.running_ppl.push_back(std::exp(acc.nll.sum / double(acc.count)));
    if (on_chunk) on_chunk(c, result.running_ppl.back());
  }
  KlDivergenceStats k;
  result.ppl = PerplexityOf(acc.nll, acc.count);
  k.ppl_base = PerplexityOf(acc.nll_base, acc.count);
  const Estimate ln = MeanAndError(acc.nll, acc.count), ln_base = MeanAndError(acc.nll_base, acc.count);
  const double n = double(acc.count);
  const double cov = acc.count < 10 ? 0.0
                                    : (acc.nll_nll_base / n - (acc.nll.sum / n) * (acc.nll_base.sum / n)) /
                                          (n - 1);
  k.ln_ppl_ratio = {ln.value - ln_base.value,
                    std::sqrt(std::max(0.0, ln.error * ln.error + ln_base.error * ln_base.error -
                                                2.0 * cov))};
  k.kld = MeanAndError(acc.kld, acc.count);
  std::sort(acc.klds.begin(), acc.klds.end());
  const size_t m = acc.klds.size();
  k.kld_median = m % 2 == 0 ? 0.5 * (acc.klds[m / 2] + acc.klds[m / 2 - 1]) : acc.klds[m / 2];
  k.kld_p99 = Percentile(acc.klds, 0.99);
  k.kld_p999 = Percentile(acc.klds, 0.999);
  k.kld_max = acc.klds.back();
  const double top = double(acc.same_top) / n;
  k.same_top = {top, std::sqrt(top * (1 - top) / (n - 1))};
  // RMS of dp with its error, from the moments of dp^2.
  const Estimate mse = MeanAndError(acc.dp2, acc.count);
  k.rms_dp = {std::sqrt(mse.value), mse.value > 0 ? 0.5 / std::sqrt(mse.value) * mse.error : 0.0};
  result.kld = k;
  return result;
}

}  // namespace anymoe
