#!/usr/bin/env python3
"""Quantises a tiny golden MoE GGUF's matrices to Q8_0 / Q4_0 / Q4_1 with the gguf package.

The expert-streaming identity tests (tests/models/expert_streaming_test.cc) compare
anymoe with a cache of streamed experts against anymoe with every weight resident,
bit for bit; the f32 goldens never reach the CPU's integer and panel kernels, so
these copies of tests/golden/moe_gguf/glm4_moe.gguf carry its matrices (attention,
dense and shared MLPs, routed experts, embeddings, output) in the quantised types
the panel layout covers. Metadata, norms, biases and the f32 router are copied
unchanged. The quantisation is gguf-py's reference one (`gguf.quants.quantize`),
so the files are the same on every run with the same gguf version. Run from the
repo root:

    tools/.venv/bin/python tools/gen_quantized_moe_gguf.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import gguf
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from golden_common import REPO_ROOT  # noqa: E402

SOURCE = REPO_ROOT / "tests" / "golden" / "moe_gguf" / "glm4_moe.gguf"
TYPES = {"q8_0": gguf.GGMLQuantizationType.Q8_0, "q4_0": gguf.GGMLQuantizationType.Q4_0,
         "q4_1": gguf.GGMLQuantizationType.Q4_1}


def copy_metadata(reader: gguf.GGUFReader, writer: gguf.GGUFWriter) -> None:
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)


def write_and_close(writer: gguf.GGUFWriter) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main() -> None:
    reader = gguf.GGUFReader(SOURCE)
    arch = str(reader.fields["general.architecture"].contents())
    for suffix, qtype in TYPES.items():
        out = SOURCE.with_name(f"glm4_moe.{suffix}.gguf")
        writer = gguf.GGUFWriter(out, arch)
        copy_metadata(reader, writer)
        for t in reader.tensors:
            data = np.asarray(t.data, dtype=np.float32).reshape(list(reversed([int(n) for n in t.shape])))
            # The router stays f32 (as real files keep it); vectors stay f32.
            if data.ndim >= 2 and "ffn_gate_inp" not in t.name and data.shape[-1] % 32 == 0:
                q = gguf.quants.quantize(data, qtype)
                writer.add_tensor(t.name, q, raw_shape=q.shape, raw_dtype=qtype)
            else:
                writer.add_tensor(t.name, data)
        write_and_close(writer)
        print(f"{out}: {out.stat().st_size} bytes")


if __name__ == "__main__":
    main()
