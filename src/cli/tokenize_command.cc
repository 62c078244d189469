// `anymoe tokenize`: the ids of a text under a model's tokenizer, shaped like
// llama.cpp's llama-tokenize (one "id -> 'piece'" line per token, or --ids as
// a Python list), so that the two can be compared line for line. Reads only
// the tokenizer: a full GGUF, a vocabulary-only GGUF (no tensors) or a folder
// with just tokenizer.json (+ tokenizer_config.json) all work.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "tokenizer/tokenizer_files.h"

namespace anymoe::cli {
namespace {

struct TokenizeFlags {
  std::string model_path;
  std::string prompt;
  std::string file;
  bool from_stdin = false;
  bool ids = false;
  bool pieces = false;
  bool no_bos = false;
  bool parse_special = true;  // llama-tokenize's default
  bool show_count = false;
};

int Tokenize(const TokenizeFlags& f) {
  int sources = !f.prompt.empty() + !f.file.empty() + f.from_stdin;
  if (sources != 1) return ReportError(Status::Error("give exactly one of -p, -f, --stdin"));
  std::string text = f.prompt;
  if (!f.file.empty()) {
    auto read = ReadText(f.file);
    if (!read.ok()) return ReportError(read.status());
    text = std::move(read).value();
  } else if (f.from_stdin) {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  auto tok = TokenizerFromPath(f.model_path);
  if (!tok.ok()) return ReportError(tok.status());
  const Tokenizer& t = **tok;
  const bool add_bos = t.add_bos_default() && !f.no_bos;
  const std::vector<int32_t> ids = t.Encode(text, add_bos, f.parse_special);
  std::string out;
  if (f.ids || f.pieces) {
    out.push_back('[');
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) out += ", ";
      if (f.ids) {
        out += std::to_string(ids[i]);
      } else {  // the token as the vocabulary stores it (HF's tokenize())
        out += nlohmann::json(t.TokenText(ids[i]))
                   .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      }
    }
    out += "]\n";
  } else {
    char head[32];
    for (const int32_t id : ids) {
      std::snprintf(head, sizeof(head), "%6d -> '", id);
      out += head;
      out += t.TokenPiece(id);
      out += "'\n";
    }
  }
  if (f.show_count) out += "Total number of tokens: " + std::to_string(ids.size()) + "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace

CommandFn RegisterTokenize(CLI::App& cmd) {
  auto f = std::make_shared<TokenizeFlags>();
  cmd.add_option("-m,--model", f->model_path,
                 "GGUF file (a vocabulary-only one too) or a folder with tokenizer.json")
      ->required();
  cmd.add_option("-p,--prompt", f->prompt, "text to tokenize (taken verbatim)");
  cmd.add_option("-f,--file", f->file, "file whose bytes to tokenize");
  cmd.add_flag("--stdin", f->from_stdin, "tokenize standard input");
  auto* ids = cmd.add_flag("--ids", f->ids, "print only the ids, as a list like [1, 2, 3]");
  cmd.add_flag("--pieces", f->pieces,
               "print the tokens as the vocabulary stores them, as a JSON list")
      ->excludes(ids);
  cmd.add_flag("--no-bos", f->no_bos, "do not add the BOS token the model normally adds");
  cmd.add_flag("--parse-special,!--no-parse-special", f->parse_special,
               "special tokens written in the text become their ids (default: on, as "
               "llama-tokenize)");
  cmd.add_flag("--show-count", f->show_count, "print the number of tokens");
  return [f] { return Tokenize(*f); };
}

}  // namespace anymoe::cli
