#!/usr/bin/env python
"""The command users run against the native binary: ``gpuscope`` as pip installs it.

Issue #28. The pip-installed console script (``.venv/bin/gpuscope``) runs the CLI inside
Python (``gpuscope.cli:main`` -> ``_native.run_cli``); the native binary
(``target/release/gpuscope``) is the same CLI without Python. Both run the same command
on the largest shared trace (``rank0_nccl_negative_queue``, 25.8 MB of JSON) and the
largest shared allocator snapshot (the H200 run's ``iter30.pickle``, 12.8 MB), ``--format
json`` to a pipe, each a child under ``/usr/bin/time`` (``_measure.run_child``),
interleaved. The target is the pip command within 1.3x of the binary's median wall time
and peak RSS. Both outputs must be equal before any time is printed. Not a test.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from _measure import closing_notes, loadavg, measure, note, side_table, verdict

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
NATIVE = REPO / "target/release/gpuscope"
CONSOLE = Path(sys.executable).parent / "gpuscope"
INPUTS = {
    "largest trace": ["trace", str(SHARED / "traces/rank0_nccl_negative_queue.json.gz")],
    "largest snapshot": ["snapshot", str(SHARED / "gpu-h200/lm_clean/snapshots/iter30.pickle")],
}
TARGET = 1.3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    started = time.perf_counter()
    note(f"bench_console: {args.repeat} runs per side and input; load average {loadavg()}")
    lines = []
    children = []
    for label, command in INPUTS.items():
        cmds = {
            side: [str(exe), *command, "--format", "json"]
            for side, exe in (("native", NATIVE), ("pip", CONSOLE))
        }
        runs = measure(cmds, args.repeat)
        outputs = {side: rs[0][0].stdout for side, rs in runs.items()}
        if outputs["native"] != outputs["pip"]:
            raise SystemExit(f"{label}: the two commands printed different JSON")
        print(f"\n{label}: gpuscope {command[0]} {Path(command[1]).name} --format json")
        stats = side_table(runs, {"native": "native binary", "pip": "pip console script"}, "native")
        wall = stats["pip"]["median"] / stats["native"]["median"]
        rss = stats["pip"]["rss"] / stats["native"]["rss"]
        lines.append(
            f"{label}: pip / native wall {wall:.2f}x, peak RSS {rss:.2f}x "
            f"(target {TARGET}x): {verdict(wall <= TARGET and rss <= TARGET)}"
        )
        children += [c for rs in runs.values() for c, _ in rs]
    closing_notes(children, lines, started)


if __name__ == "__main__":
    main()
