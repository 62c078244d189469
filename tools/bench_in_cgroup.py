#!/usr/bin/env python3
"""Runs `anymoe bench` (and llama.cpp's llama-bench, when given) inside a memory cgroup.

The "bigger than memory" measurements of expert streaming: a memory cgroup (v1,
/sys/fs/cgroup/memory, as root) limited to a share of the model file's size, so
the page cache counts against the limit as it does on a machine with too little
RAM; the file's cached pages are dropped before each run (cold start). For each
engine it reports decode tokens/s, peak RSS (getrusage of the child), the
cgroup's peak usage (RSS + page cache), whether it was OOM-killed, and for
anymoe the expert cache's hit rate, prefetch prediction precision/recall, stall
and bytes read per token (from its bench JSON). With --resident it also runs
anymoe unlimited with every weight resident, the speed to compare against.

    sudo tools/bench_in_cgroup.py -m models/bench/glm45air-mini-Q8_0.gguf --limit-pct 40 \\
        --expert-cache 25% --resident --llama-bench /work/ext/llama.cpp/build/bin/llama-bench

Uses only the Python standard library. Exit status 1 if any run failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path("/sys/fs/cgroup/memory")


def drop_file_cache(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def run(cmd: list[str], limit: int | None, name: str) -> dict:
    """Runs `cmd` (in a fresh cgroup limited to `limit` bytes when given)."""
    group = None
    if limit is not None:
        group = ROOT / f"anymoe-{name}-{os.getpid()}"
        group.mkdir()
        (group / "memory.limit_in_bytes").write_text(str(limit))
        (group / "memory.swappiness").write_text("0")

    def enter() -> None:
        if group is not None:
            (group / "cgroup.procs").write_text(str(os.getpid()))

    rss_file = Path(f"/tmp/anymoe-cgroup-rss-{os.getpid()}")
    start = time.monotonic()
    # /usr/bin/time -f %M: this run's peak RSS in KiB (getrusage of children
    # would report the largest of all runs so far).
    p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", str(rss_file), *cmd], preexec_fn=enter,
                       capture_output=True, text=True)
    seconds = time.monotonic() - start
    try:
        rss_kib = int(rss_file.read_text().split()[-1])
    except (OSError, ValueError, IndexError):
        rss_kib = 0
    rss_file.unlink(missing_ok=True)
    out = {"cmd": " ".join(cmd), "rc": p.returncode, "seconds": seconds,
           "peak_rss_mib": rss_kib / 1024, "stdout": p.stdout, "stderr": p.stderr[-4000:]}
    if group is not None:
        out["cgroup_limit_mib"] = limit / 2**20
        out["cgroup_peak_mib"] = int((group / "memory.max_usage_in_bytes").read_text()) / 2**20
        out["oom_killed"] = "oom_kill 1" in (group / "memory.oom_control").read_text() or p.returncode in (-9, 137)
        group.rmdir()
    return out


def parse_bench(stdout: str) -> dict:
    try:
        results = json.loads(stdout)
    except json.JSONDecodeError:
        return {}
    tg = [r for r in results if r.get("n_gen", 0) > 0] or results
    return tg[0] if tg else {}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--anymoe", default=str(Path(__file__).resolve().parent.parent / "build" / "src" / "anymoe"))
    ap.add_argument("--limit-pct", type=float, default=40.0, help="cgroup limit, % of the file size")
    ap.add_argument("--limit", type=int, default=0, help="cgroup limit in bytes (overrides --limit-pct)")
    ap.add_argument("--expert-cache", default="25%", help="anymoe --expert-cache")
    ap.add_argument("--expert-policy", default="", help="anymoe --expert-policy (default: anymoe's)")
    ap.add_argument("-n", "--n-gen", type=int, default=64)
    ap.add_argument("-r", "--repetitions", type=int, default=3)
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--resident", action="store_true", help="also run anymoe unlimited, all resident")
    ap.add_argument("--llama-bench", default="", help="llama-bench binary to run under the same limit")
    ap.add_argument("--json", default="", help="also write every run's record here")
    args = ap.parse_args()
    size = Path(args.model).stat().st_size
    limit = args.limit or int(size * args.limit_pct / 100)
    common = ["-m", args.model, "-p", "0", "-n", str(args.n_gen), "-r", str(args.repetitions),
              "-t", str(args.threads), "-o", "json"]
    runs = []
    anymoe = [args.anymoe, "bench", *common, "--expert-cache", args.expert_cache]
    if args.expert_policy:
        anymoe += ["--expert-policy", args.expert_policy]
    jobs = [("anymoe", anymoe, limit)]
    if args.resident:
        jobs.append(("anymoe-resident", [args.anymoe, "bench", *common, "--expert-cache", "off"], None))
    if args.llama_bench:
        jobs.append(("llama.cpp", [args.llama_bench, *common], limit))
    print(f"{args.model}: {size / 2**30:.2f} GiB; cgroup limit {limit / 2**30:.2f} GiB "
          f"({100 * limit / size:.0f} % of the file)")
    failed = False
    for name, cmd, lim in jobs:
        drop_file_cache(args.model)
        r = run(cmd, lim, name)
        r["name"] = name
        b = parse_bench(r["stdout"])
        r["tg_ts"] = b.get("avg_ts")
        r["expert_cache"] = b.get("expert_cache")
        runs.append(r)
        failed |= r["rc"] != 0
        line = f"{name:16s} rc {r['rc']:4d}  "
        line += f"tg{args.n_gen} {r['tg_ts']:.2f} t/s  " if r["tg_ts"] else "tg: no result  "
        line += f"peak RSS {r['peak_rss_mib']:.0f} MiB"
        if lim is not None:
            line += f", cgroup peak {r['cgroup_peak_mib']:.0f} MiB{' OOM-KILLED' if r['oom_killed'] else ''}"
        c = r["expert_cache"]
        if c:
            line += (f"\n{'':16s} expert cache {c['slots']} slots ({c['capacity_bytes'] / 2**20:.0f} MiB, "
                     f"{c['policy']}): hit {100 * c['hit_rate']:.1f} %, "
                     f"{c['bytes_per_token'] / 2**20:.2f} MiB/token read, stall "
                     f"{c['stall_ms_per_token']:.2f} ms/token, prediction precision "
                     f"{100 * c['prediction_precision']:.1f} % recall {100 * c['prediction_recall']:.1f} %")
        print(line)
        if r["rc"] != 0:
            print(r["stderr"], file=sys.stderr)
    resident = next((r for r in runs if r["name"] == "anymoe-resident"), None)
    streamed = runs[0]
    if resident and resident["tg_ts"] and streamed["tg_ts"]:
        print(f"streamed / resident decode speed: {100 * streamed['tg_ts'] / resident['tg_ts']:.1f} %")
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
