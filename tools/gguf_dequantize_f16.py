#!/usr/bin/env python3
"""Rewrites a GGUF file with every quantised tensor dequantised to F16 (vectors
F32), metadata copied and general.file_type = MOSTLY_F16: the source of the
SmolLM2 Q8_0 / Q4_0 bench files (docs/benchmarks.md "The files"), so that
llama-quantize quantises from F16 rather than requantising Q4_1 blocks.
  tools/.venv/bin/python tools/gguf_dequantize_f16.py IN.gguf OUT.gguf"""
import sys

import gguf
import numpy as np


def main(src: str, dst: str) -> None:
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, r.fields["general.architecture"].contents())
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        val = int(gguf.LlamaFileType.MOSTLY_F16) if key == "general.file_type" else f.contents()
        sub = f.types[1] if f.types[0] == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(key, val, f.types[0], sub)
    for t in r.tensors:
        shape = tuple(int(x) for x in reversed(t.shape))
        if t.tensor_type in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
            data = np.asarray(t.data).reshape(shape)
        else:
            data = gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape)
        w.add_tensor(t.name, data.astype(np.float16 if len(shape) >= 2 else np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
