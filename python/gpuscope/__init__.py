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

__all__ = [
    "BadInputError",
    "EventData",
    "EventFileInfo",
    "EventWriter",
    "GpuscopeError",
    "TagSeries",
    "WriterError",
    "__version__",
    "read_events",
]
