// Mask cost of a JSON schema constraint (bench_json_schema.h).
#include "cli/bench_json_schema.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "chat/json_constraint.h"
#include "runtime/engine.h"

namespace anymoe::cli {

Status ReportJsonSchemaMaskCost(const Engine& engine, const std::string& schema_file, int64_t steps, int walks) {
  std::ifstream in(schema_file, std::ios::binary);
  if (!in) return Status::Error(schema_file + ": cannot open");
  std::stringstream text;
  text << in.rdbuf();
  const auto schema = nlohmann::ordered_json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return Status::Error(schema_file + ": not valid JSON");
  const auto compile_start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(auto vocab, VocabularyIndex::Build(engine.tokenizer()));
  ASSIGN_OR_RETURN(auto constraint, JsonConstraint::Create(schema, std::move(vocab), engine.StopTokens()));
  const double compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - compile_start).count();
  const CompiledSchema& compiled = constraint->automaton().schema();
  size_t dfa_states = 0;
  for (const ByteDfa& d : compiled.dfas) dfa_states += size_t(d.size());
  std::printf("\njson-schema %s: %zu nodes, %zu DFA states (%zu KiB), vocabulary index and compile %.1f ms\n\n",
              schema_file.c_str(), compiled.nodes.size(), dfa_states, dfa_states / 4, compile_ms);
  std::printf("| walk | steps | mask + accept us/step | masks cached | mask memory KiB |\n");
  std::printf("| ---: | ---: | ---: | ---: | ---: |\n");
  const size_t mask_bytes = (size_t(constraint->vocab().vocab_size()) + 63) / 64 * 8;
  for (int w = 0; w < walks; ++w) {
    std::mt19937_64 rng(1);  // the same walk each time: later walks hit the cache
    JsonConstraintState state(constraint);
    int64_t done = 0;
    double us = 0;  // ApplyMask on the logits and Accept: what a decode step adds
    const auto time = [&](auto&& fn) {
      const auto t0 = std::chrono::steady_clock::now();
      fn();
      us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    };
    std::vector<float> logits(size_t(constraint->vocab().vocab_size()));
    for (int64_t step = 0; step < steps && !state.IsComplete(); ++step) {
      std::fill(logits.begin(), logits.end(), 0.0f);
      Status masked;
      time([&] { masked = state.ApplyMask(logits, steps - step); });
      if (!masked.ok()) break;
      std::vector<int32_t> allowed;
      for (size_t i = 0; i < logits.size(); ++i) {
        if (logits[i] == 0.0f) allowed.push_back(int32_t(i));
      }
      if (allowed.empty()) break;
      const int32_t id = allowed[rng() % allowed.size()];
      const auto& ends = constraint->end_tokens();
      if (std::find(ends.begin(), ends.end(), id) != ends.end()) break;
      Status st;
      time([&] { st = state.Accept(id); });
      RETURN_IF_ERROR(st);
      ++done;
    }
    std::printf("| %d | %lld | %.1f | %zu | %zu |\n", w + 1, (long long)done, done ? us / double(done) : 0.0,
                constraint->cached_masks(), constraint->cached_masks() * mask_bytes / 1024);
  }
  return Status::Ok();
}

}  // namespace anymoe::cli
