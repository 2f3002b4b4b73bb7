"""Running a benchmark side in a child process: its output, wall time and peak RSS.

Why not ``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`` (or ``os.wait4``) alone: on
Linux a process's ``ru_maxrss`` keeps the high-water RSS of the memory image it had
*before* ``execve`` -- for a child spawned by Python (vfork/fork + exec) that is the
runner's own peak RSS. After the runner has held a few hundred MB once, every later child
"peaks" at least that high (``/bin/true`` reports 310 MB after the runner touched 300 MB).
``RUSAGE_CHILDREN`` is also a maximum over all children so far, not per child.

So the child is started under GNU ``/usr/bin/time -f %M``: ``time`` forks it from a
~1 MB process, and reports that child's ``ru_maxrss`` (KiB). Without ``/usr/bin/time``
we fall back to ``os.wait4`` and say that the figure is only an upper bound.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import textwrap
import time
from dataclasses import dataclass
from typing import Any

TIME_BIN = shutil.which("time", path="/usr/bin:/bin")


@dataclass
class ChildRun:
    stdout: str
    wall_s: float  # parent's clock around the child (includes interpreter start-up)
    peak_rss_mb: float
    rss_exact: bool  # False: wait4 fallback, may include the runner's own peak


def own_peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM: per memory image, so not inherited over exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def run_child(cmd: list[str]) -> ChildRun:
    """Runs cmd to completion; stdout captured; stderr shown only if the child fails."""
    if TIME_BIN:
        return _run_under_time(cmd)
    return _run_with_wait4(cmd)


def _run_under_time(cmd: list[str]) -> ChildRun:
    assert TIME_BIN is not None
    with tempfile.NamedTemporaryFile("r", suffix=".maxrss") as rss_file:
        t0 = time.perf_counter()
        proc = subprocess.run(
            [TIME_BIN, "-o", rss_file.name, "-f", "%M", *cmd],
            check=False,
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - t0
        check_exit(cmd, proc.returncode, proc.stderr)
        kib = int(rss_file.read().strip().splitlines()[-1])
    return ChildRun(proc.stdout, wall, kib / 1024, True)


def _run_with_wait4(cmd: list[str]) -> ChildRun:
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        assert proc.stdout is not None
        out = proc.stdout.read()
        proc.stdout.close()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        check_exit(cmd, proc.returncode, err.read())
    return ChildRun(out, wall, usage.ru_maxrss / 1024, False)


def check_exit(cmd: list[str], code: int, stderr: str) -> None:
    if code != 0:
        raise SystemExit(f"child failed (exit {code}): {' '.join(cmd)}\n{stderr}")


def rss_note(runs: list[ChildRun]) -> str:
    if all(r.rss_exact for r in runs):
        return "peak RSS: ru_maxrss of each child, started by /usr/bin/time (exact per side)"
    return (
        f"peak RSS: os.wait4 fallback (no /usr/bin/time) -- an UPPER BOUND: it includes "
        f"the runner's own peak, {own_peak_rss_mb():.1f} MB now"
    )


def note(text: str) -> None:
    """Prints text wrapped to 80 columns, continuation lines indented."""
    print(textwrap.fill(text, width=80, subsequent_indent="  "), flush=True)


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def closing_notes(children: list[ChildRun], lines: list[str], started: float) -> None:
    """The peak-RSS method, the checks and verdicts, the run's wall time and the load."""
    note(rss_note(children))
    for line in lines:
        note(line)
    note(
        f"benchmark wall time: {time.perf_counter() - started:.0f} s (input generation "
        f"included); load average {loadavg()} at the end (2 cores: above ~0.3 before "
        f"starting means another process was competing)"
    )


def last_json(child: ChildRun) -> dict[str, Any]:
    """The JSON object a side printed on its last line of output."""
    result: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
    return result


Runs = dict[str, list[tuple[ChildRun, float]]]  # per side: (child, its CPU seconds)


def timed(cmd: list[str]) -> tuple[ChildRun, float]:
    """The child and its CPU seconds (user + system, all threads): the growth of
    RUSAGE_CHILDREN around it (/usr/bin/time waits for the side, so they land there)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    child = run_child(cmd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return child, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(cmds: dict[str, list[str]], repeat: int) -> Runs:
    """Every side repeat times, interleaved."""
    runs: Runs = {s: [] for s in cmds}
    for _ in range(repeat):
        for side, cmd in cmds.items():
            runs[side].append(timed(cmd))
    return runs


def side_table(runs: Runs, labels: dict[str, str], base: str) -> dict[str, dict[str, float]]:
    """Prints one row per side (best, median and slowest wall, median CPU, largest peak
    RSS, median against ``base``'s); returns those figures per side."""
    print(
        f"{'side':<31} {'best s':>7} {'median s':>8} {'cpu s':>7} {'RSS MB':>7} "
        f"{'x ' + labels[base].split()[0]:>10}"
    )
    stats = {}
    for side, rs in runs.items():
        walls = [c.wall_s for c, _ in rs]
        stats[side] = {
            "best": min(walls),
            "median": statistics.median(walls),
            "slowest": max(walls),
            "cpu": statistics.median(t for _, t in rs),
            "rss": max(c.peak_rss_mb for c, _ in rs),
        }
    for side, s in stats.items():
        ratio = s["median"] / stats[base]["median"]
        print(
            f"{labels[side]:<31} {s['best']:>7.3f} {s['median']:>8.3f} {s['cpu']:>7.3f} "
            f"{s['rss']:>7.1f} {ratio:>9.2f}x"
        )
    return stats


def verdict(ok: bool) -> str:
    """How a target line says it."""
    return "met" if ok else "MISSED"
