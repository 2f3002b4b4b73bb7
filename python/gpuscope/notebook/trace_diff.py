"""``gpuscope.TraceDiff``: Holistic Trace Analysis 0.5's ``TraceDiff`` — which operators
and kernels one iteration of a control trace and of a test trace ran, how many and for
how long — over gpuscope's engine, with HTA's classmethods, arguments and frames.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from gpuscope.notebook._kernel_names import short_name
from gpuscope.notebook._pandas import pandas, show
from gpuscope.notebook.trace_analysis import TraceAnalysis

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DeviceType", "TraceDiff"]

Ranks = int | list[int] | None


class DeviceType(enum.Enum):
    """Which events a diff counts: those without a CUDA stream, those with one, or
    both (HTA's ``DeviceType``)."""

    CPU = 1
    GPU = 2
    ALL = 3


def _listed(value: Ranks) -> list[int] | None:
    if value is None:
        return None
    return [value] if isinstance(value, int) else list(value)


class TraceDiff:
    """Compares one iteration (or several) of two sets of traces. ``control`` and
    ``test`` are directories of traces or :class:`gpuscope.TraceAnalysis` objects."""

    @classmethod
    def _summary(
        cls,
        traces: str | TraceAnalysis,
        label: str,
        ranks: Ranks,
        iterations: Ranks,
        device_type: DeviceType,
        use_short_name: bool,
    ) -> pd.DataFrame:
        pd = pandas()
        ta = traces if isinstance(traces, TraceAnalysis) else TraceAnalysis(trace_dir=traces)
        parts = []
        for rank in _listed(ranks) or [ta.ranks[0]]:
            if rank not in ta.ranks:
                raise ValueError(f"trace {label} has no rank {rank}: its ranks are {ta.ranks}")
            steps = _listed(iterations)
            if steps is None:
                every = ta.all_profiler_steps(rank)
                if not every:
                    raise ValueError(f"Trace {label} doesn't have any iteration.")
                steps = [every[0]]
            parts.append(ta.iteration_ops(rank, steps, device_type.name))
        ops = pd.concat(parts, ignore_index=True)
        column = "short_name" if use_short_name else "name"
        if use_short_name:
            ops["short_name"] = ops["name"].map(short_name)
        return ops.groupby(column)[["counts", "total_duration"]].sum()

    @classmethod
    def compare_traces(
        cls,
        control: str | TraceAnalysis,
        test: str | TraceAnalysis,
        control_rank: Ranks = None,
        test_rank: Ranks = None,
        control_iteration: Ranks = None,
        test_iteration: Ranks = None,
        device_type: DeviceType = DeviceType.ALL,
        use_short_name: bool = False,
    ) -> pd.DataFrame:
        """Per operator or kernel name (``use_short_name``: without template and call
        arguments), its count and total duration (µs) in the control and the test, the
        differences (test - control) and ``counts_change_categories`` (``+``, ``-``,
        ``=``). Ranks default to each side's first, iterations to its first profiler
        step; the events of a step are the CPU events that start in it and the GPU work
        they launched."""
        pd = pandas()
        labels = ("Control", "Test")
        sides = [
            cls._summary(
                control, labels[0], control_rank, control_iteration, device_type, use_short_name
            ),
            cls._summary(test, labels[1], test_rank, test_iteration, device_type, use_short_name),
        ]
        comp = pd.concat(sides, axis=1, join="outer", keys=list(labels)).fillna(0)
        comp.columns = ["_".join(c) for c in comp.columns]
        for label, side in zip(labels, sides, strict=True):
            # As in HTA: a side's counts stay integers unless it lacks some name.
            if len(side.index) == len(comp.index):
                comp[f"{label}_counts"] = comp[f"{label}_counts"].astype("int64")
        comp["diff_counts"] = comp["Test_counts"] - comp["Control_counts"]
        comp["diff_duration"] = comp["Test_total_duration"] - comp["Control_total_duration"]
        comp["counts_change_categories"] = [
            "+" if c > 0 else "-" if c < 0 else "=" for c in comp["diff_counts"]
        ]
        comp["counts_change_categories"] = comp["counts_change_categories"].astype("str")
        return comp

    @classmethod
    def ops_diff(
        cls,
        control: str | TraceAnalysis,
        test: str | TraceAnalysis,
        control_rank: Ranks = None,
        test_rank: Ranks = None,
        control_iteration: Ranks = None,
        test_iteration: Ranks = None,
        device_type: DeviceType = DeviceType.ALL,
    ) -> dict[str, list[str]]:
        """The names ``added`` (only in the test), ``deleted`` (only in the control),
        ``increased``, ``decreased`` and ``unchanged`` in count."""
        df = cls.compare_traces(
            control, test, control_rank, test_rank, control_iteration, test_iteration, device_type
        )
        c, t, d = df["Control_counts"], df["Test_counts"], df["diff_counts"]
        masks = {
            "added": (c == 0) & (t > 0),
            "deleted": (c > 0) & (t == 0),
            "increased": (c > 0) & (d > 0),
            "decreased": (t > 0) & (d < 0),
            "unchanged": (t > 0) & (d == 0),
        }
        return {k: [str(n) for n in df.index[m]] for k, m in masks.items()}

    @classmethod
    def visualize_counts_diff(
        cls, df: pd.DataFrame, show_image: bool = True, export_image_path: str | None = None
    ) -> None:
        """A bar chart of the counts: control, test and their difference."""
        cls._plot(df, ["Control_counts", "Test_counts", "diff_counts"], show_image)

    @classmethod
    def visualize_duration_diff(
        cls, df: pd.DataFrame, show_image: bool = True, export_image_path: str | None = None
    ) -> None:
        """A bar chart of the total durations: control, test and their difference."""
        cls._plot(
            df, ["Control_total_duration", "Test_total_duration", "diff_duration"], show_image
        )

    @staticmethod
    def _plot(df: pd.DataFrame, columns: list[str], show_image: bool) -> None:
        if show_image:
            show(df.reset_index(), "Trace diff", df.index.name or "name", columns)
