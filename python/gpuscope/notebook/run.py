"""``gpuscope.Run``: a run directory as DataFrames — the memory records, timed
sections, gradient flow, non-finite events, GPU samples and the diagnosis of
``gpuscope report``.

The engine reads the directory once (every source ``gpuscope report RUN`` reads) and
hands each table over as whole columns; nested figures are flattened into columns named
by their path (``categories_bytes.activations``, ``allocator.reserved_bytes``,
``losses.lm``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from gpuscope import _native
from gpuscope.notebook._pandas import frame, pandas

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Run"]

# The columns each table starts with; the rest follow in the order the engine found them.
_FIRST = {
    "records": ["iteration", "time", "rank", "device"],
    "sections": ["iteration", "rank", "section"],
    "gradients": ["record_iteration", "iteration", "rank"],
    "nonfinite": ["iteration", "rank"],
    "gpu_samples": ["time", "index", "name"],
    "findings": ["severity", "kind", "source", "rank", "summary"],
}


class Run:
    """The run directory at ``path`` (what ``gpuscope run`` or ``MemoryProfiler``
    wrote: ``profiles/memory*.jsonl``, ``gpu.jsonl``, ``profiler_traces/``,
    ``snapshots/``). Raises ``gpuscope.BadInputError`` when nothing in it can be read."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        pandas()
        self.path = os.fspath(path)
        self._tables: dict[str, dict[str, list[Any]]] = _native.read_run_tables(self.path)

    def _table(self, name: str) -> pd.DataFrame:
        columns = self._tables.get(name)
        if columns is None:
            return frame({c: [] for c in _FIRST[name]})
        df = frame(columns)
        if "rank" in df.columns:
            df["rank"] = df["rank"].astype("Int64")  # null for a finding about the whole run
        first = [c for c in _FIRST[name] if c in df.columns]
        return df[first + [c for c in df.columns if c not in first]]

    def records(self) -> pd.DataFrame:
        """One row per memory record (a line of ``profiles/memory*.jsonl``, every
        rank): iteration, time, rank, the categories, allocator figures, system
        figures and losses, flattened."""
        return self._table("records")

    def sections(self) -> pd.DataFrame:
        """One row per record and timed section: calls, mean, p50, p95 and max ms,
        share of the iteration, memory added."""
        return self._table("sections")

    def gradients(self) -> pd.DataFrame:
        """One row per record with gradient flow: the measured iteration, global, group
        and module norms (``module_norms.<module>``), zero share, clipping counts,
        update ratios."""
        return self._table("gradients")

    def nonfinite(self) -> pd.DataFrame:
        """One row per non-finite event (``profiles/nonfinite*.jsonl``)."""
        return self._table("nonfinite")

    def gpu_samples(self) -> pd.DataFrame:
        """One row per GPU per sample of ``gpu.jsonl`` (``gpuscope run``): memory used,
        utilisation, temperature, power."""
        return self._table("gpu_samples")

    def findings(self) -> pd.DataFrame:
        """The diagnosis of ``gpuscope report RUN``, most severe first: source, kind,
        severity, rank, summary, what is at stake, the evidence and what to do next."""
        return self._table("findings")
