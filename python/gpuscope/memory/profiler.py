"""``MemoryProfiler``: one call in a training loop records where memory goes.

>>> scope = gpuscope.MemoryProfiler("runs/exp1", model=model, optimizer=opt, every=50)
>>> for it, batch in enumerate(loader):            # doctest: +SKIP
...     loss, parts = step(batch)
...     scope.step(it, losses=parts)               # records when due; cheap otherwise
>>> scope.close()

A record holds the census of model and optimizer (exact, per unique storage), the
allocator's figures on CUDA, the process's figures, and the loss components. The Rust
engine writes it to ``profiles/memory.jsonl``, the ``tensor_profile_<ts>.log`` text log and TensorBoard on
background threads. Nothing here may stop training: a failure is reported once, as a
warning, and training goes on.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import numbers
import os
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import torch

from gpuscope import _native
from gpuscope._run_dir import default_run_dir
from gpuscope._warnings import warn_user
from gpuscope.health.gradients import GradientFlow
from gpuscope.health.nonfinite import NonfiniteCheck, Policy
from gpuscope.health.norms import GradientNorms
from gpuscope.health.sections import Section, Sections
from gpuscope.memory.allocator import allocator_stats
from gpuscope.memory.autocast import AutocastWatch
from gpuscope.memory.census import Census, CensusTaker, scan_heap
from gpuscope.memory.schedule import Schedule
from gpuscope.memory.snapshots import dump_snapshot, iteration_snapshot_path, start_history

__all__ = ["MemoryProfiler", "profiling_enabled"]

MB = 1 << 20


def profiling_enabled() -> bool:
    """False when ``GPUSCOPE_PROFILE=0`` (or ``false``/``off``): every hook is a no-op."""
    return os.environ.get("GPUSCOPE_PROFILE", "1").strip().lower() not in {
        "0",
        "false",
        "off",
        "no",
    }


def distributed_rank() -> tuple[int, int]:
    """(rank, world size) under torch.distributed, else (0, 1)."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class MemoryProfiler:
    """Records memory every ``every`` iterations (an int or a :class:`Schedule`).

    Zero-touch: given ``model=`` and ``optimizer=`` (one, or a list of several), hooks on
    each optimizer's step (``register_step_pre_hook``: after ``backward()``, the loop's
    clipping and a GradScaler's unscaling, before the step) measure the gradient flow on
    the iterations due for a record (``gradients=False`` turns it off) and take the
    gradient norms for the non-finite check, which ``step(it, losses=…)`` completes with
    the loss components it is given (``check_finite=False`` turns it off); with
    ``update_ratio=True`` a ``register_step_post_hook`` measures the update ratio. One
    measurement and one check per iteration (between two ``step()`` calls), at the first
    optimizer step; the explicit :meth:`record_gradients` and :meth:`check_finite`
    still work, and when called, the hook leaves that part to them. The hooks cannot
    know the iteration's number: they use the next ``step()``'s as the profiler expects
    it (0 before the first, then the last one's plus the stride between the last two),
    and ``step()`` puts its own number on the measurement. An iteration without an
    optimizer step (gradient accumulation's micro-batches, a step GradScaler skips for
    infinite gradients) is neither measured nor checked. ``close()`` removes the hooks.
    """

    def __init__(
        self,
        run_dir: str | os.PathLike[str] | None = None,
        model: torch.nn.Module | None = None,
        optimizer: torch.optim.Optimizer | Sequence[torch.optim.Optimizer] | None = None,
        every: int | Schedule = 50,
        windows: Iterable[tuple[int, int, int]] | None = (),
        *,
        scan: str = "fast",
        large_threshold_mb: float = 100.0,
        top_k: int = 5,
        module_depth: int = 1,
        device: str | torch.device | None = None,
        snapshot_at: Iterable[int] = (),
        tensorboard: bool = True,
        text_log: bool = True,
        flush_secs: float = 2.0,
        update_ratio: bool = False,
        on_nonfinite: Policy = "continue",
        nonfinite_history: int = 20,
        gradients: bool = True,
        check_finite: bool = True,
        enabled: bool = True,
    ) -> None:
        if scan not in ("fast", "gc"):
            raise ValueError(f"scan must be 'fast' or 'gc', not {scan!r}")
        _check_number("large_threshold_mb", large_threshold_mb, positive=False)
        _check_number("flush_secs", flush_secs, positive=True)
        _check_count("top_k", top_k)
        _check_count("module_depth", module_depth)
        optimizers = _optimizer_list(optimizer)
        for each in optimizers:
            _check_optimizer(each)
        combined: torch.optim.Optimizer | None = _Optimizers.of(optimizers)
        self.schedule = Schedule.of(every, windows if windows is not None else ())
        self.enabled = enabled and profiling_enabled()
        self.snapshot_at = frozenset(int(i) for i in snapshot_at)
        self.last_iteration = 0
        self.run_dir = Path(run_dir) if run_dir is not None else default_run_dir()
        self.scan = scan
        self.large_threshold = int(large_threshold_mb * MB)
        self.top_k = top_k
        self.census = CensusTaker(model, combined, module_depth)
        self.device = self._device(model, combined, device)
        self.rank, world = distributed_rank()
        self.ranked = world > 1
        self.records = 0
        self._peaks: dict[str, int] = {}
        self._reported: set[str] = set()
        self._floor: int | None = None  # lowest heap-minus-census seen (CPU activations)
        self._writer: Any = None
        self._sampler: Any = None
        self._paths: list[Path] = []
        self._sections = Sections(
            self.device, lambda: self._take_census().total, self._section_failed
        )
        # One pass of per-gradient norms an iteration, for the gradient flow and the check.
        self._norms = GradientNorms()
        self._gradients = GradientFlow(model, combined, module_depth, update_ratio, self._norms)
        self._autocast = AutocastWatch(model if self.enabled else None, self.device.type)
        self._sections.measure_memory = self.schedule.due(0)
        self._nonfinite = NonfiniteCheck(
            model,
            combined,
            on_nonfinite,
            nonfinite_history,
            self._write_nonfinite,
            self.rank,
            self._norms,
        )
        # Zero-touch: hooks on every optimizer's step measure the gradients and check
        # them without a call in the loop (see _before_optimizer_step).
        self._optimizers = optimizers
        self._auto_gradients = bool(gradients) and model is not None and bool(optimizers)
        self._auto_finite = bool(check_finite) and bool(optimizers)
        self._hooks: list[Any] = []
        self._previous_step: int | None = None  # the iteration given to the step() before
        self._last_step: int | None = None  # the iteration given to the last step()
        # What happened in this iteration (since the last step()).
        self._hook_ran = False
        self._gradients_by_hook = False
        self._gradients_explicit = False
        self._finite_explicit = False
        self._hook_grads: tuple[list[tuple[str, torch.Tensor]], torch.Tensor | None] | None = None
        self._stepped: set[int] = set()
        if self.enabled:
            self._guarded(
                "opening the run directory",
                self._open,
                self.ranked,
                tensorboard,
                text_log,
                flush_secs,
            )
            if self._auto_gradients or self._auto_finite:
                self._guarded("hooking the optimizer's step", self._hook_optimizers)

    # -- public -------------------------------------------------------------------------

    def step(
        self,
        iteration: int,
        losses: Mapping[str, Any] | None = None,
        loss: Any = None,
    ) -> None:
        """Call once per iteration; records when the schedule says so."""
        if not self.enabled:
            return
        _check_iteration(iteration, "step")
        self.last_iteration = iteration
        self._previous_step, self._last_step = self._last_step, int(iteration)
        self._sections.step_done()
        if self._gradients.update_ratio:
            self._guarded("measuring the update/weight ratio", self._gradients.after_step)
        if self._gradients_by_hook:
            self._gradients.relabel(iteration)
        measured, self._hook_grads = self._hook_grads, None
        if measured is not None and not self._finite_explicit:
            # The hook took the gradient norms; the losses complete the check, read
            # at the next record (under "skip" at once, as that policy always is).
            self._check(iteration, losses, loss, False, measured)
        self._hook_ran = self._gradients_by_hook = self._gradients_explicit = False
        self._finite_explicit = False
        self._stepped.clear()
        self._norms.forget()
        if self.schedule.due(iteration):
            self.record(iteration, losses, loss)
        if iteration in self.snapshot_at:
            self._guarded("saving an allocator snapshot", self._snapshot, iteration)
        self._sections.measure_memory = self.schedule.due(iteration + 1)
        self._sections.restart()

    def record_gradients(self, iteration: int, clip_max_norm: float | None = None) -> None:
        """Call after ``loss.backward()`` and before ``optimizer.step()`` (and before
        ``clip_grad_norm_``, with its ``max_norm``): on iterations the schedule records,
        measures the global, per-group and per-module gradient norms and the share of
        zero gradients; with ``clip_max_norm``, counts on every call how often clipping
        scales the gradients down (each record carries the counts since the previous
        one, so the calls after the last record are not reported). With ``update_ratio=True`` at construction, it also
        copies the weights so that ``step()`` (called after ``optimizer.step()``) can
        measure how far the step moved them. The next record carries it
        (``gradients``)."""
        if not self.enabled:
            return
        _check_iteration(iteration, "record_gradients")
        if self._gradients_by_hook:
            return  # the optimizer-step hook measured this iteration already
        self._gradients_explicit = True
        due = self.schedule.due(iteration)
        if due or clip_max_norm is not None:
            self._guarded(
                "measuring gradients", self._gradients.measure, iteration, clip_max_norm, due
            )

    def check_finite(
        self,
        iteration: int,
        losses: Mapping[str, Any] | None = None,
        loss: Any = None,
    ) -> bool:
        """Call every iteration after ``loss.backward()`` and before ``optimizer.step()``:
        checks that the loss components and the gradients are finite. When they are
        not, writes ``profiles/nonfinite.iter<N>.txt`` (which component went first, which
        parameters have NaN/Inf gradients, the last iterations' losses) and a
        ``nonfinite`` line of ``profiles/nonfinite.jsonl``, warns once, then does what
        ``on_nonfinite`` says: ``"raise"`` :class:`NonfiniteError` (after a last memory
        record), ``"skip"`` the step (its gradients are dropped, so ``optimizer.step()``
        changes nothing), or ``"continue"``. Returns whether the optimizer should step.

        Between records the check reads no value from the device (no synchronisation):
        it returns ``True``, and the next record (the next ``step()`` that records, or
        ``close()``) writes the event of the first non-finite iteration since the
        previous record — under ``"raise"`` that record raises. On iterations the
        schedule records, and always under ``"skip"`` (it must stop this very step), it
        reads its answer at once: one synchronisation."""
        if not self.enabled:
            return True
        _check_iteration(iteration, "check_finite")
        # This call is the iteration's check: the hook's, if it ran, is not made.
        self._finite_explicit = True
        self._hook_grads = None
        return self._check(iteration, losses, loss, self.schedule.due(iteration))

    def section(self, name: str) -> Section | _Nothing:
        """Times a named part of the iteration: ``with scope.section("render"):`` or
        ``@scope.section("render")``. Sections nest (``forward/attention``); each record
        gets their mean, p50, p95 and max over its interval, their share of the
        iteration, and on the recorded iteration the memory they added."""
        if not self.enabled:
            return _NOTHING
        return self._sections.section(name)

    def record(
        self,
        iteration: int,
        losses: Mapping[str, Any] | None = None,
        loss: Any = None,
    ) -> dict[str, Any] | None:
        """Records now, whatever the schedule; returns the record (``None`` if disabled
        or if recording failed — the failure is reported once as a warning)."""
        if not self.enabled:
            return None
        _check_iteration(iteration, "record")
        losses, loss = self._usable_losses(losses, loss)
        record: dict[str, Any] | None = self._guarded(
            "taking a record", self._take, iteration, losses, loss
        )
        if record is not None:
            self.records += 1
            self._track_peaks(record)
            if self._writer is not None:
                self._guarded("writing a record", self._writer.write, record)
        self._settle_nonfinite()
        return record

    def _settle_nonfinite(self) -> None:
        """Reads what ``check_finite`` left on the device since the last record and
        writes the event of the first non-finite iteration; raises under ``"raise"``."""
        error = self._guarded("checking for non-finite values", self._nonfinite.settle)
        if error is not None:
            self.flush()
            raise error

    def flush(self) -> None:
        """Waits until every record so far is in the files."""
        if self._writer is not None:
            self._guarded("flushing", self._writer.flush)

    def close(self) -> None:
        """Writes what ``check_finite`` found since the last record, flushes and closes
        the files, and removes the model's hooks. Idempotent. Under
        ``on_nonfinite="raise"``, raises :class:`NonfiniteError` (after closing) when a
        check since the last record found non-finite values."""
        self._close(raise_nonfinite=True)

    def _close(self, raise_nonfinite: bool) -> None:
        error = None
        for handle in self._hooks:
            self._guarded("removing the optimizer hooks", handle.remove)
        self._hooks = []
        if self.enabled:
            error = self._guarded("checking for non-finite values", self._nonfinite.settle)
        self._autocast.close()
        if self._writer is not None:
            self._guarded("closing", self._writer.close)
            self._writer = None
        if error is not None and raise_nonfinite:
            raise error

    @property
    def paths(self) -> list[Path]:
        """The files being written (JSONL, text log, event file)."""
        return list(self._paths)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # With an exception on its way, what the checks found is written, not raised.
        self._close(raise_nonfinite=exc is None)

    def summary(self) -> dict[str, Any]:
        """This process's records so far: count and peak figures (bytes)."""
        return {"rank": self.rank, "records": self.records, **self._peaks}

    def print_summary(self, file: Any = None) -> list[dict[str, Any]]:
        """Prints the end-of-run summary — every rank's, gathered over torch.distributed and
        printed by rank 0 only — and returns the summaries."""
        summaries = [self.summary()]
        dist = torch.distributed
        if self.ranked and dist.is_available() and dist.is_initialized():
            gathered: list[Any] = [None] * dist.get_world_size()
            dist.all_gather_object(gathered, summaries[0])
            summaries = [s for s in gathered if s is not None]
        if self.rank == 0:
            print(_summary_table(summaries), file=file)
        return summaries

    @classmethod
    def from_args(
        cls,
        args: argparse.Namespace,
        model: torch.nn.Module | None = None,
        optimizer: torch.optim.Optimizer | None = None,
        **kwargs: Any,
    ) -> MemoryProfiler:
        """A profiler configured by :func:`gpuscope.add_argparse_flags`' switches; a
        disabled (no-op) one unless ``--profile_tensors True``."""
        return cls(
            args.profile_dir,
            model=model,
            optimizer=optimizer,
            every=args.profile_interval,
            scan=args.profile_scan,
            snapshot_at=args.snapshot_at,
            enabled=bool(args.profile_tensors),
            **kwargs,
        )

    # -- internals ----------------------------------------------------------------------

    def _hook_optimizers(self) -> None:
        """Registers the zero-touch hooks on every optimizer's step. They hold the
        profiler weakly: an optimizer copied or kept does not keep the profiler alive."""
        ref = weakref.ref(self)

        def measure() -> None:
            scope = ref()
            if scope is not None:
                scope._guarded(
                    "measuring gradients at the optimizer step", scope._before_optimizer_step
                )

        def before(optimizer: Any, args: Any, kwargs: Any) -> Any:
            # args starts with the optimizer itself: step(self, closure=None).
            closure = kwargs.get("closure", args[1] if len(args) > 1 else None)
            if closure is None:
                measure()
                return None
            # step(closure) runs forward and backward inside the step (Lightning, LBFGS):
            # the gradients are this iteration's only once the closure has run.
            return _after_closure(args, kwargs, closure, measure)

        def after(optimizer: Any, args: Any, kwargs: Any) -> None:
            scope = ref()
            if scope is not None:
                scope._guarded(
                    "measuring the update/weight ratio", scope._after_optimizer_step, optimizer
                )

        for given in self._optimizers:
            optimizer = given
            inner = getattr(given, "optimizer", None)
            if not hasattr(given, "_optimizer_step_pre_hooks") and inner is not None:
                optimizer = inner  # a wrapper that steps the optimizer it holds (accelerate)
            if not isinstance(optimizer, torch.optim.Optimizer):
                # Not torch's (an object that only looks like one): nothing to hook, and
                # the explicit calls still work.
                continue
            self._hooks.append(optimizer.register_step_pre_hook(before))
            if self._auto_gradients and self._gradients.update_ratio:
                self._hooks.append(optimizer.register_step_post_hook(after))

    def _next_iteration(self) -> int:
        """The iteration the next ``step()`` will name, as far as the hooks can know it:
        0 before the first ``step()``, then the last one's plus the stride between the
        last two (1 when only one was seen)."""
        if self._last_step is None:
            return 0
        stride = 1
        if self._previous_step is not None and self._last_step > self._previous_step:
            stride = self._last_step - self._previous_step
        return self._last_step + stride

    def _before_optimizer_step(self) -> None:
        """After ``backward()`` and before the step (and after the loop's clipping and a
        GradScaler's unscaling): the gradient flow when the iteration is due for a
        record, and the gradients' norms for the non-finite check that ``step()``
        completes with the losses. Once per iteration, at the first optimizer's step;
        nothing is read from the device (except under ``"skip"``)."""
        if self._hook_ran:
            return
        self._hook_ran = True
        iteration = self._next_iteration()
        if self._auto_gradients and not self._gradients_explicit and self.schedule.due(iteration):
            self._gradients_by_hook = True
            self._gradients.measure(iteration, None, True)
        if self._auto_finite and not self._finite_explicit:
            self._hook_grads = self._nonfinite.gradient_norms(keep=False)
            if self._nonfinite.policy == "skip":
                self._nonfinite.drop_if_nonfinite(self._hook_grads[1])

    def _after_optimizer_step(self, optimizer: Any) -> None:
        """The update/weight ratio once every hooked optimizer has stepped (``step()``
        measures it otherwise, as without the hooks)."""
        self._stepped.add(id(optimizer))
        if len(self._stepped) == len(self._optimizers):
            self._gradients.after_step()

    def _check(
        self,
        iteration: int,
        losses: Mapping[str, Any] | None,
        loss: Any,
        now: bool,
        measured: tuple[list[tuple[str, torch.Tensor]], torch.Tensor | None] | None = None,
    ) -> bool:
        """The iteration's non-finite check (see :meth:`NonfiniteCheck.check`), by
        ``check_finite`` or, with the gradient norms the hook took (``measured``), by
        ``step()``; returns whether the optimizer should step."""
        losses, loss = self._usable_losses(losses, loss)
        outcome = self._guarded(
            "checking for non-finite values",
            self._nonfinite.check,
            iteration,
            losses,
            loss,
            now,
            measured,
        )
        if outcome is None:
            return True
        proceed, error = outcome
        if error is not None:
            # The state at the failure, as a last record: the run directory then tells
            # the whole story even when training stops at its first iteration.
            self.record(iteration, losses, loss)
            self.flush()
            raise error
        return bool(proceed)

    def _open(self, ranked: bool, tensorboard: bool, text_log: bool, flush_secs: float) -> None:
        self._sampler = _native.ProcessSampler()
        self._writer = _native.RunWriter(
            self.run_dir,
            rank=self.rank if ranked else None,
            tensorboard=tensorboard,
            text_log=text_log,
            flush_secs=flush_secs,
        )
        self._paths = [Path(p) for p in self._writer.paths]
        if self.snapshot_at and not start_history():
            self._report_once(
                "allocator snapshots",
                f"snapshot_at={sorted(self.snapshot_at)} needs CUDA, which is not available; "
                "no snapshots will be saved",
            )

    def _write_nonfinite(self, event: dict[str, Any], report: bool) -> Path | None:
        """Writes a non-finite event; a failure is reported and the check goes on to
        apply its policy."""
        if self._writer is None:
            return None
        path = self._guarded(
            "writing a non-finite event", self._writer.write_nonfinite, event, report
        )
        return Path(path) if path is not None else None

    def _snapshot(self, iteration: int) -> None:
        rank = self.rank if self.ranked else None
        path = iteration_snapshot_path(self.run_dir, iteration, rank)
        dump_snapshot(path)

    @staticmethod
    def _device(
        model: torch.nn.Module | None,
        optimizer: torch.optim.Optimizer | None,
        device: str | torch.device | None,
    ) -> torch.device:
        """The device named, else the model's, else the optimizer's parameters', else the
        current CUDA device where there is one."""
        if device is not None:
            return torch.device(device)
        params = model.parameters() if model is not None else ()
        groups = optimizer.param_groups if optimizer is not None else ()
        for p in itertools.chain(params, (p for g in groups for p in g["params"])):
            if isinstance(p, torch.Tensor):
                return p.device
        return (
            torch.device("cuda", torch.cuda.current_device())
            if torch.cuda.is_available()
            else torch.device("cpu")
        )

    def _guarded(self, what: str, fn: Any, *args: Any) -> Any:
        """Runs ``fn``; on failure warns the first time for ``what`` and returns None."""
        try:
            return fn(*args)
        except _Reported:
            return None
        except Exception as e:  # noqa: BLE001 — profiling must never stop training
            self._report_once(
                what,
                f"{what} failed ({type(e).__name__}: {e}); training goes on, "
                "and this is reported only once",
            )
            return None

    def _usable_losses(
        self, losses: Mapping[str, Any] | None, loss: Any
    ) -> tuple[dict[str, Any] | None, Any]:
        """``losses`` and ``loss`` without the entries that are not one number (a string,
        ``None``, a tensor of several elements): each is left out and named in a warning,
        once, so that the other components and the record itself are kept."""
        kept: dict[str, Any] | None = None
        if losses is not None:
            if not isinstance(losses, Mapping):
                self._report_once(
                    "losses=",
                    f"losses= must map names to numbers, not {type(losses).__name__}; it is "
                    "left out of the records, and this is reported only once",
                )
            else:
                kept = {}
                for key, value in losses.items():
                    if _one_number(value):
                        kept[str(key)] = value
                    else:
                        self._skip_loss(f"loss component {str(key)!r}", value)
        if loss is not None and not _one_number(loss):
            self._skip_loss("loss=", loss)
            loss = None
        return kept, loss

    def _skip_loss(self, name: str, value: Any) -> None:
        shape = f" of shape {tuple(value.shape)}" if isinstance(value, torch.Tensor) else ""
        self._report_once(
            name,
            f"{name} is not one number ({type(value).__name__}{shape}: {str(value)[:60]}); "
            "it is left out of the records and the non-finite check, and this is reported "
            "only once",
        )

    def _take_census(self) -> Census:
        """The census; a failure is reported once under its own name (records and
        sections share it, so a broken model or optimizer costs one warning) and raised
        again as :class:`_Reported`."""
        try:
            return self.census.take()
        except Exception as e:
            self._report_once(
                "taking the census",
                "taking the census of model and optimizer failed "
                f"({type(e).__name__}: {e}); training goes on, and this is reported only once",
            )
            raise _Reported from e

    def _section_failed(self, error: Exception) -> None:
        """A section could not measure its memory; it goes on timing."""
        if not isinstance(error, _Reported):
            self._report_once(
                "measuring a section's memory",
                f"measuring a section's memory failed ({type(error).__name__}: {error}); "
                "training goes on, and this is reported only once",
            )

    def _report_once(self, what: str, message: str) -> None:
        if what not in self._reported:
            self._reported.add(what)
            warn_user(f"gpuscope: {message}", RuntimeWarning)

    def _take(self, iteration: int, losses: Mapping[str, Any] | None, loss: Any) -> dict[str, Any]:
        census = self._take_census()
        categories: dict[str, int | None] = dict(census.categories)
        dtypes = dict(census.dtypes)
        count, census_bytes = len(census.items), census.total
        large = census.largest(self.large_threshold)
        other: int | None = None
        if self.scan == "gc":
            device = self.device if self.device.type != "cpu" else None
            found = scan_heap(census, device)
            other = sum(c.nbytes for c in found)
            count, census_bytes = count + len(found), census_bytes + other
            for c in found:
                dtypes[c.dtype] = dtypes.get(c.dtype, 0) + c.nbytes
            big = [c for c in found if c.nbytes >= self.large_threshold]
            large = sorted(large + big, key=lambda c: c.nbytes, reverse=True)

        system = self._sampler.sample() if self._sampler is not None else _empty_system()
        allocator = allocator_stats(self.device)
        categories["activations"] = self._activations(allocator, system, census_bytes)
        categories["other"] = other

        return {
            "iteration": int(iteration),
            "time": time.time(),
            "rank": self.rank,
            "device": str(self.device),
            "categories_bytes": categories,
            "modules_bytes": dict(census.modules),
            "dtypes_bytes": dtypes,
            "tensor_count": count,
            "census_bytes": census_bytes,
            "large_tensors": [
                {
                    "bytes": c.nbytes,
                    "shape": list(c.shape),
                    "dtype": c.dtype,
                    "device": c.device,
                    "name": c.name,
                    "category": c.category,
                }
                for c in large[: max(self.top_k, 0)]
            ],
            "large_tensor_count": len(large),
            "large_tensor_bytes": sum(c.nbytes for c in large),
            "large_threshold_bytes": self.large_threshold,
            "allocator": allocator,
            "system": system,
            "losses": _losses(losses, loss),
            # Only runs that time sections have them, in the JSONL as here.
            **({"sections": sections} if (sections := self._sections.take()) else {}),
            **({"gradients": g} if (g := self._gradients.take()) is not None else {}),
            # Only once the model's forward was seen.
            **({"autocast": dict(a)} if (a := self._autocast.state) is not None else {}),
        }

    def _track_peaks(self, record: dict[str, Any]) -> None:
        figures = {
            "peak_census_bytes": record["census_bytes"],
            "peak_activations_bytes": record["categories_bytes"]["activations"],
            "peak_rss_bytes": record["system"].get("rss_bytes"),
        }
        if record["allocator"] is not None:
            figures["peak_allocated_bytes"] = record["allocator"]["peak_allocated_bytes"]
            figures["peak_reserved_bytes"] = record["allocator"]["peak_reserved_bytes"]
        for key, value in figures.items():
            if value is not None:
                self._peaks[key] = max(self._peaks.get(key, 0), int(value))

    def _activations(
        self, allocator: dict[str, Any] | None, system: dict[str, Any], census_bytes: int
    ) -> int | None:
        """CUDA: what the allocator holds beyond the census. CPU: the C heap beyond the
        census, above the lowest that figure has been in this run (tensors freed between
        iterations bring it back to that floor; tensors kept alive raise it)."""
        if allocator is not None:
            return max(int(allocator["allocated_bytes"]) - census_bytes, 0)
        heap: int | None = system.get("heap_bytes")
        if heap is None:
            return None
        beyond = heap - census_bytes
        self._floor = beyond if self._floor is None else min(self._floor, beyond)
        return beyond - self._floor


def _after_closure(
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    closure: Callable[[], Any],
    then: Callable[[], None],
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The step's arguments (``args[0]`` is the optimizer) with ``closure`` replaced by
    one that calls ``then`` after it (what a step pre-hook returns to change them)."""

    def wrapped() -> Any:
        result = closure()
        then()
        return result

    if "closure" in kwargs:
        return args, {**kwargs, "closure": wrapped}
    return (args[0], wrapped, *args[2:]), kwargs


def _optimizer_list(optimizer: Any) -> list[Any]:
    """``optimizer=`` as a list: none, one, or several (a list or tuple)."""
    if optimizer is None:
        return []
    if isinstance(optimizer, (list, tuple)):
        return list(optimizer)
    return [optimizer]


class _Optimizers:
    """Several optimizers seen as one by the census, the gradient groups and the
    non-finite check: their groups in order, their states together."""

    def __init__(self, optimizers: list[Any]) -> None:
        self.optimizers = optimizers

    @staticmethod
    def of(optimizers: list[Any]) -> Any:
        if not optimizers:
            return None
        return optimizers[0] if len(optimizers) == 1 else _Optimizers(optimizers)

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return [g for o in self.optimizers for g in o.param_groups]

    @property
    def state(self) -> dict[Any, Any]:
        merged: dict[Any, Any] = {}
        for o in self.optimizers:
            merged.update(o.state)
        return merged


class _Reported(Exception):
    """A failure that has been reported already: whoever catches it stays quiet."""


class _Nothing(contextlib.ContextDecorator, contextlib.nullcontext[None]):
    """A section of a disabled profiler: usable with ``with`` and as a decorator."""


_NOTHING = _Nothing()


def _summary_table(summaries: list[dict[str, Any]]) -> str:
    columns = [
        ("census", "peak_census_bytes"),
        ("activations", "peak_activations_bytes"),
        ("allocated", "peak_allocated_bytes"),
        ("reserved", "peak_reserved_bytes"),
        ("rss", "peak_rss_bytes"),
    ]
    header = f"{'rank':>4} {'records':>7} " + " ".join(f"{name:>11}" for name, _ in columns)
    lines = ["gpuscope memory summary (peaks, MB)", header]
    for s in summaries:
        cells = " ".join(f"{s[key] / MB:11.1f}" if key in s else f"{'-':>11}" for _, key in columns)
        lines.append(f"{s['rank']:>4} {s['records']:>7} {cells}")
    return "\n".join(lines)


def _empty_system() -> dict[str, Any]:
    return {
        "rss_bytes": None,
        "heap_bytes": None,
        "cpu_percent": None,
        "ram_percent": None,
        "ram_total_bytes": None,
    }


def _check_number(name: str, value: Any, *, positive: bool) -> None:
    """Raises when ``value`` is not a finite real number above 0 (``positive``) or at
    least 0 (otherwise): a bad value is a mistake in the call, said where it was made."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, not {value!r} ({type(value).__name__})")
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{name} must be a finite number {bound}, not {value!r}")


def _check_count(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, not {value!r} ({type(value).__name__})")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, not {value!r}")


def _check_optimizer(optimizer: Any) -> None:
    """Raises a TypeError for an ``optimizer=`` that is not one: an LR scheduler (an easy
    slip, as both are built side by side) or anything without ``param_groups``; the census
    would otherwise fail at every record while training runs on and nothing is recorded."""
    if optimizer is None:
        return
    schedulers = (torch.optim.lr_scheduler.LRScheduler, torch.optim.lr_scheduler.ReduceLROnPlateau)
    if isinstance(optimizer, schedulers):
        raise TypeError(
            f"optimizer= is an LR scheduler ({type(optimizer).__name__}), not an optimizer: "
            "pass the optimizer it schedules (its .optimizer)"
        )
    if not hasattr(optimizer, "param_groups"):
        raise TypeError(
            "optimizer= must be a torch.optim.Optimizer (something with param_groups), not "
            f"{optimizer!r:.60} ({type(optimizer).__name__})"
        )


def _check_iteration(iteration: Any, method: str) -> None:
    """Raises a TypeError naming the argument when ``iteration`` is not a number (an int,
    a numpy integer, a one-element tensor); ``None`` would fail deep in the schedule."""
    if type(iteration) is int:
        return
    if isinstance(iteration, bool) or not _one_number(iteration):
        raise TypeError(
            f"MemoryProfiler.{method}: iteration must be an int (the training iteration's "
            f"number), not {iteration!r:.40} ({type(iteration).__name__})"
        )


def _one_number(value: Any) -> bool:
    """Whether ``value`` is one real number: a one-element real tensor (read without a
    device sync) or a float, int or numpy scalar — not a string."""
    if isinstance(value, torch.Tensor):
        return value.numel() == 1 and not value.is_complex()
    if isinstance(value, (str, bytes)) or value is None:
        return False
    try:
        float(value)
    except (TypeError, ValueError, OverflowError):
        return False
    return True


def _as_float(value: Any) -> float:
    """A Python float from a float, a numpy scalar or a one-element tensor (one .item())."""
    if isinstance(value, torch.Tensor):
        return float(value.detach().item())
    return float(value)


def _losses(losses: Mapping[str, Any] | None, loss: Any) -> dict[str, float]:
    parts = {str(k): _as_float(v) for k, v in (losses or {}).items()}
    if loss is not None:
        parts["total"] = _as_float(loss)
    elif parts and "total" not in parts:
        parts["total"] = sum(parts.values())
    return parts
