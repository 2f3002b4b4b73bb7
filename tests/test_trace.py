"""`gpuscope trace` on a trace recorded here, by torch.profiler, of a small CPU training loop:
the trace torch writes on a machine without a GPU is read whole, and said to have no GPU
activity rather than an empty or failed breakdown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from _helpers import gpuscope_cli
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

STEPS = 8


def record(trace_dir: Path) -> None:
    """Profiles STEPS training steps of a tiny model on the CPU: wait 1, warm up 1, record
    3, and again, so tensorboard_trace_handler writes two traces."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 16), torch.randn(64, 1)
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=3),
        on_trace_ready=tensorboard_trace_handler(str(trace_dir)),
    ) as prof:
        for _ in range(STEPS):
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            torch.autograd.backward(loss)
            opt.step()
            prof.step()


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("profiler_traces")
    record(directory)
    return directory


def traces(trace_dir: Path) -> list[Path]:
    files = sorted(trace_dir.glob("*.pt.trace.json"))
    assert files, list(trace_dir.iterdir())
    return files


def trace_json(path: Path) -> dict[str, Any]:
    out = gpuscope_cli("trace", path, "--format", "json")
    assert out.returncode == 0, out.stderr
    assert "panicked" not in out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def assert_cpu_only(rank: dict[str, Any], path: Path) -> None:
    assert rank["gpu_activity"] is False
    assert rank["temporal"] is None
    assert rank["dropped"] == []
    assert rank["top_kernels"] == [] and rank["kernel_types"] == []
    assert rank["events"] > 0
    assert Path(rank["path"]).name == path.name


def test_the_profiler_writes_what_the_schedule_says(trace_dir: Path) -> None:
    """Two cycles of wait 1 + warmup 1 + active 3 in 8 steps: two traces, each with its
    ProfilerStep#N annotations, no GPU events (guards the fixture, not gpuscope)."""
    files = traces(trace_dir)
    assert len(files) == 2
    events = json.loads(files[0].read_text())["traceEvents"]
    steps = {e["name"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#")}
    assert steps == {"ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"}
    assert not any(e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") for e in events)


def test_a_cpu_only_trace_is_read_whole(trace_dir: Path) -> None:
    for path in traces(trace_dir):
        doc = trace_json(path)
        assert doc["schema"] == "gpuscope.trace/1"
        (rank,) = doc["ranks"]
        assert rank["rank"] == 0
        assert_cpu_only(rank, path)


def test_the_text_says_there_is_no_gpu_activity(trace_dir: Path) -> None:
    # Run where the trace is: the header line holds the path as given.
    path = traces(trace_dir)[0]
    out = gpuscope_cli("trace", path.name, cwd=trace_dir)
    assert out.returncode == 0, out.stderr
    assert "No GPU activity" in out.stdout
    assert "panicked" not in out.stderr
    too_wide = [line for line in out.stdout.splitlines() if len(line) > 80]
    assert too_wide == []


def test_the_directory_tensorboard_trace_handler_writes(trace_dir: Path) -> None:
    doc = trace_json(trace_dir)
    files = traces(trace_dir)
    assert len(doc["ranks"]) == len(files)
    for rank, path in zip(doc["ranks"], files, strict=True):
        assert_cpu_only(rank, path)
    out = gpuscope_cli("trace", trace_dir)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("No GPU activity") == len(files)


def test_a_duration_beyond_64_bits_is_counted_not_wrapped(tmp_path: Path) -> None:
    def kernel(ts: int, dur: float) -> dict[str, Any]:
        args = {"stream": 7}
        return {"ph": "X", "cat": "kernel", "name": "gemm", "ts": ts, "dur": dur, "args": args}

    path = tmp_path / "huge_dur.json"
    path.write_text(json.dumps({"traceEvents": [kernel(100, 10), kernel(200, 1e30)]}))
    (rank,) = trace_json(path)["ranks"]
    assert [n for _, n in rank["dropped"]] == [1]
    assert rank["events"] == 1
    assert all(k["min_us"] >= 0 for k in rank["top_kernels"])
