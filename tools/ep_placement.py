#!/usr/bin/env python3
"""Computes an expert placement for `anymoe run|bench --ep --ep-placement FILE`
from routing statistics (`anymoe run ... --routing-stats stats.json`).

Per MoE layer, experts are taken hottest first (most tokens routed) and each
goes to the rank with the least load so far among the ranks that still have
room, where room is ceil(E / N) experts per rank: the load (tokens each rank's
experts compute) evens out while every rank still holds about 1/N of the
weights. Ties go to the lower rank, so the output depends only on the counts.

  python3 tools/ep_placement.py stats.json --ranks 4 -o placement.json

The output (docs/distributed.md):
  {"ranks": N, "layers": [{"layer": L, "owners": [rank of expert 0, ...],
                           "load": [tokens per rank]}, ...]}
Only the standard library is used.
"""
import argparse
import json
import sys


def place_layer(counts, ranks):
    experts = len(counts)
    room = -(-experts // ranks)  # ceil
    owners = [0] * experts
    load = [0] * ranks
    held = [0] * ranks
    for e in sorted(range(experts), key=lambda e: (-counts[e], e)):
        r = min((r for r in range(ranks) if held[r] < room), key=lambda r: (load[r], r))
        owners[e] = r
        load[r] += counts[e]
        held[r] += 1
    return owners, load


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stats", help="JSON written by anymoe run --routing-stats")
    ap.add_argument("--ranks", type=int, required=True, help="ranks of the MPI job (mpirun -np)")
    ap.add_argument("-o", "--output", help="placement file to write (default: stdout)")
    args = ap.parse_args()
    if args.ranks < 1:
        sys.exit("ep_placement: --ranks must be at least 1")
    with open(args.stats) as f:
        stats = json.load(f)
    layers = stats.get("layers")
    if not isinstance(layers, list) or not layers:
        sys.exit(f"ep_placement: {args.stats}: no \"layers\" (is it --routing-stats output?)")
    out = {"ranks": args.ranks, "layers": []}
    for entry in layers:
        counts = entry["counts"]
        owners, load = place_layer(counts, args.ranks)
        out["layers"].append({"layer": entry["layer"], "owners": owners, "load": load})
        contiguous = [0] * args.ranks  # anymoe's default: [r * E / N, (r + 1) * E / N)
        for r in range(args.ranks):
            lo, hi = r * len(counts) // args.ranks, (r + 1) * len(counts) // args.ranks
            contiguous[r] = sum(counts[lo:hi])
        print(f"layer {entry['layer']}: busiest rank {max(load)} tokens "
              f"(contiguous ranges: {max(contiguous)})", file=sys.stderr)
    text = json.dumps(out, indent=1) + "\n"
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
