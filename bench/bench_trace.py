#!/usr/bin/env python
"""``gpuscope trace --format json`` vs Holistic Trace Analysis, and on a synthetic 1 GiB trace.

Issue #5. Two parts, every side in its own child process (``_measure.run_child``):

1. The two largest shared traces (``rank0_nccl_negative_queue.json.gz``, 25.8 MB
   uncompressed, and ``v100_rank0_ns_resolution.json.gz``, 15.4 MB), ``--repeat`` times
   (default 5), interleaved:

   * gpuscope  ``gpuscope trace FILE --format json -o /dev/null`` (the exact clock, default)
   * compat    the same with ``--hta-compat`` (times rounded as HTA rounds them)
   * hta       a Python script in HTA's own venv: ``TraceAnalysis(trace_dir=d)``, then
               ``get_temporal_breakdown(visualize=False)`` and
               ``get_gpu_kernel_breakdown(visualize=False)``; ``d`` is a temporary directory
               holding a symlink to the one trace. The whole child is timed (interpreter
               start-up and imports included); it also reports its own timer around the
               import, the parse (the constructor) and the two analyses
   * gzip      ``gzip -dc FILE > /dev/null``: the floor, decompressing the bytes

   Targets: HTA / gpuscope wall time >= 30x, peak RSS gpuscope / HTA <= 1/4, gpuscope
   within 2x of ``gzip -dc``. Ratio verdicts use the worst case (fastest run of the
   side in the denominator against the slowest of the other), as the TensorBoard
   benchmarks do; the medians are printed beside them.

2. A synthetic trace of at least ``--synthetic-gib`` GiB (default 1): the traceEvents of
   ``rank0_nccl_negative_queue`` repeated, each repeat's timestamps shifted by the
   trace's span (rounded up to the millisecond), its correlation / External id / flow
   ids by 1,000,000 and its ``ProfilerStep#N`` numbers by the number of steps, so that
   every copy is a distinct stretch of the same run; the metadata events, the
   profiler's span and its two instant events appear once. Written uncompressed
   (``.json``) and gzipped (``.json.gz``, ``gzip -6``, gzip's default level) into a
   temporary directory, never under the repository. Measured ``--repeat-big`` times
   (default 3): gpuscope on both files, ``dd bs=1M`` and ``gzip -dc`` as floors.
   Targets: < 10 s and < 500 MB peak RSS (slowest run, largest RSS). HTA runs on it
   once (``.json.gz``) only when its estimate -- HTA's peak RSS and median time on the
   source trace times the size ratio -- fits in ``--hta-big-max-s`` (600 s) and in
   memory (20 GiB, or what the machine has available less 2 GiB), and then under that
   time and address-space limit, so that it fails rather than starve other processes.

Before any time is printed, HTA's temporal breakdown (idle, compute, non-compute,
kernel time) must agree with ``gpuscope trace --hta-compat --format json`` to 0.5 % or
1 us (an untimed run of each); the kernel-type sums are compared and printed too.

HTA lives in its own venv outside the repository (default
``~/.cache/gpuscope-bench/hta-venv``; ``bench/run.sh`` creates it, and so does this script
when it is missing). The gpuscope binary is copied into the temporary directory first,
so that a rebuild by someone else cannot swap it in the middle of a run.

MB = 2^20 bytes, as everywhere in gpuscope; "uncompressed MB" in the issue are 10^6.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from _measure import (
    ChildRun,
    closing_notes,
    last_json,
    loadavg,
    measure,
    note,
    own_peak_rss_mb,
    run_child,
    side_table,
    timed,
    verdict,
)

REPO = Path(__file__).resolve().parent.parent
CLI = REPO / "target" / "release" / "gpuscope"
SHARED = REPO.parent / "shared" / "data" / "traces"
TRACES = ("rank0_nccl_negative_queue.json.gz", "v100_rank0_ns_resolution.json.gz")
HTA_VENV = Path.home() / ".cache" / "gpuscope-bench" / "hta-venv"
HTA_PACKAGE = "HolisticTraceAnalysis==0.5.0"  # the version gpuscope's --hta-compat follows
MB = 1 << 20
GIB = 1 << 30
GZIP_LEVEL = 6
ID_STRIDE = 1_000_000  # added to correlation / External id / flow ids per repeat

TARGET_HTA_RATIO = 30.0
TARGET_RSS_RATIO = 0.25
TARGET_GZIP_RATIO = 2.0
TARGET_BIG_S = 10.0
TARGET_BIG_MB = 500.0

REAL_SIDES = ("gpuscope", "compat", "hta", "gzip")
BIG_SIDES = ("json", "gz", "dd", "gzip")
LABELS = {
    "gpuscope": "gpuscope trace --format json",
    "compat": "gpuscope ... --hta-compat",
    "hta": "HTA temporal + kernel breakdown",
    "gzip": "floor: gzip -dc > /dev/null",
    "json": "gpuscope trace .json",
    "gz": "gpuscope trace .json.gz",
    "dd": "floor: dd .json bs=1M",
}
TEMPORAL = (  # gpuscope's key, HTA's column
    ("idle_time_us", "idle_time(us)"),
    ("compute_time_us", "compute_time(us)"),
    ("non_compute_time_us", "non_compute_time(us)"),
    ("kernel_time_us", "kernel_time(us)"),
)


# --- child modes -----------------------------------------------------------------------


def run_hta(trace_dir: str) -> dict[str, Any]:
    """Child mode, in HTA's venv: parse the directory's one trace, then the temporal and
    the kernel breakdown, as a user's script would."""
    t0 = time.perf_counter()
    from hta.trace_analysis import TraceAnalysis

    t1 = time.perf_counter()
    analysis = TraceAnalysis(trace_dir=trace_dir)
    t2 = time.perf_counter()
    temporal = analysis.get_temporal_breakdown(visualize=False)
    kernel_types, _kernels = analysis.get_gpu_kernel_breakdown(visualize=False)
    t3 = time.perf_counter()
    row = temporal.iloc[0]
    import hta
    import pandas

    return {
        "import_s": t1 - t0,
        "parse_s": t2 - t1,
        "analyses_s": t3 - t2,
        "temporal": {hta_col: float(row[hta_col]) for _, hta_col in TEMPORAL},
        "kernel_types": {
            str(r["kernel_type"]): float(r["sum"]) for _, r in kernel_types.iterrows()
        },
        "versions": f"HTA {getattr(hta, '__version__', '?')}, pandas {pandas.__version__}",
        "vmhwm_mb": own_peak_rss_mb(),
    }


def synthesize(source: str, out_json: str, out_gz: str, target_bytes: int) -> dict[str, Any]:
    """Child mode: the synthetic trace (see the module's docstring), written to out_json
    and, through ``gzip -6`` on the other core, to out_gz."""
    import gzip

    with gzip.open(source, "rb") as f:
        doc = json.load(f)
    events: list[dict[str, Any]] = doc.pop("traceEvents")
    once = [e for e in events if e.get("ph") in ("M", "i") or e.get("cat") == "Trace"]
    body = [e for e in events if not (e.get("ph") in ("M", "i") or e.get("cat") == "Trace")]
    if not all(isinstance(e.get("ts"), int) for e in body):
        # Shifting fractional-us floats would change their digits: keep the copy exact.
        raise SystemExit(f"{source}: the synthetic trace needs integer timestamps")
    lo = min(e["ts"] for e in body)
    hi = max(e["ts"] + e.get("dur", 0) for e in body)
    shift = -(-(hi - lo) // 1000) * 1000  # span rounded up to the ms (integer-us trace)
    step_re = re.compile(r"ProfilerStep#(\d+)$")
    steps = [int(m[1]) for e in body if (m := step_re.match(e.get("name", "")))]
    n_steps = max(steps) - min(steps) + 1
    plan = []  # per event: its base ts, ids, step number
    for e in body:
        args = e.get("args") or {}
        m = step_re.match(e.get("name", ""))
        plan.append(
            (
                e,
                e["ts"],
                args.get("correlation"),
                args.get("External id"),
                e.get("id"),
                int(m[1]) if m else None,
            )
        )
    dumps = json.JSONEncoder(separators=(", ", ": ")).encode

    def repeat(k: int) -> str:
        dt, di = k * shift, k * ID_STRIDE
        for e, ts, corr, ext, fid, step in plan:
            e["ts"] = ts + dt
            if corr is not None:
                e["args"]["correlation"] = corr + di
            if ext is not None:
                e["args"]["External id"] = ext + di
            if fid is not None:
                e["id"] = fid + di
            if step is not None:
                e["name"] = f"ProfilerStep#{step + k * n_steps}"
        return ",\n  ".join(map(dumps, body))

    header = "{\n" + "".join(f'  "{k}": {json.dumps(v)},\n' for k, v in doc.items())
    per_repeat = len(repeat(0)) + 4
    repeats = max(1, math.ceil((target_bytes - len(header)) / per_repeat))
    for e in once:  # the profiler's span covers every repeat; its window ends at the last
        if e.get("cat") == "Trace":
            e["dur"] += (repeats - 1) * shift
        elif e.get("name") == "Record Window End":
            e["ts"] += (repeats - 1) * shift
    head = header + '  "traceEvents": [\n  ' + ",\n  ".join(map(dumps, once))
    with open(out_gz, "wb") as gz_file:
        gz = subprocess.Popen(
            ["gzip", f"-{GZIP_LEVEL}", "-c"], stdin=subprocess.PIPE, stdout=gz_file
        )
        assert gz.stdin is not None
        with open(out_json, "wb") as f:

            def write(text: str) -> None:
                data = text.encode()
                f.write(data)
                gz.stdin.write(data)  # type: ignore[union-attr]

            write(head)
            for k in range(repeats):
                write(",\n  " + repeat(k))
            write("\n]\n}\n")
        gz.stdin.close()
        if gz.wait() != 0:
            raise SystemExit("gzip failed")
    return {
        "repeats": repeats,
        "shift_us": shift,
        "steps_per_repeat": n_steps,
        "events": len(once) + repeats * len(body),
        "duration_events": sum(e.get("ph") == "X" for e in once)
        + repeats * sum(e.get("ph") == "X" for e in body),
    }


# --- the runner ------------------------------------------------------------------------


def ensure_hta_venv(venv: Path) -> Path:
    """The venv's python; the venv is created (HTA from PyPI) when missing."""
    python = venv / "bin" / "python"
    ok = (
        python.exists()
        and subprocess.run([python, "-c", "import hta"], check=False).returncode == 0
    )
    if not ok:
        note(f"creating HTA's venv: {sys.executable} -m venv {venv}; pip install {HTA_PACKAGE}")
        venv.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "--quiet", HTA_PACKAGE]
        subprocess.run(pip, check=True)
    return python


def gpuscope_cmd(cli: Path, path: Path, *extra: str, out: str = "/dev/null") -> list[str]:
    return [str(cli), "trace", str(path), "--format", "json", "-o", out, *extra]


def shell(script: str, path: Path) -> list[str]:
    return ["sh", "-c", script, "sh", str(path)]


def hta_cmd(hta_python: Path, trace_dir: Path) -> list[str]:
    return [str(hta_python), __file__, "--side", "hta", "--path", str(trace_dir)]


def hta_dir(tmp: Path, trace: Path) -> Path:
    """A directory holding only a symlink to trace (TraceAnalysis takes a directory)."""
    d = tmp / f"hta-{trace.name}"
    d.mkdir(exist_ok=True)
    link = d / trace.name
    if not link.exists():
        link.symlink_to(trace.resolve())
    return d


def agree(a: float, b: float) -> bool:
    return abs(a - b) <= max(1.0, 0.005 * abs(b))


def compare(gpuscope: dict[str, Any], hta: dict[str, Any], name: str) -> tuple[bool, list[str]]:
    """HTA's temporal breakdown against gpuscope --hta-compat's (to 0.5 % or 1 us); the
    kernel-type sums beside it. Returns (temporal agrees, lines to print)."""
    rank = gpuscope["ranks"][0]
    ok = True
    lines = [
        f"{name}: HTA against gpuscope --hta-compat (untimed runs)",
        f"  {'temporal breakdown, us':<30} {'gpuscope':>20} {'HTA':>12}  agree",
    ]
    for ours, theirs in TEMPORAL:
        a, b = rank["temporal"][ours], hta["temporal"][theirs]
        ok &= agree(a, b)
        lines.append(f"  {theirs:<30} {a:>20,.0f} {b:>12,.0f}  {'yes' if agree(a, b) else 'NO'}")
    mine = {k["kernel_type"]: k["sum_us"] for k in rank["kernel_types"]}
    lines.append("  kernel type sums, us")
    for kind in sorted(set(mine) | set(hta["kernel_types"])):
        a, b = mine.get(kind, 0.0), hta["kernel_types"].get(kind, 0.0)
        label = kind if len(kind) <= 36 else kind[:35] + "~"
        lines.append(f"  {label:<36} {a:>14,.0f} {b:>12,.0f}  {'yes' if agree(a, b) else 'NO'}")
    return ok, lines


def check(
    cli: Path, trace: Path, hta_python: Path, tmp: Path, name: str
) -> tuple[dict[str, Any], list[str]]:
    """Untimed runs of gpuscope --hta-compat (into a file) and of HTA; exits on a
    disagreement of the temporal breakdown. Returns HTA's result and the comparison."""
    out = tmp / f"check-{name}.json"
    run_child(gpuscope_cmd(cli, trace, "--hta-compat", out=str(out)))
    gpuscope = json.loads(out.read_text())
    hta = last_json(run_child(hta_cmd(hta_python, hta_dir(tmp, trace))))
    ok, lines = compare(gpuscope, hta, name)
    for line in lines:
        print(line)
    if not ok:
        raise SystemExit(f"{name}: HTA and gpuscope --hta-compat disagree (see above)")
    return hta, lines


def real_trace(
    trace: Path, cli: Path, hta_python: Path, tmp: Path, repeat: int
) -> tuple[list[str], list[ChildRun], dict[str, Any]]:
    name = trace.name.removesuffix(".json.gz")
    hta_check, _ = check(cli, trace, hta_python, tmp, name)
    cmds = {
        "gpuscope": gpuscope_cmd(cli, trace),
        "compat": gpuscope_cmd(cli, trace, "--hta-compat"),
        "hta": hta_cmd(hta_python, hta_dir(tmp, trace)),
        "gzip": shell('exec gzip -dc "$1" > /dev/null', trace),
    }
    runs = measure(cmds, repeat)
    import gzip

    with gzip.open(trace, "rb") as f:
        raw = len(f.read())
    note(
        f"-- {trace.name}: {trace.stat().st_size / MB:.1f} MB gzipped, "
        f"{raw / MB:.1f} MB ({raw / 1e6:.1f} MB decimal) uncompressed"
    )
    s = side_table(runs, LABELS, "gpuscope")
    inside = [last_json(c) for c, _ in runs["hta"]]
    med = {
        k: statistics.median(r[k] for r in inside) for k in ("import_s", "parse_s", "analyses_s")
    }
    note(
        f"({repeat} child processes per side, interleaved; s = child wall time, best and "
        f"median; cpu s = user + system of all threads, median; RSS MB = largest peak RSS; "
        f"x gpuscope = median s / gpuscope's. HTA's own timer, medians: import "
        f"{med['import_s']:.3f} s, parse {med['parse_s']:.3f} s, analyses "
        f"{med['analyses_s']:.3f} s; parse + analyses {med['parse_s'] + med['analyses_s']:.3f} "
        f"s; {inside[0]['versions']})"
    )
    print()
    g, h, z = s["gpuscope"], s["hta"], s["gzip"]
    hta_worst = h["best"] / g["slowest"]
    inproc = (med["parse_s"] + med["analyses_s"]) / g["median"]
    rss_ratio = g["rss"] / h["rss"]
    gz_worst = g["slowest"] / z["best"]
    time_line = (
        f"{name}: HTA / gpuscope wall time {h['median'] / g['median']:.1f}x median, "
        f"{hta_worst:.1f}x worst case (fastest HTA / slowest gpuscope); target >= "
        f"{TARGET_HTA_RATIO:.0f}x (worst case): {verdict(hta_worst >= TARGET_HTA_RATIO)}; "
        f"HTA's in-process parse + analyses alone / gpuscope: {inproc:.1f}x median"
    )
    rss_line = (
        f"{name}: peak RSS gpuscope / HTA = {g['rss']:.1f} / {h['rss']:.1f} MB = "
        f"{rss_ratio:.3f} (1/{1 / rss_ratio:.1f}); target <= 1/4: "
        f"{verdict(rss_ratio <= TARGET_RSS_RATIO)}"
    )
    gzip_line = (
        f"{name}: gpuscope / gzip -dc wall time {g['median'] / z['median']:.2f}x median, "
        f"{gz_worst:.2f}x worst case (slowest gpuscope / fastest gzip); target <= "
        f"{TARGET_GZIP_RATIO:.0f}x (worst case): {verdict(gz_worst <= TARGET_GZIP_RATIO)}; "
        f"cpu time {g['cpu'] / z['cpu']:.2f}x median"
    )
    lines = [time_line, rss_line, gzip_line]
    children = [c for side in runs.values() for c, _ in side]
    return lines, children, {"hta": h, "hta_check": hta_check, "raw_bytes": raw}


def synthetic(
    args: argparse.Namespace,
    cli: Path,
    hta_python: Path,
    tmp: Path,
    data_dir: Path,
    source_stats: dict[str, Any],
) -> tuple[list[str], list[ChildRun]]:
    source = Path(args.synthetic_source)
    target = int(args.synthetic_gib * GIB)
    out_json = data_dir / f"synthetic-{args.synthetic_gib:g}gib.json"
    out_gz = data_dir / f"synthetic-{args.synthetic_gib:g}gib.json.gz"
    meta_path = data_dir / f"synthetic-{args.synthetic_gib:g}gib.meta.json"
    if meta_path.exists() and out_json.exists() and out_gz.exists():
        note(f"reusing {out_json} and {out_gz}")
        meta = json.loads(meta_path.read_text())
    else:
        free = shutil.disk_usage(data_dir).free
        if free < 1.3 * target:
            raise SystemExit(
                f"{data_dir}: {free / GIB:.1f} GiB free, need ~{1.3 * target / GIB:.1f}"
            )
        t0 = time.perf_counter()
        cmd = [sys.executable, __file__, "--side", "synth", "--path", str(source)]
        cmd += ["--out", str(out_json), "--target-bytes", str(target)]
        meta = last_json(run_child(cmd))
        meta["generation_s"] = time.perf_counter() - t0
        meta_path.write_text(json.dumps(meta))
    note(
        f"synthetic trace: {meta['repeats']} repeats of {source.name} (timestamps shifted "
        f"by {meta['shift_us']:,} us, {meta['steps_per_repeat']} profiler steps each), "
        f"{meta['events']:,} events ({meta['duration_events']:,} with a duration); "
        f"{out_json.stat().st_size / MB:,.1f} MB (.json), {out_gz.stat().st_size / MB:,.1f} "
        f"MB (.json.gz, gzip -{GZIP_LEVEL}); generated in "
        f"{meta.get('generation_s', float('nan')):.0f} s"
    )
    # Check: gpuscope reads every duration event of both files, and the same figures.
    summaries = []
    for path in (out_json, out_gz):
        out = tmp / f"check-{path.name}.out.json"
        run_child(gpuscope_cmd(cli, path, out=str(out)))
        rank = json.loads(out.read_text())["ranks"][0]
        summaries.append(
            (rank["events"], rank["dropped"], rank["temporal"], rank["last_step_left_out"])
        )
    if summaries[0] != summaries[1] or summaries[0][0] != meta["duration_events"]:
        raise SystemExit(f"synthetic: unexpected gpuscope output {summaries}")
    note(
        f"synthetic: gpuscope reads {summaries[0][0]:,} duration events from each file "
        f"(as written), nothing dropped, the same temporal breakdown from both; last step "
        f"left out: {summaries[0][3]}"
    )
    cmds = {
        "json": gpuscope_cmd(cli, out_json),
        "gz": gpuscope_cmd(cli, out_gz),
        "dd": ["dd", f"if={out_json}", "of=/dev/null", "bs=1M"],
        "gzip": shell('exec gzip -dc "$1" > /dev/null', out_gz),
    }
    runs = measure(cmds, args.repeat_big)
    print(f"-- synthetic trace, {out_json.stat().st_size / MB:,.1f} MB uncompressed")
    s = side_table(runs, LABELS, "json")
    note(
        f"({args.repeat_big} child processes per side, interleaved; columns as above; "
        f"x gpuscope = median s / gpuscope .json's)"
    )
    lines = []
    for side, floor in (("json", "dd"), ("gz", "gzip")):
        st = s[side]
        lines.append(
            f"synthetic {LABELS[side]}: {st['best']:.2f} s best, {st['median']:.2f} median, "
            f"{st['slowest']:.2f} slowest, {st['cpu']:.2f} s CPU; target < "
            f"{TARGET_BIG_S:.0f} s (slowest): {verdict(st['slowest'] < TARGET_BIG_S)}; peak "
            f"RSS {st['rss']:.1f} MB, target < {TARGET_BIG_MB:.0f} MB: "
            f"{verdict(st['rss'] < TARGET_BIG_MB)}; {st['median'] / s[floor]['median']:.2f}x "
            f"the floor ({LABELS[floor].removeprefix('floor: ')}, medians)"
        )
    children = [c for side in runs.values() for c, _ in side]
    lines += hta_on_synthetic(args, cli, hta_python, tmp, out_gz, s["gz"], source_stats)
    return lines, children


def mem_available() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def hta_on_synthetic(
    args: argparse.Namespace,
    cli: Path,
    hta_python: Path,
    tmp: Path,
    gz: Path,
    ours: dict[str, float],
    source_stats: dict[str, Any],
) -> list[str]:
    """HTA once on the synthetic .json.gz when its estimate fits; else why not."""
    factor = gz.with_name(gz.name.removesuffix(".gz")).stat().st_size / source_stats["raw_bytes"]
    est_mb = source_stats["hta"]["rss"] * factor
    est_s = source_stats["hta"]["median"] * factor
    limit = min(20 * GIB, mem_available() - 2 * GIB)
    estimate = (
        f"estimate from the source trace x {factor:.1f} (size ratio): {est_s:.0f} s, "
        f"{est_mb / 1024:.1f} GiB peak RSS; limits {args.hta_big_max_s:.0f} s, "
        f"{limit / GIB:.1f} GiB (20 GiB or MemAvailable - 2 GiB)"
    )
    if args.hta_big == "skip":
        return [f"synthetic HTA: skipped (--hta-big skip); {estimate}"]
    if args.hta_big == "auto" and (est_s > args.hta_big_max_s or est_mb * MB > limit):
        return [f"synthetic HTA: skipped, the estimate does not fit; {estimate}"]
    note(f"synthetic: running HTA once on {gz.name}; {estimate}")
    wrapped = [
        "timeout",
        str(int(args.hta_big_max_s)),
        "sh",
        "-c",
        f'ulimit -v {limit // 1024}; exec "$@"',
        "sh",
        *hta_cmd(hta_python, hta_dir(tmp, gz)),
    ]
    try:
        child, cpu = timed(wrapped)
    except SystemExit as failure:
        first = str(failure).strip().splitlines()
        tail = " / ".join(first[-3:])
        failed = (
            f"synthetic HTA: did not finish within {args.hta_big_max_s:.0f} s and "
            f"{limit / GIB:.1f} GiB of address space ({tail}); {estimate}"
        )
        return [failed]
    result = last_json(child)
    out = tmp / "check-synthetic-compat.json"
    run_child(gpuscope_cmd(cli, gz, "--hta-compat", out=str(out)))
    ok, lines = compare(json.loads(out.read_text()), result, "synthetic")
    for line in lines:
        print(line)
    done = (
        f"synthetic HTA (once, .json.gz): {child.wall_s:.1f} s wall ({cpu:.1f} s CPU; "
        f"import {result['import_s']:.1f} s, parse {result['parse_s']:.1f} s, analyses "
        f"{result['analyses_s']:.1f} s), peak RSS {child.peak_rss_mb:,.0f} MB; HTA / "
        f"gpuscope .json.gz: {child.wall_s / ours['median']:.1f}x time (gpuscope median), "
        f"RSS gpuscope / HTA {ours['rss'] / child.peak_rss_mb:.4f}; temporal breakdown "
        f"agrees with --hta-compat: {'yes' if ok else 'NO'}; {estimate}"
    )
    return [done]


def run_all(args: argparse.Namespace) -> None:
    t_start = time.perf_counter()
    load_before = loadavg()
    source_cli = Path(args.cli)
    if not source_cli.exists():
        raise SystemExit(f"{source_cli} missing: cargo build --release -p gpuscope-cli")
    hta_python = ensure_hta_venv(Path(args.hta_venv))
    traces = [Path(t) for t in args.traces]
    own_data = args.data_dir is None
    tmp = Path(tempfile.mkdtemp(prefix="gpuscope-bench-trace-"))
    data_dir = Path(args.data_dir) if args.data_dir else tmp
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        cli = tmp / "gpuscope"
        shutil.copy2(source_cli, cli)
        note(
            f"gpuscope trace vs HTA; binary {source_cli} copied to {cli} (modified "
            f"{datetime.fromtimestamp(source_cli.stat().st_mtime):%Y-%m-%d %H:%M:%S}, "
            f"{cli.stat().st_size:,} bytes); python {sys.version.split()[0]}; HTA venv "
            f"{args.hta_venv}; load average {load_before} before starting"
        )
        checks, verdicts, children = [], [], []
        source_stats: dict[str, Any] | None = None
        for trace in traces:
            lines, kids, stats = real_trace(trace, cli, hta_python, tmp, args.repeat)
            verdicts += lines
            children += kids
            if trace.resolve() == Path(args.synthetic_source).resolve():
                source_stats = stats
            checks.append(
                f"{trace.name}: HTA's temporal breakdown agrees with gpuscope --hta-compat "
                f"(0.5 % or 1 us)"
            )
        if args.synthetic_gib > 0:
            if source_stats is None:
                raise SystemExit("--synthetic-source must be one of the measured traces")
            lines, kids = synthetic(args, cli, hta_python, tmp, data_dir, source_stats)
            verdicts += lines
            children += kids
            print()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if not own_data:
            note(f"kept the synthetic inputs in {data_dir}")
    closing_notes(children, checks + verdicts, t_start)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--traces", nargs="+", default=[str(SHARED / t) for t in TRACES])
    p.add_argument("--repeat", type=int, default=5, help="child processes per side, real traces")
    p.add_argument("--repeat-big", type=int, default=3, help="the same, synthetic trace")
    p.add_argument("--cli", default=str(CLI), help="the gpuscope binary (default: %(default)s)")
    p.add_argument("--hta-venv", default=str(HTA_VENV), help="HTA's venv (default: %(default)s)")
    p.add_argument("--synthetic-source", default=str(SHARED / TRACES[0]))
    p.add_argument("--synthetic-gib", type=float, default=1.0, help="0: no synthetic trace")
    p.add_argument("--data-dir", help="keep/reuse the synthetic trace here (default: a temp dir)")
    p.add_argument(
        "--hta-big",
        choices=("auto", "run", "skip"),
        default="auto",
        help="HTA on the synthetic trace: when its estimate fits (auto), always, never",
    )
    p.add_argument("--hta-big-max-s", type=float, default=600.0)
    p.add_argument("--side", choices=("hta", "synth"), help="child mode")
    p.add_argument("--path", help="child mode: the trace directory (hta) or source (synth)")
    p.add_argument("--out", help="child mode synth: the .json to write (.json.gz beside it)")
    p.add_argument("--target-bytes", type=int, help="child mode synth: at least this size")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    if args.side == "hta":
        print(json.dumps(run_hta(args.path)), flush=True)
        os._exit(0)  # skip interpreter teardown (freeing every DataFrame), as for the rivals
    elif args.side == "synth":
        result = synthesize(args.path, args.out, args.out + ".gz", args.target_bytes)
        print(json.dumps(result), flush=True)
        os._exit(0)
    else:
        run_all(args)


if __name__ == "__main__":
    main()
