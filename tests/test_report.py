"""`gpuscope report` on runs recorded by the memory profiler in real CPU training loops:
the leak verdict names the leak in a leaking loop and stays quiet on a clean one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import gpuscope
import pytest
import torch
from _helpers import SHARED_DATA, shared_file
from torch import nn

ITERATIONS = 120


def train(run_dir: Path, leak: bool) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 512), nn.ReLU(), nn.Linear(512, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(256, 32)
    kept = []
    with gpuscope.MemoryProfiler(run_dir, model=model, optimizer=opt, every=5) as scope:
        for it in range(ITERATIONS):
            loss = model(x).pow(2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if leak:
                kept.append(model(x))  # an output and its graph, every iteration
            scope.step(it, losses={"mse": loss})


def report(*paths: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "gpuscope", "report", "--format", "json", *map(str, paths)],
        capture_output=True,
        text=True,
        check=True,
    )
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    for name in ("clean", "leak"):
        train(root / name, leak=name == "leak")
    return {"clean": root / "clean", "leak": root / "leak"}


def test_leaking_loop_is_named(runs: dict[str, Path]) -> None:
    (run,) = report(runs["leak"])["runs"]
    assert run["leak"]["suspected"] is True
    assert run["leak"]["category"] == "activations"
    slope = run["trends"]["activations"]["slope_bytes_per_1k_iters"]
    # Each iteration keeps the output and the graph's saved tensors: at least the hidden
    # activation (256 x 512 floats) that ReLU and the second Linear save for backward.
    hidden = 256 * 512 * 4
    assert 0.9 * 1000 * hidden <= slope <= 1.5 * 1000 * hidden


def test_clean_loop_is_not(runs: dict[str, Path]) -> None:
    (run,) = report(runs["clean"])["runs"]
    assert run["leak"]["suspected"] is False
    assert run["records"] == ITERATIONS // 5
    assert run["iterations"] == [0, ITERATIONS - 5]
    assert run["end"]["allocated_bytes"] is None  # CPU: no allocator figure, not zero


def test_a_flat_series_reads_flat_not_a_perfect_fit(runs: dict[str, Path]) -> None:
    """The weights' size never changes: their series is flat, and its r² of 1 (the line
    fits every point) must not print as the best fit beside the noisy series' r² 0.00."""
    (run,) = report(runs["clean"])["runs"]
    trends = run["trends"]
    assert trends["parameters"]["flat"] is True
    for name, t in trends.items():
        if t["flat"]:
            assert (t["slope_bytes_per_1k_iters"], t["r2"]) == (0.0, 1.0), name
    text = subprocess.run(
        [sys.executable, "-m", "gpuscope", "report", str(runs["clean"])],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = {line.split(":")[0].strip(): line for line in text.splitlines() if "  (" in line}
    for name, t in trends.items():
        assert lines[name].endswith("(flat)" if t["flat"] else f"(r² {t['r2']:.2f})"), lines


def test_several_runs_side_by_side(runs: dict[str, Path]) -> None:
    doc = report(runs["clean"], runs["leak"])
    assert doc["schema"] == "gpuscope.report/1"
    assert [Path(r["path"]).name for r in doc["runs"]] == ["clean", "leak"]
    # the comparison against the first run names what differs: the leaked activations
    differences = doc["comparison"]["differences"]
    assert [d["category"] for d in differences] == ["activations"]
    assert "leak" in differences[0]["run"] and differences[0]["change_percent"] > 100


def test_loss_phases_are_found(tmp_path: Path) -> None:
    """A phased training's schedule, scaled down: rendering alone, then + entropy and depth-normal,
    then depth-normal and sdf instead of entropy."""
    with gpuscope.MemoryProfiler(tmp_path, every=5) as scope:
        for it in range(120):
            parts = {"rendering": torch.tensor(0.5)}
            if 70 <= it < 90:
                parts["entropy_regularization"] = torch.tensor(0.1)
            if it >= 70:
                parts["depth_normal_consistency"] = torch.tensor(0.1)
            if it >= 90:
                parts["sdf_estimation"] = torch.tensor(0.2)
            scope.step(it, losses=parts)
    (run,) = report(tmp_path)["runs"]
    spans = [(p["from"], p["to"], sorted(p["components"])) for p in run["phases"]]
    assert spans == [
        (0, 65, ["rendering"]),
        (70, 85, ["depth_normal_consistency", "entropy_regularization", "rendering"]),
        (90, 115, ["depth_normal_consistency", "rendering", "sdf_estimation"]),
    ]
    shares = run["phases"][2]["shares_percent"]
    assert shares["sdf_estimation"] == pytest.approx(100 * 0.2 / 0.8)
    assert run["spikes"] == []


def test_report_and_compare_read_the_same_peak_tensors() -> None:
    """The H200 pair (a leak of activations kept with their graphs): the report's
    comparison and ``gpuscope compare`` give each run the same peak tensors, the highest
    sum of its records' categories (the census alone misses the activations on a GPU)."""
    runs = [shared_file(SHARED_DATA / "gpu-h200" / name) for name in ("lm_clean", "lm_leak_nan")]
    want = []
    for run in runs:
        records = [json.loads(line) for line in (run / "profiles" / "memory.jsonl").open()]
        want.append(
            max(
                max(sum(v or 0 for v in r["categories_bytes"].values()), r["census_bytes"])
                for r in records
            )
        )
    assert want[1] > 5 * want[0]  # the leak is in the tensors' memory
    compared = report(*runs)["comparison"]["runs"]
    assert [r["peak_tensor_bytes"] for r in compared] == want
    out = subprocess.run(
        [sys.executable, "-m", "gpuscope", "compare", *map(str, runs), "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    (rank,) = json.loads(out.stdout)["ranks"]
    assert [rank["peak_tensor_bytes"][side] for side in ("base", "new")] == want
