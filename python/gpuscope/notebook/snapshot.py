"""``gpuscope.Snapshot``: a CUDA allocator snapshot (``torch.cuda.memory._snapshot()``)
as DataFrames — its segments and blocks, and what ``gpuscope snapshot`` finds by call
site: alive at the peak and now, never freed, churn, out-of-memory events and the
timeline.

The pickle is read by the engine without running anything in it (a pickle that would run
code is refused with ``gpuscope.BadInputError``); the tables come over as whole columns.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from gpuscope import _native
from gpuscope.notebook._pandas import frame, pandas

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Snapshot"]

_COLUMNS = {
    "segments": [
        "device", "address", "total_size", "allocated_size", "active_size",
        "requested_size", "stream", "segment_type", "expandable", "blocks", "site",
    ],
    "blocks": [
        "device", "segment_address", "address", "size", "requested_size", "state", "site"
    ],
    "alive_at_peak": ["site", "bytes", "count"],
    "alive_now": ["site", "bytes", "count"],
    "never_freed": [
        "site", "bytes", "count", "accumulating", "first_alloc_time_us", "last_alloc_time_us"
    ],
    "churn": ["site", "bytes", "count"],
    "ooms": [],
    "timeline": ["moment", "x", "site", "bytes"],
}  # fmt: skip


class Snapshot:
    """The snapshot at ``source`` (a path) or in ``source`` (the pickle's bytes). With
    ``trace=False`` only the state at the dump is read (segments and blocks; the tables
    by site then come from the blocks alone). Call sites name up to ``frames`` of the
    user's frames."""

    def __init__(
        self, source: str | os.PathLike[str] | bytes, trace: bool = True, frames: int = 1
    ) -> None:
        pandas()
        if not isinstance(source, bytes):
            source = os.fspath(source)
        self._tables: dict[str, dict[str, list[Any]]] = _native.snapshot_tables(
            source, frames, trace=trace
        )

    def _table(self, name: str) -> pd.DataFrame:
        columns = self._tables.get(name) or {c: [] for c in _COLUMNS[name]}
        df = frame(columns)
        first = [c for c in _COLUMNS[name] if c in df.columns]
        return df[first + [c for c in df.columns if c not in first]]

    def segments(self) -> pd.DataFrame:
        """One row per segment the allocator reserved: sizes (bytes), stream, pool
        type, block count and the call site that reserved it."""
        return self._table("segments")

    def blocks(self) -> pd.DataFrame:
        """One row per block: its segment, size, requested size, state
        (``active_allocated``, ``active_pending_free``, ``inactive``) and call site."""
        return self._table("blocks")

    def alive_at_peak(self) -> pd.DataFrame:
        """What was allocated at the device's peak, by call site (bytes, blocks),
        largest first; empty without a trace."""
        return self._table("alive_at_peak")

    def alive_now(self) -> pd.DataFrame:
        """What is allocated at the dump, by call site, largest first."""
        return self._table("alive_now")

    def never_freed(self) -> pd.DataFrame:
        """Allocations the trace saw made and never freed, by call site, and whether
        they kept accumulating."""
        return self._table("never_freed")

    def churn(self) -> pd.DataFrame:
        """Bytes allocated and freed within the trace, by call site."""
        return self._table("churn")

    def ooms(self) -> pd.DataFrame:
        """The out-of-memory events in the trace."""
        return self._table("ooms")

    def timeline(self) -> pd.DataFrame:
        """Bytes alive by call site over time, one row per moment and site (``moment``:
        0, 1, ...; ``x``: ms since the first entry, or the entry's index when the trace
        has no times; several moments may share a millisecond)."""
        return self._table("timeline")
