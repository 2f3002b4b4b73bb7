"""Zero-touch: a loop that only calls ``scope.step(it, losses=…)`` gets the gradient flow
and the non-finite check from the hooks ``MemoryProfiler`` puts on the optimizer's step.

Real CPU training loops; the expected figures come from torch at the same moment."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gpuscope
import pytest
import torch
from torch import nn


def records(run_dir: Path) -> dict[int, dict[str, Any]]:
    lines = (run_dir / "profiles" / "memory.jsonl").read_text().splitlines()
    return {r["iteration"]: r for r in map(json.loads, lines)}


def events(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "profiles" / "nonfinite.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def setup() -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def global_norm(model: nn.Module) -> float:
    grads = [p.grad.flatten() for p in model.parameters() if p.grad is not None]
    return float(torch.linalg.vector_norm(torch.cat(grads)))


def train(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    scope: gpuscope.MemoryProfiler,
    iterations: int,
    poisoned: int | None = None,
    before_step: Callable[[int], None] | None = None,
) -> dict[int, float]:
    """Only ``scope.step(it, losses=…)`` (plus ``before_step`` when given); returns the
    global gradient norm torch sees before each optimizer step."""
    torch.manual_seed(1)
    norms = {}
    for it in range(iterations):
        x = torch.randn(16, 8)
        if it == poisoned:
            x[3, 2] = float("nan")
        opt.zero_grad()
        out = model(x)
        parts = {"mse": out.pow(2).mean(), "l1": 1e-3 * out.abs().mean()}
        (parts["mse"] + parts["l1"]).backward()
        norms[it] = global_norm(model)
        if before_step is not None:
            before_step(it)
        opt.step()
        scope.step(it, losses=parts)
    return norms


def test_step_alone_gets_gradient_flow(tmp_path: Path) -> None:
    model, opt = setup()
    with gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=4) as scope:
        norms = train(model, opt, scope, 12)
    got = records(tmp_path)
    assert sorted(got) == [0, 4, 8]
    for it, record in got.items():
        g = record["gradients"]
        assert g["iteration"] == it
        assert g["global_norm"] == pytest.approx(norms[it], rel=1e-5)
        assert g["measured"] == 1
        assert g["clipped"] == 0
        assert record["losses"]["mse"] > 0
    assert events(tmp_path) == []


def test_update_ratio_from_the_post_hook(tmp_path: Path) -> None:
    model, opt = setup()
    scope = gpuscope.MemoryProfiler(
        tmp_path, model=model, optimizer=opt, every=5, update_ratio=True
    )
    with scope:
        train(model, opt, scope, 6)
    for record in records(tmp_path).values():
        assert record["gradients"]["update_ratio"] > 0


def test_a_poisoned_batch_is_reported(tmp_path: Path) -> None:
    model, opt = setup()
    with (
        pytest.warns(RuntimeWarning, match="non-finite values at iteration 6"),
        gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=50) as scope,
    ):
        train(model, opt, scope, 10, poisoned=6)
    found = events(tmp_path)
    assert [e["iteration"] for e in found] == [6]
    assert "mse" in found[0]["nonfinite_components"]
    assert {p["name"] for p in found[0]["nonfinite_parameters"]} >= {"0.weight"}


def test_turned_off(tmp_path: Path) -> None:
    model, opt = setup()
    scope = gpuscope.MemoryProfiler(
        tmp_path, model=model, optimizer=opt, every=4, gradients=False, check_finite=False
    )
    assert not opt._optimizer_step_pre_hooks
    with scope:
        train(model, opt, scope, 10, poisoned=6)
    assert all("gradients" not in r for r in records(tmp_path).values())
    assert events(tmp_path) == []


def test_explicit_calls_and_hooks_count_once(tmp_path: Path) -> None:
    """The same loop with the explicit calls, with and without the hooks: the same
    measurements, clipping counts and non-finite events."""

    def run(run_dir: Path, hooks: bool) -> tuple[dict[int, Any], list[dict[str, Any]]]:
        model, opt = setup()
        scope = gpuscope.MemoryProfiler(
            run_dir, model=model, optimizer=opt, every=4, gradients=hooks, check_finite=hooks
        )
        assert bool(opt._optimizer_step_pre_hooks) == hooks

        def explicit(it: int) -> None:
            scope.record_gradients(it, clip_max_norm=0.05)
            scope.check_finite(it)

        with pytest.warns(RuntimeWarning, match="non-finite"), scope:
            train(model, opt, scope, 9, poisoned=5, before_step=explicit)
        grads = {it: r["gradients"] for it, r in records(run_dir).items()}
        return grads, [{k: e[k] for k in ("iteration", "streak")} for e in events(run_dir)]

    alone, alone_events = run(tmp_path / "explicit", hooks=False)
    both, both_events = run(tmp_path / "both", hooks=True)
    assert sorted(alone) == [0, 4, 8]
    assert alone[4]["measured"] == 4 and alone[4]["clipped"] >= 1
    for it in alone:
        for key in ("measured", "clipped", "global_norm", "iteration"):
            assert both[it][key] == alone[it][key], (it, key)
    assert both_events == alone_events and alone_events


def test_hooks_removed_on_close(tmp_path: Path) -> None:
    model, opt = setup()
    scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=1)
    assert len(opt._optimizer_step_pre_hooks) == 1
    scope.close()
    assert not opt._optimizer_step_pre_hooks
    assert not opt._optimizer_step_post_hooks


def test_gradient_accumulation_measures_the_real_steps(tmp_path: Path) -> None:
    """Four micro-batches per optimizer step; ``step()`` every micro-batch: the record of
    a due iteration carries the gradients accumulated over its window."""
    model, opt = setup()
    accumulate = 4
    seen: dict[int, float] = {}
    with gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=8) as scope:
        torch.manual_seed(1)
        for it in range(17):
            model(torch.randn(16, 8)).pow(2).mean().backward()
            if it % accumulate == accumulate - 1:
                seen[it] = global_norm(model)
                opt.step()
                opt.zero_grad()
            scope.step(it)
    got = records(tmp_path)
    assert sorted(got) == [0, 8, 16]
    # The due iterations 0, 8 and 16 have no optimizer step: the real steps 3, 7, 11, 15
    # are not due, so nothing is measured.
    assert all("gradients" not in r for r in got.values())

    # Counting micro-batches from 1: the real steps are 4, 8, 12, 16, all due.
    tmp = tmp_path / "from1"
    model, opt = setup()
    with gpuscope.MemoryProfiler(tmp, model=model, optimizer=opt, every=4) as scope:
        torch.manual_seed(1)
        for it in range(1, 17):
            model(torch.randn(16, 8)).pow(2).mean().backward()
            if it % accumulate == 0:
                seen[it] = global_norm(model)
                opt.step()
                opt.zero_grad()
            scope.step(it)
    got = records(tmp)
    assert sorted(got) == [4, 8, 12, 16]
    for it, record in got.items():
        g = record["gradients"]
        assert g["iteration"] == it
        assert g["global_norm"] == pytest.approx(seen[it], rel=1e-5)
        assert g["measured"] == 1


def test_several_optimizers_measure_once(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    first = torch.optim.SGD(model[0].parameters(), lr=0.01)
    second = torch.optim.Adam(model[2].parameters(), lr=1e-3)
    scope = gpuscope.MemoryProfiler(
        tmp_path, model=model, optimizer=[first, second], every=3, update_ratio=True
    )
    assert len(first._optimizer_step_pre_hooks) == len(second._optimizer_step_pre_hooks) == 1
    norms = {}
    with scope:
        torch.manual_seed(1)
        for it in range(7):
            first.zero_grad()
            second.zero_grad()
            model(torch.randn(16, 8)).pow(2).mean().backward()
            norms[it] = global_norm(model)
            first.step()
            second.step()
            scope.step(it)
    assert not first._optimizer_step_pre_hooks and not second._optimizer_step_pre_hooks
    got = records(tmp_path)
    assert sorted(got) == [0, 3, 6]
    for it, record in got.items():
        g = record["gradients"]
        assert g["measured"] == 1
        assert g["global_norm"] == pytest.approx(norms[it], rel=1e-5)
        assert len(g["group_norms"]) == 2
        assert g["update_ratio"] > 0
    assert record["categories_bytes"]["optimizer_state"] > 0


def test_grad_scaler_measures_unscaled_gradients(tmp_path: Path) -> None:
    """``scaler.step(opt)`` unscales before the optimizer's step, so the hook sees the
    true gradients; a step the scaler skips (infinite gradients) runs no hook."""
    try:
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    except (RuntimeError, TypeError, ValueError) as e:  # pragma: no cover
        pytest.skip(f"no GradScaler on CPU here: {e}")
    model, opt = setup()
    norms: dict[int, float] = {}
    with gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=2) as scope:
        torch.manual_seed(1)
        for it in range(5):
            opt.zero_grad()
            x = torch.randn(16, 8)
            if it == 2:
                x[0, 0] = float("inf")
            scaler.scale(model(x).pow(2).mean()).backward()
            norms[it] = global_norm(model) / scaler.get_scale()
            scaler.step(opt)
            scaler.update()
            scope.step(it)
    got = records(tmp_path)
    assert sorted(got) == [0, 2, 4]
    for it in (0, 4):
        assert got[it]["gradients"]["iteration"] == it
        assert got[it]["gradients"]["global_norm"] == pytest.approx(norms[it], rel=1e-4)
    # Iteration 2's step was skipped by the scaler: not measured, not checked.
    assert "gradients" not in got[2]
    assert events(tmp_path) == []


def test_the_hook_keeps_no_gradient_alive_after_zero_grad(tmp_path: Path) -> None:
    """What the step hook keeps for the check (the norms) is not the gradients: freed by
    ``zero_grad()``, they are gone before the next forward, as without gpuscope."""
    import gc
    import weakref

    model, opt = setup()
    x, y = torch.randn(8, 8), torch.randn(8, 1)
    scope = gpuscope.MemoryProfiler(tmp_path / "run", model=model, optimizer=opt, every=50)
    for it in range(3):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        grads = [weakref.ref(p.grad) for p in model.parameters() if p.grad is not None]
        assert grads
        opt.step()
        opt.zero_grad(set_to_none=True)
        gc.collect()
        assert [g() for g in grads] == [None] * len(grads), it
        scope.step(it, losses={"mse": loss.detach()})
    scope.close()


def train_with_closure(
    model: nn.Module, opt: torch.optim.Optimizer, scope: gpuscope.MemoryProfiler, positional: bool
) -> dict[int, float]:
    """Nine iterations of ``opt.step(closure)`` (the closure passed by position or by
    name), a NaN in iteration 7's batch; returns the global gradient norm after each
    iteration's first backward."""
    firsts: dict[int, float] = {}
    torch.manual_seed(1)
    for it in range(9):
        x = torch.randn(16, 8)
        if it == 7:
            x[0, 0] = float("nan")
        parts: dict[str, torch.Tensor] = {}

        def closure(
            it: int = it, x: torch.Tensor = x, parts: dict[str, torch.Tensor] = parts
        ) -> torch.Tensor:
            opt.zero_grad()
            parts["mse"] = model(x).pow(2).mean()
            parts["mse"].backward()
            firsts.setdefault(it, global_norm(model))
            return parts["mse"]

        if positional:
            opt.step(closure)
        else:
            opt.step(closure=closure)
        scope.step(it, losses=parts)
    return firsts


@pytest.mark.parametrize("kind", ["sgd", "lbfgs"])
def test_a_closure_step_is_measured_after_its_backward(tmp_path: Path, kind: str) -> None:
    """``optimizer.step(closure)`` runs forward and backward inside the step (LBFGS,
    Lightning): the hook measures once the closure has run, the gradients of this
    iteration, not the previous one's; LBFGS calls the closure several times a step and
    is measured once, after the first. A NaN batch is reported at its iteration."""
    model, sgd = setup()
    opt: torch.optim.Optimizer = (
        sgd if kind == "sgd" else torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=3)
    )
    scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=3)
    with pytest.warns(RuntimeWarning, match="non-finite values at iteration 7"), scope:
        firsts = train_with_closure(model, opt, scope, positional=kind == "sgd")
    got = records(tmp_path)
    assert sorted(got) == [0, 3, 6]
    for it in (0, 3, 6):
        assert got[it]["gradients"]["iteration"] == it
        assert got[it]["gradients"]["global_norm"] == pytest.approx(firsts[it], rel=1e-5)
    assert [e["iteration"] for e in events(tmp_path)] == [7]
