"""Helpers shared by the test modules (plain functions; the fixtures are in conftest.py).

Nothing here uses gpuscope to judge gpuscope: record boundaries are found by parsing the
TFRecord framing directly, and event files are read back with TensorBoard's own reader.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
# The shared data sits next to the repository: <repo>/../shared/data.
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
TFEVENTS_DATA = SHARED_DATA / "tfevents"
# The profiling guide whose `profiling:` section and command line test_profiling.py reads
# (../shared/<guides>/004_*.txt, beside the data; the directory's name is the shared
# layout's, not ours).
PROFILING_GUIDES = sorted((REPO_ROOT.parent / "shared" / "seeds").glob("004_*.txt"))


def shared_data_required() -> bool:
    """Whether missing shared data fails the run instead of skipping the tests that need
    it: under ``make test`` (which sets ``GPUSCOPE_REQUIRE_SHARED=1``) and in CI
    (``CI=true``). A plain ``pytest`` run elsewhere skips them."""
    required = os.environ.get("GPUSCOPE_REQUIRE_SHARED", "").strip().lower()
    ci = os.environ.get("CI", "").strip().lower()
    return required not in ("", "0", "false", "no") or ci in ("true", "1")


def shared_data_absent(path: Path) -> NoReturn:
    """The test cannot run without ``path``: skipped, or failed where the shared data is
    required (``shared_data_required``)."""
    message = f"shared data absent: {path} (expected at <repo>/../shared/data)"
    if shared_data_required():
        pytest.fail(message + "; GPUSCOPE_REQUIRE_SHARED=1 or CI=true makes it required")
    pytest.skip(message)


def shared_file(path: Path) -> Path:
    """``path`` of the shared data, or the test is skipped (failed where the shared data
    is required) when it is not there."""
    if not path.exists():
        shared_data_absent(path)
    return path


def absent_shared_params(path: Path) -> list[Any]:
    """The parameters of a test parametrized over the files ``path`` lists, when ``path``
    is missing: one skipped parameter. Where the shared data is required this is never
    called (``path`` is read, and a missing one fails the collection)."""
    reason = f"shared data absent: {path} (expected at <repo>/../shared/data)"
    return [pytest.param(None, marks=pytest.mark.skip(reason=reason))]


# Runs the pip-installed command: runner(via, *args, **subprocess_kwargs), via being
# "module" (python -m gpuscope) or "script" (the console script).
CliRunner = Callable[..., "subprocess.CompletedProcess[str]"]

# Bytes of TFRecord framing: u64 length + u32 masked CRC before the data, u32 CRC after.
HEADER_LEN = 12
FOOTER_LEN = 4

# Every kind of data EventAccumulator keeps, with 0 = keep everything.
SIZE_GUIDANCE_ALL = {
    "compressedHistograms": 0,
    "distributions": 0,
    "images": 0,
    "audio": 0,
    "scalars": 0,
    "histograms": 0,
    "tensors": 0,
}


def f32(value: float) -> float:
    """``value`` rounded to float32, as TensorBoard's ``simple_value`` stores it."""
    return float(np.float32(value))


def record_spans(path: Path) -> tuple[list[tuple[int, int]], int | None]:
    """(start, end) byte offsets of every complete record of a TFRecord file, and the
    offset where an incomplete last record starts (``None`` if the file ends cleanly).
    Reads the framing only; checksums are not verified."""
    data = Path(path).read_bytes()
    spans: list[tuple[int, int]] = []
    offset = 0
    while offset < len(data):
        if offset + HEADER_LEN > len(data):
            return spans, offset
        (length,) = struct.unpack_from("<Q", data, offset)
        end = offset + HEADER_LEN + length + FOOTER_LEN
        if end > len(data):
            return spans, offset
        spans.append((offset, end))
        offset = end
    return spans, None


def event_files(directory: Path) -> list[Path]:
    """Every event file below ``directory``."""
    return sorted(p for p in Path(directory).rglob("*") if "tfevents" in p.name)


def only_event_file(directory: Path) -> Path:
    """The single event file directly in ``directory``."""
    files = [p for p in Path(directory).iterdir() if "tfevents" in p.name]
    assert len(files) == 1, files
    return files[0]


def accumulator(run_dir: Path) -> Any:
    """TensorBoard's EventAccumulator over one run directory, loaded, keeping everything."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir), size_guidance=SIZE_GUIDANCE_ALL)
    acc.Reload()
    return acc


def tbparse_reader(log_dir: Path) -> Any:
    """A tbparse SummaryReader over ``log_dir`` (recursive, with run dirs and wall times)."""
    from tbparse import SummaryReader

    return SummaryReader(str(log_dir), extra_columns={"dir_name", "wall_time"})


def tbparse_frame(log_dir: Path, kind: str) -> Any:
    """tbparse's DataFrame of one kind (``scalars``, ``text``, ``histograms``, ...).
    tbparse trips over pandas deprecations; those warnings are not ours to judge."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(tbparse_reader(log_dir), kind)


def console_script() -> Path | None:
    """The pip-installed ``gpuscope`` command of this interpreter's environment."""
    beside = Path(sys.executable).parent / "gpuscope"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("gpuscope")
    return Path(found) if found else None


def run(cmd: list[str], timeout: float = 60, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Runs ``cmd`` to completion, capturing text output."""
    return subprocess.run(
        cmd, check=False, capture_output=True, text=True, timeout=timeout, **kwargs
    )


def gpuscope_cli(
    *args: str | Path, timeout: float = 120, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m gpuscope ARGS`` with stdout and stderr captured (so not a terminal)."""
    return run([sys.executable, "-m", "gpuscope", *map(str, args)], timeout=timeout, cwd=cwd)


def stretched_trace(source: Path, out: Path, factor: float) -> None:
    """The trace ``source`` (gzipped) written to ``out`` with every kernel ``factor``
    times longer: the same rank on a slower GPU."""
    doc = json.loads(gzip.decompress(source.read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("cat") in ("kernel", "Kernel") and "dur" in e:
            e["dur"] = e["dur"] * factor
    out.write_bytes(gzip.compress(json.dumps(doc).encode()))


def rank_job(directory: Path, source: Path, ranks: int, slow: int, stretch: float = 1.3) -> Path:
    """A job's directory of ``ranks`` trace files ``rank<R>.pt.trace.json.gz`` (ranks from
    the names): links to ``source``, but rank ``slow`` a copy with every kernel
    ``stretch`` times longer."""
    directory.mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        path = directory / f"rank{rank}.pt.trace.json.gz"
        if rank == slow:
            stretched_trace(source, path, stretch)
        else:
            os.symlink(source, path)
    return directory
