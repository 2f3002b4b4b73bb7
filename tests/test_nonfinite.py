"""NaN / Inf forensics (``scope.check_finite`` and ``gpuscope.find_nonfinite``) on real
CPU training loops that are made to go wrong: a learning rate that makes the loss
overflow, a ``log`` of a negative input inside one module, a ``sqrt`` whose backward
makes NaN from finite losses, bad batches.

Nothing is taken from gpuscope's own output to judge it: every test keeps its own
float64 copies of the loss components at every iteration, finds the first non-finite one
itself (in the order of its dict), and inspects ``p.grad`` with ``torch.isnan`` /
``torch.isinf`` before ``optimizer.step()`` to know which parameters hold NaN or Inf.
"""

from __future__ import annotations

import inspect
import json
import linecache
import math
import os
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gpuscope
import pytest
import torch
from _helpers import gpuscope_cli
from torch import nn

HERE = os.path.abspath(__file__)
TORCH_DIR = str(Path(torch.__file__).parent)
GPUSCOPE_DIR = str(Path(gpuscope.__file__).parent)

# -- helpers -------------------------------------------------------------------------------


def copies(parts: Mapping[str, torch.Tensor | float]) -> dict[str, float]:
    """The test's own float64 copies of the loss components, in their order."""
    return {
        k: float(v.detach().double()) if isinstance(v, torch.Tensor) else float(v)
        for k, v in parts.items()
    }


def nonfinite_names(values: Mapping[str, float]) -> list[str]:
    return [k for k, v in values.items() if not math.isfinite(v)]


def same(a: Mapping[str, float], b: Mapping[str, float]) -> bool:
    """Equal maps of floats, NaN equal to NaN."""
    return set(a) == set(b) and all(
        (math.isnan(a[k]) and math.isnan(b[k])) or a[k] == b[k] for k in a
    )


def bad_gradients(model: nn.Module) -> dict[str, tuple[int, int]]:
    """{name: (NaN count, Inf count)} of the parameters whose gradient is not finite, in
    the model's order: the oracle for ``nonfinite_parameters``."""
    out: dict[str, tuple[int, int]] = {}
    for name, p in model.named_parameters():
        if p.grad is not None and not bool(torch.isfinite(p.grad).all()):
            out[name] = (int(torch.isnan(p.grad).sum()), int(torch.isinf(p.grad).sum()))
    return out


def no_bare_constants(token: str) -> Any:
    raise AssertionError(f"bare {token} in the JSONL: not JSON")


def nonfinite_events(run_dir: Path) -> list[dict[str, Any]]:
    """The lines of profiles/nonfinite.jsonl, read by Python's json module (strictly: a
    bare NaN or Infinity token, which is not JSON, fails the test)."""
    path = run_dir / "profiles" / "nonfinite.jsonl"
    return [
        json.loads(line, parse_constant=no_bare_constants)
        for line in path.read_text().splitlines()
        if line.strip()
    ]


def floats(spelled: Mapping[str, float | str]) -> dict[str, float]:
    """JSON numbers and the spelled "NaN" / "Infinity" / "-Infinity", as floats."""
    return {k: float(v) for k, v in spelled.items()}


def report_files(run_dir: Path) -> dict[int, Path]:
    """The human reports, by iteration."""
    found = (run_dir / "profiles").glob("nonfinite.iter*.txt")
    return {int(p.name.removeprefix("nonfinite.iter").removesuffix(".txt")): p for p in found}


def report_json(run_dir: Path) -> dict[str, Any]:
    """``gpuscope report <run> --format json``'s only run."""
    out = gpuscope_cli("report", run_dir, "--format", "json")
    assert out.returncode == 0, out.stderr
    runs = json.loads(out.stdout)["runs"]
    assert len(runs) == 1
    run: dict[str, Any] = runs[0]
    return run


def flat(text: str) -> str:
    """Text with its line wrapping undone."""
    return " ".join(text.split())


@contextmanager
def gpuscope_warnings() -> Iterator[list[warnings.WarningMessage]]:
    """Records every warning; yields those gpuscope raised (RuntimeWarning "gpuscope: ")."""
    mine: list[warnings.WarningMessage] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield mine
    mine.extend(
        w
        for w in caught
        if issubclass(w.category, RuntimeWarning) and str(w.message).startswith("gpuscope:")
    )


def regression_batches(n: int, bad: set[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(x, y) batches of a linear problem; those in ``bad`` carry a NaN in x (bad data)."""
    g = torch.Generator().manual_seed(0)
    out = []
    for it in range(n):
        x = torch.randn(8, 3, generator=g)
        y = x.sum(dim=1, keepdim=True)
        if it in bad:
            x[0, 1] = float("nan")
        out.append((x, y))
    return out


# -- 1. a learning rate that makes the run diverge -----------------------------------------


def test_huge_learning_rate_is_reported_at_the_first_overflow(tmp_path: Path) -> None:
    """SGD at lr=5 on a tanh MLP: the losses grow by orders of magnitude, then overflow.
    The report is written for the first iteration where one of the test's own copies is
    non-finite and names the first such component in dict order; the JSONL line has the
    remembered iterations' losses, and `gpuscope report` calls it a divergence."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=5.0)
    x, y = torch.randn(32, 4), torch.randn(32, 1)
    history = 8
    seen: list[dict[str, float]] = []
    returned: list[bool] = []
    grads_bad: dict[str, tuple[int, int]] = {}
    norms_finite = True
    scope = gpuscope.MemoryProfiler(
        tmp_path, model=model, optimizer=opt, every=5, nonfinite_history=history
    )
    with scope, gpuscope_warnings():
        for it in range(25):
            opt.zero_grad()
            mse = (model(x) - y).pow(2).mean()
            # "reg" first: the dict order is not the alphabetical one.
            parts = {"reg": 1e-3 * sum(p.pow(2).sum() for p in model.parameters()), "mse": mse}
            loss = parts["reg"] + parts["mse"]
            loss.backward()
            seen.append(copies({**parts, "total": loss}))
            grads_bad = bad_gradients(model)
            norms_finite = all(
                p.grad is not None and math.isfinite(float(torch.linalg.vector_norm(p.grad)))
                for p in model.parameters()
            )
            # The scenario: the losses overflow first; until then every gradient's norm
            # (torch's, in the gradients' float32) is finite.
            assert norms_finite or nonfinite_names(seen[-1]), it
            returned.append(scope.check_finite(it, losses=parts, loss=loss))
            if nonfinite_names(seen[-1]):
                break
            opt.step()
            scope.step(it)

    n = len(seen) - 1
    bad = nonfinite_names(seen[n])
    assert bad, "the run did not diverge within 25 iterations"
    assert n > history  # the history is a window, not everything
    first = next(c for c in bad if c != "total")
    assert returned == [True] * (n + 1)  # on_nonfinite="continue"

    reports = report_files(tmp_path)
    assert list(reports) == [n]
    text = reports[n].read_text()
    assert text.startswith(f"Non-finite values at iteration {n} ")
    assert f"First non-finite loss component: {first} =" in flat(text)

    (event,) = nonfinite_events(tmp_path)
    assert event["kind"] == "nonfinite"
    assert event["iteration"] == n
    assert event["nonfinite_components"] == bad
    assert same(floats(event["losses"]), seen[n])
    assert [h["iteration"] for h in event["history"]] == list(range(n - history, n))
    for h in event["history"]:
        assert same(floats(h["losses"]), seen[h["iteration"]]), h
    assert event["action"] == "continue"
    assert event["streak"] == 1
    assert event["parameters_checked"] == 4
    assert event["report"] == f"profiles/nonfinite.iter{n}.txt"
    # The gradients at N, as the test found them before the check.
    got = {p["name"]: (p["nan"], p["inf"]) for p in event["nonfinite_parameters"]}
    assert got == grads_bad
    assert math.isfinite(float(event["grad_norm"])) == norms_finite
    if grads_bad:
        assert all(name in text for name in grads_bad)
    elif not norms_finite:  # finite elements whose norm overflowed float32
        assert "No gradient holds NaN or Inf: their norm overflowed" in flat(text)
    else:
        assert "Every gradient was finite." in text

    # The divergence, by the test's own copies of the first component.
    watched = [seen[it][first] for it in range(n - history, n)]
    assert all(math.isfinite(v) for v in watched)
    assert abs(watched[-1] / watched[0]) >= 100
    (listed,) = report_json(tmp_path)["nonfinite"]
    assert listed["iteration"] == n
    assert listed["first_component"] == first
    assert listed["onset"] == "diverging"
    assert listed["growth"] == [watched[0], watched[-1]]
    assert listed["last_iteration"] == n and listed["events"] == 1


# -- 2. a log of a negative input in one module --------------------------------------------


class LogHead(nn.Module):
    """log of its input, scaled per feature: NaN where the input is negative."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(width))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return torch.log(h) * self.scale


class LogNet(nn.Module):
    """body -> head (log) -> out, and a side branch that never sees the head."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(3, 3)
        self.head = LogHead(3)
        self.out = nn.Linear(3, 1)
        self.side = nn.Linear(3, 1)
        with torch.no_grad():
            self.body.weight.copy_(torch.eye(3))
            self.body.bias.zero_()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.out(self.head(self.body(x))), self.side(x)


def log_net_parts(model: LogNet, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Two components: "aux" from the side branch, "score" (a linear objective, so its
    gradient with respect to the output stays finite) from the head's path."""
    score, side = model(x)
    return {"aux": side.pow(2).mean(), "score": score.mean()}


def test_log_of_a_negative_input_names_the_component_the_parameters_and_the_module(
    tmp_path: Path,
) -> None:
    """Positive batches keep body's output (≈ x) positive; the batch of iteration 3 has a
    negative feature, which reaches the head's log. check_finite names "score" and exactly
    the parameters whose gradients the test finds non-finite, with their NaN/Inf counts;
    find_nonfinite on that batch names the head module, whose inputs were finite."""
    torch.manual_seed(0)
    model = LogNet()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    batches = [1 + torch.rand(4, 3) for _ in range(6)]
    batches[3][0, 2] = -1.0
    seen: list[dict[str, float]] = []
    expected_bad: dict[str, tuple[int, int]] = {}
    n = -1
    scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=1)
    with scope, gpuscope_warnings():
        for it, x in enumerate(batches):
            opt.zero_grad()
            parts = log_net_parts(model, x)
            loss = parts["aux"] + parts["score"]
            torch.autograd.backward(loss)
            seen.append(copies({**parts, "total": loss}))
            bad_now = bad_gradients(model)
            scope.check_finite(it, losses=parts, loss=loss)
            if nonfinite_names(seen[-1]) or bad_now:
                n, expected_bad = it, bad_now
                break
            opt.step()
            scope.step(it)
    assert n == 3  # the scenario: the negative feature is what trips it
    bad = nonfinite_names(seen[n])
    assert bad == ["score", "total"]
    # The side branch and the body (log's backward is grad/x: finite at x=-1) stay finite.
    assert expected_bad and not {"side.weight", "side.bias", "body.weight"} & set(expected_bad)

    (event,) = nonfinite_events(tmp_path)
    assert event["iteration"] == n
    assert event["nonfinite_components"] == bad
    assert same(floats(event["losses"]), seen[n])
    named = {p["name"]: (p["nan"], p["inf"]) for p in event["nonfinite_parameters"]}
    assert set(named) == set(expected_bad)
    assert named == expected_bad
    assert all(p["counted"] is True for p in event["nonfinite_parameters"])
    assert [p["name"] for p in event["nonfinite_parameters"]] == list(expected_bad)
    sizes = dict(model.named_parameters())
    for p in event["nonfinite_parameters"]:
        assert p["elements"] == sizes[p["name"]].numel()
    assert event["parameters_checked"] == len(sizes)

    text = flat(report_files(tmp_path)[n].read_text())
    assert "First non-finite loss component: score" in text
    for name in expected_bad:
        assert name in text

    # A NaN out of a flat loss: by the test's copies, "score" did not grow 100×.
    watched = [seen[it]["score"] for it in range(n)]
    assert watched[0] != 0 and abs(watched[-1] / watched[0]) < 100
    (listed,) = report_json(tmp_path)["nonfinite"]
    assert listed["first_component"] == "score"
    assert listed["onset"] == "sudden"

    opt.zero_grad()
    finding = gpuscope.find_nonfinite(log_net_step(model), batches[n], model=model)
    assert finding.found
    assert finding.module == "head"
    assert finding.module_type == "LogHead"
    assert finding.inputs_finite is True
    assert finding.backward_node is not None  # the NaN reaches backward, through `out`
    assert "First non-finite module output: head (LogHead) from finite inputs" in str(finding)


def log_net_step(model: LogNet) -> Callable[[torch.Tensor], torch.Tensor]:
    """A step_fn for find_nonfinite: forward, both components, backward."""

    def step_fn(batch: torch.Tensor) -> torch.Tensor:
        parts = log_net_parts(model, batch)
        total = parts["aux"] + parts["score"]
        torch.autograd.backward(total)
        return total

    return step_fn


def global_hooks() -> tuple[int, int]:
    module = torch.nn.modules.module
    return len(module._global_forward_pre_hooks), len(module._global_forward_hooks)


def test_find_nonfinite_names_modules_without_a_model_and_cleans_up() -> None:
    """Without ``model`` the modules are named from the first module called; a clean
    step finds nothing and hands back step_fn's result; a batch that is NaN already
    names the first module with non-finite inputs; an exception that is not
    detect_anomaly's goes through. Every time the global hooks are removed and anomaly
    mode is off again."""
    torch.manual_seed(0)
    model = LogNet()
    step_fn = log_net_step(model)
    good = 1 + torch.rand(4, 3)
    negative = good.clone()
    negative[0, 2] = -1.0
    nan = good.clone()
    nan[1, 0] = float("nan")
    hooks = global_hooks()

    finding = gpuscope.find_nonfinite(step_fn, negative)
    assert (finding.module, finding.module_type, finding.inputs_finite) == (
        "head",
        "LogHead",
        True,
    )
    assert global_hooks() == hooks and not torch.is_anomaly_enabled()

    model.zero_grad()
    clean = gpuscope.find_nonfinite(step_fn, good, model=model)
    assert not clean.found
    assert clean.module is None and clean.backward_node is None and clean.error is None
    parts = log_net_parts(model, good)
    assert isinstance(clean.result, torch.Tensor)
    expected = float((parts["aux"] + parts["score"]).detach())
    assert float(clean.result.detach()) == pytest.approx(expected)
    assert all(
        p.grad is not None and bool(torch.isfinite(p.grad).all()) for p in model.parameters()
    )

    from_input = gpuscope.find_nonfinite(step_fn, nan, model=model)
    assert from_input.module == "body"  # the first module called; it did not make them
    assert from_input.inputs_finite is False
    assert "(its inputs were already non-finite)" in str(from_input)

    def failing(batch: torch.Tensor) -> None:
        model(batch)
        raise KeyError("not an anomaly")

    with pytest.raises(KeyError, match="not an anomaly"):
        gpuscope.find_nonfinite(failing, negative, model=model)
    assert global_hooks() == hooks and not torch.is_anomaly_enabled()


# -- 3. a NaN made only in backward --------------------------------------------------------


class SqrtWhere(nn.Module):
    """The classic: sqrt where positive, 0 elsewhere. Finite forward, NaN backward."""

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return torch.where(h > 0, torch.sqrt(h), 0.0)


class SqrtNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 4)
        self.act = SqrtWhere()
        self.out = nn.Linear(4, 1)
        with torch.no_grad():  # units 0, 1 read feature 0; units 2, 3 read feature 1
            self.lin.weight.copy_(torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]]))
            self.lin.bias.fill_(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.out(self.act(self.lin(x)))
        return out


def test_nan_made_only_in_backward(tmp_path: Path) -> None:
    """Positive inputs keep every unit positive; the batch of iteration 2 drives units 0
    and 1 negative in one row. The loss stays finite, sqrt's backward makes NaN: no
    component is named, the parameters are, the onset is "gradients_only", and
    find_nonfinite names SqrtBackward0 and this file's torch.sqrt line."""
    torch.manual_seed(0)
    model = SqrtNet()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    batches = [torch.rand(6, 2) for _ in range(5)]
    batches[2][0] = torch.tensor([-5.0, 1.0])
    targets = torch.ones(6, 1)
    seen: list[dict[str, float]] = []
    expected_bad: dict[str, tuple[int, int]] = {}
    n = -1
    scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=1)
    with scope, gpuscope_warnings():
        for it, x in enumerate(batches):
            opt.zero_grad()
            mse = (model(x) - targets).pow(2).mean()
            mse.backward()
            seen.append(copies({"mse": mse}))
            bad_now = bad_gradients(model)
            scope.check_finite(it, losses={"mse": mse})
            if bad_now:
                n, expected_bad = it, bad_now
                break
            opt.step()
            scope.step(it)
    assert n == 2
    assert not nonfinite_names(seen[n])
    assert set(expected_bad) == {"lin.weight", "lin.bias"}  # `out` sees finite values

    (event,) = nonfinite_events(tmp_path)
    assert event["iteration"] == n
    assert event["nonfinite_components"] == []
    assert same(floats(event["losses"]), seen[n])
    assert {p["name"]: (p["nan"], p["inf"]) for p in event["nonfinite_parameters"]} == (
        expected_bad
    )
    assert math.isnan(float(event["grad_norm"]))
    assert "Every loss component was finite." in report_files(tmp_path)[n].read_text()

    (listed,) = report_json(tmp_path)["nonfinite"]
    assert listed["onset"] == "gradients_only"
    assert listed["first_component"] is None

    def step_fn(batch: torch.Tensor) -> torch.Tensor:
        mse: torch.Tensor = (model(batch) - targets).pow(2).mean()
        torch.autograd.backward(mse)
        return mse

    opt.zero_grad()
    finding = gpuscope.find_nonfinite(step_fn, batches[n], model=model)
    assert finding.backward_node == "SqrtBackward0"
    assert finding.module is None  # every module output was finite
    assert finding.forward_trace is not None
    source, start = inspect.getsourcelines(SqrtWhere.forward)
    sqrt_line = start + next(i for i, line in enumerate(source) if "torch.sqrt(" in line)
    assert f'File "{HERE}", line {sqrt_line}, in forward' in finding.forward_trace
    assert "torch.sqrt(h)" in finding.forward_trace
    frames = [
        line.split('"')[1]
        for line in finding.forward_trace.splitlines()
        if line.startswith('  File "')
    ]
    assert HERE in frames
    assert not [f for f in frames if f.startswith((TORCH_DIR, GPUSCOPE_DIR))], frames
    assert finding.error is not None and finding.result is None  # backward raised


# -- 4. policies ---------------------------------------------------------------------------


def test_raise_policy_raises_with_the_report_and_flushed_files(tmp_path: Path) -> None:
    """The third batch carries a NaN: NonfiniteError with the iteration and the report's
    path; the memory records of the iterations before and the event are already in the
    files when it raises (flush_secs is long, so only an explicit flush puts them there)."""
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    batches = regression_batches(6, bad={3})
    scope = gpuscope.MemoryProfiler(
        tmp_path, model=model, optimizer=opt, every=1, on_nonfinite="raise", flush_secs=600
    )
    raised_at = -1
    with gpuscope_warnings(), pytest.raises(gpuscope.NonfiniteError) as caught:
        for it, (x, y) in enumerate(batches):
            raised_at = it
            opt.zero_grad()
            mse = (model(x) - y).pow(2).mean()
            mse.backward()
            scope.check_finite(it, losses={"mse": mse})
            opt.step()
            scope.step(it)
    assert raised_at == 3
    err = caught.value
    assert isinstance(err, RuntimeError)
    assert err.iteration == 3
    assert err.report is not None and Path(err.report).is_file()
    assert Path(err.report).name == "nonfinite.iter3.txt"
    assert "iteration 3" in str(err) and "mse" in str(err)
    # Read before close(): what the check flushed.
    memory = [json.loads(line) for line in (tmp_path / "profiles" / "memory.jsonl").open()]
    # The iterations before, then the state at the failure, taken before raising.
    assert [r["iteration"] for r in memory] == [0, 1, 2, 3]
    assert not math.isfinite(float(memory[-1]["losses"]["mse"]))
    (event,) = nonfinite_events(tmp_path)
    assert event["iteration"] == 3 and event["action"] == "raise"
    assert "raised NonfiniteError" in flat(Path(err.report).read_text())
    scope.close()


def test_skip_policy_leaves_every_parameter_alone(tmp_path: Path) -> None:
    """AdamW with weight decay after two good steps (so it has state): on the bad batch
    check_finite returns False, and optimizer.step() — called anyway, the loop ignores the
    answer — changes no parameter. The good iterations around it do change them."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    batches = regression_batches(5, bad={2})
    answers: list[bool] = []
    unchanged: list[bool] = []
    scope = gpuscope.MemoryProfiler(
        tmp_path, model=model, optimizer=opt, every=1, on_nonfinite="skip"
    )
    with scope, gpuscope_warnings():
        for it, (x, y) in enumerate(batches):
            opt.zero_grad()
            mse = (model(x) - y).pow(2).mean()
            mse.backward()
            answers.append(scope.check_finite(it, losses={"mse": mse}))
            before = [p.detach().clone() for p in model.parameters()]
            opt.step()  # whatever check_finite said
            unchanged.append(
                all(torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True))
            )
            scope.step(it)
    assert answers == [True, True, False, True, True]
    assert unchanged == [False, False, True, False, False]
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())
    (event,) = nonfinite_events(tmp_path)
    assert event["iteration"] == 2 and event["action"] == "skip"


def test_continue_policy_lets_the_step_happen(tmp_path: Path) -> None:
    """A logged metric is infinite while the loss and gradients are finite: check_finite
    returns True and SGD's step is exactly p - lr * grad; the event has the gradient norm
    the test computes, no parameters, and the infinite component."""
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    lr = 0.1
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    x, y = torch.randn(8, 3), torch.randn(8, 1)
    scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=1)
    with scope, gpuscope_warnings():
        opt.zero_grad()
        mse = (model(x) - y).pow(2).mean()
        mse.backward()
        ratio = mse.detach() / torch.zeros(())  # a metric divided by an empty count
        grads = [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]
        before = [p.detach().clone() for p in model.parameters()]
        assert scope.check_finite(0, losses={"mse": mse, "ratio": ratio}) is True
        opt.step()
        scope.step(0)
    for b, g, p in zip(before, grads, model.parameters(), strict=True):
        assert torch.allclose(p.detach(), b - lr * g, rtol=0, atol=1e-7)
        assert not torch.equal(p.detach(), b)
    (event,) = nonfinite_events(tmp_path)
    assert event["nonfinite_components"] == ["ratio"]
    assert event["nonfinite_parameters"] == []
    norm = float(torch.linalg.vector_norm(torch.cat([g.double().flatten() for g in grads])))
    assert float(event["grad_norm"]) == pytest.approx(norm, rel=1e-5)
    assert event["action"] == "continue"


@pytest.mark.parametrize("with_model", [True, False])
def test_skip_covers_every_parameter_of_the_optimizer(tmp_path: Path, with_model: bool) -> None:
    """A learnable temperature that the optimizer holds beside the model's parameters (as
    SAC's log-alpha or CLIP's logit scale): under "skip", optimizer.step() after a NaN
    loss must leave it, like the model, unchanged."""
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    temperature = nn.Parameter(torch.ones(()))
    opt = torch.optim.SGD([*model.parameters(), temperature], lr=0.1)
    scope = gpuscope.MemoryProfiler(
        tmp_path,
        model=model if with_model else None,
        optimizer=opt,
        every=1,
        on_nonfinite="skip",
    )
    ((x, y),) = regression_batches(1, bad={0})
    with scope, gpuscope_warnings():
        mse = (model(x) - y).pow(2).mean() * temperature
        torch.autograd.backward(mse)
        assert temperature.grad is not None and torch.isnan(temperature.grad)
        answer = scope.check_finite(0, losses={"mse": mse})
        before = [p.detach().clone() for p in opt.param_groups[0]["params"]]
        opt.step()
    assert answer is False
    after = opt.param_groups[0]["params"]
    assert all(torch.equal(b, a) for b, a in zip(before, after, strict=True))


def test_bad_policy_or_history_is_refused_at_construction(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="on_nonfinite"):
        gpuscope.MemoryProfiler(tmp_path / "a", on_nonfinite="ignore")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="nonfinite_history"):
        gpuscope.MemoryProfiler(tmp_path / "b", nonfinite_history=-1)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_warned_once_pointing_at_the_training_loop(tmp_path: Path) -> None:
    """Four non-finite iterations in two streaks: one RuntimeWarning from gpuscope, at this
    file's check_finite line, naming the report."""
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    scope = gpuscope.MemoryProfiler(
        tmp_path, model=model, optimizer=opt, every=1, on_nonfinite="skip"
    )
    with scope, gpuscope_warnings() as caught:
        for it, (x, y) in enumerate(regression_batches(8, bad={1, 2, 5, 6})):
            opt.zero_grad()
            mse = (model(x) - y).pow(2).mean()
            mse.backward()
            scope.check_finite(it, loss=mse)
            opt.step()
            scope.step(it)
    assert len(nonfinite_events(tmp_path)) == 4
    assert len(caught) == 1, [str(w.message) for w in caught]
    (w,) = caught
    assert w.filename == HERE
    assert "scope.check_finite(" in linecache.getline(w.filename, w.lineno)
    assert "iteration 1" in str(w.message)
    assert str(tmp_path / "profiles" / "nonfinite.iter1.txt") in str(w.message)


# -- 5. streaks ----------------------------------------------------------------------------


def test_streaks_are_numbered_reported_once_and_listed(tmp_path: Path) -> None:
    """Bad batches at 2, 3, 4 and 7 under "skip" (the model stays finite in between): one
    JSONL line per non-finite check with its streak, a report at the start of each streak
    only, two entries in `gpuscope report`, and a "Non-finite values:" section."""
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    seen: list[dict[str, float]] = []
    scope = gpuscope.MemoryProfiler(
        tmp_path, model=model, optimizer=opt, every=1, on_nonfinite="skip"
    )
    with scope, gpuscope_warnings():
        for it, (x, y) in enumerate(regression_batches(10, bad={2, 3, 4, 7})):
            opt.zero_grad()
            parts = {"fit": (model(x) - y).pow(2).mean(), "l1": 1e-3 * model.weight.abs().sum()}
            sum(parts.values()).backward()
            seen.append(copies(parts))
            scope.check_finite(it, losses=parts)
            opt.step()
            scope.step(it)

    # The test's own streaks: runs of consecutive non-finite iterations.
    bad_its = [it for it, v in enumerate(seen) if nonfinite_names(v)]
    streaks: list[list[int]] = []
    for it in bad_its:
        if streaks and streaks[-1][-1] == it - 1:
            streaks[-1].append(it)
        else:
            streaks.append([it])
    assert [len(s) for s in streaks] == [3, 1]
    numbered = [(it, i + 1) for s in streaks for i, it in enumerate(s)]

    events = nonfinite_events(tmp_path)
    assert [(e["iteration"], e["streak"]) for e in events] == numbered
    for e in events:
        assert e["nonfinite_components"] == nonfinite_names(seen[e["iteration"]])
    starts = [s[0] for s in streaks]
    assert sorted(report_files(tmp_path)) == starts
    assert [e["report"] for e in events] == [
        f"profiles/nonfinite.iter{it}.txt" if it in starts else None for it, _ in numbered
    ]

    listed = report_json(tmp_path)["nonfinite"]
    assert [(e["iteration"], e["last_iteration"], e["events"]) for e in listed] == [
        (s[0], s[-1], len(s)) for s in streaks
    ]
    assert [e["report"] for e in listed] == [f"profiles/nonfinite.iter{s}.txt" for s in starts]

    out = gpuscope_cli("report", tmp_path)
    assert out.returncode == 0, out.stderr
    assert "Non-finite values:" in out.stdout
    section = flat(out.stdout.split("Non-finite values:", 1)[1])
    first = nonfinite_names(seen[starts[0]])[0]
    assert f"loss component {first} went non-finite first" in section
    for s in starts:
        assert f"profiles/nonfinite.iter{s}.txt" in section


def expected_events(
    iterations: int, every: int, bad: set[int], zero_touch: bool
) -> list[tuple[int, int]]:
    """(iteration, streak) of the events a run should write, worked out from the README's
    rule: a record (iterations divisible by ``every``) reports the first non-finite check
    since the previous record; an explicit ``check_finite`` on a recording iteration is
    read at once, after those, while the zero-touch check (made by ``step()``) is one of
    them. ``close()`` reports the first one after the last record. A streak counts the
    consecutive non-finite iterations ending at that one, across records."""
    events, since = [], []
    for it in range(iterations):
        if it % every == 0 and not zero_touch:
            events += [i for i in since if i in bad][:1] + ([it] if it in bad else [])
            since = []
            continue
        since.append(it)
        if it % every == 0:
            events += [i for i in since if i in bad][:1]
            since = []
    events += [i for i in since if i in bad][:1]

    def streak(it: int) -> int:
        return next(k for k in range(it + 1) if it - k not in bad)

    return [(it, streak(it)) for it in events]


@pytest.mark.parametrize("zero_touch", [False, True])
def test_streaks_carry_across_records_and_delayed_checks(tmp_path: Path, zero_touch: bool) -> None:
    """every=3, a logged component ("probe", no gradient) NaN at iterations 2–5 and 8, so
    the model stays finite and steps. With the explicit check and zero-touch (the
    optimizer-step hook, then ``step()``)."""
    bad = {2, 3, 4, 5, 8}
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    scope = gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=3)
    with scope, gpuscope_warnings():
        for it, (x, y) in enumerate(regression_batches(11, set())):
            opt.zero_grad()
            parts = {"mse": (model(x) - y).pow(2).mean()}
            parts["mse"].backward()
            parts["probe"] = torch.tensor(math.nan if it in bad else 1.0)
            if not zero_touch:
                assert scope.check_finite(it, losses=parts) is True  # "continue"
            opt.step()
            scope.step(it, losses=parts)
    events = [(e["iteration"], e["streak"]) for e in nonfinite_events(tmp_path)]
    assert events == expected_events(11, 3, bad, zero_touch)
    # Iteration 4's streak counts 2 and 3, which an earlier record read.
    assert (4, 3) in events


def test_report_lists_a_run_that_stopped_at_its_first_iteration(tmp_path: Path) -> None:
    """NaN in the very first batch (bad data, a broken initialisation) under "raise": the
    event is in nonfinite.jsonl, and `gpuscope report` should list it."""
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    scope = gpuscope.MemoryProfiler(
        tmp_path, model=model, optimizer=opt, every=1, on_nonfinite="raise"
    )
    with scope, gpuscope_warnings(), pytest.raises(gpuscope.NonfiniteError):
        for it, (x, y) in enumerate(regression_batches(3, bad={0})):
            opt.zero_grad()
            mse = (model(x) - y).pow(2).mean()
            torch.autograd.backward(mse)
            scope.check_finite(it, losses={"mse": mse})
            opt.step()
            scope.step(it)
    (event,) = nonfinite_events(tmp_path)
    assert event["iteration"] == 0
    (listed,) = report_json(tmp_path)["nonfinite"]
    assert listed["iteration"] == 0 and listed["first_component"] == "mse"


# -- 6. cheapness and safety ---------------------------------------------------------------


def test_a_clean_run_writes_nothing(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    answers = []
    scope = gpuscope.MemoryProfiler(
        tmp_path, model=model, optimizer=opt, every=1, on_nonfinite="raise"
    )
    with scope, gpuscope_warnings() as caught:
        for it, (x, y) in enumerate(regression_batches(10, bad=set())):
            opt.zero_grad()
            mse = (model(x) - y).pow(2).mean()
            mse.backward()
            answers.append(scope.check_finite(it, losses={"mse": mse}, loss=mse))
            opt.step()
            scope.step(it)
    assert answers == [True] * 10
    assert caught == []
    assert not list((tmp_path / "profiles").glob("nonfinite*"))
    assert report_json(tmp_path)["nonfinite"] == []


@pytest.mark.parametrize("how", ["enabled=False", "GPUSCOPE_PROFILE=0"])
def test_a_disabled_profiler_checks_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    model = nn.Linear(3, 1)
    if how == "GPUSCOPE_PROFILE=0":
        monkeypatch.setenv("GPUSCOPE_PROFILE", "0")
    run_dir = tmp_path / "run"
    scope = gpuscope.MemoryProfiler(
        run_dir, model=model, on_nonfinite="raise", enabled=how != "enabled=False"
    )
    model(torch.tensor([[float("nan"), 1.0, 1.0]])).sum().backward()
    with gpuscope_warnings() as caught:
        assert scope.check_finite(0, losses={"mse": float("nan")}, loss=float("inf")) is True
    scope.close()
    assert caught == []
    assert not run_dir.exists()


def test_without_a_model_only_losses_are_checked(tmp_path: Path) -> None:
    """The model's gradients are NaN but the profiler does not know the model: a finite
    loss passes; a NaN loss gives an event with a null gradient norm and no parameters."""
    model = nn.Linear(3, 1)
    model(torch.tensor([[float("nan"), 1.0, 1.0]])).sum().backward()
    assert not bool(torch.isfinite(model.weight.grad).all())  # type: ignore[arg-type]
    scope = gpuscope.MemoryProfiler(tmp_path, every=1)
    with scope, gpuscope_warnings():
        assert scope.check_finite(0, losses={"mse": torch.tensor(1.0)}) is True
        assert not (tmp_path / "profiles" / "nonfinite.jsonl").exists()
        assert scope.check_finite(1, losses={"mse": torch.tensor(float("nan"))}) is True
        scope.step(1)
    (event,) = nonfinite_events(tmp_path)
    assert event["iteration"] == 1
    assert event["grad_norm"] is None
    assert event["nonfinite_parameters"] == []
    assert event["parameters_checked"] == 0
    assert event["nonfinite_components"] == ["mse"]
    assert [h["iteration"] for h in event["history"]] == [0]


@pytest.mark.parametrize("policy", ["continue", "skip", "raise"])
def test_a_failed_write_does_not_stop_training(tmp_path: Path, policy: str) -> None:
    """Directories stand where the JSONL and the report would go (the tests run as root,
    so a read-only directory would not stop the writes): the write fails, gpuscope warns,
    and check_finite still answers by its policy — only "raise" raises."""
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    scope = gpuscope.MemoryProfiler(
        tmp_path,
        model=model,
        optimizer=opt,
        every=1,
        on_nonfinite=policy,  # type: ignore[arg-type]
    )
    (tmp_path / "profiles" / "nonfinite.jsonl").mkdir()
    (tmp_path / "profiles" / "nonfinite.iter1.txt").mkdir()
    answers: list[bool] = []
    raised: list[gpuscope.NonfiniteError] = []
    with scope, gpuscope_warnings() as caught:
        for it, (x, y) in enumerate(regression_batches(4, bad={1, 2})):
            opt.zero_grad()
            mse = (model(x) - y).pow(2).mean()
            mse.backward()
            try:
                answers.append(scope.check_finite(it, losses={"mse": mse}))
            except gpuscope.NonfiniteError as e:
                raised.append(e)
                continue
            opt.step()
            scope.step(it)
    messages = [str(w.message) for w in caught]
    assert any("writing a non-finite event failed" in m for m in messages), messages
    if policy == "raise":
        assert answers == [True, True]
        assert [e.iteration for e in raised] == [1, 2]
        assert all(e.report is None for e in raised)
    else:
        assert raised == []
        assert answers == [True, policy == "continue", policy == "continue", True]
    assert (tmp_path / "profiles" / "nonfinite.jsonl").is_dir()  # nothing was written there
    memory = (tmp_path / "profiles" / "memory.jsonl").read_text().splitlines()
    # "raise" takes a record at each failure before raising, where step() was skipped.
    assert len(memory) == 4


# -- 7. non-finite numbers in the JSON -----------------------------------------------------


def test_nan_and_infinity_round_trip_as_strings(tmp_path: Path) -> None:
    """NaN, +Inf and -Inf are spelled "NaN", "Infinity", "-Infinity" in the JSONL (which
    Python's json reads without its non-standard extensions), float() gives them back,
    and `gpuscope report --format json` reads and spells them the same way."""
    model = nn.Linear(2, 1)
    scope = gpuscope.MemoryProfiler(tmp_path, model=model, every=1)
    values: dict[str, float] = {
        "pos": float("inf"),
        "nan": float("nan"),
        "neg": float("-inf"),
        "ok": 1.5,
    }
    with scope, gpuscope_warnings():
        for it in range(2):
            model.zero_grad()
            model(torch.tensor([[1.0, float("inf")]])).sum().backward()
            parts: dict[str, torch.Tensor | float] = {
                "pos": torch.tensor(values["pos"]),
                "nan": values["nan"],
                "neg": torch.tensor(values["neg"], dtype=torch.float64),
                "ok": torch.tensor(values["ok"]),
            }
            scope.check_finite(it, losses=parts)
            scope.step(it)
    lines = (tmp_path / "profiles" / "nonfinite.jsonl").read_text().splitlines()
    assert len(lines) == 2
    events = nonfinite_events(tmp_path)
    for e in events:
        assert e["losses"] == {"pos": "Infinity", "nan": "NaN", "neg": "-Infinity", "ok": 1.5}
        assert same(floats(e["losses"]), values)
        assert e["nonfinite_components"] == ["pos", "nan", "neg"]  # dict order
        assert isinstance(e["grad_norm"], str) and not math.isfinite(float(e["grad_norm"]))
        grad = model.weight.grad
        assert grad is not None
        want = {"weight": (int(torch.isnan(grad).sum()), int(torch.isinf(grad).sum()))}
        got = {p["name"]: (p["nan"], p["inf"]) for p in e["nonfinite_parameters"]}
        assert got == want
    (history,) = events[1]["history"]
    assert history["iteration"] == 0
    assert same(floats(history["losses"]), values)

    (listed,) = report_json(tmp_path)["nonfinite"]  # one streak of two
    assert listed["events"] == 2
    assert listed["losses"] == events[0]["losses"]
    assert listed["grad_norm"] == events[0]["grad_norm"]


# -- 8. checks read at the next record -----------------------------------------------------


@pytest.mark.parametrize("policy", ["continue", "raise"])
def test_a_check_between_records_is_reported_at_the_next_record(
    tmp_path: Path, policy: str
) -> None:
    """every=5: the NaN batches of iterations 2 and 3 are not due for a record, so
    check_finite answers True without reading anything; the record of iteration 5 writes
    the event of the FIRST one (2): its losses, its history, the parameters whose
    gradients the test found non-finite then (their gradients are gone by the record, so
    1 stands for "some" in the NaN/Inf counts). Under "raise" the check of iteration 5
    raises (on a recording iteration it reads at once)."""
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    batches = regression_batches(8, bad={2, 3})
    scope = gpuscope.MemoryProfiler(
        tmp_path,
        model=model,
        optimizer=opt,
        every=5,
        nonfinite_history=4,
        on_nonfinite=policy,  # type: ignore[arg-type]
    )
    seen: list[dict[str, float]] = []
    answers: list[bool] = []
    expected_bad: dict[str, tuple[int, int]] = {}
    raised: list[gpuscope.NonfiniteError] = []
    with scope, gpuscope_warnings():
        for it, (x, y) in enumerate(batches):
            opt.zero_grad()
            mse = (model(x) - y).pow(2).mean()
            mse.backward()
            seen.append(copies({"mse": mse}))
            if it == 2:
                expected_bad = bad_gradients(model)
            try:
                answers.append(scope.check_finite(it, losses={"mse": mse}))
                if it < 5:
                    assert not (tmp_path / "profiles" / "nonfinite.jsonl").exists(), it
                if it not in (2, 3):  # the loop leaves the bad steps out by itself
                    opt.step()
                scope.step(it)
            except gpuscope.NonfiniteError as e:
                raised.append(e)
                break
    assert answers == [True] * len(answers)
    assert expected_bad
    (event,) = nonfinite_events(tmp_path)
    assert event["iteration"] == 2 and event["action"] == policy
    assert event["nonfinite_components"] == ["mse"]
    assert same(floats(event["losses"]), seen[2])
    # Iterations 0 and 1: the record of iteration 0 read the ring, which went on.
    assert [h["iteration"] for h in event["history"]] == [0, 1]
    for h in event["history"]:
        assert same(floats(h["losses"]), seen[h["iteration"]])
    named = {p["name"]: (min(p["nan"], 1), min(p["inf"], 1)) for p in event["nonfinite_parameters"]}
    assert named == {k: (min(n, 1), min(i, 1)) for k, (n, i) in expected_bad.items()}
    # Read after the gradients were gone: the marks say "some", and the file says so.
    assert all(p["counted"] is False for p in event["nonfinite_parameters"])
    assert event["streak"] == 1
    assert report_files(tmp_path) == {2: tmp_path / "profiles" / "nonfinite.iter2.txt"}
    assert "some" in (tmp_path / "profiles" / "nonfinite.iter2.txt").read_text()
    if policy == "raise":
        (error,) = raised
        # Raised by the check of iteration 5, which is due for a record and reads.
        assert error.iteration == 2 and len(answers) == 5
    else:
        assert raised == [] and len(answers) == 8


def test_a_check_after_the_last_record_is_reported_by_close(tmp_path: Path) -> None:
    """The NaN comes after the last record: close() writes its event, with the exact
    NaN counts (the gradients are still those the check saw), and raises under "raise"."""
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    scope = gpuscope.MemoryProfiler(
        tmp_path, model=model, optimizer=opt, every=10, on_nonfinite="raise"
    )
    with gpuscope_warnings():
        for it, (x, y) in enumerate(regression_batches(4, bad={3})):
            opt.zero_grad()
            (model(x) - y).pow(2).mean().backward()
            assert scope.check_finite(it, loss=(model(x) - y).pow(2).mean()) is True
            scope.step(it)
        want = bad_gradients(model)
        with pytest.raises(gpuscope.NonfiniteError) as caught:
            scope.close()
    assert caught.value.iteration == 3
    (event,) = nonfinite_events(tmp_path)
    assert event["iteration"] == 3 and event["nonfinite_components"] == ["total"]
    assert {p["name"]: (p["nan"], p["inf"]) for p in event["nonfinite_parameters"]} == want
    scope.close()  # idempotent: nothing left to raise
