#!/usr/bin/env python
"""Cost of gpuscope's gradient checks per call, beside hand-written ones (issue #8).

Issue #8 asks for gradient flow "done with batched tensor operations (one
torch._foreach_norm style pass, no Python loop per element), so it stays cheap for models
with thousands of parameter tensors; measure it", and for "a cheap per-iteration check
(loss components and the global grad norm are finite)". This measures both, per call, on
CPU, for models of 100, 1,000 and 5,000 small parameter tensors and one of 8 large ones.

Run without ``--side`` (the runner). Every (model, side) pair is one child process
(``python bench_gradients.py --side S --model M``), for its own peak RSS; all children
run ``--repeat`` times, interleaved. Each child builds the same model (same random initialisation), fills the
gradients with a **real backward** (``loss = mse + reg`` over every block's output), checks
its answer, then times calls for ``--budget`` seconds (at least ``--min-calls``) and
prints the median µs per call. Torch runs on one thread in every child.

Sides (what is timed per call):

- gradient norms: ``scope.record_gradients(it)`` on a recorded iteration (``every=1``:
  global, per-group and per-module norms, zero share); ``scope.record_gradients(it,
  clip_max_norm=1.0)`` on an iteration that is not recorded (the global norm alone, for the
  clipping count); the usual per-parameter loop ``{n: p.grad.norm().item() ...}`` plus the global
  norm from those; ``float(torch.nn.utils.get_total_norm(grads))``;
  ``float(clip_grad_norm_(params, max_norm=1e9))`` (it also multiplies every gradient by
  the clamped factor, 1.0 here, as it does in training).
- finite check: ``scope.check_finite(it, losses={"mse", "reg"}, loss=loss)``; the naive
  ``math.isfinite(x.item())`` per loss plus ``all(torch.isfinite(p.grad).all() ...)``;
  a torch one-liner, ``isfinite(stack([get_total_norm(grads), mse, reg, loss])).all()``.
- update/weight ratio: ``MemoryProfiler(update_ratio=True, every=1)``:
  ``record_gradients(it)`` (full measurement plus the weight copy) and, after an untimed
  ``optimizer.step()``, ``scope._gradients.after_step()`` -- the part of ``step()`` that
  measures the ratio, called directly because ``step()`` would also take a memory record
  on a recorded iteration. The rival: the usual per-parameter gradient-norm loop, a ``clone()`` of
  every parameter, and after the step ``(p - before).norm().item()`` and
  ``before.norm().item()`` per parameter, with the global ratio from those.
- baseline: the model and one backward, nothing timed (peak RSS floor).

Checks before any timing: every gradient-norm side's global norm equals the naive loop's
to 1e-5 relative (the runner compares the children's answers; gpuscope's global-only
path is read back through its clipping factor); every finite-check side answers True on
the clean gradients, False with one NaN gradient element and False with a NaN loss
component; gpuscope's global update ratio equals the naive one to 1e-5 relative. Not a
test: nothing asserts on time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from typing import Any

from _measure import ChildRun, Runs, closing_notes, last_json, loadavg, measure, note

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REL_TOL = 1e-5

# name -> (blocks, width, layernorm): small models are blocks of Linear(w, w) + LayerNorm(w)
# (4 tensors each); "large" is 4 x Linear(2048, 2048) (8 tensors, 16.8M elements).
MODELS: dict[str, tuple[int, int, bool]] = {
    "100": (25, 32, True),
    "1000": (250, 32, True),
    "5000": (1250, 16, True),
    "large": (4, 2048, False),
}

# side -> (group, label)
SIDES: dict[str, tuple[str, str]] = {
    "gps-full": ("norm", "gpuscope, recorded (full)"),
    "gps-clip": ("norm", "gpuscope, not recorded (clip)"),
    "naive-norm": ("norm", "naive loop p.grad.norm().item()"),
    "total-norm": ("norm", "torch get_total_norm"),
    "clip-grad": ("norm", "torch clip_grad_norm_"),
    "gps-finite": ("finite", "gpuscope check_finite"),
    "naive-finite": ("finite", "naive isfinite(p.grad).all() loop"),
    "torch-finite": ("finite", "torch isfinite(get_total_norm)"),
    "gps-update": ("update", "gpuscope update_ratio=True"),
    "naive-update": ("update", "naive clone + loop"),
    "baseline": ("baseline", "model + backward, nothing timed"),
}
GROUP_TITLES = {
    "norm": "gradient norms (x: against gpuscope recorded)",
    "finite": "finite check",
    "update": "gradient norms + update/weight ratio",
    "baseline": "baseline",
}


# -- the workload (built in every child) -------------------------------------------------


class Workload:
    def __init__(self, model_name: str) -> None:
        import torch
        from torch import nn

        torch.set_num_threads(1)
        torch.manual_seed(0)
        self.torch = torch
        blocks, width, layernorm = MODELS[model_name]

        class Block(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.linear = nn.Linear(width, width)
                self.norm = nn.LayerNorm(width) if layernorm else nn.Identity()

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                out: torch.Tensor = self.norm(self.linear(x))
                return out

        class Net(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.blocks = nn.ModuleList(Block() for _ in range(blocks))

            def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
                # every block on the same input: no vanishing through 1,250 layers
                out = torch.stack([b(x) for b in self.blocks])
                return out.pow(2).mean(), 0.1 * out.abs().mean()

        self.model = Net()
        # LayerNorm's weight and bias start at exactly 1 and 0: nudged so that no
        # gradient or parameter is special
        with torch.no_grad():
            for p in self.model.parameters():
                p.add_(torch.randn_like(p) * 0.01)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.x = torch.randn(8, width)
        self.backward()

    def backward(self) -> None:
        self.model.zero_grad(set_to_none=True)
        self.mse, self.reg = self.model(self.x)
        self.loss = self.mse + self.reg
        self.loss.backward()

    def grads(self) -> list[Any]:
        return [p.grad for p in self.model.parameters() if p.grad is not None]

    def describe(self) -> dict[str, int]:
        params = list(self.model.parameters())
        return {"tensors": len(params), "elements": sum(p.numel() for p in params)}


def profiler(w: Workload, run_dir: str, **kwargs: Any) -> Any:
    import gpuscope

    return gpuscope.MemoryProfiler(
        run_dir, model=w.model, optimizer=w.optimizer, tensorboard=False, **kwargs
    )


# -- the sides: each returns (one call, its answer for the checks) ------------------------


def naive_norms(w: Workload) -> float:
    norms = {n: p.grad.norm().item() for n, p in w.model.named_parameters() if p.grad is not None}
    return math.sqrt(sum(v * v for v in norms.values()))


def norm_side(side: str, w: Workload, run_dir: str) -> tuple[Callable[[int], Any], float]:
    torch = w.torch
    if side == "gps-full":
        scope = profiler(w, run_dir, every=1)
        scope.record_gradients(1)
        value = scope._gradients._pending["global_norm"]
        return lambda it: scope.record_gradients(it), value
    if side == "gps-clip":
        # the global-only path keeps no norm, only the clipping factor, summed on the
        # device between records: read back through a tiny max_norm on a profiler of its
        # own (every call clips; one call, so the sum is its factor)
        probe = profiler(w, os.path.join(run_dir, "probe"), every=10**9)
        probe.record_gradients(1, clip_max_norm=1e-12)
        assert probe._gradients._on_device is not None
        value = 1e-12 / float(probe._gradients._on_device[1])
        probe.close()
        scope = profiler(w, run_dir, every=10**9)
        return lambda it: scope.record_gradients(it, clip_max_norm=1.0), value
    if side == "naive-norm":
        return lambda it: naive_norms(w), naive_norms(w)
    if side == "total-norm":

        def total(it: int) -> float:
            return float(torch.nn.utils.get_total_norm(w.grads()))

        return total, total(0)
    if side == "clip-grad":

        def clip(it: int) -> float:
            return float(torch.nn.utils.clip_grad_norm_(w.model.parameters(), max_norm=1e9))

        return clip, clip(0)
    raise ValueError(side)


def finite_side(side: str, w: Workload, run_dir: str) -> Callable[[int], bool]:
    torch = w.torch
    if side == "gps-finite":
        # "skip": returns False on a trip (under "continue" it would return True)
        scope = profiler(w, run_dir, every=10**9, on_nonfinite="skip")
        return lambda it: scope.check_finite(it, losses={"mse": w.mse, "reg": w.reg}, loss=w.loss)
    if side == "naive-finite":

        def naive(it: int) -> bool:
            return all(math.isfinite(v.item()) for v in (w.mse, w.reg, w.loss)) and all(
                torch.isfinite(p.grad).all() for p in w.model.parameters() if p.grad is not None
            )

        return naive
    if side == "torch-finite":

        def one_liner(it: int) -> bool:
            total = torch.nn.utils.get_total_norm(w.grads())
            parts = torch.stack([total, w.mse.detach(), w.reg.detach(), w.loss.detach()])
            return bool(torch.isfinite(parts).all())

        return one_liner
    raise ValueError(side)


def check_finite_side(fn: Callable[[int], bool], w: Workload) -> list[str]:
    """Clean: True; one NaN gradient element: False; NaN loss component: False."""
    problems = []
    if fn(1) is not True:
        problems.append("answered False on finite gradients and losses")
    last = list(w.model.parameters())[-1]
    assert last.grad is not None
    last.grad.view(-1)[0] = float("nan")
    if fn(2) is not False:
        problems.append("missed one NaN gradient element")
    w.backward()  # gpuscope's "skip" dropped the gradients; the NaN is gone either way
    w.reg = w.reg * float("nan")
    if fn(3) is not False:
        problems.append("missed a NaN loss component")
    w.backward()
    if fn(4) is not True:
        problems.append("answered False after the gradients were recomputed")
    return problems


def update_side(
    side: str, w: Workload, run_dir: str
) -> tuple[Callable[[int], tuple[float, float]], float]:
    """One call returns its timed wall and CPU seconds: the optimizer step in between is
    not timed."""
    if side == "gps-update":
        scope = profiler(w, run_dir, every=1, update_ratio=True)

        def gps(it: int) -> tuple[float, float]:
            t0, c0 = time.perf_counter(), time.thread_time()
            scope.record_gradients(it)
            t1, c1 = time.perf_counter(), time.thread_time()
            w.optimizer.step()
            t2, c2 = time.perf_counter(), time.thread_time()
            scope._gradients.after_step()
            return (t1 - t0) + (time.perf_counter() - t2), (c1 - c0) + (time.thread_time() - c2)

        gps(1)
        return gps, scope._gradients._pending["update_ratio"]
    if side == "naive-update":
        answer: list[float] = []

        def naive(it: int) -> tuple[float, float]:
            t0, c0 = time.perf_counter(), time.thread_time()
            naive_norms(w)
            before = {n: p.detach().clone() for n, p in w.model.named_parameters()}
            t1, c1 = time.perf_counter(), time.thread_time()
            w.optimizer.step()
            t2, c2 = time.perf_counter(), time.thread_time()
            moved = {
                n: (p.detach() - before[n]).norm().item() for n, p in w.model.named_parameters()
            }
            size = {n: b.norm().item() for n, b in before.items()}
            ratios = {n: moved[n] / size[n] for n in moved}
            total = math.sqrt(sum(v * v for v in moved.values()))
            answer.append(total / math.sqrt(sum(v * v for v in size.values())))
            del ratios
            return (t1 - t0) + (time.perf_counter() - t2), (c1 - c0) + (time.thread_time() - c2)

        naive(1)
        return naive, answer[0]
    raise ValueError(side)


def timed_calls(
    fn: Callable[[int], Any], budget: float, min_calls: int, self_timed: bool
) -> tuple[list[float], list[float]]:
    """Wall and CPU µs of each call (CPU: this thread's, ``time.thread_time``; torch runs
    on this thread alone), for ``budget`` seconds and at least ``min_calls`` calls."""
    for it in range(3):  # warm-up
        fn(10 + it)
    wall: list[float] = []
    cpu: list[float] = []
    start = time.perf_counter()
    it = 100
    while len(wall) < min_calls or time.perf_counter() - start < budget:
        t0, c0 = time.perf_counter(), time.thread_time()
        r = fn(it)
        w, c = r if self_timed else (time.perf_counter() - t0, time.thread_time() - c0)
        wall.append(w * 1e6)
        cpu.append(c * 1e6)
        it += 1
    return wall, cpu


def child(args: argparse.Namespace) -> dict[str, Any]:
    warnings.simplefilter("ignore")  # gpuscope warns once when the NaN check trips
    w = Workload(args.model)
    group = SIDES[args.side][0]
    result: dict[str, Any] = {**w.describe(), "problems": []}
    if group == "norm":
        fn, value = norm_side(args.side, w, args.work_dir)
        result["value"] = value
        us = timed_calls(fn, args.budget, args.min_calls, False)
    elif group == "finite":
        ffn = finite_side(args.side, w, args.work_dir)
        result["problems"] = check_finite_side(ffn, w)
        us = timed_calls(ffn, args.budget, args.min_calls, False)
    elif group == "update":
        ufn, value = update_side(args.side, w, args.work_dir)
        result["value"] = value
        us = timed_calls(ufn, args.budget, args.min_calls, True)
    else:
        us = ([], [])
    result["us"] = statistics.median(us[0]) if us[0] else None
    result["cpu_us"] = statistics.median(us[1]) if us[1] else None
    result["calls"] = len(us[0])
    return result


# -- the runner ---------------------------------------------------------------------------


def rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300)


def report(runs: Runs, args: argparse.Namespace) -> list[str]:
    """Prints one table per model; returns the check lines."""
    lines = []
    for model in args.models:
        per_side: dict[str, dict[str, Any]] = {}
        for side in args.sides:
            rs = runs[f"{model}/{side}"]
            outs = [last_json(c) for c, _ in rs]
            per_side[side] = {
                "us": statistics.median(o["us"] for o in outs) if outs[0]["us"] else None,
                "cpu": statistics.median(o["cpu_us"] for o in outs) if outs[0]["us"] else None,
                "calls": sum(o["calls"] for o in outs),
                "rss": max(c.peak_rss_mb for c, _ in rs),
                "values": [o.get("value") for o in outs],
                "problems": sorted({p for o in outs for p in o["problems"]}),
                "desc": outs[0],
            }
        d = next(iter(per_side.values()))["desc"]
        blocks, width, layernorm = MODELS[model]
        shape = f"Linear({width},{width})" + (f" + LayerNorm({width})" if layernorm else "")
        print()
        print(f"{d['tensors']:,} tensors: {blocks} x {shape}, {d['elements']:,} elements")
        print(
            f"  {'side':<35} {'wall µs':>9} {'CPU µs':>9} {'x gps':>7} {'calls':>5} {'RSS MB':>7}"
        )
        base = {"norm": "gps-full", "finite": "gps-finite", "update": "gps-update"}
        shown = None
        for side in args.sides:
            group, label = SIDES[side]
            if group != shown:
                print(f"  {GROUP_TITLES[group]}")
                shown = group
            s = per_side[side]
            b = per_side.get(base.get(group, ""))
            us = (
                f"{s['us']:>9.0f} {s['cpu']:>9.0f}" if s["us"] is not None else f"{'-':>9} {'-':>9}"
            )
            x = f"{s['cpu'] / b['cpu']:>6.2f}x" if s["cpu"] and b and b["cpu"] else f"{'':>7}"
            print(f"    {label:<33} {us} {x} {s['calls']:>5} {s['rss']:>7.1f}")
        lines += checks(model, per_side)
        if "gps-clip" in per_side and "total-norm" in per_side:
            g, t = per_side["gps-clip"]["cpu"], per_side["total-norm"]["cpu"]
            lines.append(
                f"{model}: get_total_norm / gpuscope global-only (equal work), CPU: {t / g:.2f}x"
            )
    return lines


def checks(model: str, per_side: dict[str, dict[str, Any]]) -> list[str]:
    out = []
    ref = per_side.get("naive-norm", {}).get("values", [None])[0]
    worst = 0.0
    for side, s in per_side.items():
        if SIDES[side][0] == "norm" and ref is not None:
            worst = max([worst] + [rel(v, ref) for v in s["values"]])
    if ref is not None:
        out.append(
            f"{model}: global norm {ref:.6g}; largest relative difference of any norm side "
            f"from the naive loop {worst:.1e} (tolerance {REL_TOL:.0e}): "
            f"{'ok' if worst <= REL_TOL else 'PROBLEM'}"
        )
    if "gps-update" in per_side and "naive-update" in per_side:
        g = per_side["gps-update"]["values"]
        n = per_side["naive-update"]["values"][0]
        diff = max(rel(v, n) for v in g)
        out.append(
            f"{model}: global update ratio {n:.6g}, gpuscope vs naive relative difference "
            f"{diff:.1e}: {'ok' if diff <= REL_TOL else 'PROBLEM'}"
        )
    finite = [s for s in per_side if SIDES[s][0] == "finite"]
    problems = [f"{s}: {p}" for s in finite for p in per_side[s]["problems"]]
    if finite:
        out.append(
            f"{model}: finite checks (clean True, NaN gradient False, NaN loss False): "
            + ("ok" if not problems else "PROBLEM " + "; ".join(problems))
        )
    return out


def run_all(args: argparse.Namespace) -> None:
    import gpuscope
    import torch

    started = time.perf_counter()
    print(
        f"python {sys.version.split()[0]}, torch {torch.__version__}, gpuscope "
        f"{gpuscope.__version__}; CPU, 1 torch thread per child; gradients from a real "
        f"backward; {args.repeat} child(ren) per side and model, interleaved, "
        f"~{args.budget} s of calls each; load average {loadavg()} at the start"
    )
    with tempfile.TemporaryDirectory(prefix="gpuscope-bench-gradients-") as root:
        cmds = {
            f"{m}/{s}": [
                sys.executable,
                os.path.abspath(__file__),
                "--side",
                s,
                "--model",
                m,
                "--budget",
                str(args.budget),
                "--min-calls",
                str(args.min_calls),
                "--work-dir",
                os.path.join(root, f"{m}-{s}"),
            ]
            for m in args.models
            for s in args.sides
        }
        runs = measure(cmds, args.repeat)
    lines = report(runs, args)
    print()
    children: list[ChildRun] = [c for rs in runs.values() for c, _ in rs]
    note(
        "wall / CPU µs: per call, median over the children of each child's median (CPU: "
        "the calling thread's time, less sensitive to other processes than wall); x gps: "
        "CPU µs against the group's gpuscope row (above 1: gpuscope is faster); RSS: "
        "largest peak of the side's children, torch imported"
    )
    closing_notes(children, lines, started)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--side", choices=tuple(SIDES), help="child mode")
    p.add_argument("--model", choices=tuple(MODELS), help="child mode")
    p.add_argument("--work-dir", help="child mode: the profiler's run directory")
    p.add_argument("--repeat", type=int, default=1, help="children per side and model")
    p.add_argument("--budget", type=float, default=0.5, help="seconds of timed calls per child")
    p.add_argument("--min-calls", type=int, default=5, help="timed calls per child, at least")
    p.add_argument("--models", nargs="+", choices=tuple(MODELS), default=list(MODELS))
    p.add_argument("--sides", nargs="+", choices=tuple(SIDES), default=list(SIDES))
    return p.parse_args()


def main() -> None:
    args = parse_args()
    if args.side is None:
        run_all(args)
        return
    result = child(args)
    print(json.dumps(result), flush=True)
    os._exit(0)  # skip interpreter teardown (see README: it inflates peak RSS)


if __name__ == "__main__":
    main()
