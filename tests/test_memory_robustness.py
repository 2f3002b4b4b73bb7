"""The profiler never takes training down: an unwritable run directory, a broken optimizer
state, an unreadable loss value or a record after ``close()`` cost one warning at most and
the real CPU training loop finishes. On CPU, ``oom_guard`` and ``snapshot_at`` say that they
need CUDA; an out-of-memory error still gets its report and is re-raised unchanged.

Also the issue's core, the leak demonstration: a real CPU loop that keeps outputs with their
autograd graphs shows ``activations`` (and with ``scan="gc"``, ``other``) growing by the
bytes it leaks — computed here with torch's own saved-tensor hooks — while a clean loop stays
flat."""

from __future__ import annotations

import collections
import gc
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gpuscope
import numpy as np
import pytest
import torch
from _memory_helpers import (
    MLP,
    caught_warnings,
    gpuscope_warnings,
    nbytes,
    one_thread,
    params_bytes,
    profiler_files,
    read_jsonl,
    train_step,
    without_cuda,
)
from torch import nn


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    with one_thread():
        yield


def train(scope: gpuscope.MemoryProfiler, model: nn.Module, opt: Any, iters: int) -> list[float]:
    """A real loop; returns its losses (they must fall: training really happened)."""
    torch.manual_seed(1)
    x = torch.randn(32, 32)
    losses = []
    for it in range(iters):
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        scope.step(it, losses={"mse": loss})
        losses.append(float(loss.item()))
    return losses


# -- failures inside the profiler ------------------------------------------------------


def test_run_dir_under_a_regular_file(tmp_path: Path) -> None:
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the run directory should go")
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with caught_warnings() as caught:
        scope = gpuscope.MemoryProfiler(blocker / "run", model=model, optimizer=opt, every=1)
        losses = train(scope, model, opt, 40)
        for it in range(40, 240):  # the profiler keeps going, warning no more
            scope.step(it, losses={"mse": 0.5})
        record = scope.record(999)
        scope.flush()
        scope.close()
    assert len(losses) == 40 and losses[-1] < losses[0]
    ours = gpuscope_warnings(caught)
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert ours[0].category is RuntimeWarning
    assert scope.paths == []
    assert blocker.read_text().startswith("a file")  # untouched
    # the census itself still works, it just has nowhere to go
    assert record is not None
    assert record["categories_bytes"]["parameters"] == params_bytes(model)


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_run_dir_in_a_read_only_parent(tmp_path: Path) -> None:
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(stat.S_IRUSR | stat.S_IXUSR)  # 0o500
    try:
        model = MLP()
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        with caught_warnings() as caught:
            scope = gpuscope.MemoryProfiler(parent / "run", model=model, optimizer=opt, every=1)
            train(scope, model, opt, 20)
            scope.close()
        assert len(gpuscope_warnings(caught)) == 1
        assert not (parent / "run").exists()
    finally:
        parent.chmod(0o700)


class BrokenValue:
    """An optimizer-state entry that torch's Adam never reads but whose ``__class__``
    cannot be read either (what a half-initialised extension's object can look like)."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        raise RuntimeError("broken optimizer state value")


class BrokenState(collections.defaultdict):  # type: ignore[type-arg]
    """``optimizer.state`` whose iteration fails; torch itself only indexes it."""

    def values(self) -> Any:
        raise RuntimeError("optimizer.state.values() is broken")

    def items(self) -> Any:
        raise RuntimeError("optimizer.state.items() is broken")


@pytest.mark.parametrize("breakage", ["value", "state"])
def test_broken_optimizer_state(tmp_path: Path, breakage: str) -> None:
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    if breakage == "state":
        opt.state = BrokenState(dict)
    with caught_warnings() as caught:
        scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=1)
        scope.step(-1)  # one healthy record first, when possible
        train_step(model, opt, torch.randn(4, 32))
        if breakage == "value":
            opt.state[model.head[0].weight]["extra"] = BrokenValue()
        losses = train(scope, model, opt, 30)
        scope.close()
    assert losses[-1] < losses[0]
    ours = gpuscope_warnings(caught)
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert "broken" in str(ours[0].message)
    # whatever was recorded is well-formed JSON lines
    for r in read_jsonl(tmp_path / "profiles" / "memory.jsonl"):
        assert r["categories_bytes"]["parameters"] == params_bytes(model)


def train_with_sections(
    scope: gpuscope.MemoryProfiler, model: nn.Module, opt: torch.optim.Optimizer, iters: int
) -> list[float]:
    """A real loop whose forward and backward are timed sections; returns its losses."""
    torch.manual_seed(1)
    x = torch.randn(32, 32)
    losses = []
    for it in range(iters):
        with scope.section("forward"):
            loss = model(x).pow(2).mean()
        with scope.section("backward"):
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        scope.step(it, loss=loss)
        losses.append(float(loss.item()))
    return losses


def test_lazy_model_is_counted_once_materialised(tmp_path: Path) -> None:
    """``LazyLinear``'s parameters have no storage before the first forward: a census then
    (a record, a section on iteration 0) leaves them out instead of failing."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.LazyLinear(16), nn.ReLU(), nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with caught_warnings() as caught:
        scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=5)
        before = scope.record(-1)
        losses = train_with_sections(scope, model, opt, 20)
        scope.close()
    assert not gpuscope_warnings(caught), [str(w.message) for w in caught]
    assert losses[-1] < losses[0]
    assert before is not None
    assert before["categories_bytes"]["parameters"] == params_bytes(model[2])
    records = read_jsonl(tmp_path / "profiles" / "memory.jsonl")
    assert [r["iteration"] for r in records] == [-1, 0, 5, 10, 15]
    for r in records[1:]:
        assert r["categories_bytes"]["parameters"] == params_bytes(model)
        assert set(r["sections"]) == {"forward", "backward"}
    # Iteration 0's forward materialised the lazy layer: its section added those bytes.
    assert records[1]["sections"]["forward"]["net_bytes"] == params_bytes(model[0])


class UnreadableState:
    """An optimizer-like object whose ``state`` cannot be read (a wrapper that breaks)."""

    def __init__(self, opt: torch.optim.Optimizer) -> None:
        self.param_groups = opt.param_groups

    @property
    def state(self) -> dict[Any, Any]:
        raise RuntimeError("UnreadableState.state is not readable")


def test_census_failure_inside_a_section_costs_one_warning(tmp_path: Path) -> None:
    """An optimizer whose state cannot be read: the census fails at the section's start on
    a recorded iteration and in every record. Training goes on, the sections are still
    timed, and it is said once. (This used an LR scheduler passed as ``optimizer=``, which
    is now refused at construction.)"""
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with caught_warnings() as caught:
        scope = gpuscope.MemoryProfiler(
            tmp_path,
            model=model,
            optimizer=UnreadableState(opt),  # type: ignore[arg-type]
            every=5,
        )
        losses = train_with_sections(scope, model, opt, 20)
        scope.close()
    assert losses[-1] < losses[0]
    ours = gpuscope_warnings(caught)
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert "UnreadableState.state is not readable" in str(ours[0].message)


@pytest.mark.parametrize(
    "make",
    [
        lambda opt: torch.optim.lr_scheduler.StepLR(opt, 10),
        lambda opt: torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=100),
        lambda opt: torch.optim.lr_scheduler.ReduceLROnPlateau(opt),
    ],
    ids=["StepLR", "OneCycleLR", "ReduceLROnPlateau"],
)
def test_an_lr_scheduler_as_optimizer_is_a_type_error(tmp_path: Path, make: Any) -> None:
    """It was accepted, and every record then failed (one warning, nothing recorded):
    refused where it is given, naming the scheduler and what to pass instead."""
    model = MLP()
    scheduler = make(torch.optim.SGD(model.parameters(), lr=0.05))
    name = type(scheduler).__name__
    with caught_warnings() as caught, pytest.raises(TypeError) as raised:
        gpuscope.MemoryProfiler(tmp_path / "run", model=model, optimizer=scheduler, every=1)
    message = str(raised.value)
    assert message.startswith(f"optimizer= is an LR scheduler ({name}), not an optimizer")
    assert "its .optimizer" in message
    assert not gpuscope_warnings(caught)
    assert not (tmp_path / "run").exists()
    # What the message says to pass works.
    with caught_warnings() as caught:
        scope = gpuscope.MemoryProfiler(
            tmp_path / "fixed", model=model, optimizer=scheduler.optimizer, every=1
        )
        scope.step(0)
        scope.close()
    assert not gpuscope_warnings(caught), [str(w.message) for w in caught]
    assert len(read_jsonl(tmp_path / "fixed" / "profiles" / "memory.jsonl")) == 1


@pytest.mark.parametrize("bad", [object(), "adam", [1, 2]], ids=["object", "str", "list"])
def test_an_optimizer_without_param_groups_is_a_type_error(tmp_path: Path, bad: Any) -> None:
    with pytest.raises(TypeError, match=r"optimizer= must be a torch.optim.Optimizer"):
        gpuscope.MemoryProfiler(tmp_path / "run", model=MLP(), optimizer=bad)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "bad", ["not a number", None, torch.ones(3), torch.tensor(1 + 2j)], ids=repr
)
def test_a_bad_loss_component_is_left_out_and_the_records_kept(tmp_path: Path, bad: Any) -> None:
    """One component that is not one number costs a warning naming it; every record is
    still written with the other components, and the non-finite check still sees them."""
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(32, 32)
    losses = []
    with caught_warnings() as caught:
        scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=2)
        for it in range(10):
            mse = model(x).pow(2).mean()
            mse.backward()
            parts = {"mse": mse * (float("nan") if it == 7 else 1.0), "rendering": bad}
            if scope.check_finite(it, losses=parts):
                opt.step()
            opt.zero_grad(set_to_none=True)
            scope.step(it, losses=parts)
            losses.append(float(mse.item()))
        scope.close()
    assert losses[-1] < losses[0]
    ours = gpuscope_warnings(caught)
    assert len(ours) == 2, [str(w.message) for w in ours]  # the component, the NaN
    assert "'rendering'" in str(ours[0].message)
    assert "non-finite values at iteration 7: loss component 'mse'" in str(ours[1].message)
    records = read_jsonl(tmp_path / "profiles" / "memory.jsonl")
    assert [r["iteration"] for r in records] == [0, 2, 4, 6, 8]
    for r in records:
        assert set(r["losses"]) == {"mse", "total"}
        assert r["losses"]["total"] == r["losses"]["mse"]
    assert records[0]["losses"]["mse"] == pytest.approx(losses[0])
    events = read_jsonl(tmp_path / "profiles" / "nonfinite.jsonl")
    assert [e["iteration"] for e in events] == [7]
    assert events[0]["nonfinite_components"] == ["mse"]


def test_a_bad_total_loss_is_left_out(tmp_path: Path) -> None:
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with caught_warnings() as caught:
        scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=2)
        for it in range(4):
            train_step(model, opt, torch.randn(4, 32))
            scope.step(it, losses={"mse": 0.5, "kl": 0.25}, loss=torch.ones(2))
        scope.close()
    ours = gpuscope_warnings(caught)
    assert len(ours) == 1 and "loss=" in str(ours[0].message)
    records = read_jsonl(tmp_path / "profiles" / "memory.jsonl")
    assert [r["losses"] for r in records] == [{"mse": 0.5, "kl": 0.25, "total": 0.75}] * 2


@pytest.mark.parametrize("method", ["step", "record_gradients", "check_finite", "record"])
@pytest.mark.parametrize("bad", [None, "12"], ids=repr)
def test_iteration_that_is_not_a_number_is_a_clear_type_error(
    tmp_path: Path, method: str, bad: Any
) -> None:
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=1)
    train_step(model, opt, torch.randn(4, 32), zero=False)
    with caught_warnings() as caught, pytest.raises(TypeError) as raised:
        getattr(scope, method)(bad)
    scope.close()
    message = str(raised.value)
    assert message.startswith(f"MemoryProfiler.{method}: iteration must be an int"), message
    assert repr(bad) in message
    assert not gpuscope_warnings(caught)


def test_numpy_and_tensor_iterations_still_work(tmp_path: Path) -> None:
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    kinds = [np.int64, torch.tensor, float, int]
    with caught_warnings() as caught:
        scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=2)
        for i in range(8):
            it = kinds[i // 2](i)
            loss = model(torch.randn(4, 32)).pow(2).mean()
            loss.backward()
            scope.record_gradients(it)
            if scope.check_finite(it, loss=loss):
                opt.step()
            opt.zero_grad(set_to_none=True)
            scope.step(it, loss=loss)
        scope.close()
    assert not gpuscope_warnings(caught), [str(w.message) for w in caught]
    records = read_jsonl(tmp_path / "profiles" / "memory.jsonl")
    assert [r["iteration"] for r in records] == [0, 2, 4, 6]
    assert all("gradients" in r for r in records)


@pytest.mark.parametrize(
    ("kwargs", "error", "says"),
    [
        ({"large_threshold_mb": -1}, ValueError, "large_threshold_mb must be a finite number >= 0"),
        ({"large_threshold_mb": float("nan")}, ValueError, "large_threshold_mb"),
        ({"large_threshold_mb": "100"}, TypeError, "large_threshold_mb must be a number"),
        ({"flush_secs": 0}, ValueError, "flush_secs must be a finite number > 0"),
        ({"flush_secs": -2.0}, ValueError, "flush_secs must be a finite number > 0"),
        ({"top_k": -1}, ValueError, "top_k must be >= 0"),
        ({"top_k": 2.5}, TypeError, "top_k must be an int"),
        ({"module_depth": -1}, ValueError, "module_depth must be >= 0"),
        ({"windows": [(1, 2)]}, ValueError, r"window \(1, 2\): expected three ints"),
        ({"windows": [(1.0, 2, 1)]}, ValueError, "expected three ints"),
        ({"every": True}, ValueError, "every must be a positive int"),
    ],
    ids=lambda v: repr(v) if isinstance(v, dict) else "",
)
def test_bad_constructor_values_are_refused_at_construction(
    tmp_path: Path, kwargs: dict[str, Any], error: type[Exception], says: str
) -> None:
    model = MLP()
    with caught_warnings() as caught, pytest.raises(error, match=says):
        gpuscope.MemoryProfiler(tmp_path / "run", model=model, **kwargs)
    assert not gpuscope_warnings(caught)
    assert not (tmp_path / "run").exists()


def test_good_constructor_values_and_no_windows(tmp_path: Path) -> None:
    """The edges that are allowed: a zero threshold (every tensor is large), top_k and
    module_depth 0, numpy numbers, ``windows=None``."""
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with caught_warnings() as caught:
        scope = gpuscope.MemoryProfiler(
            tmp_path,
            model=model,
            optimizer=opt,
            every=2,
            windows=None,
            large_threshold_mb=np.float32(0.0),
            flush_secs=np.float64(0.5),
            top_k=0,
            module_depth=0,
        )
        losses = train(scope, model, opt, 6)
        scope.close()
    assert losses[-1] < losses[0]
    assert not gpuscope_warnings(caught), [str(w.message) for w in caught]
    records = read_jsonl(tmp_path / "profiles" / "memory.jsonl")
    assert [r["iteration"] for r in records] == [0, 2, 4]
    assert records[0]["large_tensors"] == []
    # gradients are dropped before step(), plain SGD has no state: the parameters
    assert records[0]["large_tensor_count"] == len(list(model.parameters()))
    assert set(records[0]["modules_bytes"]) == {"(root)"}


def test_record_and_step_after_close(tmp_path: Path) -> None:
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=1)
    train(scope, model, opt, 3)
    scope.close()
    lines = (tmp_path / "profiles" / "memory.jsonl").read_text()
    with caught_warnings() as caught:
        r = scope.record(10)
        scope.step(11, losses={"mse": 1.0})
        scope.flush()
        scope.close()
        scope.close()
    assert not gpuscope_warnings(caught)
    if r is not None:
        assert r["categories_bytes"]["parameters"] == params_bytes(model)
    assert (tmp_path / "profiles" / "memory.jsonl").read_text().startswith(lines)
    assert [r["iteration"] for r in read_jsonl(tmp_path / "profiles" / "memory.jsonl")][:3] == [
        0,
        1,
        2,
    ]


def test_context_manager_closes_and_lets_errors_through(tmp_path: Path) -> None:
    model = MLP()
    with (
        pytest.raises(KeyError, match="from training"),
        gpuscope.MemoryProfiler(tmp_path, model=model, every=1) as scope,
    ):
        scope.step(0)
        raise KeyError("from training")
    assert [r["iteration"] for r in read_jsonl(tmp_path / "profiles" / "memory.jsonl")] == [0]


# -- oom_guard and snapshots on CPU ----------------------------------------------------


@without_cuda
def test_oom_guard_on_cpu_reports_and_reraises(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.Adam(model.parameters())
    scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=100)
    message = "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.6 GiB total)"
    err = torch.cuda.OutOfMemoryError(message)
    with (
        caught_warnings() as caught,
        pytest.raises(torch.cuda.OutOfMemoryError) as raised,
        gpuscope.oom_guard(profiler=scope) as guard,
    ):
        for it in range(5):
            train_step(model, opt, torch.randn(4, 32), zero=False)
            scope.step(it)
        raise err
    scope.close()
    assert raised.value is err  # the very same error, unchanged
    assert str(raised.value) == message
    cuda = [w for w in gpuscope_warnings(caught) if "CUDA" in str(w.message)]
    assert len(cuda) == 1 and cuda[0].category is RuntimeWarning
    reports = list((tmp_path / "snapshots").iterdir())
    assert len(reports) == 1
    assert re.fullmatch(r"oom\.\d{8}_\d{6}\.txt", reports[0].name), reports
    assert guard.report == reports[0]
    text = reports[0].read_text()
    assert message in text
    for category in ("parameters", "gradients", "optimizer_state"):
        assert category in text
    assert not list((tmp_path / "snapshots").glob("*.pickle"))  # no allocator on CPU


def test_oom_guard_as_decorator_without_profiler(tmp_path: Path) -> None:
    @gpuscope.oom_guard(tmp_path)
    def step() -> None:
        raise torch.cuda.OutOfMemoryError("out of memory in step()")

    with caught_warnings(), pytest.raises(torch.cuda.OutOfMemoryError, match="in step"):
        step()
    (report,) = (tmp_path / "snapshots").glob("oom.*.txt")
    assert "out of memory in step()" in report.read_text()


def test_oom_guard_lets_other_errors_pass_without_report(tmp_path: Path) -> None:
    scope = gpuscope.MemoryProfiler(tmp_path, model=MLP(), every=1, tensorboard=False)
    err = ValueError("not an OOM")
    with caught_warnings(), pytest.raises(ValueError) as raised, gpuscope.oom_guard(profiler=scope):
        raise err
    scope.close()
    assert raised.value is err
    assert not (tmp_path / "snapshots").exists()
    with caught_warnings(), gpuscope.oom_guard(tmp_path / "clean"):
        pass
    assert profiler_files(tmp_path / "clean") == []


@without_cuda
def test_snapshot_at_on_cpu_warns_once_and_writes_nothing(tmp_path: Path) -> None:
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with caught_warnings() as caught:
        scope = gpuscope.MemoryProfiler(
            tmp_path, model=model, optimizer=opt, every=1, snapshot_at=[2, 4, 6]
        )
        train(scope, model, opt, 8)
        scope.close()
    ours = gpuscope_warnings(caught)
    assert len(ours) == 1 and "CUDA" in str(ours[0].message)
    assert not list(tmp_path.rglob("*.pickle"))
    assert not (tmp_path / "snapshots").exists()
    assert len(read_jsonl(tmp_path / "profiles" / "memory.jsonl")) == 8


# -- the leak demonstration ------------------------------------------------------------

B, D_IN, HIDDEN = 128, 64, 512


def leaked_per_iteration(model: nn.Module, x: torch.Tensor) -> tuple[int, int]:
    """(bytes one kept output holds alive, the output's own bytes), from torch's saved-tensor
    hooks: every storage autograd saves, parameters excluded, plus the output's."""
    param_storages = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        s = t.untyped_storage()
        if s.data_ptr() not in param_storages:
            saved[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(x)
    saved[out.untyped_storage().data_ptr()] = nbytes(out)
    return sum(saved.values()), nbytes(out)


def leak_loop(run_dir: Path, leak: bool, scan: str, iters: int, every: int) -> list[dict]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(D_IN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, D_IN))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    target = torch.randn(B, D_IN)
    kept: list[Any] = []
    scope = gpuscope.MemoryProfiler(run_dir, model=model, optimizer=opt, every=every, scan=scan)
    for it in range(iters):
        loss = (model(torch.randn(B, D_IN)) - target).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        probe = model(torch.randn(B, D_IN))  # an evaluation forward, outside no_grad()
        kept.append(probe if leak else float(probe.mean().item()))
        scope.step(it, losses={"mse": loss})
    scope.close()
    return read_jsonl(run_dir / "profiles" / "memory.jsonl")


def slope(records: list[dict], key: str) -> float:
    its = np.array([r["iteration"] for r in records], dtype=float)
    values = np.array([r["categories_bytes"][key] for r in records], dtype=float)
    return float(np.polyfit(its, values, 1)[0])


def test_leak_shows_as_growing_activations_and_clean_loop_stays_flat(tmp_path: Path) -> None:
    torch.manual_seed(0)
    probe_model = nn.Sequential(nn.Linear(D_IN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, D_IN))
    per_iter, _ = leaked_per_iteration(probe_model, torch.randn(B, D_IN))
    # input + ReLU output + output: 32 KiB + 256 KiB + 32 KiB
    assert per_iter == (B * D_IN + B * HIDDEN + B * D_IN) * 4

    leaky = leak_loop(tmp_path / "leaky", leak=True, scan="fast", iters=40, every=2)
    clean = leak_loop(tmp_path / "clean", leak=False, scan="fast", iters=40, every=2)
    assert len(leaky) == len(clean) == 20
    for records in (leaky, clean):
        assert all(type(r["categories_bytes"]["activations"]) is int for r in records)
        assert all(r["categories_bytes"]["other"] is None for r in records)
        # the exactly known categories do not move
        assert len({r["categories_bytes"]["parameters"] for r in records}) == 1

    leak_slope = slope(leaky[2:], "activations")
    assert 0.9 * per_iter <= leak_slope <= 1.5 * per_iter, (leak_slope, per_iter)
    acts = [r["categories_bytes"]["activations"] for r in leaky]
    assert acts[-1] - acts[1] >= 0.9 * per_iter * (leaky[-1]["iteration"] - leaky[1]["iteration"])

    clean_slope = slope(clean[2:], "activations")
    assert abs(clean_slope) <= 0.05 * per_iter, (clean_slope, per_iter)
    clean_acts = [r["categories_bytes"]["activations"] for r in clean[2:]]
    assert max(clean_acts) - min(clean_acts) <= 2 * per_iter


@pytest.mark.filterwarnings("ignore:.*reduce_op.*:FutureWarning")  # see test_memory_census
def test_gc_scan_shows_the_leak_as_other(tmp_path: Path) -> None:
    # The heap walk sees every tensor of this pytest process: collect what earlier tests
    # left in reference cycles now, not in the middle of the clean loop below.
    gc.collect()
    torch.manual_seed(0)
    probe_model = nn.Sequential(nn.Linear(D_IN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, D_IN))
    per_iter, out_bytes = leaked_per_iteration(probe_model, torch.randn(B, D_IN))
    leaky = leak_loop(tmp_path / "leaky", leak=True, scan="gc", iters=10, every=1)
    clean = leak_loop(tmp_path / "clean", leak=False, scan="gc", iters=10, every=1)
    other = [r["categories_bytes"]["other"] for r in leaky]
    growth = np.diff(other)
    # Each kept output is found by the heap walk (its own bytes), and so are the tensors
    # its graph keeps that were Python objects once (torch preserves their wrappers while
    # the graph holds them): the probe's input and the ReLU output from nn.Sequential.
    assert all(g >= out_bytes for g in growth), growth
    assert list(growth) == [per_iter] * len(growth)
    clean_other = [r["categories_bytes"]["other"] for r in clean]
    assert max(clean_other[1:]) - min(clean_other[1:]) <= out_bytes
