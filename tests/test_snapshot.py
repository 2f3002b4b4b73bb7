"""`gpuscope snapshot` and ``gpuscope.analyze_snapshot`` on CUDA allocator snapshots.

The real inputs are two snapshots recorded on GPUs (``../shared/data/snapshots``) and
``reference.json``, what torch's own tooling finds in them. Everything else a test expects
is worked out here from the input itself: the pickles are read with the standard
library's ``pickle`` (they hold plain data), replayed and grouped by call site by the small
functions below, written from the definitions in the issue; and
``python -m torch.cuda._memory_viz stats``, the tool people use today, is asked for the
figures it prints. The synthetic snapshots are built here in the layout torch writes
(segments of blocks, a trace of allocator events per device, stacks innermost first).
Malicious and broken pickles are checked to be refused with one line on stderr, exit 2
and no code run.
"""

from __future__ import annotations

import json
import pickle
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import gpuscope
import pytest
from _helpers import SHARED_DATA, gpuscope_cli, shared_data_required, shared_file
from _snapshots import (
    BEFORE_TRACE,
    FORWARD,
    LOSS,
    MAIN,
    REAL,
    REFERENCE,
    SEG,
    SNAPSHOTS,
    STEP,
    TORCH_PY,
    Block,
    Doc,
    Frame,
    KiB,
    MiB,
    Segment,
    Trace,
    active_at_end,
    as_json,
    block,
    block_frames,
    block_requested,
    by_user_site,
    call_sites_snapshot,
    frame,
    free_runs,
    listed,
    py_stack,
    real_data,
    real_json,
    replay,
    segment,
    site,
    snapshot,
    snapshot_json,
    snapshot_text,
    user_site,
    viz_size,
    without_path,
    workspace_site,
    write,
)


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(REFERENCE.read_text())
    return data


# ------------------------------------------------------------- reference parity (real)


def report(via: str, path: Path) -> Doc:
    if via == "cli":
        return snapshot_json(path)
    doc: Doc = gpuscope.analyze_snapshot(path)
    return doc


@pytest.mark.parametrize("via", ["cli", "api"])
@pytest.mark.parametrize("name", REAL)
def test_matches_reference(reference: dict[str, Any], name: str, via: str) -> None:
    """Every figure reference.json has for a real snapshot (computed by torch's tooling),
    through the command and through the Python API."""
    ref = reference[name]
    doc = report(via, SNAPSHOTS / name)
    assert doc["schema"] == "gpuscope.snapshot/1"
    stats = doc["stats"]
    for key in (
        "segments",
        "reserved_bytes",
        "allocated_bytes",
        "active_bytes",
        "requested_bytes",
        "block_counts",
        "block_bytes",
        "devices",
    ):
        assert stats[key] == ref[key], key
    trace = doc["trace"]
    assert trace["actions"] == ref["trace_actions"]
    for key in (
        "trace_live_delta_peak_bytes",
        "trace_net_delta_bytes",
        "allocated_before_trace_bytes",
        "peak_allocated_bytes",
    ):
        assert trace[key] == ref[key], key
    largest = doc["devices"][0]["largest_alloc"]
    assert largest["bytes"] == ref["largest_alloc_bytes"]
    assert largest["top_frame"] == ref["largest_alloc_top_frame"]


@pytest.mark.parametrize("name", REAL)
def test_api_gives_the_cli_document(name: str) -> None:
    """``analyze_snapshot`` on a path and on the pickle's bytes is the ``--format json``
    document, but for ``path``; ``frames`` and ``top`` are the options of the same name.
    (Compared as JSON: the next test is about tuples in the API's answer.)"""
    path = SNAPSHOTS / name
    cli = without_path(real_json()[name])
    assert as_json(gpuscope.analyze_snapshot(path)) == cli
    assert as_json(gpuscope.analyze_snapshot(str(path))) == cli
    assert as_json(gpuscope.analyze_snapshot(path.read_bytes())) == cli
    two = without_path(snapshot_json(path, "--frames", "2", "--top", "5"))
    assert as_json(gpuscope.analyze_snapshot(path, frames=2, top=5)) == two
    assert two != cli


def test_api_dict_equals_the_parsed_cli_json(tmp_path: Path) -> None:
    """The same document as plain Python data, compared as is (a snapshot with
    allocator_settings, as torch writes since 2.1)."""
    path = write(tmp_path / "settings.pickle", call_sites_snapshot())
    assert without_path(gpuscope.analyze_snapshot(path)) == without_path(snapshot_json(path))


@pytest.mark.parametrize("name", REAL)
def test_stats_add_up_the_segments_and_blocks(name: str) -> None:
    """The state at the dump, summed here from the pickle: segments' sums, blocks by
    state, the free bytes split as _memory_viz splits them (rounding inside allocated
    blocks is internal, every other block external), per segment size class."""
    data, stats = real_data()[name], real_json()[name]["stats"]
    segments = data["segments"]
    blocks = [b for s in segments for b in s["blocks"]]
    assert stats["segments"] == len(segments)
    assert stats["reserved_bytes"] == sum(s["total_size"] for s in segments)
    assert stats["allocated_bytes"] == sum(
        b["size"] for b in blocks if b["state"] == "active_allocated"
    )
    assert stats["block_counts"] == dict(Counter(b["state"] for b in blocks))
    internal = sum(
        b["size"] - block_requested(b) for b in blocks if b["state"] == "active_allocated"
    )
    external = sum(b["size"] for b in blocks if b["state"] != "active_allocated")
    assert stats["internal_free_bytes"] == internal
    assert stats["free_bytes"] == internal + external
    assert stats["internal_free_percent"] == pytest.approx(100 * internal / (internal + external))
    by_type = {g["key"]: g for g in stats["by_segment_type"]}
    for kind in {s["segment_type"] for s in segments}:
        mine = [s for s in segments if s["segment_type"] == kind]
        assert by_type[kind]["segments"] == len(mine)
        assert by_type[kind]["reserved_bytes"] == sum(s["total_size"] for s in mine)


@pytest.mark.parametrize("name", REAL)
def test_real_trace_replayed_here_gives_the_same_peak_and_sites(name: str) -> None:
    """The trace replayed here: the net change, the true peak (before-trace bytes added
    back), and by user call site what was alive at the peak, never freed, churned and
    alive at the dump. Sites that are not user code (native-only stacks, which gpuscope
    names after the operator) are compared in total only."""
    data = real_data()[name]
    doc = gpuscope.analyze_snapshot(SNAPSHOTS / name, top=1_000_000)
    r = replay(data["device_traces"][0])
    before = active_at_end(data, 0) - r.net
    trace = doc["trace"]
    assert trace["trace_net_delta_bytes"] == r.net
    assert trace["allocated_before_trace_bytes"] == before
    assert trace["peak_allocated_bytes"] == before + r.peak_delta

    peak = listed(doc["peak"]["by_site"])
    assert sum(b for b, _ in peak.values()) == before + r.peak_delta
    assert peak[BEFORE_TRACE][0] == before - r.before_freed_at_peak
    at_peak = by_user_site((f, s) for s, f in r.live_at_peak.values())
    assert at_peak, "the real traces have user frames"
    for s, sums in at_peak.items():
        assert peak[s] == sums, s

    never = listed(doc["never_freed"])
    assert sum(b for b, _ in never.values()) == sum(s for s, _ in r.live.values())
    for s, sums in by_user_site((f, s) for s, f in r.live.values()).items():
        assert never[s] == sums, s

    churn = listed(doc["churn"])
    assert sum(b for b, _ in churn.values()) == sum(s for _, s in r.churn)
    for s, sums in by_user_site(r.churn).items():
        assert churn[s] == sums, s

    now = listed(doc["now"]["by_site"])
    alive = [
        (block_frames(b), b["size"])
        for seg in data["segments"]
        for b in seg["blocks"]
        if b["state"] in ("active_allocated", "active_pending_free")
    ]
    assert sum(b for b, _ in now.values()) == sum(size for _, size in alive)
    for s, sums in by_user_site(alive).items():
        assert now[s] == sums, s


def test_library_workspaces_are_their_own_sites() -> None:
    """torch gives each cuBLAS handle a workspace from the caching allocator and keeps
    it: on the H200 run two of 32 MiB (the forward's thread and the backward's) and
    cuBLASLt's 1 MiB, allocated inside the first matrix products. They are named as
    workspaces, not after the Python line of that first product."""
    path = shared_file(SHARED_DATA / "gpu-h200" / "lm_clean" / "snapshots" / "iter30.pickle")
    with path.open("rb") as f:
        data = pickle.load(f)
    want: dict[str, list[int]] = {}
    for seg in data["segments"]:
        for b in seg["blocks"]:
            name = workspace_site(block_frames(b))
            if name is not None and b["state"] == "active_allocated":
                sums = want.setdefault(name, [0, 0])
                sums[0] += b["size"]
                sums[1] += 1
    assert want == {"(cuBLAS workspace)": [64 << 20, 2], "(cuBLASLt workspace)": [1 << 20, 1]}
    now = listed(snapshot_json(path)["now"]["by_site"])
    for name, sums in want.items():
        assert now[name] == sums, name


# --------------------------------------------------------------- the rival as an oracle


@pytest.fixture(scope="module")
def memory_viz_stats(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    """``python -m torch.cuda._memory_viz stats FILE`` on each real snapshot and on a
    snapshot of the oldest layout, run side by side (each imports torch, seconds)."""
    # The real ones where the shared data is here (their parameters skip otherwise).
    real = (
        json.loads(REFERENCE.read_text()) if REFERENCE.is_file() or shared_data_required() else {}
    )
    inputs = {name: SNAPSHOTS / name for name in real}
    inputs["oldest_layout"] = write(
        tmp_path_factory.mktemp("viz") / "oldest.pickle", oldest_layout()
    )
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "torch.cuda._memory_viz", "stats", str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, path in inputs.items()
    }
    out: dict[str, tuple[Path, str]] = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=180)
        assert proc.returncode == 0, stderr[-2000:]
        out[name] = (inputs[name], stdout)
    return out


VIZ_LINES = {
    "segments": re.compile(r"^segments: (\d+)$", re.MULTILINE),
    "total_reserved": re.compile(r"^total_reserved: (\S+)$", re.MULTILINE),
    "total_allocated": re.compile(r"^total_allocated: (\S+)$", re.MULTILINE),
    "total_free": re.compile(r"^total_free: (\S+)(?: \(([0-9.]+)% internal\))?$", re.MULTILINE),
}


@pytest.mark.parametrize("name", [*REAL, "oldest_layout"])
def test_stats_agree_with_memory_viz(
    memory_viz_stats: dict[str, tuple[Path, str]], name: str
) -> None:
    """The four lines ``_memory_viz stats`` ends with, from gpuscope's bytes formatted as
    _memory_viz formats sizes. Its ``total_allocated`` sums what the program requested in
    allocated blocks (``_block_extra``'s size), which gpuscope calls ``requested_bytes``;
    its ``total_free`` is everything else, with the rounding share as "% internal"."""
    path, printed = memory_viz_stats[name]
    stats = gpuscope.analyze_snapshot(path)["stats"]
    found = {key: pattern.findall(printed) for key, pattern in VIZ_LINES.items()}
    for key, hits in found.items():
        assert len(hits) == 1, (key, printed[-800:])
    assert int(found["segments"][0]) == stats["segments"]
    assert found["total_reserved"][0] == viz_size(stats["reserved_bytes"])
    assert found["total_allocated"][0] == viz_size(stats["requested_bytes"])
    free, internal = found["total_free"][0]
    assert free == viz_size(stats["free_bytes"])
    assert internal, "every input here has free bytes"
    assert f"{stats['internal_free_percent']:.1f}" == internal


# ----------------------------------------------------------------- synthetic snapshots


def oom_snapshot() -> tuple[dict[str, Any], Trace]:
    """4 MiB alive from before the trace; in the trace 2 MiB allocated and freed, 6 MiB
    kept (model.py forward), 8 MiB allocated in train.py loss, then 12 MiB asked for in
    loss fails with 1 MiB free on the device, and the 8 MiB are freed."""
    before = block(4 * MiB)
    kept = block(6 * MiB, frames=py_stack(FORWARD, STEP, MAIN))
    rest = block(10 * MiB, "inactive")
    seg = segment([before, kept, rest], SEG)
    temp = {"address": rest["address"] + 8 * MiB, "size": 2 * MiB, "frames": py_stack(STEP, MAIN)}
    big = {"address": rest["address"], "size": 8 * MiB, "frames": py_stack(LOSS, MAIN)}
    t = Trace()
    t.alloc(temp)
    t.alloc(kept)
    t.free(temp)
    t.alloc(big)
    t.oom(12 * MiB, 1 * MiB, py_stack(LOSS, MAIN))
    t.free(big)
    return snapshot([seg], [t]), t


def test_oom_event_with_the_state_just_before(tmp_path: Path) -> None:
    data, trace = oom_snapshot()
    doc = snapshot_json(write(tmp_path / "oom.pickle", data))
    (oom,) = doc["ooms"]
    k = next(i for i, e in enumerate(trace.entries) if e["action"] == "oom")
    entry = trace.entries[k]
    r = replay(trace.entries)
    before = active_at_end(data, 0) - r.net
    assert before == 4 * MiB  # the builder's intent
    assert oom["index"] == k
    assert oom["time_us"] == entry["time_us"]
    assert oom["requested_bytes"] == entry["size"]
    assert oom["device_free_bytes"] == entry["device_free"]
    assert oom["site"] == user_site(entry["frames"])
    assert oom["allocated_bytes"] == before + r.deltas[k - 1]
    assert oom["reserved_bytes"] == sum(s["total_size"] for s in data["segments"])
    # alive just before: what the replay holds then, by site, and the before-trace bytes
    live: dict[int, tuple[int, list[Frame]]] = {}
    for e in trace.entries[:k]:
        if e["action"] == "alloc":
            live[e["addr"]] = (e["size"], e["frames"])
        elif e["action"] == "free_completed":
            live.pop(e["addr"])
    expected = by_user_site((f, s) for s, f in live.values())
    expected[BEFORE_TRACE] = [before, 0]
    got = listed(oom["alive_by_site"])
    assert {s: b for s, (b, _) in got.items()} == {s: b for s, (b, _) in expected.items()}
    assert got[site(LOSS)] == [8 * MiB, 1]
    assert [r["bytes"] for r in oom["alive_by_site"]] == sorted(
        (r["bytes"] for r in oom["alive_by_site"]), reverse=True
    )
    text = snapshot_text(write(tmp_path / "oom.pickle", data))
    assert site(LOSS) in text


def two_devices_snapshot() -> dict[str, Any]:
    """Device 0: more segments, more reserved and more trace entries, but a lower peak
    (6 MiB); device 1: 4 MiB from before its trace, 16 MiB kept and 8 MiB churned (a peak
    of 28 MiB)."""
    a0 = block(4 * MiB, frames=py_stack(STEP, MAIN))
    free0 = block(60 * MiB, "inactive")
    seg0 = segment([a0, free0], SEG, device=0)
    seg0b = segment([block(2 * MiB, "inactive")], SEG + 64 * MiB, device=0)
    t0 = Trace()
    t0.alloc(a0)
    for _ in range(5):
        tmp = {"address": free0["address"], "size": 2 * MiB, "frames": py_stack(LOSS, MAIN)}
        t0.alloc(tmp)
        t0.free(tmp)
    before1 = block(4 * MiB)
    b1 = block(16 * MiB, frames=py_stack(FORWARD, STEP, MAIN))
    free1 = block(12 * MiB, "inactive")
    seg1 = segment([before1, b1, free1], 0x7E00_0000_0000, device=1)
    t1 = Trace()
    t1.alloc(b1)
    tmp1 = {"address": free1["address"], "size": 8 * MiB, "frames": py_stack(LOSS, MAIN)}
    t1.alloc(tmp1)
    t1.free(tmp1)
    return snapshot([seg0, seg1, seg0b], [t0, t1])


def test_two_devices(tmp_path: Path) -> None:
    data = two_devices_snapshot()
    doc = snapshot_json(write(tmp_path / "two.pickle", data))
    stats = doc["stats"]
    assert stats["devices"] == [0, 1]
    by_device = {g["key"]: g for g in stats["by_device"]}
    assert sorted(by_device) == ["0", "1"]
    peaks = {}
    for device in (0, 1):
        mine = [s for s in data["segments"] if s["device"] == device]
        group = by_device[str(device)]
        assert group["segments"] == len(mine)
        assert group["reserved_bytes"] == sum(s["total_size"] for s in mine)
        assert group["allocated_bytes"] == sum(s["allocated_size"] for s in mine)
        assert group["requested_bytes"] == sum(s["requested_size"] for s in mine)
        r = replay(data["device_traces"][device])
        before = active_at_end(data, device) - r.net
        peaks[device] = before + r.peak_delta
        (replayed,) = [d for d in doc["devices"] if d["device"] == device]
        assert replayed["entries"] == len(data["device_traces"][device])
        assert replayed["allocated_before_trace_bytes"] == before
        assert replayed["peak_allocated_bytes"] == peaks[device]
    assert sorted(d["device"] for d in doc["devices"]) == [0, 1]
    high = max(peaks, key=lambda d: peaks[d])
    assert high == 1  # the builder's intent
    assert doc["trace"]["device"] == high
    assert doc["trace"]["peak_allocated_bytes"] == peaks[high]
    assert doc["peak"]["device"] == high
    counts = Counter(e["action"] for t in data["device_traces"] for e in t)
    assert doc["trace"]["actions"] == dict(counts)


def test_pending_free_blocks(tmp_path: Path) -> None:
    """A block freed by the program but waiting for a stream (free_requested, no
    free_completed; ``active_pending_free`` at the dump) is active, not allocated."""
    kept = block(2 * MiB, frames=py_stack(STEP, MAIN), requested=2 * MiB - 100)
    pending = block(4 * MiB, "active_pending_free", frames=py_stack(FORWARD, STEP, MAIN))
    done = block(2 * MiB, "inactive")
    seg = segment([kept, pending, done], SEG)
    t = Trace()
    t.alloc(kept)
    t.alloc(pending)
    t.add("free_requested", pending["address"], pending["size"], pending["frames"])
    temp = {"address": done["address"], "size": done["size"], "frames": py_stack(LOSS, MAIN)}
    t.alloc(temp)
    t.free(temp)
    data = snapshot([seg], [t])
    stats = snapshot_json(write(tmp_path / "pending.pickle", data))["stats"]
    blocks = seg["blocks"]
    assert stats["block_counts"] == dict(Counter(b["state"] for b in blocks))
    assert stats["block_counts"]["active_pending_free"] == 1
    assert stats["block_bytes"]["active_pending_free"] == 4 * MiB
    assert stats["active_bytes"] == kept["size"] + pending["size"]
    assert stats["allocated_bytes"] == kept["size"]
    assert stats["requested_bytes"] == kept["requested_size"]
    # as _memory_viz counts free: the pending block is external, the rounding internal
    assert stats["internal_free_bytes"] == 100
    assert stats["free_bytes"] == 100 + pending["size"] + done["size"]
    doc = gpuscope.analyze_snapshot(write(tmp_path / "pending.pickle", data))
    r = replay(t.entries)
    assert doc["trace"]["allocated_before_trace_bytes"] == active_at_end(data, 0) - r.net == 0


def true_peak_snapshot() -> tuple[dict[str, Any], Trace]:
    """Alive before the trace: p1 (4 MiB, freed in the trace before the peak) and p2
    (6 MiB, alive to the end). In the trace: x (5 MiB, train.py step) allocated, p1 freed,
    y (8 MiB, train.py loss) allocated — the peak — then x freed."""
    p1 = block(4 * MiB, "inactive")
    p2 = block(6 * MiB)
    y = block(8 * MiB, frames=py_stack(LOSS, MAIN))
    rest = block(14 * MiB, "inactive")
    seg = segment([p1, p2, y, rest], SEG)
    x = {"address": rest["address"], "size": 5 * MiB, "frames": py_stack(STEP, MAIN)}
    t = Trace()
    t.alloc(x)
    t.add("free_requested", p1["address"], p1["size"])
    t.add("free_completed", p1["address"], p1["size"])
    t.alloc(y)
    t.free(x)
    return snapshot([seg], [t]), t


def test_true_peak_adds_back_what_was_alive_before_the_trace(tmp_path: Path) -> None:
    data, t = true_peak_snapshot()
    doc = snapshot_json(write(tmp_path / "peak.pickle", data))
    r = replay(t.entries)
    net = sum(e["size"] for e in t.entries if e["action"] == "alloc") - sum(
        e["size"] for e in t.entries if e["action"] == "free_completed"
    )
    before = active_at_end(data, 0) - net
    assert before == 10 * MiB  # the builder's intent: p1 + p2
    trace = doc["trace"]
    assert trace["trace_net_delta_bytes"] == net
    assert trace["allocated_before_trace_bytes"] == before
    assert trace["trace_live_delta_peak_bytes"] == r.peak_delta
    assert trace["peak_allocated_bytes"] == before + r.peak_delta
    assert r.peak_index is not None
    assert trace["peak_time_us"] == t.entries[r.peak_index]["time_us"]
    peak = doc["peak"]
    assert peak["bytes"] == trace["peak_allocated_bytes"]
    assert sum(s["bytes"] for s in peak["by_site"]) == trace["peak_allocated_bytes"]
    got = {s: b for s, (b, _) in listed(peak["by_site"]).items()}
    assert got == {
        BEFORE_TRACE: before - r.before_freed_at_peak,  # p2 only: p1 was freed by then
        site(STEP): 5 * MiB,
        site(LOSS): 8 * MiB,
    }


def test_stacked_timeline_adds_up_to_the_allocated_bytes(tmp_path: Path) -> None:
    """With fewer entries than points, one moment per entry: x in ms since the first
    entry, and the series (before-trace first) add up to the replayed allocated bytes."""
    data, t = true_peak_snapshot()
    doc = snapshot_json(write(tmp_path / "peak.pickle", data))
    r = replay(t.entries)
    before = doc["trace"]["allocated_before_trace_bytes"]
    stacked = doc["stacked"]
    t0 = t.entries[0]["time_us"]
    assert stacked["has_time"] is True
    assert stacked["x"] == [(e["time_us"] - t0) // 1000 for e in t.entries]
    assert stacked["series"][0]["site"] == BEFORE_TRACE
    for k, delta in enumerate(r.deltas):
        assert sum(s["bytes"][k] for s in stacked["series"]) == before + delta, k
    assert r.peak_index is not None
    assert stacked["peak_x"] == stacked["x"][r.peak_index]


def test_reserved_bytes_and_cuda_malloc_calls(tmp_path: Path) -> None:
    """segment_alloc is a cudaMalloc, segment_free a cudaFree; reserved bytes before the
    trace are the dump's less the trace's net segment change, and its peak is reached
    after the second cudaMalloc."""
    kept = block(4 * MiB, frames=py_stack(STEP, MAIN))
    seg1 = segment([kept, block(16 * MiB, "inactive")], SEG)
    seg2 = segment([block(2 * MiB, "inactive")], SEG + 64 * MiB, segment_type="small")
    t = Trace()
    t.add("segment_alloc", seg1["address"], seg1["total_size"])
    t.alloc(kept)
    t.add("segment_alloc", SEG + 128 * MiB, 40 * MiB)
    temp = {"address": SEG + 128 * MiB, "size": 40 * MiB, "frames": py_stack(LOSS, MAIN)}
    t.alloc(temp)
    t.free(temp)
    t.add("segment_free", SEG + 128 * MiB, 40 * MiB)
    data = snapshot([seg1, seg2], [t])
    doc = snapshot_json(write(tmp_path / "reserved.pickle", data))
    reserved_end = seg1["total_size"] + seg2["total_size"]
    sign = {"segment_alloc": 1, "segment_free": -1}
    steps = [sign.get(e["action"], 0) * e["size"] for e in t.entries]
    prefix = [sum(steps[: k + 1]) for k in range(len(steps))]
    reserved_before = reserved_end - prefix[-1]
    assert reserved_before == 2 * MiB  # the small segment was there before
    trace = doc["trace"]
    assert trace["cuda_malloc_calls"] == 2
    assert trace["cuda_free_calls"] == 1
    assert trace["peak_reserved_bytes"] == reserved_before + max(0, *prefix)
    (device,) = doc["devices"]
    assert device["reserved_before_trace_bytes"] == reserved_before
    points = device["timeline"]
    assert [p["reserved_bytes"] for p in points] == [reserved_before + p for p in prefix]
    r = replay(t.entries)
    before = active_at_end(data, 0) - r.net
    assert [p["allocated_bytes"] for p in points] == [before + d for d in r.deltas]


def test_peak_before_the_trace_began(tmp_path: Path) -> None:
    """A trace that only frees: the peak is the bytes alive when it began."""
    p1 = block(4 * MiB, "inactive")
    p2 = block(6 * MiB)
    data = snapshot([segment([p1, p2], SEG)], [Trace()])
    data["device_traces"][0] = [
        {"action": "free_requested", "addr": p1["address"], "size": p1["size"], "stream": 0},
        {"action": "free_completed", "addr": p1["address"], "size": p1["size"], "stream": 0},
    ]
    doc = snapshot_json(write(tmp_path / "frees.pickle", data))
    assert doc["trace"]["allocated_before_trace_bytes"] == 10 * MiB
    assert doc["trace"]["trace_live_delta_peak_bytes"] == 0
    assert doc["trace"]["peak_allocated_bytes"] == 10 * MiB
    assert listed(doc["peak"]["by_site"]) == {BEFORE_TRACE: [10 * MiB, 0]}


@pytest.mark.parametrize("frames", [1, 2])
def test_call_sites_are_the_first_user_frames(tmp_path: Path, frames: int) -> None:
    """Torch internals, native frames and site-packages are skipped; ``--frames 2`` adds
    the caller. Never-freed, churn, alive-at-peak and alive-now are by those sites."""
    data = call_sites_snapshot()
    doc = snapshot_json(write(tmp_path / "sites.pickle", data), "--frames", str(frames))
    if frames == 1:
        assert listed(doc["never_freed"]) == {
            "/home/u/train.py:12 step": [4 * MiB, 1],
            "/home/u/train.py:14 step": [1 * MiB, 1],
        }
        assert listed(doc["churn"]) == {"/home/u/model.py:30 forward": [6 * MiB, 3]}
    else:
        assert listed(doc["never_freed"]) == {
            "/home/u/train.py:12 step < /home/u/main.py:40 main": [4 * MiB, 1],
            "/home/u/train.py:14 step < /home/u/main.py:40 main": [1 * MiB, 1],
        }
        assert listed(doc["churn"]) == {
            "/home/u/model.py:30 forward < /home/u/train.py:12 step": [6 * MiB, 3]
        }
    r = replay(data["device_traces"][0])
    assert listed(doc["never_freed"]) == by_user_site(((f, s) for s, f in r.live.values()), frames)
    assert listed(doc["churn"]) == by_user_site(r.churn, frames)
    assert listed(doc["peak"]["by_site"]) == by_user_site(
        ((f, s) for s, f in r.live_at_peak.values()), frames
    )
    alive = [(b["frames"], b["size"]) for b in data["segments"][0]["blocks"] if b["frames"]]
    assert listed(doc["now"]["by_site"]) == by_user_site(alive, frames)
    for rows in (doc["never_freed"], doc["churn"], doc["now"]["by_site"]):
        assert [r["bytes"] for r in rows] == sorted((r["bytes"] for r in rows), reverse=True)


def accumulation_snapshot(steps: int, ring: int | None) -> tuple[dict[str, Any], list[int]]:
    """Each step allocates and frees a 4 MiB activation (model.py:30) and keeps a 2 MiB
    block (train.py:20); with ``ring``, it frees the block of ``ring`` steps before. Also
    the times of the kept blocks never freed."""
    freed = steps - ring if ring else 0
    kept = [
        block(2 * MiB, "inactive" if i < freed else "active_allocated", py_stack(LOSS, STEP))
        for i in range(steps)
    ]
    act = block(4 * MiB, "inactive")
    seg = segment([*kept, act], SEG)
    t = Trace()
    times = []
    for i, k in enumerate(kept):
        temp = {"address": act["address"], "size": 4 * MiB, "frames": py_stack(FORWARD, STEP)}
        t.alloc(temp)
        e = t.alloc(k, py_stack(LOSS, STEP))
        if i >= freed:
            times.append(e["time_us"])
        t.free(temp)
        if ring and i >= ring:
            t.free(kept[i - ring])
    return snapshot([seg], [t]), times


@pytest.mark.parametrize("ring", [None, 3])
def test_a_block_kept_every_step_accumulates_and_a_ring_does_not(ring: int | None) -> None:
    """README's rule through the Python API: a block kept every step accumulates and is
    listed first, with when the first and last of its blocks were made; the same site
    freeing the block of three steps before (a ring buffer) does not."""
    data, times = accumulation_snapshot(12, ring)
    doc = gpuscope.analyze_snapshot(pickle.dumps(data))
    row = doc["never_freed"][0]
    assert row["site"] == site(LOSS)
    assert row["accumulating"] is (ring is None)
    assert row["count"] == len(times) == (3 if ring else 12)
    assert (row["first_alloc_time_us"], row["last_alloc_time_us"]) == (min(times), max(times))
    assert not any(r["accumulating"] for r in doc["never_freed"][1:])


def test_never_freed_times_are_null_without_times() -> None:
    doc = gpuscope.analyze_snapshot(shared_file(SNAPSHOTS / "finetune_no_timestamps.pickle"))
    assert doc["never_freed"]
    for row in doc["never_freed"]:
        assert row["accumulating"] is False
        assert row["first_alloc_time_us"] is None and row["last_alloc_time_us"] is None


def test_top_sums_the_rest_in_one_row(tmp_path: Path) -> None:
    """``--top 1``: one site, then one row for the others; no byte is lost."""
    data = call_sites_snapshot()
    path = write(tmp_path / "sites.pickle", data)
    full, top = snapshot_json(path), snapshot_json(path, "--top", "1")
    for key in ("never_freed", "churn"):
        assert len(full[key]) >= 1
        assert top[key][0] == full[key][0]
        assert len(top[key]) == min(len(full[key]), 2)
        assert sum(r["bytes"] for r in top[key]) == sum(r["bytes"] for r in full[key])
        assert sum(r["count"] for r in top[key]) == sum(r["count"] for r in full[key])


def oldest_layout() -> list[Segment]:
    """The layout of torch 1.13's ``_snapshot()``: a bare list of segments, each block's
    stack and requested size in ``history[0]`` (``real_size``), Python frames only, no
    ``requested_size`` anywhere."""

    def old_block(size: int, real_size: int, frames: list[Frame]) -> Block:
        return {
            "size": size,
            "state": "active_allocated",
            "history": [{"addr": 0, "real_size": real_size, "frames": frames}],
        }

    step = [STEP, MAIN]
    forward = [frame("forward", f"{TORCH_PY}/nn/modules/linear.py", 114), FORWARD, STEP, MAIN]
    large = [
        old_block(20 * MiB, 20 * MiB - 3000, step),
        {"size": 4 * MiB, "state": "inactive"},
        old_block(8 * MiB, 8 * MiB - 512, forward),
    ]
    small = [
        old_block(512, 100, forward),
        {"size": 2 * MiB - 512, "state": "inactive"},
    ]
    out = []
    for address, blocks, kind in ((SEG, large, "large"), (SEG + 64 * MiB, small, "small")):
        out.append(
            {
                "device": 0,
                "address": address,
                "total_size": sum(b["size"] for b in blocks),
                "allocated_size": sum(b["size"] for b in blocks if b["state"] != "inactive"),
                "active_size": sum(b["size"] for b in blocks if b["state"] != "inactive"),
                "stream": 0,
                "segment_type": kind,
                "blocks": blocks,
            }
        )
    return out


def test_oldest_layout(tmp_path: Path) -> None:
    data = oldest_layout()
    doc = snapshot_json(write(tmp_path / "old.pickle", data))
    blocks = [b for s in data for b in s["blocks"]]
    allocated = [b for b in blocks if b["state"] == "active_allocated"]
    stats = doc["stats"]
    assert stats["segments"] == 2
    assert stats["reserved_bytes"] == sum(s["total_size"] for s in data)
    assert stats["allocated_bytes"] == sum(b["size"] for b in allocated)
    assert stats["requested_bytes"] == sum(b["history"][0]["real_size"] for b in allocated)
    assert stats["block_counts"] == dict(Counter(b["state"] for b in blocks))
    assert doc["trace"] is None
    assert listed(doc["now"]["by_site"]) == by_user_site(
        (block_frames(b), b["size"]) for b in allocated
    )
    assert doc["fragmentation"]["rounding_loss_bytes"] == sum(
        b["size"] - b["history"][0]["real_size"] for b in allocated
    )


@pytest.mark.parametrize("traces", ["absent", "empty"])
def test_a_snapshot_without_a_trace(tmp_path: Path, traces: str) -> None:
    """No ``device_traces`` (or empty ones): the state at the dump is reported, the trace
    parts are null, and the text says no trace was recorded."""
    data, _ = oom_snapshot()
    if traces == "absent":
        del data["device_traces"]
    else:
        data["device_traces"] = [[]]
    path = write(tmp_path / "notrace.pickle", data)
    doc = snapshot_json(path)
    assert doc["trace"] is None
    assert doc["peak"] is None
    assert doc["devices"] == []
    assert doc["stats"]["segments"] == 1
    assert doc["now"]["bytes"] == active_at_end(data, 0)
    text = snapshot_text(path)
    assert re.search(r"\bno (allocator )?trace\b", text, re.IGNORECASE), text
    assert "asked for" not in text, "no trace, no peak table to compare with"


def fragmented_snapshot() -> dict[str, Any]:
    """Two large segments and a small one with free blocks in known places; two adjacent
    inactive blocks in the first make one free span of 4 MiB."""
    a = py_stack(STEP, MAIN)
    large1 = segment(
        [
            block(2 * MiB, frames=a, requested=2 * MiB - 4000),
            block(1 * MiB, "inactive"),
            block(3 * MiB, "inactive"),
            block(2 * MiB, frames=a),
            block(2 * MiB, "inactive"),
        ],
        SEG,
    )
    large2 = segment(
        [
            block(3 * MiB // 2, "inactive"),
            block(4 * MiB, frames=a),
            block(5 * MiB // 2, "inactive"),
        ],
        SEG + 32 * MiB,
    )
    small = segment(
        [block(512 * KiB, "inactive"), block(512 * KiB, frames=a), block(1 * MiB, "inactive")],
        SEG + 64 * MiB,
        segment_type="small",
    )
    return snapshot([large1, large2, small])


def test_fragmentation_requests(tmp_path: Path) -> None:
    """Whether a request fits: large-pool free spans serve requests over 1 MiB, small-pool
    ones the rest; a span serves a request when it is at least as large."""
    data = fragmented_snapshot()
    doc = snapshot_json(
        write(tmp_path / "frag.pickle", data), "--request", "3MiB", "--request", "512KiB"
    )
    frag = doc["fragmentation"]
    requests = {r["request_bytes"]: r for r in frag["requests"]}
    assert {3 * MiB, 512 * KiB} <= set(requests)
    runs = {
        kind: [r for s in data["segments"] if s["segment_type"] == kind for r in free_runs(s)]
        for kind in ("large", "small")
    }
    assert sorted(runs["large"]) == [3 * MiB // 2, 2 * MiB, 5 * MiB // 2, 4 * MiB]
    for size, fit in requests.items():
        pool = runs["large" if size > 1 * MiB else "small"]
        usable = sum(r for r in pool if r >= size)
        assert fit["usable_free_bytes"] == usable, size
        assert fit["unusable_free_bytes"] == sum(pool) - usable, size
        assert fit["fits_without_cuda_malloc"] == (usable > 0), size
    assert requests[3 * MiB]["usable_free_bytes"] == 4 * MiB
    assert requests[3 * MiB]["unusable_free_bytes"] == 6 * MiB
    all_runs = runs["large"] + runs["small"]
    assert frag["free_bytes"] == sum(all_runs)
    assert frag["largest_free_block_bytes"] == max(all_runs)
    assert frag["rounding_loss_bytes"] == 4000
    largest_each = sum(max(free_runs(s)) for s in data["segments"])
    assert frag["fragmented_percent"] == pytest.approx(
        100 * (sum(all_runs) - largest_each) / sum(all_runs)
    )


def test_diff_names_the_site_that_grew(tmp_path: Path) -> None:
    """B holds 8 MiB more from model.py forward than A, and 1 MiB from a new site; the
    rest is the same. The diff is of the blocks alive at each dump, by user site."""

    def state(forward_mib: int, extra: bool) -> dict[str, Any]:
        blocks = [
            block(4 * MiB, frames=py_stack(STEP, MAIN)),
            block(forward_mib * MiB, frames=py_stack(FORWARD, STEP, MAIN)),
        ]
        if extra:
            blocks.append(block(1 * MiB, frames=py_stack(LOSS, MAIN)))
        blocks.append(block(2 * MiB, "inactive"))
        return snapshot([segment(blocks, SEG)])

    a_data, b_data = state(2, False), state(10, True)
    a = write(tmp_path / "a.pickle", a_data)
    b = write(tmp_path / "b.pickle", b_data)
    out = gpuscope_cli("snapshot", a, "--diff", b, "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)

    def alive(data: dict[str, Any]) -> dict[str, list[int]]:
        return by_user_site(
            (b["frames"], b["size"])
            for s in data["segments"]
            for b in s["blocks"]
            if b["state"] != "inactive"
        )

    before, after = alive(a_data), alive(b_data)
    deltas = {
        s: after.get(s, [0, 0])[0] - before.get(s, [0, 0])[0] for s in set(before) | set(after)
    }
    grew = max(deltas, key=lambda s: deltas[s])
    assert grew == site(FORWARD)  # the builder's intent
    first = doc["changed"][0]
    assert first["site"] == grew
    assert first["delta_bytes"] == deltas[grew] == 8 * MiB
    assert first["before_bytes"] == before[grew][0]
    assert first["after_bytes"] == after[grew][0]
    changed = {c["site"]: c["delta_bytes"] for c in doc["changed"]}
    assert changed == {s: d for s, d in deltas.items() if d != 0}
    assert doc["unchanged_sites"] == sum(1 for d in deltas.values() if d == 0)
    text = gpuscope_cli("snapshot", a, "--diff", b)
    assert text.returncode == 0, text.stderr
    assert all(len(line) <= 80 for line in text.stdout.splitlines())


# ------------------------------------------------------------------------------- text


@pytest.mark.parametrize("name", REAL)
def test_text_fits_80_columns(name: str) -> None:
    """Printed to a pipe, every line of the report fits an 80-column terminal."""
    text = snapshot_text(SNAPSHOTS / name)
    wide = [line for line in text.splitlines() if len(line) > 80]
    assert wide == [], wide[:5]
    assert str(SNAPSHOTS / name) in text or name in text


def test_text_says_why_a_site_differs_between_the_peak_and_the_dump() -> None:
    """The trace counts requested bytes and the dump rounded blocks: on the real snapshot a
    site alive at both shows two sizes, and the text says why, once, after the dump."""
    shared_file(SNAPSHOTS / "lm_fullstep_ctx128.pickle")
    doc = real_json()["lm_fullstep_ctx128.pickle"]
    peak, now = listed(doc["peak"]["by_site"]), listed(doc["now"]["by_site"])
    assert any(peak[s][0] != now[s][0] for s in peak.keys() & now.keys())
    text = snapshot_text(SNAPSHOTS / "lm_fullstep_ctx128.pickle")
    flat = " ".join(text.split())
    why = "the trace records the bytes each allocation asked for, the dump the allocator's"
    assert flat.count(why) == 1, flat
    assert flat.index("Alive at the dump") < flat.index(why) < flat.index("Never freed")


def test_text_with_long_paths_fits_80_columns(tmp_path: Path) -> None:
    deep = frame("step", "/home/u/" + "very_long_directory_name/" * 6 + "train.py", 12)
    data = call_sites_snapshot()
    for e in data["device_traces"][0]:
        e["frames"] = py_stack(deep, MAIN)
    write(tmp_path / "long.pickle", data)
    # run where the file is, so the heading's path is short: only the sites are long
    out = gpuscope_cli("snapshot", "long.pickle", "--frames", "2", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "…" in text, "some site was long enough to be cut"
    wide = [line for line in text.splitlines() if len(line) > 80]
    assert wide == [], wide[:5]


# ------------------------------------------------------------------------- real CUDA


def test_snapshot_dumped_by_gpuscope_on_a_gpu(tmp_path: Path) -> None:
    """gpuscope's own dump (``gpuscope.memory.snapshots``) read back: its stats are the
    allocator's, as torch reports them."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA: torch.cuda.memory._snapshot() has no CPU allocator to dump")
    from gpuscope.memory.snapshots import dump_snapshot, start_history

    assert start_history()
    kept = [torch.empty(n * MiB, dtype=torch.uint8, device="cuda") for n in (1, 3, 7)]
    torch.cuda.synchronize()
    path = tmp_path / "gpu.pickle"
    assert dump_snapshot(path)
    doc = gpuscope.analyze_snapshot(path)
    assert doc["stats"]["reserved_bytes"] == torch.cuda.memory_reserved()
    assert doc["stats"]["allocated_bytes"] == torch.cuda.memory_allocated()
    assert doc["trace"] is not None
    assert doc["trace"]["actions"].get("alloc", 0) >= len(kept)


def test_cublas_workspaces_are_named_on_a_gpu(tmp_path: Path) -> None:
    """On a GPU, the workspaces torch allocates for cuBLAS handles (one block of the
    configured size each) come out of gpuscope's own dump named as such, not after the
    line of the first matrix product. The workspaces are cleared first, so that this
    test's products allocate them again while the history (with its C++ frames) records."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA: cuBLAS workspaces live in the CUDA caching allocator")
    from gpuscope.memory.snapshots import dump_snapshot, start_history

    torch.cuda.synchronize()
    torch._C._cuda_clearCublasWorkspaces()
    assert start_history()
    model = torch.nn.Linear(256, 256, device="cuda")
    x = torch.randn(64, 256, device="cuda")
    model(x).sum().backward()
    torch.cuda.synchronize()
    path = tmp_path / "workspaces.pickle"
    assert dump_snapshot(path)
    sites = listed(gpuscope.analyze_snapshot(path)["now"]["by_site"])
    size = torch._C._cuda_getCublasWorkspaceSize()
    assert "(cuBLAS workspace)" in sites, sorted(sites)
    workspace_bytes, handles = sites["(cuBLAS workspace)"]
    # One block per handle, of the configured size as the allocator rounds it (2 MiB
    # granules for large blocks).
    assert handles >= 1, sites
    assert handles * size <= workspace_bytes < handles * (size + 2 * MiB), (sites, size)
