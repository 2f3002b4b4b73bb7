#!/usr/bin/env python
"""What gpuscope's in-training hooks cost a training loop (issue #26): ms per
iteration of the same loop plain and with each hook, interleaved.

Two models, each in its own child process (``--model``): ``math``, an MLP large enough
that the matrix products dominate (the target: all hooks within 3 % of the plain loop
on CPU, 1 % on a GPU), and ``launch``, a small one where the per-call overhead of
Python and of launching operators dominates (what a launch-bound GPU loop pays).

Variants (each with its own copy of the model and its own AdamW, same initialisation,
so that no profiler's optimizer hooks fire in another's iterations):

- ``plain``: no gpuscope;
- ``plain, again``: the same on its own copy of the model: what "no difference" reads
  as in this run (the copies' memory and the machine's noise), beside which the hooks'
  ratios mean something;
- ``records``: ``MemoryProfiler(every=50, gradients=False, check_finite=False)``:
  memory records only;
- ``+ sections``: records, and ``scope.section`` around forward and backward;
- ``+ gradients``: records and the zero-touch gradient flow (``check_finite=False``);
- ``+ check_finite``: records and the zero-touch non-finite check (``gradients=False``);
- ``explicit calls``: records, hooks off, ``record_gradients(it, clip_max_norm=1.0)``
  and ``check_finite(it, losses=, loss=)`` called in the loop;
- ``all (zero-touch)``: the defaults given a model and optimizer, with sections: what
  a loop that calls only ``scope.step(it, losses=…)`` gets.

Each variant keeps one profiler and one iteration counter for the whole run, so records
come at their steady rate (every 50 iterations). A first, untimed round per variant
takes the first record (a full census); its cost is printed apart. Then ``--rounds``
rounds of ``--iterations`` iterations per variant, in turn (the order rotates), timed
with ``perf_counter`` (on CUDA after a synchronisation at both ends). Ratio: each
round's time over plain's in the same round, median over rounds. Peak memory: on CUDA,
``max_memory_allocated`` per variant; on CPU, each variant alone in a child process
under ``/usr/bin/time`` (two rounds), its peak RSS. ops/it: the operators dispatched in
one iteration not due for a record (on a GPU, kernel launches). Below each table, one
``_foreach_norm`` over the gradients alone: the memory pass a check of every iteration
cannot avoid, against the plain iteration. Not a test: nothing asserts on time.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from _measure import closing_notes, last_json, loadavg, note, run_child, verdict

EVERY = 50
# model -> device type -> (width, depth, batch)
SHAPES: dict[str, dict[str, tuple[int, int, int]]] = {
    # CUDA: 134M parameters, ~3.3 TFLOP an iteration in float32 (tens of ms on an H100).
    "math": {"cpu": (1024, 4, 256), "cuda": (4096, 8, 4096)},
    "launch": {"cpu": (64, 8, 32), "cuda": (256, 8, 32)},
}
TARGETS = {"cpu": 0.03, "cuda": 0.01}

# variant -> (MemoryProfiler options or None for plain, sections, explicit calls)
VARIANTS: dict[str, tuple[dict[str, Any] | None, bool, bool]] = {
    "plain": (None, False, False),
    "plain, again": (None, False, False),
    "records": ({"gradients": False, "check_finite": False}, False, False),
    "+ sections": ({"gradients": False, "check_finite": False}, True, False),
    "+ gradients": ({"check_finite": False}, False, False),
    "+ check_finite": ({"gradients": False}, False, False),
    "explicit calls": ({"gradients": False, "check_finite": False}, False, True),
    "all (zero-touch)": ({}, True, False),
}


@dataclass
class Variant:
    """One variant's model, optimizer, profiler and iteration counter."""

    name: str
    model: Any
    opt: Any
    scope: Any
    sections: bool
    explicit: bool
    it: int = 0
    rounds_ms: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)  # the process's CPU time per round
    first_record_ms: float = float("nan")
    ops: int = 0  # operators dispatched in one iteration not due for a record
    peak_mb: float = 0.0  # CUDA: max_memory_allocated over its rounds


def build(name: str, base: Any, device: Any, run_dir: str) -> Variant:
    import gpuscope
    import torch

    options, sections, explicit = VARIANTS[name]
    model = copy.deepcopy(base).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scope = None
    if options is not None:
        scope = gpuscope.MemoryProfiler(
            run_dir,
            model=model,
            optimizer=opt,
            every=EVERY,
            tensorboard=False,
            **options,
        )
    return Variant(name, model, opt, scope, sections, explicit)


def run_iterations(v: Variant, n: int, x: Any, y: Any) -> None:
    """``n`` training iterations: forward, two loss components, backward, step."""
    import contextlib

    import torch

    nothing = contextlib.nullcontext()
    for _ in range(n):
        it = v.it
        with v.scope.section("forward") if v.sections else nothing:
            out = v.model(x)
            parts = {"mse": torch.nn.functional.mse_loss(out, y), "l1": 1e-4 * out.abs().mean()}
            loss = parts["mse"] + parts["l1"]
        v.opt.zero_grad(set_to_none=True)
        with v.scope.section("backward") if v.sections else nothing:
            loss.backward()
        if v.explicit:
            v.scope.record_gradients(it, clip_max_norm=1.0)
            v.scope.check_finite(it, losses=parts, loss=loss)
        v.opt.step()
        if v.scope is not None:
            v.scope.step(it, losses=parts, loss=loss)
        v.it += 1


def timed(v: Variant, n: int, x: Any, y: Any, sync: Callable[[], None]) -> tuple[float, float]:
    """(wall ms, the process's CPU ms) of ``n`` iterations."""
    sync()
    t0, c0 = time.perf_counter(), time.process_time()
    run_iterations(v, n, x, y)
    sync()
    return (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000


def count_ops(v: Variant, x: Any, y: Any) -> int:
    """Operators dispatched (each a kernel launch on a GPU) in one iteration not due for
    a record, counted by a ``TorchDispatchMode``: what a launch-bound loop pays per call,
    free of timing noise."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            Count.n += 1
            return func(*args, **(kwargs or {}))

    if (v.it + 1) % EVERY == 0 or v.it % EVERY == 0:
        run_iterations(v, 2, x, y)
    with Count():
        run_iterations(v, 1, x, y)
    return Count.n


def gradient_pass_ms(v: Variant, sync: Callable[[], None], repeats: int = 30) -> float:
    """Median ms of one ``torch._foreach_norm`` over the variant's gradients: the one
    pass over every gradient element that a per-iteration non-finite check cannot do
    without (memory-bound; what the check costs at least, whatever its bookkeeping)."""
    import torch

    grads = [p.grad for p in v.model.parameters() if p.grad is not None]
    times = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        torch._foreach_norm(grads)
        sync()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def setup(model_kind: str, device_name: str) -> tuple[Any, Any, Any, Any, Callable[[], None]]:
    import torch

    device = torch.device(device_name)
    torch.manual_seed(0)
    if device.type == "cpu":
        torch.set_num_threads(max(1, torch.get_num_threads()))
    width, depth, batch = SHAPES[model_kind][device.type]
    layers: list[Any] = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    base = torch.nn.Sequential(*layers, torch.nn.Linear(width, 1))
    x = torch.randn(batch, width, device=device)
    y = torch.randn(batch, 1, device=device)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    return base, device, x, y, sync


def child(args: argparse.Namespace) -> None:
    """Times every variant, interleaved (or, with ``--alone``, runs one variant for its
    peak RSS); prints one JSON line."""
    import torch

    base, device, x, y, sync = setup(args.model, args.device)
    names = [args.alone] if args.alone else list(VARIANTS)
    with tempfile.TemporaryDirectory() as root:
        variants = [build(n, base, device, f"{root}/{k}") for k, n in enumerate(names)]
        for v in variants:  # the untimed first round: the first record, warm caches
            v.first_record_ms = timed(v, 1, x, y, sync)[0]
            run_iterations(v, args.iterations - 1, x, y)
        rounds = 1 if args.alone else args.rounds
        for r in range(rounds):
            order = variants[r % len(variants) :] + variants[: r % len(variants)]
            for v in order:
                if device.type == "cuda":
                    torch.cuda.reset_peak_memory_stats()
                wall, cpu = timed(v, args.iterations, x, y, sync)
                v.rounds_ms.append(wall)
                v.cpu_ms.append(cpu)
                if device.type == "cuda":
                    v.peak_mb = max(v.peak_mb, torch.cuda.max_memory_allocated() / 2**20)
        for v in variants:
            v.ops = count_ops(v, x, y)
            if v.scope is not None:
                v.scope.close()
        pass_ms = gradient_pass_ms(variants[0], sync)
    params = sum(p.numel() for p in base.parameters())
    out = {
        "model": args.model,
        "params": params,
        "shape": SHAPES[args.model][device.type],
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "threads": torch.get_num_threads(),
        "gradient_pass_ms": pass_ms,
        "variants": {
            v.name: {
                "rounds_ms": v.rounds_ms,
                "cpu_ms": v.cpu_ms,
                "first_iteration_ms": v.first_record_ms,
                "peak_mb": v.peak_mb,
                "ops": v.ops,
            }
            for v in variants
        },
    }
    print(json.dumps(out))


def report(result: dict[str, Any], iterations: int, rss: dict[str, float]) -> float:
    """Prints the table of one model; returns all hooks' ratio."""
    variants = result["variants"]
    plain = variants["plain"]["rounds_ms"]
    width, depth, batch = result["shape"]
    print(
        f"\n{result['model']}: MLP {depth} x {width} wide, batch {batch}, "
        f"{result['params'] / 1e6:.1f}M parameters, on {result['device']} "
        f"({result['threads']} threads); {len(plain)} rounds x {iterations} iterations"
    )
    print(
        f"{'variant':<17} {'ms/iter':>8} {'min':>7} {'max':>7} {'x plain':>8} {'x cpu':>6} "
        f"{'1st it ms':>10} {'peak MB':>8} {'ops/it':>7}"
    )
    ratios = {}

    def paired(key: str, name: str) -> float:
        rounds = zip(variants[name][key], variants["plain"][key], strict=True)
        return statistics.median(a / b for a, b in rounds)

    for name, v in variants.items():
        per_it = [ms / iterations for ms in v["rounds_ms"]]
        ratio = paired("rounds_ms", name)
        ratios[name] = ratio
        peak = rss.get(name, v["peak_mb"])
        print(
            f"{name:<17} {statistics.median(per_it):>8.3f} {min(per_it):>7.3f} "
            f"{max(per_it):>7.3f} {ratio:>8.3f} {paired('cpu_ms', name):>6.3f} "
            f"{v['first_iteration_ms']:>10.1f} {peak:>8.1f} "
            f"{v['ops']:>7}"
        )
    plain_ms = statistics.median(ms / iterations for ms in plain)
    note(
        f"one pass over the gradients (the non-finite check's least work per iteration): "
        f"{result['gradient_pass_ms']:.3f} ms, {result['gradient_pass_ms'] / plain_ms:.1%} "
        f"of a plain iteration"
    )
    return ratios["all (zero-touch)"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--models", default="math,launch")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=EVERY, help="per round")
    parser.add_argument("--model", help=argparse.SUPPRESS)  # a child's model
    parser.add_argument("--alone", help=argparse.SUPPRESS)  # a child's single variant
    args = parser.parse_args()
    if args.model:
        child(args)
        return
    started = time.perf_counter()
    note(
        f"bench_hooks: {args.rounds} rounds of {args.iterations} iterations per variant "
        f"on {args.device}, hooks every {EVERY} iterations; load average {loadavg()}"
    )
    common = [sys.executable, __file__, "--device", args.device]
    common += ["--rounds", str(args.rounds), "--iterations", str(args.iterations)]
    children = []
    lines = []
    target = TARGETS["cuda" if args.device.startswith("cuda") else "cpu"]
    for model in args.models.split(","):
        timing = run_child([*common, "--model", model])
        children.append(timing)
        rss: dict[str, float] = {}
        if args.device == "cpu":
            for name in VARIANTS:
                alone = run_child([*common, "--model", model, "--alone", name])
                children.append(alone)
                rss[name] = alone.peak_rss_mb
        ratio = report(last_json(timing), args.iterations, rss)
        if model == "math":
            lines.append(
                f"all hooks on the math-bound model, target within {target:.0%} of the "
                f"plain loop: {ratio:.3f}x {verdict(ratio <= 1 + target)}"
            )
    note(
        "(ms/iter: median over rounds; x plain: the variant's round over plain's in the "
        "same round, median; x cpu: the same with the process's CPU time, which other "
        "tenants of the machine disturb less than wall time; 1st it ms: the first iteration, with the first record; "
        "peak MB: CPU: peak RSS of the variant alone, CUDA: max_memory_allocated; ops/it: "
        "operators dispatched in one iteration not due for a record)"
    )
    closing_notes(children, lines, started)


if __name__ == "__main__":
    main()
