"""Timed sections of ``gpuscope.MemoryProfiler`` (issue #8, "Timed sections"):
``with scope.section("render"):`` and ``@scope.section("render")`` on real CPU training
loops, read back from ``profiles/memory.jsonl`` with ``json`` and from ``tensorboard/`` with
TensorBoard's own ``EventAccumulator``.

The figures are not judged by gpuscope's arithmetic. Every timed call is also clocked by the
test, with the same monotonic clock (``time.perf_counter_ns``), once from just inside the
``with`` block and once from just outside it: the section's own measure of that call lies
between the two. Order statistics and numpy's (linear) percentile are monotone in every
value, so each record's mean, total, max, p50 and p95 must lie between the same statistic
of the inside and of the outside clocks — an exact bracket, no tolerance for a loaded
machine needed. The iteration wall time a share is taken of is bracketed the same way
around each ``scope.step()`` call. Sleeps of known length give the lower bounds and the
ordering between sections; bytes are computed from torch (``numel() * element_size()``,
``optimizer.state``). The CUDA event path runs only where CUDA is available.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gpuscope
import numpy as np
import pytest
import torch
from _helpers import accumulator, f32, gpuscope_cli
from _memory_helpers import (
    MLP,
    nbytes,
    one_thread,
    optimizer_state_bytes,
    params_bytes,
    profiler_files,
    read_jsonl,
)
from torch import nn

STAT_KEYS = {
    "calls",
    "mean_ms",
    "p50_ms",
    "p95_ms",
    "max_ms",
    "total_ms",
    "share_percent",
    "parent",
    "peak_allocated_bytes",
    "net_bytes",
}

# Float slack for values that went through ns -> ms division and JSON (milliseconds).
EPS_MS = 1e-6


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    with one_thread():
        yield


# --------------------------------------------------------------------------- helpers


def jsonl(run_dir: Path) -> list[dict[str, Any]]:
    return read_jsonl(run_dir / "profiles" / "memory.jsonl")


def by_iteration(records: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {int(r["iteration"]): r for r in records}


def intervals(iterations: list[int], every: int) -> dict[int, list[int]]:
    """For each iteration an ``every=N`` schedule records (``iteration % N == 0``), the
    iterations its record covers: those since the previous record, itself included."""
    out: dict[int, list[int]] = {}
    pending: list[int] = []
    for it in iterations:
        pending.append(it)
        if it % every == 0:
            out[it] = pending
            pending = []
    return out


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def brackets(values: list[float]) -> dict[str, float]:
    """The statistics a record gives, computed here from one list of per-call durations."""
    return {
        "mean_ms": sum(values) / len(values),
        "total_ms": sum(values),
        "max_ms": max(values),
        "p50_ms": percentile(values, 50),
        "p95_ms": percentile(values, 95),
    }


@dataclass
class Clock:
    """The test's own clocks around every timed call and every ``scope.step()``."""

    iteration: int = 0
    # path -> [(iteration, inside ms, outside ms)]
    calls: dict[str, list[tuple[int, float, float]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    # iteration -> (ns just before scope.step(it), ns just after it)
    steps: dict[int, tuple[int, int]] = field(default_factory=dict)
    # The inside duration a decorated function measured of its last call.
    last_inside_ms: float = 0.0

    @contextmanager
    def section(self, scope: gpuscope.MemoryProfiler, name: str, path: str) -> Iterator[None]:
        """``with scope.section(name)``, clocked from outside and from inside."""
        t0 = time.perf_counter_ns()
        with scope.section(name):
            t1 = time.perf_counter_ns()
            yield
            t2 = time.perf_counter_ns()
        t3 = time.perf_counter_ns()
        self.add(path, (t2 - t1) / 1e6, (t3 - t0) / 1e6)

    def add(self, path: str, inside_ms: float, outside_ms: float) -> None:
        self.calls[path].append((self.iteration, inside_ms, outside_ms))

    def step(self, scope: gpuscope.MemoryProfiler, iteration: int) -> None:
        before = time.perf_counter_ns()
        scope.step(iteration)
        self.steps[iteration] = (before, time.perf_counter_ns())

    def durations(self, path: str, iterations: list[int]) -> tuple[list[float], list[float]]:
        """(inside, outside) durations of ``path``'s calls in ``iterations``."""
        chosen = [(i, o) for it, i, o in self.calls[path] if it in iterations]
        return [i for i, _ in chosen], [o for _, o in chosen]

    def wall_ms(self, iterations: list[int]) -> tuple[float, float] | None:
        """(lower, upper) bound of the wall time between consecutive ``scope.step()`` calls
        that end in ``iterations``; ``None`` when no step came before the first of them."""
        lower = upper = 0.0
        spans = 0
        for it in iterations:
            if it - 1 not in self.steps:
                continue
            before_prev, after_prev = self.steps[it - 1]
            before, after = self.steps[it]
            lower += (before - after_prev) / 1e6
            upper += (after - before_prev) / 1e6
            spans += 1
        return (lower, upper) if spans else None


def mlp_and_data() -> tuple[MLP, torch.Tensor]:
    torch.manual_seed(0)
    return MLP(16, 32, 4), torch.randn(8, 16)


def section_decorator(
    scope: gpuscope.MemoryProfiler, name: str
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``scope.section(name)`` used as a decorator. The method is annotated as returning an
    ``AbstractContextManager``, which is not callable for a type checker, although the
    decorator form is documented and works; hence the cast through ``Any``."""
    cm: Any = scope.section(name)
    assert callable(cm), f"scope.section({name!r}) cannot be used as a decorator"
    decorator: Callable[[Callable[..., Any]], Callable[..., Any]] = cm
    return decorator


# --------------------------------------------------------------------------- one timed run

ITERS = 16  # iterations 0..15
EVERY = 5  # records at 0, 5, 10, 15
DATA_MS = 5.0  # "data": a sleep of 5 ms per iteration
ATTENTION_MS = 1.0  # "forward/attention" (decorator form): a sleep of 1 ms
# "ladder": sleeps of these lengths in a shuffled order, a whole permutation per record
# interval ((3 * it) % 5 over five consecutive iterations), so that p50 and p95 of each
# interval are known and sorting matters.
LADDER_MS = (1.0, 2.0, 3.0, 4.0, 9.0)
TOP_LEVEL = ("data", "forward", "backward", "optimizer", "ladder")


def ladder_ms(iteration: int) -> float:
    return LADDER_MS[(3 * iteration) % len(LADDER_MS)]


@dataclass
class TimedRun:
    run_dir: Path
    clock: Clock
    records: dict[int, dict[str, Any]]
    grad_bytes: int


@pytest.fixture(scope="module")
def timed(tmp_path_factory: pytest.TempPathFactory) -> TimedRun:
    """A real SGD loop over a small MLP, every part of an iteration a section."""
    run_dir = tmp_path_factory.mktemp("timed") / "run"
    model, x = mlp_and_data()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    clock = Clock()
    with one_thread():
        scope = gpuscope.MemoryProfiler(run_dir, model=model, optimizer=opt, every=EVERY)

        @section_decorator(scope, "attention")
        def attention(h: torch.Tensor) -> torch.Tensor:
            t1 = time.perf_counter_ns()
            time.sleep(ATTENTION_MS / 1e3)
            out = h.softmax(dim=-1)
            clock.last_inside_ms = (time.perf_counter_ns() - t1) / 1e6
            return out

        for it in range(ITERS):
            clock.iteration = it
            with clock.section(scope, "data", "data"):
                time.sleep(DATA_MS / 1e3)
            with clock.section(scope, "forward", "forward"):
                h = model.encoder(x)
                t0 = time.perf_counter_ns()
                h = attention(h)
                outside = (time.perf_counter_ns() - t0) / 1e6
                clock.add("forward/attention", clock.last_inside_ms, outside)
                loss = model.head(h).pow(2).mean()
            with clock.section(scope, "backward", "backward"):
                loss.backward()
            with clock.section(scope, "optimizer", "optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            with clock.section(scope, "ladder", "ladder"):
                time.sleep(ladder_ms(it) / 1e3)
            clock.step(scope, it)
        scope.close()
    return TimedRun(run_dir, clock, by_iteration(jsonl(run_dir)), params_bytes(model))


def test_oracle_intervals() -> None:
    """The schedule oracle, counted by hand: a record covers the iterations since the
    previous one."""
    assert intervals(list(range(16)), 5) == {
        0: [0],
        5: [1, 2, 3, 4, 5],
        10: [6, 7, 8, 9, 10],
        15: [11, 12, 13, 14, 15],
    }
    assert intervals(list(range(1, 8)), 3) == {3: [1, 2, 3], 6: [4, 5, 6]}
    # The ladder gives each five-iteration interval every length once.
    for start in (1, 6, 11):
        assert sorted(ladder_ms(it) for it in range(start, start + 5)) == list(LADDER_MS)


def test_every_record_has_every_section_with_its_calls(timed: TimedRun) -> None:
    """Records fall on the schedule; each has every path with exactly the fields of the
    contract, and ``calls`` equals the number of iterations in the record's interval."""
    expected = intervals(list(range(ITERS)), EVERY)
    assert sorted(timed.records) == sorted(expected)
    paths = {*TOP_LEVEL, "forward/attention"}
    for it, covered in expected.items():
        sections = timed.records[it]["sections"]
        assert set(sections) == paths, it
        for path, s in sections.items():
            assert set(s) == STAT_KEYS, (it, path)
            assert s["calls"] == len(covered), (it, path)
            assert s["calls"] == len(timed.clock.durations(path, covered)[0])


def test_statistics_lie_between_the_tests_own_clocks(timed: TimedRun) -> None:
    """mean, total, max, p50 and p95 of every section of every record lie between the same
    statistic (numpy's linear percentile) of the test's inside and outside clocks of the
    calls in that record's interval. This checks the percentile definition and that calls
    are sorted and kept per interval, without any timing tolerance."""
    for it, covered in intervals(list(range(ITERS)), EVERY).items():
        for path, s in timed.records[it]["sections"].items():
            inside, outside = timed.clock.durations(path, covered)
            low, high = brackets(inside), brackets(outside)
            for key in low:
                assert low[key] - EPS_MS <= s[key] <= high[key] + EPS_MS, (it, path, key)


def test_statistics_are_consistent(timed: TimedRun) -> None:
    """mean * calls == total, and p50 <= p95 <= max, mean <= max, in every record."""
    for it, record in timed.records.items():
        for path, s in record["sections"].items():
            assert s["mean_ms"] * s["calls"] == pytest.approx(s["total_ms"], rel=1e-9), path
            assert 0 <= s["p50_ms"] <= s["p95_ms"] <= s["max_ms"], (it, path)
            assert s["mean_ms"] <= s["max_ms"] + EPS_MS, (it, path)
            if s["calls"] == 1:
                assert s["p50_ms"] == s["p95_ms"] == s["max_ms"] == s["mean_ms"], (it, path)


def test_known_sleeps_bound_the_figures_from_below(timed: TimedRun) -> None:
    """A section that sleeps d ms takes at least d ms per call; the ladder's p50 and p95
    are at least numpy's percentiles of the sleep lengths of the interval (3 ms and 8 ms),
    and its max at least the longest sleep."""
    for it, covered in intervals(list(range(ITERS)), EVERY).items():
        sections = timed.records[it]["sections"]
        data, attention = sections["data"], sections["forward/attention"]
        assert data["mean_ms"] >= DATA_MS and data["p50_ms"] >= DATA_MS
        assert attention["mean_ms"] >= ATTENTION_MS
        assert data["total_ms"] >= DATA_MS * len(covered)
        sleeps = [ladder_ms(i) for i in covered]
        ladder = sections["ladder"]
        assert ladder["p50_ms"] >= percentile(sleeps, 50)
        assert ladder["p95_ms"] >= percentile(sleeps, 95)
        assert ladder["max_ms"] >= max(sleeps)
        assert ladder["mean_ms"] >= sum(sleeps) / len(sleeps)
        if len(covered) == len(LADDER_MS):
            # p95 interpolates between the two longest calls, which here are ~4 and ~9 ms.
            assert ladder["p95_ms"] < ladder["max_ms"]


def test_longer_sleep_longer_section_over_the_run(timed: TimedRun) -> None:
    """The 5 ms section took longer than the 1 ms one: compared over the whole run (16
    calls each), so that a few calls delayed by a loaded machine cannot reverse it."""
    total = {
        path: sum(r["sections"][path]["total_ms"] for r in timed.records.values())
        for path in ("data", "forward/attention")
    }
    assert total["data"] > total["forward/attention"]
    assert total["data"] >= DATA_MS * ITERS


def test_share_is_null_first_then_between_the_clocks(timed: TimedRun) -> None:
    """The first record (iteration 0) has no whole iteration before it: share is null.
    Later ones: the share lies between 100 * (inside total) / (upper bound of the
    iterations' wall time) and 100 * (outside total) / (lower bound of it)."""
    clock = timed.clock
    for it, covered in intervals(list(range(ITERS)), EVERY).items():
        wall = clock.wall_ms(covered)
        for path, s in timed.records[it]["sections"].items():
            if wall is None:
                assert s["share_percent"] is None, (it, path)
                continue
            inside, outside = clock.durations(path, covered)
            lower, upper = wall
            low, high = 100 * sum(inside) / upper, 100 * sum(outside) / lower
            assert low * (1 - 1e-9) <= s["share_percent"] <= high * (1 + 1e-9), (it, path)
    assert all(s["share_percent"] is None for s in timed.records[0]["sections"].values())


def test_top_level_shares_add_up_to_at_most_100(timed: TimedRun) -> None:
    """Top-level sections do not overlap and run between ``scope.step()`` calls, so their
    shares add up to at most 100 %; here they are nearly all of the iteration (sleeps of
    ~10 ms against microseconds of loss and step), so at least 60 %."""
    for it in (5, 10, 15):
        sections = timed.records[it]["sections"]
        total = sum(sections[p]["share_percent"] for p in TOP_LEVEL)
        assert 60.0 <= total <= 100.0 + 1e-9, (it, total)


def test_nesting_parent_paths_and_totals(timed: TimedRun) -> None:
    """A section opened inside ``forward`` by a decorated function is ``forward/attention``
    with parent ``forward``; top-level sections have parent null; the inner section's
    total is at most the outer's, and its share at most the outer's."""
    for it, record in timed.records.items():
        sections = record["sections"]
        for path in TOP_LEVEL:
            assert sections[path]["parent"] is None, (it, path)
        inner, outer = sections["forward/attention"], sections["forward"]
        assert inner["parent"] == "forward"
        assert inner["total_ms"] <= outer["total_ms"]
        assert inner["max_ms"] <= outer["max_ms"]
        if inner["share_percent"] is not None:
            assert inner["share_percent"] <= outer["share_percent"]
        assert "attention" not in sections  # only under its parent


def test_cpu_memory_fields_on_the_recorded_iteration(timed: TimedRun) -> None:
    """On CPU there is no peak (null). net_bytes is the census change on the recorded
    iteration: backward after zero_grad(set_to_none=True) adds exactly the gradients (one
    per parameter: the parameter bytes), the optimizer section (step, then
    zero_grad(set_to_none=True)) gives them back, the rest add nothing to the census."""
    for it, record in timed.records.items():
        sections = record["sections"]
        for path, s in sections.items():
            assert s["peak_allocated_bytes"] is None, (it, path)
        assert sections["backward"]["net_bytes"] == timed.grad_bytes, it
        assert sections["optimizer"]["net_bytes"] == -timed.grad_bytes, it
        for path in ("data", "forward", "forward/attention", "ladder"):
            assert sections[path]["net_bytes"] == 0, (it, path)


def test_tensorboard_time_tags_are_the_jsonl_means(timed: TimedRun) -> None:
    """TensorBoard's own reader finds ``Time/<path>_ms`` for every path (nested ones with
    their slash), one point per record at its iteration, of the JSONL ``mean_ms`` (float32
    in the event file)."""
    acc = accumulator(timed.run_dir / "tensorboard")
    tags = {t for t in acc.Tags()["scalars"] if t.startswith("Time/")}
    assert tags == {f"Time/{p}_ms" for p in (*TOP_LEVEL, "forward/attention")}
    for tag in tags:
        path = tag.removeprefix("Time/").removesuffix("_ms")
        points = acc.Scalars(tag)
        assert [e.step for e in points] == sorted(timed.records), tag
        for e in points:
            expected = timed.records[e.step]["sections"][path]["mean_ms"]
            assert e.value == pytest.approx(f32(expected), rel=1e-6), (tag, e.step)


def test_report_reads_a_run_with_sections(timed: TimedRun) -> None:
    """``gpuscope report <run> --format json`` still reads a run whose records have
    sections: exit status 0 and a JSON document."""
    proc = gpuscope_cli("report", timed.run_dir, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert isinstance(json.loads(proc.stdout), dict)


# --------------------------------------------------------------------------- share


def whole_iteration_loop(run_dir: Path, iterations: range, every: int) -> None:
    """A real SGD loop whose whole body is the section ``iteration``, with a tiny nested
    ``iteration/zero_grad``; the body sleeps 20 ms."""
    model, x = mlp_and_data()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scope = gpuscope.MemoryProfiler(
        run_dir, model=model, optimizer=opt, every=every, tensorboard=False, text_log=False
    )
    for it in iterations:
        with scope.section("iteration"):
            time.sleep(0.020)
            model(x).pow(2).mean().backward()
            opt.step()
            with scope.section("zero_grad"):
                opt.zero_grad(set_to_none=True)
        scope.step(it)
    scope.close()


def test_share_of_a_whole_iteration_and_of_a_small_part(tmp_path: Path) -> None:
    """A section that is the whole iteration takes nearly all of it (>= 80 %, <= 100 %:
    outside it are only the loop and ``scope.step()``, against 20 ms of sleep);
    a zero_grad inside it takes a small part; the first record has null shares."""
    whole_iteration_loop(tmp_path, range(9), every=4)
    records = by_iteration(jsonl(tmp_path))
    assert sorted(records) == [0, 4, 8]
    assert all(s["share_percent"] is None for s in records[0]["sections"].values())
    for it in (4, 8):
        whole = records[it]["sections"]["iteration"]
        small = records[it]["sections"]["iteration/zero_grad"]
        assert whole["calls"] == small["calls"] == 4
        assert 80.0 <= whole["share_percent"] <= 100.0, whole
        assert small["share_percent"] < 10.0, small
        assert small["share_percent"] < whole["share_percent"]


def test_share_never_exceeds_100_when_the_loop_starts_at_one(tmp_path: Path) -> None:
    """Gaussian-splatting training loops count iterations from 1. The first record has
    no share (its interval has no known start: no record before it, docs/run-dir.md); a
    section that is the whole iteration then cannot take more than the whole iteration."""
    whole_iteration_loop(tmp_path, range(1, 11), every=5)
    records = by_iteration(jsonl(tmp_path))
    assert sorted(records) == [5, 10]
    assert records[5]["sections"]["iteration"]["share_percent"] is None
    for it in (5, 10):
        assert records[it]["sections"]["iteration"]["calls"] == 5
    whole = records[10]["sections"]["iteration"]
    assert whole["share_percent"] is not None
    assert 80.0 <= whole["share_percent"] <= 100.0, whole["share_percent"]


# --------------------------------------------------------------------------- naming


def test_same_name_under_different_parents_and_decorator_naming(tmp_path: Path) -> None:
    """The same name opened under two parents and at the top gives three paths; a decorated
    function is named by where it is called, exactly like the ``with`` form; a section
    with no call in an interval is absent from that record."""
    torch.manual_seed(0)
    encoder, decoder = nn.Linear(8, 8), nn.Linear(8, 8)
    norm = nn.LayerNorm(8)
    params = [*encoder.parameters(), *decoder.parameters(), *norm.parameters()]
    opt = torch.optim.SGD(params, lr=0.01)
    scope = gpuscope.MemoryProfiler(tmp_path, optimizer=opt, every=2, tensorboard=False)
    x = torch.randn(4, 8)

    @section_decorator(scope, "norm")
    def normalize(h: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = norm(h)
        return out

    for it in range(5):
        with scope.section("encoder"):
            h = normalize(encoder(x))
        # The with form, the same name under another parent.
        with scope.section("decoder"), scope.section("norm"):
            h = norm(decoder(h))
        if it < 2:
            h = normalize(h)  # top level, in the first interval only
        opt.zero_grad(set_to_none=True)
        h.pow(2).mean().backward()
        opt.step()
        scope.step(it)
    scope.close()
    records = by_iteration(jsonl(tmp_path))
    assert sorted(records) == [0, 2, 4]
    parents = {
        it: {path: s["parent"] for path, s in r["sections"].items()} for it, r in records.items()
    }
    nested = {
        "encoder": None,
        "encoder/norm": "encoder",
        "decoder": None,
        "decoder/norm": "decoder",
    }
    assert parents[0] == {**nested, "norm": None}
    assert parents[2] == {**nested, "norm": None}  # iterations 1, 2: top-level norm at 1
    assert parents[4] == nested  # iterations 3, 4: no top-level norm
    assert records[2]["sections"]["norm"]["calls"] == 1
    assert records[2]["sections"]["encoder/norm"]["calls"] == 2


def test_records_without_sections_have_no_sections_key(tmp_path: Path) -> None:
    """Sections run only in the first iterations; records whose interval timed nothing
    carry no ``sections`` key at all."""
    model, x = mlp_and_data()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=3)
    for it in range(10):
        if it <= 3:
            with scope.section("forward"):
                loss = model(x).pow(2).mean()
        else:
            loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        scope.step(it)
    scope.close()
    records = by_iteration(jsonl(tmp_path))
    assert sorted(records) == [0, 3, 6, 9]
    assert records[0]["sections"]["forward"]["calls"] == 1
    assert records[3]["sections"]["forward"]["calls"] == 3
    assert "sections" not in records[6]
    assert "sections" not in records[9]


# --------------------------------------------------------------------------- memory


def test_net_bytes_gradients_and_adam_state(tmp_path: Path) -> None:
    """On CPU, net_bytes is what a section added to the census of model and optimizer on
    the recorded iteration: on the first Adam step the optimizer section creates the whole
    optimizer state (moments and step counters, read from ``optimizer.state``), later it
    adds nothing; backward after ``zero_grad(set_to_none=True)`` adds the gradients;
    zero_grad frees the previous iteration's gradients; a no-grad evaluation adds nothing;
    a section that ran in the interval but not on the recorded iteration has null."""
    model, x = mlp_and_data()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=3)
    for it in range(7):
        with scope.section("zero_grad"):
            opt.zero_grad(set_to_none=True)
        with scope.section("forward"):
            loss = model(x).pow(2).mean()
        with scope.section("backward"):
            loss.backward()
        with scope.section("step"):
            opt.step()
        if it in (3, 4):
            with scope.section("eval"), torch.no_grad():
                model(x)
        scope.step(it)
    scope.close()
    grads = sum(nbytes(p) for p in model.parameters())
    state = optimizer_state_bytes(opt)
    # Adam: exp_avg and exp_avg_sq like each parameter, and a step counter per parameter.
    assert state >= 2 * params_bytes(model)
    records = by_iteration(jsonl(tmp_path))
    assert sorted(records) == [0, 3, 6]
    net = {it: {p: s["net_bytes"] for p, s in r["sections"].items()} for it, r in records.items()}
    assert net[0] == {"zero_grad": 0, "forward": 0, "backward": grads, "step": state}
    assert net[3] == {"zero_grad": -grads, "forward": 0, "backward": grads, "step": 0, "eval": 0}
    assert net[6] == {"zero_grad": -grads, "forward": 0, "backward": grads, "step": 0, "eval": None}
    assert records[6]["sections"]["eval"]["calls"] == 1  # iteration 4, not recorded
    for r in records.values():
        assert all(s["peak_allocated_bytes"] is None for s in r["sections"].values())


def test_net_bytes_add_up_over_calls_on_the_recorded_iteration(tmp_path: Path) -> None:
    """Two micro-batches per iteration (gradient accumulation): on the recorded iteration
    the ``backward`` section added the gradients — "bytes it added to the census in the
    recorded iteration" — even though its second call added nothing."""
    model, x = mlp_and_data()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=1)
    for it in range(2):
        opt.zero_grad(set_to_none=True)
        for micro in range(2):
            with scope.section("backward"):
                model(x[micro::2]).pow(2).mean().backward()
        opt.step()
        scope.step(it)
    scope.close()
    grads = params_bytes(model)
    for record in jsonl(tmp_path):
        backward = record["sections"]["backward"]
        assert backward["calls"] == 2
        assert backward["net_bytes"] == grads, record["iteration"]


# --------------------------------------------------------------------------- robustness


@pytest.mark.parametrize("how", ["enabled=False", "GPUSCOPE_PROFILE=0"])
def test_disabled_profiler_sections_are_no_ops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A disabled profiler's section works as a context manager (also nested, also
    twice) and as a decorator that passes arguments, returns the function's value and
    lets its exceptions through; nothing is written."""
    kwargs: dict[str, Any] = {}
    if how == "enabled=False":
        kwargs["enabled"] = False
    else:
        monkeypatch.setenv("GPUSCOPE_PROFILE", "0")
    run_dir = tmp_path / "run"
    model, x = mlp_and_data()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scope = gpuscope.MemoryProfiler(run_dir, model=model, optimizer=opt, every=1, **kwargs)
    assert not scope.enabled

    @section_decorator(scope, "forward")
    def forward(inp: torch.Tensor, *, scale: float) -> torch.Tensor:
        out: torch.Tensor = model(inp) * scale
        return out

    class Boom(Exception):
        pass

    @section_decorator(scope, "fails")
    def fails() -> None:
        raise Boom("inside a disabled section")

    reused: AbstractContextManager[None] = scope.section("reused")
    for it in range(3):
        with scope.section("outer"), scope.section("inner"):
            out = forward(x, scale=2.0)
        assert torch.equal(out, model(x) * 2.0)
        with reused:
            out.pow(2).mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        with pytest.raises(Boom, match="inside a disabled section"):
            fails()
        scope.step(it)
    assert scope.record(3) is None
    scope.close()
    assert profiler_files(run_dir) == []


def test_exception_in_a_section_propagates_and_the_stack_recovers(tmp_path: Path) -> None:
    """An exception raised inside a nested section (with and decorator form, on a recorded
    iteration that measures memory) reaches the caller as the very same object; sections
    opened afterwards are top level again, in this record and in the next."""
    model, x = mlp_and_data()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=1)
    error = ValueError("diverged")

    @section_decorator(scope, "decorated")
    def decorated() -> None:
        raise error

    for it in range(2):
        with pytest.raises(ValueError) as caught, scope.section("outer"), scope.section("failing"):
            raise error
        assert caught.value is error
        with pytest.raises(ValueError) as caught:
            decorated()
        assert caught.value is error
        with scope.section("train"):
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        scope.step(it)
    with scope.section("after"):
        pass
    scope.step(2)
    scope.close()
    records = by_iteration(jsonl(tmp_path))
    for it in (0, 1):
        parents = {p: s["parent"] for p, s in records[it]["sections"].items()}
        assert parents == {
            "outer": None,
            "outer/failing": "outer",
            "decorated": None,
            "train": None,
        }, it
    assert {p: s["parent"] for p, s in records[2]["sections"].items()} == {"after": None}


def test_sections_in_another_thread_do_not_nest_into_this_one(tmp_path: Path) -> None:
    """A section opened by a background thread (say an asynchronous checkpoint save) while
    the main thread is inside ``train`` is not inside ``train``, and after ``train`` is
    closed the main thread's next section is top level."""
    scope = gpuscope.MemoryProfiler(tmp_path, every=1, tensorboard=False, text_log=False)
    entered, release = threading.Event(), threading.Event()

    def save() -> None:
        with scope.section("save"):
            entered.set()
            release.wait(timeout=10)

    worker = threading.Thread(target=save)
    with scope.section("train"):
        worker.start()
        assert entered.wait(timeout=10)
    with scope.section("forward"):
        pass
    release.set()
    worker.join(timeout=10)
    scope.step(0)
    scope.close()
    parents = {p: s["parent"] for p, s in jsonl(tmp_path)[0]["sections"].items()}
    assert parents == {"train": None, "save": None, "forward": None}


# --------------------------------------------------------------------------- CUDA


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available here")
def test_cuda_event_timing_and_memory(tmp_path: Path) -> None:
    """On CUDA, sections are timed with CUDA events (resolved at record time) and on the
    recorded iteration report the peak allocated inside them and what they left allocated:
    a section that allocates and keeps a 4 MiB tensor has net_bytes of exactly 4 MiB (a
    multiple of the allocator's 512-byte rounding) and a peak of at least that."""
    torch.manual_seed(0)
    model = nn.Linear(256, 256).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 256, device="cuda")
    kept: list[torch.Tensor] = []
    scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=3)
    for it in range(7):
        with scope.section("matmul"):
            for _ in range(20):
                y = x @ x.T
        with scope.section("keep"):
            kept.append(torch.ones(1 << 20, device="cuda"))  # 4 MiB of float32
        with scope.section("train"):
            model(x).pow(2).mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        scope.step(it)
    scope.close()
    del y
    records = by_iteration(jsonl(tmp_path))
    assert sorted(records) == [0, 3, 6]
    for it, covered in intervals(list(range(7)), 3).items():
        sections = records[it]["sections"]
        assert set(sections) == {"matmul", "keep", "train"}
        for path, s in sections.items():
            assert s["calls"] == len(covered), (it, path)
            assert s["mean_ms"] >= 0, (it, path)
            assert 0 <= s["p50_ms"] <= s["p95_ms"] <= s["max_ms"], (it, path)
            assert s["mean_ms"] * s["calls"] == pytest.approx(s["total_ms"], rel=1e-9)
            assert isinstance(s["peak_allocated_bytes"], int), (it, path)
            assert isinstance(s["net_bytes"], int), (it, path)
        keep = sections["keep"]
        assert keep["net_bytes"] == 4 << 20
        assert sections["matmul"]["mean_ms"] > 0  # 20 matrix products per call
        assert keep["peak_allocated_bytes"] >= 4 << 20
        if it > 0:  # later calls replace the y the previous one left
            assert sections["matmul"]["net_bytes"] == 0
    assert all(s["share_percent"] is None for s in records[0]["sections"].values())
    assert all(s["share_percent"] is not None for s in records[3]["sections"].values())


def test_report_names_the_section_that_grew(tmp_path: Path) -> None:
    """`gpuscope report` puts the section whose time per call rose over the run first,
    with its early and late means; a steady one has a growth near 0. The growth and the
    means are computed here from the JSONL records, as the report defines them (calls and
    total ms summed over the first and the last third of the records after the first)."""
    torch.manual_seed(0)
    model = nn.Linear(8, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=3)
    with scope:
        for it in range(18):
            with scope.section("slowing"):
                time.sleep((1 + it // 6 * 3) / 1e3)  # 1 ms, then 4 ms, then 7 ms
            with scope.section("steady"):
                time.sleep(1 / 1e3)
            opt.zero_grad()
            model(torch.randn(2, 8)).sum().backward()
            opt.step()
            scope.step(it)
    records = [r for r in jsonl(tmp_path) if "sections" in r]
    # The README's rule: with four or more records, the first one is warm-up.
    assert len(records) >= 4
    records = records[1:]
    third = len(records) // 3

    def per_call(rs: list[dict[str, Any]], path: str) -> float:
        calls = sum(r["sections"][path]["calls"] for r in rs)
        return sum(r["sections"][path]["total_ms"] for r in rs) / calls

    out = gpuscope_cli("report", tmp_path, "--format", "json")
    assert out.returncode == 0, out.stderr
    trends = json.loads(out.stdout)["runs"][0]["sections"]
    assert [t["path"] for t in trends] == ["slowing", "steady"]
    slowing = trends[0]
    early, late = per_call(records[:third], "slowing"), per_call(records[-third:], "slowing")
    assert slowing["early_mean_ms"] == pytest.approx(early)
    assert slowing["late_mean_ms"] == pytest.approx(late)
    assert slowing["growth_percent"] == pytest.approx((late / early - 1) * 100)
    assert slowing["growth_percent"] > 100
    assert trends[1]["growth_percent"] < slowing["growth_percent"]
    text = gpuscope_cli("report", tmp_path)
    assert text.returncode == 0, text.stderr
    assert "Timed sections" in text.stdout
    assert "slowing grew the most" in text.stdout
