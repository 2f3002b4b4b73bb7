"""Type stubs of gpuscope's native module (kept by hand; checked by mypy.stubtest)."""

from collections.abc import Mapping, Sequence
from os import PathLike
from types import TracebackType
from typing import Any, Self, final

from typing_extensions import disjoint_base

from gpuscope._types import EventData

__all__ = [
    "MAX_HISTOGRAM_BINS",
    "RUNTIME_PARTS",
    "RUN_DIR_VAR",
    "STEP_CATEGORIES",
    "BadInputError",
    "EventWriter",
    "GpuscopeError",
    "ProcessSampler",
    "RunWriter",
    "TraceSet",
    "WriterError",
    "__version__",
    "analyze_snapshot",
    "analyze_trace",
    "heap_in_use",
    "instances_of",
    "memory_record_keys",
    "memory_timeline",
    "merge_rank_summaries",
    "rank_summary",
    "read_events",
    "read_run_tables",
    "run_cli",
    "snapshot_tables",
    "state_fingerprint",
    "stragglers",
    "summarize_trace",
    "tensors_fingerprint",
    "write_trace_overlay",
]
__version__: str
MAX_HISTOGRAM_BINS: int
"""The most equal-width buckets ``EventWriter.add_histogram`` writes (``bins=``)."""
RUN_DIR_VAR: str
"""The environment variable through which ``gpuscope run`` names the run directory."""
STEP_CATEGORIES: list[str]
"""The step overview's categories, in the order of its ``breakdown_us``."""
RUNTIME_PARTS: list[str]
"""What the runtime column's calls did, in the order of a step's ``runtime_us``."""

class GpuscopeError(Exception):
    """Base class of every error gpuscope raises."""

class BadInputError(GpuscopeError):
    """An input file that cannot be used: wrong kind, corrupt, truncated beyond use."""

class WriterError(GpuscopeError):
    """A writer could not write (disk full, directory removed) or was written to after
    close()."""

@disjoint_base
class EventWriter:
    """TensorBoard event writer with SummaryWriter's method names."""

    def __new__(
        cls,
        log_dir: str | PathLike[str] | None = None,
        comment: str = "",
        max_queue: int = 10,
        flush_secs: float = 2.0,
        filename_suffix: str = "",
    ) -> Self: ...
    @property
    def log_dir(self) -> str: ...
    @property
    def path(self) -> str: ...
    def get_logdir(self) -> str: ...
    def add_scalar(
        self,
        tag: str,
        scalar_value: Any,
        global_step: int | None = None,
        walltime: float | None = None,
        new_style: bool = False,
        double_precision: bool = False,
    ) -> None: ...
    def add_scalars(
        self,
        main_tag: str,
        tag_scalar_dict: dict[str, Any],
        global_step: int | None = None,
        walltime: float | None = None,
    ) -> None: ...
    def add_text(
        self,
        tag: str,
        text_string: str,
        global_step: int | None = None,
        walltime: float | None = None,
    ) -> None: ...
    def _add_histogram_values(
        self,
        tag: str,
        values: list[float],
        global_step: int | None = None,
        bins: int | str | None = None,
        walltime: float | None = None,
        max_bins: int | None = None,
    ) -> None: ...
    def add_custom_scalars(self, layout: Mapping[str, Mapping[str, Sequence[Any]]]) -> None: ...
    def flush(self) -> None:
        """Waits until everything written so far is in the files; after ``close()`` it does
        nothing (as SummaryWriter's), while the ``add_*`` methods raise WriterError."""
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool: ...

@final
class RunWriter:
    """Writes memory records to profiles/memory.jsonl, the tensor_profile text log and TensorBoard."""

    def __new__(
        cls,
        run_dir: str | PathLike[str],
        rank: int | None = None,
        tensorboard: bool = True,
        text_log: bool = True,
        flush_secs: float = 2.0,
    ) -> Self: ...
    @property
    def paths(self) -> list[str]: ...
    def write(self, record: dict[str, Any]) -> None: ...
    def write_nonfinite(self, event: dict[str, Any], report: bool = True) -> str | None: ...
    def add_scalar(self, tag: str, value: float, step: int) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...

@final
class ProcessSampler:
    """Samples this process: rss_bytes, heap_bytes, cpu_percent, ram_percent."""

    def __new__(cls) -> Self: ...
    def sample(self) -> dict[str, Any]: ...

def heap_in_use() -> int | None: ...
def memory_record_keys() -> dict[str, list[str]]: ...
def instances_of(objects: list[Any], base: type) -> list[Any]: ...
def tensors_fingerprint(tensors: list[Any], with_grad: bool) -> int: ...
def state_fingerprint(state: Mapping[Any, Any], tensor_type: type) -> int: ...
def read_events(
    path: str | PathLike[str],
    tags: list[str] | None = None,
    keep_going: bool = False,
) -> EventData:
    """Reads an event file or a log directory (each sub-directory is a run).

    With ``tags``, only those tags are returned (``KeyError`` if one is found nowhere).
    With ``keep_going``, a damaged record ends that file instead of raising.
    A file with ``records == 0`` is empty or cut inside its first record (a writer that
    has not flushed yet): it is listed, not an error, so that a run being written can be
    polled; ``gpuscope tb`` on the command line refuses a path where every file is so.
    """

def run_cli(argv: list[str]) -> int: ...
def summarize_trace(
    path: str | PathLike[str],
    html: str | PathLike[str] | None = None,
    width: int = 100,
) -> str:
    """A few lines on each rank of the trace(s) at ``path`` (a file or a directory of
    ranks); with ``html``, also writes the ``gpuscope trace --format html`` page there."""

def read_run_tables(path: str | PathLike[str]) -> dict[str, dict[str, list[Any]]]:
    """The tables of the run directory at ``path`` as ``{table: {column: [values]}}``:
    ``records``, ``sections``, ``gradients``, ``nonfinite``, ``gpu_samples``,
    ``findings``; a table the run has no rows for is absent."""

def snapshot_tables(
    source: str | PathLike[str] | bytes, frames: int = 1, *, trace: bool = True
) -> dict[str, dict[str, list[Any]]]:
    """The tables of a snapshot (a path, or a pickle's bytes) as
    ``{table: {column: [values]}}``: every call site, not the report's top ones."""

def rank_summary(path: str | PathLike[str], hta_clock: bool = False) -> dict[str, Any]:
    """The ``gpuscope.rank_summary/1`` summary of one trace file."""

def merge_rank_summaries(summaries: list[Any]) -> dict[str, Any]:
    """The ``gpuscope.ranks/1`` merge of rank summaries."""

def stragglers(compute_us: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """The stragglers among (rank, compute time µs) pairs by gpuscope's rule: (rank,
    percent over the median), slowest first."""

def memory_timeline(path: str | PathLike[str]) -> dict[str, Any]:
    """torch.profiler's memory timeline export (raw or coalesced), every moment as
    columns: ``categories`` (names), ``time_ms`` (little-endian float64 bytes) and
    ``bytes`` (little-endian int64 bytes, one per category)."""

def analyze_trace(path: str | PathLike[str]) -> dict[str, Any]:
    """The ``gpuscope trace --format json`` document of the trace(s) at ``path``."""

def write_trace_overlay(
    source: str | PathLike[str],
    target: str | PathLike[str],
    member: str,
    marks: dict[int, str],
    drop_other_args: bool,
) -> None:
    """Copies the trace ``source`` to ``target`` (gzipped for a ``.gz`` name), setting
    ``args[member]`` of the event at each position of ``marks`` to the JSON given for it;
    with ``drop_other_args``, the other complete events lose their ``args``. Values are
    copied as written."""

@final
class TraceSet:
    """Traces loaded once and asked one question at a time (``gpuscope.TraceAnalysis``):
    each method returns plain columns. Rank ``k`` is the ``k``-th trace, in rank order."""

    def __new__(
        cls,
        paths: Sequence[str | PathLike[str]],
        ranks: Sequence[int] | None = None,
        hta_clock: bool = True,
        last_step: bool = False,
    ) -> TraceSet: ...
    @property
    def ranks(self) -> list[int]: ...
    @property
    def paths(self) -> list[str]: ...
    def profiler_steps(self) -> list[list[int]]: ...
    def temporal(self) -> list[dict[str, float] | None]: ...
    def kernel_types(self, memory: bool) -> list[list[dict[str, Any]]]: ...
    def kernels(self, memory: bool) -> list[dict[str, list[Any]]]: ...
    def annotations(self, gpu: bool) -> list[dict[str, list[Any]] | None]: ...
    def comm_comp_overlap(self) -> list[float | None]: ...
    def idle(self, k: int, kernel_wait_us: int) -> dict[str, list[Any]]: ...
    def queue(self, k: int) -> dict[str, list[Any]]: ...
    def bandwidth(self, k: int) -> dict[str, list[Any]]: ...
    def launches(self, k: int, memory: bool) -> dict[str, list[Any]]: ...
    def op_launches(self, k: int) -> dict[str, list[Any]]: ...
    def annotated_work(self, k: int) -> dict[str, list[Any]] | None: ...
    def counters(self, k: int) -> dict[str, Any] | None: ...
    def sequences(
        self, k: int, operator: str, min_len: int, marked: int
    ) -> dict[str, list[Any]]: ...
    def write_counters(
        self, k: int, target: str, queue_length: bool, copy_bandwidth: bool
    ) -> int: ...
    def critical_path(self, k: int, window: tuple[str, int, int]) -> dict[str, Any]: ...
    def write_critical_path(
        self,
        k: int,
        window: tuple[str, int, int],
        target: str,
        only_critical: bool,
        all_edges: bool,
    ) -> None: ...
    def all_steps(self, k: int) -> list[int]: ...
    def ops(self, k: int, iterations: Sequence[int], device: str) -> dict[str, list[Any]]: ...
    def start_span(self, k: int) -> float: ...
    def id_ranges(self, k: int) -> dict[str, tuple[int, int]]: ...
    def document(self) -> dict[str, Any]: ...

def analyze_snapshot(
    source: str | PathLike[str] | bytes,
    frames: int = 1,
    top: int = 15,
    *,
    trace: bool = True,
) -> dict[str, Any]:
    """The ``gpuscope snapshot --format json`` report of a CUDA allocator snapshot.

    ``source`` is the path of a ``torch.cuda.memory._dump_snapshot()`` pickle or the
    bytes of one. Nothing in the pickle is executed: one that would import or call code
    raises ``BadInputError`` naming the refused opcode.

    ``trace=False`` (``--no-trace``) reads only the state at the dump: ``stats``,
    ``fragmentation`` and ``now``, the same as a whole read gives, several times faster.
    Reading stops at the trace, whose opcodes are only checked (a file cut short, or
    holding code, is refused all the same); ``trace_skipped`` is then true and the
    trace's parts are empty.
    """
