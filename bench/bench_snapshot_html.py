#!/usr/bin/env python
"""How long headless Chromium takes to render ``gpuscope snapshot --format html`` of the
largest shared allocator snapshot (issue #6: within 3 s).

The page is written once by the gpuscope binary (``--cli``, default the release build),
then Chromium dumps its DOM after rendering (``--dump-dom``, with networking off, the very
invocation tests/test_snapshot_html.py reads pages with), ``--repeat`` times, interleaved
with the same call on an empty page: most of each call is Chromium's own start and exit
(a new profile, a network namespace), which the empty page measures. The figure against
the target is the median of the page's calls less the median of the empty page's.

The page's size (< 10 MB) is a test (test_snapshot_html.py); its render time is measured
here, because a time depends on the machine and its load. Not a test: nothing here asserts
on time.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _measure import loadavg, verdict

REPO = Path(__file__).resolve().parent.parent
CLI = REPO / "target" / "release" / "gpuscope"
SNAPSHOTS = REPO.parent / "shared" / "data" / "snapshots"
TARGET_S = 3.0

sys.path.insert(0, str(REPO / "tests"))
from _chromium import run_chromium  # the tests' Chromium invocation, reused


def largest_snapshot() -> Path:
    """The largest snapshot that ``../shared/data/snapshots/reference.json`` lists."""
    names: list[str] = json.loads((SNAPSHOTS / "reference.json").read_text())
    return max((SNAPSHOTS / n for n in names), key=lambda p: p.stat().st_size)


def dump_seconds(chromium: str, page: Path, profile: Path) -> float:
    """Wall time of one ``chromium --dump-dom`` of ``page`` (a fresh profile each time)."""
    shutil.rmtree(profile, ignore_errors=True)
    t0 = time.perf_counter()
    dom = run_chromium(chromium, profile, "--dump-dom", page.as_uri())
    seconds = time.perf_counter() - t0
    assert "<html" in dom, dom[:500]
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cli", default=str(CLI), help="the gpuscope binary (%(default)s)")
    parser.add_argument("--snapshot", help="default: the largest shared snapshot")
    parser.add_argument("--repeat", type=int, default=5, help="Chromium runs per page")
    args = parser.parse_args()
    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("chromium is not installed (make chromium installs Debian's)")
    cli = Path(args.cli)
    if not cli.is_file():
        raise SystemExit(f"{cli} missing: cargo build --release -p gpuscope-cli")
    snapshot = Path(args.snapshot) if args.snapshot else largest_snapshot()
    print(f"snapshot HTML render in headless Chromium; load average {loadavg()} before starting")
    with tempfile.TemporaryDirectory(prefix="gpuscope-bench-snapshot-html-") as tmp:
        work = Path(tmp)
        page, empty = work / "page.html", work / "empty.html"
        t0 = time.perf_counter()
        subprocess.run(
            [str(cli), "snapshot", str(snapshot), "--format", "html", "-o", str(page)],
            check=True,
            timeout=300,
        )
        written = time.perf_counter() - t0
        empty.write_text("<!doctype html><html><body><p>x</p></body></html>")
        print(
            f"{snapshot.name} ({snapshot.stat().st_size / 1e6:.1f} MB): page of "
            f"{page.stat().st_size / 1e6:.2f} MB written by {cli} in {written:.2f} s"
        )
        times: dict[str, list[float]] = {"empty page": [], "snapshot page": []}
        for _ in range(args.repeat):
            times["empty page"].append(dump_seconds(chromium, empty, work / "profile"))
            times["snapshot page"].append(dump_seconds(chromium, page, work / "profile"))
    print(f"{'chromium --dump-dom':<22} {'runs':>5} {'median s':>9} {'min s':>7} {'max s':>7}")
    for side, runs in times.items():
        print(
            f"{side:<22} {len(runs):>5} {statistics.median(runs):>9.2f} "
            f"{min(runs):>7.2f} {max(runs):>7.2f}"
        )
    render = statistics.median(times["snapshot page"]) - statistics.median(times["empty page"])
    print(
        f"render (page less empty page, medians): {render:.2f} s; target < {TARGET_S:.0f} s: "
        f"{verdict(render < TARGET_S)}"
    )
    print(f"load average at the end: {loadavg()}")


if __name__ == "__main__":
    main()
