"""What the snapshot tests share: the real inputs and their reference, running
``gpuscope snapshot`` and ``gpuscope.analyze_snapshot``, a builder of snapshots in the layout
torch writes (segments of blocks, a trace of allocator events per device, stacks innermost
first), and the definitions of the issue (replay, call sites, free runs) written here in
plain Python, from the input itself, as oracles."""

from __future__ import annotations

import functools
import json
import pickle
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gpuscope
from _helpers import SHARED_DATA, absent_shared_params, gpuscope_cli, shared_data_required

SNAPSHOTS = SHARED_DATA / "snapshots"
REFERENCE = SNAPSHOTS / "reference.json"

KiB = 1 << 10
MiB = 1 << 20

# What torch prints as the site of the bytes alive before `_record_memory_history` began
# (the brief names it; they have no stack).
BEFORE_TRACE = "(allocated before the trace)"

# Opcodes that import or call something (or need what only the writer has): a safe
# reader refuses each of them.
REFUSED_OPCODES = {
    "GLOBAL",
    "STACK_GLOBAL",
    "REDUCE",
    "BUILD",
    "INST",
    "OBJ",
    "NEWOBJ",
    "NEWOBJ_EX",
    "EXT1",
    "EXT2",
    "EXT4",
    "PERSID",
    "BINPERSID",
    "NEXT_BUFFER",
    "READONLY_BUFFER",
}

Frame = dict[str, Any]
Block = dict[str, Any]
Segment = dict[str, Any]
Entry = dict[str, Any]
Doc = dict[str, Any]


# ----------------------------------------------------------------------- real inputs


def real_names() -> list[Any]:
    """One parameter per snapshot in reference.json (a skipped one without the data)."""
    if not REFERENCE.is_file() and not shared_data_required():
        return absent_shared_params(REFERENCE)
    return sorted(json.loads(REFERENCE.read_text()))


REAL = real_names()


@functools.cache
def real_data() -> dict[str, Any]:
    """Each real snapshot as the standard library's pickle reads it (read once)."""
    out: dict[str, Any] = {}
    for name in json.loads(REFERENCE.read_text()):
        with (SNAPSHOTS / name).open("rb") as f:
            out[name] = pickle.load(f)
    return out


@functools.cache
def real_json() -> dict[str, Doc]:
    """Each real snapshot's ``gpuscope snapshot --format json`` document (made once)."""
    return {name: snapshot_json(SNAPSHOTS / name) for name in json.loads(REFERENCE.read_text())}


# --------------------------------------------------------------------- running gpuscope


def snapshot_json(path: Path, *args: str | Path) -> Doc:
    out = gpuscope_cli("snapshot", path, "--format", "json", *args)
    assert out.returncode == 0, out.stderr
    assert "panicked" not in out.stderr
    doc: Doc = json.loads(out.stdout)
    return doc


def snapshot_text(path: Path, *args: str | Path) -> str:
    out = gpuscope_cli("snapshot", path, *args)
    assert out.returncode == 0, out.stderr
    assert "panicked" not in out.stderr
    return out.stdout


def without_path(doc: Doc) -> Doc:
    return {k: v for k, v in doc.items() if k != "path"}


def as_json(doc: Doc) -> Doc:
    """``doc`` as JSON would carry it (tuples become lists), without ``path``."""
    plain: Doc = json.loads(json.dumps(doc))
    return without_path(plain)


def refused_by_cli(path: Path, *args: str) -> str:
    """Runs the CLI on a bad input: exit 2, one line on stderr starting with ``error:``, no
    traceback and no panic. Returns that line."""
    out = gpuscope_cli("snapshot", path, "--format", "json", *args)
    assert out.returncode == 2, (out.returncode, out.stderr[-2000:])
    assert out.stdout == ""
    assert "Traceback" not in out.stderr
    assert "panicked" not in out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("error:"), lines[0]
    return lines[0]


def api_error(source: str | Path | bytes, trace: bool = True) -> BaseException:
    """The exception ``analyze_snapshot`` raises on a bad input; a BadInputError or an
    OSError, never pyo3's PanicException (a BaseException) or nothing."""
    try:
        gpuscope.analyze_snapshot(source, trace=trace)
    except BaseException as e:  # noqa: BLE001 — the point is to see which one
        assert isinstance(e, gpuscope.BadInputError | OSError), repr(e)
        assert "panicked" not in str(e)
        return e
    raise AssertionError(f"analyze_snapshot accepted {str(source)[:80]!r}")


# ------------------------------------------------------------------ a snapshot builder

TORCH_PY = "/opt/venv/lib/python3.11/site-packages/torch"


def frame(name: str, filename: str, line: int = 0) -> Frame:
    return {"name": name, "filename": filename, "line": line}


STEP = frame("step", "/home/u/train.py", 12)
STEP_14 = frame("step", "/home/u/train.py", 14)
LOSS = frame("loss", "/home/u/train.py", 20)
FORWARD = frame("forward", "/home/u/model.py", 30)
MAIN = frame("main", "/home/u/main.py", 40)


def py_stack(*user: Frame) -> list[Frame]:
    """A stack as torch records it, innermost first: the unwinder and the allocator (C++,
    no Python file), an ATen operator, torch's own Python (inside site-packages), then the
    user's frames, then the interpreter's."""
    return [
        frame("torch::unwind::unwind()", "??"),
        frame("torch::CapturedTraceback::gather(bool, bool, bool)", "??"),
        frame(
            "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc("
            "signed char, unsigned long, CUstream_st*)",
            "CUDACachingAllocator.cpp",
        ),
        frame("at::_ops::empty_memory_format::call(...)", "??"),
        frame("_conv_forward", f"{TORCH_PY}/nn/modules/conv.py", 549),
        frame("_call_impl", f"{TORCH_PY}/nn/modules/module.py", 1750),
        *(dict(f) for f in user),  # copies: a test may poison one stack's frames
        frame("_PyEval_EvalFrameDefault", "??"),
        frame("_start", "??"),
    ]


def site(*frames: Frame) -> str:
    """A call site as the issue spells one: ``file:line function``, the callers after it."""
    return " < ".join(f"{f['filename']}:{f['line']} {f['name']}" for f in frames)


def block(
    size: int,
    state: str = "active_allocated",
    frames: Sequence[Frame] = (),
    requested: int | None = None,
) -> Block:
    if requested is None:
        requested = size if state != "inactive" else 0
    return {
        "size": size,
        "requested_size": requested,
        "state": state,
        "frames": list(frames),
    }


def segment(
    blocks: list[Block],
    address: int,
    device: int = 0,
    segment_type: str = "large",
    stream: int = 0,
) -> Segment:
    """A segment with its blocks laid out in address order from ``address``; the sums torch
    stores beside them follow from the blocks."""
    offset = 0
    for b in blocks:
        b["address"] = address + offset
        offset += b["size"]
    allocated = [b for b in blocks if b["state"] == "active_allocated"]
    active = [b for b in blocks if b["state"] in ("active_allocated", "active_pending_free")]
    return {
        "device": device,
        "address": address,
        "total_size": offset,
        "allocated_size": sum(b["size"] for b in allocated),
        "active_size": sum(b["size"] for b in active),
        "requested_size": sum(b["requested_size"] for b in allocated),
        "stream": stream,
        "segment_type": segment_type,
        "segment_pool_id": (0, 0),
        "is_expandable": False,
        "frames": [],
        "blocks": blocks,
    }


@dataclass
class Trace:
    """One device's allocator trace, with times 1 ms apart."""

    entries: list[Entry] = field(default_factory=list)
    time_us: int | None = 1_748_730_000_000_000

    def add(self, action: str, addr: int, size: int, frames: Sequence[Frame] = ()) -> Entry:
        e: Entry = {"action": action, "addr": addr, "size": size, "stream": 0}
        e["frames"] = list(frames)
        if self.time_us is not None:
            e["time_us"] = self.time_us
            self.time_us += 1000
        self.entries.append(e)
        return e

    def alloc(self, b: Block, frames: Sequence[Frame] | None = None) -> Entry:
        return self.add("alloc", b["address"], b["size"], b["frames"] if frames is None else frames)

    def free(self, b: Block) -> None:
        self.add("free_requested", b["address"], b["size"], b["frames"])
        self.add("free_completed", b["address"], b["size"], b["frames"])

    def oom(self, size: int, device_free: int, frames: Sequence[Frame]) -> Entry:
        # torch stores the driver's free bytes where other entries have `addr`.
        e: Entry = {"action": "oom", "device_free": device_free, "size": size, "stream": 0}
        e["frames"] = list(frames)
        if self.time_us is not None:
            e["time_us"] = self.time_us
            self.time_us += 1000
        self.entries.append(e)
        return e


def snapshot(segments: list[Segment], traces: list[Trace] | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"segments": segments}
    if traces is not None:
        data["device_traces"] = [t.entries for t in traces]
    data["allocator_settings"] = {"PYTORCH_CUDA_ALLOC_CONF": "", "expandable_segments": False}
    data["external_annotations"] = []
    return data


def write(path: Path, data: Any, protocol: int = 4) -> Path:
    path.write_bytes(pickle.dumps(data, protocol=protocol))
    return path


# ----------------------------------------------------------- the definitions, in Python


def is_user_file(filename: str) -> bool:
    """The user's own Python: a .py file outside torch, installed packages and the
    standard library."""
    f = filename.replace("\\", "/")
    library = ("/site-packages/", "/dist-packages/", "/torch/", "/lib/python3")
    return f.endswith(".py") and not f.startswith("<frozen") and not any(p in f for p in library)


# The native functions that allocate a library's workspace, and the site the README
# names them by.
WORKSPACES = {
    "at::cuda::setWorkspaceForHandle": "(cuBLAS workspace)",
    "at::cuda::getCUDABlasLtWorkspace": "(cuBLASLt workspace)",
}


def workspace_site(frames: Sequence[Frame]) -> str | None:
    """The workspace a stack allocates (README: a library's workspace is its site, not
    the Python line that first called the library); None for any other stack."""
    for f in frames:
        for function, name in WORKSPACES.items():
            if f["name"].startswith(function):
                return name
    return None


def user_site(frames: Sequence[Frame], n: int = 1) -> str | None:
    """The first ``n`` frames of user code, innermost first; None without any, and for
    a library's workspace."""
    if workspace_site(frames) is not None:
        return None
    user = [f for f in frames if is_user_file(f["filename"])][:n]
    return site(*user) if user else None


def by_user_site(items: Iterable[tuple[Sequence[Frame], int]], n: int = 1) -> dict[str, list[int]]:
    """Bytes and count by user site; items without a user frame are left out."""
    out: dict[str, list[int]] = {}
    for frames, size in items:
        s = user_site(frames, n)
        if s is not None:
            sums = out.setdefault(s, [0, 0])
            sums[0] += size
            sums[1] += 1
    return out


def listed(rows: list[dict[str, Any]]) -> dict[str, list[int]]:
    """gpuscope's site rows as ``{site: [bytes, count]}``."""
    return {r["site"]: [r["bytes"], r["count"]] for r in rows}


@dataclass
class Replay:
    """A device's trace replayed by the issue's rules: an alloc adds its size, a
    free_completed takes it away."""

    deltas: list[int]  # allocs − frees after each entry
    net: int
    peak_delta: int  # the highest delta, ≥ 0 (0: the peak is before the first entry)
    peak_index: int | None
    live: dict[int, tuple[int, list[Frame]]]  # alive at the end: addr -> (size, frames)
    live_at_peak: dict[int, tuple[int, list[Frame]]]
    before_freed_at_peak: int  # before-trace bytes freed up to the peak
    churn: list[tuple[list[Frame], int]]  # allocations made and freed within the trace


def replay(trace: list[Entry]) -> Replay:
    deltas: list[int] = []
    delta, peak, peak_index = 0, 0, None
    live: dict[int, tuple[int, list[Frame]]] = {}
    live_at_peak: dict[int, tuple[int, list[Frame]]] = {}
    before_freed, before_freed_at_peak = 0, 0
    churn: list[tuple[list[Frame], int]] = []
    for k, e in enumerate(trace):
        if e["action"] == "alloc":
            delta += e["size"]
            live[e["addr"]] = (e["size"], e.get("frames", []))
        elif e["action"] == "free_completed":
            delta -= e["size"]
            if e["addr"] in live:
                size, frames = live.pop(e["addr"])
                churn.append((frames, size))
            else:
                before_freed += e["size"]
        deltas.append(delta)
        if delta > peak:
            peak, peak_index = delta, k
            live_at_peak, before_freed_at_peak = dict(live), before_freed
    if peak_index is None:
        live_at_peak, before_freed_at_peak = {}, 0
    return Replay(deltas, delta, peak, peak_index, live, live_at_peak, before_freed_at_peak, churn)


def active_at_end(data: dict[str, Any], device: int) -> int:
    """Bytes in active blocks (allocated or pending free) of ``device`` at the dump."""
    return sum(
        b["size"]
        for s in data["segments"]
        if s.get("device", 0) == device
        for b in s["blocks"]
        if b["state"] in ("active_allocated", "active_pending_free")
    )


def block_requested(b: Block) -> int:
    """What the program asked for, in either layout (the oldest keeps it in history)."""
    if "frames" not in b and "history" in b:
        return int(b["history"][0]["real_size"])
    requested: int = b["requested_size"] if "requested_size" in b else b["size"]
    return requested


def block_frames(b: Block) -> list[Frame]:
    if "frames" in b:
        return list(b["frames"])
    if b.get("history"):
        return list(b["history"][0].get("frames", []))
    return []


def free_runs(seg: Segment) -> list[int]:
    """Sizes of the segment's free spans: adjacent inactive blocks merged."""
    runs, run = [], 0
    for b in seg["blocks"]:
        if b["state"] == "inactive":
            run += b["size"]
        elif run:
            runs.append(run)
            run = 0
    if run:
        runs.append(run)
    return runs


def viz_size(num: float) -> str:
    """A size as ``torch.cuda._memory_viz`` prints one (its ``_format_size``)."""
    for unit in ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi"]:
        if abs(num) < 1024.0:
            return f"{num:3.1f}{unit}B"
        num /= 1024.0
    return f"{num:.1f}YiB"


SEG = 0x7F00_0000_0000


def call_sites_snapshot() -> dict[str, Any]:
    """train.py:12 step keeps 4 MiB; model.py:30 forward (called from step) allocates and
    frees 2 MiB three times; train.py:14 step keeps 1 MiB."""
    kept = block(4 * MiB, frames=py_stack(STEP, MAIN))
    small = block(1 * MiB, frames=py_stack(STEP_14, MAIN))
    rest = block(3 * MiB, "inactive")
    seg = segment([kept, small, rest], SEG)
    t = Trace()
    t.alloc(kept)
    for _ in range(3):
        temp = {
            "address": rest["address"],
            "size": 2 * MiB,
            "frames": py_stack(FORWARD, STEP, MAIN),
        }
        t.alloc(temp)
        t.free(temp)
    t.alloc(small)
    return snapshot([seg], [t])
