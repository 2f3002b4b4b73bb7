"""pandas, imported when a notebook class is first used (``import gpuscope`` never
imports it), and DataFrames built from the columns the engine hands over."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["frame", "pandas", "show"]

_INSTALL = "pip install 'gpuscope[notebook]'"
_said_no_plotting = False


def pandas() -> Any:
    """The pandas module, or an ImportError that says how to install it."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError(
            f"gpuscope's notebook classes return pandas DataFrames: {_INSTALL}"
        ) from None
    return pd


def frame(columns: Mapping[str, Any], dtypes: Mapping[str, str] | None = None) -> pd.DataFrame:
    """A DataFrame of ``columns`` (each a list or a NumPy array, handed over whole), cast
    to ``dtypes``."""
    pd = pandas()
    df = pd.DataFrame(dict(columns))
    return df.astype(dict(dtypes)) if dtypes else df


def show(
    df: pd.DataFrame,
    title: str,
    x: str,
    y: str | list[str],
    kind: str = "bar",
    save_as: str | None = None,
) -> None:
    """Plots ``df`` (``kind``: bar, line, or stacked area) with plotly when it is
    installed, else matplotlib; says once when neither is (a plot is never needed for
    the numbers). With ``save_as``, writes the plot there instead of showing it:
    ``<save_as>.html`` from plotly (self-contained), ``<save_as>.png`` from matplotlib,
    making its directory; ImportError when neither can draw it."""
    global _said_no_plotting
    try:
        import plotly.express as px
        import plotly.graph_objects as go

        if kind == "area":
            # One trace per column, stacked, from the columns themselves: px.area would
            # first make a long frame of one row per point and column.
            columns = [y] if isinstance(y, str) else y
            figure = go.Figure(
                [go.Scatter(x=df[x], y=df[c], name=c, stackgroup="one") for c in columns],
                layout={"title": title, "xaxis_title": x},
            )
        else:
            figure = {"bar": px.bar, "line": px.line}[kind](df, x=x, y=y, title=title)
        if save_as is None:
            figure.show()
        else:
            figure.write_html(_made(save_as + ".html"), include_plotlyjs=True)
        return
    except ImportError:
        pass
    try:
        import matplotlib.pyplot as plt

        df.plot(x=x, y=y, kind=kind, title=title)
        if save_as is None:
            plt.show()
        else:
            plt.savefig(_made(save_as + ".png"))
            plt.close()
        return
    except ImportError:
        pass
    if save_as is not None:
        raise ImportError(
            f"saving the plot needs plotly or matplotlib, neither is installed: {_INSTALL} "
            "brings pandas only; pip install plotly"
        )
    if not _said_no_plotting:
        _said_no_plotting = True
        warnings.warn(
            "visualize=True: neither plotly nor matplotlib is installed, so no plot is "
            "shown (the DataFrames are returned as usual)",
            stacklevel=3,
        )


def _made(path: str) -> str:
    """``path``, its directory made when missing."""
    if os.path.dirname(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    return path
