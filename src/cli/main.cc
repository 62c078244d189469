// anymoe: run and serve Mixture-of-Experts LLMs on any hardware.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"anymoe: run and serve Mixture-of-Experts LLMs on any hardware"};
  app.require_subcommand(1);
  std::map<CLI::App*, anymoe::cli::CommandFn> commands;
  auto add = [&](const char* name, const char* help, auto register_fn) {
    CLI::App* cmd = app.add_subcommand(name, help);
    commands[cmd] = register_fn(*cmd);
  };
  add("run", "generate text from a prompt", anymoe::cli::RegisterRun);
  add("chat", "interactive multi-turn chat in the terminal", anymoe::cli::RegisterChat);
  add("info", "describe a model file", anymoe::cli::RegisterInfo);
  add("bench", "measure prompt and generation speed (llama-bench's tests)", anymoe::cli::RegisterBench);
  add("serve", "OpenAI-compatible HTTP server with continuous batching", anymoe::cli::RegisterServe);
  add("doctor", "which ops of a model a backend runs natively, and its device memory",
      anymoe::cli::RegisterDoctor);
  add("perplexity", "perplexity of a text, and KL divergence against a saved base run",
      anymoe::cli::RegisterPerplexity);
  add("bench-serve", "load-test an OpenAI-compatible server (TTFT, TPOT, throughput)",
      anymoe::cli::RegisterBenchServe);
  add("cache-sim", "replay routing traces through the expert cache's eviction policies",
      anymoe::cli::RegisterCacheSim);
  add("profile", "measure which experts a corpus uses (expert profile for warm start)",
      anymoe::cli::RegisterProfile);
  add("prune", "write a model keeping only the experts a profile ranks first (--expert-prune)",
      anymoe::cli::RegisterPrune);
  add("tokenize", "the token ids of a text (llama-tokenize's output)",
      anymoe::cli::RegisterTokenize);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [cmd, fn] : commands) {
    if (cmd->parsed()) return fn();
  }
  return 1;
}
