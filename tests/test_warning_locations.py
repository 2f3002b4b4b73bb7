"""gpuscope's one-time warnings point at the line of the user's code that led to them (this
file), not at gpuscope's own files, whatever the path through gpuscope (and through torch,
which calls gpuscope's profiler callback) that raised them."""

from __future__ import annotations

import linecache
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import gpuscope
import torch
from _memory_helpers import without_cuda
from torch import nn

HERE = __file__


@contextmanager
def warnings_from_gpuscope() -> Iterator[list[warnings.WarningMessage]]:
    """Every warning whose message names gpuscope or profiling (torch's own, e.g. about
    the profiler on CPU, are left out)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours: list[warnings.WarningMessage] = []
        yield ours
    ours.extend(w for w in caught if "gpuscope" in str(w.message) or "profiling" in str(w.message))


def assert_points_here(w: warnings.WarningMessage, code: str) -> None:
    assert w.filename == HERE, (w.filename, w.lineno, str(w.message))
    assert code in linecache.getline(w.filename, w.lineno), (w.lineno, str(w.message))


def small_training() -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def test_memory_profiler_loss_warning_from_step(tmp_path: Path) -> None:
    """A loss component that is not one number, given to step() (which records)."""
    model, opt = small_training()
    with warnings_from_gpuscope() as caught:
        scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=1)
        for it in range(3):
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
            scope.step(it, losses={"bad": "not a number"})
        scope.close()
    (w,) = caught
    assert "'bad' is not one number" in str(w.message)
    assert_points_here(w, "scope.step(it, losses=")


class UnreadableState:
    """An optimizer whose state cannot be read: every census fails."""

    def __init__(self, opt: torch.optim.Optimizer) -> None:
        self.param_groups = opt.param_groups

    @property
    def state(self) -> dict[object, object]:
        raise RuntimeError("state is not readable")


def test_memory_profiler_failure_warning_from_step(tmp_path: Path) -> None:
    """A record that fails (the census cannot read the optimizer's state), reached through
    step()."""
    model, opt = small_training()
    with warnings_from_gpuscope() as caught:
        scope = gpuscope.MemoryProfiler(tmp_path, model, UnreadableState(opt), every=1)  # type: ignore[arg-type]
        for it in range(2):
            scope.step(it)
        scope.close()
    assert len(caught) == 1, [str(w.message) for w in caught]
    assert "state is not readable" in str(caught[0].message)
    assert_points_here(caught[0], "scope.step(it)")


def test_nonfinite_warning(tmp_path: Path) -> None:
    model, opt = small_training()
    scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=100)
    with warnings_from_gpuscope() as caught:
        loss = model(torch.full((2, 4), float("nan"))).sum()
        loss.backward()
        scope.check_finite(0, loss=loss)
    scope.close()
    (w,) = caught
    assert_points_here(w, "scope.check_finite(0, loss=loss)")


def test_profiler_trace_failure_reported_at_the_users_step(tmp_path: Path) -> None:
    """The trace cannot be written (the run directory is under a file): torch's profiler
    calls gpuscope's callback from inside prof.step(); the warning names that line."""
    (tmp_path / "a_file").write_text("")
    config = gpuscope.ProfilingConfig(wait=0, warmup=1, active=1, repeat=1)
    model, _ = small_training()
    with (
        warnings_from_gpuscope() as caught,
        gpuscope.profile(tmp_path / "a_file" / "run", config, summary=False) as prof,
    ):
        for _ in range(3):
            model(torch.randn(2, 4))
            prof.step()
    (w,) = caught
    assert "could not write the profiler trace" in str(w.message)
    assert_points_here(w, "prof.step()")


def test_with_stack_warning(tmp_path: Path) -> None:
    config = gpuscope.ProfilingConfig(wait=0, warmup=0, active=1, repeat=1, with_stack=True)
    # Nested, so that the with statement the warning names is on one line.
    with warnings_from_gpuscope() as caught:  # noqa: SIM117
        with gpuscope.profile(tmp_path, config, summary=False) as prof:
            prof.step()
    (w,) = caught
    assert_points_here(w, "with gpuscope.profile(tmp_path, config")


@without_cuda
def test_oom_guard_without_cuda_warning(tmp_path: Path) -> None:
    with warnings_from_gpuscope() as caught, gpuscope.oom_guard(tmp_path):
        pass
    (w,) = caught
    assert_points_here(w, "gpuscope.oom_guard(tmp_path)")
