#!/usr/bin/env python
"""A notebook's session with ``gpuscope.TraceAnalysis`` vs Holistic Trace Analysis 0.5.

Issue #27. What a notebook does: import, load a directory of traces, then five
questions -- ``get_temporal_breakdown``, ``get_gpu_kernel_breakdown``,
``get_idle_time_breakdown``, ``get_queue_length_summary``,
``get_cuda_kernel_launch_stats`` (``visualize=False``); then, timed apart, three more:
``get_gpu_user_annotation_breakdown(use_gpu_annotation=False, visualize=False)`` (the
CPU's ranges: few of these traces have GPU ones, and HTA answers ``None`` without),
``get_aten_op_kernels_and_delay()`` (HTA draws a plotly table there whatever it is
asked: its ``Figure.show`` is made a no-op) and
``get_gpu_kernels_with_user_annotations(rank)`` of the lowest rank (``None`` from both
on the traces without GPU annotations; ``v100_ns`` has 15), and
``get_frequent_cuda_kernel_sequences("aten::", DIR, rank=...)`` of the lowest rank (the
patterns of every outermost ATen call, and the overlaid trace written), and
``generate_trace_with_counters(ranks=[...])`` of the lowest rank (the trace copied with its
queue-length and copy-bandwidth counters, beside it; removed after each question). A question that
raises ``KeyError``, ``ValueError`` or ``TypeError``, as HTA does on traces it cannot
answer (its call graph, which the last question needs, fails with NumPy 2), is printed
as failed, not timed. Each side is one child process
(``python bench_notebook.py --side S DIR``) started under ``/usr/bin/time`` for its peak
RSS (``_measure.run_child``); the whole child is timed, and it reports its own timer
around the import, the load and the questions. Sides: ``gpuscope`` (``from gpuscope
import TraceAnalysis``) and ``hta`` (``from hta.trace_analysis import TraceAnalysis``),
the same code otherwise; ``--repeat`` runs each (default 5), interleaved.

Inputs: the largest shared traces, each alone in a directory of links
(``rank0_nccl_negative_queue``, 25.8 MB of JSON; ``v100_rank0_ns_resolution``, 15.4 MB;
``resnet50_v100_memory_workers0``), and the two ranks of ``sampled_rank*``. Before any
time is printed both sides' temporal breakdowns must agree (2 us or 0.5 %). Not a test:
nothing asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any
from unittest.mock import patch

from _measure import closing_notes, last_json, loadavg, note, run_child

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "traces"
INPUTS = {
    "nccl_negative_queue": ["rank0_nccl_negative_queue.json.gz"],
    "v100_ns": ["v100_rank0_ns_resolution.json.gz"],
    "resnet50_workers0": ["resnet50_v100_memory_workers0.json.gz"],
    "sampled_2_ranks": ["sampled_rank0.json.gz", "sampled_rank1.json.gz"],
}
SIDES = ("gpuscope", "hta")


def side(name: str, trace_dir: str) -> None:
    """One notebook session; prints its timers and the temporal breakdown as JSON."""
    import warnings

    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    if name == "gpuscope":
        from gpuscope import TraceAnalysis
    else:
        from hta.trace_analysis import TraceAnalysis
    t1 = time.perf_counter()
    analyzer = TraceAnalysis(trace_dir=trace_dir)
    t2 = time.perf_counter()
    temporal = analyzer.get_temporal_breakdown(visualize=False)
    analyzer.get_gpu_kernel_breakdown(visualize=False)
    analyzer.get_idle_time_breakdown(visualize=False)
    analyzer.get_queue_length_summary()
    analyzer.get_cuda_kernel_launch_stats(visualize=False)
    t3 = time.perf_counter()
    more: dict[str, float | None] = {}
    # HTA draws a table whatever it is asked; plotly is HTA's, not gpuscope's.
    quiet = patch("plotly.graph_objects.Figure.show") if name == "hta" else nullcontext()
    with quiet, tempfile.TemporaryDirectory() as scratch:
        for question, ask in MORE.items():
            t = time.perf_counter()
            try:
                ask(analyzer, scratch)
            except (KeyError, ValueError, TypeError):  # how HTA fails on some traces
                more[question] = None
            else:
                more[question] = time.perf_counter() - t
            finally:
                for written in Path(trace_dir).glob(WRITTEN_BESIDE):
                    written.unlink()
    print(
        json.dumps(
            {
                "import_s": t1 - t0,
                "load_s": t2 - t1,
                "questions_s": t3 - t2,
                "more_s": more,
                "temporal": temporal.to_dict(orient="records"),
            }
        )
    )


# The questions timed apart from the first five, by the column they print under; each
# is given the analyzer and a scratch directory to write into.
MORE: dict[str, Callable[[Any, str], object]] = {
    "annot ms": lambda a, _: a.get_gpu_user_annotation_breakdown(
        use_gpu_annotation=False, visualize=False
    ),
    "aten ms": lambda a, _: a.get_aten_op_kernels_and_delay(),
    "kann ms": lambda a, _: a.get_gpu_kernels_with_user_annotations(rank=first_rank(a)),
    "seq ms": lambda a, out: a.get_frequent_cuda_kernel_sequences(
        "aten::", out, rank=first_rank(a)
    ),
    "cnt ms": lambda a, _: a.generate_trace_with_counters(ranks=[first_rank(a)]),
}
# What "cnt ms" writes beside the traces, removed so that the next session loads the
# directory as it was.
WRITTEN_BESIDE = "*_with_counters.json*"


def first_rank(analyzer: Any) -> int:
    """The lowest rank of either side's ``TraceAnalysis``."""
    ranks = analyzer.ranks if hasattr(analyzer, "ranks") else analyzer.t.get_ranks()
    return min(ranks)


def more_median(parts: list[dict[str, Any]], question: str) -> float | None:
    """The median time of ``question`` over a side's runs; ``None`` when it failed."""
    times = [p["more_s"][question] for p in parts]
    return None if None in times else statistics.median(times)


def agree(a: dict[str, Any], b: dict[str, Any]) -> bool:
    for row_a, row_b in zip(a["temporal"], b["temporal"], strict=True):
        for key, x in row_a.items():
            y = row_b[key]
            if abs(x - y) > max(2.0, 0.005 * abs(y)):
                return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("trace_dir", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        side(args.side, args.trace_dir)
        return
    started = time.perf_counter()
    note(f"bench_notebook: {args.repeat} runs per side and input; load average {loadavg()}")
    children = []
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, names in INPUTS.items():
            d = Path(tmp) / label
            d.mkdir()
            for n in names:
                os.symlink(SHARED / n, d / n)
            size = sum((SHARED / n).stat().st_size for n in names) / 2**20
            runs: dict[str, list[Any]] = {s: [] for s in SIDES}
            for _ in range(args.repeat):
                for s in SIDES:
                    child = run_child([sys.executable, __file__, "--side", s, str(d)])
                    children.append(child)
                    runs[s].append(child)
            answers = {s: last_json(runs[s][0]) for s in SIDES}
            if not agree(answers["gpuscope"], answers["hta"]):
                raise SystemExit(f"{label}: the temporal breakdowns disagree: {answers}")
            print(f"\n{label} ({len(names)} rank(s), {size:.1f} MB gzipped)")
            print(
                f"{'side':<9} {'wall s':>7} {'import':>7} {'load':>7} {'5 q.':>7} "
                + " ".join(f"{q:>8}" for q in MORE)
                + f" {'RSS MB':>7}"
            )
            med = {}
            more = {}
            for s in SIDES:
                parts = [last_json(c) for c in runs[s]]
                med[s] = (
                    statistics.median(c.wall_s for c in runs[s]),
                    max(c.peak_rss_mb for c in runs[s]),
                )
                more[s] = {q: more_median(parts, q) for q in MORE}
                print(
                    f"{s:<9} {med[s][0]:>7.3f} "
                    f"{statistics.median(p['import_s'] for p in parts):>7.3f} "
                    f"{statistics.median(p['load_s'] for p in parts):>7.3f} "
                    f"{statistics.median(p['questions_s'] for p in parts):>7.3f} "
                    + " ".join(
                        f"{'failed':>8}" if t is None else f"{t * 1000:>8.1f}"
                        for t in more[s].values()
                    )
                    + f" {med[s][1]:>7.1f}"
                )
            ratios = ", ".join(
                f"{q.split()[0]} {theirs / ours:.1f}x"
                for q in MORE
                if (ours := more["gpuscope"][q]) and (theirs := more["hta"][q]) is not None
            )
            lines.append(
                f"{label}: HTA / gpuscope wall {med['hta'][0] / med['gpuscope'][0]:.1f}x"
                + (f" ({ratios})" if ratios else "")
                + f", peak RSS gpuscope / HTA {med['gpuscope'][1] / med['hta'][1]:.2f}"
            )
    note(
        "(wall s: median of the whole child, interpreter and imports included; import, "
        "load, 5 q.: the child's own timers, medians, s; annot ms: "
        "get_gpu_user_annotation_breakdown of the CPU's ranges, aten ms: "
        "get_aten_op_kernels_and_delay, kann ms: get_gpu_kernels_with_user_annotations, "
        "seq ms: get_frequent_cuda_kernel_sequences('aten::'), "
        "cnt ms: generate_trace_with_counters, "
        "each timed alone, medians, ms; RSS MB: the "
        "largest peak RSS)"
    )
    closing_notes(children, lines, started)


if __name__ == "__main__":
    main()
