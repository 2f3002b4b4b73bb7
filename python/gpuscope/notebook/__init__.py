"""gpuscope in a notebook: pandas DataFrames of traces, shaped as Holistic Trace
Analysis returns them (``gpuscope.TraceAnalysis``, ``gpuscope.MemoryAnalysis``), of run
directories (``gpuscope.Run``) and of allocator snapshots (``gpuscope.Snapshot``). pandas is imported on first use: ``pip install 'gpuscope[notebook]'``."""

from gpuscope.notebook.memory_analysis import MemoryAnalysis
from gpuscope.notebook.run import Run
from gpuscope.notebook.snapshot import Snapshot
from gpuscope.notebook.trace_analysis import TimeSeriesTypes, TraceAnalysis
from gpuscope.notebook.trace_diff import DeviceType, TraceDiff

__all__ = [
    "DeviceType",
    "MemoryAnalysis",
    "Run",
    "Snapshot",
    "TimeSeriesTypes",
    "TraceAnalysis",
    "TraceDiff",
]
