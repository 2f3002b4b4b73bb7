"""torch.profiler's memory timeline export (``export_memory_timeline``) in a notebook:
``gpuscope.MemoryAnalysis`` is Holistic Trace Analysis' ``MemoryAnalysis`` over the
engine's reader, with the timeline as a DataFrame as well as a plot."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from gpuscope import _native
from gpuscope.notebook._pandas import frame, pandas, show

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["MemoryAnalysis"]


class MemoryAnalysis:
    """The memory timeline torch.profiler exported to ``path`` (raw, as
    ``export_memory_timeline`` writes a ``.raw.json.gz`` name, or coalesced; gzipped or
    not), by category: parameters, optimizer state, inputs, temporaries, activations,
    gradients, autograd detail and unknown.

    HTA 0.5's ``MemoryAnalysis(path)`` reads the file when it plots; this one reads it
    at once, so a file that is not a memory timeline raises ``gpuscope.BadInputError``
    here (``OSError`` for a file that cannot be opened)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = path
        self._columns = _native.memory_timeline(path)

    @property
    def categories(self) -> list[str]:
        """The categories, in torch's order (the columns of the timeline)."""
        return list(self._columns["categories"])

    def get_memory_timeline(self) -> pd.DataFrame:
        """One row per moment: after each event of a raw export (events at one instant
        each get their row, so a peak inside an instant shows; memory that existed
        before profiling comes first, at the first timed event), or each row of a
        coalesced one. ``time (ms)`` from the first timed event, then each category's
        bytes and their ``total``."""
        pandas()  # says how to install it when it is missing
        import numpy as np  # pandas' own dependency

        c = self._columns
        names = self.categories
        columns = {"time (ms)": np.frombuffer(c["time_ms"], dtype="<f8")}
        columns |= {
            name: np.frombuffer(b, dtype="<i8") for name, b in zip(names, c["bytes"], strict=True)
        }
        df = frame(columns)
        df["total"] = df[names].sum(axis=1)
        return df

    def plot_memory_timeline(self, save_graph: bool = False) -> None:
        """The timeline as stacked areas, GiB (HTA's "GB") against ms, one point per
        instant as HTA draws it, with plotly when it is installed, else matplotlib
        (without either, a warning; with ``save_graph``, ImportError). With
        ``save_graph`` it is written into ``images/`` of the working directory instead of
        shown: ``memory_plot.html`` with plotly (self-contained), ``memory_plot.png``
        with matplotlib. HTA writes ``images/memory_plot.png`` through plotly's image
        export, which needs the kaleido package."""
        names = self.categories
        # One point per instant, after its events, as HTA draws it.
        instants = self.get_memory_timeline().groupby("time (ms)", sort=False).last()
        gib = instants[names] / 1024**3
        gib.insert(0, "time (ms)", instants.index)
        save_as = os.path.join("images", "memory_plot") if save_graph else None
        show(gib, "Memory timeline (GiB)", x="time (ms)", y=names, kind="area", save_as=save_as)
