"""Timed sections: ``with scope.section("render"):`` measures each named part of an
iteration, so a record says how long rendering, the loss and densification took and how
much memory each added.

On CPU a section is wall time (``perf_counter_ns``). On CUDA it records a pair of CUDA
events and reads their elapsed time only when a record is taken, so timing never forces
a synchronisation of its own. Sections nest: one opened inside another is named by its
path (``forward/attention``) and knows its parent.

On the iteration a record will be taken, a section also measures memory: on CUDA the
highest allocated bytes inside it and what it left allocated; on CPU what it added to the
census of model and optimizer (gradients, optimizer state). Between records a section
costs about 1 µs on CPU (bench/bench_sections.py measured 1.05 µs). A failure to measure
memory is handed to the profiler's ``report`` and the section carries on without it: it
runs inside the training loop, which it must never stop.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import torch

__all__ = ["Section", "Sections"]


@dataclass
class _Timings:
    """One section's calls since the last record."""

    parent: str | None
    ms: list[float] = field(default_factory=list)
    # CUDA event pairs whose elapsed time is read at record time.
    pending: list[tuple[Any, Any]] = field(default_factory=list)
    peak_allocated: int | None = None
    net_bytes: int | None = None


class Section(contextlib.ContextDecorator):
    """One use of a named section: ``with`` it or decorate a function with it (each call
    of the function is a fresh use)."""

    __slots__ = ("_events", "_memory", "_name", "_owner", "_path", "_range", "_t0", "_timings")
    _events: tuple[Any, Any]
    _memory: int | None
    _name: str
    _owner: Sections
    _path: str
    _range: Any
    _t0: int
    _timings: _Timings

    def __init__(self, owner: Sections, name: str) -> None:
        self._owner = owner
        self._name = name

    def _recreate_cm(self) -> Self:
        return type(self)(self._owner, self._name)

    def __enter__(self) -> Self:
        self._owner._enter(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._owner._exit(self)


def _profiler_range(path: str) -> Any:
    """While torch's profiler records, a ``record_function`` range named ``path``, entered,
    so that a trace shows each section and `gpuscope report` can say which operators ran
    inside it; ``None`` (one flag read) otherwise."""
    if not torch.autograd.profiler._is_profiler_enabled:
        return None
    span = torch.autograd.profiler.record_function(path)
    span.__enter__()  # type: ignore[no-untyped-call]
    return span


class Sections:
    """The sections of one profiler: timing per call, memory on recording iterations.
    Each thread has its own nesting: a section opened on another thread is not inside
    this one's."""

    def __init__(
        self,
        device: torch.device,
        census_bytes: Callable[[], int],
        report: Callable[[Exception], None],
    ) -> None:
        self.cuda = device.type == "cuda" and torch.cuda.is_available()
        self.device = device
        self._census_bytes = census_bytes
        self._report = report
        self._timings: dict[str, _Timings] = {}
        self._local = threading.local()
        # The interval a record covers: from the end of the step that took the previous
        # record to the latest step. Before the first record there is no such start, and
        # shares are not given.
        self._interval_start_ns: int | None = None
        self._restart_due = False
        self._last_step_ns: int | None = None
        self.measure_memory = False

    def section(self, name: str) -> Section:
        """Section ``name`` (nested: ``outer/name``), for ``with`` or as a decorator."""
        return Section(self, name)

    def _stack(self) -> list[str]:
        stack: list[str] | None = getattr(self._local, "open", None)
        if stack is None:
            stack = self._local.open = []
        return stack

    def _enter(self, s: Section) -> None:
        stack = self._stack()
        parent = stack[-1] if stack else None
        s._path = path = f"{parent}/{s._name}" if parent else s._name
        timings = self._timings.get(path)
        if timings is None:
            timings = self._timings[path] = _Timings(parent)
        s._timings = timings
        s._memory = None
        if self.measure_memory:
            try:
                s._memory = self._memory_start()
            except Exception as e:  # noqa: BLE001 — profiling must never stop training
                self._report(e)
        stack.append(path)
        s._range = _profiler_range(path)
        if self.cuda:
            start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            s._events = (start, torch.cuda.Event(enable_timing=True))  # type: ignore[no-untyped-call]
            start.record()
        else:
            s._t0 = time.perf_counter_ns()

    def _exit(self, s: Section) -> None:
        t = s._timings
        if self.cuda:
            s._events[1].record()
            t.pending.append(s._events)
        else:
            t.ms.append((time.perf_counter_ns() - s._t0) / 1e6)
        if s._range is not None:
            s._range.__exit__(None, None, None)
        stack = self._stack()
        if stack and stack[-1] == s._path:
            stack.pop()
        if s._memory is not None:
            try:
                self._memory_end(t, s._memory)
            except Exception as e:  # noqa: BLE001 — profiling must never stop training
                self._report(e)

    def step_done(self) -> None:
        """Marks the end of an iteration (the profiler's ``step``), before a record."""
        self._last_step_ns = time.perf_counter_ns()

    def restart(self) -> None:
        """At the end of a step: starts the next record's interval when this step took a
        record (so the record's own cost is in neither interval)."""
        if self._restart_due:
            self._restart_due = False
            self._interval_start_ns = time.perf_counter_ns()

    def take(self) -> dict[str, dict[str, Any]]:
        """The figures since the last call, by path, and a fresh start."""
        start, end = self._interval_start_ns, self._last_step_ns
        interval_ms = (end - start) / 1e6 if start is not None and end is not None else 0.0
        out: dict[str, dict[str, Any]] = {}
        for path, t in self._timings.items():
            ms = t.ms + [begin.elapsed_time(stop) for begin, stop in self._resolved(t.pending)]
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
                "share_percent": total * 100.0 / interval_ms if interval_ms > 0 else None,
                "parent": t.parent,
                "peak_allocated_bytes": t.peak_allocated,
                "net_bytes": t.net_bytes,
            }
        self._timings = {}
        self._interval_start_ns = None
        self._restart_due = True
        return out

    @staticmethod
    def _resolved(pending: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
        if pending:
            pending[-1][1].synchronize()  # events complete in order on a stream
        return pending

    def _memory_start(self) -> int:
        if self.cuda:
            # Counting the peak from here on loses the iteration's own peak for other
            # readers; records read it before sections run (see MemoryProfiler).
            torch.cuda.reset_peak_memory_stats(self.device)
            return torch.cuda.memory_allocated(self.device)
        return self._census_bytes()

    def _memory_end(self, t: _Timings, start: int) -> None:
        if self.cuda:
            peak = torch.cuda.max_memory_allocated(self.device)
            t.peak_allocated = max(t.peak_allocated or 0, peak)
            now = torch.cuda.memory_allocated(self.device)
        else:
            now = self._census_bytes()
        # Summed over the iteration's calls (micro-batches each add their part).
        t.net_bytes = (t.net_bytes or 0) + now - start


def _percentile(ordered: list[float], q: float) -> float:
    """The ``q`` quantile of sorted values, by linear interpolation (numpy's default)."""
    if len(ordered) == 1:
        return ordered[0]
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
