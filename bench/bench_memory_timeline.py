#!/usr/bin/env python
"""``gpuscope.MemoryAnalysis`` vs Holistic Trace Analysis 0.5's ``MemoryAnalysis``: the
numbers of torch.profiler's raw memory timeline export.

Each side is one child process (``python bench_memory_timeline.py --side S FILE``)
started under ``/usr/bin/time`` for its peak RSS (``_measure.run_child``), interpreter
start-up and imports included; it also times, on its own clock, what its plot is drawn
from: HTA's ``_process_raw_events()`` (one row per instant, as lists) and gpuscope's
``MemoryAnalysis(path).get_memory_timeline()`` (a DataFrame, one row per event). Neither
draws. Inputs: the shared export (16,845 events) and a larger one made from it (its timed
events repeated, each repeat shifted past the one before; the memory from before
profiling once), written into a temporary directory. Not a test: nothing asserts on time.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
import time
from pathlib import Path

from _measure import closing_notes, loadavg, measure, note, side_table

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "traces"
SOURCE = SHARED / "memory_timeline.raw.gz"
LABELS = {
    "gpuscope": "gpuscope MemoryAnalysis frame",
    "hta": "HTA MemoryAnalysis rows",
}


def side(name: str, path: str) -> None:
    """Reads the export as the side's plot does; prints its timer and row count as JSON."""
    import warnings

    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    if name == "gpuscope":
        from gpuscope import MemoryAnalysis

        t1 = time.perf_counter()
        rows = len(MemoryAnalysis(path).get_memory_timeline())
    else:
        from hta.memory_analysis import MemoryAnalysis

        t1 = time.perf_counter()
        rows = len(MemoryAnalysis(path)._process_raw_events()[0])
    t2 = time.perf_counter()
    print(json.dumps({"import_s": t1 - t0, "read_s": t2 - t1, "rows": rows}))


def scaled(out: Path, repeats: int) -> int:
    """The shared export's timed events ``repeats`` times, each repeat shifted by the
    span plus 1 ms; returns the number of events written."""
    rows = json.loads(gzip.decompress(SOURCE.read_bytes()))
    before = [r for r in rows if r[0] < 0]
    timed = [r for r in rows if r[0] >= 0]
    shift = timed[-1][0] - timed[0][0] + 1_000_000
    written = before + [[t + k * shift, *rest] for k in range(repeats) for t, *rest in timed]
    out.write_bytes(gzip.compress(json.dumps(written).encode(), compresslevel=6))
    return len(written)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=5, help="child processes per side")
    p.add_argument("--scale", type=int, default=64, help="repeats of the larger input")
    p.add_argument("--hta-python", default=sys.executable, help="interpreter with HTA")
    p.add_argument("--side", choices=sorted(LABELS), help="child mode")
    p.add_argument("path", nargs="?")
    args = p.parse_args()
    if args.side:
        side(args.side, args.path)
        return
    started = time.perf_counter()
    note(f"gpuscope MemoryAnalysis vs HTA; load average {loadavg()} before starting")
    children = []
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / f"scaled_x{args.scale}.raw.json.gz"
        events = scaled(big, args.scale)
        for path, what in ((SOURCE, "16,845 events"), (big, f"{events:,} events")):
            mb = len(gzip.decompress(path.read_bytes())) / 2**20
            print(f"-- {path.name}: {what}, {mb:.1f} MB uncompressed")
            cmds = {
                "gpuscope": [sys.executable, __file__, "--side", "gpuscope", str(path)],
                "hta": [args.hta_python, __file__, "--side", "hta", str(path)],
            }
            runs = measure(cmds, args.repeat)
            side_table(runs, LABELS, "gpuscope")
            for name, rs in runs.items():
                reads = sorted(json.loads(c.stdout.splitlines()[-1])["read_s"] for c, _ in rs)
                rows = json.loads(rs[0][0].stdout.splitlines()[-1])["rows"]
                note(
                    f"{LABELS[name]}: read {reads[len(reads) // 2]:.3f} s median on its own "
                    f"clock (imports apart), {rows:,} rows"
                )
                children += [c for c, _ in rs]
    closing_notes(children, [], started)


if __name__ == "__main__":
    main()
