#!/usr/bin/env python
"""Many ranks on one machine: ``gpuscope trace DIR`` against rank summaries on Dask.

Issue #28. A job of N ranks (default 256 and 1,024) is N links to the shared H200 trace
(``gpu-h200/lm_clean``, 9.1 MB of JSON gzipped to 0.6 MB; its rank comes from the file
name), one rank a copy with every kernel 1.3x longer. Sides, each a child process started
under ``/usr/bin/time`` for its peak RSS (``_measure.run_child``), interleaved:

- ``cli``: the native binary, ``target/release/gpuscope trace DIR --format json``;
- ``module``: ``python -m gpuscope``, the same command with the CLI inside Python (the
  pip-installed ``gpuscope`` is the binary itself, the ``gpuscope-cli`` wheel);
- ``slurm``: what a Slurm job array does, on one machine: ``gpuscope trace DIR
  --summaries-out S`` (the array's tasks, here one command), then ``gpuscope trace S``;
  two children, their walls added, the larger peak;
- ``dask``: ``python bench_ranks.py --side dask DIR``: a ``distributed.LocalCluster`` of
  two worker processes (one thread each) maps ``gpuscope.rank_summary`` over the files,
  the client merges. Its peak RSS is the client's (``/usr/bin/time``) plus each worker's
  own peak (``VmHWM``, read on the workers at the end): the cluster's processes together.

Before any time is printed every side must name the stretched rank, and only it, as the
straggler. Not a test: nothing asserts on time. ``--ranks 256 1024 --repeat 3``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _measure import (
    ChildRun,
    closing_notes,
    last_json,
    loadavg,
    note,
    own_peak_rss_mb,
    run_child,
)

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from _helpers import rank_job

TRACE = REPO.parent / "shared/data/gpu-h200/lm_clean/profiler_traces/1795675943334.pt.trace.json.gz"
NATIVE = REPO / "target/release/gpuscope"
SIDES = ("cli", "module", "slurm", "dask")
LIMIT_MB = 400.0


def dask_side(job: str) -> None:
    """The Dask path in this process; prints the stragglers and the workers' peaks."""
    import gpuscope
    from distributed import Client, LocalCluster

    paths = sorted(str(p) for p in Path(job).glob("*.json.gz"))
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        summaries = client.gather(client.map(gpuscope.rank_summary, paths))
        workers = list(client.run(own_peak_rss_mb).values())
    merged = gpuscope.merge_rank_summaries(summaries)
    stragglers = [s["rank"] for s in merged["comparison"]["stragglers"]]
    print(json.dumps({"stragglers": stragglers, "workers_rss_mb": workers}))


def stragglers_of(doc: dict[str, Any]) -> list[int]:
    """The straggler ranks of a ``gpuscope.trace/1`` or ``gpuscope.ranks/1`` document."""
    comparison = doc.get("rank_comparison") or doc.get("comparison") or {}
    return [s["rank"] for s in comparison.get("stragglers", [])]


def run_side(side: str, job: Path, scratch: Path) -> tuple[ChildRun, list[int], float]:
    """One run of ``side``: the child (wall, peak RSS), the stragglers it named, and the
    peak RSS of all its processes, MB."""
    start = [str(NATIVE)] if side == "cli" else [sys.executable, "-m", "gpuscope"]
    if side in ("cli", "module"):
        child = run_child([*start, "trace", str(job), "--format", "json"])
        return child, stragglers_of(json.loads(child.stdout)), child.peak_rss_mb
    if side == "slurm":
        out = scratch / "summaries"
        write = run_child([str(NATIVE), "trace", str(job), "--summaries-out", str(out)])
        merge = run_child([str(NATIVE), "trace", str(out), "--format", "json"])
        both = ChildRun(
            merge.stdout,
            write.wall_s + merge.wall_s,
            max(write.peak_rss_mb, merge.peak_rss_mb),
            write.rss_exact and merge.rss_exact,
        )
        return both, stragglers_of(json.loads(merge.stdout)), both.peak_rss_mb
    child = run_child([sys.executable, __file__, "--side", "dask", str(job)])
    answer = last_json(child)
    return child, answer["stragglers"], child.peak_rss_mb + sum(answer["workers_rss_mb"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--side", choices=["dask"], help=argparse.SUPPRESS)
    parser.add_argument("job", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        dask_side(args.job)
        return
    if not NATIVE.is_file():
        subprocess.run(["cargo", "build", "--release", "-p", "gpuscope-cli"], check=True)
    started = time.perf_counter()
    note(
        f"bench_ranks: {args.repeat} runs per side and job; {TRACE.name} "
        f"({TRACE.stat().st_size / 2**20:.2f} MB gzipped) per rank; load average {loadavg()}"
    )
    children: list[ChildRun] = []
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for ranks in args.ranks:
            slow = ranks * 7 // 13
            job = rank_job(Path(tmp) / f"ranks{ranks}", TRACE, ranks, slow)
            runs: dict[str, list[tuple[ChildRun, float]]] = {s: [] for s in SIDES}
            for k in range(args.repeat):
                for side in SIDES:
                    scratch = Path(tmp) / f"{side}{ranks}-{k}"
                    child, stragglers, rss = run_side(side, job, scratch)
                    if stragglers != [slow]:
                        raise SystemExit(f"{side}, {ranks} ranks: stragglers {stragglers}")
                    children.append(child)
                    runs[side].append((child, rss))
            print(f"\n{ranks} ranks (rank {slow} stretched)")
            print(f"{'side':<7} {'median s':>9} {'best s':>7} {'RSS MB':>7}  x cli")
            medians = {}
            for side in SIDES:
                walls = [c.wall_s for c, _ in runs[side]]
                medians[side] = statistics.median(walls)
                rss = max(r for _, r in runs[side])
                print(
                    f"{side:<7} {medians[side]:>9.2f} {min(walls):>7.2f} {rss:>7.1f}  "
                    f"{medians[side] / medians['cli']:.2f}x"
                )
                if side in ("cli", "module"):
                    ok = rss < LIMIT_MB
                    lines.append(
                        f"{ranks} ranks, {side}: peak RSS {rss:.1f} MB, under "
                        f"{LIMIT_MB:.0f} MB: {'met' if ok else 'MISSED'}"
                    )
    note(
        "(median s / best s: the whole child's wall, interpreter start-up included; RSS "
        "MB: the largest peak; dask: the client's plus each worker's own peak)"
    )
    closing_notes(children, lines, started)


if __name__ == "__main__":
    main()
