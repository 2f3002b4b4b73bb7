#!/usr/bin/env python
"""The command users run against the native binary: ``gpuscope`` as pip installs it.

Issue #28. Sides: the pip-installed command (``.venv/bin/gpuscope``: the binary of the
``gpuscope-cli`` wheel the package depends on, since the package's in-process console
script was dropped), ``python -m gpuscope`` (the CLI inside Python, ``_native.run_cli``:
what the console script was), and the native binary of the build tree
(``target/release/gpuscope``). All run the same command
on the largest shared trace (``rank0_nccl_negative_queue``, 25.8 MB of JSON) and the
largest shared allocator snapshot (the H200 run's ``iter30.pickle``, 12.8 MB), ``--format
json`` to a pipe, each a child under ``/usr/bin/time`` (``_measure.run_child``),
interleaved. The target is the pip-installed command within 1.3x of the binary's median wall time
and peak RSS. All outputs must be equal before any time is printed. Not a test.
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
        starts = {
            "native": [str(NATIVE)],
            "pip": [str(CONSOLE)],
            "module": [sys.executable, "-m", "gpuscope"],
        }
        cmds = {side: [*start, *command, "--format", "json"] for side, start in starts.items()}
        runs = measure(cmds, args.repeat)
        outputs = {rs[0][0].stdout for rs in runs.values()}
        if len(outputs) != 1:
            raise SystemExit(f"{label}: the commands printed different JSON")
        print(f"\n{label}: gpuscope {command[0]} {Path(command[1]).name} --format json")
        labels = {
            "native": "native binary",
            "pip": "pip-installed gpuscope",
            "module": "python -m gpuscope",
        }
        stats = side_table(runs, labels, "native")
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
