#!/usr/bin/env python
"""Reading 100k scalars: gpuscope (Python and CLI) vs tensorboard's EventAccumulator vs tbparse.

One event file of ``--tags`` x ``--steps`` scalars is written once with
``torch.utils.tensorboard.SummaryWriter`` (so no side reads its own format). Each side then
reads it in its own child process, ``--repeat`` times, interleaved:

* gpuscope     ``gpuscope.read_events(path)``
* cli          ``target/release/gpuscope tb PATH --format json -o /dev/null``
* eventacc     ``EventAccumulator(path, size_guidance={'scalars': 0}).Reload()`` plus
               every tag's ``Scalars(tag)`` turned into step and value lists
* tbparse      ``SummaryReader(path).scalars`` (a pandas DataFrame)

"read s" is timed inside the child around the read alone (imports excluded); for the CLI,
which is one process, it is the process's wall time. "process s" is the child's whole wall
time, interpreter start-up and imports included. Every side must return all the points,
with the same sums of steps and of values (the CLI is checked by an untimed second run
that writes its JSON to a file).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _measure import ChildRun, own_peak_rss_mb, rss_note, run_child

REPO = Path(__file__).resolve().parent.parent
CLI = REPO / "target" / "release" / "gpuscope"
SIDES = ("gpuscope", "cli", "eventacc", "tbparse")
LABELS = {
    "gpuscope": "gpuscope.read_events",
    "cli": "gpuscope tb --format json",
    "eventacc": "EventAccumulator",
    "tbparse": "tbparse SummaryReader",
}
BASELINE = "eventacc"
TARGET_RATIO = 20.0

Points = tuple[int, int, float]  # (count, sum of steps, sum of values)


# --- the data file ------------------------------------------------------------------


def make_data(log_dir: str, n_tags: int, n_steps: int) -> None:
    """Child mode: writes the event file with SummaryWriter."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir)
    tags = [f"train/metric_{k}" for k in range(n_tags)]
    for step in range(n_steps):
        for k, tag in enumerate(tags):
            writer.add_scalar(tag, math.sin(step * 0.001 + k), step)
    writer.close()


def data_file(data_dir: str, n_tags: int, n_steps: int) -> Path:
    """The event file in data_dir, written first (in a child process) if missing."""
    sub = Path(data_dir) / f"sw-{n_tags}x{n_steps}"
    files = sorted(sub.glob("events.out.tfevents.*"))
    if not files:
        run_child(
            [
                sys.executable,
                __file__,
                "--make-data",
                str(sub),
                "--tags",
                str(n_tags),
                "--steps",
                str(n_steps),
            ]
        )
        files = sorted(sub.glob("events.out.tfevents.*"))
    if len(files) != 1:
        raise SystemExit(f"expected one event file in {sub}, found {len(files)}")
    return files[0]


# --- the Python sides (child mode) ----------------------------------------------------


def summed(steps: list[int], values: list[float]) -> Points:
    return len(steps), sum(steps), math.fsum(values)


def add_points(a: Points, b: Points) -> Points:
    return a[0] + b[0], a[1] + b[1], a[2] + b[2]


# Each reader: (read, points) -- read() is timed and returns every scalar as Python
# objects; points() sums them afterwards, untimed.
Reader = tuple[Callable[[], Any], Callable[[Any], Points]]


def read_gpuscope(path: str) -> Reader:
    import gpuscope

    def read() -> Any:
        return gpuscope.read_events(path)

    def points(data: Any) -> Points:
        total: Points = (0, 0, 0.0)
        for s in data["tags"].values():
            if s["kind"] == "scalar":
                total = add_points(total, summed(s["steps"], s["values"]))
        return total

    return read, points


def read_eventacc(path: str) -> Reader:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    def read() -> Any:
        acc = EventAccumulator(path, size_guidance={"scalars": 0})
        acc.Reload()
        series = {}
        for tag in acc.Tags()["scalars"]:
            events = acc.Scalars(tag)
            series[tag] = (
                [e.step for e in events],
                [e.wall_time for e in events],
                [e.value for e in events],
            )
        return series

    def points(series: Any) -> Points:
        total: Points = (0, 0, 0.0)
        for steps, _, values in series.values():
            total = add_points(total, summed(steps, values))
        return total

    return read, points


def read_tbparse(path: str) -> Reader:
    from tbparse import SummaryReader

    def read() -> Any:
        return SummaryReader(path).scalars

    def points(df: Any) -> Points:
        return len(df), int(df["step"].sum()), math.fsum(df["value"].tolist())

    return read, points


READERS = {"gpuscope": read_gpuscope, "eventacc": read_eventacc, "tbparse": read_tbparse}


def run_python_side(side: str, path: str) -> dict[str, Any]:
    read, points = READERS[side](path)  # imports happen here, untimed
    t0 = time.perf_counter()
    data = read()
    seconds = time.perf_counter() - t0
    count, step_sum, value_sum = points(data)
    return {
        "side": side,
        "read_s": seconds,
        "points": count,
        "step_sum": step_sum,
        "value_sum": value_sum,
        "vmhwm_mb": own_peak_rss_mb(),
    }


# --- the runner -------------------------------------------------------------------------


def cli_points(path: Path) -> Points:
    """Untimed: runs the CLI into a file and sums what it printed."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        run_child([str(CLI), "tb", str(path), "--format", "json", "-o", out.name])
        with open(out.name) as f:
            data = json.load(f)
    total: Points = (0, 0, 0.0)
    for s in data["tags"].values():
        if s["kind"] == "scalar":
            pts = s["points"]
            total = add_points(total, summed([p["step"] for p in pts], [p["value"] for p in pts]))
    return total


def measure_once(side: str, path: Path) -> tuple[dict[str, Any], ChildRun]:
    if side == "cli":
        child = run_child([str(CLI), "tb", str(path), "--format", "json", "-o", "/dev/null"])
        return {"side": side, "read_s": child.wall_s}, child
    child = run_child([sys.executable, __file__, "--side", side, "--path", str(path)])
    return json.loads(child.stdout.strip().splitlines()[-1]), child


def check_points(results: dict[str, dict[str, Any]], cli: Points, expected: int) -> str:
    got = {
        side: (r["points"], r["step_sum"], r["value_sum"])
        for side, r in results.items()
        if side != "cli"
    }
    got["cli"] = cli
    ref = got[BASELINE]
    bad = [f"{side}: {p}" for side, p in got.items() if p != (expected, ref[1], ref[2])]
    if bad:
        raise SystemExit(
            f"sides disagree (expected {expected} points, {BASELINE} has {ref}): " + "; ".join(bad)
        )
    return (
        f"every side returned {expected} points with sum(step) = {ref[1]} and "
        f"sum(value) = {ref[2]:.9f}"
    )


def print_table(
    runs: dict[str, list[dict[str, Any]]], children: list[ChildRun], repeat: int
) -> None:
    med = {s: statistics.median(r["read_s"] for r in runs[s]) for s in SIDES}
    proc = {s: statistics.median(r["process_s"] for r in runs[s]) for s in SIDES}
    print(
        f"{'side':<26} {'read s':>8} {'(min-max)':>15} {'process s':>10} "
        f"{'peak RSS MB':>12} {'read ratio':>11} {'process ratio':>14}"
    )
    for s in SIDES:
        times = sorted(r["read_s"] for r in runs[s])
        span = f"{times[0]:.3f}-{times[-1]:.3f}"
        rss = max(r["peak_rss_mb"] for r in runs[s])
        print(
            f"{LABELS[s]:<26} {med[s]:>8.3f} {span:>15} {proc[s]:>10.3f} {rss:>12.1f} "
            f"{med[BASELINE] / med[s]:>10.1f}x {proc[BASELINE] / proc[s]:>13.1f}x"
        )
    print(
        f"(median of {repeat} child processes per side; ratios: {LABELS[BASELINE]} time / "
        f"this side's; CLI read s = its process wall time)"
    )
    print(rss_note(children))
    worst = min(r["read_s"] for r in runs[BASELINE]) / max(r["read_s"] for r in runs["gpuscope"])
    ratio = med[BASELINE] / med["gpuscope"]
    print(
        f"gpuscope.read_events vs EventAccumulator: {ratio:.1f}x median, {worst:.1f}x worst "
        f"case (fastest EventAccumulator / slowest gpuscope); target >= {TARGET_RATIO:.0f}x: "
        f"{'met' if worst >= TARGET_RATIO else 'MISSED'}"
    )


def run_all(args: argparse.Namespace) -> None:
    if not CLI.exists():
        raise SystemExit(f"{CLI} missing: cargo build --release -p gpuscope-cli")
    own_data = args.data_dir is None
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="gpuscope-bench-read-")
    try:
        path = data_file(data_dir, args.tags, args.steps)
        runs: dict[str, list[dict[str, Any]]] = {s: [] for s in SIDES}
        children: list[ChildRun] = []
        for _ in range(args.repeat):
            for side in SIDES:
                result, child = measure_once(side, path)
                result.update(process_s=child.wall_s, peak_rss_mb=child.peak_rss_mb)
                runs[side].append(result)
                children.append(child)
        check = check_points(
            {s: runs[s][0] for s in SIDES}, cli_points(path), args.tags * args.steps
        )
        size_mb = path.stat().st_size / 2**20
    finally:
        if own_data:
            shutil.rmtree(data_dir, ignore_errors=True)
    print(
        f"reading one SummaryWriter event file: {args.tags} tags x {args.steps} steps = "
        f"{args.tags * args.steps} scalars, {size_mb:.1f} MiB; python {sys.version.split()[0]}"
    )
    print_table(runs, children, args.repeat)
    print(check)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tags", type=int, default=10, help="distinct tags")
    p.add_argument("--steps", type=int, default=10_000, help="steps per tag")
    p.add_argument("--repeat", type=int, default=3, help="child processes per side")
    p.add_argument("--data-dir", help="keep/reuse the event file here (default: a temp dir)")
    p.add_argument("--side", choices=tuple(READERS), help="child mode: read with this side")
    p.add_argument("--path", help="child mode: the event file")
    p.add_argument("--make-data", metavar="DIR", help="child mode: write the event file")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    if args.make_data:
        make_data(args.make_data, args.tags, args.steps)
    elif args.side:
        print(json.dumps(run_python_side(args.side, args.path)), flush=True)
        os._exit(0)  # skip interpreter teardown (see bench_tb_write.py); nothing left open
    else:
        run_all(args)


if __name__ == "__main__":
    main()
