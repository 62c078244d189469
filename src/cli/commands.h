// The anymoe subcommands. Each Register* adds its options to the CLI11 app and
// returns the function that runs it once the command line is parsed.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace anymoe::cli {

using CommandFn = std::function<int()>;

CommandFn RegisterRun(CLI::App& app);
CommandFn RegisterChat(CLI::App& app);
CommandFn RegisterInfo(CLI::App& app);
CommandFn RegisterBench(CLI::App& app);
CommandFn RegisterServe(CLI::App& app);
CommandFn RegisterBenchServe(CLI::App& app);
CommandFn RegisterDoctor(CLI::App& app);
CommandFn RegisterPerplexity(CLI::App& app);
CommandFn RegisterCacheSim(CLI::App& app);
CommandFn RegisterProfile(CLI::App& app);
CommandFn RegisterPrune(CLI::App& app);
CommandFn RegisterTokenize(CLI::App& app);

}  // namespace anymoe::cli
