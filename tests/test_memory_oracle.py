"""An independent oracle for the census: torch's own memory profiler.

A small real CPU training loop runs under ``torch.profiler.profile(activities=[CPU],
profile_memory=True, record_shapes=True, with_stack=True)``. gpuscope takes its records at
marked points inside the loop (after ``backward()``, after ``optimizer.step()``, after
``zero_grad(set_to_none=True)``), each wrapped in ``torch.profiler.record_function`` so the
point can be found in the trace. torch then classifies every allocation it saw
(``torch.profiler._memory_profiler``: PARAMETER, OPTIMIZER_STATE, GRADIENT, ACTIVATION, ...),
from the data flow and the Python tracer, without looking at gpuscope at all; its live bytes
per category at each mark must equal gpuscope's ``parameters``, ``optimizer_state`` and
``gradients``.

This works on CPU: torch's memory timeline is device-agnostic and
``export_memory_timeline(path, device="cpu")`` (deprecated in favour of the CUDA-only
allocator history, but present) exports it. Two things it cannot do on CPU, and so are not
compared: its ``max_memory_allocated``/``reserved`` figures (HTML export) come from the CUDA
allocator; and gpuscope's CPU ``activations`` is a C-heap figure that the profiler itself
disturbs (its event buffers live on the same heap), so only the exactly-known categories are
compared. Timeline points are matched to marks by the mark's start time; the records
themselves allocate no tensors, so nothing moves between the mark and the record.

Where torch's classification is a heuristic that goes wrong, the comparison is narrowed,
not bent: (1) a tensor allocated before profiling started has no allocation event, and its
free is not seen either ("Memory block of unknown size was allocated before the profiling
started"), so models and optimizers are built inside the profiled window; (2) after a
Gaussian-splatting-style densification, torch labels the new ``nn.Parameter``s — outputs of
``torch.cat`` inside the window — ACTIVATION until the optimizer first updates them in
place, and the fresh momentum buffers ACTIVATION as well (no OPTIMIZER_STATE at all). There
the per-category labels cannot be compared; torch's *total* of live bytes is, and it must
equal gpuscope's census (the loop keeps no activations alive at the marks).
"""

from __future__ import annotations

import json
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gpuscope
import pytest
import torch
from _memory_helpers import MLP, one_thread, optimizer_state_bytes, params_bytes
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

mp = pytest.importorskip("torch.profiler._memory_profiler")
Category = mp.Category

COMPARED = {
    "parameters": "PARAMETER",
    "gradients": "GRADIENT",
    "optimizer_state": "OPTIMIZER_STATE",
}


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    with one_thread():
        yield


def profiled(
    run_dir: Path,
    build: Callable[[], tuple[nn.Module, torch.optim.Optimizer]],
    body: Callable[..., None],
) -> tuple[Any, dict[str, dict[str, Any]], nn.Module, torch.optim.Optimizer]:
    """Builds model and optimizer and runs ``body(model, opt, mark)`` under torch's
    profiler; ``mark(name)`` takes a gpuscope record."""
    ours: dict[str, dict[str, Any]] = {}
    with profile(
        activities=[ProfilerActivity.CPU],
        profile_memory=True,
        record_shapes=True,
        with_stack=True,
    ) as prof:
        model, opt = build()
        # The optimizer-step hooks hold the gradient norms (a few bytes of gpuscope's own)
        # from the step to the next record; this test counts every byte of the census.
        scope = gpuscope.MemoryProfiler(
            run_dir,
            model=model,
            optimizer=opt,
            every=1,
            tensorboard=False,
            text_log=False,
            gradients=False,
            check_finite=False,
        )

        def mark(name: str) -> None:
            with record_function(f"gpuscope_mark::{name}"):
                record = scope.record(len(ours))
            assert record is not None
            ours[name] = record

        body(model, opt, mark)
    scope.close()
    return prof, ours, model, opt


def torch_categories_at_marks(prof: Any) -> dict[str, Counter]:
    """Live bytes per torch category at the start of every mark, from the raw timeline."""
    memory_profile = prof._memory_profile()
    marks = {
        ev.name.removeprefix("gpuscope_mark::"): ev.start_time_ns
        for ev in memory_profile._op_tree.dfs()
        if ev.name.startswith("gpuscope_mark::")
    }
    categories = memory_profile._categories
    timeline = memory_profile.timeline
    result = {}
    for name, t_mark in marks.items():
        live: Counter = Counter()
        for t, action, (key, version), size in timeline:
            if key.device.type != "cpu" or t > t_mark:
                continue
            tensor_key = isinstance(key, mp.TensorKey)
            category = categories.get(key, version) if tensor_key else None
            if action in (mp.Action.PREEXISTING, mp.Action.CREATE):
                live[category] += size
            elif action == mp.Action.INCREMENT_VERSION:
                live[category] -= size
                live[categories.get(key, version + 1) if tensor_key else None] += size
            elif action == mp.Action.DESTROY:
                live[category] -= size
        result[name] = live
    return result


def assert_agree(
    prof: Any, ours: dict[str, dict[str, Any]], only: Callable[[str], bool] = lambda n: True
) -> dict[str, Counter]:
    theirs = torch_categories_at_marks(prof)
    assert set(theirs) == set(ours)
    compared = [name for name in ours if only(name)]
    assert compared
    for name in compared:
        record = ours[name]["categories_bytes"]
        torch_view = {k: theirs[name][getattr(Category, c)] for k, c in COMPARED.items()}
        ours_view = {k: record[k] for k in COMPARED}
        assert ours_view == torch_view, name
    return theirs


def test_torch_memory_profiler_agrees_at_record_points(tmp_path: Path) -> None:
    torch.manual_seed(0)

    def build() -> tuple[nn.Module, torch.optim.Optimizer]:
        model = MLP()
        return model, torch.optim.Adam(model.parameters(), lr=1e-3)

    def body(model: nn.Module, opt: torch.optim.Optimizer, mark: Callable[[str], None]) -> None:
        for it in range(3):
            model(torch.randn(16, 32)).pow(2).mean().backward()
            mark(f"{it}:after_backward")
            opt.step()
            mark(f"{it}:after_step")
            opt.zero_grad(set_to_none=True)
            mark(f"{it}:after_zero_grad")

    prof, records, model, opt = profiled(tmp_path, build, body)
    theirs = assert_agree(prof, records)
    ours = {name: r["categories_bytes"] for name, r in records.items()}

    # and both agree with torch's tensors themselves
    p = params_bytes(model)
    assert ours["0:after_backward"]["gradients"] == p
    assert ours["0:after_backward"]["optimizer_state"] == 0
    assert ours["2:after_zero_grad"]["optimizer_state"] == optimizer_state_bytes(opt)
    assert theirs["2:after_zero_grad"][Category.GRADIENT] == 0

    # the public export (deprecated, still there) ends in the same state
    out = tmp_path / "timeline.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prof.export_memory_timeline(str(out), device="cpu")
    times, sizes = json.loads(out.read_text())
    assert len(times) == len(sizes) > 0
    index = {c: i + 1 for i, c in enumerate(mp._CATEGORY_TO_INDEX)}  # column 0 is unused
    last = sizes[-1]
    assert last[index[Category.PARAMETER]] == ours["2:after_zero_grad"]["parameters"]
    assert last[index[Category.OPTIMIZER_STATE]] == ours["2:after_zero_grad"]["optimizer_state"]
    assert last[index[Category.GRADIENT]] == 0


class Points(nn.Module):
    """Per-point parameters used directly, as Gaussian-splatting models do."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.xyz = nn.Parameter(torch.randn(n, 3))
        self.features = nn.Parameter(torch.randn(n, 12))

    def forward(self) -> torch.Tensor:
        return self.xyz.pow(2).sum() + self.features.tanh().sum()


def test_torch_memory_profiler_agrees_across_sgd_momentum_and_densification(
    tmp_path: Path,
) -> None:
    """SGD with momentum, then the parameter set replaced mid-run (bigger nn.Parameters in
    the optimizer, state dropped), as Gaussian-splatting densification does."""
    torch.manual_seed(0)

    def build() -> tuple[nn.Module, torch.optim.Optimizer]:
        model = Points(4000)
        return model, torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

    def body(model: nn.Module, opt: torch.optim.Optimizer, mark: Callable[[str], None]) -> None:
        for it in range(3):
            model().backward()
            mark(f"{it}:after_backward")
            opt.step()
            mark(f"{it}:after_step")
            opt.zero_grad(set_to_none=True)
        new_params = []
        for name in ("xyz", "features"):
            old = getattr(model, name)
            new = nn.Parameter(torch.cat((old.detach(), torch.randn(2000, old.shape[1]))))
            opt.state.pop(old, None)
            setattr(model, name, new)
            new_params.append(new)
        del old, new
        opt.param_groups[0]["params"] = new_params
        del new_params
        mark("densified:0")
        for it in range(3, 5):
            model().backward()
            mark(f"densified:{it}:after_backward")
            opt.step()
            mark(f"densified:{it}:after_step")
            opt.zero_grad(set_to_none=True)

    prof, records, _, opt = profiled(tmp_path, build, body)
    theirs = assert_agree(prof, records, only=lambda name: not name.startswith("densified"))
    n_before = 4000 * 15 * 4
    assert records["2:after_step"]["categories_bytes"]["optimizer_state"] == n_before

    # after densification: torch's labels drift (see the module docstring), its total does not
    for name, record in records.items():
        assert sum(theirs[name].values()) == record["census_bytes"], name
    last = records["densified:4:after_step"]["categories_bytes"]
    assert last["parameters"] == last["gradients"] == last["optimizer_state"] == 6000 * 15 * 4
    assert last["optimizer_state"] == optimizer_state_bytes(opt)
