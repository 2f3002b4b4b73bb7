"""gpuscope: where GPU memory and GPU time go when you train a PyTorch model.

The in-training side of gpuscope. Everything heavy (file formats, analyses) runs in the
Rust engine behind ``gpuscope._native``; this package adds what must sit next to torch.
"""

from gpuscope._native import (
    BadInputError,
    GpuscopeError,
    WriterError,
    __version__,
)
from gpuscope._types import EventData, EventFileInfo, TagSeries
from gpuscope.events import EventWriter, read_events
from gpuscope.flags import add_argparse_flags
from gpuscope.memory import MemoryProfiler, Schedule
from gpuscope.memory.snapshots import oom_guard

__all__ = [
    "BadInputError",
    "EventData",
    "EventFileInfo",
    "EventWriter",
    "GpuscopeError",
    "MemoryProfiler",
    "Schedule",
    "TagSeries",
    "WriterError",
    "__version__",
    "add_argparse_flags",
    "oom_guard",
    "read_events",
]
