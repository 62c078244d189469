#!/usr/bin/env bash
# The quality cost of --expert-prune (docs/expert-profiles.md): profiles MODEL on
# PROFILE_TEXT, then scores EVAL_TEXT (held out) unpruned (the KLD base) and
# pruned to 75 / 50 / 25 % of the experts by count and by saliency; prints a
# Markdown table of perplexity, KLD against the unpruned model, same-top-token
# rate and the weights `info` says are left out.
#   tools/prune_quality.sh MODEL.gguf [PROFILE_TEXT] [EVAL_TEXT] [CHUNKS]
set -euo pipefail
model=$1
profile_text=${2:-/usr/share/common-licenses/GPL-3}
eval_text=${3:-/usr/share/common-licenses/Apache-2.0}
chunks=${4:-4}
bin=${ANYMOE:-build/src/anymoe}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" profile -m "$model" -f "$profile_text" -c 512 --chunks 8 -o "$work/profile.json" >/dev/null 2>&1
base=$("$bin" perplexity -m "$model" -f "$eval_text" -c 512 --chunks "$chunks" \
  --kl-divergence-base "$work/base.kld" 2>&1 | grep -o 'PPL = [0-9.]*' | tail -1)
echo "| kept | by | PPL | mean KLD | same top token | weights not loaded |"
echo "|---|---|---|---|---|---|"
echo "| 100 % | - | ${base#PPL = } | 0 | 100 % | 0 |"
for keep in 75 50 25; do
  for by in count saliency; do
    spec="$work/profile.json:${keep}%"
    out=$("$bin" perplexity -m "$model" -f "$eval_text" -c 512 --chunks "$chunks" \
      --expert-prune "$spec" --prune-by "$by" --kl-divergence-base "$work/base.kld" \
      --kl-divergence 2>&1)
    ppl=$(grep -o 'PPL = [0-9.]*' <<<"$out" | tail -1)
    kld=$(awk '/^Mean +KLD:/ {print $3}' <<<"$out")
    top=$(awk '/^Same top p:/ {print $4 " %"}' <<<"$out")
    saved=$("$bin" info -m "$model" --expert-prune "$spec" --prune-by "$by" |
      grep -o '([0-9.]* MiB, [0-9.]* %' | tr -d '(')
    echo "| $keep % | $by | ${ppl#PPL = } | $kld | $top | $saved |"
  done
done
