"""Wrapped models keep the user's names: a model compiled with ``torch.compile`` around a
``checkpoint_wrapper``-wrapped block names its parameters
``_orig_mod.0._checkpoint_wrapped_module.proj.weight``; every name gpuscope shows — the
per-module breakdown, large tensors (optimizer state included), gradient and update
norms per module, non-finite reports and ``find_nonfinite`` — is the user's
``0.proj.weight``, and module depths count the user's components.

The expected names are spelled here from the model as the user wrote it, and tied to the
tensors by identity; the figures come from torch (``numel() * element_size()``,
``optimizer.state``, ``torch.linalg.vector_norm``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import gpuscope
import pytest
import torch
from _memory_helpers import caught_warnings, gpuscope_warnings, nbytes, read_jsonl
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

WRAPPER_NAMES = ("_orig_mod", "_checkpoint_wrapped_module")


class Block(nn.Module):
    """``log(proj(x))``: finite for positive inputs (``proj`` starts as the identity),
    NaN where a feature is negative."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.proj = nn.Linear(width, width)
        with torch.no_grad():
            self.proj.weight.copy_(torch.eye(width))
            self.proj.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(self.proj(x))


def wrapped_model() -> tuple[nn.Module, dict[str, torch.Tensor]]:
    """The compiled, checkpointed model and its parameters under the user's names."""
    torch.manual_seed(0)
    block, head = Block(4), nn.Linear(4, 1)
    user = nn.Sequential(checkpoint_wrapper(block), nn.ReLU(), head)
    names = {
        "0.proj.weight": block.proj.weight,
        "0.proj.bias": block.proj.bias,
        "2.weight": head.weight,
        "2.bias": head.bias,
    }
    model = torch.compile(user, backend="eager")
    # The premise: torch's own names carry both wrappers.
    raw = [n for n, _ in model.named_parameters()]
    assert all(w in n for n in raw[:2] for w in WRAPPER_NAMES), raw
    return model, names


def batches(n: int, bad: int | None = None) -> list[torch.Tensor]:
    """Positive batches; the one at ``bad`` has a negative feature, which Block's log
    turns into NaN."""
    g = torch.Generator().manual_seed(1)
    out = [1 + torch.rand(8, 4, generator=g) for _ in range(n)]
    if bad is not None:
        out[bad][0, 2] = -1.0
    return out


def module_of(name: str) -> str:
    """The user's top-level module of a parameter (``0.proj.weight`` -> ``0``)."""
    return name.split(".")[0]


def vector_norm(tensors: list[torch.Tensor]) -> float:
    return float(torch.linalg.vector_norm(torch.cat([t.flatten().double() for t in tensors])))


def run_dir_text(run_dir: Path) -> str:
    return "\n".join(p.read_text() for p in sorted((run_dir / "profiles").iterdir()))


def test_a_compiled_checkpointed_model_is_named_as_the_user_wrote_it(tmp_path: Path) -> None:
    """Six AdamW iterations through MemoryProfiler with record_gradients, update ratios and
    check_finite; iteration 3 makes NaN in module 0 and is skipped."""
    model, names = wrapped_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = batches(6, bad=3)
    grads: dict[int, dict[str, torch.Tensor]] = {}
    bad: dict[str, tuple[int, int]] = {}
    scope = gpuscope.MemoryProfiler(
        tmp_path,
        model=model,
        optimizer=opt,
        every=1,
        large_threshold_mb=0,
        top_k=100,
        update_ratio=True,
        on_nonfinite="skip",
        tensorboard=False,
    )
    with scope, caught_warnings() as caught:
        for it, x in enumerate(data):
            opt.zero_grad(set_to_none=True)
            loss = model(x).pow(2).mean()
            loss.backward()
            grads[it] = {n: p.grad.detach().clone() for n, p in names.items() if p.grad is not None}
            if it == 3:
                bad = {
                    n: (int(torch.isnan(g).sum()), int(torch.isinf(g).sum()))
                    for n, g in grads[it].items()
                    if not bool(torch.isfinite(g).all())
                }
            scope.record_gradients(it)
            if scope.check_finite(it, loss=loss):
                opt.step()
            scope.step(it)

    records = {r["iteration"]: r for r in read_jsonl(tmp_path / "profiles" / "memory.jsonl")}
    assert sorted(records) == list(range(6))
    for r in records.values():
        assert set(r["modules_bytes"]) == {"0", "2"}, r["modules_bytes"]

    # The last record, taken after the last step: every figure is still as it was then.
    last = records[5]
    expected_modules = {"0": 0, "2": 0}
    expected_large: dict[str, int] = {}
    for name, p in names.items():
        assert p.grad is not None
        state = [(k, v) for k, v in opt.state[p].items() if isinstance(v, torch.Tensor)]
        expected_modules[module_of(name)] += (
            nbytes(p) + nbytes(p.grad) + sum(nbytes(v) for _, v in state)
        )
        expected_large[name] = nbytes(p)
        expected_large[f"{name}.grad"] = nbytes(p.grad)
        for key, v in state:
            expected_large[f"adamw.{key}[{name}]"] = nbytes(v)
    assert last["modules_bytes"] == expected_modules
    assert {t["name"]: t["bytes"] for t in last["large_tensors"]} == expected_large
    assert last["large_tensor_count"] == len(expected_large)

    for it in (0, 1, 2, 4, 5):
        g = records[it]["gradients"]
        assert set(g["module_norms"]) == {"0", "2"}
        for module, got in g["module_norms"].items():
            ours = [t for n, t in grads[it].items() if module_of(n) == module]
            assert got == pytest.approx(vector_norm(ours), rel=1e-6)
        assert set(g["module_update_ratios"]) == {"0", "2"}

    # The non-finite iteration: the parameters by the user's names, as the test found them.
    assert bad, "the negative feature made no NaN gradient"
    (event,) = read_jsonl(tmp_path / "profiles" / "nonfinite.jsonl")
    assert event["iteration"] == 3
    assert {p["name"]: (p["nan"], p["inf"]) for p in event["nonfinite_parameters"]} == bad
    assert [p["name"] for p in event["nonfinite_parameters"]] == list(bad)
    report = (tmp_path / "profiles" / "nonfinite.iter3.txt").read_text()
    assert all(name in report for name in bad)
    (warned,) = (str(w.message) for w in gpuscope_warnings(caught))
    assert warned.startswith("gpuscope: non-finite values at iteration 3"), warned
    assert next(iter(bad)) in warned and not [w for w in WRAPPER_NAMES if w in warned]

    # Nowhere in what gpuscope wrote is a wrapper's name.
    written = run_dir_text(tmp_path)
    assert not [w for w in WRAPPER_NAMES if w in written]

    # find_nonfinite names the block, given the model or naming modules from the first
    # one called (the compiled wrapper): its inputs were finite, its log made the NaN.
    def step(x: torch.Tensor) -> None:
        model(x).pow(2).mean().backward()

    for given in (model, None):
        opt.zero_grad(set_to_none=True)
        finding = gpuscope.find_nonfinite(step, data[3], model=given)
        assert (finding.module, finding.module_type, finding.inputs_finite) == (
            "0",
            "Block",
            True,
        ), finding


def test_module_depth_counts_the_users_components(tmp_path: Path) -> None:
    """At depth 2 the modules are ``0.proj`` and ``2``, not ``_orig_mod.0``."""
    model, names = wrapped_model()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    scope = gpuscope.MemoryProfiler(
        tmp_path, model=model, optimizer=opt, every=1, module_depth=2, tensorboard=False
    )
    with scope:
        (x,) = batches(1)
        model(x).pow(2).mean().backward()
        scope.record_gradients(0)
        scope.step(0)
    (record,) = read_jsonl(tmp_path / "profiles" / "memory.jsonl")
    expected = {"0.proj": 0, "2": 0}
    for name, p in names.items():
        assert p.grad is not None
        expected[name.rsplit(".", 1)[0]] += nbytes(p) + nbytes(p.grad)
    assert record["modules_bytes"] == expected
    norms: dict[str, Any] = record["gradients"]["module_norms"]
    assert set(norms) == {"0.proj", "2"}
    assert all(math.isfinite(v) for v in norms.values())
