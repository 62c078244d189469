#!/usr/bin/env bash
# Inter-token latency of short requests while another client sends long prompts
# (issue 27's serving check), for anymoe serve and llama-server side by side.
# Per round and server (started fresh, same file, slots and context):
#   1. SHORT_CLIENTS clients of short prompts alone,
#   2. the same with one more client sending a LONG_LEN-word prompt (admitted
#      first, so the short clients decode while it prefills),
# each a bench-serve run saved as JSON under OUT; rounds alternate the servers
# (anymoe, llama, anymoe, llama, ...) so load on the machine falls on both
# alike; every server gets the same prompts, each run its own seed (no prefix
# cache hits). The summary prints, per server, the medians over the rounds
# (min-max): the short
# clients' P50 / P99 inter-token latency alone and beside the long prompt, their
# ratio, and the long prompt's tokens and TTFT. E.g. (docs/server.md):
#   MODEL=models/bench/glm45air-mini-Q8_0.gguf CTX=20480 LONG_LEN=12000 \
#     SERVE_FLAGS="--prefill-depth-unit 4096" ROUNDS=2 tools/bench_long_prompt_serve.sh
# SERVERS="anymoe" runs anymoe alone; "anymoe anymoe2 llama" adds anymoe with
# SERVE_FLAGS2 instead of SERVE_FLAGS (e.g. a --prefill-depth-unit against the
# default); LLAMA_SERVER names llama-server's binary.
set -euo pipefail
cd "$(dirname "$0")/.."
ANYMOE=${ANYMOE:-build/src/anymoe}
LLAMA_SERVER=${LLAMA_SERVER:-/work/ext/llama.cpp/build/bin/llama-server}
SERVERS=${SERVERS:-anymoe llama}
ROUNDS=${ROUNDS:-1}
MODEL=${MODEL:-models/bench/SmolLM2-135M-Instruct.Q8_0.gguf}
PORT=${PORT:-18427}
THREADS=${THREADS:-$(nproc)}
CTX=${CTX:-8192}                   # tokens per sequence (anymoe -c)
KV_TOKENS=${KV_TOKENS:-$((CTX * 2))}  # the KV pool of all slots (anymoe --kv-tokens, llama -c -kvu)
LONG_LEN=${LONG_LEN:-4000}         # words; ~1.3 tokens each with SmolLM2's tokenizer
SHORT_CLIENTS=${SHORT_CLIENTS:-7}
SHORT_PROMPTS=${SHORT_PROMPTS:-28}
SHORT_LEN=${SHORT_LEN:-64}
OUTPUT_LEN=${OUTPUT_LEN:-128}
SERVE_FLAGS=${SERVE_FLAGS:-}       # extra anymoe serve flags
SERVE_FLAGS2=${SERVE_FLAGS2:-}     # the same for the variant "anymoe2"
LLAMA_FLAGS=${LLAMA_FLAGS:-}       # extra llama-server flags
OUT=${OUT:-$(mktemp -d /tmp/long_prompt_serve.XXXXXX)}
URL="http://127.0.0.1:$PORT"
SLOTS=$((SHORT_CLIENTS + 1))
mkdir -p "$OUT"

server=
stop_server() {
  if [[ -n "$server" ]]; then
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    server=
  fi
}
trap stop_server EXIT

start_server() {  # $1: anymoe | anymoe2 | llama
  local flags=$SERVE_FLAGS
  [[ "$1" == anymoe2 ]] && flags=$SERVE_FLAGS2
  # shellcheck disable=SC2086
  case "$1" in
    anymoe|anymoe2) "$ANYMOE" serve -m "$MODEL" --port "$PORT" -c "$CTX" --parallel "$SLOTS" \
              --kv-tokens "$KV_TOKENS" -t "$THREADS" --no-request-log $flags \
              >"$OUT/$1.log" 2>&1 & ;;
    llama) "$LLAMA_SERVER" -m "$MODEL" --port "$PORT" -c "$KV_TOKENS" -kvu -np "$SLOTS" \
             -t "$THREADS" $LLAMA_FLAGS >"$OUT/$1.log" 2>&1 & ;;
    *) echo "unknown server $1" >&2; exit 2 ;;
  esac
  server=$!
  for _ in $(seq 600); do
    curl -sf "$URL/health" >/dev/null 2>&1 && return 0
    kill -0 "$server" 2>/dev/null || break
    sleep 0.5
  done
  echo "$1 did not come up; its log:" >&2
  tail -20 "$OUT/$1.log" >&2
  exit 1
}

short() {  # $1: output file, $2: seed
  "$ANYMOE" bench-serve --url "$URL" --num-prompts "$SHORT_PROMPTS" --qps inf \
    --concurrency "$SHORT_CLIENTS" --input-len "$SHORT_LEN" --output-len "$OUTPUT_LEN" \
    --ignore-eos --seed "$2" -o json >"$1"
}

for round in $(seq "$ROUNDS"); do
  for s in $SERVERS; do
    seed=$((round * 100))  # the same prompts for every server (each starts empty)
    echo "== round $round: $s ($OUT)" >&2
    start_server "$s"
    short "$OUT/$s.r$round.alone.json" "$seed"
    "$ANYMOE" bench-serve --url "$URL" --num-prompts 1 --qps inf --concurrency 1 \
      --input-len "$LONG_LEN" --output-len 16 --ignore-eos --seed $((seed + 1)) --timeout 3600 \
      -o json >"$OUT/$s.r$round.long.json" &
    long=$!
    sleep 1  # the long prompt is admitted first
    short "$OUT/$s.r$round.beside.json" $((seed + 2))
    wait "$long"
    stop_server
  done
done

python3 - "$OUT" "$ROUNDS" $SERVERS <<'EOF'
import json, statistics, sys
out, rounds, servers = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def load(s, r, kind):
    with open(f"{out}/{s}.r{r}.{kind}.json") as f:
        return json.load(f)
def cell(xs, fmt="{:.0f}"):
    return (fmt + " ({}-{})").format(statistics.median(xs), fmt.format(min(xs)), fmt.format(max(xs)))
print("| server | ITL P50 alone (ms) | ITL P99 alone (ms) | ITL P50 beside (ms) | ITL P99 beside (ms) "
      "| P99 beside / alone | short TTFT P50 beside (s) | long prompt tokens | long prompt TTFT (s) "
      "| failed |")
print("|---|---|---|---|---|---|---|---|---|---|")
for s in servers:
    a = [load(s, r, "alone") for r in range(1, rounds + 1)]
    b = [load(s, r, "beside") for r in range(1, rounds + 1)]
    l = [load(s, r, "long") for r in range(1, rounds + 1)]
    ratio = [y["itl_ms"]["p99"] / x["itl_ms"]["p99"] for x, y in zip(a, b)]
    failed = sum(x["failed"] for x in a + b + l)
    print(f"| {s} | {cell([x['itl_ms']['median'] for x in a])} | {cell([x['itl_ms']['p99'] for x in a])} "
          f"| {cell([x['itl_ms']['median'] for x in b])} | {cell([x['itl_ms']['p99'] for x in b])} "
          f"| {cell(ratio, '{:.2f}')} | {cell([x['ttft_ms']['median'] / 1e3 for x in b], '{:.1f}')} "
          f"| {cell([x['total_input_tokens'] for x in l])} "
          f"| {cell([x['ttft_ms']['median'] / 1e3 for x in l], '{:.1f}')} | {failed} |")
EOF
