#!/usr/bin/env python
"""``gpuscope snapshot`` vs torch's ``_memory_viz``, and on a synthetic 1M-event snapshot.

Issue #6. Three parts, every side in its own child process (``_measure.run_child``):

1. Whole commands as a user runs them, on the two shared snapshots
   (``lm_fullstep_ctx128.pickle``, 3.1 MB, and ``finetune_no_timestamps.pickle``, 2.5 MB),
   ``--repeat`` times (default 5), interleaved:

   * gpuscope  ``gpuscope snapshot FILE --format json -o /dev/null``
   * viz       ``python -m torch.cuda._memory_viz stats FILE > /dev/null``
   * import    ``python -c 'import torch.cuda._memory_viz'``: what the rival pays before
               it reads a byte (a floor for it, not a side of its own)
   * load      ``bench_snapshot.py --side load``: stdlib ``pickle.load`` of the file in a
               Python that never imports torch; it reports the load time and the growth
               of its peak RSS across the load (the file's "unpickled size")

   Targets: memory_viz / gpuscope wall time >= 20x (worst case: the fastest memory_viz
   run against the slowest gpuscope run; the medians beside it), gpuscope peak RSS
   < 50 MB (the largest).

2. In-process, the fair comparison: one child per snapshot (``--side inproc``) imports
   torch, ``torch.cuda._memory_viz`` and gpuscope first (not timed), runs each side once
   untimed, then ``--inproc-repeat`` times (default 9), rotating which goes first:

   * ``gpuscope.analyze_snapshot(path, trace=False)``: the question segsum answers, the
     state at the dump (``stats``, ``fragmentation``, ``now``), read the way a user asks
     it (``--no-trace``: reading stops at the trace, whose opcodes are only checked)
   * ``gpuscope.analyze_snapshot(path)``: the whole report, which also replays the trace
     (timeline, peak, leaks, churn) -- more than the rival computes
   * ``pickle.load(open(path, 'rb'))`` + ``torch.cuda._memory_viz.segsum(data)``, each of
     the two timed as well

   with the minor page faults each call took (``getrusage``): memory the allocator gave
   back to the kernel after one call and takes again in the next.

   Target: rival / ``analyze_snapshot(path, trace=False)`` >= 5x (worst case: the fastest
   rival run against the slowest gpuscope run; the medians beside it). The whole report's
   ratio is printed beside it, without a target.

3. A synthetic snapshot of at least ``--synthetic-entries`` (default 1,000,000) trace
   entries, built by a child (``--side synth``) into a temporary directory (``--data-dir``
   keeps it): ``lm_fullstep_ctx128.pickle`` loaded with stdlib pickle, its
   ``device_traces[0]`` repeated. Repeat k shifts every ``time_us`` by k times the
   trace's span rounded up to the millisecond (so times keep increasing) and every
   ``addr`` by k times a power of two larger than the address range of the whole snapshot
   (so each copy's alloc / free / segment pairs match exactly as in the original and no
   copy touches an address of another, nor of a segment); the frame dicts are the
   original objects (the pickle memo shares them, as in torch's files), the frame lists
   are copied once per repeat (entries that shared a list in the original share the
   copy). ``segments`` and everything else are kept as they are. Dumped with pickle
   protocol 4, as torch writes them. Measured ``--repeat-big`` times (default 3): the
   gpuscope CLI and the ``pickle.load`` side; ``memory_viz stats`` once.
   Targets: gpuscope in "seconds, not minutes" (here: the slowest run < 60 s) and in
   "memory well under the unpickled size" (here: peak RSS <= 1/4 of the growth of the
   ``pickle.load`` side's peak RSS).

Checks, before any time of an input is printed: gpuscope's ``stats`` (segments,
reserved bytes, requested bytes = segsum's ``total_allocated``, free bytes and the
internal share) formatted the way ``_memory_viz`` formats sizes must equal its printed
``segments:``, ``total_reserved:``, ``total_allocated:`` and ``total_free:`` lines, on
every input (an untimed run of each on the real snapshots, the one timed run on the
synthetic one); on the real ones the in-process child also checks the exact byte totals
against the unpickled dict (segsum's own sums, with ``_memory_viz._block_extra``) and that
``analyze_snapshot`` returns the CLI's ``stats`` and trace action counts. On the synthetic
snapshot gpuscope's ``trace.actions`` and entry count must equal what was written.

The gpuscope binary and the Python package (``python/gpuscope``, with its native module)
are copied into the temporary directory first and the children use the copies
(``PYTHONPATH``), so that a rebuild by someone else cannot swap them mid-run.

MB = 2^20 bytes, as everywhere in gpuscope.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import pickle
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
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
PACKAGE = REPO / "python" / "gpuscope"
SHARED = REPO.parent / "shared" / "data" / "snapshots"
SNAPSHOTS = ("lm_fullstep_ctx128.pickle", "finetune_no_timestamps.pickle")
MB = 1 << 20
PROTOCOL = 4  # what torch.cuda.memory._dump_snapshot writes (the files start 80 04)

TARGET_CLI_RATIO = 20.0
TARGET_CLI_MB = 50.0
TARGET_INPROC_RATIO = 5.0
TARGET_BIG_S = 60.0
TARGET_BIG_RSS_SHARE = 0.25

LABELS = {
    "gpuscope": "gpuscope snapshot --format json",
    "no_trace": "the same, --no-trace",
    "viz": "memory_viz stats > /dev/null",
    "import": "floor: import torch only",
    "load": "python: pickle.load only",
}


# --- child modes -----------------------------------------------------------------------


def vm_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def run_load(path: str) -> dict[str, Any]:
    """Child mode: stdlib pickle.load of the file, nothing else imported; the load time
    and how much the peak RSS grew across it."""
    before = own_peak_rss_mb()
    rss_before = vm_rss_mb()
    t0 = time.perf_counter()
    with open(path, "rb") as f:
        data = pickle.load(f)
    load_s = time.perf_counter() - t0
    return {
        "load_s": load_s,
        "hwm_before_mb": before,
        "hwm_after_mb": own_peak_rss_mb(),
        "rss_growth_mb": vm_rss_mb() - rss_before,
        "entries": sum(len(t) for t in data.get("device_traces", [])),
    }


def exact_totals(data: dict[str, Any], block_extra: Any) -> dict[str, int]:
    """segsum's own sums over the unpickled dict (its loop without the drawing)."""
    reserved = allocated = internal = external = 0
    for seg in data["segments"]:
        reserved += seg["total_size"]
        for b in seg["blocks"]:
            if b["state"] == "active_allocated":
                _, requested = block_extra(b)
                allocated += requested
                internal += b["size"] - requested
            else:
                external += b["size"]
    return {
        "segments": len(data["segments"]),
        "reserved_bytes": reserved,
        "requested_bytes": allocated,
        "internal_free_bytes": internal,
        "free_bytes": internal + external,
    }


def run_inproc(path: str, reps: int) -> dict[str, Any]:
    """Child mode: imports first (not timed), then gpuscope.analyze_snapshot(path) against
    pickle.load + segsum, and analyze_snapshot(path, trace=False): one untimed run each, then
    reps runs rotating the order."""
    t0 = time.perf_counter()
    import gpuscope
    import torch
    import torch.cuda._memory_viz as viz

    import_s = time.perf_counter() - t0

    faults: dict[str, list[int]] = {"gpuscope": [], "dump": [], "rival": []}

    def minor_faults() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    def ours(trace: bool = True) -> tuple[float, dict[str, Any]]:
        f = minor_faults()
        t = time.perf_counter()
        report = gpuscope.analyze_snapshot(path, trace=trace)
        elapsed = time.perf_counter() - t
        faults["gpuscope" if trace else "dump"].append(minor_faults() - f)
        return elapsed, report

    def theirs() -> tuple[float, float, dict[str, Any], str]:
        f = minor_faults()
        t = time.perf_counter()
        with open(path, "rb") as file:
            data = pickle.load(file)
        t_load = time.perf_counter()
        text: str = viz.segsum(data)  # type: ignore[no-untyped-call]
        t_sum = time.perf_counter()
        faults["rival"].append(minor_faults() - f)
        return t_load - t, t_sum - t_load, data, text

    _, report = ours()
    _, dump = ours(trace=False)
    _, _, data, text = theirs()
    exact = exact_totals(data, viz._block_extra)
    del data
    times: dict[str, list[float]] = {"gpuscope": [], "dump": [], "load": [], "segsum": []}
    for counts in faults.values():
        counts.clear()
    sides = ["dump", "whole", "theirs"]
    for i in range(reps):
        for side in sides[i % 3 :] + sides[: i % 3]:
            if side == "whole":
                times["gpuscope"].append(ours()[0])
            elif side == "dump":
                times["dump"].append(ours(trace=False)[0])
            else:
                load_s, sum_s, _, _ = theirs()
                times["load"].append(load_s)
                times["segsum"].append(sum_s)
    return {
        "import_s": import_s,
        "times": times,
        "faults": faults,
        "exact": exact,
        "segsum_tail": [ln for ln in text.splitlines() if ln.startswith(VIZ_KEYS)],
        "api_stats": report["stats"],
        "dump_same": all(dump[k] == report[k] for k in ("stats", "fragmentation", "now"))
        and dump["trace_skipped"],
        "api_actions": [d["actions"] for d in report["devices"]],
        "gpuscope_file": gpuscope.__file__,
        "versions": f"torch {torch.__version__}, gpuscope {gpuscope.__version__}",
        "vmhwm_mb": own_peak_rss_mb(),
    }


def synthesize(source: str, out: str, min_entries: int) -> dict[str, Any]:
    """Child mode: the synthetic snapshot (see the module's docstring), dumped to out."""
    with open(source, "rb") as f:
        snap = pickle.load(f)
    base: list[dict[str, Any]] = snap["device_traces"][0]
    if not all("time_us" in e for e in base):
        raise SystemExit(f"{source}: the synthetic snapshot needs time_us on every entry")
    times = [e["time_us"] for e in base]
    span = max(times) - min(times)
    shift = -(-(span + 1) // 1000) * 1000  # > span, rounded up to the ms
    ends = [e["addr"] + e["size"] for e in base]
    starts = [e["addr"] for e in base]
    for seg in snap["segments"]:
        starts.append(seg["address"])
        ends.append(seg["address"] + seg["total_size"])
    lo, hi = min(starts), max(ends)
    stride = 1 << (hi - lo).bit_length()  # > the whole address range
    repeats = math.ceil(min_entries / len(base))
    entries: list[dict[str, Any]] = []
    for k in range(repeats):
        lists: dict[int, list[Any]] = {}  # original frame list's id -> this repeat's copy
        for e in base:
            copy = dict(e)
            copy["time_us"] = e["time_us"] + k * shift
            copy["addr"] = e["addr"] + k * stride
            if "frames" in e:
                frames = e["frames"]
                copy["frames"] = lists.setdefault(id(frames), list(frames))
            entries.append(copy)
    snap["device_traces"][0] = entries
    with open(out, "wb") as f:
        pickle.dump(snap, f, protocol=PROTOCOL)
    with open(out, "rb") as f:
        head = f.read(2)
    return {
        "repeats": repeats,
        "source_entries": len(base),
        "entries": len(entries),
        "actions": dict(Counter(e["action"] for e in entries)),
        "shift_us": shift,
        "addr_stride": stride,
        "addr_range": hi - lo,
        "first_bytes": head.hex(),
        "last_time_us": entries[-1]["time_us"],
        "increasing": all(a["time_us"] <= b["time_us"] for a, b in itertools.pairwise(entries)),
    }


# --- the runner ------------------------------------------------------------------------

VIZ_KEYS = ("segments:", "total_reserved:", "total_allocated:", "total_free:")


def viz_size(num: float) -> str:
    """torch.cuda._memory_viz._format_size, to format gpuscope's bytes the same way."""
    for unit in ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi"]:
        if abs(num) < 1024.0:
            return f"{num:3.1f}{unit}B"
        num /= 1024.0
    return f"{num:.1f}YiB"


def viz_lines(stats: dict[str, Any]) -> list[str]:
    """gpuscope's stats as _memory_viz.segsum prints its last four lines."""
    free = stats["free_bytes"]
    suffix = f" ({stats['internal_free_bytes'] / free * 100:.1f}% internal)" if free else ""
    return [
        f"segments: {stats['segments']}",
        f"total_reserved: {viz_size(stats['reserved_bytes'])}",
        f"total_allocated: {viz_size(stats['requested_bytes'])}",
        f"total_free: {viz_size(free)}{suffix}",
    ]


def printed_lines(stdout: str) -> list[str]:
    return [ln for ln in stdout.splitlines() if ln.startswith(VIZ_KEYS)]


def compare_viz(name: str, stats: dict[str, Any], printed: list[str]) -> str:
    """Exits unless gpuscope's stats print as memory_viz's lines; returns the check line."""
    ours = viz_lines(stats)
    if ours != printed:
        rows = "\n".join(f"  gpuscope {a!r:<40} memory_viz {b!r}" for a, b in zip(ours, printed))
        raise SystemExit(f"{name}: gpuscope and memory_viz stats disagree\n{rows}")
    return f"{name}: memory_viz printed {'; '.join(printed)} -- gpuscope's stats print the same"


def gpuscope_cmd(cli: Path, path: Path, out: str = "/dev/null") -> list[str]:
    return [str(cli), "snapshot", str(path), "--format", "json", "-o", out]


def viz_cmd(path: Path) -> list[str]:
    script = 'exec "$0" -m torch.cuda._memory_viz stats "$1" > /dev/null'
    return ["sh", "-c", script, sys.executable, str(path)]


def side_cmd(side: str, path: Path, *extra: str) -> list[str]:
    return [sys.executable, __file__, "--side", side, "--path", str(path), *extra]


def load_summary(runs: list[tuple[ChildRun, float]]) -> str:
    inside = [last_json(c) for c, _ in runs]
    growth = max(r["hwm_after_mb"] - r["hwm_before_mb"] for r in inside)
    return (
        f"pickle.load alone {statistics.median(r['load_s'] for r in inside):.3f} s (median, "
        f"own timer), peak RSS growth across it {growth:,.1f} MB (largest; the unpickled "
        f"size)"
    )


def real_snapshot(
    snapshot: Path, cli: Path, tmp: Path, args: argparse.Namespace
) -> tuple[list[str], list[str], list[ChildRun]]:
    """Parts 1 and 2 on one shared snapshot: (check lines, verdict lines, children)."""
    name = snapshot.name.removesuffix(".pickle")
    with open(snapshot, "rb") as f:
        head = f.read(2)
    protocol = head[1] if head[0] == 0x80 else "?"
    # Checks: an untimed CLI run into a file and an untimed memory_viz run.
    out = tmp / f"check-{name}.json"
    run_child(gpuscope_cmd(cli, snapshot, out=str(out)))
    report = json.loads(out.read_text())
    viz = run_child([sys.executable, "-m", "torch.cuda._memory_viz", "stats", str(snapshot)])
    checks = [compare_viz(name, report["stats"], printed_lines(viz.stdout))]
    # Part 2 first: its child checks the exact totals and the Python API too.
    # The child imports the package's copy: PYTHONPATH goes before the editable install.
    with_copy = ["env", f"PYTHONPATH={tmp / 'pkg'}"]
    inproc = run_child(with_copy + side_cmd("inproc", snapshot, "--reps", str(args.inproc_repeat)))
    ip = last_json(inproc)
    exact = {k: report["stats"][k] for k in ip["exact"]}
    if exact != ip["exact"]:
        raise SystemExit(f"{name}: gpuscope {exact} != segsum's exact sums {ip['exact']}")
    api_ok = ip["api_stats"] == report["stats"] and ip["api_actions"] == [
        d["actions"] for d in report["devices"]
    ]
    if not api_ok:
        raise SystemExit(f"{name}: analyze_snapshot's stats / actions differ from the CLI's")
    if not ip["dump_same"]:
        raise SystemExit(f"{name}: analyze_snapshot(trace=False) differs from the whole report")
    if not ip["gpuscope_file"].startswith(str(tmp)):
        raise SystemExit(f"the in-process child imported {ip['gpuscope_file']}, not the copy")
    checks.append(
        f"{name}: exact sums from the unpickled dict (segsum's loop, _block_extra) equal "
        f"gpuscope's: {ip['exact']['segments']} segments, reserved "
        f"{ip['exact']['reserved_bytes']:,} B, allocated (requested) "
        f"{ip['exact']['requested_bytes']:,} B, free {ip['exact']['free_bytes']:,} B of "
        f"which internal {ip['exact']['internal_free_bytes']:,} B; analyze_snapshot returns "
        f"the CLI's stats and action counts; with trace=False, the whole report's stats, "
        f"fragmentation and what is alive at the dump"
    )
    for line in checks:
        note(line)
    # Part 1: whole commands.
    cmds = {
        "gpuscope": gpuscope_cmd(cli, snapshot),
        "viz": viz_cmd(snapshot),
        "import": [sys.executable, "-c", "import torch.cuda._memory_viz"],
        "load": side_cmd("load", snapshot),
    }
    runs = measure(cmds, args.repeat)
    entries = sum(d["entries"] for d in report["devices"])
    note(
        f"-- {snapshot.name}: {snapshot.stat().st_size / MB:.1f} MB, pickle protocol "
        f"{protocol} (first bytes {head.hex()}), "
        f"{report['stats']['segments']} segments, {entries:,} trace entries"
    )
    s = side_table(runs, LABELS, "gpuscope")
    note(
        f"({args.repeat} child processes per side, interleaved; s = child wall time, best and "
        f"median; cpu s = user + system, median; RSS MB = largest peak RSS; x gpuscope = "
        f"median s / gpuscope's; {load_summary(runs['load'])})"
    )
    # Part 2's figures.
    t = ip["times"]
    rival = [a + b for a, b in zip(t["load"], t["segsum"])]
    rows = {
        "analyze_snapshot(p, trace=False)": t["dump"],
        "analyze_snapshot(p), whole": t["gpuscope"],
        "pickle.load + segsum": rival,
        "  of which pickle.load": t["load"],
        "  of which segsum": t["segsum"],
    }
    g_med = statistics.median(t["dump"])
    print(f"in-process, {name}:")
    print(f"{'call':<33} {'reps':>4} {'median ms':>10} {'min-max ms':>17} {'x gpuscope':>10}")
    for label, xs in rows.items():
        med = statistics.median(xs)
        span = f"{min(xs) * 1e3:.1f}-{max(xs) * 1e3:.1f}"
        print(f"{label:<33} {len(xs):>4} {med * 1e3:>10.1f} {span:>17} {med / g_med:>9.2f}x")
    note(
        f"(one child; imports not timed: {ip['import_s']:.2f} s; one untimed run of each "
        f"first, then rotating; {ip['versions']}; child peak RSS {ip['vmhwm_mb']:.0f} MB; "
        f"minor page faults per call, median: analyze_snapshot trace=False "
        f"{statistics.median(ip['faults']['dump']):,.0f}, whole "
        f"{statistics.median(ip['faults']['gpuscope']):,.0f}, pickle.load + segsum "
        f"{statistics.median(ip['faults']['rival']):,.0f})"
    )
    print()
    g, v = s["gpuscope"], s["viz"]
    worst = v["best"] / g["slowest"]
    in_worst = min(rival) / max(t["dump"])
    in_med = statistics.median(rival) / g_med
    whole_med = statistics.median(rival) / statistics.median(t["gpuscope"])
    whole_worst = min(rival) / max(t["gpuscope"])
    time_line = (
        f"{name}: memory_viz stats / gpuscope wall time {v['median'] / g['median']:.1f}x "
        f"median, {worst:.1f}x worst case (fastest memory_viz / slowest gpuscope); target >= "
        f"{TARGET_CLI_RATIO:.0f}x (worst case): {verdict(worst >= TARGET_CLI_RATIO)}; "
        f"median: {verdict(v['median'] / g['median'] >= TARGET_CLI_RATIO)}; import torch "
        f"alone takes {s['import']['median'] / v['median']:.0%} of memory_viz's median (the "
        f"floor's median against it), its work after the import "
        f"{statistics.median(rival) * 1e3:.0f} ms (in-process median)"
    )
    rss_line = (
        f"{name}: gpuscope CLI peak RSS {g['rss']:.1f} MB (memory_viz {v['rss']:.1f} MB); "
        f"target < {TARGET_CLI_MB:.0f} MB: {verdict(g['rss'] < TARGET_CLI_MB)}"
    )
    inproc_line = (
        f"{name}: in-process (pickle.load + segsum) / analyze_snapshot(trace=False) "
        f"{in_med:.2f}x median, {in_worst:.2f}x worst case (fastest rival / slowest "
        f"gpuscope); target >= {TARGET_INPROC_RATIO:.0f}x (worst case): "
        f"{verdict(in_worst >= TARGET_INPROC_RATIO)}; median: "
        f"{verdict(in_med >= TARGET_INPROC_RATIO)}; the whole report (trace replayed too, no "
        f"target) {whole_med:.2f}x median, {whole_worst:.2f}x worst case"
    )
    verdicts = [time_line, rss_line, inproc_line]
    children = [c for side in runs.values() for c, _ in side] + [inproc]
    return checks, verdicts, children


def synthetic(
    args: argparse.Namespace, cli: Path, tmp: Path, data_dir: Path
) -> tuple[list[str], list[str], list[ChildRun]]:
    """Part 3: (check lines, verdict lines, children)."""
    source = Path(args.synthetic_source)
    n = args.synthetic_entries
    out = data_dir / f"synthetic-{n}.pickle"
    meta_path = data_dir / f"synthetic-{n}.meta.json"
    if meta_path.exists() and out.exists():
        note(f"reusing {out}")
        meta = json.loads(meta_path.read_text())
    else:
        t0 = time.perf_counter()
        cmd = side_cmd("synth", source, "--out", str(out), "--entries", str(n))
        meta = last_json(run_child(cmd))
        meta["generation_s"] = time.perf_counter() - t0
        meta_path.write_text(json.dumps(meta))
    if meta["first_bytes"][:4] != "8004" or not meta["increasing"]:
        raise SystemExit(f"synthetic: not protocol 4 or times not increasing: {meta}")
    note(
        f"synthetic snapshot: {meta['repeats']} repeats of {source.name}'s device_traces[0] "
        f"({meta['source_entries']:,} entries; time_us shifted by {meta['shift_us']:,} us "
        f"and addr by {meta['addr_stride']:,} B = 2^{meta['addr_stride'].bit_length() - 1} "
        f"per repeat, address range {meta['addr_range']:,} B), {meta['entries']:,} entries; "
        f"{out.stat().st_size / MB:,.1f} MB, pickle protocol 4 (first bytes "
        f"{meta['first_bytes']}); generated in {meta.get('generation_s', float('nan')):.0f} s"
    )
    # Check: gpuscope's action counts and entry count equal what was written.
    check_out = tmp / "check-synthetic.json"
    run_child(gpuscope_cmd(cli, out, out=str(check_out)))
    report = json.loads(check_out.read_text())
    dev = report["devices"][0]
    if dev["entries"] != meta["entries"] or dev["actions"] != meta["actions"]:
        raise SystemExit(
            f"synthetic: gpuscope read {dev['entries']} entries {dev['actions']}, "
            f"written {meta['entries']} {meta['actions']}"
        )
    actions = ", ".join(f"{k} {v:,}" for k, v in sorted(meta["actions"].items()))
    checks = [f"synthetic: gpuscope's trace.actions equal the entries written ({actions})"]
    note(checks[0])
    cmds = {
        "gpuscope": gpuscope_cmd(cli, out),
        "no_trace": [*gpuscope_cmd(cli, out), "--no-trace"],
        "load": side_cmd("load", out),
    }
    runs = measure(cmds, args.repeat_big)
    # memory_viz once (it unpickles the whole file first), its output kept for the check.
    viz = timed([sys.executable, "-m", "torch.cuda._memory_viz", "stats", str(out)])
    runs["viz"] = [viz]
    checks.append(compare_viz("synthetic", report["stats"], printed_lines(viz[0].stdout)))
    note(checks[-1])
    print(f"-- synthetic snapshot, {out.stat().st_size / MB:,.1f} MB, {meta['entries']:,} entries")
    s = side_table(runs, LABELS, "gpuscope")
    inside = [last_json(c) for c, _ in runs["load"]]
    growth = max(r["hwm_after_mb"] - r["hwm_before_mb"] for r in inside)
    note(
        f"({args.repeat_big} child processes for gpuscope and pickle.load, interleaved, "
        f"memory_viz once, its output to a pipe for the check; columns as above; {load_summary(runs['load'])}; gpuscope's peak "
        f"in the report: {dev['peak_allocated_bytes'] / 2**30:,.1f} GiB, before the trace "
        f"{dev['allocated_before_trace_bytes'] / 2**30:,.1f} GiB)"
    )
    print()
    g = s["gpuscope"]
    share = g["rss"] / growth
    time_line = (
        f"synthetic gpuscope snapshot: {g['best']:.2f} s best, {g['median']:.2f} median, "
        f"{g['slowest']:.2f} slowest, {g['cpu']:.2f} s CPU; target < {TARGET_BIG_S:.0f} s "
        f"(slowest): {verdict(g['slowest'] < TARGET_BIG_S)}"
    )
    rss_line = (
        f"synthetic gpuscope peak RSS {g['rss']:.1f} MB = {share:.3f} of the unpickled size "
        f"({growth:,.1f} MB: pickle.load's peak RSS growth); target <= "
        f"{TARGET_BIG_RSS_SHARE:.2f}: {verdict(share <= TARGET_BIG_RSS_SHARE)}"
    )
    viz_line = (
        f"synthetic memory_viz stats (once): {s['viz']['median']:.2f} s, "
        f"{s['viz']['rss']:,.1f} MB; / gpuscope median {s['viz']['median'] / g['median']:.1f}x"
    )
    nt = s["no_trace"]
    no_trace_line = (
        f"synthetic gpuscope snapshot --no-trace (no target): {nt['median']:.2f} s median, "
        f"{nt['rss']:.1f} MB; the whole read / it {g['median'] / nt['median']:.1f}x"
    )
    verdicts = [time_line, rss_line, viz_line, no_trace_line]
    children = [c for side in runs.values() for c, _ in side]
    return checks, verdicts, children


def run_all(args: argparse.Namespace) -> None:
    t_start = time.perf_counter()
    load_before = loadavg()
    source_cli = Path(args.cli)
    if not source_cli.exists():
        raise SystemExit(f"{source_cli} missing: cargo build --release -p gpuscope-cli")
    own_data = args.data_dir is None
    tmp = Path(tempfile.mkdtemp(prefix="gpuscope-bench-snapshot-"))
    data_dir = Path(args.data_dir) if args.data_dir else tmp
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        cli = tmp / "gpuscope"
        shutil.copy2(source_cli, cli)
        shutil.copytree(PACKAGE, tmp / "pkg" / "gpuscope")
        native = next((tmp / "pkg" / "gpuscope").glob("_native*.so"))
        note(
            f"gpuscope snapshot vs torch.cuda._memory_viz; binary {source_cli} copied to "
            f"{cli} (modified "
            f"{datetime.fromtimestamp(source_cli.stat().st_mtime):%Y-%m-%d %H:%M:%S}, "
            f"{cli.stat().st_size:,} bytes); package {PACKAGE} copied to {tmp / 'pkg'} "
            f"({native.name} modified "
            f"{datetime.fromtimestamp(native.stat().st_mtime):%Y-%m-%d %H:%M:%S}); python "
            f"{sys.version.split()[0]}; load average {load_before} before starting"
        )
        checks, verdicts, children = [], [], []
        for snapshot in args.snapshots:
            c, v, kids = real_snapshot(Path(snapshot), cli, tmp, args)
            checks += c
            verdicts += v
            children += kids
            print()
        if args.synthetic_entries > 0:
            c, v, kids = synthetic(args, cli, tmp, data_dir)
            checks += c
            verdicts += v
            children += kids
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if not own_data:
            note(f"kept the synthetic snapshot in {data_dir}")
    closing_notes(children, checks + verdicts, t_start)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--snapshots", nargs="+", default=[str(SHARED / s) for s in SNAPSHOTS])
    p.add_argument("--repeat", type=int, default=5, help="child processes per side, part 1")
    p.add_argument("--inproc-repeat", type=int, default=9, help="timed calls per side, part 2")
    p.add_argument("--repeat-big", type=int, default=3, help="child processes per side, part 3")
    p.add_argument("--cli", default=str(CLI), help="the gpuscope binary (default: %(default)s)")
    p.add_argument("--synthetic-source", default=str(SHARED / SNAPSHOTS[0]))
    p.add_argument(
        "--synthetic-entries", type=int, default=1_000_000, help="0: no synthetic snapshot"
    )
    p.add_argument("--data-dir", help="keep/reuse the synthetic snapshot here (default: temp)")
    p.add_argument("--side", choices=("load", "inproc", "synth"), help="child mode")
    p.add_argument("--path", help="child mode: the snapshot (synth: the source)")
    p.add_argument("--reps", type=int, default=9, help="child mode inproc: timed calls")
    p.add_argument("--out", help="child mode synth: the pickle to write")
    p.add_argument("--entries", type=int, help="child mode synth: at least this many entries")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    if args.side == "load":
        print(json.dumps(run_load(args.path)), flush=True)
        os._exit(0)  # skip freeing the unpickled objects, as the other children do
    elif args.side == "inproc":
        print(json.dumps(run_inproc(args.path, args.reps)), flush=True)
        os._exit(0)
    elif args.side == "synth":
        print(json.dumps(synthesize(args.path, args.out, args.entries)), flush=True)
        os._exit(0)
    else:
        run_all(args)


if __name__ == "__main__":
    main()
