// `anymoe chat`: an interactive multi-turn conversation in the terminal. Each
// turn re-renders the whole conversation with the chat template and reuses the
// KV cache for the prefix the model has already seen.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "runtime/generator.h"

namespace anymoe::cli {
namespace {

struct ChatFlags {
  EngineOptions engine;
  SamplingFlags sampling;
  std::string system;
  int64_t max_tokens = 512;
  bool show_stats = false;
};

int Chat(const ChatFlags& f) {
  if (Status st = SingleProcessOnly("chat"); !st.ok()) return ReportError(st);
  auto engine = LoadEngineOrReport(f.engine);
  if (!engine) return 1;
  Generator generator(engine->model(), &engine->tokenizer());
  auto seq = generator.NewSequence(engine->context());
  if (!seq.ok()) return ReportError(seq.status());

  std::vector<ChatMessage> messages;
  if (!f.system.empty()) messages.push_back({"system", f.system});
  GenerateOptions options;
  options.max_new_tokens = f.max_tokens;
  options.sampling = f.sampling.Resolve();
  options.stop_tokens = engine->StopTokens();
  std::fprintf(stderr, "anymoe chat: type a message; /reset starts over, /exit or Ctrl-D quits\n");

  std::string line;
  while (true) {
    std::printf("> ");
    std::fflush(stdout);
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line.empty()) continue;
    if (line == "/reset") {
      messages.resize(f.system.empty() ? 0 : 1);
      seq->Truncate(0);
      continue;
    }
    messages.push_back({"user", line});
    auto prompt = engine->EncodeChat(messages, /*add_generation_prompt=*/true);
    if (!prompt.ok()) return ReportError(prompt.status());
    auto result = generator.Generate(*seq, *prompt, options,
                                     [](std::string_view text) {
                                       std::fwrite(text.data(), 1, text.size(), stdout);
                                       std::fflush(stdout);
                                       return true;
                                     });
    std::printf("\n");
    std::fflush(stdout);
    if (!result.ok()) {
      // A full context ends this conversation, not the program.
      ReportError(result.status());
      messages.pop_back();
      continue;
    }
    messages.push_back({"assistant", result->text});
    if (f.show_stats) std::fprintf(stderr, "%s\n", result->stats.Line().c_str());
  }
  return 0;
}

}  // namespace

CommandFn RegisterChat(CLI::App& cmd) {
  auto f = std::make_shared<ChatFlags>();
  AddEngineOptions(cmd, f->engine);
  AddSamplingOptions(cmd, f->sampling);
  cmd.add_option("--system", f->system, "system message");
  cmd.add_option("-n,--max-tokens", f->max_tokens, "most tokens per reply");
  cmd.add_flag("--stats", f->show_stats, "print speed after each reply");
  return [f] { return Chat(*f); };
}

}  // namespace anymoe::cli
