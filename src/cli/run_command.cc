// `anymoe run`: one prompt in, streamed text out, then a stats line. Also the
// hooks other engines are compared through: raw prompt ids, generated ids, and
// every step's logits as .npy.
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "chat/grammar_constraint.h"
#include "chat/json_constraint.h"
#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/token_list.h"
#include "core/npy.h"
#include "runtime/generator.h"
#include "runtime/routing_report.h"
#include "runtime/routing_trace.h"

namespace anymoe::cli {
namespace {

struct RunFlags {
  EngineOptions engine;
  SamplingFlags sampling;
  std::string prompt;
  std::string prompt_tokens;
  std::string system;
  int64_t max_tokens = 128;
  bool chat = false;
  bool print_tokens = false;
  bool ignore_eos = false;
  std::string logits_out;
  std::string routing_stats;
  std::string routing_trace;
  std::vector<std::string> stops;
  std::string json_schema;  // file: constrain the output to this JSON schema
  bool json_object = false; // constrain the output to any JSON object
  std::string grammar;       // file: constrain the output to this GBNF grammar
  std::string grammar_text;  // the same, given inline
  SpeculativeOptions spec;
};

Expected<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(path + ": cannot open");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The constraint of --grammar / --grammar-text, or null.
Expected<std::shared_ptr<const OutputConstraint>> LoadGrammar(const RunFlags& f, const Engine& engine,
                                                              const std::vector<int32_t>& end_tokens) {
  std::string text = f.grammar_text;
  if (!f.grammar.empty()) {
    ASSIGN_OR_RETURN(text, ReadFile(f.grammar));
  }
  ASSIGN_OR_RETURN(auto vocab, VocabularyIndex::Build(engine.tokenizer()));
  auto constraint = GrammarConstraint::Create(text, std::move(vocab), end_tokens);
  if (!constraint.ok()) {
    return constraint.status().WithContext(f.grammar.empty() ? "--grammar-text" : f.grammar);
  }
  const int64_t shortest = (*constraint)->machine().ShortestCompletion((*constraint)->start());
  if (shortest > f.max_tokens) {
    return Status::Error("the shortest sentence of the grammar takes " + std::to_string(shortest) +
                         " bytes; raise -n (now " + std::to_string(f.max_tokens) + ")");
  }
  return std::shared_ptr<const OutputConstraint>(std::move(*constraint));
}

// The constraint of --json-schema / --json-object / --grammar(-text), or null.
Expected<std::shared_ptr<const OutputConstraint>> LoadConstraint(const RunFlags& f, const Engine& engine,
                                                                 const std::vector<int32_t>& end_tokens) {
  const int given = int(!f.json_schema.empty()) + int(f.json_object) + int(!f.grammar.empty()) +
                    int(!f.grammar_text.empty());
  if (given > 1) {
    return Status::Error("--json-schema, --json-object, --grammar and --grammar-text exclude each other");
  }
  if (!f.grammar.empty() || !f.grammar_text.empty()) return LoadGrammar(f, engine, end_tokens);
  if (f.json_schema.empty() && !f.json_object) return std::shared_ptr<const OutputConstraint>();
  nlohmann::ordered_json schema;
  if (!f.json_schema.empty()) {
    ASSIGN_OR_RETURN(std::string text, ReadFile(f.json_schema));
    schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (schema.is_discarded()) return Status::Error(f.json_schema + ": not valid JSON");
  }
  ASSIGN_OR_RETURN(auto vocab, VocabularyIndex::Build(engine.tokenizer()));
  ASSIGN_OR_RETURN(auto constraint, JsonConstraint::Create(schema, std::move(vocab), end_tokens));
  const int64_t shortest = constraint->automaton().ShortestCompletion(constraint->automaton().Start());
  if (shortest > f.max_tokens) {
    return Status::Error("the shortest JSON the schema allows takes " + std::to_string(shortest) +
                         " bytes; raise -n (now " + std::to_string(f.max_tokens) + ")");
  }
  return std::shared_ptr<const OutputConstraint>(std::move(constraint));
}

Status WriteTextFile(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Status::Error(path + ": cannot open for writing");
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) return Status::Error(path + ": write failed");
  return Status::Ok();
}

Expected<std::vector<int32_t>> PromptTokens(const RunFlags& f, const Engine& engine) {
  if (!f.prompt_tokens.empty()) {
    return ParseTokenList(f.prompt_tokens, engine.tokenizer().vocab_size());
  }
  if (!f.chat) return engine.Encode(f.prompt);
  std::vector<ChatMessage> messages;
  if (!f.system.empty()) messages.push_back({"system", f.system});
  messages.push_back({"user", f.prompt});
  return engine.EncodeChat(messages, /*add_generation_prompt=*/true);
}

int Run(RunFlags f) {
  if (f.prompt.empty() && f.prompt_tokens.empty()) {
    return ReportError(Status::Error("give a prompt with -p TEXT or --prompt-tokens IDS"));
  }
  if (f.spec.kind == SpecKind::kMtp) f.engine.load_mtp = true;
  auto engine = LoadEngineOrReport(f.engine);
  if (!engine) return 1;
  // Expert parallelism: every rank runs the same steps; rank 0 alone speaks.
  const bool root = engine->is_root();
  SamplingFlags sampling = f.sampling;
  if (Communicator* comm = engine->communicator(); comm != nullptr && !sampling.seed) {
    uint64_t seed = std::random_device{}();  // rank 0's, so every rank samples alike
    Status st = comm->Broadcast(std::span(reinterpret_cast<uint8_t*>(&seed), sizeof(seed)), 0);
    if (!st.ok()) return ReportError(st);
    sampling.seed = seed;
  }
  auto prompt = PromptTokens(f, *engine);
  if (!prompt.ok()) return ReportError(prompt.status());

  RoutingTrace trace;
  if (!f.routing_trace.empty()) engine->model().SetObserver(&trace.observer());
  Generator generator(engine->model(), &engine->tokenizer());
  auto seq = generator.NewSequence(engine->context());
  if (!seq.ok()) return ReportError(seq.status());
  GenerateOptions options;
  options.max_new_tokens = f.max_tokens;
  options.sampling = sampling.Resolve();
  if (!f.ignore_eos) options.stop_tokens = engine->StopTokens();
  options.stop_strings = f.stops;
  options.record_logits = !f.logits_out.empty();
  options.spec = f.spec;
  auto constraint = LoadConstraint(f, *engine, options.stop_tokens);
  if (!constraint.ok()) return ReportError(constraint.status());
  std::unique_ptr<ConstraintState> constraint_state;
  if (*constraint) {
    constraint_state = (*constraint)->NewState();
    options.constraint = constraint_state.get();
  }

  auto result = generator.Generate(*seq, *prompt, options, [root](std::string_view text) {
    if (!root) return true;
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return true;
  });
  if (root) std::printf("\n");
  if (!result.ok()) return ReportError(result.status());
  if (!root) return 0;
  if (f.print_tokens) std::printf("tokens: %s\n", FormatTokenList(result->tokens).c_str());
  if (!f.logits_out.empty()) {
    const int64_t vocab = engine->model().config().vocab_size;
    const int64_t shape[2] = {int64_t(result->logits.size()) / vocab, vocab};
    Status st = WriteNpyF32(f.logits_out, shape, result->logits);
    if (!st.ok()) return ReportError(st);
  }
  if (!f.routing_stats.empty()) {
    Status st = WriteTextFile(f.routing_stats,
                              RoutingStatsJson(engine->model().routing_stats(), f.engine.model_path));
    if (!st.ok()) return ReportError(st);
  }
  if (!f.routing_trace.empty()) {
    engine->model().SetObserver(nullptr);
    Status st = trace.Write(f.routing_trace);
    if (!st.ok()) return ReportError(st);
  }
  std::fflush(stdout);
  std::string experts;
  if (const ExpertCacheStats c = engine->model().routing_stats().cache; c.enabled) {
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  " | experts: hit %.1f %%, %.2f MiB/token read, stall %.2f ms/token, "
                  "prediction %.1f %%",
                  100 * c.hit_rate(), c.bytes_per_token() / (1 << 20), c.stall_ms_per_token(),
                  100 * c.prediction_precision());
    experts = buf;
  }
  std::fprintf(stderr, "%s | stop: %s%s\n", result->stats.Line().c_str(),
               std::string(StopReasonName(result->reason)).c_str(), experts.c_str());
  return 0;
}

}  // namespace

CommandFn RegisterRun(CLI::App& cmd) {
  auto f = std::make_shared<RunFlags>();
  f->engine.progress = true;
  AddEngineOptions(cmd, f->engine);
  AddExpertParallelOptions(cmd, f->engine.expert_parallel);
  AddSamplingOptions(cmd, f->sampling);
  AddSpecOptions(cmd, f->spec);
  cmd.add_option("-p,--prompt", f->prompt, "prompt text");
  cmd.add_option("--prompt-tokens", f->prompt_tokens, "prompt as raw token ids: 1,2,3");
  cmd.add_option("-n,--max-tokens", f->max_tokens, "tokens to generate")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  cmd.add_flag("--chat", f->chat, "wrap the prompt in the model's chat template");
  cmd.add_option("--system", f->system, "system message (with --chat)");
  cmd.add_flag("--print-tokens", f->print_tokens, "print the generated token ids");
  cmd.add_flag("--ignore-eos", f->ignore_eos, "keep generating past end-of-sequence tokens");
  cmd.add_option("--logits-out", f->logits_out, "write every step's f32 logits to FILE.npy");
  cmd.add_option("--stop", f->stops, "stop before this string (repeatable)");
  cmd.add_option("--json-schema", f->json_schema,
                 "constrain the output to JSON valid against the schema in FILE (docs/chat.md)");
  cmd.add_flag("--json-object", f->json_object, "constrain the output to a JSON object");
  cmd.add_option("--grammar", f->grammar,
                 "constrain the output to the GBNF grammar in FILE (llama.cpp's notation; docs/server.md)");
  cmd.add_option("--grammar-text", f->grammar_text, "the same, with the grammar given inline");
  cmd.add_option("--routing-stats", f->routing_stats,
                 "write per-layer, per-expert token counts of the run (and, with streamed "
                 "experts, the expert cache's counters) to FILE.json");
  cmd.add_option("--routing-trace", f->routing_trace,
                 "write every token's experts per MoE layer to FILE.npy (int32 [tokens, layers, "
                 "k]; replay with anymoe cache-sim)");
  return [f] { return Run(*f); };
}

}  // namespace anymoe::cli
