"""What a record says about the run around the tensors: whether the forward ran under
autocast (and with which dtype), the allocator's configuration, the host's RAM. Real CPU
training loops; the CUDA-only allocator keys are checked through the functions that fill
them, in subprocesses that set the environment torch reads at start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import gpuscope
import pytest
import torch
from _memory_helpers import read_jsonl
from torch import nn


def _model() -> nn.Sequential:
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))


def _train(run_dir: Path, model: nn.Module, autocast: bool, iterations: int = 6) -> None:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scope = gpuscope.MemoryProfiler(run_dir, model=model, optimizer=opt, every=2)
    for it in range(iterations):
        x = torch.randn(8, 16)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        scope.step(it, loss=loss.item())
    scope.close()


@pytest.mark.parametrize(("autocast", "dtype"), [(True, "bfloat16"), (False, None)])
def test_records_say_whether_the_forward_ran_under_autocast(
    tmp_path: Path, autocast: bool, dtype: str | None
) -> None:
    _train(tmp_path, _model(), autocast)
    records = read_jsonl(tmp_path / "profiles" / "memory.jsonl")
    assert records
    for r in records:
        assert r["autocast"] == {"enabled": autocast, "dtype": dtype}


def test_autocast_seen_through_torch_compile(tmp_path: Path) -> None:
    model = torch.compile(_model(), backend="eager")
    _train(tmp_path, model, True)  # type: ignore[arg-type]
    records = read_jsonl(tmp_path / "profiles" / "memory.jsonl")
    assert all(r["autocast"] == {"enabled": True, "dtype": "bfloat16"} for r in records)


def test_autocast_entered_inside_a_patched_forward(tmp_path: Path) -> None:
    """Accelerate (Hugging Face) enters autocast in a replaced ``forward``, after the
    model's own pre-hooks: the state is read inside it."""
    model = _model()
    plain = model.forward

    def forward(x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return plain(x)

    model.forward = forward  # type: ignore[method-assign]
    _train(tmp_path, model, False)
    records = read_jsonl(tmp_path / "profiles" / "memory.jsonl")
    assert all(r["autocast"] == {"enabled": True, "dtype": "bfloat16"} for r in records)


def test_no_model_no_autocast_key_and_close_removes_the_hooks(tmp_path: Path) -> None:
    scope = gpuscope.MemoryProfiler(tmp_path / "a", every=1)
    scope.step(0)
    scope.close()
    (record,) = read_jsonl(tmp_path / "a" / "profiles" / "memory.jsonl")
    assert "autocast" not in record

    model = _model()
    scope = gpuscope.MemoryProfiler(tmp_path / "b", model=model, every=1)
    hooks = sum(len(m._forward_pre_hooks) for m in model.modules())
    assert hooks == len(list(model.children()))
    scope.close()
    assert sum(len(m._forward_pre_hooks) for m in model.modules()) == 0


def test_records_carry_the_hosts_ram(tmp_path: Path) -> None:
    _train(tmp_path, _model(), False, iterations=2)
    (record,) = read_jsonl(tmp_path / "profiles" / "memory.jsonl")
    total = record["system"]["ram_total_bytes"]
    meminfo = Path("/proc/meminfo").read_text().split("\n")[0].split()
    assert meminfo[0] == "MemTotal:"
    assert total == int(meminfo[1]) * 1024
    assert record["system"]["rss_bytes"] < total


_CONF = """
import json, gpuscope.memory.allocator as a
print(json.dumps({"conf": a.alloc_conf(), "expandable": a.expandable_segments()}))
"""


@pytest.mark.parametrize(
    ("env", "conf", "expandable"),
    [
        ({}, None, False),
        ({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}, "expandable_segments:True", True),
        (
            {"PYTORCH_ALLOC_CONF": "max_split_size_mb:128,expandable_segments:True"},
            "max_split_size_mb:128,expandable_segments:True",
            True,
        ),
        ({"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64"}, "max_split_size_mb:64", False),
    ],
)
def test_allocator_configuration_as_torch_applies_it(
    env: dict[str, str], conf: str | None, expandable: bool
) -> None:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")
    }
    out = subprocess.run(
        [sys.executable, "-c", _CONF],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "conf": conf,
        "expandable": expandable,
    }
