"""gpuscope: where GPU memory and GPU time go when you train a PyTorch model.

The in-training side of gpuscope. Everything heavy (file formats, analyses) runs in the
Rust engine behind ``gpuscope._native``; this package adds what must sit next to torch.

``import gpuscope`` does not import torch: the event writer, the reader and the
``gpuscope`` command work without it. The torch-side names (``MemoryProfiler``,
``oom_guard``, ...) import it when first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gpuscope import nvtx
from gpuscope._native import (
    BadInputError,
    GpuscopeError,
    WriterError,
    __version__,
    analyze_snapshot,
)
from gpuscope._types import EventData, EventFileInfo, HistogramSummary, TagSeries
from gpuscope.events import EventWriter, read_events
from gpuscope.flags import add_argparse_flags
from gpuscope.nvtx import capture
from gpuscope.profiling import ProfileSession, ProfilingConfig, profile
from gpuscope.ranks import merge_rank_summaries, rank_summary

if TYPE_CHECKING:
    from gpuscope.health.nonfinite import NonfiniteError, NonfiniteFinding, find_nonfinite
    from gpuscope.memory import MemoryProfiler, Schedule
    from gpuscope.memory.snapshots import oom_guard
    from gpuscope.notebook import (
        DeviceType,
        MemoryAnalysis,
        Run,
        Snapshot,
        TimeSeriesTypes,
        TraceAnalysis,
        TraceDiff,
    )

# Names whose modules need torch (or pandas), imported on first access (PEP 562).
_LAZY = {
    "MemoryProfiler": "gpuscope.memory",
    "Schedule": "gpuscope.memory",
    "oom_guard": "gpuscope.memory.snapshots",
    "NonfiniteError": "gpuscope.health.nonfinite",
    "NonfiniteFinding": "gpuscope.health.nonfinite",
    "find_nonfinite": "gpuscope.health.nonfinite",
    # The notebook classes: pandas (imported when they are first used).
    "TraceAnalysis": "gpuscope.notebook",
    "MemoryAnalysis": "gpuscope.notebook",
    "Run": "gpuscope.notebook",
    "Snapshot": "gpuscope.notebook",
    "TraceDiff": "gpuscope.notebook",
    "DeviceType": "gpuscope.notebook",
    "TimeSeriesTypes": "gpuscope.notebook",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gpuscope' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "BadInputError",
    "DeviceType",
    "EventData",
    "EventFileInfo",
    "EventWriter",
    "GpuscopeError",
    "HistogramSummary",
    "MemoryAnalysis",
    "MemoryProfiler",
    "NonfiniteError",
    "NonfiniteFinding",
    "ProfileSession",
    "ProfilingConfig",
    "Run",
    "Schedule",
    "Snapshot",
    "TagSeries",
    "TimeSeriesTypes",
    "TraceAnalysis",
    "TraceDiff",
    "WriterError",
    "__version__",
    "add_argparse_flags",
    "analyze_snapshot",
    "capture",
    "find_nonfinite",
    "merge_rank_summaries",
    "nvtx",
    "oom_guard",
    "profile",
    "rank_summary",
    "read_events",
]
