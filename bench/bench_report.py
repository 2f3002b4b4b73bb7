#!/usr/bin/env python
"""Throughput of ``gpuscope report --format json`` on a large run, vs a plain-Python analyzer.

Two inputs are generated once into a temporary directory (never under the repository):

* ``memory.jsonl``: ``--records`` (default 1,000,000) memory records as
  ``gpuscope.MemoryProfiler`` writes them on a GPU (allocator figures, 4 dtypes, 8 modules,
  5 ``large_tensors`` entries, 3 loss components and ``total``), and
* ``tensor_profile_<ts>.log``: ``--blocks`` (default 200,000) blocks of the
  ``tensor_profile_<ts>.log`` text log, laid out exactly like ``../shared/data/logs/tensor_profile_20260128_140205.log``.

The figures drift with a mild trend plus noise (the model grows, activations creep up,
fragmentation wanders, the losses fall), so that the trends, leak rule, timeline and loss
analyses do real work. Generation is not timed.

Sides, each in its own child process, ``--repeat`` times (default 3), interleaved:

* json     ``target/release/gpuscope report --format json -o /dev/null FILE`` (measured)
* text     the same with ``--format text`` (where the time goes: the output format's share)
* python   the rival: ``analyze_tensor_profile.py`` re-implemented in plain Python from its
           documented output (the "Sample Report" of the SuGaR debugging guide): every snapshot parsed into a list (text
           log: line by line with the analyzer's regexes; JSONL: ``json.loads`` per line), then
           the summary -- iteration range, snapshots, allocated / reserved / fragmentation /
           tensors start -> end, categories and dtypes at the end with percentages, large
           tensors
* floor    ``dd if=FILE of=/dev/null bs=1M``: reading the bytes from the page cache

Times are each child's wall time (``_measure.run_child``), plus its CPU time (user + system,
all threads: the growth of RUSAGE_CHILDREN around it); throughput is the input's size /
the wall time, in MB/s with MB = 2^20 bytes (as everywhere in gpuscope). Before any figure is
printed, the rival's start and end figures are checked against gpuscope's JSON for the same
file (an untimed run that writes the JSON to a file).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from multiprocessing import Pool
from pathlib import Path
from typing import Any

from _measure import ChildRun, closing_notes, loadavg, note, own_peak_rss_mb, run_child

REPO = Path(__file__).resolve().parent.parent
CLI = REPO / "target" / "release" / "gpuscope"  # --cli overrides (a copy cannot change mid-run)
MB = 1 << 20
TARGET_MB_S = 100.0
SIDES = ("json", "text", "python", "floor")
LABELS = {
    "json": "gpuscope report --format json",
    "text": "gpuscope report --format text",
    "python": "python rival",
    "floor": "read floor (dd bs=1M)",
}
CHUNK = 50_000  # records or blocks per generator task


# --- the inputs --------------------------------------------------------------------------

MODULES = (
    "_points",
    "_scales",
    "_quaternions",
    "_sh_coordinates_dc",
    "_sh_coordinates_rest",
    "_opacities",
    "encoder",
    "(root)",
)
MODULE_SHARES = (0.05, 0.05, 0.065, 0.05, 0.70, 0.015, 0.06)  # "(root)" takes the rest
ENCODER_BYTES = 8192 * 4096 * 4  # encoder.weight, float32
FLOATS_PER_POINT = 59  # points 3, scales 3, quaternions 4, sh dc 3, sh rest 45, opacity 1
DEVICE_TOTAL = 25_757_220_864  # a 24 GB card
T0 = 1_769_608_925.0  # 2026-01-28 14:02:05 UTC

# One record, keys in the order MemoryProfiler writes them (json.dumps, compact).
JSONL_TEMPLATE = (
    '{"iteration":%d,"time":%r,"rank":0,"device":"cuda:0",'
    '"categories_bytes":{"parameters":%d,"gradients":%d,"optimizer_state":%d,'
    '"buffers":4194304,"activations":%d,"other":%d},'
    '"modules_bytes":{' + ",".join(f'"{m}":%d' for m in MODULES) + "},"
    '"dtypes_bytes":{"float32":%d,"float16":67108864,"int64":50331648,"bool":%d},'
    '"tensor_count":%d,"census_bytes":%d,'
    '"large_tensors":['
    '{"bytes":%d,"shape":[%d,15,3],"dtype":"float32","device":"cuda:0",'
    '"name":"_sh_coordinates_rest","category":"parameters"},'
    '{"bytes":%d,"shape":[%d,15,3],"dtype":"float32","device":"cuda:0",'
    '"name":"_sh_coordinates_rest.grad","category":"gradients"},'
    '{"bytes":%d,"shape":[%d,15,3],"dtype":"float32","device":"cuda:0",'
    '"name":"adam.exp_avg[_sh_coordinates_rest]","category":"optimizer_state"},'
    '{"bytes":%d,"shape":[%d,15,3],"dtype":"float32","device":"cuda:0",'
    '"name":"adam.exp_avg_sq[_sh_coordinates_rest]","category":"optimizer_state"},'
    '{"bytes":134217728,"shape":[8192,4096],"dtype":"float32","device":"cuda:0",'
    '"name":"encoder.weight","category":"parameters"}],'
    '"large_tensor_count":8,"large_tensor_bytes":%d,"large_threshold_bytes":104857600,'
    '"allocator":{"allocated_bytes":%d,"reserved_bytes":%d,"peak_allocated_bytes":%d,'
    '"peak_reserved_bytes":%d,"inactive_split_bytes":%d,"num_alloc_retries":%d,'
    '"num_ooms":0,"device_total_bytes":' + str(DEVICE_TOTAL) + ',"device_free_bytes":%d},'
    '"system":{"rss_bytes":%d,"heap_bytes":%d,"cpu_percent":%r,"ram_percent":%r},'
    '"losses":{"rendering":%r,"entropy":%r,"regularization":%r,"total":%r}}\n'
)


def jsonl_chunk(task: tuple[int, int, int, str]) -> str:
    """Writes records [start, start + n) of total to path; returns path."""
    import numpy as np

    start, n, total, path = task
    rng = np.random.default_rng(start)
    k = np.arange(start, start + n, dtype=np.int64)
    x = k / total  # progress through the run, 0..1
    points = (1_500_000 * (1 + 0.8 * x)).astype(np.int64) // 1000 * 1000
    sh_rest = points * 45 * 4
    params = points * FLOATS_PER_POINT * 4 + ENCODER_BYTES
    grads = params
    optim = 2 * params
    other = (36_000_000 + rng.normal(0, 400_000, n)).astype(np.int64)
    census = params + grads + optim + 4_194_304 + other
    acts = (900e6 * (1 + 0.05 * x) + rng.normal(0, 25e6, n)).clip(0).astype(np.int64)
    allocated = census + acts
    frag = 0.19 + 0.03 * x + rng.normal(0, 0.006, n)
    reserved = (allocated / (1 - frag) / (2 * MB)).astype(np.int64) * (2 * MB)
    reserved = np.maximum(reserved, allocated)
    module_total = params + grads + optim
    modules = [(module_total * s).astype(np.int64) for s in MODULE_SHARES]
    modules.append(module_total - sum(modules))
    bool_bytes = points
    float32 = census - 67_108_864 - 50_331_648 - bool_bytes
    losses = (
        0.02 + 0.1 * np.exp(-4 * x) + np.abs(rng.normal(0, 0.004, n)),
        0.01 * np.exp(-2 * x) + np.abs(rng.normal(0, 0.001, n)),
        0.001 + 0.0005 * x + np.abs(rng.normal(0, 0.0001, n)),
    )
    columns: list[list[Any]] = [
        (500 + 50 * k).tolist(),
        (T0 + 4.0 * k + rng.uniform(0, 0.05, n)).tolist(),
        params.tolist(),
        grads.tolist(),
        optim.tolist(),
        acts.tolist(),
        other.tolist(),
        *(m.tolist() for m in modules),
        float32.tolist(),
        bool_bytes.tolist(),
        (410 + (7 * x).astype(np.int64)).tolist(),
        census.tolist(),
    ]
    for _ in range(4):  # the four (N, 15, 3) large tensors
        columns += [sh_rest.tolist(), points.tolist()]
    columns += [
        (4 * sh_rest + 4 * ENCODER_BYTES).tolist(),
        allocated.tolist(),
        reserved.tolist(),
        (allocated + rng.integers(0, 300_000_000, n)).tolist(),
        (reserved + 2 * MB * rng.integers(0, 50, n)).tolist(),
        ((reserved - allocated) * rng.uniform(0.2, 0.4, n)).astype(np.int64).tolist(),
        (k // 100_000).tolist(),
        (DEVICE_TOTAL - reserved - 500_000_000).clip(0).tolist(),
        (6_200_000_000 + 1_000_000_000 * x + rng.normal(0, 5e6, n)).astype(np.int64).tolist(),
        (1_900_000_000 + rng.normal(0, 2e6, n)).astype(np.int64).tolist(),
        (99.0 + rng.uniform(0, 1, n)).tolist(),
        (25.0 + 4 * x + rng.normal(0, 0.05, n)).tolist(),
        *(loss.tolist() for loss in losses),
        (losses[0] + losses[1] + losses[2]).tolist(),
    ]
    with open(path, "w") as f:
        f.write("".join(JSONL_TEMPLATE % row for row in zip(*columns, strict=True)))
    return path


RULE = "=" * 80


def text_chunk(task: tuple[int, int, int, str]) -> str:
    """Writes tensor_profile_<ts>.log blocks [start, start + n) of total to path; returns path."""
    import random

    start, n, total, path = task
    rng = random.Random(start)
    t0 = datetime(2026, 1, 28, 14, 2, 5)
    out: list[str] = []
    for k in range(start, start + n):
        x = k / total
        points = int(1_500_000 * (1 + x)) // 10_000 * 10_000
        large = points * 45 * 4 / MB
        categories = {
            "parameters": round(1012.80 * (1 + x) + rng.gauss(0, 0.5), 2),
            "activations": round(900.0 * (1 + 0.04 * x) + rng.gauss(0, 15), 2),
            "gradients": round(0.34 * 1012.80 * (1 + x), 2) if k % 2 else 0.0,
            "other": round(35.0 + rng.gauss(0, 0.6), 2),
            "buffers": 0.0,
        }
        allocated = round(sum(categories.values()), 2)
        reserved = round(allocated * (1.24 + 0.02 * x + rng.gauss(0, 0.01)), 2)
        fragmentation = (reserved - allocated) / reserved * 100
        stamp = (t0 + timedelta(seconds=4 * k)).strftime("%Y-%m-%d %H:%M:%S")
        out.append(
            f"\n{RULE}\nIteration {500 + 50 * k} | {stamp}\n{RULE}\n"
            f"Total Tensors: {410 + int(7 * x)}\n"
            f"Allocated: {allocated:.2f} MB | Reserved: {reserved:.2f} MB | "
            f"Fragmentation: {fragmentation:.1f}%\n\nTensor Categories:\n"
        )
        for name, mb in sorted(categories.items(), key=lambda c: -c[1]):
            out.append(f"  {name:<15}: {mb:8.2f} MB\n")
        out.append(
            f"\nData Types:\n  {'float32':<15}: {allocated - 48:8.2f} MB\n"
            f"  {'int64':<15}: {48.0:8.2f} MB\n\nLarge Tensors (>100MB): 3\nTop 5 largest:\n"
        )
        shape = f"shape=({points}, 15, 3) | dtype=float32"
        out.append(f"  {large:8.2f} MB | {shape}\n" * 3)
    with open(path, "w") as f:
        f.write("".join(out))
    return path


def generate(
    path: Path, total: int, chunk: Callable[[tuple[int, int, int, str]], str], jobs: int
) -> None:
    """Writes path with chunk() in jobs processes, through a temporary name (a file that
    exists is complete)."""
    tasks = [
        (start, min(CHUNK, total - start), total, f"{path}.part{i:05d}")
        for i, start in enumerate(range(0, total, CHUNK))
    ]
    tmp = path.with_name(path.name + ".tmp")
    with Pool(jobs) as pool, open(tmp, "wb") as out:
        for part in pool.imap(chunk, tasks):
            with open(part, "rb") as f:
                shutil.copyfileobj(f, out, 16 * MB)
            os.remove(part)
    tmp.rename(path)


def inputs(data_dir: Path, records: int, blocks: int, jobs: int) -> dict[str, Path]:
    """The two input files in data_dir, generated first if missing."""
    jsonl = data_dir / f"jsonl-{records}" / "memory.jsonl"
    text = data_dir / f"text-{blocks}" / "tensor_profile_20260128_140205.log"
    for path, total, chunk in ((jsonl, records, jsonl_chunk), (text, blocks, text_chunk)):
        if path.exists():
            print(f"reusing {path}")
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        generate(path, total, chunk, jobs)
        print(f"generated {path} in {time.perf_counter() - t0:.1f} s ({jobs} processes)")
    return {"jsonl": jsonl, "text": text}


def check_disk(data_dir: Path, records: int, blocks: int) -> None:
    """Refuses to start when the inputs would not fit (nothing is reduced silently)."""
    need = records * 2000 + blocks * 800  # bytes per record / block, rounded up
    free = shutil.disk_usage(data_dir).free
    if free < need * 1.2:
        raise SystemExit(
            f"not enough disk in {data_dir}: the inputs need ~{need / MB:.0f} MB, "
            f"{free / MB:.0f} MB free (use --data-dir elsewhere, or smaller --records/--blocks)"
        )


# --- the rival: analyze_tensor_profile.py, from its documented output ---------------------

RE_ITERATION = re.compile(r"Iteration (\d+)")
RE_MEMORY = re.compile(
    r"Allocated: ([\d.]+) MB \| Reserved: ([\d.]+) MB \| Fragmentation: ([\d.]+)%"
)
RE_TOTAL = re.compile(r"Total Tensors: (\d+)")
RE_ENTRY = re.compile(r"\s+(\S+)\s*:\s+([\d.]+) MB")
RE_LARGE = re.compile(r"Large Tensors \(>([\d.]+)MB\): (\d+)")
RE_TOP = re.compile(r"\s+([\d.]+) MB \| shape=(\(.*\)) \| dtype=(\S+)")

Snapshot = dict[str, Any]


def parse_text_log(path: str) -> list[Snapshot]:
    """Every block of a tensor_profile_<ts>.log text log as a snapshot (MB figures, as printed)."""
    snapshots: list[Snapshot] = []
    snap: Snapshot | None = None
    section: str | None = None
    with open(path) as f:
        for line in f:
            if line.startswith("Iteration "):
                m = RE_ITERATION.match(line)
                assert m is not None
                snap = {
                    "iteration": int(m[1]),
                    "categories": {},
                    "dtypes": {},
                    "large_tensors": [],
                    "large_count": 0,
                }
                snapshots.append(snap)
                section = None
            elif snap is None or line.startswith("="):
                continue
            elif line.startswith("Total Tensors:"):
                m = RE_TOTAL.match(line)
                assert m is not None
                snap["tensors"] = int(m[1])
            elif line.startswith("Allocated:"):
                m = RE_MEMORY.match(line)
                assert m is not None
                snap["allocated"] = float(m[1])
                snap["reserved"] = float(m[2])
                snap["fragmentation"] = float(m[3])
            elif line.startswith("Tensor Categories:"):
                section = "categories"
            elif line.startswith("Data Types:"):
                section = "dtypes"
            elif line.startswith("Large Tensors"):
                m = RE_LARGE.match(line)
                assert m is not None
                snap["large_count"] = int(m[2])
                section = None
            elif line.startswith("Top "):
                section = "large_tensors"
            elif not line.strip():
                section = None
            elif section == "large_tensors":
                m = RE_TOP.match(line)
                if m:
                    snap["large_tensors"].append((float(m[1]), m[2], m[3]))
            elif section is not None:
                m = RE_ENTRY.match(line)
                if m:
                    snap[section][m[1]] = float(m[2])
    return snapshots


def parse_jsonl(path: str) -> list[Snapshot]:
    """Every record of a memory.jsonl as a snapshot (MB figures, like the text log's)."""
    snapshots: list[Snapshot] = []
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            alloc = r["allocator"] or {}
            allocated = alloc.get("allocated_bytes", r["census_bytes"])
            reserved = alloc.get("reserved_bytes", r["census_bytes"])
            snapshots.append(
                {
                    "iteration": r["iteration"],
                    "allocated": allocated / MB,
                    "reserved": reserved / MB,
                    "fragmentation": (reserved - allocated) / reserved * 100 if reserved else 0.0,
                    "census": r["census_bytes"] / MB,
                    "tensors": r["tensor_count"],
                    "categories": {
                        k: v / MB for k, v in r["categories_bytes"].items() if v is not None
                    },
                    "dtypes": {k: v / MB for k, v in r["dtypes_bytes"].items()},
                    "large_tensors": r["large_tensors"],
                    "large_count": r["large_tensor_count"],
                }
            )
    return snapshots


def change(label: str, start: str, end: str) -> str:
    return f"{label + ':':<26}Start: {start}  →  End: {end}"


def summary(snapshots: list[Snapshot]) -> str:
    """analyze_tensor_profile.py's "TENSOR PROFILING SUMMARY", as its guide shows it."""
    first, last = snapshots[0], snapshots[-1]
    lines = [
        "=" * 80,
        "TENSOR PROFILING SUMMARY",
        "=" * 80,
        "",
        f"Iteration Range: {first['iteration']} - {last['iteration']}",
        f"Total Snapshots: {len(snapshots)}",
        "",
        change("Memory Allocated", f"{first['allocated']:.1f} MB", f"{last['allocated']:.1f} MB"),
        change("Memory Reserved", f"{first['reserved']:.1f} MB", f"{last['reserved']:.1f} MB"),
        change("Fragmentation", f"{first['fragmentation']:.1f}%", f"{last['fragmentation']:.1f}%"),
        change("Total Tensors", str(first["tensors"]), str(last["tensors"])),
    ]
    total = last["allocated"] or 1.0
    for title, key in (("Tensor Categories", "categories"), ("Data Types", "dtypes")):
        lines += ["", f"{title} (at end):"]
        for name, mb in sorted(last[key].items(), key=lambda e: -e[1]):
            lines.append(f"  {name:<15}: {mb:8.1f} MB  ({mb / total * 100:5.1f}%)")
    lines += ["", f"Large Tensors (>100MB): {last['large_count']}"]
    return "\n".join(lines)


def figures(snap: Snapshot) -> dict[str, Any]:
    return {
        k: snap[k]
        for k in (
            "allocated",
            "reserved",
            "fragmentation",
            "tensors",
            "categories",
            "dtypes",
            "large_count",
        )
    }


def run_rival(kind: str, path: str) -> dict[str, Any]:
    """Child mode: the whole analysis (read, parse, summary) timed."""
    t0 = time.perf_counter()
    snapshots = parse_jsonl(path) if kind == "jsonl" else parse_text_log(path)
    text = summary(snapshots)
    seconds = time.perf_counter() - t0
    return {
        "analysis_s": seconds,
        "snapshots": len(snapshots),
        "iterations": [snapshots[0]["iteration"], snapshots[-1]["iteration"]],
        "start": figures(snapshots[0]),
        "end": figures(snapshots[-1]),
        "summary_lines": text.count("\n") + 1,
        "summary": text,
        "vmhwm_mb": own_peak_rss_mb(),
    }


# --- the runner ----------------------------------------------------------------------------


def command(side: str, kind: str, path: Path, cli: Path) -> list[str]:
    if side in ("json", "text"):
        return [str(cli), "report", "--format", side, "-o", "/dev/null", str(path)]
    if side == "python":
        return [sys.executable, __file__, "--side", f"rival-{kind}", "--path", str(path)]
    return ["dd", f"if={path}", "of=/dev/null", "bs=1M"]


def check(kind: str, path: Path, rival: dict[str, Any], cli: Path) -> str:
    """gpuscope's JSON (untimed run into a file) against the rival's figures."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        run_child([str(cli), "report", "--format", "json", "-o", out.name, str(path)])
        with open(out.name) as f:
            run = json.load(f)["runs"][0]
    # The text log prints MB with 2 decimals (fragmentation with 1): compare as printed.
    digits, frag_tol = (2, 0.051) if kind == "text" else (9, 1e-9)

    def mb(value: int | None) -> float:
        return round((value or 0) / MB, digits)

    bad = []
    if run["records"] != rival["snapshots"]:
        bad.append(f"records {run['records']} vs {rival['snapshots']}")
    if run["iterations"] != rival["iterations"]:
        bad.append(f"iterations {run['iterations']} vs {rival['iterations']}")
    for which in ("start", "end"):
        g, r = run[which], rival[which]
        pairs = [
            ("allocated", mb(g["allocated_bytes"]), round(r["allocated"], digits)),
            ("reserved", mb(g["reserved_bytes"]), round(r["reserved"], digits)),
            ("tensors", g["tensor_count"], r["tensors"]),
            ("large tensors", g["large_tensor_count"], r["large_count"]),
        ]
        for table, key in (("categories_bytes", "categories"), ("dtypes_bytes", "dtypes")):
            mine = {k: mb(v) for k, v in g[table].items() if v}
            theirs = {k: round(v, digits) for k, v in r[key].items() if v}
            pairs.append((table, mine, theirs))
        bad += [f"{which} {name}: {a} vs {b}" for name, a, b in pairs if a != b]
        if abs(g["fragmentation_percent"] - r["fragmentation"]) > frag_tol:
            bad.append(
                f"{which} fragmentation {g['fragmentation_percent']} vs {r['fragmentation']}"
            )
    if bad:
        raise SystemExit(f"{path.name}: gpuscope and the rival disagree: " + "; ".join(bad))
    return (
        f"{kind}: gpuscope and the rival agree on {run['records']} records, iterations "
        f"{run['iterations'][0]}-{run['iterations'][1]}, start/end allocated, reserved, "
        f"fragmentation, tensors, categories, dtypes, large tensors"
    )


Runs = dict[str, list[tuple[ChildRun, float]]]  # per side: (child, its CPU seconds)


def measure(kind: str, path: Path, repeat: int, cli: Path) -> tuple[Runs, list[Any]]:
    """Every side repeat times, interleaved. CPU seconds (user + system, all threads) are
    the growth of RUSAGE_CHILDREN around the child: /usr/bin/time waits for the side, so
    the side's figures land there too (time's own are a millisecond)."""
    runs: Runs = {s: [] for s in SIDES}
    rival: list[Any] = []
    for _ in range(repeat):
        for side in SIDES:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            child = run_child(command(side, kind, path, cli))
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            runs[side].append((child, cpu))
            if side == "python":
                rival.append(json.loads(child.stdout.strip().splitlines()[-1]))
    return runs, rival


def print_table(kind: str, path: Path, runs: Runs, rival: list[Any], repeat: int) -> None:
    """The table for one input."""
    size = path.stat().st_size / MB
    count = f"{rival[0]['snapshots']:,} {'records' if kind == 'jsonl' else 'blocks'}"
    print(f"-- {path.name}: {count}, {size:.1f} MB")
    print(
        f"{'side':<29} {'best s':>7} {'median s':>8} {'cpu s':>7} {'MB/s':>6} "
        f"{'RSS MB':>7} {'x json':>6}"
    )
    med = {s: statistics.median(c.wall_s for c, _ in runs[s]) for s in SIDES}
    for s in SIDES:
        best = min(c.wall_s for c, _ in runs[s])
        cpu = statistics.median(t for _, t in runs[s])
        rss = max(c.peak_rss_mb for c, _ in runs[s])
        label = LABELS[s] + (" (json.loads)" if s == "python" and kind == "jsonl" else "")
        print(
            f"{label:<29} {best:>7.3f} {med[s]:>8.3f} {cpu:>7.3f} {size / med[s]:>6.1f} "
            f"{rss:>7.1f} {med[s] / med['json']:>5.2f}x"
        )
    inside = statistics.median(r["analysis_s"] for r in rival)
    note(
        f"(each side: {repeat} child processes, interleaved; s = child wall time, best and "
        f"median; cpu s = user + system time of all its threads, median; MB/s = input size "
        f"/ median s; RSS MB = largest peak RSS; x json = median s / json's; the rival's "
        f"own timer around read + parse + summary, without interpreter start-up: "
        f"{inside:.3f} s median)"
    )


def run_all(args: argparse.Namespace) -> None:
    cli = Path(args.cli)
    if not cli.exists():
        raise SystemExit(f"{cli} missing: cargo build --release -p gpuscope-cli")
    t_start = time.perf_counter()
    load_before = loadavg()
    own_data = args.data_dir is None
    data_dir = Path(args.data_dir or tempfile.mkdtemp(prefix="gpuscope-bench-report-"))
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        check_disk(data_dir, args.records, args.blocks)
        paths = inputs(data_dir, args.records, args.blocks, args.jobs)
        for kind, path in paths.items():
            print(f"input {kind}: {path.stat().st_size / MB:.1f} MB ({path})")
        note(
            f"gpuscope report throughput; binary {cli} (modified "
            f"{datetime.fromtimestamp(cli.stat().st_mtime):%Y-%m-%d %H:%M:%S}, "
            f"{cli.stat().st_size:,} bytes); python {sys.version.split()[0]}; "
            f"load average {load_before} before starting"
        )
        verdicts, checks, children = [], [], []
        for kind, path in paths.items():
            runs, rival = measure(kind, path, args.repeat, cli)
            checks.append(check(kind, path, rival[0], cli))
            print_table(kind, path, runs, rival, args.repeat)
            children += [c for side in SIDES for c, _ in runs[side]]
            walls = {s: [c.wall_s for c, _ in runs[s]] for s in SIDES}
            med = {s: statistics.median(walls[s]) for s in SIDES}
            rss = {s: max(c.peak_rss_mb for c, _ in runs[s]) for s in SIDES}
            size = path.stat().st_size / MB
            slowest_mb_s = size / max(walls["json"])
            verdicts.append(
                f"{kind}: gpuscope report --format json {size / min(walls['json']):.1f} MB/s "
                f"best, {size / med['json']:.1f} median, {slowest_mb_s:.1f} slowest run; "
                f"target >= {TARGET_MB_S:.0f} MB/s (slowest run): "
                f"{'met' if slowest_mb_s >= TARGET_MB_S else 'MISSED'}; python rival / "
                f"gpuscope: {med['python'] / med['json']:.1f}x time, peak RSS "
                f"{rss['python']:.0f} MB vs {rss['json']:.0f} MB"
            )
            if args.show_summaries:
                print(rival[0]["summary"])
            print()
    finally:
        if own_data:
            shutil.rmtree(data_dir, ignore_errors=True)
    closing_notes(children, checks + verdicts, t_start)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int, default=1_000_000, help="JSONL memory records")
    p.add_argument(
        "--blocks", type=int, default=200_000, help="tensor_profile_<ts>.log text-log blocks"
    )
    p.add_argument("--repeat", type=int, default=3, help="child processes per side")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="generator processes")
    p.add_argument("--cli", default=str(CLI), help="the gpuscope binary (default: %(default)s)")
    p.add_argument("--data-dir", help="keep/reuse the inputs here (default: a temp dir)")
    p.add_argument("--show-summaries", action="store_true", help="print the rival's summaries")
    p.add_argument("--side", choices=("rival-jsonl", "rival-text"), help="child mode")
    p.add_argument("--path", help="child mode: the input file")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    if args.side:
        result = run_rival(args.side.removeprefix("rival-"), args.path)
        print(json.dumps(result), flush=True)
        os._exit(0)  # skip interpreter teardown (freeing every snapshot); nothing left open
    else:
        run_all(args)


if __name__ == "__main__":
    main()
