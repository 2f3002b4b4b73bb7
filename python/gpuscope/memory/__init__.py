"""The in-training memory profiler: where memory goes, every N iterations, cheaply."""

from gpuscope.memory.profiler import MemoryProfiler
from gpuscope.memory.schedule import Schedule

__all__ = ["MemoryProfiler", "Schedule"]
