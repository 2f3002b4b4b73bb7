"""``gpuscope.TraceAnalysis``: Holistic Trace Analysis' ``TraceAnalysis`` (HTA 0.5) over
gpuscope's engine, so that a notebook switches with its import line.

The constructor and the methods have HTA 0.5's names, signatures and return shapes
(tuples where HTA returns tuples, dicts of per-rank frames where it returns dicts), and
the frames have HTA's columns, index and dtypes. The engine loads the traces once and
answers each question over the same events HTA uses (GPU work is any event on a CUDA
stream; with two or more profiler steps the last is left out); the rows come to Python
as whole columns. Where gpuscope departs from HTA, the method's docstring says so.

``hta_compat=True`` (the default) takes times as HTA does — a trace with fractional
microseconds is rounded, start up and end down — so ported notebooks show the numbers
they showed, except that what that rounding makes negative is 0. ``hta_compat=False``
takes the exact clock.
"""

from __future__ import annotations

import enum
import json
import os
import re
import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from gpuscope import _native
from gpuscope.notebook._kernel_names import short_name
from gpuscope.notebook._pandas import frame, pandas, show
from gpuscope.notebook.critical_path import CriticalPathGraph, window_of

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["TimeSeriesTypes", "TraceAnalysis"]

IDLE_CATEGORIES = ("host_wait", "kernel_wait", "other")
DESCRIBE = ["count", "mean", "std", "min", "25%", "50%", "75%", "max"]


class TimeSeriesTypes(enum.Flag):
    """The counter tracks ``TraceAnalysis.generate_trace_with_counters`` adds (HTA's
    ``TimeSeriesTypes``; HTA's own flag is taken too, by its members' names)."""

    QUEUE_LENGTH = enum.auto()
    MEMCPY_BANDWIDTH = enum.auto()


class TraceAnalysis:
    """The traces of ``trace_dir`` (every ``*.json`` / ``*.json.gz`` trace, each rank
    from its ``distributedInfo.rank``, else ``rank<R>`` in its name), or of
    ``trace_files`` (``{rank: path}``, paths relative to ``trace_dir``).

    Unlike HTA, a rank is read from ``distributedInfo`` however the JSON is spaced,
    a directory's file that is not a trace is skipped rather than fatal, and the copies
    of traces gpuscope writes (``generate_trace_with_counters``, the overlays) are left
    out of a directory that holds the trace they copy: each opens with
    ``gpuscopeCopyOf``, the name of that trace. Named in ``trace_files``, or without its
    trace beside it, a copy is read as a trace."""

    def __init__(
        self,
        trace_files: dict[int, str] | None = None,
        trace_dir: str = "/tmp/trace",
        include_last_profiler_step: bool | None = False,
        *,
        hta_compat: bool = True,
    ) -> None:
        pandas()  # fails early, with the install line, when pandas is missing
        if trace_files:
            ranks: list[int] | None = [int(r) for r in trace_files]
            paths = [os.path.join(trace_dir, p) for p in trace_files.values()]
        else:
            ranks, paths = None, [trace_dir]
        self.hta_compat = hta_compat
        self._set = _native.TraceSet(
            paths, ranks, hta_clock=hta_compat, last_step=bool(include_last_profiler_step)
        )
        self.ranks: list[int] = list(self._set.ranks)
        self._doc: dict[str, Any] | None = None
        # Of several traces of one rank, the first: the one a rank's questions answer.
        self.trace_files: dict[int, str] = {}
        for r, p in zip(self.ranks, self._set.paths, strict=True):
            self.trace_files.setdefault(r, str(p))

    # -- helpers ------------------------------------------------------------------------

    def _chosen(self, ranks: Iterable[int] | None) -> list[tuple[int, int]]:
        """(rank, position) of ``ranks``; by default HTA's ``[0]``, or the lowest rank
        when there is no rank 0 (HTA fails there)."""
        wanted = list(ranks or [])
        if not wanted:
            wanted = [0 if 0 in self.ranks else self.ranks[0]]
        out = []
        for r in wanted:
            if r not in self.ranks:
                raise ValueError(f"no trace of rank {r}: the ranks are {self.ranks}")
            out.append((r, self.ranks.index(r)))
        return out

    def _id_dtypes(self, k: int) -> dict[str, str]:
        """The dtypes HTA gives the stream and correlation columns of trace ``k``: the
        smallest integer type that holds each column's range over the whole trace."""
        ranges = self._set.id_ranges(k)
        return {column: _smallest_int(*ranges[column]) for column in ("stream", "correlation")}

    # -- HTA 0.5's questions ------------------------------------------------------------

    def get_profiler_steps(self) -> list[int]:
        """The profiler step numbers (``ProfilerStep#N``) in the traces, ascending."""
        steps: set[int] = set()
        for each in self._set.profiler_steps():
            steps.update(each)
        return sorted(steps)

    def get_temporal_breakdown(self, visualize: bool = True) -> pd.DataFrame:
        """Per rank, from the first GPU work to the end of the last: idle, compute and
        non-compute time (µs) and their shares (percent, 2 decimals). A rank without GPU
        work (a CPU-only trace, CUPTI counter ranges) has a row of NaN; HTA fails."""
        rows: dict[str, list[Any]] = {c: [] for c in _TEMPORAL}
        for rank, t in zip(self.ranks, self._set.temporal(), strict=True):
            rows["rank"].append(rank)
            for column, key in _TEMPORAL.items():
                if key:
                    rows[column].append(t[key] if t else float("nan"))
        df = frame(rows, {"rank": "int64", **{c: "float64" for c in list(_TEMPORAL)[1:]}})
        df = df.round({c: 2 for c in df.columns if c.endswith("_pctg")})
        if visualize:
            show(df, "Temporal breakdown", "rank", [c for c in df.columns if c.endswith("pctg")])
        return df

    def get_gpu_kernel_breakdown(
        self,
        visualize: bool = True,
        duration_ratio: float = 0.8,
        num_kernels: int = 10,
        include_memory_kernels: bool = True,
        image_renderer: str = "",
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(time by kernel type and overlap, summed over ranks, with its percentage to 1
        decimal; every kernel's sum, max, min, stddev and mean (µs) per rank and type).
        Beyond ``num_kernels`` names of a type, or past the ``duration_ratio`` quantile
        of their cumulative time, kernels go into one ``others`` row, as HTA folds them:
        its statistics are over the folded kernels' totals, and the kept rows then show
        their total as max, min and mean."""
        pd = pandas()
        types: dict[str, float] = {}
        for each in self._set.kernel_types(include_memory_kernels):
            for row in each:
                types[row["kernel_type"]] = types.get(row["kernel_type"], 0.0) + row["sum_us"]
        type_df = frame(
            {"kernel_type": list(types), "sum": [round(v) for v in types.values()]},
            {"kernel_type": "str", "sum": "int64"},
        )
        type_df = type_df.sort_values("sum", ascending=False, ignore_index=True)
        total = type_df["sum"].sum()
        type_df["percentage"] = (type_df["sum"] * 100 / max(total, 1)).astype("float64").round(1)
        parts = []
        for rank, table in zip(self.ranks, self._set.kernels(include_memory_kernels), strict=True):
            kernels = frame(table)
            for kernel_type in _analysed(include_memory_kernels):
                of_type = kernels[kernels["kernel_type"] == kernel_type]
                folded = _fold_others(of_type, duration_ratio, num_kernels)
                folded["kernel_type"] = kernel_type
                folded["rank"] = rank
                parts.append(folded)
        columns = ["name", "sum", "max", "min", "stddev", "mean", "kernel_type", "rank"]
        kernels_df = (
            pd.concat(parts, ignore_index=True) if parts else frame({c: [] for c in columns})
        )
        kernels_df = kernels_df[columns].astype(
            {"name": "str", "kernel_type": "str", "rank": "int64"}
            | {c: "float64" for c in columns[1:6]}
        )
        kernels_df = kernels_df.sort_values(["kernel_type", "name", "rank"], ignore_index=True)
        kernels_df = kernels_df.rename(columns=_IN_US)
        if visualize:
            show(type_df, "Kernel type breakdown", "kernel_type", "percentage")
        return type_df, kernels_df

    def get_gpu_user_annotation_breakdown(
        self,
        use_gpu_annotation: bool = True,
        visualize: bool = True,
        duration_ratio: float = 0.8,
        num_kernels: int = 1000,
        allowlist_patterns: list[str] | None = None,
        image_renderer: str | None = None,
    ) -> pd.DataFrame | None:
        """Every user annotation's (``record_function`` range's) sum, max, min, stddev and
        mean (µs) per rank: as a GPU stream ran it (Kineto's ``gpu_user_annotation``), or
        with ``use_gpu_annotation=False`` as the CPU did (``user_annotation``, the
        ``ProfilerStep#N`` ranges included). Beyond ``num_kernels`` names, those past the
        ``duration_ratio`` quantile of the cumulative time go into one ``others`` row, as
        in :meth:`get_gpu_kernel_breakdown`, except names containing one of
        ``allowlist_patterns`` (plain substrings, as HTA searches them). ``None`` when no
        trace has such annotations."""
        pd = pandas()
        tables = self._set.annotations(use_gpu_annotation)
        if all(t is None for t in tables):
            return None
        columns = ["name", "sum", "max", "min", "stddev", "mean", "rank"]
        keep = None
        if allowlist_patterns is not None:
            keep = re.compile("|".join(re.escape(p) for p in allowlist_patterns))
        parts = []
        for rank, table in zip(self.ranks, tables, strict=True):
            rows = frame(table if table is not None else {c: [] for c in columns[:-1]})
            folded = _fold_others(rows, duration_ratio, num_kernels, keep)
            folded["rank"] = rank
            parts.append(folded)
        df = pd.concat(parts, ignore_index=True)[columns]
        df = df.astype({"name": "str", "rank": "int64"} | {c: "float64" for c in columns[1:6]})
        df = df.sort_values(["rank", "name"], ignore_index=True)
        df = df.rename(columns=_IN_US)
        if visualize:
            show(df, "User annotation distribution on each rank", "name", "sum (us)")
        return df

    def get_idle_time_breakdown(
        self,
        ranks: list[int] | None = None,
        streams: list[int] | None = None,
        visualize: bool = True,
        visualize_pctg: bool = True,
        show_idle_interval_stats: bool = False,
        consecutive_kernel_delay: int = 30,
    ) -> tuple[pd.DataFrame, pd.DataFrame | None]:
        """Per rank (default: rank 0) and stream, the idle time (µs) by cause —
        ``host_wait`` (the launch came after the previous work ended), ``kernel_wait``
        (a gap under ``consecutive_kernel_delay`` µs), ``other`` — and its share of the
        stream's idle time, 2 decimals; with ``show_idle_interval_stats``, the
        statistics of the gaps by cause. Streams come in ascending order (HTA's come in
        the trace's order); a cause whose gaps sum below 0 is 0."""
        pd = pandas()
        sums: dict[str, list[Any]] = {
            c: [] for c in ("rank", "stream", "idle_category", "idle_time")
        }
        stats = []
        stream_dtypes = []
        for rank, k in self._chosen(ranks):
            stream_dtypes.append(self._id_dtypes(k)["stream"])
            table = self._set.idle(k, consecutive_kernel_delay)
            every_stream = table.pop("streams")
            gaps = frame(
                table, {"stream": "int64", "idle_category": "str", "idle_interval": "float64"}
            )
            for stream in streams or every_stream:
                of_stream = gaps[gaps["stream"] == stream]
                for category in IDLE_CATEGORIES:
                    these = of_stream[of_stream["idle_category"] == category]["idle_interval"]
                    if these.empty and category != "other":
                        continue  # HTA lists the causes that occur, and always "other"
                    sums["rank"].append(rank)
                    sums["stream"].append(stream)
                    sums["idle_category"].append(category)
                    sums["idle_time"].append(max(float(these.sum()), 0.0))
                    described = these.describe()
                    stats.append(
                        {"idle_category": category, "rank": rank, "stream": stream}
                        | {c: float(described.get(c, float("nan"))) for c in DESCRIBE}
                    )
        stream_dtype = max(stream_dtypes, key=_int_width, default="int64")
        df = frame(
            sums,
            {
                "rank": "int64",
                "stream": stream_dtype,
                "idle_category": "str",
                "idle_time": "float64",
            },
        )
        per_stream = df.groupby(["rank", "stream"])["idle_time"].transform("sum")
        df["idle_time_ratio"] = df["idle_time"] / per_stream
        df = df.round({"idle_time": 2, "idle_time_ratio": 2})
        interval_stats = None
        if show_idle_interval_stats:
            columns = ["idle_category", "rank", "stream", *DESCRIBE]
            interval_stats = pd.DataFrame(stats, columns=columns)
            interval_stats = interval_stats.astype(
                {"rank": "int64", "stream": stream_dtype} | dict.fromkeys(DESCRIBE, "float64")
            )
            interval_stats = interval_stats.set_index("idle_category").round(2)
            interval_stats["count"] = interval_stats["count"].fillna(0.0)
        if visualize:
            y = "idle_time_ratio" if visualize_pctg else "idle_time"
            show(df, "Idle time breakdown", "stream", y)
        return df, interval_stats

    def get_comm_comp_overlap(self, visualize: bool = True) -> pd.DataFrame:
        """Per rank, the share of communication time during which computation ran,
        percent, 2 decimals; NaN without communication."""
        overlaps = [float("nan") if v is None else v for v in self._set.comm_comp_overlap()]
        df = frame(
            {"rank": self.ranks, "comp_comm_overlap_pctg": overlaps},
            {"rank": "int64", "comp_comm_overlap_pctg": "float64"},
        ).round({"comp_comm_overlap_pctg": 2})
        if visualize:
            show(df, "Communication hidden under computation", "rank", "comp_comm_overlap_pctg")
        return df

    def get_queue_length_time_series(
        self, ranks: list[int] | None = None
    ) -> dict[int, pd.DataFrame]:
        """Per rank (default: rank 0), each change of each stream's queue of launched
        work: +1 at a launch call, -1 when its work starts; ``ts`` in µs from the
        earliest event of all ranks. Ranks without launches are left out. The index
        (``index``) is the event's row in the trace as gpuscope read it."""
        out = {}
        for rank, k in self._chosen(ranks):
            table = self._set.queue(k)
            if not table["ts"]:
                continue
            stream = self._id_dtypes(k)["stream"]
            df = frame(table, {"ts": self._ts_dtype, "queue_length": "int64", "stream": stream})
            out[rank] = df.set_index("index")[["ts", "pid", "tid", "stream", "queue_length"]]
        return out

    def get_queue_length_summary(self, ranks: list[int] | None = None) -> pd.DataFrame | None:
        """The statistics of each stream's queue length over its changes, by rank and
        stream; ``None`` without launches."""
        return self.get_queue_length_summary_from_time_series(
            self.get_queue_length_time_series(ranks)
        )

    def get_queue_length_summary_from_time_series(
        self, queue_length_dict: dict[int, pd.DataFrame]
    ) -> pd.DataFrame | None:
        """:meth:`get_queue_length_summary` of series already taken (the frames are not
        changed; HTA adds a ``rank`` column to them)."""
        return _described(queue_length_dict, ["rank", "stream"], "queue_length")

    def get_time_spent_blocked_on_full_queue(
        self, queue_length_dict: dict[int, pd.DataFrame], max_queue_length: int = 1024
    ) -> pd.DataFrame:
        """Per rank and stream of ``queue_length_dict`` (from
        :meth:`get_queue_length_time_series`), the time (µs) its launch queue held
        ``max_queue_length`` or more, and that time's share of the trace (first event's
        start to last one's). Every such stream has a row (HTA keeps one per rank)."""
        columns: dict[str, list[Any]] = {
            "rank": [],
            "stream": [],
            "duration_at_max_queue_length": [],
            "relative_duration_at_max_queue_length": [],
        }
        for rank, series in queue_length_dict.items():
            span = self._set.start_span(self.ranks.index(rank))
            for stream, of_stream in series.groupby("stream", sort=True):
                lasting = of_stream["ts"].shift(-1) - of_stream["ts"]
                full = lasting[of_stream["queue_length"] >= max_queue_length]
                if full.empty:
                    continue
                columns["rank"].append(rank)
                columns["stream"].append(stream)
                columns["duration_at_max_queue_length"].append(float(full.sum()))
                columns["relative_duration_at_max_queue_length"].append(
                    float(full.sum()) / span if span else float("nan")
                )
        return frame(columns, {"rank": "int64", "stream": "int64"})

    def get_memory_bw_time_series(self, ranks: list[int] | None = None) -> dict[int, pd.DataFrame]:
        """Per rank (default: rank 0), the bandwidth of each kind of copy over time
        (``Memcpy HtoD``, ``Memset``, ...), GB/s, changing at each copy's start and end;
        ``ts`` in µs from the earliest event. A copy's bandwidth is its bytes over its
        duration (HTA reads Kineto's ``memory bandwidth (GB/s)``, absent on ROCm)."""
        out = {}
        for rank, k in self._chosen(ranks):
            table = self._set.bandwidth(k)
            if table["ts"]:
                out[rank] = frame(
                    table, {"ts": "float64", "name": "str", "memory_bw_gbps": "float64"}
                )
        return out

    def get_memory_bw_summary(self, ranks: list[int] | None = None) -> pd.DataFrame | None:
        """The statistics of each kind of copy's bandwidth while copies run, by rank
        and kind; ``None`` without copies."""
        series = self.get_memory_bw_time_series(ranks)
        running = {r: df[df["memory_bw_gbps"] > 0] for r, df in series.items()}
        return _described(running, ["rank", "name"], "memory_bw_gbps")

    def get_cuda_kernel_launch_stats(
        self,
        ranks: list[int] | None = None,
        runtime_cutoff: int = 50,
        launch_delay_cutoff: int = 100,
        include_memory_events: bool = True,
        visualize: bool = True,
    ) -> dict[int, pd.DataFrame]:
        """Per rank (default: rank 0), each launch: its call's duration on the CPU, its
        work's on the GPU and the delay from the call's end to the work's start (µs, 0
        when the work started first). Unlike HTA, ``cuLaunchKernel``,
        ``cuLaunchKernelEx`` and ROCm's launches count too (HTA finds none in Triton and
        ROCm traces). The cutoffs only shape the plots, as in HTA."""
        out = {}
        for rank, k in self._chosen(ranks):
            correlation = self._id_dtypes(k)["correlation"]
            df = frame(
                self._set.launches(k, include_memory_events),
                {
                    "correlation": correlation,
                    "cpu_duration": "float64",
                    "gpu_duration": "float64",
                    "launch_delay": "float64",
                },
            )
            out[rank] = df
            if visualize:
                show(
                    df,
                    f"Launch delay, rank {rank} (cutoff {launch_delay_cutoff} µs)",
                    "correlation",
                    "launch_delay",
                )
        return out

    def get_aten_op_kernels_and_delay(
        self, ranks: list[int] | None = None, sort_by: list[str] | None = None
    ) -> dict[int, pd.DataFrame]:
        """Per rank (default: rank 0), what the ATen operators launch: for each operator
        name and the sequence of kernels one call of it launched (``" -> "``), how many
        calls, the mean delay from the call's start to its first launch
        (``avg_aten_op_launch_delay``) and from that launch to its kernel's start
        (``avg_runtime_delay``), µs to 3 decimals; sorted by ``sort_by`` (default
        ``["occurrence_count"]``), largest first. A launch belongs to the innermost
        ``aten::`` operator that wraps it whole. As in HTA but for: no table is drawn
        (HTA always draws one), ROCm's and the driver's launches count, a launch
        without its kernel is left out (HTA fails), and each rank's frame holds its own
        launches only (HTA's holds those of the ranks before it too)."""
        pd = pandas()
        columns = [
            "aten_op_name",
            "kernel_sequence",
            "occurrence_count",
            "avg_aten_op_launch_delay",
            "avg_runtime_delay",
        ]
        out = {}
        for rank, k in self._chosen(ranks):
            launches = frame(self._set.op_launches(k))
            calls = launches.groupby(["thread", "op", "op_start"], sort=False).agg(
                kernel_sequence=("kernel", " -> ".join),
                launch_delay=("launch_delay", "first"),
                runtime_delay=("runtime_delay", "first"),
            )
            df = (
                calls.groupby(["op", "kernel_sequence"])
                .agg(
                    occurrence_count=("runtime_delay", "count"),
                    avg_aten_op_launch_delay=("launch_delay", "mean"),
                    avg_runtime_delay=("runtime_delay", "mean"),
                )
                .reset_index()
                .rename(columns={"op": "aten_op_name"})
            )
            if df.empty:
                df = pd.DataFrame({c: [] for c in columns})
            df = df[columns].astype(
                {"aten_op_name": "str", "kernel_sequence": "str", "occurrence_count": "int64"}
                | {c: "float64" for c in columns[3:]}
            )
            df = df.sort_values(sort_by or ["occurrence_count"], ascending=False, kind="stable")
            out[rank] = df.round({c: 3 for c in columns[3:]})
        return out

    def get_gpu_kernels_with_user_annotations(
        self, rank: int, expand_names: bool = True, shortern_names: bool = True
    ) -> pd.DataFrame | None:
        """``rank``'s GPU work (kernels, copies, memsets), a row each in trace order, with
        the GPU user annotation it ran under: of the ``gpu_user_annotation`` ranges on its
        device and stream that overlap it, the shortest (the innermost), as HTA assigns
        them; ``""`` under none. ``None`` for a trace without GPU user annotations.
        ``shortern_names`` shortens kernel names as HTA does.

        Unlike HTA, whose frame carries its symbol table's ids (``cat``, ``name``,
        ``user_annotation``) and its own bookkeeping columns, the names here are always
        strings, in ``s_name``, ``s_cat`` and ``s_user_annotation`` (so ``expand_names``
        changes nothing); ``index`` is the event's row as gpuscope read the trace (HTA
        counts every JSON event), and the other columns are HTA's: ``pid``, ``tid``,
        ``ts``, ``dur``, ``end``, ``stream``, ``correlation``, ``bytes``,
        ``external_id`` and ``iteration`` (-1 where there is none)."""
        del expand_names  # the names are strings whatever it says
        columns = self._set.annotated_work(self._chosen([rank])[0][1])
        if columns is None:
            return None
        names = columns.pop("name")
        columns["end"] = [t + d for t, d in zip(columns["ts"], columns["dur"], strict=True)]
        if shortern_names:
            # Names are few and rows many: shorten each name once.
            short = {n: short_name(n) for n in set(names)}
            names = [short[n] for n in names]
        columns["s_name"] = names
        columns["s_cat"] = columns.pop("category")
        columns["s_user_annotation"] = columns.pop("user_annotation")
        order = ["index", "pid", "tid", "ts", "dur", "end", "stream", "correlation", "bytes"]
        order += ["external_id", "iteration", "s_name", "s_cat", "s_user_annotation"]
        ints = ("index", "pid", "tid", "stream", "correlation", "bytes", "external_id")
        dtypes = {c: "int64" for c in (*ints, "iteration")}
        dtypes |= {"ts": self._ts_dtype, "dur": "float64", "end": "float64"}
        return frame({c: columns[c] for c in order}, dtypes)

    def get_cupti_counter_data_with_operators(
        self, ranks: list[int] | None = None
    ) -> list[pd.DataFrame]:
        """Per rank of ``ranks`` (HTA's default: ``[0]``) with kernels that CUPTI's range
        profiler read hardware counters for (``cuda_profiler_range`` events): those
        kernels in order of start, a column per counter (NaN where a kernel lacks it),
        and the CPU operators its launch ran under on the launching thread: ``op_stack``
        (outermost first), ``top_level_op`` and ``bottom_level_op`` (``""`` under none).
        The profiler records no correlation ids, so the k-th kernel is the k-th
        ``cudaLaunchKernel`` call, as HTA pairs them; a rank where the two counts differ
        is left out with a warning (HTA logs an error and leaves it out).

        Unlike HTA (whose call graph fails on the shared counter trace with NumPy 2),
        the columns are ``index`` (gpuscope's row), ``pid``, ``tid``, ``ts``, ``dur``,
        ``name``, ``cat``, the three operator columns and the counters; not HTA's
        symbol ids and bookkeeping columns."""
        frames = []
        for rank, k in self._chosen(ranks):
            table = self._set.counters(k)
            if table is None:
                continue
            if table["kernels"] != table["launches"]:
                warnings.warn(
                    f"rank {rank}: {table['kernels']} counter kernels but "
                    f"{table['launches']} kernel launches, so they cannot be paired",
                    stacklevel=2,
                )
                continue
            stacks: list[list[str]] = table["op_stack"]
            columns: dict[str, Any] = {
                c: table[c] for c in ("index", "pid", "tid", "ts", "dur", "name")
            }
            columns["cat"] = ["cuda_profiler_range"] * len(stacks)
            columns["op_stack"] = stacks
            columns["top_level_op"] = [s[0] if s else "" for s in stacks]
            columns["bottom_level_op"] = [s[-1] if s else "" for s in stacks]
            columns |= table["counters"]
            ints = ("index", "pid", "tid")
            dtypes = {c: "int64" for c in ints} | {"ts": self._ts_dtype, "dur": "float64"}
            frames.append(frame(columns, dtypes))
        return frames

    def get_frequent_cuda_kernel_sequences(
        self,
        operator_name: str,
        output_dir: str,
        min_pattern_len: int = 3,
        rank: int = 0,
        top_k: int = 5,
        visualize: bool = False,
        compress_other_kernels: bool = True,
    ) -> pd.DataFrame:
        """The sequences of GPU work (kernels, copies, memsets) that calls whose name
        contains ``operator_name`` (CPU operators, ``record_function`` ranges, Python
        functions) launched on ``rank``: a row per pattern (``pattern``: the call's name,
        then the work's names in order of start, joined by ``|``), with how many calls
        launched it (``count``) and their total ``GPU kernel duration (us)`` and ``CPU op
        duration (us)``, most frequent first, ties by pattern. A call's work is what the
        runtime and driver calls inside it on its thread launched (every kernel of a
        graph replay); it counts when that is ``min_pattern_len`` pieces or more. A match
        that starts inside another on the same thread is part of that one.

        Writes ``overlaid_<trace file name>`` into ``output_dir``: the trace with each
        event of the ``top_k`` patterns (the calls, the CPU events inside them and their
        GPU work) carrying ``args.Patterns`` (pattern: count), to search for in Perfetto,
        every value copied as written; with ``compress_other_kernels``, the other
        complete events lose their ``args``. No pattern: an empty frame, a warning, and
        no file.

        Departures from HTA: outer calls are found on each thread (HTA takes only the
        matches at the smallest call depth of the whole trace, so a match on a thread
        where it runs deeper is left out); GPU work is kernels, copies and memsets (HTA
        counts any event on a stream, its synchronisations too); durations are floats;
        the overlay keeps every event's name (HTA replaces the others' names with its
        symbol ids); a bad ``operator_name``, ``output_dir`` or ``rank`` raises
        ``ValueError`` (HTA logs an error and returns an empty frame). HTA 0.5's call
        graph fails with NumPy 2."""
        if not operator_name:
            raise ValueError("operator_name must name an operator (a part of its name)")
        if not os.path.isdir(output_dir) or not os.access(output_dir, os.W_OK):
            raise ValueError(f"output_dir is not a writable directory: {output_dir}")
        _, k = self._chosen([rank])[0]
        top_k = max(top_k, 0)
        table = self._set.sequences(k, operator_name, max(min_pattern_len, 0), top_k)
        gpu, cpu = "GPU kernel duration (us)", "CPU op duration (us)"
        df = frame(
            {
                "pattern": table["pattern"],
                "count": table["count"],
                gpu: table["gpu_duration"],
                cpu: table["cpu_duration"],
            },
            {"pattern": "str", "count": "int64", gpu: "float64", cpu: "float64"},
        )
        if df.empty:
            warnings.warn(
                f"rank {rank}: no call of an operator named like {operator_name!r} launched "
                f"{min_pattern_len} or more pieces of GPU work; no overlaid trace written",
                stacklevel=2,
            )
            return df
        marks: dict[int, dict[str, int]] = {}
        for pattern, count, positions in zip(
            table["pattern"], table["count"], table["positions"], strict=True
        ):
            for position in positions:
                marks.setdefault(position, {})[pattern] = count
        source = str(self._set.paths[k])  # the trace the positions are of
        _native.write_trace_overlay(
            source,
            os.path.join(output_dir, "overlaid_" + os.path.basename(source)),
            "Patterns",
            {position: json.dumps(patterns) for position, patterns in marks.items()},
            compress_other_kernels,
        )
        if visualize:
            show(
                df.head(top_k).rename_axis("pattern index").reset_index(),
                f"Top {top_k} frequent patterns for rank {rank}",
                x="pattern index",
                y="count",
            )
        return df

    def generate_trace_with_counters(
        self,
        time_series: enum.Flag | None = None,
        ranks: list[int] | None = None,
        output_suffix: str = "_with_counters",
    ) -> None:
        """Writes, beside each trace of ``ranks`` (default: rank 0, or the lowest rank),
        a copy with counter tracks added at the end of its events: each stream's queue
        length (``Queue Length``, ``id`` the stream) and each kind of copy's bandwidth in
        GB/s (``Memcpy BW``, named ``Memcpy HtoD``, ``Memset``, ...), the series of
        ``get_queue_length_time_series`` and ``get_memory_bw_time_series``, at the times
        of this analysis' clock (whole µs with ``hta_compat``, as HTA's). ``time_series``
        chooses (default: both). The copy's name is the trace's with ``output_suffix``
        before its ``.json`` (``rank0_with_counters.json.gz``); a later ``TraceAnalysis``
        of the directory leaves it out (it would be a second trace of the rank). A rank
        with neither series gets no file, and a warning.

        Unlike HTA, every value of the trace is copied as written (HTA reads them into
        Python floats, which round nanosecond times), a copy is gzipped only when its name
        ends in ``.gz`` (HTA gzips ``.json`` too), and a trace whose name has no
        ``.json`` gets the suffix at its end (HTA writes over the trace)."""
        wanted = _series_names(time_series)
        for rank, k in self._chosen(ranks):
            source = str(self._set.paths[k])
            target = _suffixed(source, output_suffix or "_with_counters")
            queue, copies = "QUEUE_LENGTH" in wanted, "MEMCPY_BANDWIDTH" in wanted
            if not self._set.write_counters(k, target, queue, copies):
                warnings.warn(
                    f"rank {rank}: no queue or copy to make counters of; no file written",
                    stacklevel=2,
                )

    def get_potential_stragglers(
        self,
        profiler_steps: list[int] | None = None,
        num_candidates: int = 2,
        visualize: bool = False,
        straggler_identification_impl: Any = None,
    ) -> list[int]:
        """The ranks gpuscope's straggler rule names (the README's: compute time 5 % or
        more above the ranks' median), slowest first, at most ``num_candidates``. The
        compute time is the analysed window's, or with ``profiler_steps`` the mean time
        computation kernels ran in those of the steps a rank has (a step no rank has is a
        ``ValueError``). ``visualize`` plots each rank's compute time.

        Unlike HTA, which ranks the ranks by when they start the communication kernel
        whose start varies most and always returns ``num_candidates`` of them, a rank is
        named here only when the rule names it: a balanced job gets ``[]``. HTA's
        ``straggler_identification_impl`` (a function of its frames) is not taken."""
        if straggler_identification_impl is not None:
            raise ValueError(
                "gpuscope.TraceAnalysis.get_potential_stragglers applies gpuscope's "
                "straggler rule; it takes no straggler_identification_impl"
            )
        if profiler_steps is None:
            compute = {r["rank"]: r["compute_us"] for r in self._compared_ranks()}
        else:
            steps = self.get_step_overview()
            wanted = {f"ProfilerStep#{n}": n for n in profiler_steps}
            present = set(steps["step"])
            absent = sorted(n for name, n in wanted.items() if name not in present)
            if absent:
                raise ValueError(
                    f"no rank has profiler steps {absent}: the steps are "
                    f"{self.get_profiler_steps()}"
                )
            chosen = steps[steps["step"].isin(wanted)]
            compute = chosen.groupby("rank")["kernel (us)"].mean().to_dict()
        if visualize:
            df = frame({"rank": list(compute), "compute (us)": list(compute.values())})
            show(df, "Compute time per rank", "rank", "compute (us)")
        named = _native.stragglers([(int(r), float(us)) for r, us in compute.items()])
        return [rank for rank, _ in named[: max(num_candidates, 0)]]

    def _compared_ranks(self) -> list[dict[str, Any]]:
        """Each rank's figures in ``gpuscope trace``'s comparison of the ranks (none for
        a single rank)."""
        comparison = self._document.get("rank_comparison")
        return comparison["ranks"] if comparison else []

    def all_profiler_steps(self, rank: int) -> list[int]:
        """Every profiler step number of ``rank``'s trace, the last one included."""
        return list(self._set.all_steps(self._chosen([rank])[0][1]))

    def iteration_ops(self, rank: int, iterations: list[int], device: str = "ALL") -> pd.DataFrame:
        """``rank``'s events in the profiler steps ``iterations`` by name: count and total
        duration (µs); ``device``: ``CPU`` (no CUDA stream), ``GPU`` or ``ALL``. A CPU
        event belongs to the step it starts in, GPU work to its launch's step (what
        :class:`gpuscope.TraceDiff` compares)."""
        k = self._chosen([rank])[0][1]
        return frame(self._set.ops(k, iterations, device), {"name": "str", "counts": "int64"})

    # -- beyond HTA ---------------------------------------------------------------------

    @property
    def _document(self) -> dict[str, Any]:
        """The ``gpuscope trace --format json`` document (``gpuscope.trace/1``), made
        once."""
        if self._doc is None:
            self._doc = self._set.document()
        return self._doc

    def get_step_overview(self) -> pd.DataFrame:
        """Per rank and profiler step, where its time went (µs): each instant goes to the
        first of kernel, memcpy, memset, communication, runtime, data loader, CPU
        execution that ran then, else other; the runtime time split by what its calls
        did (``runtime_waiting (us)``, …); and the CPU's time in the data loader whatever
        the GPU did. Empty without ``ProfilerStep#N``."""
        columns: dict[str, list[Any]] = {"rank": [], "step": [], "duration (us)": []}
        columns |= {f"{c} (us)": [] for c in _native.STEP_CATEGORIES}
        columns |= {f"runtime_{p} (us)": [] for p in _native.RUNTIME_PARTS}
        columns["dataloader_cpu (us)"] = []
        for rank in self._document["ranks"]:
            for step in (rank["steps"] or {"steps": []})["steps"]:
                columns["rank"].append(rank["rank"])
                columns["step"].append(step["name"])
                columns["duration (us)"].append(step["duration_us"])
                for c, us in zip(_native.STEP_CATEGORIES, step["breakdown_us"], strict=True):
                    columns[f"{c} (us)"].append(us)
                for p, us in zip(_native.RUNTIME_PARTS, step["runtime_us"], strict=True):
                    columns[f"runtime_{p} (us)"].append(us)
                columns["dataloader_cpu (us)"].append(step["dataloader_cpu_us"])
        return frame(columns, {"rank": "int64", "step": "str"})

    def get_step_verdicts(self) -> pd.DataFrame:
        """Per rank, what the mean step says by gpuscope's fixed thresholds (the
        README's step verdicts): the kind, its figure (percent of the step), the runtime
        call a verdict on runtime calls names and the collective a verdict on
        communication names (``all_reduce``, ``exchange``, ...; else ``None``) and the
        advice."""
        columns: dict[str, list[Any]] = {
            "rank": [],
            "kind": [],
            "percent": [],
            "call": [],
            "collective": [],
            "advice": [],
        }
        for rank in self._document["ranks"]:
            for v in (rank["steps"] or {"verdicts": []})["verdicts"]:
                columns["rank"].append(rank["rank"])
                for key in ("call", "collective"):
                    columns[key].append(v.get(key))
                for key in ("kind", "percent", "advice"):
                    columns[key].append(v[key])
        return frame(
            columns,
            # "call" and "collective" keep None where a verdict names none (a str dtype
            # would not).
            {"rank": "int64", "kind": "str", "percent": "float64", "advice": "str"},
        )

    def get_gpu_gaps(self) -> pd.DataFrame:
        """Per rank, the largest gaps on the GPU timeline (no stream busy) and what the
        CPU ran meanwhile: one row per gap and CPU operator, by overlap (µs, start from
        the first GPU work)."""
        columns: dict[str, list[Any]] = {
            c: []
            for c in ("rank", "start (us)", "duration (us)", "cpu_name", "cpu_kind", "overlap (us)")
        }
        for rank in self._document["ranks"]:
            for gap in rank["largest_gaps"]:
                for cpu in gap["cpu"] or [{"name": None, "kind": None, "overlap_us": 0.0}]:
                    columns["rank"].append(rank["rank"])
                    columns["start (us)"].append(gap["start_us"])
                    columns["duration (us)"].append(gap["duration_us"])
                    columns["cpu_name"].append(cpu["name"])
                    columns["cpu_kind"].append(cpu["kind"])
                    columns["overlap (us)"].append(cpu["overlap_us"])
        return frame(columns, {"rank": "int64"})

    def get_operators(self, by: str = "gpu_time") -> pd.DataFrame:
        """Per rank, CPU operators ranked ``by`` ``"gpu_time"`` (the GPU time of the
        kernels they launched), ``"self_time"`` or ``"shapes"`` (by name and input
        shapes, from ``record_shapes=True`` traces): count, total, self and GPU time
        (µs)."""
        keys = {"gpu_time": "by_gpu_time", "self_time": "by_self_time", "shapes": "by_shapes"}
        if by not in keys:
            raise ValueError(f"by must be one of {sorted(keys)}, not {by!r}")
        fields = ("name", "input_shapes", "count", "total_us", "self_us", "gpu_us")
        columns: dict[str, list[Any]] = {"rank": [], **{f: [] for f in fields}}
        for rank in self._document["ranks"]:
            for op in rank["operators"][keys[by]]:
                columns["rank"].append(rank["rank"])
                for f in fields:
                    columns[f].append(op[f])
        df = frame(columns, {"rank": "int64", "count": "int64"})
        return df.rename(
            columns={"total_us": "total (us)", "self_us": "self (us)", "gpu_us": "gpu (us)"}
        )

    def get_memory_timeline(self) -> pd.DataFrame:
        """Per rank and device, the bytes the profiler's ``[memory]`` events say were
        allocated over time (``profile_memory=True`` traces), µs from the first event:
        the allocator's own count (``Total Allocated``, what was allocated before the
        trace included) where the events carry it, else their sum from the trace's
        start."""
        columns: dict[str, list[Any]] = {"rank": [], "device": [], "ts (us)": [], "bytes": []}
        for rank in self._document["ranks"]:
            for device in rank["memory"]:
                points = device["timeline"]
                columns["rank"] += [rank["rank"]] * len(points)
                columns["device"] += [device["device"]] * len(points)
                columns["ts (us)"] += [p[0] for p in points]
                columns["bytes"] += [p[1] for p in points]
        return frame(
            columns, {"rank": "int64", "device": "str", "ts (us)": "float64", "bytes": "int64"}
        )

    def get_trace_health(self) -> pd.DataFrame:
        """What makes the traces' figures incomplete or misleading (dropped kernels,
        clock skew, CUDA graphs, no shapes, ...), one row each; empty when nothing
        does."""
        issues = self._document["health"]
        columns = {k: [i[k] for i in issues] for k in ("kind", "rank", "count", "detail")}
        return frame(columns, {"kind": "str", "rank": "Int64", "count": "int64", "detail": "str"})

    @property
    def _ts_dtype(self) -> str:
        return "int64" if self.hta_compat else "float64"

    def critical_path_analysis(
        self,
        rank: int,
        annotation: str,
        instance_id: int | tuple[int, int] | None,
    ) -> tuple[CriticalPathGraph, bool]:
        """The critical path of ``rank`` over the ``instance_id``-th event on a CPU
        thread whose name contains ``annotation`` (counted from 0 in order of start;
        ``None``: the first; a ``(first, last)`` pair: from the start of one to the end
        of the other; ``annotation=""``: the whole trace), as HTA's pair ``(graph, True)``.
        ``graph.summary()`` gives the share of the path's time bound by the CPU, GPU
        compute, communication, gaps between kernels and kernel launches;
        ``graph.get_critical_path_breakdown()`` the path edge by edge.

        The path is the longest through a graph of the window's moments: CPU calls
        (operators, runtime and driver calls) that start in it, nested on their thread,
        and the GPU work they launched; edges for launches, gaps between kernels on a
        stream, waits of blocking calls for GPU work, and ``cudaStreamWaitEvent``. The
        README's "The critical path of a step" says how it is built and where it departs from HTA:
        blocking calls wait for the GPU work that finished last while they ran (HTA needs
        the trace's ``cuda_sync`` events, which most traces lack), ``cudaEventQuery`` is
        not blocking, a stream busy with work launched before the window is not idle, and
        times are exact. A window that cannot be found, or a graph with a cycle, raises
        ``ValueError``, an ``instance_id`` of another type ``TypeError`` (HTA logs an
        error and returns ``None``). HTA 0.5's own method
        fails with pandas 3."""
        _, k = self._chosen([rank])[0]
        first, last = window_of(annotation, instance_id)
        table = self._set.critical_path(k, (annotation, first, last))
        return CriticalPathGraph(rank, annotation, first, last, table), True

    def overlay_critical_path_analysis(
        self,
        rank: int,
        critical_path_graph: CriticalPathGraph,
        output_dir: str,
        only_show_critical_events: bool = True,
        show_all_edges: bool = False,
    ) -> str:
        """Writes ``overlaid_critical_path_<trace file name>`` into ``output_dir`` (made
        if missing) and returns its path: the trace with ``args.critical = 1`` on the
        events the path runs through, and arrows (flow events, ``name`` ``critical_path``,
        ``cat`` the edge's type, ``args.weight`` in µs) for its launches, dependencies
        and waits (a blocking call's on GPU work, work's on another stream). With
        ``only_show_critical_events`` the copy keeps, of the complete events gpuscope
        reads, only those on the path, the CPU annotations (``user_annotation``) and the
        Python functions; without it, ``show_all_edges`` draws every edge of the graph
        (``args.critical`` says which are on the path). Every value is copied as written
        (HTA goes through Python floats, which round nanosecond times)."""
        if not isinstance(critical_path_graph, CriticalPathGraph):
            raise TypeError(
                "critical_path_graph must be what gpuscope's critical_path_analysis returned"
            )
        if critical_path_graph.rank != rank:
            raise ValueError(
                f"critical_path_graph is of rank {critical_path_graph.rank}, not {rank}"
            )
        _, k = self._chosen([rank])[0]
        os.makedirs(output_dir, exist_ok=True)
        source = str(self._set.paths[k])
        target = os.path.join(output_dir, "overlaid_critical_path_" + os.path.basename(source))
        g = critical_path_graph
        window = (g.annotation, g.first, g.last)
        self._set.write_critical_path(k, window, target, only_show_critical_events, show_all_edges)
        return target


def _series_names(time_series: enum.Flag | None) -> set[str]:
    """The names of the members set in ``time_series`` (all of ``TimeSeriesTypes`` for
    ``None``); a flag of HTA's own class is read by its members' names."""
    if time_series is None:
        return {m.name for m in TimeSeriesTypes if m.name}
    if not isinstance(time_series, enum.Flag):
        raise TypeError(f"time_series must be a TimeSeriesTypes flag, not {time_series!r}")
    names = {m.name for m in type(time_series) if m in time_series and m.name}
    known = {m.name for m in TimeSeriesTypes if m.name}
    if not names or not names <= known:
        raise ValueError(f"time_series must be made of {sorted(known)}, not {time_series!r}")
    return names


def _suffixed(path: str, suffix: str) -> str:
    """``path`` with ``suffix`` before the first ``.json`` of its file name, or at its
    end when the name has none."""
    head, name = os.path.split(path)
    if ".json" in name:
        return os.path.join(head, name.replace(".json", suffix + ".json", 1))
    return path + suffix


# column -> key of the engine's temporal breakdown ("" for the rank)
_TEMPORAL = {
    "rank": "",
    "idle_time(us)": "idle_time_us",
    "compute_time(us)": "compute_time_us",
    "non_compute_time(us)": "non_compute_time_us",
    "kernel_time(us)": "kernel_time_us",
    "idle_time_pctg": "idle_time_percent",
    "compute_time_pctg": "compute_time_percent",
    "non_compute_time_pctg": "non_compute_time_percent",
}


_INTS = ("int8", "int16", "int32", "int64")


def _int_width(dtype: str) -> int:
    return _INTS.index(dtype)


def _smallest_int(lo: int, hi: int) -> str:
    """The smallest signed integer dtype that holds ``lo`` to ``hi`` (pandas'
    ``downcast="integer"``, as HTA stores ids)."""
    for dtype, bits in zip(_INTS, (8, 16, 32, 64), strict=True):
        if -(2 ** (bits - 1)) <= lo and hi < 2 ** (bits - 1):
            return dtype
    return "int64"


def _analysed(memory: bool) -> list[str]:
    return ["COMPUTATION", "COMMUNICATION", *(["MEMORY"] if memory else [])]


# The statistics' columns as HTA names them in its breakdowns.
_IN_US = {"sum": "sum (us)", "max": "max (us)", "min": "min (us)", "mean": "mean (us)"}


def _fold_others(
    kernels: pd.DataFrame,
    duration_ratio: float,
    num_kernels: int,
    keep: re.Pattern[str] | None = None,
) -> pd.DataFrame:
    """HTA's folding of a type's small kernels into ``others`` (see
    :meth:`TraceAnalysis.get_gpu_kernel_breakdown`), over the engine's per-name rows
    (largest total first); names ``keep`` finds stay apart."""
    rows = kernels[["name", "sum", "max", "min", "mean", "stddev"]].reset_index(drop=True)
    if len(rows) <= num_kernels:
        return rows
    cumsum = rows["sum"].cumsum()
    folded = (cumsum > cumsum.quantile(duration_ratio)) | (rows.index >= num_kernels)
    if keep is not None:
        folded &= ~rows["name"].str.contains(keep)
    names = rows["name"].where(~folded, "others")
    grouped = rows["sum"].groupby(names).agg(["sum", "max", "min", "mean", "std"])
    grouped = grouped.rename(columns={"std": "stddev"}).fillna({"stddev": 0.0})
    return grouped.reset_index(names="name")


def _described(series: dict[int, pd.DataFrame], by: list[str], column: str) -> pd.DataFrame | None:
    """``describe()`` of ``column`` over the frames of ``series`` grouped ``by`` (rank
    first); ``None`` when there are none."""
    if not series:
        return None
    pd = pandas()
    parts = [
        df[[c for c in by if c != "rank"] + [column]].assign(rank=rank)
        for rank, df in series.items()
    ]
    whole = pd.concat(parts, ignore_index=True)
    return whole[[*by, column]].groupby(by).describe()
