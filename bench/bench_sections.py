"""What a timed section costs on CPU between records (issue #8: under 5 µs).

Sides, each timed over ``--calls`` empty ``with`` blocks in one process, alternating,
``--repeat`` times (median reported):

- ``gpuscope``: ``with scope.section("s"):`` of an enabled ``MemoryProfiler`` on an
  iteration that will not be recorded (no memory is measured);
- ``record_function``: ``with torch.profiler.record_function("s"):`` with no profiler
  running, the other annotation people put in training loops;
- ``perf_counter by hand``: two ``time.perf_counter_ns()`` calls and a list append, what
  hand-timed training loops do;
- ``empty loop``: the loop alone, subtracted from the others.

Prints the cost per call, the ratios, and the process's peak RSS (one process runs all
sides, so it is shared). Not a test: nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable

import gpuscope
import torch
from _measure import loadavg, own_peak_rss_mb, verdict

TARGET_US = 5.0


def empty(n: int) -> None:
    for _ in range(n):
        pass


def by_hand(n: int) -> None:
    samples: list[int] = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        samples.append(time.perf_counter_ns() - t0)


def record_function(n: int) -> None:
    for _ in range(n):
        with torch.profiler.record_function("s"):
            pass


def sections(scope: gpuscope.MemoryProfiler) -> Callable[[int], None]:
    def run(n: int) -> None:
        for _ in range(n):
            with scope.section("s"):
                pass

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(f"timed sections, {args.calls:,} calls per run, {args.repeat} runs; load {loadavg()}")
    with tempfile.TemporaryDirectory() as run_dir:
        model = torch.nn.Linear(4, 4)
        # every is larger than the iterations: no record is due, as between records.
        scope = gpuscope.MemoryProfiler(run_dir, model=model, every=10**9, tensorboard=False)
        scope.step(1)
        sides: dict[str, Callable[[int], None]] = {
            "empty loop": empty,
            "gpuscope scope.section": sections(scope),
            "record_function": record_function,
            "perf_counter by hand": by_hand,
        }
        times: dict[str, list[float]] = {s: [] for s in sides}
        for _ in range(args.repeat):
            for side, fn in sides.items():
                t0 = time.perf_counter()
                fn(args.calls)
                times[side].append(time.perf_counter() - t0)
        scope.close()
    base = statistics.median(times["empty loop"])
    per_call = {s: (statistics.median(t) - base) / args.calls * 1e6 for s, t in times.items()}
    print(f"{'side':<26} {'µs per call':>12} {'x gpuscope':>11}")
    for side, us in per_call.items():
        if side == "empty loop":
            continue
        ratio = us / per_call["gpuscope scope.section"]
        print(f"{side:<26} {us:>12.3f} {ratio:>10.2f}x")
    print(f"peak RSS of the process (all sides, torch imported): {own_peak_rss_mb():.1f} MB")
    cost = per_call["gpuscope scope.section"]
    print(
        f"gpuscope section: {cost:.2f} µs per call; target < {TARGET_US} µs: {verdict(cost < TARGET_US)}"
    )
    print(f"load average at the end: {loadavg()}")


if __name__ == "__main__":
    main()
