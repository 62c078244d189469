#!/usr/bin/env python3
"""The tiny random-weight Mixtral GGUF (tests/golden/moe_gguf/mixtral.gguf, vocab
512) carrying the REAL Mixtral-8x7B tokenizer and chat template instead of its
toy one: the real-file smoke of issue 47 (`anymoe run --chat` and `serve` end to
end through the SentencePiece tokenizer and the real template; the logits mean
nothing).

Metadata: everything of mixtral.gguf except tokenizer.*, then every tokenizer.*
key of tests/golden/tokenizer/mixtral.vocab.gguf (tools/gen_sentencepiece_golden.py),
llama.vocab_size 32000. Tensors: mixtral.gguf's, except token_embd / output,
which get 32000 rows of N(0, 0.15) (seeded) in Q4_0 (gguf's reference
quantisation) to keep the file small. Run from the repo root:

    /work/venv-ref/bin/python tools/gen_mixtral_real_vocab_gguf.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import gguf
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_quantized_moe_gguf import copy_metadata, write_and_close  # noqa: E402
from golden_common import REPO_ROOT  # noqa: E402

MODEL = REPO_ROOT / "tests" / "golden" / "moe_gguf" / "mixtral.gguf"
VOCAB = REPO_ROOT / "tests" / "golden" / "tokenizer" / "mixtral.vocab.gguf"
OUT = REPO_ROOT / "tests" / "golden" / "moe_gguf" / "mixtral_real_vocab.gguf"


class Without:
    """A reader view without some fields (copy_metadata copies every field)."""

    def __init__(self, reader, keep):
        self.fields = {k: v for k, v in reader.fields.items() if keep(k)}


def main() -> None:
    model = gguf.GGUFReader(MODEL)
    vocab = gguf.GGUFReader(VOCAB)
    n_vocab = len(vocab.fields["tokenizer.ggml.tokens"].data)
    writer = gguf.GGUFWriter(OUT, "llama")
    copy_metadata(Without(model, lambda k: not k.startswith("tokenizer.") and
                          k != "llama.vocab_size" and k != "general.name"), writer)
    writer.add_name("tiny random Mixtral with the real Mixtral-8x7B tokenizer")
    writer.add_vocab_size(n_vocab)
    copy_metadata(Without(vocab, lambda k: k.startswith("tokenizer.")), writer)
    rng = np.random.default_rng(47)
    for t in model.tensors:
        data = np.asarray(t.data, dtype=np.float32).reshape(
            list(reversed([int(n) for n in t.shape])))
        if t.name in ("token_embd.weight", "output.weight"):
            rows = rng.normal(0.0, 0.15, size=(n_vocab, data.shape[1])).astype(np.float32)
            q = gguf.quants.quantize(rows, gguf.GGMLQuantizationType.Q4_0)
            writer.add_tensor(t.name, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q4_0)
        else:
            writer.add_tensor(t.name, data)
    write_and_close(writer)
    print(f"{OUT}: {OUT.stat().st_size} bytes")


if __name__ == "__main__":
    main()
