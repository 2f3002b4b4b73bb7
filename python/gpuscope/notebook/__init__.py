"""gpuscope in a notebook: pandas DataFrames of traces, shaped as Holistic Trace
Analysis returns them (``gpuscope.TraceAnalysis``), and of run directories
(``gpuscope.Run``). pandas is imported on first use: ``pip install 'gpuscope[notebook]'``."""

from gpuscope.notebook.run import Run
from gpuscope.notebook.trace_analysis import TraceAnalysis

__all__ = ["Run", "TraceAnalysis"]
