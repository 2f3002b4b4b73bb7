#!/usr/bin/env python
"""add_scalar throughput: gpuscope.EventWriter vs torch.utils.tensorboard.SummaryWriter.

Run without ``--side`` (the runner): each side is measured in its own child process
(``python bench_tb_write.py --side gpuscope|summarywriter``) so that its peak RSS is its
own; the runner then reads every event file back with ``gpuscope.read_events`` to check
that each side wrote exactly the scalars it was asked to, and that the points both sides
have in common (same tag, same step) carry the same values.

Timed per side: N calls of ``add_scalar(tag, value, global_step)`` cycling over
``--tags`` distinct tags (step = call // tags), plus ``close()``. Writer construction and
imports are not timed (they are in peak RSS).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

from _measure import own_peak_rss_mb, rss_note, run_child

SIDES = ("gpuscope", "summarywriter")
TARGET_RATIO = 25.0
TARGET_US = 2.0


def tag_names(n_tags: int) -> list[str]:
    return [f"train/metric_{k}" for k in range(n_tags)]


def value_of(i: int) -> float:
    """The value written by call i (exactly representable in float32)."""
    return (i % 1024) * 0.25


def make_writer(side: str, log_dir: str) -> Any:
    if side == "gpuscope":
        import gpuscope

        return gpuscope.EventWriter(log_dir)
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(log_dir)


def write_scalars(writer: Any, n: int, n_tags: int) -> float:
    """n add_scalar calls then close(); returns the elapsed seconds."""
    tags = tag_names(n_tags)
    add = writer.add_scalar
    t0 = time.perf_counter()
    for i in range(n):
        add(tags[i % n_tags], (i % 1024) * 0.25, i // n_tags)  # value_of(i), inlined
    writer.close()
    return time.perf_counter() - t0


def run_side(side: str, n: int, n_tags: int, log_dir: str) -> dict[str, Any]:
    """Child mode: measure one side, return the result (printed as JSON)."""
    writer = make_writer(side, log_dir)
    rss_before_mb = own_peak_rss_mb()  # after imports and construction
    seconds = write_scalars(writer, n, n_tags)
    return {
        "side": side,
        "n": n,
        "seconds": seconds,
        "us_per_call": seconds / n * 1e6,
        "rss_before_loop_mb": rss_before_mb,
        "vmhwm_mb": own_peak_rss_mb(),  # cross-check of the runner's figure
    }


def spawn_side(side: str, n: int, n_tags: int, log_dir: str) -> dict[str, Any]:
    """Runs one side in a child process; adds its peak RSS (see _measure.py) to the result."""
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--side",
        side,
        "--n",
        str(n),
        "--tags",
        str(n_tags),
        "--log-dir",
        log_dir,
    ]
    started = time.time()
    child = run_child(cmd)
    result: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
    result["peak_rss_mb"] = child.peak_rss_mb
    result["child"] = child
    result["log_dir"] = log_dir
    result["window"] = (started, time.time())
    return result


def read_back(log_dir: str) -> dict[str, dict[str, Any]]:
    import gpuscope

    data = gpuscope.read_events(log_dir)
    return {tag: dict(s) for tag, s in data["tags"].items() if s["kind"] == "scalar"}


def check_side(
    side: str, series: dict[str, dict[str, Any]], n: int, n_tags: int, window: tuple[float, float]
) -> int:
    """Checks the scalars one side wrote (count, tags, steps, values, wall times within
    the child's lifetime); returns how many there are."""
    tags = tag_names(n_tags)
    total = sum(int(s["count"]) for s in series.values())
    problems = []
    if sorted(series) != sorted(tags):
        problems.append(f"tags {sorted(series)} != {sorted(tags)}")
    if total != n:
        problems.append(f"{total} scalar events read back, {n} written")
    for k, tag in enumerate(tags):
        s = series.get(tag)
        if s is None:
            continue
        calls = range(k, n, n_tags)
        if s["steps"] != [i // n_tags for i in calls]:
            problems.append(f"{tag}: steps differ from what was written")
        if s["values"] != [value_of(i) for i in calls]:
            problems.append(f"{tag}: values differ from what was written")
        if s["wall_times"] and not (
            window[0] <= min(s["wall_times"]) and max(s["wall_times"]) <= window[1]
        ):
            problems.append(f"{tag}: wall times outside the child's lifetime")
    if problems:
        raise SystemExit(f"{side}: " + "; ".join(problems))
    return total


def compare_common(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]) -> int:
    """Points (tag, step, value) both sides wrote must be identical; returns their count."""
    common = 0
    for tag in a:
        m = min(len(a[tag]["steps"]), len(b[tag]["steps"]))
        if (
            a[tag]["steps"][:m] != b[tag]["steps"][:m]
            or a[tag]["values"][:m] != b[tag]["values"][:m]
        ):
            raise SystemExit(f"{tag}: gpuscope and SummaryWriter disagree on common points")
        common += m
    return common


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median of the repeats (time), the range, and the largest peak RSS."""
    us = sorted(r["us_per_call"] for r in runs)
    return {
        "n": runs[0]["n"],
        "us_median": statistics.median(us),
        "us_min": us[0],
        "us_max": us[-1],
        "s_median": statistics.median(r["seconds"] for r in runs),
        "rss_before_loop_mb": max(r["rss_before_loop_mb"] for r in runs),
        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        "vmhwm_mb": max(r["vmhwm_mb"] for r in runs),
    }


def print_table(stats: dict[str, dict[str, Any]], repeat: int) -> None:
    base = stats["summarywriter"]["us_median"]
    print(
        f"{'side':<14} {'N':>7} {'us/call':>8} {'(min-max)':>17} {'total s':>8} "
        f"{'RSS pre-loop MB':>16} {'peak RSS MB':>12} {'ratio':>7}"
    )
    for side in SIDES:
        r = stats[side]
        span = f"{r['us_min']:.3f}-{r['us_max']:.3f}"
        print(
            f"{side:<14} {r['n']:>7} {r['us_median']:>8.3f} {span:>17} {r['s_median']:>8.3f} "
            f"{r['rss_before_loop_mb']:>16.1f} {r['peak_rss_mb']:>12.1f} "
            f"{base / r['us_median']:>6.1f}x"
        )
    print(
        f"(us/call and total s: median of {repeat} child processes per side; "
        f"peak RSS: the largest; ratio: SummaryWriter median / this side's median)"
    )


def measure(args: argparse.Namespace, root: str) -> tuple[dict[str, list[dict[str, Any]]], str]:
    """Runs every side --repeat times (interleaved), checking each run's events."""
    n_of = {"gpuscope": args.n or args.n_gpuscope, "summarywriter": args.n or args.n_summarywriter}
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
    first: dict[str, dict[str, dict[str, Any]]] = {}
    for rep in range(args.repeat):
        for side in SIDES:
            r = spawn_side(side, n_of[side], args.tags, os.path.join(root, f"{side}-{rep}"))
            series = read_back(r["log_dir"])
            r["read_back"] = check_side(side, series, n_of[side], args.tags, r["window"])
            first.setdefault(side, series)
            runs[side].append(r)
            if not args.keep:
                shutil.rmtree(r["log_dir"], ignore_errors=True)
    common = compare_common(first["gpuscope"], first["summarywriter"])
    counts = ", ".join(f"{side} {sorted({r['read_back'] for r in runs[side]})}" for side in SIDES)
    check = (
        f"read back with gpuscope.read_events (scalar events per run): {counts} -- "
        f"each = its N, tags/steps/values as written; {common} points common to both "
        f"sides identical"
    )
    gap = max(abs(r["peak_rss_mb"] - r["vmhwm_mb"]) for side in SIDES for r in runs[side])
    check += (
        f"\npeak RSS cross-check: each child's own VmHWM at the end of its run is "
        f"within {gap:.1f} MB of the figure above"
    )
    check += "\n" + rss_note([r["child"] for side in SIDES for r in runs[side]])
    return runs, check


def run_all(args: argparse.Namespace) -> None:
    root = tempfile.mkdtemp(prefix="gpuscope-bench-write-")
    try:
        runs, check = measure(args, root)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    stats = {side: summarize(runs[side]) for side in SIDES}
    print(
        f"add_scalar, {args.tags} tags cycling, step = call // {args.tags}; timed: the "
        f"calls + close(); python {sys.version.split()[0]}"
    )
    print_table(stats, args.repeat)
    print(check)
    g, s = stats["gpuscope"], stats["summarywriter"]
    ratio = s["us_median"] / g["us_median"]
    worst = s["us_min"] / g["us_max"]
    print(
        f"ratio SummaryWriter/gpuscope: {ratio:.1f}x median, {worst:.1f}x worst case "
        f"(fastest SummaryWriter run / slowest gpuscope run); target >= {TARGET_RATIO:.0f}x: "
        f"{'met' if worst >= TARGET_RATIO else 'MISSED'}"
    )
    print(
        f"gpuscope: {g['us_median']:.3f} us/call median, {g['us_max']:.3f} slowest; target "
        f"<= {TARGET_US:.0f} us: {'met' if g['us_max'] <= TARGET_US else 'MISSED'}"
    )
    if args.keep:
        print(f"event files kept under {root}")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--side", choices=SIDES, help="child mode: measure this side only")
    p.add_argument(
        "--n",
        type=int,
        default=None,
        help="add_scalar calls (child mode: for --side; runner: for both sides)",
    )
    p.add_argument("--n-gpuscope", type=int, default=200_000, help="runner: gpuscope calls")
    p.add_argument(
        "--n-summarywriter", type=int, default=50_000, help="runner: SummaryWriter calls"
    )
    p.add_argument("--tags", type=int, default=10, help="distinct tags, cycled")
    p.add_argument("--log-dir", help="child mode: where to write")
    p.add_argument(
        "--repeat", type=int, default=5, help="child processes per side (runner); median reported"
    )
    p.add_argument("--keep", action="store_true", help="keep the event files")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    if args.side:
        n = args.n or (args.n_gpuscope if args.side == "gpuscope" else args.n_summarywriter)
        log_dir = args.log_dir or tempfile.mkdtemp(prefix=f"gpuscope-bench-{args.side}-")
        print(json.dumps(run_side(args.side, n, args.tags, log_dir)), flush=True)
        # Skip interpreter teardown: with torch imported it alone raises peak RSS by ~115 MB,
        # which is not the cost of writing. Every writer is closed by now.
        os._exit(0)
    else:
        run_all(args)


if __name__ == "__main__":
    main()
