"""`gpuscope report` on its newer inputs and outputs, checked against figures the tests
compute themselves:

- TensorBoard input, in gpuscope's own tag spelling (a real profiled CPU run whose
  ``profiles/`` is deleted, compared with the report of its JSONL) and in the
  ``Memory/Tensor_*`` spelling (a real CPU loop that walks ``gc.get_objects()`` as
  memory_profiler.py's ``log_tensor_memory_breakdown`` does and logs with
  ``torch.utils.tensorboard.SummaryWriter``); event files without memory tags, and a
  truncated event file.
- The spread between ranks, the out-of-memory estimate and the timeline, on records written
  by hand following docs/run-dir.md (the expected figures are worked out from what was
  written, never from gpuscope's output)."""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import random
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gpuscope
import pytest
import torch
from _helpers import gpuscope_cli
from _memory_helpers import MB, one_thread, read_jsonl
from torch import nn
from torch.utils.tensorboard import SummaryWriter

GB = 1 << 30
KIB = 1 << 10
# Tags hold MB as float32: a category read back may be off by the rounding of one float.
MB_ROUNDING = KIB

ITERATIONS = 120
EVERY = 5


def report_json(*paths: Path) -> dict[str, Any]:
    out = gpuscope_cli("report", "--format", "json", *paths)
    assert out.returncode == 0, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    assert doc["schema"] == "gpuscope.report/1"
    return doc


def report_text(*paths: Path) -> str:
    out = gpuscope_cli("report", "--format", "text", *paths)
    assert out.returncode == 0, out.stderr
    return out.stdout


def only_run(doc: dict[str, Any]) -> dict[str, Any]:
    (run,) = doc["runs"]
    assert isinstance(run, dict)
    return run


def event_files_under(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and "tfevents" in p.name)


def assert_bytes_close(got: dict[str, int], expected: dict[str, float], what: str) -> None:
    """Same keys; each value within the rounding of an MB float."""
    assert sorted(got) == sorted(expected), what
    for key, value in expected.items():
        assert abs(got[key] - value) <= MB_ROUNDING, (what, key, got[key], value)


def block(text: str, first: str) -> list[str]:
    """The line of ``text`` starting with ``first`` and the indented lines after it."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first))
    end = next(
        (i for i in range(start + 1, len(lines)) if not lines[i].startswith(" ")), len(lines)
    )
    return lines[start:end]


# ---------------------------------------------------------------------------------------
# 1a. gpuscope's own tags: a real profiled CPU run read back from TensorBoard only
# ---------------------------------------------------------------------------------------


def train_profiled(run_dir: Path, leak: bool) -> None:
    """A real CPU loop recorded by gpuscope.MemoryProfiler every 5 iterations; the leaking
    variant keeps an output with its graph every iteration (as tests/test_report.py)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 512), nn.ReLU(), nn.Linear(512, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(128, 32)
    kept = []
    with (
        one_thread(),
        gpuscope.MemoryProfiler(run_dir, model=model, optimizer=opt, every=EVERY) as scope,
    ):
        for it in range(ITERATIONS):
            loss = model(x).pow(2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if leak:
                kept.append(model(x))
            scope.step(it, losses={"mse": loss})


@dataclass
class ProfiledRun:
    run_dir: Path
    jsonl_records: list[dict[str, Any]]  # profiles/memory.jsonl, read before deleting it
    jsonl: dict[str, Any]  # the report of the JSONL
    jsonl_text: str
    tb: dict[str, Any]  # the report once only tensorboard/ is left
    tb_text: str


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ProfiledRun]:
    root = tmp_path_factory.mktemp("profiled")
    runs = {}
    for name in ("clean", "leak"):
        run_dir = root / name
        train_profiled(run_dir, leak=name == "leak")
        records = read_jsonl(run_dir / "profiles" / "memory.jsonl")
        jsonl, jsonl_text = report_json(run_dir), report_text(run_dir)
        shutil.rmtree(run_dir / "profiles")
        assert sorted(p.name for p in run_dir.iterdir()) == ["tensorboard"]
        runs[name] = ProfiledRun(
            run_dir, records, jsonl, jsonl_text, report_json(run_dir), report_text(run_dir)
        )
    return runs


@pytest.mark.parametrize("name", ["clean", "leak"])
def test_tensorboard_report_agrees_with_jsonl(profiled: dict[str, ProfiledRun], name: str) -> None:
    run = profiled[name]
    from_jsonl, from_tb = only_run(run.jsonl), only_run(run.tb)
    # the TensorBoard report really read the event file
    (event_file,) = event_files_under(run.run_dir / "tensorboard")
    assert [Path(f) for f in from_tb["files"]] == [event_file]
    assert from_tb["skipped"] == []
    assert from_tb["rank"] == 0
    assert from_tb["records"] == from_jsonl["records"] == len(run.jsonl_records)
    assert from_tb["records"] == ITERATIONS // EVERY
    assert from_tb["iterations"] == from_jsonl["iterations"] == [0, ITERATIONS - EVERY]
    end_tb = from_tb["end"]["categories_bytes"]
    assert_bytes_close(end_tb, from_jsonl["end"]["categories_bytes"], "vs JSONL report")
    # and against the last line of the JSONL itself, read with json
    written = {k: v for k, v in run.jsonl_records[-1]["categories_bytes"].items() if v is not None}
    assert_bytes_close(end_tb, written, "vs memory.jsonl")
    # what the other tags carry: census, tensor count, dtypes
    last = run.jsonl_records[-1]
    assert abs(from_tb["end"]["census_bytes"] - last["census_bytes"]) <= MB_ROUNDING
    assert from_tb["end"]["tensor_count"] == last["tensor_count"]
    assert_bytes_close(from_tb["end"]["dtypes_bytes"], last["dtypes_bytes"], "dtypes")
    leaking = name == "leak"
    for verdict in (from_jsonl["leak"], from_tb["leak"]):
        assert verdict["suspected"] is leaking
        assert verdict["category"] == ("activations" if leaking else None)


def test_every_way_of_naming_the_tensorboard_input(profiled: dict[str, ProfiledRun]) -> None:
    """The run directory, its tensorboard/ directory and the event file itself."""
    run = profiled["leak"]
    (event_file,) = event_files_under(run.run_dir / "tensorboard")
    expected = only_run(run.tb)
    for path in (run.run_dir / "tensorboard", event_file):
        got = only_run(report_json(path))
        assert got["records"] == expected["records"]
        assert got["iterations"] == expected["iterations"]
        assert got["end"]["categories_bytes"] == expected["end"]["categories_bytes"]
        assert got["leak"]["category"] == "activations"


def test_tensorboard_report_does_not_invent_a_large_tensor_threshold(
    profiled: dict[str, ProfiledRun],
) -> None:
    run = profiled["clean"]
    threshold = only_run(run.tb)["end"]["large_threshold_bytes"]
    assert threshold in (None, only_run(run.jsonl)["end"]["large_threshold_bytes"])
    assert "Large Tensors (>0MB)" not in run.tb_text


# ---------------------------------------------------------------------------------------
# 1b. the Memory/Tensor_* spelling, written by torch.utils.tensorboard.SummaryWriter
# ---------------------------------------------------------------------------------------

GC_WALK_ITERATIONS = 100
GC_WALK_EVERY = 10
# memory_profiler.py counts tensors above 100 MB as large; the test's model is far smaller, so the
# threshold is scaled down to keep a few of its tensors (the 512 x 64 weight and its Adam
# moments, 128 KiB each) above it.
GC_WALK_LARGE_MB = 0.1
VRAM_ALLOCATED_GB = 1.5
VRAM_RESERVED_GB = 2.0


@dataclass
class GcWalkBreakdown:
    """What one logging step logged, in MB."""

    categories: dict[str, float]
    dtypes: dict[str, float]
    large: list[float]


def gc_walk_breakdown() -> GcWalkBreakdown:
    """memory_profiler.py's ``log_tensor_memory_breakdown``, on CPU tensors (it keeps CUDA
    tensors; this machine has none)."""
    categories = {"gradients": 0.0, "parameters": 0.0, "activations": 0.0, "buffers": 0.0}
    categories["other"] = 0.0
    dtypes: dict[str, float] = {}
    large: list[float] = []
    with warnings.catch_warnings():
        # .grad of non-leaf tensors, deprecated torch attributes touched by is_tensor()
        warnings.simplefilter("ignore")
        for obj in gc.get_objects():
            # its bare `except: pass`: an object that fails any check is passed over
            with contextlib.suppress(Exception):
                if torch.is_tensor(obj) and obj.device.type == "cpu":
                    size_mb = obj.element_size() * obj.nelement() / (1024**2)
                    if obj.grad_fn is not None or (
                        hasattr(obj, "requires_grad") and obj.requires_grad
                    ):
                        if obj.grad is not None:
                            categories["gradients"] += size_mb
                        else:
                            categories["activations"] += size_mb
                    elif hasattr(obj, "is_leaf") and obj.is_leaf:
                        categories["parameters"] += size_mb
                    else:
                        categories["other"] += size_mb
                    dtype_name = str(obj.dtype).split(".")[-1]
                    dtypes[dtype_name] = dtypes.get(dtype_name, 0) + size_mb
                    if size_mb > GC_WALK_LARGE_MB:
                        large.append(size_mb)
    return GcWalkBreakdown(categories, dtypes, large)


def log_gc_walk(writer: SummaryWriter, b: GcWalkBreakdown, iteration: int) -> None:
    for category, size_mb in b.categories.items():
        writer.add_scalar(f"Memory/Tensor_Category/{category}_MB", size_mb, iteration)
    for dtype, size_mb in b.dtypes.items():
        writer.add_scalar(f"Memory/Tensor_DType/{dtype}_MB", size_mb, iteration)
    writer.add_scalar("Memory/Large_Tensors/count", len(b.large), iteration)
    writer.add_scalar("Memory/Large_Tensors/total_MB", sum(b.large), iteration)
    # Its fragmentation comes from torch.cuda.memory_allocated/reserved, 0 without
    # CUDA (reserved == 0).
    writer.add_scalar("Memory/fragmentation_percent", 0.0, iteration)


@dataclass
class GcWalkRun:
    plain: Path  # the Memory/Tensor_* tags and Loss/total
    vram: Path  # the same, plus Train/vram_allocated and Train/vram_reserved in GB
    logged: dict[int, GcWalkBreakdown]


@pytest.fixture(scope="module")
def gc_walk(tmp_path_factory: pytest.TempPathFactory) -> GcWalkRun:
    root = tmp_path_factory.mktemp("gc_walk")
    plain, vram = root / "plain", root / "vram"
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(64, 64)
    y = torch.randint(0, 10, (64,))  # int64: a second dtype
    logged: dict[int, GcWalkBreakdown] = {}
    with one_thread(), SummaryWriter(str(plain)) as w_plain, SummaryWriter(str(vram)) as w_vram:
        for it in range(GC_WALK_ITERATIONS):
            opt.zero_grad(set_to_none=True)
            loss = nn.functional.cross_entropy(model(x), y)
            torch.autograd.backward(loss)
            opt.step()
            for w in (w_plain, w_vram):
                w.add_scalar("Loss/total", loss.item(), it)
            if it % GC_WALK_EVERY == 0:
                b = gc_walk_breakdown()
                logged[it] = b
                log_gc_walk(w_plain, b, it)
                log_gc_walk(w_vram, b, it)
                # synthetic: there is no GPU here
                w_vram.add_scalar("Train/vram_allocated", VRAM_ALLOCATED_GB, it)
                w_vram.add_scalar("Train/vram_reserved", VRAM_RESERVED_GB, it)
    return GcWalkRun(plain, vram, logged)


def test_gc_walk_tags_become_records(gc_walk: GcWalkRun) -> None:
    run = only_run(report_json(gc_walk.plain))
    steps = sorted(gc_walk.logged)
    assert run["records"] == len(steps) == GC_WALK_ITERATIONS // GC_WALK_EVERY
    assert run["iterations"] == [steps[0], steps[-1]]
    last = gc_walk.logged[steps[-1]]
    assert last.categories["parameters"] > 0 and last.categories["gradients"] > 0
    assert set(last.dtypes) >= {"float32", "int64"}
    end = run["end"]
    categories = {k: v for k, v in end["categories_bytes"].items() if k in last.categories}
    expected_categories = {k: v * MB for k, v in last.categories.items()}
    assert_bytes_close(categories, expected_categories, "categories")
    expected_dtypes = {k: v * MB for k, v in last.dtypes.items()}
    assert_bytes_close(end["dtypes_bytes"], expected_dtypes, "dtypes")
    # no Memory/census_MB: the census is the sum of the categories
    assert abs(end["census_bytes"] - sum(expected_categories.values())) <= 5 * MB_ROUNDING
    assert end["large_tensor_count"] == len(last.large) >= 3
    # the gc walk logs no allocated/reserved beside its fragmentation: no allocator figures
    assert end["allocated_bytes"] is None and end["fragmentation_percent"] is None
    assert run["oom_estimate"] is None


def test_gc_walk_categories_not_logged_are_not_reported(gc_walk: GcWalkRun) -> None:
    run = only_run(report_json(gc_walk.plain))
    last = gc_walk.logged[max(gc_walk.logged)]
    assert sorted(run["end"]["categories_bytes"]) == sorted(last.categories)


def test_gc_walk_vram_in_gigabytes(gc_walk: GcWalkRun) -> None:
    run = only_run(report_json(gc_walk.vram))
    assert run["records"] == len(gc_walk.logged)
    end = run["end"]
    assert end["allocated_bytes"] == round(VRAM_ALLOCATED_GB * GB)
    assert end["reserved_bytes"] == round(VRAM_RESERVED_GB * GB)
    expected = (VRAM_RESERVED_GB - VRAM_ALLOCATED_GB) / VRAM_RESERVED_GB * 100
    assert expected == 25
    assert end["fragmentation_percent"] == pytest.approx(expected)
    assert run["fragmentation"]["percent"] == pytest.approx(expected)
    # the memory categories are read as without the vram tags
    plain = only_run(report_json(gc_walk.plain))
    assert end["categories_bytes"] == plain["end"]["categories_bytes"]


# ---------------------------------------------------------------------------------------
# 1c. event files that are not memory records, and a truncated one
# ---------------------------------------------------------------------------------------


def test_event_files_without_memory_tags(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    with SummaryWriter(str(log_dir)) as w:
        for step in range(20):
            w.add_scalar("Training loss", 1.0 / (step + 1), step)
    (event_file,) = event_files_under(log_dir)
    for path in (log_dir, event_file):
        for fmt in ("json", "text"):
            out = gpuscope_cli("report", "--format", fmt, path)
            assert out.returncode == 2, (path, out.stdout, out.stderr)
            assert out.stdout == ""
            lines = out.stderr.splitlines()
            assert len(lines) == 1, out.stderr
            assert lines[0].startswith("error: ") and "memory records" in lines[0]
            assert "Traceback" not in out.stderr and "panicked" not in out.stderr


def test_truncated_event_file(gc_walk: GcWalkRun, tmp_path: Path) -> None:
    (original,) = event_files_under(gc_walk.plain)
    data = original.read_bytes()
    cut = tmp_path / "cut" / original.name
    cut.parent.mkdir()
    cut.write_bytes(data[:-3])
    # the last event written is Loss/total of the last iteration, not a memory step
    assert (GC_WALK_ITERATIONS - 1) % GC_WALK_EVERY != 0
    for path in (cut.parent, cut):
        run = only_run(report_json(path))
        assert run["records"] == len(gc_walk.logged)
        assert run["iterations"] == [0, max(gc_walk.logged)]
        assert len(run["skipped"]) == 1 and cut.name in run["skipped"][0], run["skipped"]
    text = report_text(cut.parent)
    assert any(line.startswith("skipped: ") and cut.name in line for line in text.splitlines())


# ---------------------------------------------------------------------------------------
# Hand-written records, with the keys docs/run-dir.md lists
# ---------------------------------------------------------------------------------------

PARAMS = 4 * MB


def cuda_allocator(reserved: int, device_total: int | None) -> dict[str, int | None]:
    allocated = int(0.8 * reserved)
    return {
        "allocated_bytes": allocated,
        "reserved_bytes": reserved,
        "peak_allocated_bytes": allocated,
        "peak_reserved_bytes": reserved,
        "inactive_split_bytes": 0,
        "num_alloc_retries": 0,
        "num_ooms": 0,
        "device_total_bytes": device_total,
        "device_free_bytes": None if device_total is None else device_total - reserved,
    }


def memory_record(
    iteration: int,
    *,
    rank: int = 0,
    activations: int | None = None,
    allocator: dict[str, int | None] | None = None,
) -> dict[str, Any]:
    """One line of profiles/memory.jsonl: a model of ``PARAMS`` bytes with gradients and
    Adam's two moments; on "CUDA" (an allocator given) activations are allocated − census,
    as the profiler computes them."""
    census = 4 * PARAMS
    if allocator is not None:
        allocated = allocator["allocated_bytes"]
        assert allocated is not None
        activations = allocated - census
    assert activations is not None
    return {
        "iteration": iteration,
        "time": 1.8e9 + iteration,
        "rank": rank,
        "device": "cpu" if allocator is None else f"cuda:{rank}",
        "categories_bytes": {
            "parameters": PARAMS,
            "gradients": PARAMS,
            "optimizer_state": 2 * PARAMS,
            "buffers": 0,
            "activations": activations,
            "other": None,
        },
        "modules_bytes": {"encoder": 3 * PARAMS, "head": PARAMS},
        "dtypes_bytes": {"float32": census},
        "tensor_count": 12,
        "census_bytes": census,
        "large_tensors": [],
        "large_tensor_count": 0,
        "large_tensor_bytes": 0,
        "large_threshold_bytes": 100 * MB,
        "allocator": allocator,
        "system": {
            "rss_bytes": 2 * GB,
            "heap_bytes": 300 * MB,
            "cpu_percent": 100.0,
            "ram_percent": 10.0,
        },
        "losses": {"total": 1.0},
    }


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


# ---------------------------------------------------------------------------------------
# 2. the spread between ranks
# ---------------------------------------------------------------------------------------


def ranked_records(rank: int) -> list[dict[str, Any]]:
    """20 records; rank 1 holds more activations than rank 0 at the end."""
    per_iteration = (64 if rank == 1 else 40) * KIB
    return [
        memory_record(it, rank=rank, activations=8 * MB + per_iteration * it)
        for it in range(0, 200, 10)
    ]


def test_rank_spread_names_the_heaviest_rank(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    written = {rank: ranked_records(rank) for rank in (0, 1)}
    for rank, records in written.items():
        write_jsonl(run_dir / "profiles" / f"memory.rank{rank}.jsonl", records)
    doc = report_json(run_dir)
    assert [(r["rank"], r["records"]) for r in doc["runs"]] == [(0, 20), (1, 20)]
    (spread,) = doc["rank_spread"]
    assert spread["ranks"] == [0, 1]
    end = {
        rank: records[-1]["categories_bytes"]["activations"] for rank, records in written.items()
    }
    assert end[1] > end[0]
    f = spread["figures"]["end_activations"]
    assert (f["max_rank"], f["max_bytes"]) == (1, end[1])
    assert (f["min_rank"], f["min_bytes"]) == (0, end[0])
    assert f["spread_percent"] == pytest.approx((end[1] - end[0]) / end[1] * 100)
    # the parameters are alike on both ranks
    assert spread["figures"]["end_parameters"]["spread_percent"] == 0
    text = report_text(run_dir)
    (title,) = [line for line in text.splitlines() if line.startswith("RANKS of ")]
    assert "(2 ranks)" in title
    (row,) = [line for line in text.splitlines() if line.strip().startswith("end_activations")]
    assert "(r1)" in row and f"{f['spread_percent']:.1f}%" in row


def test_one_rank_has_no_spread(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    write_jsonl(run_dir / "profiles" / "memory.rank0.jsonl", ranked_records(0))
    doc = report_json(run_dir)
    assert [r["rank"] for r in doc["runs"]] == [0]
    assert "rank_spread" not in doc
    assert "RANKS of" not in report_text(run_dir)


def test_tensorboard_rank_directories_are_ranks(tmp_path: Path) -> None:
    """A run's tensorboard/rank<R>/ directories give rank R (not their position)."""
    run_dir = tmp_path / "run"
    end = {}
    for rank in (1, 3):
        with SummaryWriter(str(run_dir / "tensorboard" / f"rank{rank}")) as w:
            for step in range(0, 100, 10):
                activations_mb = 5.0 + rank + step / 10
                w.add_scalar("TensorProfiling/Tensor_Category/parameters_MB", 10.0, step)
                w.add_scalar("TensorProfiling/Tensor_Category/activations_MB", activations_mb, step)
            end[rank] = round(activations_mb * MB)
    doc = report_json(run_dir)
    assert [(r["rank"], r["records"]) for r in doc["runs"]] == [(1, 10), (3, 10)]
    (spread,) = doc["rank_spread"]
    f = spread["figures"]["end_activations"]
    assert (f["max_rank"], f["min_rank"]) == (3, 1)
    assert f["spread_percent"] == pytest.approx((end[3] - end[1]) / end[3] * 100)


# ---------------------------------------------------------------------------------------
# 3. the out-of-memory estimate
# ---------------------------------------------------------------------------------------

OOM_RECORDS = 40
OOM_EVERY = 50
DEVICE_TOTAL = 4 * GB


def growing_records(device_total: int | None) -> list[dict[str, Any]]:
    """Reserved = 1 GiB + 8 MiB × k at iteration 50 k; allocated = 0.8 × reserved."""
    return [
        memory_record(
            OOM_EVERY * k, allocator=cuda_allocator(GB + 8 * MB * k, device_total=device_total)
        )
        for k in range(OOM_RECORDS)
    ]


def linear_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares slope and intercept."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )
    return slope, my - slope * mx


@pytest.fixture(scope="module")
def oom_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    run_dir = tmp_path_factory.mktemp("oom")
    records = growing_records(DEVICE_TOTAL)
    write_jsonl(run_dir / "profiles" / "memory.jsonl", records)
    return run_dir, records


def test_oom_estimate_of_linear_growth(oom_run: tuple[Path, list[dict[str, Any]]]) -> None:
    run_dir, records = oom_run
    xs = [float(r["iteration"]) for r in records]
    ys = [float(r["allocator"]["reserved_bytes"]) for r in records]
    slope, intercept = linear_fit(xs, ys)
    expected = (DEVICE_TOTAL - intercept) / slope  # where the line reaches the device total
    assert expected == pytest.approx(19200)
    run = only_run(report_json(run_dir))
    estimate = run["oom_estimate"]
    assert estimate is not None
    assert estimate["series"] == "reserved"
    assert estimate["device_total_bytes"] == DEVICE_TOTAL
    assert estimate["current_bytes"] == records[-1]["allocator"]["reserved_bytes"]
    assert estimate["slope_bytes_per_1k_iters"] == pytest.approx(slope * 1000, rel=0.01)
    assert estimate["iteration"] == pytest.approx(expected, rel=0.01)
    assert f"near iteration {estimate['iteration']}" in report_text(run_dir)


def test_no_oom_estimate_when_reserved_is_flat(tmp_path: Path) -> None:
    rng = random.Random(0)
    records = [
        memory_record(
            OOM_EVERY * k,
            allocator=cuda_allocator(2 * GB + rng.randint(-2 * MB, 2 * MB), DEVICE_TOTAL),
        )
        for k in range(OOM_RECORDS)
    ]
    write_jsonl(tmp_path / "profiles" / "memory.jsonl", records)
    run = only_run(report_json(tmp_path))
    assert run["end"]["reserved_bytes"] == records[-1]["allocator"]["reserved_bytes"]
    assert run["oom_estimate"] is None
    assert "Out of memory" not in report_text(tmp_path)


def test_no_oom_estimate_without_device_total(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "profiles" / "memory.jsonl", growing_records(device_total=None))
    run = only_run(report_json(tmp_path))
    # the growth itself is seen, only the device's size is unknown
    assert run["trends"]["reserved"]["sustained"] is True
    assert run["oom_estimate"] is None


# ---------------------------------------------------------------------------------------
# 4. the timeline
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["jsonl", "tb"])
@pytest.mark.parametrize("name", ["clean", "leak"])
def test_timeline_of_profiled_runs(
    profiled: dict[str, ProfiledRun], name: str, source: str
) -> None:
    run = only_run(getattr(profiled[name], source))
    timeline = run["timeline"]
    iterations = timeline["iterations"]
    assert 0 < len(iterations) <= 480
    assert iterations[-1] == run["iterations"][1] == ITERATIONS - EVERY
    assert iterations == sorted(set(iterations))
    series = {s["name"]: s for s in timeline["series"]}
    for s in series.values():
        assert len(s["values"]) == len(iterations), s["name"]
    activations = [v for v in series["category/activations"]["values"] if v is not None]
    assert len(activations) == len(iterations)
    if name == "leak":
        assert activations[-1] > activations[0]
        # non-decreasing (allowing for the C heap's small wobble between records)
        assert all(b >= a - 64 * KIB for a, b in itertools.pairwise(activations))
        grown = activations[-1] - activations[0]
        assert grown >= (ITERATIONS - 2 * EVERY) * 128 * 512 * 4 * 0.9


@pytest.mark.parametrize("source", ["jsonl_text", "tb_text"])
def test_timeline_in_text(profiled: dict[str, ProfiledRun], source: str) -> None:
    text: str = getattr(profiled["leak"], source)
    assert "Timeline (" in text
    assert "Categories over iterations" in text
    table = block(text, "Timeline (")
    sparklines = block(text, "Categories over iterations")
    assert any(line.strip().startswith("activations ") for line in sparklines)
    for line in table + sparklines:
        assert len(line) <= 80, line


def path_free_lines(text: str, *paths: Path) -> list[str]:
    """Lines of ``text`` that do not quote a path (those may be as long as the path)."""
    return [line for line in text.splitlines() if not any(str(p) in line for p in paths)]


def test_text_report_fits_80_columns(profiled: dict[str, ProfiledRun]) -> None:
    for run in profiled.values():
        for text in (run.jsonl_text, run.tb_text):
            wide = [line for line in path_free_lines(text, run.run_dir) if len(line) > 80]
            assert wide == []


def test_cpu_activations_are_called_an_estimate_and_small_ones_advise_nothing(
    profiled: dict[str, ProfiledRun], oom_run: tuple[Path, list[dict[str, Any]]]
) -> None:
    """On CPU, activations are the C heap beyond the census: the report says so, and a few
    MB of it (the clean loop's) is no case for gradient checkpointing."""
    note = "CPU run: activations are the C heap beyond the counted tensors"
    for run in profiled.values():
        assert note in " ".join(run.jsonl_text.split())
        end = run.jsonl_records[-1]["categories_bytes"]["activations"]
        figures = [a["figure"] for a in run.jsonl["runs"][0]["advice"]]
        assert ("activations_share_percent" in figures) == (end >= 256 * MB), (end, figures)
    clean = profiled["clean"].jsonl_records[-1]["categories_bytes"]["activations"]
    assert clean < 256 * MB
    run_dir, _ = oom_run
    assert note not in " ".join(report_text(run_dir).split())


def test_text_report_of_a_cuda_run_fits_80_columns(
    oom_run: tuple[Path, list[dict[str, Any]]],
) -> None:
    run_dir, _ = oom_run
    text = report_text(run_dir)
    table = block(text, "Timeline (")
    assert [line for line in table if len(line) > 80] == []
    estimates = [
        line for line in path_free_lines(text, run_dir) if line.startswith(("Out of", "Frag"))
    ]
    assert [line for line in estimates if len(line) > 80] == []


LONG_RUN = 1000
SPIKE_AT, SPIKE = 537, 90 * MB


@pytest.fixture(scope="module")
def long_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1000 records, one per iteration, with a one-record peak of activations."""
    run_dir = tmp_path_factory.mktemp("long")
    records = [
        memory_record(it, activations=SPIKE if it == SPIKE_AT else 10 * MB + it)
        for it in range(LONG_RUN)
    ]
    write_jsonl(run_dir / "profiles" / "memory.jsonl", records)
    return run_dir


def test_timeline_of_a_long_run_is_bounded(long_run: Path) -> None:
    """At most 480 points, the last at the last iteration, and the one-record peak kept (a
    span keeps its highest value)."""
    run = only_run(report_json(long_run))
    timeline = run["timeline"]
    iterations = timeline["iterations"]
    assert 0 < len(iterations) <= 480
    assert iterations[-1] == LONG_RUN - 1
    assert iterations == sorted(set(iterations))
    (activations,) = [s for s in timeline["series"] if s["name"] == "category/activations"]
    assert len(activations["values"]) == len(iterations)
    assert max(v for v in activations["values"] if v is not None) == SPIKE
    text = report_text(long_run)
    assert "Timeline (" in text and "Categories over iterations (" in text
    assert len(block(text, "Timeline (")) <= 2 + 16  # title, header, at most 16 rows


def test_sparkline_title_spans_the_whole_run(long_run: Path) -> None:
    assert f"Categories over iterations (0 → {LONG_RUN - 1};" in report_text(long_run)
