"""The in-training memory profiler: where memory goes, every N iterations, cheaply (the
training health it records beside memory is in :mod:`gpuscope.health`)."""

from gpuscope.memory.profiler import MemoryProfiler
from gpuscope.memory.schedule import Schedule

__all__ = ["MemoryProfiler", "Schedule"]
