"""Timed sections: ``with scope.section("render"):`` measures each named part of an
iteration, so a record says how long rendering, the loss and densification took (seed
001's wish list) and how much memory each added.

On CPU a section is wall time (``perf_counter_ns``). On CUDA it records a pair of CUDA
events and reads their elapsed time only when a record is taken, so timing never forces
a synchronisation of its own. Sections nest: one opened inside another is named by its
path (``forward/attention``) and knows its parent.

On the iteration a record will be taken, a section also measures memory: on CUDA the
highest allocated bytes inside it and what it left allocated; on CPU what it added to the
census of model and optimizer (gradients, optimizer state). Between records a section
costs a clock read and a list append at each end (bench/bench_sections.py).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["Sections"]


@dataclass
class _Timings:
    """One section's calls since the last record."""

    parent: str | None
    ms: list[float] = field(default_factory=list)
    # CUDA event pairs whose elapsed time is read at record time.
    pending: list[tuple[Any, Any]] = field(default_factory=list)
    peak_allocated: int | None = None
    net_bytes: int | None = None


class Sections:
    """The sections of one profiler: timing per call, memory on recording iterations."""

    def __init__(self, device: torch.device, census_bytes: Callable[[], int]) -> None:
        self.cuda = device.type == "cuda" and torch.cuda.is_available()
        self.device = device
        self._census_bytes = census_bytes
        self._timings: dict[str, _Timings] = {}
        self._open: list[str] = []
        self._iteration_ms: list[float] = []
        self._last_step_ns: int | None = None
        self.measure_memory = False

    @contextlib.contextmanager
    def section(self, name: str) -> Iterator[None]:
        """Times the ``with`` block as section ``name`` (nested: ``outer/name``)."""
        parent = self._open[-1] if self._open else None
        path = f"{parent}/{name}" if parent else name
        timings = self._timings.get(path)
        if timings is None:
            timings = self._timings[path] = _Timings(parent)
        memory = self._memory_start() if self.measure_memory else None
        self._open.append(path)
        if self.cuda:
            start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            start.record()
            try:
                yield
            finally:
                end.record()
                self._open.pop()
                timings.pending.append((start, end))
                if memory is not None:
                    self._memory_end(timings, memory)
        else:
            t0 = time.perf_counter_ns()
            try:
                yield
            finally:
                timings.ms.append((time.perf_counter_ns() - t0) / 1e6)
                self._open.pop()
                if memory is not None:
                    self._memory_end(timings, memory)

    def iteration_done(self) -> None:
        """Marks the end of an iteration (the profiler's ``step``): the span between two
        marks is an iteration's wall time, what shares are taken of."""
        now = time.perf_counter_ns()
        if self._last_step_ns is not None:
            self._iteration_ms.append((now - self._last_step_ns) / 1e6)
        self._last_step_ns = now

    def take(self) -> dict[str, dict[str, Any]]:
        """The figures since the last call, by path, and a fresh start."""
        iteration_ms = sum(self._iteration_ms)
        out: dict[str, dict[str, Any]] = {}
        for path, t in self._timings.items():
            ms = t.ms + [start.elapsed_time(end) for start, end in self._resolved(t.pending)]
            if not ms:
                continue
            ordered = sorted(ms)
            total = sum(ordered)
            out[path] = {
                "calls": len(ordered),
                "mean_ms": total / len(ordered),
                "p50_ms": _percentile(ordered, 0.50),
                "p95_ms": _percentile(ordered, 0.95),
                "max_ms": ordered[-1],
                "total_ms": total,
                "share_percent": total * 100.0 / iteration_ms if iteration_ms > 0 else None,
                "parent": t.parent,
                "peak_allocated_bytes": t.peak_allocated,
                "net_bytes": t.net_bytes,
            }
        self._timings = {}
        self._iteration_ms = []
        return out

    @staticmethod
    def _resolved(pending: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
        if pending:
            pending[-1][1].synchronize()  # events complete in order on a stream
        return pending

    def _memory_start(self) -> tuple[int, int]:
        if self.cuda:
            # Counting the peak from here on loses the iteration's own peak for other
            # readers; records read it before sections run (see MemoryProfiler).
            torch.cuda.reset_peak_memory_stats(self.device)
            return torch.cuda.memory_allocated(self.device), 0
        return self._census_bytes(), 0

    def _memory_end(self, t: _Timings, start: tuple[int, int]) -> None:
        if self.cuda:
            peak = torch.cuda.max_memory_allocated(self.device)
            t.peak_allocated = max(t.peak_allocated or 0, peak)
            t.net_bytes = torch.cuda.memory_allocated(self.device) - start[0]
        else:
            t.net_bytes = self._census_bytes() - start[0]


def _percentile(ordered: list[float], q: float) -> float:
    """The ``q`` quantile of sorted values, by linear interpolation (numpy's default)."""
    if len(ordered) == 1:
        return ordered[0]
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
