"""`gpuscope trace` judged by torch's own figures, on small CPU training runs profiled here.

Two fixtures train a few Linear/ReLU layers with Adam for ``STEPS`` steps under
torch.profiler, then keep what torch itself says about the run next to the files it
exported: ``key_averages()`` for the operators (per name, and per name and input shapes),
and the JSON export of ``export_memory_timeline`` (torch's per-category totals over time)
next to its raw export. A third run holds two shapes of nesting torch's key_averages()
treats specially (an operator re-entered under its own name, a record_function range
inside an operator). gpuscope reads only the exported files; nothing it reports is used
to compute an expected value.
"""

from __future__ import annotations

import gzip
import json
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from _helpers import gpuscope_cli
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

STEPS = 5
BATCH, FEATURES, HIDDEN, CLASSES = 32, 64, 64, 10
# Times: gpuscope reads the exported timestamps (µs with three decimals), torch sums its
# own nanosecond clock readings; they may differ by the rounding of each event.
REL_TOLERANCE = 0.02
ABS_TOLERANCE_US = 2.0
# Operators torch's key_averages() lists that are not CPU operators of the trace: every
# `record_function` range is a profiler "function event" to torch, but a
# `user_annotation` event in the exported trace (Adam's "Optimizer.step#Adam.step" and
# "Optimizer.zero_grad#Adam.zero_grad" here), which gpuscope keeps out of its operator
# tables (they are ranges the user named, not ATen operators).
ANNOTATION_CATEGORY = "user_annotation"
# On a machine with CUDA, key_averages() of a CPU-only profile also lists the CUDA runtime
# calls torch makes on the CPU (cudaStreamIsCapturing), which the exported trace does not
# hold as operators. torch's side keeps only the names the trace holds as anything but a
# runtime or driver call, so the tests mean the same with and without a GPU.
RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver")

# torch deprecates export_memory_timeline in favour of CUDA allocator snapshots, which a
# CPU run does not have; it is what gpuscope reads.
pytestmark = pytest.mark.filterwarnings("ignore:`export_memory_timeline` is deprecated")


# ---------------------------------------------------------------------------- inputs


def make_model() -> tuple[nn.Module, torch.optim.Optimizer, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(FEATURES, HIDDEN),
        nn.ReLU(),
        nn.Linear(HIDDEN, HIDDEN),
        nn.ReLU(),
        nn.Linear(HIDDEN, CLASSES),
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(BATCH, FEATURES), torch.randint(0, CLASSES, (BATCH,))
    return model, opt, x, y


def train(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> None:
    for _ in range(STEPS):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        torch.autograd.backward(loss)
        opt.step()


def gpuscope_json(path: Path) -> dict[str, Any]:
    out = gpuscope_cli("trace", path, "--format", "json", "--top", "1000")
    assert out.returncode == 0, out.stderr
    assert "panicked" not in out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def trace_events(path: Path) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = json.loads(path.read_text())["traceEvents"]
    return events


@dataclass(frozen=True)
class TorchOp:
    """One row of torch's key_averages(): times in µs."""

    count: int
    self_us: float
    total_us: float


@dataclass
class OperatorRun:
    trace: Path
    by_name: dict[str, TorchOp]
    by_shapes: dict[tuple[str, str], TorchOp]  # (name, json of the input shapes)
    annotations: set[str]  # names of the trace's user_annotation events
    unshaped: set[str]  # names of CPU operators recorded without "Input Dims"
    doc: dict[str, Any]


@dataclass
class MemoryRun:
    trace: Path
    raw: Path  # export_memory_timeline(*.raw.json.gz)
    coalesced: Path  # export_memory_timeline(*.json): [times, sizes by category]
    prof: profile


def shapes_key(shapes: Any) -> str:
    """Input shapes as one comparable string (torch gives lists, gpuscope JSON text)."""
    return json.dumps(shapes, separators=(",", ":"))


def traced_names(events: list[dict[str, Any]]) -> set[str]:
    """Names the trace holds as operators or ranges (see RUNTIME_CATEGORIES)."""
    return {str(e["name"]) for e in events if e.get("cat") not in RUNTIME_CATEGORIES}


def torch_op(event: Any) -> TorchOp:
    return TorchOp(
        count=int(event.count),
        self_us=float(event.self_cpu_time_total),
        total_us=float(event.cpu_time_total),
    )


@pytest.fixture(scope="module")
def operator_run(tmp_path_factory: pytest.TempPathFactory) -> OperatorRun:
    work = tmp_path_factory.mktemp("operators")
    model, opt, x, y = make_model()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        train(model, opt, x, y)
    trace = work / "operators.pt.trace.json"
    prof.export_chrome_trace(str(trace))
    events = trace_events(trace)
    traced = traced_names(events)
    by_name = {e.key: torch_op(e) for e in prof.key_averages() if e.key in traced}
    by_shapes = {
        (e.key, shapes_key(e.input_shapes)): torch_op(e)
        for e in prof.key_averages(group_by_input_shape=True)
        if e.key in traced
    }
    annotations = {str(e["name"]) for e in events if e.get("cat") == ANNOTATION_CATEGORY}
    unshaped = {
        str(e["name"])
        for e in events
        if e.get("cat") == "cpu_op" and "Input Dims" not in e.get("args", {})
    }
    doc = gpuscope_json(trace)
    return OperatorRun(trace, by_name, by_shapes, annotations, unshaped, doc)


@pytest.fixture(scope="module")
def memory_run(tmp_path_factory: pytest.TempPathFactory) -> MemoryRun:
    """torch needs all three of profile_memory, record_shapes and with_stack for its
    memory timeline (it follows tensors through the operators' inputs)."""
    work = tmp_path_factory.mktemp("memory")
    model, opt, x, y = make_model()
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
    ) as prof:
        train(model, opt, x, y)
    trace = work / "memory.pt.trace.json"
    prof.export_chrome_trace(str(trace))
    # torch writes raw events only for a path ending in "raw.json.gz" (profiler.py,
    # export_memory_timeline); any other ".gz" or ".json" path gets the coalesced plot data.
    raw = work / "memory_timeline.raw.json.gz"
    coalesced = work / "memory_timeline.json"
    prof.export_memory_timeline(str(raw), device="cpu")
    prof.export_memory_timeline(str(coalesced), device="cpu")
    return MemoryRun(trace, raw, coalesced, prof)


def close(ours: float, theirs: float) -> bool:
    return math.isclose(ours, theirs, rel_tol=REL_TOLERANCE, abs_tol=ABS_TOLERANCE_US)


def check_times(what: str, row: dict[str, Any], want: TorchOp) -> list[str]:
    """Differences between a gpuscope operator row and torch's figures, as messages."""
    wrong = []
    if row["count"] != want.count:
        wrong.append(f"{what}: count {row['count']} != torch's {want.count}")
    if not close(row["self_us"], want.self_us):
        wrong.append(f"{what}: self {row['self_us']:.3f} µs != torch's {want.self_us:.3f}")
    if not close(row["total_us"], want.total_us):
        wrong.append(f"{what}: total {row['total_us']:.3f} µs != torch's {want.total_us:.3f}")
    return wrong


# ------------------------------------------------------------------ operators, shapes


def test_the_run_has_the_operators_of_the_model(operator_run: OperatorRun) -> None:
    """Guards the fixture: the forward, backward and Adam ops of the loop are there, each
    call counted by torch."""
    ops = operator_run.by_name
    assert ops["aten::addmm"].count == 3 * STEPS  # three Linear layers
    assert ops["aten::relu"].count == 2 * STEPS
    assert ops["aten::mm"].count > 0 and ops["aten::threshold_backward"].count == 2 * STEPS
    assert {"Optimizer.step#Adam.step", "Optimizer.zero_grad#Adam.zero_grad"} <= set(ops)
    assert operator_run.annotations == {
        "Optimizer.step#Adam.step",
        "Optimizer.zero_grad#Adam.zero_grad",
    }


def test_operators_by_self_time_agree_with_key_averages(operator_run: OperatorRun) -> None:
    (rank,) = operator_run.doc["ranks"]
    rows = rank["operators"]["by_self_time"]
    ours = {r["name"]: r for r in rows}
    assert len(ours) == len(rows), "an operator listed twice"
    # Every CPU operator torch counted, and nothing else (the annotations aside: see
    # ANNOTATION_CATEGORY).
    expected = set(operator_run.by_name)
    assert set(ours) == expected
    wrong = [
        message
        for name in sorted(expected)
        for message in check_times(name, ours[name], operator_run.by_name[name])
    ]
    assert wrong == []
    # The main operators of the loop are there by name, whatever their rank.
    assert {"aten::addmm", "aten::mm", "aten::relu", "aten::threshold_backward"} <= set(ours)
    selfs = [r["self_us"] for r in rows]
    assert selfs == sorted(selfs, reverse=True)


def test_operator_shapes_agree_with_key_averages(operator_run: OperatorRun) -> None:
    (rank,) = operator_run.doc["ranks"]
    rows = rank["operators"]["by_shapes"]
    ours = {(r["name"], shapes_key(json.loads(r["input_shapes"]))): r for r in rows}
    assert len(ours) == len(rows), "a (name, shapes) row listed twice"
    # torch puts operators without recorded shapes under [] (here the autograd engine's
    # "evaluate_function: ..." ranges, which Kineto writes without "Input Dims");
    # gpuscope's table holds only operators with recorded shapes.
    no_shapes = {(name, shapes_key([])) for name in operator_run.unshaped}
    assert no_shapes <= set(operator_run.by_shapes)
    expected = {
        key
        for key in operator_run.by_shapes
        if key[0] not in operator_run.annotations and key not in no_shapes
    }
    assert set(ours) == expected
    wrong = [
        message
        for key in sorted(expected)
        for message in check_times(str(key), ours[key], operator_run.by_shapes[key])
    ]
    assert wrong == []


def test_addmm_has_the_input_shapes_of_the_layers(operator_run: OperatorRun) -> None:
    """addmm(bias, input, weight.t(), beta, alpha) of each Linear layer, from the model's
    own sizes: two [FEATURES/HIDDEN → HIDDEN] layers, one [HIDDEN → CLASSES]."""
    (rank,) = operator_run.doc["ranks"]
    addmm = {
        shapes_key(json.loads(r["input_shapes"])): r["count"]
        for r in rank["operators"]["by_shapes"]
        if r["name"] == "aten::addmm"
    }
    assert FEATURES == HIDDEN  # so the first two layers share their shapes
    assert addmm == {
        shapes_key([[HIDDEN], [BATCH, FEATURES], [FEATURES, HIDDEN], [], []]): 2 * STEPS,
        shapes_key([[CLASSES], [BATCH, HIDDEN], [HIDDEN, CLASSES], [], []]): STEPS,
    }
    torch_addmm = {
        shapes: op.count
        for (name, shapes), op in operator_run.by_shapes.items()
        if name == "aten::addmm"
    }
    assert addmm == torch_addmm


# ------------------------------------------------------------ nested operators

# A record_function range inside a custom backward, and the time spent in it.
BLOCK = "scale_backward_block"
BLOCK_SLEEP_S = 0.003
NESTED_CALLS = 3


class Scale(torch.autograd.Function):
    """Doubles its input; its backward does its work inside a named range."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        with record_function(BLOCK):
            time.sleep(BLOCK_SLEEP_S)
            return grad * 2


@pytest.fixture(scope="module")
def nested_run(tmp_path_factory: pytest.TempPathFactory) -> OperatorRun:
    """``Scale.apply(x).sum().backward()``, NESTED_CALLS times: a full ``sum`` is
    ``aten::sum`` calling the dispatcher again as ``aten::sum`` (one child of the same
    name), and the backward of Scale runs a record_function range inside the
    ``ScaleBackward`` operator."""
    work = tmp_path_factory.mktemp("nested")
    x = torch.randn(64, 64, requires_grad=True)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(NESTED_CALLS):
            torch.autograd.backward(Scale.apply(x).sum())
    trace = work / "nested.pt.trace.json"
    prof.export_chrome_trace(str(trace))
    events = trace_events(trace)
    traced = traced_names(events)
    by_name = {e.key: torch_op(e) for e in prof.key_averages() if e.key in traced}
    annotations = {str(e["name"]) for e in events if e.get("cat") == ANNOTATION_CATEGORY}
    return OperatorRun(trace, by_name, {}, annotations, set(), gpuscope_json(trace))


def ops_by_name(run: OperatorRun) -> dict[str, dict[str, Any]]:
    (rank,) = run.doc["ranks"]
    return {r["name"]: r for r in rank["operators"]["by_self_time"]}


def test_an_operator_reentered_under_its_own_name_is_one_call(nested_run: OperatorRun) -> None:
    events = [e for e in trace_events(nested_run.trace) if e.get("name") == "aten::sum"]
    if len(events) != 2 * NESTED_CALLS:
        pytest.fail(f"expected an aten::sum inside each aten::sum, got {len(events)} events")
    want = nested_run.by_name["aten::sum"]
    assert want.count == NESTED_CALLS
    assert check_times("aten::sum", ops_by_name(nested_run)["aten::sum"], want) == []


def test_a_range_inside_an_operator_is_not_its_self_time(nested_run: OperatorRun) -> None:
    assert nested_run.annotations == {BLOCK}
    block = nested_run.by_name[BLOCK]
    assert block.self_us >= NESTED_CALLS * BLOCK_SLEEP_S * 1e6  # the sleep is the range's
    ours = ops_by_name(nested_run)
    for name in ("ScaleBackward", "autograd::engine::evaluate_function: ScaleBackward"):
        assert check_times(name, ours[name], nested_run.by_name[name]) == []


def test_nested_run_agrees_elsewhere(nested_run: OperatorRun) -> None:
    """The two cases above aside, the same run agrees with torch."""
    ours = ops_by_name(nested_run)
    assert set(ours) == set(nested_run.by_name)
    skip = {"aten::sum", "ScaleBackward"}
    wrong = [
        message
        for name in sorted(set(ours) - skip)
        for message in check_times(name, ours[name], nested_run.by_name[name])
    ]
    assert wrong == []


# ---------------------------------------------------------------- memory timeline


def raw_events(path: Path) -> list[tuple[int, int, int, int]]:
    with gzip.open(path, "rt") as f:
        rows: list[list[int]] = json.load(f)
    return [(t, action, size, category) for t, action, size, category in rows]


def coalesce(events: list[tuple[int, int, int, int]]) -> list[tuple[int, list[int]]]:
    """The raw events replayed the way torch's _coalesce_timeline groups them: one row per
    distinct whole microsecond (pre-existing memory, time -1, is a row of its own), holding
    the bytes of each category after the last event of that microsecond."""
    rows: list[tuple[int, list[int]]] = []
    for t, _, size, category in events:
        us = t if t == -1 else int(t / 1000)
        if not rows or rows[-1][0] != us:
            rows.append((us, list(rows[-1][1]) if rows else [0] * 8))
        rows[-1][1][category] += size
    return rows


def running_totals(events: list[tuple[int, int, int, int]]) -> Iterator[int]:
    total = 0
    for _, _, size, _ in events:
        total += size
        yield total


@pytest.fixture(scope="module")
def timelines(memory_run: MemoryRun) -> tuple[dict[str, Any], list[list[int]], list[int]]:
    """gpuscope's document for the raw export, torch's coalesced sizes (one row per time,
    category columns in _CATEGORY_TO_INDEX order — the leading column of torch's rows,
    always 0, is dropped), and torch's times."""
    out = gpuscope_cli("trace", memory_run.raw, "--format", "json")
    assert out.returncode == 0, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    times, sizes = json.loads(memory_run.coalesced.read_text())
    assert all(row[0] == 0 for row in sizes)
    return doc, [row[1:] for row in sizes], times


def test_torch_category_order_is_gpuscopes(
    timelines: tuple[dict[str, Any], list[list[int]], list[int]],
) -> None:
    from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX

    names = [("unknown" if c is None else c.name.lower()) for c in _CATEGORY_TO_INDEX]
    assert [_CATEGORY_TO_INDEX[c] for c in _CATEGORY_TO_INDEX] == list(range(len(names)))
    doc, sizes, _ = timelines
    assert doc["schema"] == "gpuscope.memory-timeline/1"
    assert doc["categories"] == names
    assert {len(row) for row in sizes} == {len(names)}


def test_the_two_torch_exports_are_the_same_timeline(
    memory_run: MemoryRun, timelines: tuple[dict[str, Any], list[list[int]], list[int]]
) -> None:
    """Guards the comparison below: the raw events, grouped by microsecond as torch groups
    them, give torch's coalesced rows exactly."""
    _, sizes, times = timelines
    rows = coalesce(raw_events(memory_run.raw))
    assert [r[1] for r in rows] == sizes
    # torch dates the pre-existing row (-1) at the first real microsecond.
    first = next(t for t, _ in rows if t != -1)
    assert [first if t == -1 else t for t, _ in rows] == times


def test_memory_timeline_peak_and_end_agree_with_torch(
    memory_run: MemoryRun, timelines: tuple[dict[str, Any], list[list[int]], list[int]]
) -> None:
    """The peak is the highest sum over the categories, the end is torch's last row.

    torch's own export coalesces by microsecond: a peak that lasts less than a microsecond
    (an allocation freed within it) is in gpuscope's event-by-event peak but not in torch's
    rows. The test replays the raw events itself to tell: when no such transient exists the
    peak must equal torch's exactly, category by category, at the microsecond it happened;
    otherwise torch's highest row is only a lower bound and the peak is the replay's."""
    doc, sizes, times = timelines
    events = raw_events(memory_run.raw)
    assert doc["events"] == len(events)
    # The end: every category as torch's last row has it.
    assert doc["end"]["bytes"] == sizes[-1]
    assert doc["end"]["total"] == sum(sizes[-1])
    # The peak.
    torch_peak = max(sum(row) for row in sizes)
    event_peak = max(running_totals(events))
    assert doc["peak"]["total"] == event_peak
    assert sum(doc["peak"]["bytes"]) == doc["peak"]["total"]
    assert torch_peak > 0
    if event_peak != torch_peak:
        assert torch_peak < event_peak
        pytest.skip(f"a sub-microsecond peak ({event_peak} B) torch's rows cannot show")
    assert doc["peak"]["total"] == torch_peak
    # ... at the microsecond it happened: gpuscope's time is ms from the first timed event.
    origin_ns = min(t for t, *_ in events if t >= 0)
    # (Integers: the times are ns since 1970, beyond a float's exact range; the division
    # by 1000 is torch's own, which may round up.)
    peak_ns = origin_ns + round(doc["peak"]["at_ms"] * 1e6)
    peak_us = int(peak_ns / 1000)
    (row,) = [row for t, row in zip(times, sizes, strict=True) if t == peak_us]
    assert row == doc["peak"]["bytes"]


def test_each_categorys_own_max_agrees_with_torch(
    memory_run: MemoryRun, timelines: tuple[dict[str, Any], list[list[int]], list[int]]
) -> None:
    """Each category's own highest bytes, whenever they were reached: the event-by-event
    replay's, at least torch's highest coalesced row of it. The text lists every category
    that ever held memory with its own max (a category freed quickly, like ``temporary``,
    can hold nothing at the peak and at the end; its row used to be left out)."""
    doc, sizes, _ = timelines
    live, most = [0] * len(doc["categories"]), [0] * len(doc["categories"])
    for _, _, size, category in sorted(raw_events(memory_run.raw), key=lambda e: e[0]):
        live[category] += size
        most[category] = max(most[category], live[category])
    assert doc["max_bytes"] == most
    for ours, theirs in zip(doc["max_bytes"], map(max, zip(*sizes)), strict=True):
        assert ours >= theirs and (ours > 0) == (theirs > 0)
    out = gpuscope_cli("trace", memory_run.raw)
    assert out.returncode == 0, out.stderr
    # The table follows the header (wrapped to the terminal) and its blank line.
    table = out.stdout.split("\n\n", 1)[1].splitlines()
    rows = {line.split()[0]: line.split()[-1] for line in table}
    for category, m in zip(doc["categories"], most, strict=True):
        if m > 0:
            assert rows[category] == f"{m / 2**20:.1f}", out.stdout


@pytest.mark.parametrize("name", ["memory_timeline.raw.gz", "memory_timeline.raw.json"])
def test_the_export_named_as_the_help_says_is_read(
    memory_run: MemoryRun,
    timelines: tuple[dict[str, Any], list[list[int]], list[int]],
    tmp_path: Path,
    name: str,
) -> None:
    path = tmp_path / name
    memory_run.prof.export_memory_timeline(str(path), device="cpu")
    data = path.read_bytes()
    times, sizes = json.loads(gzip.decompress(data) if name.endswith(".gz") else data)
    if not (isinstance(times[0], int) and isinstance(sizes[0], list)):
        pytest.fail("torch wrote raw events here: the premise of this xfail is gone")
    out = gpuscope_cli("trace", path, "--format", "json")
    assert "panicked" not in out.stderr
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    _, torch_sizes, _ = timelines
    assert doc["end"]["bytes"] == torch_sizes[-1]


# -------------------------------------------------------------- [memory] events


def test_memory_events_peak_is_the_allocators_count(memory_run: MemoryRun) -> None:
    """The chrome trace's `[memory]` instant events, summed in time order by the test; and
    torch's own "Total Allocated" of each event, which is that sum plus what the CPU
    allocator held before profiling: gpuscope's timeline is torch's count."""
    memory = sorted(
        (e for e in trace_events(memory_run.trace) if e.get("name") == "[memory]"),
        key=lambda e: float(e["ts"]),
    )
    assert memory, "no [memory] events with profile_memory=True"
    assert {e["args"]["Device Id"] for e in memory} == {-1}  # the CPU
    level, peak, offsets = 0, None, set()
    for e in memory:
        level += int(e["args"]["Bytes"])
        peak = level if peak is None else max(peak, level)
        offsets.add(int(e["args"]["Total Allocated"]) - level)
    assert peak is not None and peak > 0
    (offset,) = offsets  # torch's count differs from the running sum by a constant

    doc = gpuscope_json(memory_run.trace)
    (rank,) = doc["ranks"]
    (cpu,) = rank["memory"]
    assert cpu["device"] == "cpu"
    assert cpu["events"] == len(memory)
    assert cpu["allocated_before_trace_bytes"] == offset
    assert cpu["peak_bytes"] == peak + offset
    assert cpu["peak_bytes"] == max(int(e["args"]["Total Allocated"]) for e in memory)
    assert cpu["end_bytes"] == int(memory[-1]["args"]["Total Allocated"])
    assert cpu["peak_reserved_bytes"] is None  # the CPU's "Total Reserved" says nothing
    assert max(b for _, b in cpu["timeline"]) == peak + offset
