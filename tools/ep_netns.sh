#!/bin/bash
# Expert parallelism between two "machines" on one host: two network
# namespaces joined by a veth pair, MPI over TCP between them (no shared
# memory, no loopback), optionally with `tc netem` limits on the link, to see
# how the exchange time of `anymoe bench --ep` follows bandwidth and latency.
# Needs root, iproute2 (ip, tc: netem, or tbf for rates alone), util-linux
# (unshare) and OpenMPI. Rank 0 runs in anymoe-ep0 (10.77.0.1), where mpirun
# runs; rank 1 in anymoe-ep1 (10.77.0.2), started by tools/ep_netns_agent.sh
# in place of ssh.
#
#   tools/ep_netns.sh up                       # create the namespaces and the link
#   tools/ep_netns.sh shape 100mbit 2ms        # netem rate and one-way delay, both ways
#   tools/ep_netns.sh shape off                # no limits
#   tools/ep_netns.sh mpirun ANYMOE_ARGS...    # mpirun -np 2 across them: anymoe ANYMOE_ARGS --ep
#   tools/ep_netns.sh table MODEL [RATE/DELAY...]  # bench --ep per link setting, a Markdown table
#   tools/ep_netns.sh down                     # remove everything `up` made
#
# ANYMOE (default build/src/anymoe) picks the binary.
set -euo pipefail

NS0=anymoe-ep0 NS1=anymoe-ep1
DEV0=anymoe-ep0v DEV1=anymoe-ep1v
IP0=10.77.0.1 IP1=10.77.0.2 NET=10.77.0.0/24
HERE=$(cd "$(dirname "$0")" && pwd)
ANYMOE=${ANYMOE:-$HERE/../build/src/anymoe}

die() { echo "ep_netns: $*" >&2; exit 1; }
have_ns() { ip netns list | cut -d' ' -f1 | grep -qx "$1"; }

up() {
  [ "$(id -u)" = 0 ] || die "needs root (ip netns)"
  have_ns "$NS0" && die "$NS0 exists already (run: $0 down)"
  ip netns add "$NS0"
  ip netns add "$NS1"
  ip link add "$DEV0" type veth peer name "$DEV1"
  ip link set "$DEV0" netns "$NS0"
  ip link set "$DEV1" netns "$NS1"
  ip -n "$NS0" addr add "$IP0/24" dev "$DEV0"
  ip -n "$NS1" addr add "$IP1/24" dev "$DEV1"
  for ns in "$NS0" "$NS1"; do
    ip -n "$ns" link set lo up
  done
  ip -n "$NS0" link set "$DEV0" up
  ip -n "$NS1" link set "$DEV1" up
  ip -n "$NS0" route get "$IP1" >/dev/null || die "no route between the namespaces"
  echo "ep_netns: $NS0 ($IP0) <-> $NS1 ($IP1) over veth"
}

down() {
  # Deleting a namespace deletes its end of the veth pair, and with it the other.
  for ns in "$NS0" "$NS1"; do
    if have_ns "$ns"; then ip netns delete "$ns"; fi
  done
  echo "ep_netns: removed"
}

# shape RATE DELAY | shape off: on each end's egress, so both directions.
# netem gives rate and delay; a kernel without sch_netem (some VMs) still has
# tbf, which limits the rate only (DELAY must then be 0ms).
have_netem() {
  tc -n "$NS0" qdisc replace dev "$DEV0" root netem delay 0ms 2>/dev/null &&
    tc -n "$NS0" qdisc del dev "$DEV0" root
}
shape() {
  [ $# -ge 1 ] || die "shape RATE DELAY (e.g. 100mbit 2ms), or shape off"
  local ns dev netem=0
  if [ "$1" != off ]; then
    [ $# -eq 2 ] || die "shape RATE DELAY"
    if have_netem; then
      netem=1
    elif [ "${2%ms}" != 0 ]; then
      die "this kernel has no netem qdisc (sch_netem): rates only (shape RATE 0ms)"
    fi
  fi
  for pair in "$NS0:$DEV0" "$NS1:$DEV1"; do
    ns=${pair%%:*} dev=${pair##*:}
    if [ "$1" = off ]; then
      tc -n "$ns" qdisc del dev "$dev" root 2>/dev/null || true
    elif [ $netem = 1 ]; then
      # A queue deep enough for a step's exchange at the lowest rates.
      tc -n "$ns" qdisc replace dev "$dev" root netem rate "$1" delay "$2" limit 100000
    else
      tc -n "$ns" qdisc replace dev "$dev" root tbf rate "$1" burst 64kb latency 1s
    fi
  done
}

run_mpi() {
  have_ns "$NS0" || die "run '$0 up' first"
  [ -x "$ANYMOE" ] || die "$ANYMOE: not built (set ANYMOE=...)"
  ip netns exec "$NS0" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    mpirun -np 2 --host "$IP0:1,$IP1:1" --bind-to none \
    -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM \
    --mca plm_rsh_agent "$HERE/ep_netns_agent.sh" \
    --mca btl tcp,self --mca btl_tcp_if_include "$NET" --mca oob_tcp_if_include "$NET" \
    "$ANYMOE" "$@" --ep
}

# table MODEL [RATE/DELAY ...]: one bench --ep per link setting ("off" for no
# limit), the greedy tokens of a short run per setting (they must not change),
# and rank 0's wait in exchanges against the test's time.
table() {
  [ $# -ge 1 ] || die "table MODEL [RATE/DELAY ...]"
  local model=$1
  shift
  local settings=("$@")
  if [ ${#settings[@]} -eq 0 ]; then
    settings=(off 1gbit/0ms 100mbit/0ms 10mbit/0ms)
    if have_netem; then settings+=(1gbit/1ms 1gbit/5ms); fi
  fi
  echo "| link | tg tok/s | pp tok/s | rank 0 exchange wait (tg) | MiB sent (tg) | tokens |"
  echo "|---|---|---|---|---|---|"
  for s in "${settings[@]}"; do
    if [ "$s" = off ]; then shape off; else shape "${s%%/*}" "${s##*/}"; fi
    local tokens bench
    tokens=$(run_mpi run -m "$model" --prompt-tokens 5,6,7,8,9,10,11,12 -n 8 --temp 0 \
      --ignore-eos --print-tokens -t 1 2>/dev/null | sed -n 's/^tokens: //p')
    bench=$(run_mpi bench -m "$model" -p 32 -n 16 -t 1 -r 1 2>&1)
    local tg pp wait sent
    tg=$(echo "$bench" | awk -F'|' '/ tg16 /{gsub(/ /,"",$(NF-1)); print $(NF-1); exit}')
    pp=$(echo "$bench" | awk -F'|' '/ pp32 /{gsub(/ /,"",$(NF-1)); print $(NF-1); exit}')
    wait=$(echo "$bench" | sed -n 's/.*ep rank 0 of 2: tg16: \([0-9.]*\) s of \([0-9.]*\) s waiting.*/\1 s of \2 s/p')
    sent=$(echo "$bench" | sed -n 's/.*ep rank 0 of 2: tg16: .*, \([0-9.]*\) MiB sent.*/\1/p')
    echo "| $s | $tg | $pp | $wait | $sent | $tokens |"
  done
  shape off
}

cmd=${1:-}
[ -n "$cmd" ] || die "usage: $0 up | shape RATE DELAY | shape off | mpirun ARGS... | table MODEL | down"
shift
case "$cmd" in
  up) up ;;
  down) down ;;
  shape) shape "$@" ;;
  mpirun) run_mpi "$@" ;;
  table) table "$@" ;;
  *) die "unknown command $cmd" ;;
esac
