"""``TraceAnalysis.get_frequent_cuda_kernel_sequences`` on the shared traces, against
their JSON read plainly here (HTA 0.5's call graph, which its own method needs, fails on
them with NumPy 2): the patterns, their counts and durations, and the overlaid trace the
method writes."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import gpuscope
import pytest
from _helpers import SHARED_DATA, shared_file

pytest.importorskip("pandas")

TRACES = SHARED_DATA / "traces"
# Categories as Kineto writes them, and as older Kineto did (resnet50_v100_memory_*).
GPU_WORK = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}
RUNTIME = {"cuda_runtime", "cuda_driver", "Runtime"}
# What runs on a CPU thread: the calls.
CALLS = RUNTIME | {"cpu_op", "Operator", "user_annotation", "python_function"}


def load(path: Path) -> list[dict[str, Any]]:
    """The trace's events, times as exact decimals."""
    return json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)["traceEvents"]


def ns(value: Any) -> int:
    return int(Decimal(value) * 1000)


Calls = dict[str, Any]


def oracle(events: list[dict[str, Any]], operator: str, min_len: int) -> dict[str, Calls]:
    """Per pattern: count, GPU and CPU time (ns) and the positions of its events. A call
    is any event on a CPU thread whose name contains ``operator`` and that does not start
    inside another such call on its thread; its work is every piece of GPU work
    correlated with a runtime or driver call inside it on its thread."""
    work: dict[Any, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    for p, e in enumerate(events):
        if e.get("ph") == "X" and e.get("cat") in GPU_WORK and "correlation" in e.get("args", {}):
            work[e["args"]["correlation"]].append((p, e))
    threads: dict[tuple[Any, Any], list[tuple[int, int, int]]] = defaultdict(list)
    for p, e in enumerate(events):
        if e.get("ph") == "X" and e.get("cat") in CALLS:
            start = ns(e["ts"])
            threads[(e["pid"], e["tid"])].append((start, start + ns(e["dur"]), p))
    patterns: dict[str, Calls] = {}
    for calls in threads.values():
        calls.sort(key=lambda c: (c[0], -c[1], c[2]))
        outer_end = None
        for start, end, p in calls:
            if operator not in events[p]["name"]:
                continue
            if outer_end is not None and start < outer_end:
                continue
            outer_end = end
            inside = [c for c in calls if start <= c[0] and c[1] <= end]
            launched = sorted(
                (ns(w["ts"]), q, w)
                for _, _, c in inside
                if events[c]["cat"] in RUNTIME
                for q, w in work.get(events[c].get("args", {}).get("correlation"), [])
            )
            if len(launched) < min_len:
                continue
            key = "|".join([events[p]["name"], *(w["name"] for _, _, w in launched)])
            entry = patterns.setdefault(key, {"count": 0, "gpu": 0, "cpu": 0, "at": set()})
            entry["count"] += 1
            entry["gpu"] += sum(ns(w["dur"]) for _, _, w in launched)
            entry["cpu"] += end - start
            entry["at"] |= {c for _, _, c in inside} | {q for _, q, _ in launched}
    return patterns


def ranked(patterns: dict[str, Calls]) -> list[str]:
    """Most frequent first, ties by pattern."""
    return sorted(patterns, key=lambda k: (-patterns[k]["count"], k))


def analysis(tmp_path: Path, name: str, exact: bool = True) -> gpuscope.TraceAnalysis:
    d = tmp_path / "in"
    d.mkdir(exist_ok=True)
    (d / name).symlink_to(shared_file(TRACES / name))
    if not exact:
        return gpuscope.TraceAnalysis(trace_dir=str(d))
    return gpuscope.TraceAnalysis(
        trace_dir=str(d), include_last_profiler_step=True, hta_compat=False
    )


CASES = [
    ("alexnet_single_gpu.json.gz", "aten::conv2d", 3),
    ("alexnet_single_gpu.json.gz", "aten::", 1),
    ("v100_rank0_ns_resolution.json.gz", "autograd::engine", 3),
    ("v100_rank0_ns_resolution.json.gz", "ProfilerStep", 3),
    ("resnet50_v100_memory_workers4.json.gz", "aten::", 2),
    ("amd_mi250_rocm.json.gz", "aten::", 1),
    # torch.compile: graph replays, each starting many kernels.
    ("rank0_nccl_negative_queue.json.gz", "CompiledFunction", 1),
]


@pytest.mark.parametrize(("name", "operator", "min_len"), CASES)
def test_patterns_are_what_the_calls_launched(
    tmp_path: Path, name: str, operator: str, min_len: int
) -> None:
    """Every pattern, its count and its GPU and CPU time, in order: most frequent first,
    ties by pattern."""
    expected = oracle(load(shared_file(TRACES / name)), operator, min_len)
    assert expected, "the case has patterns"
    out = tmp_path / "out"
    out.mkdir()
    df = analysis(tmp_path, name).get_frequent_cuda_kernel_sequences(
        operator, str(out), min_pattern_len=min_len, top_k=3
    )
    assert list(df.columns) == [
        "pattern",
        "count",
        "GPU kernel duration (us)",
        "CPU op duration (us)",
    ]
    order = ranked(expected)
    assert df["pattern"].tolist() == order
    assert df["count"].tolist() == [expected[k]["count"] for k in order]
    assert df["GPU kernel duration (us)"].tolist() == pytest.approx(
        [expected[k]["gpu"] / 1000 for k in order]
    )
    assert df["CPU op duration (us)"].tolist() == pytest.approx(
        [expected[k]["cpu"] / 1000 for k in order]
    )


def test_on_the_default_clock_the_patterns_are_among_the_exact_ones(tmp_path: Path) -> None:
    """HTA's clock (times rounded to whole µs) with the last profiler step left out, on a
    trace of nanosecond times: the same patterns, each counted at most as often (the
    step left out takes some calls away), and calls are left out."""
    name, operator = "v100_rank0_ns_resolution.json.gz", "autograd::engine"
    exact = oracle(load(shared_file(TRACES / name)), operator, 3)
    out = tmp_path / "out"
    out.mkdir()
    df = analysis(tmp_path, name, exact=False).get_frequent_cuda_kernel_sequences(
        operator, str(out)
    )
    assert not df.empty
    counts = dict(zip(df["pattern"], df["count"], strict=True))
    assert set(counts) <= set(exact)
    assert all(counts[k] <= exact[k]["count"] for k in counts)
    assert sum(counts.values()) < sum(e["count"] for e in exact.values())


@pytest.mark.parametrize("compress", [True, False])
def test_the_overlaid_trace_marks_the_top_patterns(tmp_path: Path, compress: bool) -> None:
    """The overlay is the trace with the top patterns' events carrying ``args.Patterns``
    and, compressed, the other complete events without ``args``; nothing else changes."""
    name, operator, top_k = "v100_rank0_ns_resolution.json.gz", "autograd::engine", 2
    source = load(shared_file(TRACES / name))
    expected = oracle(source, operator, 3)
    top = ranked(expected)[:top_k]
    marks: dict[int, dict[str, int]] = defaultdict(dict)
    for k in top:
        for p in expected[k]["at"]:
            marks[p][k] = expected[k]["count"]
    out = tmp_path / "out"
    out.mkdir()
    analysis(tmp_path, name).get_frequent_cuda_kernel_sequences(
        operator, str(out), top_k=top_k, compress_other_kernels=compress
    )
    overlaid = load(out / f"overlaid_{name}")
    assert len(overlaid) == len(source)
    assert sum("Patterns" in e.get("args", {}) for e in overlaid) == len(marks) > 0
    for p, (before, after) in enumerate(zip(source, overlaid, strict=True)):
        if p in marks:
            assert after["args"] == before.get("args", {}) | {"Patterns": marks[p]}, p
        elif compress and before.get("ph") == "X":
            assert "args" not in after and after | {"args": before.get("args")} == before | {
                "args": before.get("args")
            }, p
        else:
            assert after == before, p


def test_bad_arguments_and_no_pattern(tmp_path: Path) -> None:
    """A bad operator name, output directory or rank is a ValueError; an operator that
    launches nothing gives an empty frame, a warning and no file."""
    name = "alexnet_single_gpu.json.gz"
    ta = analysis(tmp_path, name)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ValueError, match="operator_name"):
        ta.get_frequent_cuda_kernel_sequences("", str(out))
    with pytest.raises(ValueError, match="not a writable directory"):
        ta.get_frequent_cuda_kernel_sequences("aten::conv2d", str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="no trace of rank 3"):
        ta.get_frequent_cuda_kernel_sequences("aten::conv2d", str(out), rank=3)
    with pytest.warns(UserWarning, match="no call of an operator named like 'no such op'"):
        df = ta.get_frequent_cuda_kernel_sequences("no such op", str(out))
    assert df.empty and len(df.columns) == 4
    assert list(out.iterdir()) == []


def test_the_overlay_is_of_the_trace_the_patterns_are_of(tmp_path: Path) -> None:
    """Two traces of rank 0 in one directory: the patterns are the first's, and so is
    the trace written over, its marks where that trace's events are."""
    d = tmp_path / "in"
    d.mkdir()
    names = {
        "a.json.gz": "alexnet_single_gpu.json.gz",
        "b.json.gz": "v100_rank0_ns_resolution.json.gz",
    }
    for link, name in names.items():
        (d / link).symlink_to(shared_file(TRACES / name))
    ta = gpuscope.TraceAnalysis(trace_dir=str(d), include_last_profiler_step=True)
    assert ta.ranks == [0, 0]
    assert ta.trace_files == {0: str(d / "a.json.gz")}
    source = load(shared_file(TRACES / names["a.json.gz"]))
    expected = oracle(source, "aten::conv2d", 3)
    out = tmp_path / "out"
    out.mkdir()
    df = ta.get_frequent_cuda_kernel_sequences("aten::conv2d", str(out), top_k=1)
    assert df["pattern"].tolist() == ranked(expected)
    assert [p.name for p in out.iterdir()] == ["overlaid_a.json.gz"]
    overlaid = load(out / "overlaid_a.json.gz")
    marked = {p for p, e in enumerate(overlaid) if "Patterns" in e.get("args", {})}
    assert marked == expected[ranked(expected)[0]]["at"]
