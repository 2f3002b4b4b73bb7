"""The critical path of a window of one rank's trace, as ``TraceAnalysis.
critical_path_analysis`` returns it (HTA's ``CPGraph``, without networkx): what set how
long the window took, edge by edge, and what each edge was bound by. The engine builds
the graph and finds the path; this holds the answer and the window it was asked of, so
that ``overlay_critical_path_analysis`` writes the same path."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuscope.notebook._pandas import frame, pandas

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CriticalPathGraph", "window_of"]

BOUNDS = (
    "cpu_bound",
    "gpu_compute_bound",
    "gpu_communication_bound",
    "gpu_kernel_kernel_overhead",
    "gpu_kernel_launch_overhead",
)


def window_of(annotation: str, instance_id: int | tuple[int, int] | None) -> tuple[int, int]:
    """The first and last instance (inclusive) HTA's ``instance_id`` asks for."""
    if instance_id is None:
        return 0, 0
    if isinstance(instance_id, bool) or not isinstance(instance_id, (int, tuple)):
        raise TypeError(f"instance_id must be an int or a (first, last) pair: {instance_id!r}")
    first, last = (instance_id, instance_id) if isinstance(instance_id, int) else instance_id
    if not (isinstance(first, int) and isinstance(last, int)) or first < 0 or last < first:
        raise ValueError(
            f"instance_id {instance_id!r} of {annotation!r}: instances count from 0, "
            "and a range's first comes before its last"
        )
    return first, last


@dataclass(frozen=True)
class CriticalPathGraph:
    """The critical path of ``annotation``'s instances ``first`` to ``last`` on ``rank``.

    ``get_critical_path_breakdown()`` has a row per edge of the path, in order;
    ``summary()`` the share of the path's time each kind of bound took. ``window_us``
    is the window on the trace's clock, ``graph_size`` the graph's moments and edges."""

    rank: int
    annotation: str
    first: int
    last: int
    table: dict[str, Any]

    @property
    def window_us(self) -> tuple[float, float]:
        start, end = self.table["window"]
        return float(start), float(end)

    @property
    def graph_size(self) -> tuple[int, int]:
        nodes, edges = self.table["graph"]
        return int(nodes), int(edges)

    @property
    def critical_path_events_set(self) -> set[int]:
        """The events the path runs through (the calls and work its moments are the
        start or end of), by position in the trace file's ``traceEvents``: those the
        overlay marks ``critical``."""
        return set(self.table["critical_events"])

    def get_critical_path_breakdown(self) -> pd.DataFrame:
        """A row per edge of the path, in order: ``event_idx`` (the event its time is
        attributed to, by position in ``traceEvents``; -1 for an edge of no event),
        ``duration`` (µs), ``type`` (``critical_path_operator`` for time in a call or in
        GPU work, ``…_kernel_launch_delay``, ``…_kernel_kernel_delay``, and the weightless
        ``…_dependency`` and ``…_sync_dependency``), ``s_name``, ``cat`` (gpuscope's kind
        of event: ``cpu_op``, ``runtime``, ``kernel``, ...), ``pid``, ``tid``, ``stream``
        (-1 on a CPU thread) and ``bound_by``."""
        t = self.table
        columns = {
            "event_idx": t["event_idx"],
            "duration": t["duration"],
            "type": t["type"],
            "s_name": t["s_name"],
            "cat": t["cat"],
            "pid": t["pid"],
            "tid": t["tid"],
            "stream": t["stream"],
            "bound_by": t["bound_by"],
        }
        dtypes = {
            "event_idx": "int64",
            "duration": "float64",
            "type": "str",
            "s_name": "object",
            "cat": "object",
            "pid": "Int64",
            "tid": "Int64",
            "stream": "Int64",
            "bound_by": "str",
        }
        return frame(columns, dtypes)

    def summary(self) -> pd.Series:
        """The share of the path's time (%) each bound took, by ``bound_by``: every bound
        HTA names, 0 for those the path does not meet; all 0 for a path of no time."""
        pd = pandas()
        total = sum(self.table["duration"])
        shares = dict.fromkeys(BOUNDS, 0.0)
        for duration, bound in zip(self.table["duration"], self.table["bound_by"], strict=True):
            if bound and total > 0:
                shares[bound] += duration * 100.0 / total
        return pd.Series(shares, name="duration", dtype="float64")
