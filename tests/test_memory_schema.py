"""The memory record has one schema, the engine's (``MemoryRecord`` and its parts, serde);
the Python profiler builds each record as a dict of the same shape. Real CPU training
loops are recorded, and each dict the profiler built is held to the engine two ways:

- it equals the ``profiles/memory.jsonl`` line the engine wrote from it: a key Python adds
  and Rust does not know is dropped there, a field Rust adds appears there (or makes the
  record unreadable, and no line is written);
- its keys, part by part, are the field names the engine's serde derive reads
  (``_native.memory_record_keys``): this also catches a field Rust adds that is left out
  of the JSON when empty. Only the parts docs/run-dir.md calls optional may be absent,
  and a run with every option on writes all of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gpuscope
import pytest
import torch
from _memory_helpers import caught_warnings, gpuscope_warnings, read_jsonl
from gpuscope import _native
from gpuscope.memory import allocator
from gpuscope.memory.profiler import MemoryProfiler
from torch import nn

# What docs/run-dir.md says a record may lack: the parts of options a run does not use.
OPTIONAL = {
    "record": {"sections", "gradients", "autocast"},
    "gradients": {"update_ratio", "module_update_ratios"},
}

# torch.cuda.memory_stats() as a CUDA run returns it (the keys the profiler reads).
ALLOCATOR_STATS = {
    "allocated_bytes.all.current": 3 << 20,
    "reserved_bytes.all.current": 8 << 20,
    "allocated_bytes.all.peak": 5 << 20,
    "reserved_bytes.all.peak": 8 << 20,
    "inactive_split_bytes.all.current": 1 << 20,
    "num_alloc_retries": 0,
    "num_ooms": 0,
}


def _parts(record: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(part name as the engine lists it, the dict) for the record and each part in it."""
    yield "record", record
    for name in ("categories_bytes", "allocator", "system", "gradients", "autocast"):
        if isinstance(record.get(name), dict):
            yield name, record[name]
    for tensor in record["large_tensors"]:
        yield "large_tensors", tensor
    for section in record.get("sections", {}).values():
        yield "sections", section


def _recorded(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every record the profilers of this test build, as returned by ``record()``."""
    records: list[dict[str, Any]] = []
    record = MemoryProfiler.record

    def keep(self: MemoryProfiler, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        built = record(self, *args, **kwargs)
        if built is not None:
            records.append(built)
        return built

    monkeypatch.setattr(MemoryProfiler, "record", keep)
    return records


def _held_to_the_engine(run_dir: Path, records: list[dict[str, Any]]) -> None:
    lines = read_jsonl(run_dir / "profiles" / "memory.jsonl")
    assert records
    assert len(lines) == len(records)
    for line, record in zip(lines, records, strict=True):
        assert line == record


def test_a_plain_run_writes_the_engines_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No model (so no autocast), no sections, no gradients: every other key is there."""
    records = _recorded(monkeypatch)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with caught_warnings() as caught:
        scope = gpuscope.MemoryProfiler(tmp_path, optimizer=opt, every=2)
        for it in range(4):
            loss = model(torch.randn(4, 8)).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            scope.step(it, loss=loss)
        scope.close()
    assert gpuscope_warnings(caught) == []
    _held_to_the_engine(tmp_path, records)
    keys = _native.memory_record_keys()
    for record in records:
        for name, part in _parts(record):
            assert set(part) == set(keys[name]) - OPTIONAL.get(name, set()), name


def test_a_run_with_every_option_writes_every_engine_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sections (nested), gradients with clipping and the update ratio, the non-finite
    check, autocast, large tensors, and the allocator's figures as a CUDA run reads them
    (torch's stats faked: this machine may have no CUDA)."""
    records = _recorded(monkeypatch)
    monkeypatch.setattr(allocator, "cuda_device", lambda device: True)
    monkeypatch.setattr(torch.cuda, "memory_stats", lambda device=None: dict(ALLOCATOR_STATS))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (60 << 30, 80 << 30))
    monkeypatch.setattr(torch.cuda, "get_per_process_memory_fraction", lambda device=None: 0.5)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with caught_warnings() as caught:
        scope = gpuscope.MemoryProfiler(
            tmp_path,
            model=model,
            optimizer=opt,
            every=2,
            large_threshold_mb=0,
            update_ratio=True,
        )
        for it in range(4):
            with scope.section("forward"):
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    out = model(torch.randn(4, 8))
                with scope.section("loss"):
                    parts = {"mse": out.float().pow(2).mean(), "l1": out.float().abs().mean()}
            with scope.section("backward"):
                sum(parts.values()).backward()
            scope.record_gradients(it, clip_max_norm=1.0)
            assert scope.check_finite(it, losses=parts)
            opt.step()
            opt.zero_grad()
            scope.step(it, losses=parts)
        scope.close()
    assert gpuscope_warnings(caught) == []
    _held_to_the_engine(tmp_path, records)
    keys = _native.memory_record_keys()
    seen: set[str] = set()
    for record in records:
        for name, part in _parts(record):
            assert set(part) == set(keys[name]), name
            seen.add(name)
    assert seen == set(keys)  # every part the engine has, this run wrote
    assert records[-1]["allocator"]["memory_fraction"] == 0.5
    assert "forward/loss" in records[-1]["sections"]
