"""Gradient flow (``scope.record_gradients``) on real CPU training loops.

The expected figures come from torch itself at the same moment of the loop: the global
norm from ``torch.nn.utils.clip_grad_norm_`` (which returns the norm before clipping),
group and module norms from ``torch.linalg.vector_norm`` over the concatenated gradients,
zeros by counting elements.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gpuscope
import pytest
import torch
from _helpers import gpuscope_cli
from torch import nn


def records(run_dir: Path) -> dict[int, dict[str, Any]]:
    lines = (run_dir / "profiles" / "memory.jsonl").read_text().splitlines()
    return {r["iteration"]: r for r in map(json.loads, lines)}


def norm(tensors: list[torch.Tensor]) -> float:
    return float(torch.linalg.vector_norm(torch.cat([t.flatten() for t in tensors])))


def test_norms_zeros_and_clipping_match_torch(tmp_path: Path) -> None:
    """Every 4 iterations the record carries the norms measured after that iteration's
    backward; clipping is counted on every call in between."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    groups: list[dict[str, Any]] = [
        {"params": model[0].parameters()},
        {"params": model[2].parameters(), "lr": 0.1},
    ]
    opt = torch.optim.SGD(groups, lr=0.01)
    max_norm = 1.0
    expected: dict[int, dict[str, Any]] = {}
    clipped_since: list[float] = []
    scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=4)
    with scope:
        for it in range(12):
            opt.zero_grad()
            model(torch.randn(16, 8)).pow(2).mean().backward()
            scope.record_gradients(it, clip_max_norm=max_norm)
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            first = [p.grad for p in model[0].parameters() if p.grad is not None]
            second = [p.grad for p in model[2].parameters() if p.grad is not None]
            zeros = sum(int((g == 0).sum()) for g in grads)
            total = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm))
            if total > max_norm:
                clipped_since.append(max_norm / total)
            if it % 4 == 0:
                expected[it] = {
                    "global": total,
                    "groups": [norm(first), norm(second)],
                    "zero_percent": zeros * 100 / sum(g.numel() for g in grads),
                    "clipped": list(clipped_since),
                }
                clipped_since = []
            opt.step()
            scope.step(it)
    got = records(tmp_path)
    assert sorted(got) == [0, 4, 8]
    for it, want in expected.items():
        g = got[it]["gradients"]
        assert g["iteration"] == it
        assert g["global_norm"] == pytest.approx(want["global"], rel=1e-5)
        assert g["group_norms"] == pytest.approx(want["groups"], rel=1e-5)
        # The modules at depth 1 are the two Linear layers, the same split as the groups.
        assert g["module_norms"] == pytest.approx(
            {"0": want["groups"][0], "2": want["groups"][1]}, rel=1e-5
        )
        assert g["zero_percent"] == pytest.approx(want["zero_percent"])
        assert g["missing"] == 0
        assert g["clip_max_norm"] == max_norm
        assert g["clipped"] == len(want["clipped"])
        if want["clipped"]:
            mean = sum(want["clipped"]) / len(want["clipped"])
            assert g["mean_clip_factor"] == pytest.approx(mean, rel=1e-5)
    assert got[4]["gradients"]["measured"] == 4  # iterations 1..4


def test_tensorboard_has_grad_tags_and_missing_grads_are_counted(tmp_path: Path) -> None:
    """A frozen-in-effect layer (its output unused) has no gradient: it is counted as
    missing, and left out of the module norms. TensorBoard gets Grad/* per record."""
    torch.manual_seed(0)
    used, unused = nn.Linear(4, 4), nn.Linear(4, 4)
    model = nn.ModuleDict({"used": used, "unused": unused})
    opt = torch.optim.Adam(model.parameters())
    scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=2)
    with scope:
        for it in range(4):
            opt.zero_grad(set_to_none=True)
            used(torch.randn(2, 4)).sum().backward()
            scope.record_gradients(it)
            opt.step()
            scope.step(it)
    g = records(tmp_path)[2]["gradients"]
    assert g["missing"] == 2  # unused.weight, unused.bias
    assert list(g["module_norms"]) == ["used"]
    assert g["clip_max_norm"] is None and g["clipped"] == 0
    tags = gpuscope.read_events(tmp_path / "tensorboard")["tags"]
    assert {"Grad/global_norm", "Grad/group_0_norm", "Grad/module/used_norm"} <= set(tags)
    assert "Grad/clipped_percent" not in tags
    steps = tags["Grad/global_norm"]["steps"]
    assert list(steps) == [0, 2]


def test_a_non_finite_gradient_is_null_and_the_run_goes_on(tmp_path: Path) -> None:
    """An infinite gradient gives a null norm in the JSON (which has no infinity), and
    neither the record nor `gpuscope report` fails on it."""
    model = nn.Linear(2, 1)
    scope = gpuscope.MemoryProfiler(tmp_path, model=model, every=1)
    with scope:
        model(torch.tensor([[1.0, float("inf")]])).sum().backward()
        scope.record_gradients(0)
        scope.step(0)
    g = records(tmp_path)[0]["gradients"]
    assert g["global_norm"] is None
    assert g["module_norms"] == {"(root)": None}
    out = gpuscope_cli("report", tmp_path, "--format", "json")
    assert out.returncode == 0, out.stderr


def test_disabled_or_modelless_profilers_record_nothing(tmp_path: Path) -> None:
    model = nn.Linear(2, 2)
    off = gpuscope.MemoryProfiler(tmp_path / "off", model=model, enabled=False)
    model(torch.randn(1, 2)).sum().backward()
    off.record_gradients(0, clip_max_norm=1.0)
    assert not (tmp_path / "off").exists()
    bare = gpuscope.MemoryProfiler(tmp_path / "bare", every=1)
    with bare:
        bare.record_gradients(0)
        bare.step(0)
    assert "gradients" not in records(tmp_path / "bare")[0]


def test_shared_norms_are_not_taken_for_a_new_gradient_at_a_freed_ones_address() -> None:
    """The norms kept for one iteration's gradients are not handed out for the next
    one's, even when Python gives a new gradient the ``id()`` of a freed one (it often
    does) and both are at version 0: a loop that skips ``step()`` after ``check_finite``
    raises never forgets them, and a finite iteration then read NaN."""
    from gpuscope.health.norms import GradientNorms

    norms = GradientNorms()
    reused = 0
    for _ in range(50):
        bad = torch.full((3,), float("nan"))
        assert norms.of([bad])[0].isnan()
        old = id(bad)
        del bad
        good = torch.ones(3)
        reused += id(good) == old
        assert norms.of([good])[0].item() == pytest.approx(3**0.5)
    assert reused, "Python never reused an id: the case this test is about did not happen"
