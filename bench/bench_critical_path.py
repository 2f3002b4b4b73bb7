#!/usr/bin/env python
"""``TraceAnalysis.critical_path_analysis`` + ``overlay_critical_path_analysis``:
gpuscope vs Holistic Trace Analysis 0.5.

Each side is one child process (``python bench_critical_path.py --side S DIR ANN I``)
started under ``/usr/bin/time`` for its peak RSS (``_measure.run_child``): it loads the
directory, finds the critical path of instance ``I`` of annotation ``ANN`` on rank 0
(``""``: the whole trace), takes its summary, and writes the overlaid trace into a
scratch directory, timing the load, the path and the overlay on its own clock. It prints
the path's total (µs) and the summary, which this script prints for both sides.

HTA 0.5's critical path fails with pandas 3 (``DataFrame.drop(axis=1, columns=…)``); with
pandas 2.2 it answers every input here. ``--hta-python`` names the interpreter of an
environment where it runs (``python -m venv V && V/bin/pip install
HolisticTraceAnalysis==0.5.0 pandas==2.2.3 'numpy<2'``; ``run.sh`` makes one); by
default this interpreter's HTA is tried, and a side that fails is printed as failed,
with HTA's last line. Not a test: nothing asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _measure import ChildRun, closing_notes, last_json, loadavg, note, run_child

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
TRACES = DATA / "traces"
H200 = DATA / "gpu-h200" / "lm_clean" / "profiler_traces" / "1795675943334.pt.trace.json.gz"
# label: (trace, annotation, instance)
INPUTS = {
    "alexnet": (TRACES / "alexnet_single_gpu.json.gz", "", 0),
    "event_sync": (TRACES / "event_sync_multi_stream.json.gz", "", 0),
    "h200_step0": (H200, "ProfilerStep", 0),
    "h200_step1": (H200, "ProfilerStep", 1),
    "v100_ns_step1": (TRACES / "v100_rank0_ns_resolution.json.gz", "ProfilerStep", 1),
    "nccl_neg_q_step0": (TRACES / "rank0_nccl_negative_queue.json.gz", "ProfilerStep", 0),
}
SIDES = ("gpuscope", "hta")


def side(name: str, trace_dir: str, annotation: str, instance: int) -> None:
    """One session; prints its timers, the path's total and summary as JSON (or why it
    failed)."""
    import warnings

    warnings.simplefilter("ignore")
    if name == "gpuscope":
        from gpuscope import TraceAnalysis
    else:
        import logging

        from hta.configs.config import logger
        from hta.trace_analysis import TraceAnalysis

        logger.setLevel(logging.ERROR)
    t0 = time.perf_counter()
    analyzer = TraceAnalysis(trace_dir=trace_dir)
    t1 = time.perf_counter()
    try:
        graph, ok = analyzer.critical_path_analysis(0, annotation, instance)
        breakdown = graph.get_critical_path_breakdown()
        summary = graph.summary()
        t2 = time.perf_counter()
        with tempfile.TemporaryDirectory() as out:
            analyzer.overlay_critical_path_analysis(0, graph, out)
        t3 = time.perf_counter()
    # How HTA 0.5 fails: pandas 3 (ValueError), an instance it does not have (a query
    # on ``nan``: pandas' UndefinedVariableError, a NameError), an annotation it cannot
    # find (it returns None, which does not unpack: TypeError).
    except (KeyError, ValueError, TypeError, NameError, AssertionError) as e:
        print(json.dumps({"error": f"{type(e).__name__}: {e}"[:200]}))
        return
    print(
        json.dumps(
            {
                "ok": bool(ok),
                "load_s": t1 - t0,
                "path_s": t2 - t1,
                "overlay_s": t3 - t2,
                "total_us": float(breakdown["duration"].sum()),
                "summary": {str(k): float(v) for k, v in summary.items() if k},
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hta-python", default=sys.executable)
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        trace_dir, annotation, instance = args.rest
        side(args.side, trace_dir, annotation, int(instance))
        return
    started = time.perf_counter()
    note(
        f"bench_critical_path: {args.repeat} runs per side and input; HTA under "
        f"{args.hta_python}; load average {loadavg()}"
    )
    python = {"gpuscope": sys.executable, "hta": args.hta_python}
    children: list[ChildRun] = []
    lines = []
    print(
        f"\n{'input':<17} {'side':<9} {'wall s':>7} {'load':>6} {'path':>6} {'ovl':>6} "
        f"{'RSS MB':>7} {'path µs':>11}  cpu/comp/comm/kk/launch %"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for label, (trace, annotation, instance) in INPUTS.items():
            d = Path(tmp) / label
            d.mkdir()
            os.symlink(trace, d / trace.name)
            runs: dict[str, list[ChildRun]] = {s: [] for s in SIDES}
            for _ in range(args.repeat):
                for s in SIDES:
                    cmd = [python[s], __file__, "--side", s, str(d), annotation, str(instance)]
                    child = run_child(cmd)
                    children.append(child)
                    runs[s].append(child)
            walls = {}
            for s in SIDES:
                parts = [last_json(c) for c in runs[s]]
                if "error" in parts[0]:
                    print(f"{label:<17} {s:<9} failed: {parts[0]['error'][:48]}")
                    continue
                shares = parts[0]["summary"]
                walls[s] = statistics.median(c.wall_s for c in runs[s])
                print(
                    f"{label:<17} {s:<9} {walls[s]:>7.3f} "
                    + " ".join(
                        f"{statistics.median(p[k] for p in parts):>6.3f}"
                        for k in ("load_s", "path_s", "overlay_s")
                    )
                    + f" {max(c.peak_rss_mb for c in runs[s]):>7.1f}"
                    + f" {parts[0]['total_us']:>11.1f}  "
                    + "/".join(
                        f"{shares.get(b, 0.0):.2f}"
                        for b in (
                            "cpu_bound",
                            "gpu_compute_bound",
                            "gpu_communication_bound",
                            "gpu_kernel_kernel_overhead",
                            "gpu_kernel_launch_overhead",
                        )
                    )
                )
            if len(walls) == 2:
                lines.append(
                    f"{label}: HTA / gpuscope wall {walls['hta'] / walls['gpuscope']:.1f}x"
                )
    note(
        "(wall s: median of the whole child, interpreter and imports included; load, "
        "path, ovl: the child's own timers for loading, the path with its breakdown and "
        "summary, and the overlaid trace, medians, s; RSS MB: the largest peak RSS; path "
        "µs and the shares: the first run's)"
    )
    closing_notes(children, lines, started)


if __name__ == "__main__":
    main()
