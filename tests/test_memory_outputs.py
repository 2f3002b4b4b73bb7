"""What ``gpuscope.MemoryProfiler`` writes into a run directory, read back with independent
readers: ``profiles/memory.jsonl`` with ``json``, the ``tensor_profile_<ts>.log`` text log with
analyze_tensor_profile.py's own regexes and a line grammar checked first against the
shared reference log of that format, and
``tensorboard/`` with TensorBoard's ``EventAccumulator``. Also the schedule (``every``,
``windows``), ``GPUSCOPE_PROFILE=0``, the argparse switches, and the loss components of a
run whose regularisers switch on and off by phase (a phased training, scaled down 100×)."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gpuscope
import pytest
import torch
from _helpers import SHARED_DATA, accumulator, f32, shared_data_absent
from _memory_helpers import (
    CATEGORY_KEYS,
    MB,
    MLP,
    nbytes,
    one_thread,
    optimizer_state_bytes,
    params_bytes,
    profiler_files,
    read_jsonl,
)
from tensorboard.plugins.custom_scalar import layout_pb2
from torch import nn

REFERENCE_TEXT_LOG = SHARED_DATA / "logs" / "tensor_profile_20260128_140205.log"

# analyze_tensor_profile.py's regexes, exactly as ../shared/data/README.md lists them.
ANALYZER_REGEXES = {
    "iteration": r"Iteration (\d+)",
    "allocated": r"Allocated: ([\d.]+) MB",
    "reserved": r"Reserved: ([\d.]+) MB",
    "fragmentation": r"Fragmentation: ([\d.]+)%",
    "tensors": r"Total Tensors: (\d+)",
}


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    with one_thread():
        yield


# -- one phased training run, shared by the output checks ------------------------------

ITERS = 120
EVERY = 5
# A phased training's phases, 100x shorter: 0-70 rendering only, 70-90 + entropy + depth_normal,
# 90+ rendering + depth_normal + sdf
PHASES = {
    "rendering": lambda it: True,
    "entropy_regularization": lambda it: 70 <= it < 90,
    "depth_normal_consistency": lambda it: it >= 70,
    "sdf_estimation": lambda it: it >= 90,
}
SH_SHAPE = (1_500_000, 15, 3)  # the reference log's largest tensor: 257.49 MB, never touched


class Splats(nn.Module):
    """A small real model plus one buffer the size of the reference log's largest (torch.empty: address space only)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = MLP(16, 32, 4)
        self.register_buffer("sh_rest", torch.empty(SH_SHAPE))
        self.register_buffer("ids", torch.arange(100))  # int64


@dataclass
class PhasedRun:
    run_dir: Path
    model: Splats
    opt: torch.optim.Optimizer
    paths: list[Path]
    losses: dict[int, dict[str, float]] = field(default_factory=dict)


@pytest.fixture(scope="module")
def phased(tmp_path_factory: pytest.TempPathFactory) -> PhasedRun:
    torch.manual_seed(0)
    run_dir = tmp_path_factory.mktemp("phased") / "run"
    model = Splats()
    opt = torch.optim.Adam(model.net.parameters(), lr=1e-2)
    x, y = torch.randn(32, 16), torch.randn(32, 4)
    with one_thread():
        scope = gpuscope.MemoryProfiler(run_dir, model=model, optimizer=opt, every=EVERY)
        run = PhasedRun(run_dir, model, opt, scope.paths)
        for it in range(ITERS):
            out = model.net(x)
            parts: dict[str, torch.Tensor] = {"rendering": (out - y).pow(2).mean()}
            if PHASES["entropy_regularization"](it):
                o = out.sigmoid()
                parts["entropy_regularization"] = 0.1 * -(o * (o + 1e-6).log()).mean()
            if PHASES["depth_normal_consistency"](it):
                parts["depth_normal_consistency"] = 0.05 * out.diff(dim=1).abs().mean()
            if PHASES["sdf_estimation"](it):
                parts["sdf_estimation"] = 0.01 * out.abs().mean()
            loss = sum(parts.values())
            assert isinstance(loss, torch.Tensor)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if it % EVERY == 0:
                run.losses[it] = {k: float(v.item()) for k, v in parts.items()}
            scope.step(it, losses=parts)
        scope.close()
    return run


def test_files_and_paths(phased: PhasedRun) -> None:
    profiles = phased.run_dir / "profiles"
    logs = sorted(profiles.glob("tensor_profile_*.log"))
    assert len(logs) == 1
    assert re.fullmatch(r"tensor_profile_\d{8}_\d{6}\.log", logs[0].name)
    assert (profiles / "memory.jsonl").is_file()
    events = list((phased.run_dir / "tensorboard").glob("events.out.tfevents.*"))
    assert len(events) == 1
    assert set(phased.paths) == {profiles / "memory.jsonl", logs[0], events[0]}


# -- JSONL -----------------------------------------------------------------------------


def test_jsonl_one_line_per_due_iteration_with_the_issue_keys(phased: PhasedRun) -> None:
    records = read_jsonl(phased.run_dir / "profiles" / "memory.jsonl")
    assert [r["iteration"] for r in records] == list(range(0, ITERS, EVERY))
    required = {
        "iteration",
        "time",
        "rank",
        "device",
        "categories_bytes",
        "modules_bytes",
        "dtypes_bytes",
        "tensor_count",
        "census_bytes",
        "large_tensors",
        "allocator",
        "system",
        "losses",
    }
    times = [r["time"] for r in records]
    assert times == sorted(times)
    for r in records:
        assert required <= set(r), required - set(r)
        assert r["rank"] == 0 and r["device"] == "cpu"
        assert isinstance(r["time"], float) and abs(r["time"] - times[0]) < 600
        assert set(r["categories_bytes"]) == set(CATEGORY_KEYS)
        for k in ("parameters", "gradients", "optimizer_state", "buffers"):
            assert type(r["categories_bytes"][k]) is int
        assert type(r["categories_bytes"]["activations"]) is int  # CPU: from the C heap
        assert r["categories_bytes"]["other"] is None  # no heap scan asked for
        for table in ("modules_bytes", "dtypes_bytes"):
            assert all(type(v) is int and v >= 0 for v in r[table].values())
        assert type(r["tensor_count"]) is int and type(r["census_bytes"]) is int
        assert r["allocator"] is None  # CPU: null, never zeros
        assert {"rss_bytes", "cpu_percent", "ram_percent"} <= set(r["system"])
        assert type(r["system"]["rss_bytes"]) is int and r["system"]["rss_bytes"] > 0


def test_jsonl_figures_match_torch(phased: PhasedRun) -> None:
    model, opt = phased.model, phased.opt
    p = params_bytes(model)
    b = sum(nbytes(t) for t in model.buffers())
    s = optimizer_state_bytes(opt)  # the same at every record: Adam's state exists from it 0
    assert s == 2 * p + 4 * len(list(model.parameters()))
    sh = nbytes(model.sh_rest)
    assert sh == 270_000_000
    for r in read_jsonl(phased.run_dir / "profiles" / "memory.jsonl"):
        c = r["categories_bytes"]
        assert (c["parameters"], c["gradients"], c["optimizer_state"], c["buffers"]) == (
            p,
            0,
            s,
            b,
        )
        assert r["census_bytes"] == p + s + b
        assert r["dtypes_bytes"] == {"float32": p + s + sh, "int64": 800}
        n_state = sum(len(st) for st in opt.state.values())  # exp_avg, exp_avg_sq, step
        assert r["tensor_count"] == len(list(model.parameters())) + n_state + 2
        (big,) = r["large_tensors"]
        assert r["large_tensor_count"] == 1 and r["large_tensor_bytes"] == sh
        assert big["bytes"] == sh and big["shape"] == list(SH_SHAPE)
        assert big["dtype"] == "float32" and big["name"] == "sh_rest"


def test_jsonl_losses_per_phase(phased: PhasedRun) -> None:
    records = read_jsonl(phased.run_dir / "profiles" / "memory.jsonl")
    for r in records:
        it = r["iteration"]
        expected = phased.losses[it]
        assert set(expected) == {name for name, on in PHASES.items() if on(it)}
        assert {k: v for k, v in r["losses"].items() if k != "total"} == expected
        assert r["losses"]["total"] == pytest.approx(math.fsum(expected.values()), rel=1e-12)
    phases = {frozenset(r["losses"]) for r in records}
    assert phases == {
        frozenset({"rendering", "total"}),
        frozenset({"rendering", "entropy_regularization", "depth_normal_consistency", "total"}),
        frozenset({"rendering", "depth_normal_consistency", "sdf_estimation", "total"}),
    }


# -- the tensor_profile_<ts>.log text log -----------------------------------------------

RULE = "=" * 80
LINE_SHAPES = {
    "iteration": re.compile(r"Iteration (\d+) \| \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}"),
    "total": re.compile(r"Total Tensors: (\d+)"),
    "alloc": re.compile(
        r"Allocated: (\d+\.\d{2}) MB \| Reserved: (\d+\.\d{2}) MB \| Fragmentation: (\d+\.\d)%"
    ),
    "entry": re.compile(r"  ([a-z0-9_]{1,15}) {0,14}: ([ \d]{4,}\d\.\d{2}) MB"),
    "large": re.compile(r"Large Tensors \(>([\d.]+)MB\): (\d+)"),
    "top": re.compile(r"  ([ \d]{4,}\d\.\d{2}) MB \| shape=\(([\d, ]*)\) \| dtype=([a-z0-9]+)"),
}


def parse_blocks(text: str) -> list[dict[str, Any]]:
    """Parses a text log block by block with a strict line grammar (the reference log's layout; a
    line saying that the figures are a CPU census may follow the Allocated line)."""
    lines = text.split("\n")
    assert lines[-1] == "", "the log ends with a newline"
    lines = lines[:-1]
    blocks: list[dict[str, Any]] = []
    i = 0

    def take(shape: str) -> re.Match[str]:
        nonlocal i
        m = LINE_SHAPES[shape].fullmatch(lines[i])
        assert m, f"line {i + 1}: {lines[i]!r} is not a {shape} line"
        i += 1
        return m

    def expect(literal: str) -> None:
        nonlocal i
        assert lines[i] == literal, f"line {i + 1}: {lines[i]!r} != {literal!r}"
        i += 1

    def entries() -> list[tuple[str, float]]:
        nonlocal i
        out = []
        while i < len(lines) and lines[i]:
            m = take("entry")
            assert len(m.group(0).split(":")[0]) == 2 + 15, "names are padded to 15"
            out.append((m.group(1), float(m.group(2))))
        return out

    while i < len(lines):
        block: dict[str, Any] = {}
        expect("")
        expect(RULE)
        block["iteration"] = int(take("iteration").group(1))
        expect(RULE)
        block["tensors"] = int(take("total").group(1))
        m = take("alloc")
        block["allocated"], block["reserved"], block["fragmentation"] = m.groups()
        block["cpu_note"] = None
        if lines[i].startswith("("):
            block["cpu_note"] = lines[i]
            i += 1
        expect("")
        expect("Tensor Categories:")
        block["categories"] = entries()
        expect("")
        expect("Data Types:")
        block["dtypes"] = entries()
        expect("")
        m = take("large")
        block["large_threshold_mb"], block["large_count"] = float(m.group(1)), int(m.group(2))
        block["top"] = []
        if block["large_count"]:
            expect("Top 5 largest:")
            while i < len(lines) and lines[i]:
                block["top"].append(take("top").groups())
        blocks.append(block)
    return blocks


def analyzer_regex_values(text: str) -> list[dict[str, str]]:
    """What analyze_tensor_profile.py reads: one dict per block, by its regexes only."""
    chunks = text.split(RULE + "\nIteration ")[1:]
    out = []
    for chunk in chunks:
        chunk = "Iteration " + chunk
        values = {}
        for key, rx in ANALYZER_REGEXES.items():
            m = re.search(rx, chunk)
            assert m, (key, chunk[:300])
            values[key] = m.group(1)
        out.append(values)
    return out


def test_line_grammar_reads_the_reference_text_log() -> None:
    """The grammar used on our log is first shown to accept the shared reference log."""
    if not REFERENCE_TEXT_LOG.is_file():
        shared_data_absent(REFERENCE_TEXT_LOG)
    import json

    reference = json.loads((REFERENCE_TEXT_LOG.parent / "reference.json").read_text())[
        REFERENCE_TEXT_LOG.name
    ]
    text = REFERENCE_TEXT_LOG.read_text()
    blocks = parse_blocks(text)
    assert len(blocks) == reference["records"]
    for block in blocks:
        assert block["cpu_note"] is None
        values = [v for _, v in block["categories"]]
        assert values == sorted(values, reverse=True)
    first, last = analyzer_regex_values(text)[0], analyzer_regex_values(text)[-1]
    assert int(first["iteration"]) == reference["first"]["iteration"]
    assert float(last["allocated"]) == reference["last"]["allocated_mb"]
    assert int(last["tensors"]) == reference["last"]["tensor_count"]


def test_text_log_parses_with_the_analyzer_regexes_and_matches_jsonl(phased: PhasedRun) -> None:
    (log,) = (phased.run_dir / "profiles").glob("tensor_profile_*.log")
    text = log.read_text()
    records = read_jsonl(phased.run_dir / "profiles" / "memory.jsonl")
    values = analyzer_regex_values(text)
    assert len(values) == len(records)
    for v, r in zip(values, records, strict=True):
        assert int(v["iteration"]) == r["iteration"]
        census_mb = f"{r['census_bytes'] / MB:.2f}"
        assert v["allocated"] == census_mb and v["reserved"] == census_mb
        assert float(v["fragmentation"]) == 0.0
        assert int(v["tensors"]) == r["tensor_count"]


def test_text_log_block_structure(phased: PhasedRun) -> None:
    (log,) = (phased.run_dir / "profiles").glob("tensor_profile_*.log")
    blocks = parse_blocks(log.read_text())
    records = read_jsonl(phased.run_dir / "profiles" / "memory.jsonl")
    assert len(blocks) == len(records)
    for block, r in zip(blocks, records, strict=True):
        assert block["iteration"] == r["iteration"]
        assert block["fragmentation"] == "0.0"
        assert block["cpu_note"] is not None and "CPU" in block["cpu_note"]
        assert "census" in block["cpu_note"]
        measured = {k: v for k, v in r["categories_bytes"].items() if v is not None}
        assert dict(block["categories"]) == {k: round(v / MB, 2) for k, v in measured.items()}
        assert [mb for _, mb in block["categories"]] == sorted(
            (mb for _, mb in block["categories"]), reverse=True
        )
        assert dict(block["dtypes"]) == {k: round(v / MB, 2) for k, v in r["dtypes_bytes"].items()}
        assert block["large_threshold_mb"] == 100
        assert block["large_count"] == 1
        assert block["top"] == [("  257.49", "1500000, 15, 3", "float32")]


# -- TensorBoard -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def tb(phased: PhasedRun) -> Any:
    return accumulator(phased.run_dir / "tensorboard")


def scalars(acc: Any, tag: str) -> dict[int, float]:
    return {e.step: e.value for e in acc.Scalars(tag)}


def test_tensorboard_tags(phased: PhasedRun, tb: Any) -> None:
    tags = set(tb.Tags()["scalars"])
    records = read_jsonl(phased.run_dir / "profiles" / "memory.jsonl")
    expected = {
        f"TensorProfiling/Tensor_Category/{c}_MB"
        for c in ("parameters", "gradients", "optimizer_state", "buffers", "activations")
    }
    expected |= {f"TensorProfiling/Tensor_DType/{d}_MB" for d in ("float32", "int64")}
    expected |= {
        "TensorProfiling/Large_Tensors/count",
        "TensorProfiling/Large_Tensors/total_MB",
        "TensorProfiling/Tensor_Count/total",
        "Loss/total",
    }
    expected |= {f"Loss/component_{name}" for name in PHASES}
    assert expected <= tags, expected - tags
    assert "TensorProfiling/Tensor_Category/other_MB" not in tags  # other is null here
    assert "TensorProfiling/fragmentation_percent" not in tags  # no allocator on CPU
    assert not any(t.startswith(("Memory/allocated", "Memory/reserved")) for t in tags)
    known = re.compile(
        r"TensorProfiling/(Tensor_Category/[a-z_]+_MB|Tensor_DType/[a-z0-9]+_MB|"
        r"Large_Tensors/(count|total_MB)|Tensor_Count/total|Module/.+_MB)"
    )
    for tag in tags:
        if tag.startswith("TensorProfiling/"):
            assert known.fullmatch(tag), tag
        if tag.startswith("Loss/"):
            assert tag == "Loss/total" or tag.removeprefix("Loss/component_") in PHASES
    steps = [r["iteration"] for r in records]
    assert sorted(scalars(tb, "TensorProfiling/Tensor_Count/total")) == steps


def test_tensorboard_values_are_jsonl_bytes_in_mb(phased: PhasedRun, tb: Any) -> None:
    records = {r["iteration"]: r for r in read_jsonl(phased.run_dir / "profiles" / "memory.jsonl")}
    for c in ("parameters", "gradients", "optimizer_state", "buffers", "activations"):
        got = scalars(tb, f"TensorProfiling/Tensor_Category/{c}_MB")
        assert got == {it: f32(r["categories_bytes"][c] / 2**20) for it, r in records.items()}
    for d in ("float32", "int64"):
        got = scalars(tb, f"TensorProfiling/Tensor_DType/{d}_MB")
        assert got == {it: f32(r["dtypes_bytes"][d] / 2**20) for it, r in records.items()}
    assert scalars(tb, "TensorProfiling/Tensor_Count/total") == {
        it: float(r["tensor_count"]) for it, r in records.items()
    }
    assert scalars(tb, "TensorProfiling/Large_Tensors/count") == dict.fromkeys(records, 1.0)
    assert scalars(tb, "TensorProfiling/Large_Tensors/total_MB") == dict.fromkeys(
        records, f32(270_000_000 / 2**20)
    )


def test_tensorboard_loss_components_follow_the_phases(phased: PhasedRun, tb: Any) -> None:
    for name, on in PHASES.items():
        got = scalars(tb, f"Loss/component_{name}")
        expected = {it: f32(v[name]) for it, v in phased.losses.items() if on(it)}
        assert got == expected, name
    total = scalars(tb, "Loss/total")
    assert total == {
        it: pytest.approx(f32(math.fsum(v.values())), rel=1e-6) for it, v in phased.losses.items()
    }


def test_tensorboard_custom_scalars_layout(tb: Any) -> None:
    tag = "custom_scalars__config__"
    assert tag in tb.Tags()["tensors"]
    assert tb.SummaryMetadata(tag).plugin_data.plugin_name == "custom_scalars"
    (event,) = tb.Tensors(tag)
    layout = layout_pb2.Layout.FromString(event.tensor_proto.string_val[0])
    charts = [chart for category in layout.category for chart in category.chart]
    loss_charts = [
        c
        for c in charts
        if c.WhichOneof("content") == "multiline"
        and any(
            re.fullmatch(p, "Loss/component_rendering")
            and re.fullmatch(p, "Loss/component_sdf_estimation")
            for p in c.multiline.tag
        )
    ]
    assert loss_charts, layout
    category_charts = [
        c
        for c in charts
        if c.WhichOneof("content") == "multiline"
        and any(
            re.fullmatch(p, "TensorProfiling/Tensor_Category/gradients_MB") for p in c.multiline.tag
        )
    ]
    assert category_charts, layout


# -- losses: total, loss=, one .item() per tensor per record -------------------------


class CountingTensor(torch.Tensor):
    """A 0-d loss that counts how often its value is read back with ``.item()``."""

    items = 0

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is torch.Tensor.item:
            CountingTensor.items += 1
        return super().__torch_function__(func, types, args, kwargs or {})


def test_losses_read_once_and_only_when_recording(tmp_path: Path) -> None:
    scope = gpuscope.MemoryProfiler(tmp_path, every=5, tensorboard=False, text_log=False)
    CountingTensor.items = 0
    for it in range(12):
        a = torch.tensor(1.5 + it).as_subclass(CountingTensor)
        total = torch.tensor(10.0 + it).as_subclass(CountingTensor)
        scope.step(it, losses={"a": a, "b": 0.25, "c": torch.tensor(2.0)}, loss=total)
        # recorded at 0, 5, 10: one read of each counting tensor per record, none otherwise
        assert CountingTensor.items == 2 * (it // 5 + 1), it
    scope.close()
    records = read_jsonl(tmp_path / "profiles" / "memory.jsonl")
    assert [r["losses"] for r in records] == [
        {"a": 1.5 + it, "b": 0.25, "c": 2.0, "total": 10.0 + it} for it in (0, 5, 10)
    ]


def test_total_is_the_sum_unless_given(tmp_path: Path) -> None:
    with gpuscope.MemoryProfiler(tmp_path, every=1, tensorboard=False, text_log=False) as scope:
        r = scope.record(0, losses={"x": torch.tensor(0.5), "y": 0.25})
        assert r is not None and r["losses"] == {"x": 0.5, "y": 0.25, "total": 0.75}
        r = scope.record(1, losses={"x": 0.5}, loss=torch.tensor(3.0))
        assert r is not None and r["losses"] == {"x": 0.5, "total": 3.0}
        r = scope.record(2)
        assert r is not None and r["losses"] == {}


# -- schedule --------------------------------------------------------------------------


def recorded_iterations(run_dir: Path, n: int, **kwargs: Any) -> list[int]:
    model = nn.Linear(4, 4)
    with gpuscope.MemoryProfiler(
        run_dir, model=model, tensorboard=False, text_log=False, **kwargs
    ) as scope:
        for it in range(n):
            scope.step(it)
    return [r["iteration"] for r in read_jsonl(run_dir / "profiles" / "memory.jsonl")]


def test_every_10(tmp_path: Path) -> None:
    assert recorded_iterations(tmp_path, 45, every=10) == [0, 10, 20, 30, 40]


def test_window_of_denser_recording(tmp_path: Path) -> None:
    got = recorded_iterations(tmp_path / "a", 91, every=10, windows=[(40, 60, 2)])
    assert got == [0, 10, 20, 30, *range(40, 61, 2), 70, 80, 90]
    sched = gpuscope.Schedule(every=10, windows=((40, 60, 2),))
    assert recorded_iterations(tmp_path / "b", 91, every=sched) == got


@pytest.mark.parametrize("value", ["0", "false", "off"])
def test_gpuscope_profile_0_turns_everything_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("GPUSCOPE_PROFILE", value)

    class Untouchable(nn.Linear):
        touchable = True

        def named_parameters(self, *a: Any, **k: Any) -> Any:
            assert self.touchable, "a disabled profiler must not look at the model"
            return super().named_parameters(*a, **k)

    run_dir = tmp_path / "run"
    model = Untouchable(4, 4)
    scope = gpuscope.MemoryProfiler(run_dir, model=model, every=1, snapshot_at=[2])
    model.touchable = False
    for it in range(5):
        scope.step(it, losses={"l": torch.tensor(1.0)})
    assert scope.record(7) is None
    scope.close()
    assert scope.paths == []
    assert not run_dir.exists()


# -- argparse switches -----------------------------------------------------------------


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="train.py")
    gpuscope.add_argparse_flags(parser)
    parser.add_argument("-i", "--iterations", type=int, default=7)  # the script's own
    return parser.parse_args(argv)


@pytest.mark.parametrize(
    ("argv", "enabled"),
    [
        (["--profile_tensors", "True"], True),
        (["--profile_tensors"], True),
        (["--profile_tensors", "False"], False),
        ([], False),
    ],
)
def test_profile_tensors_flag(tmp_path: Path, argv: list[str], enabled: bool) -> None:
    run_dir = tmp_path / "run"
    args = parse([*argv, "--profile_dir", str(run_dir), "--profile_interval", "3", "-i", "8"])
    assert args.profile_tensors is enabled and args.iterations == 8
    model = nn.Linear(4, 2)
    scope = gpuscope.MemoryProfiler.from_args(args, model=model, tensorboard=False)
    for it in range(args.iterations):
        scope.step(it)
    scope.close()
    if enabled:
        records = read_jsonl(run_dir / "profiles" / "memory.jsonl")
        assert [r["iteration"] for r in records] == [0, 3, 6]
        assert records[0]["categories_bytes"]["parameters"] == params_bytes(model)
    else:
        assert profiler_files(run_dir) == []
        assert not run_dir.exists()


def test_profile_tensors_maybe_is_an_argparse_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse(["--profile_tensors", "maybe"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--profile_tensors" in err and "maybe" in err


# -- large tensors: how many, not how many listed --------------------------------------


def test_large_tensor_count_is_not_capped_by_top_k(tmp_path: Path) -> None:
    module = nn.Module()
    for i in range(7):
        module.register_buffer(f"b{i}", torch.zeros(1000, 100 + i))  # 400-428 KB each
    expected_total = sum(nbytes(b) for b in module.buffers())
    with gpuscope.MemoryProfiler(tmp_path, model=module, large_threshold_mb=0.25) as scope:
        r = scope.record(0)
    assert r is not None and len(r["large_tensors"]) == 5  # top_k: the list is capped
    assert r["large_tensor_count"] == 7
    assert r["large_tensor_bytes"] == expected_total
    acc = accumulator(tmp_path / "tensorboard")
    (log,) = (tmp_path / "profiles").glob("tensor_profile_*.log")
    assert parse_blocks(log.read_text())[0]["large_count"] == 7
    assert scalars(acc, "TensorProfiling/Large_Tensors/count") == {0: 7.0}
    assert scalars(acc, "TensorProfiling/Large_Tensors/total_MB") == {
        0: f32(expected_total / 2**20)
    }


def test_non_finite_losses_survive_in_jsonl(tmp_path: Path) -> None:
    with gpuscope.MemoryProfiler(tmp_path, every=1) as scope:
        scope.step(0, losses={"rendering": torch.tensor(float("nan")), "sdf": math.inf})
    (r,) = read_jsonl(tmp_path / "profiles" / "memory.jsonl")
    # any spelling that still reads as the number: NaN/Infinity tokens or strings
    assert math.isnan(float(r["losses"]["rendering"]))
    assert float(r["losses"]["sdf"]) == math.inf
    assert math.isnan(float(r["losses"]["total"]))
    acc = accumulator(tmp_path / "tensorboard")
    assert math.isnan(scalars(acc, "Loss/component_rendering")[0])


def test_text_log_header_states_a_fractional_threshold(tmp_path: Path) -> None:
    module = nn.Module()
    module.register_buffer("big", torch.zeros(1000, 100))  # 400 KB
    with gpuscope.MemoryProfiler(tmp_path, model=module, large_threshold_mb=0.25) as scope:
        scope.record(0)
    (log,) = (tmp_path / "profiles").glob("tensor_profile_*.log")
    m = re.search(r"Large Tensors \(>([\d.]+)MB\): (\d+)", log.read_text())
    assert m is not None and m.group(2) == "1"
    assert float(m.group(1)) == 0.25
