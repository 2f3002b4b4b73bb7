"""``gpuscope compare BASE NEW --fail-on step-time=N%`` as a CI gate, on two real CPU
trainings made here with ``gpuscope.MemoryProfiler`` and timed sections: the same loop
twice, the second with a sleep of known length inside its ``forward`` section.

The figures are not judged by gpuscope's arithmetic alone: the sleep bounds the slow run's
step time from below, and the test's own clock (``time.perf_counter_ns`` around each
iteration's sections) bounds the fast one from above. The command is the installed
package's (``python -m gpuscope``), as on a machine without cargo.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import gpuscope
import pytest
import torch
from _helpers import gpuscope_cli
from _memory_helpers import MLP, one_thread

ITERS = 40  # iterations 0..39
EVERY = 5  # a record every 5 iterations
SLOW_MS = 20.0  # the slower run's extra time in its forward section, per iteration


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    with one_thread():
        yield


@dataclass
class Run:
    run_dir: Path
    # The longest iteration's sections as the test's own clock measured them, ms.
    longest_ms: float


def train(run_dir: Path, sleep_ms: float) -> Run:
    """A real SGD loop over a small MLP; forward, backward and optimizer are sections, and
    ``forward`` also sleeps ``sleep_ms``."""
    model, x = MLP(16, 32, 4), torch.randn(8, 16)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scope = gpuscope.MemoryProfiler(run_dir, model=model, optimizer=opt, every=EVERY)
    longest_ms = 0.0
    for it in range(ITERS):
        t0 = time.perf_counter_ns()
        with scope.section("forward"):
            if sleep_ms:
                time.sleep(sleep_ms / 1e3)
            loss = model(x).pow(2).mean()
        with scope.section("backward"):
            loss.backward()
        with scope.section("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        longest_ms = max(longest_ms, (time.perf_counter_ns() - t0) / 1e6)
        scope.step(it, losses={"total": float(loss.item())})
    scope.close()
    return Run(run_dir, longest_ms)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, Run]:
    root = tmp_path_factory.mktemp("compare")
    with one_thread():
        return train(root / "base", 0.0), train(root / "slow", SLOW_MS)


def compare(base: Path, new: Path, *args: str) -> tuple[int, str, str]:
    done = gpuscope_cli("compare", base, new, *args)
    return done.returncode, done.stdout, done.stderr


def regressions(stderr: str) -> list[str]:
    return [
        line.removeprefix("regression: ")
        for line in stderr.splitlines()
        if line.startswith("regression: ")
    ]


def test_a_slower_section_fails_step_time(runs: tuple[Run, Run]) -> None:
    """NEW sleeps 20 ms per iteration in ``forward``: ``--fail-on step-time=5%`` exits 1
    with one line naming the step time, from the timed sections (no trace was taken)."""
    base, slow = runs
    code, _, err = compare(base.run_dir, slow.run_dir, "--fail-on", "step-time=5%")
    assert code == 1, err
    lines = regressions(err)
    assert len(lines) == 1, err
    assert lines[0].startswith("step-time=5%: rank 0 step time (sections): "), lines[0]


def test_step_times_lie_within_the_tests_own_bounds(runs: tuple[Run, Run]) -> None:
    """The JSON's step times: the slow run's at least the sleep, the base run's at most its
    longest iteration by the test's clock."""
    base, slow = runs
    code, out, err = compare(base.run_dir, slow.run_dir, "--format", "json")
    assert code == 0, err  # no --fail-on: shown, not judged
    doc = json.loads(out)
    assert doc["schema"] == "gpuscope.compare/1"
    assert doc["passed"] is True
    assert doc["step_source"] == "sections"
    step = doc["ranks"][0]["step_time_us"]
    assert step["new"] >= SLOW_MS * 1000, step
    assert step["base"] <= base.longest_ms * 1000, (step, base.longest_ms)
    assert step["change_percent"] > 5.0
    # CPU runs have no allocator: no allocated or reserved peaks, a census peak instead.
    rank = doc["ranks"][0]
    assert rank["peak_allocated_bytes"] == {"base": None, "new": None, "change_percent": None}
    assert rank["peak_tensor_bytes"]["base"] > 0


def test_a_run_against_itself_or_a_faster_one_passes(runs: tuple[Run, Run]) -> None:
    """The same run twice passes; so does the slow run as BASE with the fast one as NEW
    (faster is no regression)."""
    base, slow = runs
    rules = "step-time=5%,peak-memory=10%,nonfinite,leak,oom"
    code, out, err = compare(base.run_dir, base.run_dir, "--fail-on", rules)
    assert code == 0, err
    assert regressions(err) == []
    assert "Gate: passed" in out
    code, _, err = compare(slow.run_dir, base.run_dir, "--fail-on", "step-time=5%")
    assert code == 0, err
