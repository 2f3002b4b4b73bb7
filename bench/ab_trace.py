#!/usr/bin/env python
"""Two builds of ``gpuscope trace`` against each other on one trace: does a change help?

Not a rival benchmark (``bench_trace.py`` is that): for deciding on a change to the trace
reader or its analyses, where the difference is a few percent and this 2-core VM's noise
comes in spells of tens of percent. Each run starts both binaries one after the other,
alternating which goes first, so that a slow spell falls on both; it prints, per binary,
the wall times in the order they were taken, min / median / p90 / max and the largest
peak RSS, then the ratio of the medians (B / A).

    python bench/ab_trace.py OLD_BINARY NEW_BINARY TRACE [--runs 30]

Keep copies of the binaries outside ``target/`` (cargo replaces them on the next build).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from _measure import run_child


def summary(name: str, walls: list[float], rss: list[float]) -> str:
    ms = sorted(w * 1000 for w in walls)
    p90 = ms[min(len(ms) - 1, int(len(ms) * 0.9))]
    return (
        f"{name}: min {ms[0]:.1f} ms, median {statistics.median(ms):.1f}, "
        f"p90 {p90:.1f}, max {ms[-1]:.1f}; peak RSS {max(rss):.1f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path, help="the binary to compare against (A)")
    parser.add_argument("b", type=Path, help="the binary with the change (B)")
    parser.add_argument("trace", type=Path, help="a trace file (.json or .json.gz)")
    parser.add_argument("--runs", type=int, default=30, help="runs of each (default 30)")
    args = parser.parse_args()
    sides = {"A": args.a, "B": args.b}
    walls: dict[str, list[float]] = {"A": [], "B": []}
    rss: dict[str, list[float]] = {"A": [], "B": []}
    for run in range(args.runs):
        order = ("A", "B") if run % 2 == 0 else ("B", "A")
        for side in order:
            cmd = [str(sides[side]), "trace", str(args.trace), "--format", "json"]
            child = run_child(cmd + ["-o", "/dev/null"])
            walls[side].append(child.wall_s)
            rss[side].append(child.peak_rss_mb)
    for side in ("A", "B"):
        print(f"{side} = {sides[side]}")
        print("  runs, ms: " + " ".join(f"{w * 1000:.0f}" for w in walls[side]))
        print("  " + summary(side, walls[side], rss[side]))
    ratio = statistics.median(walls["B"]) / statistics.median(walls["A"])
    print(f"median B / A: {ratio:.3f} ({args.runs} runs each, alternating)")


if __name__ == "__main__":
    main()
