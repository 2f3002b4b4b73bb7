#!/usr/bin/env python
"""Cost of a memory record: gpuscope.MemoryProfiler vs memory_profiler.py's gc.get_objects() walk.

Run without ``--side`` (the runner). Everything is measured in child processes
(``python bench_memory_record.py --side ...``), each of which first builds the same
workload: a heap of many small Python objects and a model with >= 1000 parameter tensors,
trained with Adam on CPU for a few iterations so that gradients and optimizer state exist.

1. ``--side records`` (one child): the cost of one record, repeated many times --
   (a) the gc walk, (b) ``MemoryProfiler.record()`` with nothing changed since the last
   record (the census cache), (c) ``record()`` right after a densification-style change
   (a parameter replaced by a bigger one, its Adam state rebuilt), (d) ``scan="gc"``.
   After every densification the record's categories are checked against sums taken
   independently from the model and the optimizer (is the census stale?).
2. ``--side interleaved`` (one child): a CPU training loop with no profiling, with
   ``MemoryProfiler(every=N).step()``, and with the gc walk every N iterations, all
   three in one process, interleaved in blocks of N iterations -- wall and CPU time,
   time inside the hook.
3. ``--side rss-none|rss-gpuscope|rss-walk`` (a few children per variant): each variant
   alone for a short loop, for its peak RSS.

The gc walk tests ``obj.is_cuda``; on CPU that is False for every tensor and the walk
counts nothing, which would make it look cheaper than it is. Here it tests
``obj.device == device`` (the model's device) instead, so it visits and counts the same
tensors it would on a GPU. Its fragmentation figure needs CUDA and is 0 without it.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import math
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TextIO, cast

from _measure import ChildRun, own_peak_rss_mb, rss_note, run_child

TARGET_RATIO = 50.0
TARGET_FAST_MS = 1.0
TARGET_OVERHEAD_PCT = 1.0
MB = 1 << 20
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- the rival: memory_profiler.py's log_tensor_memory_breakdown -------------------------


def gc_walk(writer: Any, iteration: int, device: Any, interval: int = 500) -> dict[str, Any]:
    """memory_profiler.py's ``log_tensor_memory_breakdown``, line for line, with two changes:
    ``obj.is_cuda`` became ``obj.device == device`` (see the module docstring), and the
    fragmentation figure is guarded because ``torch.cuda`` has no allocator here.
    It returns what it logged (the original returns nothing) so that the runner can show it."""
    import torch

    if iteration % interval != 0:
        return {}

    # Categorize all GPU tensors
    tensor_categories: dict[str, float] = {
        "gradients": 0,
        "parameters": 0,
        "activations": 0,
        "buffers": 0,
        "other": 0,
    }

    tensor_dtypes: dict[str, float] = {}
    large_tensors: list[dict[str, Any]] = []  # Track top memory consumers

    for obj in gc.get_objects():
        try:
            if torch.is_tensor(obj) and obj.device == device:  # original: obj.is_cuda
                size_mb = obj.element_size() * obj.nelement() / (1024**2)

                # Categorize
                if obj.grad_fn is not None or (hasattr(obj, "requires_grad") and obj.requires_grad):
                    if obj.grad is not None:
                        tensor_categories["gradients"] += size_mb
                    else:
                        tensor_categories["activations"] += size_mb
                elif hasattr(obj, "is_leaf") and obj.is_leaf:
                    tensor_categories["parameters"] += size_mb
                else:
                    tensor_categories["other"] += size_mb

                # Track by dtype
                dtype_name = str(obj.dtype).split(".")[-1]
                tensor_dtypes[dtype_name] = tensor_dtypes.get(dtype_name, 0) + size_mb

                # Track large tensors (>100MB)
                if size_mb > 100:
                    large_tensors.append(
                        {"size_mb": size_mb, "shape": tuple(obj.shape), "dtype": dtype_name}
                    )
        except:  # noqa: E722, S110 -- the original's bare except, kept
            pass

    # Log to TensorBoard
    for category, size_mb in tensor_categories.items():
        writer.add_scalar(f"Memory/Tensor_Category/{category}_MB", size_mb, iteration)

    for dtype, size_mb in tensor_dtypes.items():
        writer.add_scalar(f"Memory/Tensor_DType/{dtype}_MB", size_mb, iteration)

    # Log count and total size of large tensors
    writer.add_scalar("Memory/Large_Tensors/count", len(large_tensors), iteration)
    total_large = sum(t["size_mb"] for t in large_tensors)
    writer.add_scalar("Memory/Large_Tensors/total_MB", total_large, iteration)

    # Fragmentation metric (guarded: no CUDA allocator here)
    fragmentation = 0.0
    if torch.cuda.is_available():
        allocated = torch.cuda.memory_allocated() / (1024**2)  # MB
        reserved = torch.cuda.memory_reserved() / (1024**2)
        fragmentation = (reserved - allocated) / reserved * 100 if reserved > 0 else 0
    writer.add_scalar("Memory/fragmentation_percent", fragmentation, iteration)
    return {"categories_mb": tensor_categories, "dtypes_mb": tensor_dtypes}


# -- the workload (built in every child) -------------------------------------------------


def build_heap(n_records: int) -> list[dict[str, Any]]:
    """n small dicts, each holding a 2-element list: 2n objects the cyclic GC tracks (a
    dict of ints and strs alone would be untracked and invisible to gc.get_objects())."""
    return [{"idx": i, "hw": [i % 977, i % 883]} for i in range(n_records)]


class Workload:
    """The model (``layers`` x Linear(width, width) + a ``points`` (P, 3) parameter, as a
    Gaussian-splatting model has), fused Adam, a fixed batch, and the training step."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch
        from torch import nn

        torch.set_num_threads(1)
        torch.manual_seed(0)
        self.torch = torch
        self.heap = build_heap(args.heap)

        class Net(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.layers = nn.ModuleList(
                    nn.Linear(args.width, args.width) for _ in range(args.layers)
                )
                self.points = nn.Parameter(torch.randn(args.points, 3) * 0.1)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                # every layer on the same batch, as one batched matmul over the stacked
                # weights: the same 1001 parameters, gradients and Adam states as calling
                # the layers one by one, in ~2/3 of the time (a cheaper iteration makes the
                # profiler's share of it larger, not smaller)
                linears = [cast(nn.Linear, layer) for layer in self.layers]
                weight = torch.stack([layer.weight for layer in linears])
                bias = torch.stack([layer.bias for layer in linears]).unsqueeze(1)
                xs = x.expand(len(self.layers), *x.shape)
                y = torch.baddbmm(bias, xs, weight.transpose(1, 2))
                return y.pow(2).mean() + self.points.pow(2).mean()

        self.model = Net()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3, fused=True)
        self.x = torch.randn(args.batch, args.width)
        self.device = self.model.points.device
        self.loss = self.train_step()  # alive at record time, as in a training loop
        for _ in range(2):
            self.loss = self.train_step()

    def train_step(self) -> Any:
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.model(self.x)
        loss.backward()
        self.optimizer.step()
        return loss

    def densify(self, rows: int) -> int:
        """3DGS-style densification of ``points``: a bigger parameter replaces it and its
        Adam state is rebuilt by concatenation (new tensors). Returns the bytes added."""
        torch = self.torch
        old = self.model.points
        new = torch.nn.Parameter(torch.cat([old.detach(), torch.randn(rows, 3) * 0.1]))
        state = self.optimizer.state.pop(old)
        for key in ("exp_avg", "exp_avg_sq"):
            state[key] = torch.cat([state[key], torch.zeros(rows, 3)])
        group = self.optimizer.param_groups[0]
        group["params"] = [new if p is old else p for p in group["params"]]
        self.optimizer.state[new] = state
        self.model.points = new
        return int(rows * 3 * new.element_size())

    def expected_bytes(self) -> dict[str, int]:
        """Categories summed straight from model and optimizer (no storage sharing here)."""
        params = list(self.model.parameters())
        state = [
            v
            for per_param in self.optimizer.state.values()
            for v in per_param.values()
            if isinstance(v, self.torch.Tensor)
        ]
        return {
            "parameters": sum(p.nbytes for p in params),
            "gradients": sum(p.grad.nbytes for p in params if p.grad is not None),
            "optimizer_state": sum(v.nbytes for v in state),
        }

    def describe(self) -> dict[str, Any]:
        params = list(self.model.parameters())
        return {
            "gc_objects": len(gc.get_objects()),
            "heap_records": len(self.heap),
            "param_tensors": len(params),
            "param_elements": sum(p.numel() for p in params),
            "expected_bytes": self.expected_bytes(),
        }


GPUSCOPE_WARNINGS: list[str] = []


def keep_gpuscope_warnings() -> None:
    """Children's stderr is dropped on success: gpuscope's warnings (a failed record) are
    kept and sent back to the runner, which prints them."""
    shown = warnings.showwarning

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        if str(message).startswith("gpuscope"):
            GPUSCOPE_WARNINGS.append(str(message))
        shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show


def walk_writer(log_dir: str) -> Any:
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(log_dir)


# -- child: cost of one record -----------------------------------------------------------


def timed(fn: Callable[[], Any], reps: int, before: Callable[[], Any] | None = None) -> list[float]:
    """Milliseconds of ``fn()`` over ``reps`` calls (``before()`` runs untimed first)."""
    out = []
    for _ in range(reps):
        if before is not None:
            before()
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def side_records(args: argparse.Namespace, work_dir: str) -> dict[str, Any]:
    import gpuscope

    w = Workload(args)
    result: dict[str, Any] = {"workload": w.describe(), "ms": {}, "checks": []}
    ms = result["ms"]

    # (a) the gc walk (with its SummaryWriter, as in the original)
    writer = walk_writer(os.path.join(work_dir, "walk"))
    logged = gc_walk(writer, 0, w.device)
    ms["walk"] = timed(lambda: gc_walk(writer, 0, w.device), args.reps_walk)
    writer.close()
    result["walk_logged"] = logged

    # (b) gpuscope, nothing changed since the last record: the census cache
    prof = gpuscope.MemoryProfiler(
        os.path.join(work_dir, "fast"), model=w.model, optimizer=w.optimizer, every=50
    )
    t0 = time.perf_counter()
    first = prof.record(0)
    result["first_record_ms"] = (time.perf_counter() - t0) * 1e3
    assert first is not None, "gpuscope record failed (see the warning)"
    cached = getattr(prof.census, "_census", None)
    ms["fast"] = timed(lambda: prof.record(1), args.reps_fast)
    if cached is not None and getattr(prof.census, "_census", None) is not cached:
        result["checks"].append("PROBLEM: the census was recounted although nothing changed")
    result["first_record"] = {
        k: first[k] for k in ("categories_bytes", "tensor_count", "census_bytes")
    }
    result["breakdown_ms"] = breakdown(prof, min(args.reps_fast, 100))
    if args.profile == "always" or (
        args.profile == "auto" and statistics.median(ms["fast"]) > TARGET_FAST_MS
    ):
        result["profile_fast"] = profile_text(lambda: prof.record(1), min(args.reps_fast, 100))

    # (c) gpuscope right after densification: the slow path, checked against fresh sums
    stale: list[str] = []
    last = prof.record(2)
    assert last is not None

    # time only the record: densify untimed, then one timed record; checks run untimed
    slow: list[float] = []
    for _ in range(args.reps_slow):
        before = last
        added = w.densify(args.densify_rows)
        t0 = time.perf_counter()
        rec = prof.record(3)
        slow.append((time.perf_counter() - t0) * 1e3)
        assert rec is not None and before is not None
        cats = rec["categories_bytes"]
        expected = w.expected_bytes()
        grew = cats["parameters"] - before["categories_bytes"]["parameters"]
        if grew != added or any(cats[k] != v for k, v in expected.items()):
            stale.append(
                f"parameters grew by {grew} B (expected {added}); record "
                f"{ {k: cats[k] for k in expected} } vs model/optimizer {expected}"
            )
        last = rec
    ms["slow"] = slow
    result["densify"] = {
        "reps": args.reps_slow,
        "rows_each": args.densify_rows,
        "bytes_each": args.densify_rows * 12,
        "stale": stale[:3],
        "stale_count": len(stale),
        "gpuscope_warnings": GPUSCOPE_WARNINGS,
        "final_points": int(w.model.points.shape[0]),
    }
    if args.profile == "always" or (
        args.profile == "auto" and statistics.median(slow) > TARGET_FAST_MS
    ):
        result["profile_slow"] = profile_text(
            lambda: prof.record(3), min(args.reps_slow, 20), lambda: w.densify(args.densify_rows)
        )
    prof.close()

    # (d) scan="gc": the census plus a walk of gc.get_objects() for tensors it does not hold
    prof_gc = gpuscope.MemoryProfiler(
        os.path.join(work_dir, "gc"), model=w.model, optimizer=w.optimizer, every=50, scan="gc"
    )
    rec_gc = prof_gc.record(0)
    assert rec_gc is not None
    ms["gc"] = timed(lambda: prof_gc.record(1), args.reps_gc)
    result["gc_other_bytes"] = rec_gc["categories_bytes"].get("other")
    prof_gc.close()
    result["gc_objects_end"] = len(gc.get_objects())
    return result


def breakdown(prof: Any, reps: int) -> dict[str, float]:
    """Median ms of the pieces of a cached record, by calling the profiler's parts."""
    census = prof.census
    parts: dict[str, float] = {}
    parts["census.fingerprint()"] = statistics.median(timed(census.fingerprint, reps))
    parts["census.take() (fingerprint + compare)"] = statistics.median(timed(census.take, reps))
    parts["profiler._take() (the whole record dict)"] = statistics.median(
        timed(lambda: prof._take(1, None, None), reps)
    )
    rec = prof._take(1, None, None)
    parts["writer.write(record) (hand-off to Rust)"] = statistics.median(
        timed(lambda: prof._writer.write(rec), reps)
    )
    parts["sampler.sample() (process figures)"] = statistics.median(
        timed(prof._sampler.sample, reps)
    )
    parts["  of which heap_in_use() (glibc mallinfo2)"] = statistics.median(
        timed(gpuscope_native().heap_in_use, reps)
    )
    return parts


def gpuscope_native() -> Any:
    from gpuscope import _native

    return _native


def profile_text(fn: Callable[[], Any], reps: int, before: Callable[[], Any] | None = None) -> str:
    """cProfile of ``reps`` calls of ``fn``: the top functions by own time, per call."""
    profiler = cProfile.Profile()
    for _ in range(reps):
        if before is not None:
            before()
        profiler.enable()
        fn()
        profiler.disable()
    stream = io.StringIO()
    stats = pstats.Stats(profiler, stream=stream)
    rows = []
    raw: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    for (path, line, func), (_, ncalls, tottime, cumtime, _) in raw.items():
        rows.append((tottime, cumtime, ncalls, short_location(path, line, func)))
    total = sum(r[0] for r in rows)
    out = [
        (
            f"  cProfile, {reps} records, {total / reps * 1e3:.2f} ms/record under the "
            "profiler (which inflates small calls); per record: own ms, cumulative ms, calls"
        )
    ]
    for tottime, cumtime, ncalls, where in sorted(rows, reverse=True)[:14]:
        out.append(
            f"  {tottime / reps * 1e3:7.3f} {cumtime / reps * 1e3:7.3f} {ncalls / reps:8.0f}  "
            f"{where}"
        )
    return "\n".join(out)


def short_location(path: str, line: int, func: str) -> str:
    if path == "~":
        return func
    for marker in ("python/gpuscope/", "site-packages/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            if marker == "python/gpuscope/":
                path = "python/gpuscope/" + path
            break
    return f"{path}:{line}({func})"


# -- child: the training loop ------------------------------------------------------------


VARIANTS = ("none", "gpuscope", "walk")


class Variant:
    """One way of running the loop: its per-iteration hook and how to close it."""

    def __init__(self, name: str, w: Workload, every: int, run_dir: str) -> None:
        self.name = name
        self.close: Callable[[], Any] = lambda: None
        self.jsonl: str | None = None
        self.prof: Any = None
        self.hook: Callable[[int, Any], Any]
        if name == "gpuscope":
            import gpuscope

            prof = gpuscope.MemoryProfiler(
                run_dir, model=w.model, optimizer=w.optimizer, every=every
            )
            self.hook = lambda it, loss: prof.step(it, losses={"loss": loss})
            self.close = prof.close
            self.jsonl = os.path.join(run_dir, "profiles", "memory.jsonl")
            self.prof = prof
        elif name == "walk":
            writer = walk_writer(run_dir)
            self.hook = lambda it, loss: gc_walk(writer, it, w.device, interval=every)
            self.close = writer.close
        else:
            self.hook = lambda it, loss: None

    def records_written(self) -> int | None:
        if self.jsonl is None:
            return None
        if not os.path.exists(self.jsonl):
            return 0
        with open(self.jsonl) as f:
            return sum(1 for _ in f)


def run_iterations(
    w: Workload, variant: Variant, first: int, count: int, every: int
) -> dict[str, Any]:
    """``count`` training iterations numbered from ``first``, each followed by the hook.
    Returns wall s, CPU s of the whole process (all threads: gpuscope's and SummaryWriter's
    background writers included), s inside the hook, and ms of the hook at each due one."""
    clock = time.perf_counter
    hook = variant.hook
    in_hook = 0.0
    due: list[float] = []
    cpu_start = time.process_time()
    t_start = clock()
    for it in range(first, first + count):
        loss = w.train_step()
        t0 = clock()
        hook(it, loss)
        dt = clock() - t0
        in_hook += dt
        if it % every == 0:
            due.append(dt * 1e3)
    wall = clock() - t_start
    return {
        "wall": wall,
        "cpu": time.process_time() - cpu_start,
        "hook": in_hook,
        "due": due,
    }


def side_interleaved(args: argparse.Namespace, work_dir: str) -> dict[str, Any]:
    """All three variants in one process, on one model, in blocks of ``every`` iterations:
    block k of each variant runs back to back with block k of the others (order rotating),
    so slow drifts of the machine hit every variant alike. Each variant sees iterations
    0..iters-1 per pass (a hook at the first iteration of every block), ``repeat`` passes."""
    w = Workload(args)
    every = args.every
    variants = {name: Variant(name, w, every, os.path.join(work_dir, name)) for name in VARIANTS}
    passes = []
    blocks: list[dict[str, dict[str, float]]] = []  # block k of each variant, side by side
    due_ms: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for p in range(args.repeat):
        sums = {name: {"wall": 0.0, "cpu": 0.0, "hook": 0.0} for name in VARIANTS}
        for block in range(args.iters // every):
            rot = (block + p) % len(VARIANTS)
            side_by_side = {}
            for name in VARIANTS[rot:] + VARIANTS[:rot]:
                first = p * args.iters + block * every
                r = run_iterations(w, variants[name], first, every, every)
                for key in ("wall", "cpu", "hook"):
                    sums[name][key] += r[key]
                due_ms[name] += r["due"]
                side_by_side[name] = {"wall": r["wall"], "cpu": r["cpu"]}
            blocks.append(side_by_side)
        passes.append(sums)
    for v in variants.values():
        v.close()
    return {
        "passes": passes,
        "blocks": blocks,
        "due_ms": due_ms,
        "records": variants["gpuscope"].records_written(),
        "records_taken": variants["gpuscope"].prof.records,
        "gpuscope_warnings": GPUSCOPE_WARNINGS,
        "gc_objects": len(gc.get_objects()),
    }


def side_rss(name: str, args: argparse.Namespace, work_dir: str) -> dict[str, Any]:
    """One variant alone in this process, ``rss_iters`` iterations: for its peak RSS."""
    w = Workload(args)
    variant = Variant(name, w, args.every, work_dir)
    gc.collect()
    rss_before = own_peak_rss_mb()
    r = run_iterations(w, variant, 0, args.rss_iters, args.every)
    variant.close()
    records = variant.records_written()
    taken = variant.prof.records if variant.prof is not None else None
    return {
        "variant": name,
        "loop_s": r["wall"],
        "hook_s": r["hook"],
        "records": records,
        "records_taken": taken,
        "gpuscope_warnings": GPUSCOPE_WARNINGS,
        "rss_before_loop_mb": rss_before,
        "vmhwm_mb": own_peak_rss_mb(),  # cross-check of the runner's figure
    }


# -- runner ------------------------------------------------------------------------------


def child_cmd(side: str, args: argparse.Namespace, work_dir: str) -> list[str]:
    cmd = [sys.executable, os.path.abspath(__file__), "--side", side, "--work-dir", work_dir]
    for name in WORKLOAD_ARGS:
        cmd += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    return cmd


def spawn(side: str, args: argparse.Namespace, work_dir: str) -> tuple[dict[str, Any], ChildRun]:
    os.makedirs(work_dir, exist_ok=True)
    child = run_child(child_cmd(side, args, work_dir))
    result: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
    result["peak_rss_mb"] = child.peak_rss_mb
    return result, child


def p90(values: list[float]) -> float:
    """Nearest-rank 90th percentile."""
    ordered = sorted(values)
    return ordered[max(math.ceil(0.9 * len(ordered)) - 1, 0)]


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def report_records(r: dict[str, Any], args: argparse.Namespace) -> dict[str, float]:
    wl = r["workload"]
    exp = wl["expected_bytes"]
    print(
        f"heap: {wl['heap_records']} dicts {{'idx': int, 'hw': [int, int]}} -> "
        f"{wl['gc_objects']} objects in gc.get_objects() ({r['gc_objects_end']} at the end)"
    )
    print(
        f"model: {wl['param_tensors']} parameter tensors, {wl['param_elements'] / 1e6:.2f} M "
        f"parameters ({args.layers} x Linear({args.width}, {args.width}) + points "
        f"({args.points}, 3)), fused Adam, CPU, 3 training steps before measuring"
    )
    print(
        "         parameters {:.1f} MB, gradients {:.1f} MB, Adam state {:.1f} MB".format(
            exp["parameters"] / MB, exp["gradients"] / MB, exp["optimizer_state"] / MB
        )
    )
    labels = {
        "walk": "(a) gc walk (device test)",
        "fast": "(b) gpuscope, unchanged",
        "slow": "(c) gpuscope, densified",
        "gc": '(d) gpuscope scan="gc"',
    }
    med = {k: statistics.median(v) for k, v in r["ms"].items()}
    print()
    print(f"{'one record':<30} {'reps':>5} {'median ms':>10} {'p90 ms':>9} {'walk/this':>10}")
    for key, label in labels.items():
        v = r["ms"][key]
        print(
            f"{label:<30} {len(v):>5} {med[key]:>10.3f} {p90(v):>9.3f} "
            f"{med['walk'] / med[key]:>9.1f}x"
        )
    print(
        f"(first gpuscope record, cold cache: {r['first_record_ms']:.1f} ms; the gc walk "
        f"includes its {len(r['walk_logged'].get('dtypes_mb', {})) + 8} "
        "SummaryWriter.add_scalar calls)"
    )
    print(
        "pieces of a cached record (median ms, each called alone in a tight loop with warm "
        "caches, so they add up to less than a record):"
    )
    for name, value in r["breakdown_ms"].items():
        print(f"  {value:8.3f}  {name}")
    d = r["densify"]
    print(
        f"staleness: {d['reps']} densifications of +{d['rows_each']} points "
        f"(+{d['bytes_each']} B of parameters, +{2 * d['bytes_each']} B of Adam state each; "
        f"points now {d['final_points']}); after each, the record's parameters / gradients / "
        f"optimizer_state were compared with sums taken from the model and optimizer: "
        + (
            "all equal, parameters grew by exactly the added bytes every time"
            if d["stale_count"] == 0
            else f"{d['stale_count']} STALE records, e.g. {d['stale']}"
        )
    )
    for problem in r["checks"]:
        print(problem)
    for message in r["densify"]["gpuscope_warnings"]:
        print(f"WARNING in the records child: {message}")
    cats_mb = {k: round(v / MB, 1) for k, v in r["first_record"]["categories_bytes"].items() if v}
    walk_mb = {k: round(v, 1) for k, v in r["walk_logged"]["categories_mb"].items()}
    print(f"what each one says (MB): gpuscope {cats_mb}; walk {walk_mb}")
    print(f'scan="gc" found {r["gc_other_bytes"]} B of tensors outside model and optimizer')
    for key, title in (("profile_fast", "(b) cached record"), ("profile_slow", "(c) densified")):
        if key in r:
            print(f"where the time goes, {title}:")
            print(r[key])
    return med


def overheads(values: dict[str, float] | list[dict[str, float]], name: str) -> list[float]:
    """Sorted (this variant / none - 1) * 100 for one pass (dict) or per block (list)."""
    pairs = values if isinstance(values, list) else [values]
    return sorted((v[name] / v["none"] - 1) * 100 for v in pairs)


def report_loops(inter: dict[str, Any], args: argparse.Namespace) -> dict[str, float]:
    """Prints the interleaved loop's tables; returns gpuscope's overhead figures, %."""
    passes = inter["passes"]
    print()
    print(
        f"training loop: {args.iters} iterations per variant and pass, batch {args.batch}, "
        f"hook every {args.every}; {len(passes)} pass(es) in one child process, the three "
        f"variants interleaved in blocks of {args.every} iterations (order rotating)"
    )
    print(
        f"{'variant':<9} {'clock':<5} {'loop s':>7} {'overhead':>9} {'(min to max)':>18} "
        f"{'paired':>8} {'(IQR)':>18}"
    )
    result: dict[str, float] = {}
    for name in VARIANTS:
        for clock in ("wall", "cpu"):
            loop = statistics.median(ps[name][clock] for ps in passes)
            over = sorted(overheads({k: ps[k][clock] for k in VARIANTS}, name)[0] for ps in passes)
            paired = overheads([{k: b[k][clock] for k in VARIANTS} for b in inter["blocks"]], name)
            q1, _, q3 = statistics.quantiles(paired, n=4) if len(paired) > 1 else paired * 3
            print(
                f"{name if clock == 'wall' else '':<9} {clock:<5} {loop:>7.3f} "
                f"{statistics.median(over):>8.2f}% {f'{over[0]:.2f}% to {over[-1]:.2f}%':>18} "
                f"{statistics.median(paired):>7.2f}% {f'{q1:.2f}% to {q3:.2f}%':>18}"
            )
            if name == "gpuscope":
                result[f"{clock}_passes"] = statistics.median(over)
                result[f"{clock}_paired"] = statistics.median(paired)
    print(
        "(wall: perf_counter; cpu: process_time, all threads of the process. loop s: median "
        "over passes; overhead: this variant's loop s / none's in the same pass, - 1: median "
        "and range over passes. paired: this variant's block / none's block next to it, - 1: "
        "median and quartiles over all blocks)"
    )
    print(f"{'variant':<9} {'in hook s':>9} {'hook %':>7} {'1st ms':>7} {'later ms':>9}")
    for name in VARIANTS:
        hook = [ps[name]["hook"] for ps in passes]
        hook_pct = statistics.median(ps[name]["hook"] / ps[name]["wall"] * 100 for ps in passes)
        due = inter["due_ms"][name]
        first_txt = f"{due[0]:.1f}" if name != "none" and due else "-"
        later_txt = f"{statistics.median(due[1:]):.2f}" if name != "none" and due[1:] else "-"
        print(
            f"{name:<9} {statistics.median(hook):>9.3f} {hook_pct:>6.2f}% {first_txt:>7} "
            f"{later_txt:>9}"
        )
        if name == "gpuscope":
            result["hook_pct"] = hook_pct
    print(
        "(in hook s: seconds inside the per-iteration call, hook %: of the loop's wall time, "
        "medians over passes; 1st ms: the run's first due iteration (gpuscope: its first "
        "record, cold cache); later ms: median of the other due iterations)"
    )
    print(
        f"gpuscope took {inter['records_taken']} records and wrote {inter['records']} to its "
        f"JSONL (expected {len(passes) * (args.iters // args.every)})"
    )
    for message in inter["gpuscope_warnings"]:
        print(f"WARNING in the loop child: {message}")
    return result


def report_rss(rss: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> None:
    print()
    print(
        f"peak RSS: each variant alone in its own child process, {args.rss_iters} iterations "
        f"(hook every {args.every}), {args.rss_repeat} child(ren) per variant"
    )
    print(
        f"{'variant':<10} {'RSS pre-loop MB':>16} {'peak RSS MB':>12} {'(min-max)':>15} "
        f"{'vs none MB':>11}"
    )
    base = statistics.median(r["peak_rss_mb"] for r in rss["none"])
    for name in VARIANTS:
        pre = statistics.median(r["rss_before_loop_mb"] for r in rss[name])
        peaks = sorted(r["peak_rss_mb"] for r in rss[name])
        peak = statistics.median(peaks)
        print(
            f"{name:<10} {pre:>16.1f} {peak:>12.1f} {f'{peaks[0]:.1f}-{peaks[-1]:.1f}':>15} "
            f"{peak - base:>+11.1f}"
        )
    gap = max(abs(r["peak_rss_mb"] - r["vmhwm_mb"]) for rs in rss.values() for r in rs)
    records = sorted({r["records"] for r in rss["gpuscope"]})
    taken = sorted({r["records_taken"] for r in rss["gpuscope"]})
    print(
        f"(medians; RSS pre-loop: after imports, heap, model, 3 training steps; gpuscope "
        f"took {taken} and wrote {records} records per child; each child's own VmHWM is "
        f"within {gap:.1f} MB of the peak shown)"
    )
    for r in rss["gpuscope"]:
        for message in r["gpuscope_warnings"]:
            print(f"WARNING in an RSS child: {message}")


def source_state() -> str:
    try:
        head = subprocess.run(
            ["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", REPO, "status", "--porcelain", "python/gpuscope/memory"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}{' + uncommitted changes in python/gpuscope/memory' if dirty else ''}"


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_all(args: argparse.Namespace) -> None:
    import gpuscope
    import torch

    root = tempfile.mkdtemp(prefix="gpuscope-bench-memory-")
    children: list[ChildRun] = []
    t_start = time.perf_counter()
    print(
        f"python {sys.version.split()[0]}, torch {torch.__version__}, gpuscope "
        f"{gpuscope.__version__} (source {source_state()}); CUDA available: "
        f"{torch.cuda.is_available()}; torch threads per child: 1; load average "
        f"{load_average()} at the start"
    )
    try:
        rec, child = spawn("records", args, os.path.join(root, "records"))
        children.append(child)
        med = report_records(rec, args)
        inter, child = spawn("interleaved", args, os.path.join(root, "interleaved"))
        children.append(child)
        loop = report_loops(inter, args)
        # RSS is not timing-sensitive: three children at a time, one of each variant
        with ThreadPoolExecutor(len(VARIANTS)) as pool:
            spawned = [
                (
                    name,
                    pool.submit(spawn, f"rss-{name}", args, os.path.join(root, f"rss-{name}-{k}")),
                )
                for k in range(args.rss_repeat)
                for name in VARIANTS
            ]
            rss: dict[str, list[dict[str, Any]]] = {name: [] for name in VARIANTS}
            for name, future in spawned:
                r, child = future.result()
                rss[name].append(r)
                children.append(child)
        report_rss(rss, args)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(rss_note(children))
    ratio = med["walk"] / med["fast"]
    print()
    print(
        f"walk/gpuscope (unchanged): {ratio:.1f}x; target >= {TARGET_RATIO:.0f}x: "
        f"{verdict(ratio >= TARGET_RATIO)}"
    )
    ratio_slow = med["walk"] / med["slow"]
    print(
        f"walk/gpuscope (densified): {ratio_slow:.1f}x "
        f"(same target: {verdict(ratio_slow >= TARGET_RATIO)})"
    )
    print(
        f"gpuscope record when nothing changed: {med['fast']:.3f} ms median, "
        f"{p90(rec['ms']['fast']):.3f} ms p90; target <= {TARGET_FAST_MS:.0f} ms: "
        f"{verdict(med['fast'] <= TARGET_FAST_MS)}"
    )
    print(
        f"training-loop overhead of MemoryProfiler(every={args.every}), target < "
        f"{TARGET_OVERHEAD_PCT:.0f}%: wall time {loop['wall_passes']:.2f}% (passes) "
        f"{verdict(loop['wall_passes'] < TARGET_OVERHEAD_PCT)}, {loop['wall_paired']:.2f}% "
        f"(paired blocks) {verdict(loop['wall_paired'] < TARGET_OVERHEAD_PCT)}; CPU time "
        f"{loop['cpu_passes']:.2f}% (passes) {verdict(loop['cpu_passes'] < TARGET_OVERHEAD_PCT)}"
        f", {loop['cpu_paired']:.2f}% (paired blocks) "
        f"{verdict(loop['cpu_paired'] < TARGET_OVERHEAD_PCT)}; time inside step(): "
        f"{loop['hook_pct']:.2f}% of the loop {verdict(loop['hook_pct'] < TARGET_OVERHEAD_PCT)}"
    )
    print(
        f"benchmark wall time: {time.perf_counter() - t_start:.0f} s; load average "
        f"{load_average()} at the end (2 cores: above ~0.3 before starting means another process "
        f"was competing)"
    )
    if args.keep:
        print(f"run directories kept under {root}")


WORKLOAD_ARGS = (
    "heap",
    "layers",
    "width",
    "points",
    "batch",
    "iters",
    "every",
    "repeat",
    "rss_iters",
    "reps_walk",
    "reps_fast",
    "reps_slow",
    "reps_gc",
    "densify_rows",
    "profile",
)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--side",
        choices=("records", "interleaved", "rss-none", "rss-gpuscope", "rss-walk"),
        help="child mode",
    )
    p.add_argument("--work-dir", help="child mode: where its run directories go")
    p.add_argument("--quick", action="store_true", help="fewer repetitions and iterations")
    p.add_argument("--heap", type=int, default=150_000, help="small dicts on the heap (x2 objects)")
    p.add_argument("--layers", type=int, default=500, help="Linear layers (2 tensors each)")
    p.add_argument("--width", type=int, default=64, help="Linear in = out features")
    p.add_argument("--points", type=int, default=100_000, help="rows of the points parameter")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--iters", type=int, default=300, help="training-loop iterations")
    p.add_argument("--every", type=int, default=50, help="record / walk every N iterations")
    p.add_argument("--repeat", type=int, default=3, help="passes of the interleaved loop")
    p.add_argument("--rss-iters", type=int, default=60, help="iterations of each RSS child")
    p.add_argument("--rss-repeat", type=int, default=3, help="RSS children per variant")
    p.add_argument("--reps-walk", type=int, default=20, help="timed gc walks")
    p.add_argument("--reps-fast", type=int, default=200, help="timed cached records")
    p.add_argument("--reps-slow", type=int, default=60, help="timed records after densify")
    p.add_argument("--reps-gc", type=int, default=20, help='timed scan="gc" records')
    p.add_argument("--densify-rows", type=int, default=1000, help="points added per densify")
    p.add_argument(
        "--profile",
        choices=("auto", "always", "never"),
        default="auto",
        help="cProfile gpuscope's record (auto: when a record path misses 1 ms)",
    )
    p.add_argument("--keep", action="store_true", help="keep the run directories")
    args = p.parse_args()
    if args.quick and not args.side:
        args.iters, args.repeat, args.rss_repeat = 100, 1, 1
        args.reps_walk, args.reps_fast, args.reps_slow, args.reps_gc = 5, 50, 20, 5
    if args.iters % args.every:
        p.error("--iters must be a multiple of --every (the loop runs in blocks of --every)")
    return args


def main() -> None:
    args = parse_args()
    keep_gpuscope_warnings()
    if args.side is None:
        run_all(args)
        return
    if args.side == "records":
        result = side_records(args, args.work_dir)
    elif args.side == "interleaved":
        result = side_interleaved(args, args.work_dir)
    else:
        result = side_rss(args.side.removeprefix("rss-"), args, args.work_dir)
    print(json.dumps(result), flush=True)
    os._exit(0)  # skip interpreter teardown (see README: it inflates peak RSS)


if __name__ == "__main__":
    main()
