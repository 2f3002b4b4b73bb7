"""Host–device synchronisations of the training-health hooks, counted on CPU.

Every read of a tensor's value from Python (``.item()``, ``bool()``, ``float()``,
``if t:``) goes through ``aten::_local_scalar_dense``; on a GPU each one stops the CPU
until the GPU has caught up. A ``TorchDispatchMode`` counts those calls while a real
training loop runs, once without gpuscope and once with the explicit calls
(``record_gradients(it, clip_max_norm=…)`` and ``check_finite(it, losses=…, loss=…)``),
and once zero-touch (only ``step(it, losses=…, loss=…)``: the optimizer-step hooks):
on the iterations not due for a record the counts must be the same. The iterations
that record may read values (that is when the figures are written): their counts are
reported, not bounded.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gpuscope
import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

EVERY = 50
ITERATIONS = range(1, 21)  # none is due for a record with every=50 (0, 50, ...)


class ScalarReads(TorchDispatchMode):
    """Counts ``aten::_local_scalar_dense`` calls: one per read of a tensor's value."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        if func is torch.ops.aten._local_scalar_dense.default:
            self.count += 1
        return func(*args, **(kwargs or {}))


Hooks = Callable[[int, dict[str, torch.Tensor], torch.Tensor], None]
Step = Callable[[int, dict[str, torch.Tensor], torch.Tensor], None]


def model_and_optimizer() -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3)


def training_loop(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    iterations: range,
    hooks: Hooks | None = None,
    step: Step | None = None,
) -> int:
    """Trains on two loss components; ``hooks`` runs after ``backward()`` and before the
    optimizer step, ``step`` at the end of the iteration. Returns the value reads counted
    while ``iterations`` ran (a first iteration, 0, runs before them uncounted: AdamW
    creates its state there, and the profiler records it)."""
    x, y = torch.randn(32, 16), torch.randn(32, 4)
    counter = ScalarReads()
    for it in [0, *iterations]:
        if it == iterations.start:
            counter.__enter__()
        opt.zero_grad()
        out = model(x)
        parts = {"mse": (out - y).pow(2).mean(), "l1": 1e-3 * out.abs().mean()}
        loss = parts["mse"] + parts["l1"]
        loss.backward()
        if hooks is not None:
            hooks(it, parts, loss)
        opt.step()
        if step is not None:
            step(it, parts, loss)
    counter.__exit__(None, None, None)
    return counter.count


def plain(iterations: range) -> int:
    return training_loop(*model_and_optimizer(), iterations)


def with_explicit_calls(tmp_path: Path, iterations: range, every: int) -> int:
    """The loop with ``record_gradients`` and ``check_finite`` called by hand."""
    model, opt = model_and_optimizer()
    scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=every)

    def hooks(it: int, parts: dict[str, torch.Tensor], loss: torch.Tensor) -> None:
        scope.record_gradients(it, clip_max_norm=1.0)
        assert scope.check_finite(it, losses=parts, loss=loss) is True

    with scope:
        return training_loop(model, opt, iterations, hooks, lambda it, parts, loss: scope.step(it))


def zero_touch(tmp_path: Path, iterations: range, every: int, **options: Any) -> int:
    """The loop calling only ``scope.step(it, losses=…, loss=…)``: the optimizer-step
    hooks measure the gradients and take the norms for the non-finite check."""
    model, opt = model_and_optimizer()
    scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=every, **options)
    assert opt._optimizer_step_pre_hooks

    def step(it: int, parts: dict[str, torch.Tensor], loss: torch.Tensor) -> None:
        scope.step(it, losses=parts, loss=loss)

    with scope:
        return training_loop(model, opt, iterations, step=step)


def test_iterations_between_records_read_no_value_more_than_the_plain_loop(
    tmp_path: Path,
) -> None:
    baseline = plain(ITERATIONS)
    hooked = with_explicit_calls(tmp_path, ITERATIONS, EVERY)
    assert hooked == baseline, (
        f"record_gradients + check_finite read {hooked - baseline} tensor values in "
        f"{len(ITERATIONS)} iterations not due for a record (plain loop: {baseline})"
    )


@pytest.mark.parametrize("update_ratio", [False, True])
def test_zero_touch_hooks_read_no_value_between_records(tmp_path: Path, update_ratio: bool) -> None:
    baseline = plain(ITERATIONS)
    hooked = zero_touch(tmp_path, ITERATIONS, EVERY, update_ratio=update_ratio)
    assert hooked == baseline, (
        f"the optimizer-step hooks read {hooked - baseline} tensor values in "
        f"{len(ITERATIONS)} iterations not due for a record (plain loop: {baseline})"
    )


def test_recording_iterations_may_read_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """every=1: each iteration records; the reads are allowed and printed (-s shows them)."""
    baseline = plain(ITERATIONS)
    hooked = with_explicit_calls(tmp_path / "explicit", ITERATIONS, 1)
    automatic = zero_touch(tmp_path / "zero-touch", ITERATIONS, 1)
    with capsys.disabled():
        print(
            f"\nvalue reads on {len(ITERATIONS)} recording iterations: plain {baseline}, "
            f"with record_gradients + check_finite {hooked} "
            f"({(hooked - baseline) / len(ITERATIONS):.1f} per iteration), "
            f"zero-touch {automatic} ({(automatic - baseline) / len(ITERATIONS):.1f})"
        )
    assert hooked >= baseline
    assert automatic >= baseline


def norm_passes_between_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, explicit: bool, clip: bool
) -> int:
    """``torch._foreach_norm`` calls (each a pass over every gradient) on iterations not
    due for a record, in the loop with the explicit calls or zero-touch, with or without
    torch's ``clip_grad_norm_`` (in place) between ``record_gradients`` and
    ``check_finite``. Counted by wrapping the function, not in a dispatch mode: under one,
    in-place operations do not bump a tensor's version counter."""
    model, opt = model_and_optimizer()
    scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=EVERY)
    x, y = torch.randn(32, 16), torch.randn(32, 4)
    real = torch._foreach_norm
    calls = 0

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(*args, **kwargs)

    with scope:
        for it in [0, *ITERATIONS]:
            if it == ITERATIONS.start:
                monkeypatch.setattr(torch, "_foreach_norm", counting)
            opt.zero_grad()
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            if explicit:
                scope.record_gradients(it, clip_max_norm=1.0)
            if clip:
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if explicit:
                scope.check_finite(it, loss=loss)
            opt.step()
            scope.step(it, loss=loss)
    monkeypatch.setattr(torch, "_foreach_norm", real)
    return calls


@pytest.mark.parametrize("explicit", [True, False])
def test_one_pass_of_gradient_norms_per_iteration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, explicit: bool
) -> None:
    """The clipping count and the non-finite check share one ``_foreach_norm`` over the
    gradients (the zero-touch hook takes one as well). Clipping in place between the two
    explicit calls changes the gradients: the check then takes a pass of its own (the
    shared norms would be stale); clip_grad_norm_ takes one too."""
    n = len(ITERATIONS)
    assert norm_passes_between_records(tmp_path / "a", monkeypatch, explicit, clip=False) == n
    clipped = norm_passes_between_records(tmp_path / "b", monkeypatch, explicit, clip=True)
    assert clipped == (3 if explicit else 2) * n


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("explicit", [True, False])
def test_no_synchronisation_between_records_on_cuda(tmp_path: Path, explicit: bool) -> None:
    """On a GPU, under ``torch.cuda.set_sync_debug_mode("error")`` (every synchronising
    call raises), iterations not due for a record run with the hooks, explicit or
    zero-touch, as the plain loop runs: without one synchronisation."""
    device = torch.device("cuda")
    x, y = torch.randn(32, 16, device=device), torch.randn(32, 4, device=device)

    def run(hooked: bool) -> None:
        """Iteration 0 (due for a record; AdamW makes its state), then ITERATIONS with
        synchronisations as errors; ``hooked``: with gpuscope."""
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4)).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
        scope = None
        if hooked:
            scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=EVERY)
        for it in [0, *ITERATIONS]:
            if it == ITERATIONS.start:
                torch.cuda.synchronize()
                torch.cuda.set_sync_debug_mode("error")
            opt.zero_grad()
            out = model(x)
            parts = {"mse": (out - y).pow(2).mean(), "l1": 1e-3 * out.abs().mean()}
            loss = parts["mse"] + parts["l1"]
            loss.backward()
            if scope is not None and explicit:
                scope.record_gradients(it, clip_max_norm=1.0)
                scope.check_finite(it, losses=parts, loss=loss)
            opt.step()
            if scope is not None:
                scope.step(it, losses=parts, loss=loss)
        torch.cuda.set_sync_debug_mode("default")
        if scope is not None:
            scope.close()

    try:
        run(hooked=False)
    except RuntimeError as e:  # this torch's own loop synchronises: nothing to compare
        torch.cuda.set_sync_debug_mode("default")
        pytest.skip(f"the plain loop synchronises on this torch: {e}")
    try:
        run(hooked=True)
    finally:
        torch.cuda.set_sync_debug_mode("default")
