#!/usr/bin/env bash
# Inter-token latency of short requests while another client sends long prompts
# (issue 27's serving check): `anymoe serve` with SERVE_FLAGS, then
#   1. SHORT_CLIENTS clients of short prompts alone,
#   2. the same with one more client sending LONG_LEN-word prompts,
# and prints each run's bench-serve table (P99 ITL of the short clients; TTFT
# of the long prompts). Run it once per --prefill-chunk to compare, e.g.
#   SERVE_FLAGS="--prefill-chunk 64" tools/bench_long_prompt_serve.sh
# Defaults fit SmolLM2 (context 8192): LONG_LEN 4000 words is ~5K tokens; use a
# model with a 16K+ context and LONG_LEN 12000 for the issue's 16K prompts.
set -euo pipefail
cd "$(dirname "$0")/.."
ANYMOE=${ANYMOE:-build/src/anymoe}
MODEL=${MODEL:-models/bench/SmolLM2-135M-Instruct.Q8_0.gguf}
PORT=${PORT:-18427}
CTX=${CTX:-8192}
LONG_LEN=${LONG_LEN:-4000}
LONG_PROMPTS=${LONG_PROMPTS:-2}
SHORT_CLIENTS=${SHORT_CLIENTS:-7}
SHORT_PROMPTS=${SHORT_PROMPTS:-28}
SHORT_LEN=${SHORT_LEN:-64}
OUTPUT_LEN=${OUTPUT_LEN:-128}
SERVE_FLAGS=${SERVE_FLAGS:-}
URL="http://127.0.0.1:$PORT"

# shellcheck disable=SC2086
"$ANYMOE" serve -m "$MODEL" --port "$PORT" -c "$CTX" --parallel $((SHORT_CLIENTS + 1)) \
  --kv-tokens $((CTX * 2)) --no-request-log $SERVE_FLAGS &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 300); do
  curl -sf "$URL/health" >/dev/null && break
  sleep 0.2
done

short() {
  "$ANYMOE" bench-serve --url "$URL" --num-prompts "$SHORT_PROMPTS" --qps inf \
    --concurrency "$SHORT_CLIENTS" --input-len "$SHORT_LEN" --output-len "$OUTPUT_LEN" \
    --ignore-eos --seed 1
}

echo "== $SHORT_CLIENTS short clients alone (serve $SERVE_FLAGS)"
short
echo "== the same with one client sending $LONG_LEN-word prompts"
"$ANYMOE" bench-serve --url "$URL" --num-prompts "$LONG_PROMPTS" --qps inf --concurrency 1 \
  --input-len "$LONG_LEN" --output-len 16 --ignore-eos --seed 2 --timeout 3600 >/tmp/long_client.$$ &
long=$!
sleep 1  # the long prompt is admitted first
short
wait $long
echo "== the long client"
cat /tmp/long_client.$$
rm -f /tmp/long_client.$$
