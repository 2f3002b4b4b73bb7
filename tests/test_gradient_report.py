"""Gradient flow over a whole run: the opt-in update/weight ratio recorded by
``MemoryProfiler(update_ratio=True)``, and what ``gpuscope report`` makes of the recorded
norms (early/late medians, vanishing/exploding/non-finite verdicts, clipping share) in
JSON, text and HTML.

Every expected figure is the test's own: the update/weight ratios from float64 copies of
the weights taken by the test before ``optimizer.step()`` and ``torch.linalg.vector_norm``;
the clipping share from the test's own global norm at every iteration; the early/late
medians and verdicts from the records' per-module norms (the report's input) with the
documented rule (median of the first and last third; ×100 either way; any non-finite
norm in the last third). The loops are real CPU training loops; what makes a norm vanish
is an auxiliary loss annealed away (its weight ×0.7 per iteration), what makes one explode
is a learning rate too high for its parameter group (plain SGD diverging), what makes one
NaN is a batch of zeros under ``sqrt(|.|)``.
"""

from __future__ import annotations

import json
import math
import shutil
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gpuscope
import pytest
import torch
from _chromium import (
    PageParser,
    assert_not_blank,
    assert_self_contained,
    dump_dom,
    screenshot,
)
from _helpers import SHARED_DATA, accumulator, f32, gpuscope_cli, shared_file
from torch import nn

# The report's thresholds, as documented: ×100 either way.
TREND_FACTOR = 100.0
SECTIONS_CHART = "Timed sections (ms per call)"
NORMS_CHART = "Gradient norms (global and per module)"

# -- helpers -------------------------------------------------------------------------------


def records(run_dir: Path) -> list[dict[str, Any]]:
    """The run's JSONL records, in order."""
    lines = (run_dir / "profiles" / "memory.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def gradient_records(run_dir: Path) -> list[dict[str, Any]]:
    return [r["gradients"] for r in records(run_dir) if "gradients" in r]


def report_json(*paths: Path) -> dict[str, Any]:
    out = gpuscope_cli("report", *paths, "--format", "json")
    assert out.returncode == 0, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def report_text(path: Path) -> str:
    out = gpuscope_cli("report", path)
    assert out.returncode == 0, out.stderr
    return out.stdout


def flat_norm(tensors: list[torch.Tensor]) -> float:
    """L2 norm of the tensors taken together, in float64."""
    return float(
        torch.linalg.vector_norm(torch.cat([t.detach().double().flatten() for t in tensors]))
    )


def top_module(name: str) -> str:
    """The depth-1 module of a parameter name (``enc.0.weight`` -> ``enc``)."""
    parts = name.split(".")[:-1]
    return parts[0] if parts else "(root)"


def weights_copy(model: nn.Module) -> dict[str, torch.Tensor]:
    """Float64 copies of every trainable parameter (exact for float32 weights)."""
    return {n: p.detach().double().clone() for n, p in model.named_parameters() if p.requires_grad}


def update_ratios(
    model: nn.Module, before: dict[str, torch.Tensor]
) -> tuple[float, dict[str, float]]:
    """‖w_after − w_before‖ / ‖w_before‖ over all parameters and per depth-1 module."""
    after = {n: p.detach().double() for n, p in model.named_parameters() if n in before}
    names = list(before)

    def ratio(subset: list[str]) -> float:
        moved = flat_norm([after[n] - before[n] for n in subset])
        return moved / flat_norm([before[n] for n in subset])

    modules: dict[str, list[str]] = {}
    for n in names:
        modules.setdefault(top_module(n), []).append(n)
    return ratio(names), {m: ratio(ns) for m, ns in modules.items()}


def expected_trend(values: list[float | None]) -> dict[str, Any]:
    """The documented reading of one norm over the records that carry it: early / late
    = median of the finite values of the first / last third (at least one record),
    change = late / early, verdict non_finite if any value of the last third is not
    finite, else vanishing at ≤ 1/100, exploding at ≥ 100 (with three records or more)."""
    xs = [math.nan if v is None else v for v in values]
    third = max(len(xs) // 3, 1)
    first, last = xs[:third], xs[len(xs) - third :]
    finite_first = [v for v in first if math.isfinite(v)]
    finite_last = [v for v in last if math.isfinite(v)]
    early = statistics.median(finite_first) if finite_first else None
    late = statistics.median(finite_last) if finite_last else None
    change = late / early if early is not None and late is not None and early > 0 else None
    if any(not math.isfinite(v) for v in last):
        verdict = "non_finite"
    elif change is not None and len(xs) >= 3 and change >= TREND_FACTOR:
        verdict = "exploding"
    elif change is not None and len(xs) >= 3 and change <= 1 / TREND_FACTOR:
        verdict = "vanishing"
    else:
        verdict = "steady"
    return {"early": early, "late": late, "change": change, "verdict": verdict}


def assert_trend(got: dict[str, Any], want: dict[str, Any]) -> None:
    for key in ("early", "late", "change"):
        if want[key] is None:
            assert got[key] is None, (got["name"], key, got[key])
        else:
            assert got[key] == pytest.approx(want[key], rel=1e-9), (got["name"], key)
    assert got["verdict"] == want["verdict"], got


def gradient_table_rows(text: str) -> dict[str, str]:
    """The rows of the text report's "Gradient flow" table, by their first cell."""
    lines = text.splitlines()
    (start,) = [i for i, line in enumerate(lines) if line.startswith("Gradient flow (")]
    rows: dict[str, str] = {}
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        cells = line.split()
        if cells and not set(cells[0]) <= {"─"}:
            rows[cells[0]] = line
    return rows


# -- 1. the update/weight ratio ------------------------------------------------------------


class ThreePart(nn.Module):
    """Three depth-1 modules: a two-layer encoder, a middle layer and a head."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16))
        self.mid = nn.Linear(16, 16)
        self.head = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(torch.relu(self.mid(self.enc(x))))
        return out


OPTIMIZERS: dict[str, Callable[[nn.Module], torch.optim.Optimizer]] = {
    "sgd": lambda m: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-3),
    "adam": lambda m: torch.optim.Adam(m.parameters(), lr=1e-2),
}
RATIO_EVERY = 3
RATIO_ITERATIONS = 10  # records at 0, 3, 6, 9


def train_three_part(
    run_dir: Path, optimizer: str, update_ratio: bool
) -> dict[int, tuple[float, dict[str, float]]]:
    """Trains ThreePart; returns, per recorded iteration, the test's own ratios."""
    torch.manual_seed(0)
    model = ThreePart()
    opt = OPTIMIZERS[optimizer](model)
    x, y = torch.randn(32, 6), torch.randn(32, 1)
    expected: dict[int, tuple[float, dict[str, float]]] = {}
    scope = gpuscope.MemoryProfiler(
        run_dir, model=model, optimizer=opt, every=RATIO_EVERY, update_ratio=update_ratio
    )
    with scope:
        for it in range(RATIO_ITERATIONS):
            opt.zero_grad(set_to_none=True)
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            scope.record_gradients(it)
            before = weights_copy(model) if it % RATIO_EVERY == 0 else None
            opt.step()
            if before is not None:
                expected[it] = update_ratios(model, before)
            scope.step(it, loss=loss)
    return expected


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_update_ratio_matches_the_tests_own_weight_copies(tmp_path: Path, optimizer: str) -> None:
    """On every recorded iteration the record holds ‖Δw‖/‖w‖ globally and per depth-1
    module; TensorBoard has the same figures under Grad/update_ratio and
    Grad/module/<m>_update_ratio; the report's trends carry the last ones."""
    expected = train_three_part(tmp_path, optimizer, update_ratio=True)
    assert sorted(expected) == [0, 3, 6, 9]
    got = {g["iteration"]: g for g in gradient_records(tmp_path)}
    assert sorted(got) == sorted(expected)
    for it, (want_global, want_modules) in expected.items():
        assert 0 < want_global < 1  # the steps really moved the weights
        assert got[it]["update_ratio"] == pytest.approx(want_global, rel=1e-5), it
        assert set(got[it]["module_update_ratios"]) == {"enc", "mid", "head"}
        assert got[it]["module_update_ratios"] == pytest.approx(want_modules, rel=1e-5), it

    acc = accumulator(tmp_path / "tensorboard")
    scalars = set(acc.Tags()["scalars"])
    tags = {"Grad/update_ratio": None} | {
        f"Grad/module/{m}_update_ratio": m for m in expected[0][1]
    }
    assert set(tags) <= scalars, sorted(scalars)
    for tag, module in tags.items():
        events = acc.Scalars(tag)
        assert [e.step for e in events] == sorted(expected), tag
        for e in events:
            want_global, want_modules = expected[e.step]
            want = want_global if module is None else want_modules[module]
            assert e.value == pytest.approx(f32(want), rel=1e-5), (tag, e.step)

    flow = report_json(tmp_path)["runs"][0]["gradients"]
    last_global, last_modules = expected[max(expected)]
    assert flow["global"]["update_ratio"] == pytest.approx(last_global, rel=1e-5)
    by_name = {t["name"]: t for t in flow["modules"]}
    assert set(by_name) == set(last_modules)
    for m, want in last_modules.items():
        assert by_name[m]["update_ratio"] == pytest.approx(want, rel=1e-5), m
    assert "update/weight" in gradient_table_rows(report_text(tmp_path))["norm"]


def test_without_update_ratio_nothing_about_it_is_recorded(tmp_path: Path) -> None:
    train_three_part(tmp_path, "sgd", update_ratio=False)
    grads = gradient_records(tmp_path)
    assert len(grads) == 4
    for g in grads:
        assert "update_ratio" not in g and "module_update_ratios" not in g, g
        assert set(g["module_norms"]) == {"enc", "mid", "head"}
    scalars = accumulator(tmp_path / "tensorboard").Tags()["scalars"]
    assert "Grad/global_norm" in scalars
    assert [t for t in scalars if "update_ratio" in t] == []
    flow = report_json(tmp_path)["runs"][0]["gradients"]
    assert flow["global"]["update_ratio"] is None
    assert [t["update_ratio"] for t in flow["modules"]] == [None, None, None]
    header = gradient_table_rows(report_text(tmp_path))["norm"]
    assert "update/weight" not in header


# -- 2. vanishing, exploding and non-finite norms ------------------------------------------

TREND_ITERATIONS = 30


def train_fading_and_diverging(run_dir: Path) -> None:
    """Three independent branches on one batch: "alpha" fits its target at a sane rate
    (steady), "fade" is an auxiliary loss whose weight is annealed ×0.7 per iteration (its
    gradients vanish), "grow" has a learning rate of 6 in its own parameter group, beyond
    the stability bound of its quadratic loss, so SGD diverges (its gradients explode)."""
    torch.manual_seed(0)
    model = nn.ModuleDict(
        {"alpha": nn.Linear(8, 8), "fade": nn.Linear(8, 8), "grow": nn.Linear(8, 8)}
    )
    groups: list[dict[str, Any]] = [
        {"params": model["alpha"].parameters()},
        {"params": model["fade"].parameters()},
        {"params": model["grow"].parameters(), "lr": 6.0},
    ]
    opt = torch.optim.SGD(groups, lr=0.01)
    x, y = torch.randn(32, 8), torch.randn(32, 8)
    with gpuscope.MemoryProfiler(run_dir, model=model, optimizer=opt, every=1) as scope:
        for it in range(TREND_ITERATIONS):
            opt.zero_grad(set_to_none=True)
            parts = {
                "alpha": (model["alpha"](x) - y).pow(2).mean(),
                "fade": 0.7**it * (model["fade"](x) - y).pow(2).mean(),
                "grow": (model["grow"](x) - y).pow(2).mean(),
            }
            sum(parts.values(), torch.zeros(())).backward()
            scope.record_gradients(it)
            opt.step()
            scope.step(it, losses=parts)


def test_vanishing_and_exploding_modules_get_their_verdicts(tmp_path: Path) -> None:
    train_fading_and_diverging(tmp_path)
    grads = gradient_records(tmp_path)
    assert [g["iteration"] for g in grads] == list(range(TREND_ITERATIONS))
    want = {
        m: expected_trend([g["module_norms"][m] for g in grads]) for m in ("alpha", "fade", "grow")
    }
    want_global = expected_trend([g["global_norm"] for g in grads])
    # The loop does what it is meant to, with a wide margin on the thresholds.
    assert want["alpha"]["verdict"] == "steady"
    assert 0.5 < want["alpha"]["change"] < 2
    assert want["fade"]["change"] < 0.1 / TREND_FACTOR
    assert want["grow"]["change"] > 10 * TREND_FACTOR
    assert want_global["verdict"] == "exploding"

    flow = report_json(tmp_path)["runs"][0]["gradients"]
    assert flow["measurements"] == TREND_ITERATIONS
    assert flow["global"]["name"] == "global"
    assert_trend(flow["global"], want_global)
    # Those that are not steady first (by name), then the steady ones.
    assert [t["name"] for t in flow["modules"]] == ["fade", "grow", "alpha"]
    for t in flow["modules"]:
        assert_trend(t, want[t["name"]])
        assert t["update_ratio"] is None
    assert flow["clipped_percent"] is None and flow["mean_clip_factor"] is None

    rows = gradient_table_rows(report_text(tmp_path))
    assert "VANISHING" in rows["fade"]
    assert "EXPLODING" in rows["grow"]
    assert "EXPLODING" in rows["global"]
    assert "steady" in rows["alpha"]
    assert "VANISHING" not in rows["alpha"] and "EXPLODING" not in rows["alpha"]


def test_a_nan_norm_in_the_last_third_is_non_finite(tmp_path: Path) -> None:
    """A batch of zeros under ``sqrt(|W x|)`` (no bias) makes NaN gradients in "sqrt" at
    one iteration of the last third; the loop skips that step, as AMP's scaler would. The
    NaN norm is null in the record, and only that module and the global norm are called
    non-finite; their late medians are over the finite values."""
    torch.manual_seed(0)
    model = nn.ModuleDict({"sqrt": nn.Linear(4, 4, bias=False), "plain": nn.Linear(4, 4)})
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    iterations, bad = 9, 7
    with gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=1) as scope:
        for it in range(iterations):
            opt.zero_grad(set_to_none=True)
            x = torch.zeros(8, 4) if it == bad else torch.randn(8, 4)
            loss = torch.sqrt(model["sqrt"](x).abs()).mean() + model["plain"](x).pow(2).mean()
            loss.backward()
            scope.record_gradients(it)
            finite = all(
                bool(torch.isfinite(p.grad).all()) for p in model.parameters() if p.grad is not None
            )
            assert finite == (it != bad)
            if finite:
                opt.step()
            scope.step(it)
    grads = gradient_records(tmp_path)
    assert grads[bad]["global_norm"] is None and grads[bad]["module_norms"]["sqrt"] is None
    want = {m: expected_trend([g["module_norms"][m] for g in grads]) for m in ("sqrt", "plain")}
    assert want["sqrt"]["verdict"] == "non_finite" and want["plain"]["verdict"] == "steady"
    flow = report_json(tmp_path)["runs"][0]["gradients"]
    assert_trend(flow["global"], expected_trend([g["global_norm"] for g in grads]))
    assert flow["global"]["verdict"] == "non_finite"
    assert [t["name"] for t in flow["modules"]] == ["sqrt", "plain"]
    for t in flow["modules"]:
        assert_trend(t, want[t["name"]])
    rows = gradient_table_rows(report_text(tmp_path))
    assert "NaN/Inf" in rows["sqrt"] and "NaN/Inf" in rows["global"]


# -- 3. clipping ---------------------------------------------------------------------------

CLIP_EVERY = 5
MAX_NORM = 5.0


def train_clipped(
    run_dir: Path, iterations: int, poisoned: frozenset[int] = frozenset()
) -> list[float]:
    """A small regression with fresh batches, gradients clipped at MAX_NORM; the test's
    own float64 global norm (before clipping) of every iteration. The ``poisoned``
    iterations get a NaN batch and skip clipping and the step, as a loop that skips
    non-finite steps does."""
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    w = torch.randn(8, 1)
    norms: list[float] = []
    with gpuscope.MemoryProfiler(run_dir, model=model, optimizer=opt, every=CLIP_EVERY) as scope:
        for it in range(iterations):
            x = torch.randn(16, 8) * (1 + it % 3)
            if it in poisoned:
                x = x * math.nan
            opt.zero_grad(set_to_none=True)
            (model(x) - x @ w).pow(2).mean().backward()
            scope.record_gradients(it, clip_max_norm=MAX_NORM)
            norms.append(flat_norm([p.grad for p in model.parameters() if p.grad is not None]))
            if it not in poisoned:
                torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
                opt.step()
            scope.step(it)
    # No norm so close to the threshold that float32 and float64 could disagree.
    assert all(abs(n / MAX_NORM - 1) > 1e-4 for n in norms if math.isfinite(n))
    return norms


def expected_clipping(norms: list[float]) -> tuple[float, float]:
    """The share of the iterations with a finite norm that clipping scaled down (a NaN
    norm neither clips nor passes), and their mean factor."""
    finite = [n for n in norms if math.isfinite(n)]
    clipped = [MAX_NORM / n for n in finite if n > MAX_NORM]
    assert 0 < len(clipped) < len(finite), "the loop should clip some iterations, not all"
    return len(clipped) * 100 / len(finite), sum(clipped) / len(clipped)


def test_clipped_percent_is_the_share_of_iterations_the_test_counts(tmp_path: Path) -> None:
    """The run ends on a recorded iteration, so every iteration is in some record."""
    iterations = 5 * CLIP_EVERY + 1  # 0..25, the last one recorded
    norms = train_clipped(tmp_path, iterations)
    percent, factor = expected_clipping(norms)
    flow = report_json(tmp_path)["runs"][0]["gradients"]
    assert flow["measurements"] == 6
    assert flow["clipped_percent"] == pytest.approx(percent, rel=1e-9)
    assert flow["mean_clip_factor"] == pytest.approx(factor, rel=1e-5)
    text = report_text(tmp_path)
    assert f"clipping bit on {percent:.1f}% of the iterations" in " ".join(text.split())


def test_clipped_percent_leaves_out_iterations_with_a_nan_norm(tmp_path: Path) -> None:
    """NaN gradients between records (counted on the device) and at a recorded
    iteration (read at once): neither counts as clipped or as passing."""
    iterations = 5 * CLIP_EVERY + 1
    poisoned = frozenset({6, 7, 10, 18})
    norms = train_clipped(tmp_path, iterations, poisoned)
    assert [k for k, n in enumerate(norms) if not math.isfinite(n)] == sorted(poisoned)
    percent, factor = expected_clipping(norms)
    flow = report_json(tmp_path)["runs"][0]["gradients"]
    assert flow["clipped_percent"] == pytest.approx(percent, rel=1e-9)
    assert flow["mean_clip_factor"] == pytest.approx(factor, rel=1e-5)
    records = [json.loads(line) for line in (tmp_path / "profiles" / "memory.jsonl").open()]
    finite = [r["gradients"]["finite"] for r in records if "gradients" in r]
    assert finite == [1, 5, 2, 5, 4, 5]  # iterations 0, 1-5, 6-10, 11-15, 16-20, 21-25


def test_an_infinite_norm_neither_clips_nor_passes(tmp_path: Path) -> None:
    """Gradients set to infinity between records (counted on the device) and at a recorded
    iteration (read at once), as an fp16 overflow leaves them: not clipped, not checked.
    Every other iteration's norm is far above the threshold, so all of them clip."""
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    infinite = {2, 5}
    with gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=5) as scope:
        for it in range(6):
            for p in model.parameters():
                p.grad = torch.full_like(p, math.inf if it in infinite else 10.0)
            scope.record_gradients(it, clip_max_norm=1.0)
            scope.step(it)
    records = [json.loads(line) for line in (tmp_path / "profiles" / "memory.jsonl").open()]
    counts = [
        (g["measured"], g["finite"], g["clipped"]) for r in records if (g := r.get("gradients"))
    ]
    assert counts == [(1, 1, 1), (5, 3, 3)]  # iterations 0, then 1-5 without 2 and 5
    flow = report_json(tmp_path)["runs"][0]["gradients"]
    assert flow["clipped_percent"] == 100.0


def test_the_h200_nan_run_names_its_first_nan_record_and_clips_on_finite_norms() -> None:
    """A real H200 run whose loss went NaN at iteration 70, recorded before records said
    how many iterations had a finite norm: the records whose own norm is null are left
    out of the clipping share (the documented rule for such runs), and the finding
    names how many records were NaN and the first one, read here from the records."""
    run = shared_file(SHARED_DATA / "gpu-h200" / "lm_leak_nan")
    records = [json.loads(line) for line in (run / "profiles" / "memory.jsonl").open()]
    grads = [r["gradients"] for r in records if "gradients" in r]
    assert not any("finite" in g for g in grads)
    nan = [g["iteration"] for g in grads if g["global_norm"] is None]
    kept = [g for g in grads if g["global_norm"] is not None]
    percent = sum(g["clipped"] for g in kept) * 100 / sum(g["measured"] for g in kept)
    doc = report_json(run)
    flow = doc["runs"][0]["gradients"]
    assert flow["clipped_percent"] == pytest.approx(percent, rel=1e-12)
    assert (flow["nonfinite_records"], flow["first_nonfinite"]) == (len(nan), nan[0])
    assert flow["global"]["verdict"] == "non_finite"
    finding = next(f for f in doc["diagnoses"][0]["findings"] if f["kind"] == "gradient_flow")
    said = f"in {len(nan)} of {len(grads)} records, the first at iteration {nan[0]}"
    assert said in finding["summary"]


def test_clipped_percent_covers_the_iterations_up_to_the_last_record(tmp_path: Path) -> None:
    """Counts travel with records (as sections do): the iterations after the last record
    are not in the report — the documented behaviour, pinned here."""
    iterations = 5 * CLIP_EVERY + 4  # 0..28: the last record is at 25
    norms = train_clipped(tmp_path, iterations)
    percent, _ = expected_clipping(norms[: 5 * CLIP_EVERY + 1])
    flow = report_json(tmp_path)["runs"][0]["gradients"]
    assert flow["clipped_percent"] == pytest.approx(percent, rel=1e-9)


# -- 4. the HTML report --------------------------------------------------------------------

HOSTILE_MODULE = "a<b>"
HOSTILE_SECTION = "<script>"
HTML_SECTIONS = ["data", "forward", "backward", HOSTILE_SECTION]


class Chain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Linear(8, 16)
        self.add_module(HOSTILE_MODULE, nn.Linear(16, 16))
        self.head = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = torch.tanh(getattr(self, HOSTILE_MODULE)(torch.relu(self.enc(x))))
        out: torch.Tensor = self.head(hidden)
        return out


def train_sectioned(run_dir: Path) -> list[str]:
    """Sections around every part of the step, gradients recorded; the module names."""
    torch.manual_seed(0)
    model = Chain()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with gpuscope.MemoryProfiler(
        run_dir, model=model, optimizer=opt, every=2, update_ratio=True
    ) as scope:
        for it in range(12):
            with scope.section("data"):
                x = torch.randn(64, 8)
            with scope.section("forward"):
                loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
            with scope.section("backward"):
                opt.zero_grad(set_to_none=True)
                loss.backward()
            scope.record_gradients(it, clip_max_norm=1.0)
            with scope.section(HOSTILE_SECTION):
                opt.step()
            scope.step(it, loss=loss)
    return sorted({top_module(n) for n, _ in model.named_parameters()})


class HealthPage(PageParser):
    """Per chart (by its h3): the full names in its legend and its series; per table (by
    the h3 before it): its rows of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.h3s: list[str] = []
        self.legends: dict[str, list[str]] = {}
        self.series: dict[str, list[str]] = {}
        self.tables: dict[str, list[list[str]]] = {}
        self._h3 = ""
        self._chart: str | None = None
        self._in_legend = False
        self._table: list[list[str]] | None = None

    def start(self, tag: str, a: dict[str, str], classes: list[str]) -> None:
        if tag == "h3":
            self.capture(tag)
        elif tag == "svg" and "chart" in classes:
            self._chart = self._h3
            self.legends[self._h3] = []
            self.series[self._h3] = []
        elif tag == "path" and "series" in classes and self._chart is not None:
            self.series[self._chart].append(a.get("data-series", ""))
        elif tag == "text" and "legend" in classes:
            self._in_legend = True
        elif tag == "title" and self._in_legend:
            self.capture(tag)
        elif tag == "table":
            self._table = self.tables.setdefault(self._h3, [])
        elif tag == "tr" and self._table is not None:
            self._table.append([])
        elif tag in ("td", "th") and self._table is not None:
            self.capture(tag)

    def captured(self, tag: str, text: str) -> None:
        if tag == "h3":
            self._h3 = text
            self.h3s.append(text)
        elif tag == "title" and self._chart is not None:
            self.legends[self._chart].append(text)
        elif tag in ("td", "th") and self._table:
            self._table[-1].append(text.strip())

    def end(self, tag: str) -> None:
        if tag == "svg":
            self._chart = None
        elif tag == "text":
            self._in_legend = False
        elif tag == "table":
            self._table = None


def check_health_page(page: HealthPage, modules: list[str], flow: dict[str, Any]) -> None:
    assert page.legends[SECTIONS_CHART] == page.series[SECTIONS_CHART]
    assert sorted(page.legends[SECTIONS_CHART]) == sorted(HTML_SECTIONS)
    norm_legend = page.legends[NORMS_CHART]
    assert norm_legend == page.series[NORMS_CHART]
    assert len(norm_legend) == 1 + len(modules), norm_legend
    assert "global" in norm_legend
    for m in modules:  # exactly one legend entry names each module
        assert len([n for n in norm_legend if n == m or n.endswith("/" + m)]) == 1, (m, norm_legend)

    (sections_title,) = [t for t in page.tables if t.startswith("Timed sections")]
    section_cells = {row[0].strip("\xa0 ") for row in page.tables[sections_title] if row}
    assert set(HTML_SECTIONS) <= section_cells, section_cells
    (flow_title,) = [t for t in page.tables if t.startswith("Gradient flow")]
    assert f"({flow['measurements']} measurements" in flow_title
    rows = {row[0]: row for row in page.tables[flow_title] if row}
    assert {"global", *modules} <= set(rows), rows
    words = {"steady": "steady", "vanishing": "vanishing", "exploding": "exploding"}
    for t in [flow["global"], *flow["modules"]]:
        assert rows[t["name"]][4] == words.get(t["verdict"], "nan/inf"), rows[t["name"]]


def test_html_report_charts_and_tables_of_sections_and_gradients(
    tmp_path: Path, chromium: str
) -> None:
    run_dir = tmp_path / "run"
    modules = train_sectioned(run_dir)
    assert modules == sorted(["enc", HOSTILE_MODULE, "head"])
    flow = report_json(run_dir)["runs"][0]["gradients"]
    html_file = tmp_path / "report.html"
    out = gpuscope_cli("report", run_dir, "--format", "html", "-o", html_file)
    assert out.returncode == 0, out.stderr
    source = html_file.read_text(encoding="utf-8")

    page = HealthPage.parse(source)
    assert_self_contained(source, page.elements, page.styles)
    assert SECTIONS_CHART in page.h3s and NORMS_CHART in page.h3s
    check_health_page(page, modules, flow)
    # The hostile names are text, escaped wherever they appear (check_health_page found
    # them as the text of legends and table cells).
    assert HOSTILE_MODULE not in source and HOSTILE_SECTION not in source
    assert "a&lt;b&gt;" in source and "&lt;script&gt;" in source

    # The same after Chromium has rendered it.
    dom = dump_dom(chromium, html_file)
    rendered = HealthPage.parse(dom)
    assert "script" not in [tag for tag, _ in rendered.elements]
    check_health_page(rendered, modules, flow)
    assert_not_blank(screenshot(chromium, html_file, (1000, 1400)))


# -- 5. the JSON contract for runs without gradients ---------------------------------------

# runs[] keys of `gpuscope report --format json` before gradient flow and NaN/Inf
# forensics were added (the RunReport of commit 0aabeb5, flattened).
KEYS_BEFORE = {
    "path", "rank", "files", "records", "iterations", "start", "end", "window_start", "trends",
    "leak", "oom_estimate", "fragmentation", "advice", "phases", "spikes", "skipped",
    "timeline", "sections", "oom_events", "host_memory",
}  # fmt: skip


def without_path(run: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """The run's report with its own directory spelled ``RUN``, for comparing two copies."""
    text = json.dumps(run).replace(str(run_dir), "RUN")
    out: dict[str, Any] = json.loads(text)
    return out


def test_a_run_without_gradients_reports_null_and_nothing_else_changes(tmp_path: Path) -> None:
    """The same run twice: as recorded, and with the ``gradients`` key taken out of every
    JSONL line (what a gpuscope from before gradient flow wrote). The second reports
    ``gradients: null`` and ``nonfinite: []``; every other key is the same, with the same
    value, except the gradient series of the timeline."""
    recorded = tmp_path / "recorded"
    train_three_part(recorded, "adam", update_ratio=True)
    older = tmp_path / "older"
    shutil.copytree(recorded, older)
    jsonl = older / "profiles" / "memory.jsonl"
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert all("gradients" in r for r in lines)
    jsonl.write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k != "gradients"}) + "\n" for r in lines)
    )

    new = without_path(report_json(recorded)["runs"][0], recorded)
    old = without_path(report_json(older)["runs"][0], older)
    assert old["gradients"] is None and old["nonfinite"] == []
    assert new["gradients"] is not None and new["nonfinite"] == []
    assert KEYS_BEFORE <= set(old)
    assert set(old) == set(new) == KEYS_BEFORE | {"gradients", "nonfinite"}

    new_series = new["timeline"].pop("series")
    old_series = old["timeline"].pop("series")
    assert [s for s in new_series if not s["name"].startswith("grad/")] == old_series
    assert {s["name"] for s in new_series if s["name"].startswith("grad/")} == {
        "grad/global",
        "grad/module/enc",
        "grad/module/mid",
        "grad/module/head",
    }
    for key in KEYS_BEFORE | {"nonfinite"}:
        assert new[key] == old[key], key
