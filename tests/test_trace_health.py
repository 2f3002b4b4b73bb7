"""`gpuscope trace`'s trace health on traces recorded here by torch.profiler on the CPU: what
the profiler was told to record (record_shapes, profile_memory, the schedule's active steps)
is what the health says is missing, checked against the trace file itself. Run through the
installed package's command, as on a machine without cargo."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from _helpers import gpuscope_cli
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler


def record(trace_dir: Path, *, active: int, repeat: int, full: bool) -> list[Path]:
    """Profiles a tiny CPU training loop: wait 1, warm up 1, record `active` steps, `repeat`
    times; with `full`, record_shapes and profile_memory on."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 16), torch.randn(64, 1)
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=active, repeat=repeat),
        on_trace_ready=tensorboard_trace_handler(str(trace_dir)),
        record_shapes=full,
        profile_memory=full,
    ) as prof:
        for _ in range((2 + active) * repeat + 1):
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            torch.autograd.backward(loss)
            opt.step()
            prof.step()
    files = sorted(trace_dir.glob("*.pt.trace.json"))
    assert len(files) == repeat, list(trace_dir.iterdir())
    return files


def health(path: Path) -> list[dict[str, Any]]:
    out = gpuscope_cli("trace", path, "--format", "json")
    assert out.returncode == 0, out.stderr
    issues: list[dict[str, Any]] = json.loads(out.stdout)["health"]
    return issues


def what_the_file_says(path: Path) -> tuple[bool, bool, set[str]]:
    """[memory] events present, Input Dims on any CPU operator, the ProfilerStep#N names."""
    events = json.loads(path.read_text())["traceEvents"]
    memory = any(e.get("ph") == "i" and e.get("name") == "[memory]" for e in events)
    shapes = any(e.get("cat") == "cpu_op" and "Input Dims" in e.get("args", {}) for e in events)
    steps = {
        e["name"]
        for e in events
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
    }
    return memory, shapes, steps


@pytest.mark.parametrize(("active", "full"), [(1, False), (3, True)])
def test_what_was_not_recorded_is_what_the_health_names(
    tmp_path: Path, active: int, full: bool
) -> None:
    (path,) = record(tmp_path, active=active, repeat=1, full=full)
    memory, shapes, steps = what_the_file_says(path)
    assert (memory, shapes, len(steps)) == (full, full, active)  # guards the recording
    issues = health(path)
    kinds = {i["kind"] for i in issues}
    assert ("no_memory_events" in kinds) is not memory
    assert ("no_shapes" in kinds) is not shapes
    assert ("single_step" in kinds) is (len(steps) < 2)
    # A CPU trace has no launches, graphs or second rank to get wrong.
    assert kinds <= {"no_memory_events", "no_shapes", "single_step"}
    for issue in issues:
        assert issue["rank"] == 0
        if issue["kind"] == "single_step":
            assert issue["count"] == 1
            assert next(iter(steps)) in issue["detail"]
        if issue["kind"] == "no_shapes":
            assert issue["count"] > 0 and "record_shapes=True" in issue["detail"]


def test_two_cycles_of_one_process_are_said_to_lack_rank_metadata(tmp_path: Path) -> None:
    """Two profiler cycles of one process, neither with distributedInfo: both rank 0, read as
    cycles of one process, and the health says the ranks were assumed."""
    files = record(tmp_path, active=2, repeat=2, full=True)
    for path in files:
        assert "distributedInfo" not in json.loads(path.read_text())
    issues = health(tmp_path)
    cross = [i for i in issues if i["rank"] is None]
    assert [(i["kind"], i["count"]) for i in cross] == [("no_rank_metadata", 2)]
    assert "assumed rank 0" in cross[0]["detail"]
    assert "successive profiler cycles" in cross[0]["detail"]
    out = gpuscope_cli("trace", tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("Trace health\n  no_rank_metadata: 2 of 2 traces")
