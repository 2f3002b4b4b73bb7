"""CUDA allocator snapshots: at chosen iterations, and when an out-of-memory error hits.

Both rest on torch's allocator history (``torch.cuda.memory._record_memory_history``) and
``torch.cuda.memory._dump_snapshot``; the pickles land in ``<run>/snapshots/`` named as
docs/run-dir.md says, and ``gpuscope snapshot`` reads them. Without CUDA there is no
allocator to snapshot: the calls say so once and do nothing else.
"""

from __future__ import annotations

import contextlib
import json
import time
import traceback
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self

import torch

from gpuscope._run_dir import default_run_dir
from gpuscope._warnings import warn_user
from gpuscope.memory.allocator import allocator_stats

if TYPE_CHECKING:
    from gpuscope.memory.profiler import MemoryProfiler

__all__ = [
    "dump_snapshot",
    "iteration_snapshot_path",
    "oom_guard",
    "oom_snapshot_path",
    "start_history",
]

HISTORY_ENTRIES = 100_000


def iteration_snapshot_path(run_dir: Path, iteration: int, rank: int | None) -> Path:
    """``snapshots/[rank<R>.]iter<N>.pickle``."""
    ranked = f"rank{rank}." if rank is not None else ""
    return run_dir / "snapshots" / f"{ranked}iter{iteration}.pickle"


def oom_snapshot_path(run_dir: Path, stamp: str, rank: int | None) -> Path:
    """``snapshots/oom.[rank<R>.]<stamp>.pickle``."""
    ranked = f"rank{rank}." if rank is not None else ""
    return run_dir / "snapshots" / f"oom.{ranked}{stamp}.pickle"


def start_history(max_entries: int = HISTORY_ENTRIES) -> bool:
    """Starts recording allocator history; False (and no error) without CUDA."""
    if not torch.cuda.is_available():
        return False
    torch.cuda.memory._record_memory_history(max_entries=max_entries)
    return True


def dump_snapshot(path: Path) -> bool:
    """Writes the allocator snapshot to ``path``; False without CUDA."""
    if not torch.cuda.is_available():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.cuda.memory._dump_snapshot(str(path))  # type: ignore[no-untyped-call]
    return True


class oom_guard(contextlib.ContextDecorator):
    """Context manager and decorator: on ``torch.cuda.OutOfMemoryError`` inside it, writes
    the allocator snapshot, the current memory record and a short report into
    ``<run>/snapshots/``, then lets the error go on.

    >>> with gpuscope.oom_guard("runs/exp1", profiler=scope):   # doctest: +SKIP
    ...     train()
    """

    def __init__(
        self,
        run_dir: str | Path | None = None,
        profiler: MemoryProfiler | None = None,
        max_entries: int = HISTORY_ENTRIES,
    ) -> None:
        from gpuscope.memory.profiler import distributed_rank

        self.run_dir = (
            Path(run_dir)
            if run_dir is not None
            else (profiler.run_dir if profiler is not None else default_run_dir())
        )
        self.profiler = profiler
        self.max_entries = max_entries
        rank, world = distributed_rank()
        self.rank = rank if world > 1 else None
        self.report: Path | None = None

    def __enter__(self) -> Self:
        try:
            recording = start_history(self.max_entries)
        except Exception as e:  # noqa: BLE001 — forensics must never stop training
            warn_user(f"gpuscope: cannot record allocator history: {e}", RuntimeWarning)
            recording = False
        if not recording:
            warn_user(
                "gpuscope.oom_guard: CUDA is not available, so there is no allocator history "
                "to snapshot; an out-of-memory error will still get a report",
                RuntimeWarning,
            )
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        if exc is not None and isinstance(exc, torch.cuda.OutOfMemoryError):
            try:
                self.report = self._write_forensics(exc)
            except Exception as e:  # noqa: BLE001 — the user's error matters more than ours
                warn_user(f"gpuscope: OOM report failed: {e}", RuntimeWarning)
        return False

    def _write_forensics(self, exc: BaseException) -> Path:
        stamp = time.strftime("%Y%m%d_%H%M%S")
        snapshot = oom_snapshot_path(self.run_dir, stamp, self.rank)
        has_snapshot = dump_snapshot(snapshot)
        record: dict[str, Any] | None = None
        if self.profiler is not None:
            record = self.profiler.record(self.profiler.last_iteration, None)
            self.profiler.flush()
        report = snapshot.with_suffix(".txt")
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(_report_text(exc, snapshot if has_snapshot else None, record))
        return report


def _report_text(exc: BaseException, snapshot: Path | None, record: dict[str, Any] | None) -> str:
    mib = 1 << 20
    lines = [
        "gpuscope: out of memory",
        f"time: {time.strftime('%Y-%m-%d %H:%M:%S')}",
        f"error: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}",
        "",
    ]
    device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    stats = allocator_stats(device)
    if stats is not None:
        lines.append(
            f"allocated: {stats['allocated_bytes'] / mib:.1f} MB, "
            f"reserved: {stats['reserved_bytes'] / mib:.1f} MB, "
            f"peak allocated: {stats['peak_allocated_bytes'] / mib:.1f} MB"
        )
        lines.append(
            f"device free: {stats['device_free_bytes'] / mib:.1f} of "
            f"{stats['device_total_bytes'] / mib:.1f} MB"
        )
    else:
        lines.append("no CUDA allocator figures (CUDA not available)")
    if record is not None:
        lines += ["", f"at iteration {record['iteration']}, by category:"]
        for name, value in record["categories_bytes"].items():
            if value is not None:
                lines.append(f"  {name:<16} {value / mib:10.1f} MB")
        if record["large_tensors"]:
            lines.append("largest tensors:")
            for t in record["large_tensors"]:
                lines.append(
                    f"  {t['bytes'] / mib:10.1f} MB {t['name'] or '?'} "
                    f"shape={tuple(t['shape'])} dtype={t['dtype']}"
                )
    lines += [
        "",
        f"allocator snapshot: {snapshot}" if snapshot else "allocator snapshot: none (no CUDA)",
        "next: gpuscope snapshot <snapshot> shows what was alive at the peak, by call site",
        "",
        "traceback (most recent call last):",
        *(line.rstrip() for line in traceback.format_tb(exc.__traceback__)),
    ]
    if record is not None:
        lines += ["", "record:", json.dumps(record, indent=1)]
    return "\n".join(lines) + "\n"
