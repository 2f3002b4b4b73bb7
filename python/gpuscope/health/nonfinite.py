"""NaN/Inf forensics: after out-of-memory, the most common question in training.

:class:`NonfiniteCheck` is the cheap per-iteration check behind
``MemoryProfiler.check_finite``: are the loss components and the global gradient norm
finite? Between records it reads nothing (a read stops the CPU until the GPU catches
up): the answer, the first non-finite iteration's losses and per-parameter gradient norms
(one ``torch._foreach_norm``) and the last iterations' losses (a fixed ring buffer) stay
on the device, and the next record reads them once. On recording iterations, and under
``on_nonfinite="skip"`` (which must stop this very step), it reads its answer at once.
When it trips it gathers what a person needs: which component went non-finite first,
which parameters hold NaN or Inf gradients, the losses of the iterations before — and
hands them to the engine, which writes the human report and the ``nonfinite`` JSONL line.

:func:`find_nonfinite` is the deep mode: it re-runs a step under
``torch.autograd.detect_anomaly`` with forward hooks on every module and names the first
module whose output is non-finite and the autograd node whose backward made the first NaN.
"""

from __future__ import annotations

import contextlib
import math
import re
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from gpuscope._warnings import warn_user
from gpuscope.health.norms import GradientNorms
from gpuscope.names import ParameterList, module_names

__all__ = ["NonfiniteCheck", "NonfiniteError", "NonfiniteFinding", "find_nonfinite"]

Policy = Literal["raise", "skip", "continue"]
POLICIES: tuple[Policy, ...] = ("raise", "skip", "continue")

# Events written to the JSONL per run (a diverged run that continues would otherwise add
# one per iteration), and human reports (one per streak of non-finite iterations).
MAX_EVENTS = 100
MAX_REPORTS = 10


class NonfiniteError(RuntimeError):
    """Raised by ``check_finite`` under ``on_nonfinite="raise"``: a loss component or a
    gradient was NaN or infinite. ``report`` is the human report in the run directory."""

    def __init__(self, message: str, iteration: int, report: Path | None) -> None:
        super().__init__(message)
        self.iteration = iteration
        self.report = report


def _scalar(value: Any) -> torch.Tensor | float:
    """A loss value kept without a device sync: a 0-d tensor (the check stacks it under
    ``no_grad``, so no graph is kept), or a float."""
    if isinstance(value, torch.Tensor):
        return value if value.dim() == 0 else value.reshape(())
    return float(value)


def _history_dtype(device: torch.device) -> torch.dtype:
    """float64 keeps every loss exactly (float32, float16, bfloat16 losses too); MPS
    has no float64."""
    return torch.float32 if device.type == "mps" else torch.float64


class _Interval:
    """What the checks since the last read found, kept in tensors on one device so that
    no check reads a value: how many were non-finite, how many went into the ring before
    it froze (the first non-finite one is the last of those), the last finite one (for
    the streak), the first non-finite one's per-parameter gradient norms; and the losses
    of the last ``history + 1`` checks in a ring buffer (one fixed allocation), which
    stops taking rows at the first non-finite check so that its history is kept until
    the read. A check is a fixed dozen small operations, whatever the model.

    Checks are numbered from 0 over the interval's life (``checks`` counts them on the
    host: a row's slot needs no read); ``carried`` is the streak of non-finite checks
    that ended the interval before this one."""

    def __init__(
        self,
        device: torch.device,
        components: tuple[str, ...],
        parameters: tuple[str, ...],
        history: int,
        carried: int = 0,
    ) -> None:
        self.device = device
        self.components = components
        self.parameters = parameters
        self.rows = history + 1
        dtype = _history_dtype(device)
        # Column 0: the iteration; then the components, in their order.
        self.ring = torch.full(
            (self.rows, 1 + len(components)), math.nan, dtype=dtype, device=device
        )
        self._slots = self.ring.unbind(0)  # a view per row, made once
        self.checks = 0
        self.valid_from = 0  # the first check whose row is in the ring
        self.since_read = 0  # checks since the last read
        self.read_at = 0  # the first check after the last read
        self.last_finite_read = -1 - carried  # the last finite check as of the last read
        self.trailing = carried  # the streak of non-finite checks as of the last read
        self.bad = torch.zeros((), dtype=torch.int64, device=device)
        self.taken = torch.zeros((), dtype=torch.int64, device=device)
        self.last_finite = torch.full((), -1 - carried, dtype=torch.int64, device=device)
        self.first_norms = torch.zeros(len(parameters), dtype=torch.float32, device=device)

    @torch.no_grad()
    def add(
        self, iteration: int, values: list[torch.Tensor | float], norms: torch.Tensor
    ) -> torch.Tensor:
        """One check, all on the device; returns whether it was non-finite (a 0-d bool
        tensor, not read here)."""
        dtype = self.ring.dtype
        row = torch.stack(
            [
                torch.full((), float(iteration), dtype=dtype, device=self.device),
                *(
                    (v if v.device == self.device else v.to(self.device))
                    if isinstance(v, torch.Tensor)
                    else torch.full((), v, dtype=dtype, device=self.device)
                    for v in values
                ),
            ]
        )
        # A NaN or an infinity anywhere makes the sum non-finite, and a non-finite sum
        # times 0 is NaN, which is not 0 (torch.isfinite is four operations). The
        # iteration in column 0 is finite; summed at the ring's precision (float64 but
        # on MPS), the norms cannot overflow.
        bad = torch.cat([row, norms]).sum(dtype=dtype).mul_(0).ne(0)
        # Open: no check since the last read was non-finite, so this row is kept.
        open_ = self.bad.eq(0)
        slot = self._slots[self.checks % self.rows]
        torch.where(open_, row, slot, out=slot)
        torch.where(open_, norms, self.first_norms, out=self.first_norms)
        self.taken.add_(open_)
        self.bad.add_(bad)
        self.last_finite = torch.where(bad, self.last_finite, self.checks)
        self.checks += 1
        self.since_read += 1
        return bad

    def read(self) -> tuple[int, int, int, float, list[float], list[list[float]]]:
        """(first non-finite check or -1, non-finite checks, the first one's streak, its
        global norm, its per-parameter norms, the ring's rows): the one read, at record
        time. The ring takes rows again afterwards."""
        bad, taken, last_finite = torch.stack([self.bad, self.taken, self.last_finite]).tolist()
        norms = self.first_norms.double().tolist()
        rows = self.ring.double().tolist()
        first, streak = -1, 0
        if bad:
            first = self.read_at + int(taken) - 1
            # The checks between the last read and the first non-finite one were finite.
            streak = first - (first - 1 if first > self.read_at else self.last_finite_read)
        self.passed(int(last_finite))
        # The global norm from the per-parameter ones (NaN and inf carry through).
        return first, int(bad), streak, math.sqrt(sum(n * n for n in norms)), norms, rows

    def passed(self, last_finite: int) -> None:
        """Marks every check so far as read; ``last_finite``: the last finite one."""
        self.bad.zero_()
        self.taken.zero_()
        self.read_at = self.checks
        self.since_read = 0
        self.last_finite_read = last_finite
        self.trailing = self.checks - 1 - last_finite

    def history(self, check: int, rows: list[list[float]]) -> list[tuple[int, list[float]]]:
        """(iteration, component values) of ``check`` and of the checks before it that
        the ring holds, oldest first."""
        start = max(check - self.rows + 1, self.valid_from, 0)
        out = []
        for k in range(start, check + 1):
            row = rows[k % self.rows]
            out.append((int(row[0]), row[1:]))
        return out


class NonfiniteCheck:
    """The per-iteration check of one profiler (see ``MemoryProfiler.check_finite``).

    A check either reads its answer at once (``check(..., now=True)``: on iterations the
    profiler records, and always under ``"skip"``, which must stop this very step) or
    leaves it on the device, where :meth:`settle` — called at the next record — reads
    what every check since the previous record found and reports the first non-finite
    iteration among them."""

    def __init__(
        self,
        model: torch.nn.Module | None,
        optimizer: torch.optim.Optimizer | None,
        policy: Policy,
        history: int,
        write: Callable[[dict[str, Any], bool], Path | None],
        rank: int,
        norms: GradientNorms | None = None,
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"on_nonfinite must be one of {POLICIES}, not {policy!r}")
        if history < 0:
            raise ValueError(f"nonfinite_history must be >= 0, not {history}")
        self.model = model
        self.optimizer = optimizer
        self._model_parameters = ParameterList(model)
        self._parameters_key: tuple[Any, ...] | None = None
        self._all_parameters: list[tuple[str, torch.Tensor]] = []
        self.norms = norms or GradientNorms()
        self.policy = policy
        self.write = write
        self.rank = rank
        self.history = history
        self.interval: _Interval | None = None
        # Raised at the next record: found when an interval was settled early.
        self.pending_error: NonfiniteError | None = None
        self.events = 0
        self.reports = 0
        self.warned = False
        self._stand_in: torch.Tensor | None = None  # see gradient_norms

    def _parameters(self) -> list[tuple[str, torch.Tensor]]:
        """The model's parameters by name, then those only the optimizer holds (a learned
        temperature beside the model), named by their group and place in it. Kept while
        the model's list and the optimizer's groups stay the same."""
        model = self._model_parameters.get()
        groups = self.optimizer.param_groups if self.optimizer is not None else []
        key = (id(model), tuple((id(g["params"]), len(g["params"])) for g in groups))
        if key == self._parameters_key:
            return self._all_parameters
        named = list(model)
        seen = {id(p) for _, p in named}
        for g, group in enumerate(groups):
            for k, p in enumerate(group["params"]):
                if id(p) not in seen:
                    seen.add(id(p))
                    named.append((f"optimizer.param_groups[{g}][{k}]", p))
        self._parameters_key, self._all_parameters = key, named
        return named

    def _gradients(self) -> list[tuple[str, torch.Tensor]]:
        return [(n, p.grad) for n, p in self._parameters() if p.grad is not None]

    def gradient_norms(
        self, keep: bool = True
    ) -> tuple[list[tuple[str, torch.Tensor]], torch.Tensor | None]:
        """The gradients now and their per-parameter norms (one ``_foreach_norm``, left
        on the device: nothing is read), for a :meth:`check` made later. Without ``keep``
        each gradient is stood in for by an empty tensor on its device, so that holding
        the result until the check keeps no gradient's memory alive (the optimizer-step
        hook holds it across ``zero_grad()`` and maybe the next forward; a check uses
        only the names and the first one's device)."""
        grads = self._gradients()
        if not grads:
            return grads, None
        device = grads[0][1].device
        per_tensor = self.norms.of([g for _, g in grads])
        try:
            norms = torch.stack(per_tensor).float()
        except RuntimeError:  # gradients on several devices (pipeline stages)
            norms = torch.stack([n.to(device) for n in per_tensor]).float()
        if not keep:
            if self._stand_in is None or self._stand_in.device != device:
                self._stand_in = torch.empty(0, device=device)
            grads = [(n, self._stand_in) for n, _ in grads]
        return grads, norms

    def drop_if_nonfinite(self, norms: torch.Tensor | None) -> None:
        """``"skip"`` in the optimizer-step hook: when a gradient norm is not finite,
        drops every gradient, so that the step about to run changes nothing. One read:
        the synchronisation ``"skip"`` pays."""
        if norms is not None and not bool(torch.isfinite(norms).all().item()):
            for _, p in self._parameters():
                p.grad = None

    def check(
        self,
        iteration: int,
        losses: Mapping[str, Any] | None,
        loss: Any,
        now: bool,
        measured: tuple[list[tuple[str, torch.Tensor]], torch.Tensor | None] | None = None,
    ) -> tuple[bool, NonfiniteError | None]:
        """(whether the optimizer should step, the error to raise if any). Reads nothing
        unless ``now`` or the policy is ``"skip"``. ``measured``: the gradients and norms
        :meth:`gradient_norms` took earlier in the iteration (the optimizer-step hook),
        checked instead of the gradients now."""
        parts = {str(k): _scalar(v) for k, v in (losses or {}).items()}
        if loss is not None:
            parts["total"] = _scalar(loss)
        grads, taken = measured if measured is not None else self.gradient_norms()
        # Gradients measured earlier (by the hook) are stand-ins: nothing to count.
        real = measured is None
        now = now or self.policy == "skip"
        error = None
        interval = self._interval(parts, grads)
        if now:
            # What the checks before this one found comes first.
            error = self.settle()
        norms = (
            taken.to(interval.device)
            if taken is not None
            else torch.zeros(0, device=interval.device)
        )
        bad = interval.add(iteration, [parts[c] for c in interval.components], norms)
        if not now:
            return True, None
        if not bool(bad.item()):  # the one read of a check that answers at once
            interval.passed(interval.checks - 1)
            return error is None, error
        later = self.settle(grads if real else None, live=real)
        error = error or later
        if self.policy == "skip":
            # Dropped gradients make optimizer.step() leave every parameter alone, even
            # in a loop that ignores check_finite's answer.
            for _, p in self._parameters():
                p.grad = None
        return self.policy == "continue", error

    def _interval(
        self,
        parts: dict[str, torch.Tensor | float],
        grads: list[tuple[str, torch.Tensor]],
    ) -> _Interval:
        """The interval these values go to: the current one, unless the components, the
        parameters with a gradient or the device changed (rare: the current one is then
        settled first, which reads it, and a new one starts without history)."""
        device = next(
            (g.device for _, g in grads),
            next((v.device for v in parts.values() if isinstance(v, torch.Tensor)), None),
        ) or torch.device("cpu")
        components = tuple(parts)
        parameters = tuple(n for n, _ in grads)
        current = self.interval
        if current is not None and (
            current.device == device
            and current.components == components
            and current.parameters == parameters
        ):
            return current
        carried = 0
        if current is not None:
            if current.since_read:
                error = self.settle()
                if error is not None:
                    self.pending_error = error
            carried = current.trailing
        self.interval = _Interval(device, components, parameters, self.history, carried)
        return self.interval

    def settle(
        self, grads: list[tuple[str, torch.Tensor]] | None = None, live: bool = True
    ) -> NonfiniteError | None:
        """Reads what the checks since the last read found (one read) and writes the
        event of the first non-finite one; returns the error to raise under ``"raise"``.
        ``grads``: the gradients of the latest check, counted element by element when that
        check is the first non-finite one (they are the gradients it saw); else, with
        ``live``, the gradients now when they are the same parameters'."""
        pending, self.pending_error = self.pending_error, None
        interval = self.interval
        if interval is None or not interval.since_read:
            return pending
        first, _, streak, total, norms, rows = interval.read()
        if first < 0:
            return pending
        history = interval.history(first, rows)
        if first < interval.checks - 1:
            # The rows of the checks after the first non-finite one were never written.
            interval.valid_from = interval.checks
        iteration, values = history[-1]
        latest = first == interval.checks - 1
        if grads is None and latest and live:
            now = dict(self._gradients())
            if tuple(now) == interval.parameters:
                grads = list(now.items())
        event = self._event(
            iteration,
            dict(zip(interval.components, values, strict=True)),
            history[:-1],
            interval,
            norms,
            total,
            grads if latest else None,
            streak,
        )
        report = self._record(event)
        if self.policy == "raise":
            return pending or NonfiniteError(_headline(event, report), iteration, report)
        return pending

    def _event(
        self,
        iteration: int,
        values: dict[str, float],
        history: list[tuple[int, list[float]]],
        interval: _Interval,
        norms: list[float],
        total: float,
        grads: list[tuple[str, torch.Tensor]] | None,
        streak: int,
    ) -> dict[str, Any]:
        bad: list[dict[str, Any]] = []
        elements = {n: p.numel() for n, p in self._parameters()}
        seen = dict(grads) if grads is not None else {}
        for name, norm in zip(interval.parameters, norms, strict=True):
            if math.isfinite(norm):
                continue
            g = seen.get(name)
            if g is not None:
                # The gradients the check saw: exact NaN and Inf counts (none when only
                # the norm overflowed: finite elements too large to square).
                nan = int(torch.isnan(g).sum().item())
                inf = int(torch.isinf(g).sum().item())
                if nan or inf:
                    bad.append(
                        {
                            "name": name,
                            "nan": nan,
                            "inf": inf,
                            "elements": g.numel(),
                            "counted": True,
                        }
                    )
                continue
            # A check read later: its gradients are gone, their norms remain. A NaN norm
            # means NaN elements, an infinite one Inf elements (or finite ones too large to
            # square); how many is not known: 1 stands for "some", and "counted" says so.
            marked = int(math.isnan(norm))
            bad.append(
                {
                    "name": name,
                    "nan": marked,
                    "inf": 1 - marked,
                    "elements": elements.get(name, 0),
                    "counted": False,
                }
            )
        grad_norm = math.sqrt(sum(n * n for n in norms)) if interval.parameters else None
        return {
            "kind": "nonfinite",
            "iteration": int(iteration),
            "time": time.time(),
            "rank": self.rank,
            "losses": values,
            "nonfinite_components": [k for k, v in values.items() if not math.isfinite(v)],
            "grad_norm": grad_norm,
            "nonfinite_parameters": bad,
            "parameters_checked": len(interval.parameters),
            "history": [
                {"iteration": it, "losses": dict(zip(interval.components, vs, strict=True))}
                for it, vs in history
            ],
            "action": self.policy,
            "streak": streak,
            "report": None,
        }

    def _record(self, event: dict[str, Any]) -> Path | None:
        """Writes the event (and, at the start of a streak, its report); warns once."""
        if self.events >= MAX_EVENTS:
            return None
        self.events += 1
        with_report = event["streak"] == 1 and self.reports < MAX_REPORTS
        self.reports += with_report
        report = self.write(event, with_report)
        if not self.warned:
            self.warned = True
            warn_user(
                f"gpuscope: {_headline(event, report)} (warned once; every event goes "
                "to profiles/nonfinite.jsonl)",
                RuntimeWarning,
            )
        return report


def _headline(event: dict[str, Any], report: Path | None) -> str:
    components = [c for c in event["nonfinite_components"] if c != "total"] or event[
        "nonfinite_components"
    ]
    params = [p["name"] for p in event["nonfinite_parameters"]]
    what = (
        f"loss component {components[0]!r} went non-finite first"
        if components
        else "the losses are finite but the gradients are not"
    )
    if params:
        more = f" and {len(params) - 3} more" if len(params) > 3 else ""
        what += f"; NaN/Inf gradients in {', '.join(params[:3])}{more}"
    where = f"; report: {report}" if report is not None else ""
    return f"non-finite values at iteration {event['iteration']}: {what}{where}"


@dataclass
class NonfiniteFinding:
    """What :func:`find_nonfinite` found. ``None`` fields were not found: the step ran
    clean, or the values were non-finite without a module or a backward node making
    them (inputs that were already NaN)."""

    module: str | None
    """Qualified name of the first module whose output was non-finite."""
    module_type: str | None
    inputs_finite: bool | None
    """Whether that module's inputs were finite, i.e. whether it made the values."""
    backward_node: str | None
    """The autograd node whose backward returned NaN first (``LogBackward0``)."""
    forward_trace: str | None
    """Where that node was created in the forward pass, as detect_anomaly prints it."""
    error: str | None
    """detect_anomaly's message."""
    result: Any = None
    """What ``step_fn`` returned, when it returned."""

    @property
    def found(self) -> bool:
        return self.module is not None or self.backward_node is not None

    def __str__(self) -> str:
        if not self.found:
            return "find_nonfinite: the step ran without a non-finite module output or backward"
        lines = []
        if self.module is not None:
            made = (
                "from finite inputs"
                if self.inputs_finite
                else "(its inputs were already non-finite)"
            )
            lines.append(
                f"First non-finite module output: {self.module} ({self.module_type}) {made}"
            )
        if self.backward_node is not None:
            lines.append(f"First NaN in backward: {self.backward_node}")
        if self.forward_trace:
            lines.append("Created in the forward pass at:\n" + self.forward_trace.rstrip())
        return "\n".join(lines)


_ANOMALY = re.compile(r"Function '(\w+)' returned nan values")


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _tensors(v)
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _tensors(v)


def _finite(value: Any) -> bool:
    return all(
        bool(torch.isfinite(t).all())
        for t in _tensors(value)
        if t.is_floating_point() or t.is_complex()
    )


class _ModuleWatch:
    """Global forward hooks that remember the first module with a non-finite output."""

    def __init__(self, model: torch.nn.Module | None) -> None:
        self.names = module_names(model) if model is not None else {}
        self.module: str | None = None
        self.module_type: str | None = None
        self.inputs_finite: bool | None = None

    def name(self, module: torch.nn.Module) -> str:
        return self.names.get(id(module), type(module).__name__)

    def pre(self, module: torch.nn.Module, args: Any) -> None:
        if not self.names:  # the first module called is the root: name its tree
            self.names = module_names(module)

    def post(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        if self.module is None and not _finite(output):
            self.module = self.name(module)
            self.module_type = type(module).__name__
            self.inputs_finite = _finite(args)


_FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line \d+')
_LIBRARIES = (str(Path(torch.__file__).parent), str(Path(__file__).parent.parent))


def _user_frames(trace: str) -> str:
    """The frames of detect_anomaly's forward traceback that are the user's code: torch's
    module machinery and gpuscope's own frames left out."""
    kept: list[str] = []
    keep = False
    for line in trace.splitlines():
        frame = _FRAME.match(line)
        if frame is not None:
            keep = not frame.group("file").startswith(_LIBRARIES)
        elif not line.startswith("    "):
            keep = False  # the header, and torch's "(Triggered internally ...)" line
        if keep:
            kept.append(line)
    return "\n".join(kept)


def _eager() -> contextlib.AbstractContextManager[Any]:
    """torch.compile'd code run eagerly, so that the forward hooks see the modules inside
    it (a compiled graph made before the hooks existed never calls them) and anomaly mode
    records the user's forward frames. Nothing on a torch without ``set_stance``."""
    set_stance = getattr(torch.compiler, "set_stance", None)
    if set_stance is None:
        return contextlib.nullcontext()
    stance: contextlib.AbstractContextManager[Any] = set_stance("force_eager")
    return stance


def find_nonfinite(
    step_fn: Callable[..., Any],
    *args: Any,
    model: torch.nn.Module | None = None,
    **kwargs: Any,
) -> NonfiniteFinding:
    """Re-runs ``step_fn(*args, **kwargs)`` — forward, loss and ``backward()``, ideally on
    the batch that went wrong — under ``torch.autograd.detect_anomaly`` with a forward
    hook on every module, and says where the first non-finite values came from.

    Slow (every module output is checked, anomaly mode records forward stacks): for
    investigating, not for every iteration. Modules are named from ``model`` when given,
    else from the first module called, as the user's model names them (without the
    components ``torch.compile`` and other wrappers add); compiled code runs eagerly here.
    detect_anomaly only catches NaN in backward, not Inf. Exceptions other than
    detect_anomaly's own propagate.
    """
    watch = _ModuleWatch(model)
    hooks = torch.nn.modules.module
    handles = [
        hooks.register_module_forward_pre_hook(watch.pre),
        hooks.register_module_forward_hook(watch.post),
    ]
    node = error = trace = None
    result = None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with _eager(), torch.autograd.detect_anomaly(check_nan=True):
                    result = step_fn(*args, **kwargs)
            except RuntimeError as e:
                match = _ANOMALY.search(str(e))
                if match is None:
                    raise
                node, error = match.group(1), str(e)
        traces = [str(w.message) for w in caught if "Traceback of forward call" in str(w.message)]
        trace = _user_frames(traces[-1]) if traces else None
    finally:
        for h in handles:
            h.remove()
    return NonfiniteFinding(
        module=watch.module,
        module_type=watch.module_type,
        inputs_finite=watch.inputs_finite,
        backward_node=node,
        forward_trace=trace,
        error=error,
        result=result,
    )
