#!/usr/bin/env bash
# Creates tools/.venv with the pinned Python reference stack used to generate
# golden data (never needed to build or test anymoe: goldens are committed).
set -euo pipefail
cd "$(dirname "$0")"
python3 -m venv .venv
.venv/bin/pip install --quiet \
  torch==2.15.0 transformers==5.24.0 tokenizers==0.23.3 gguf==0.19.0 \
  safetensors==0.8.0 numpy==2.4.6 jinja2==3.1.6 sentencepiece==0.2.3 accelerate==1.15.0 \
  jsonschema==4.26.0 openai==3.57.0
echo "tools/.venv ready"
