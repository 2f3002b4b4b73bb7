"""NaN/Inf forensics: after out-of-memory, the most common question in training.

:class:`NonfiniteCheck` is the cheap per-iteration check behind
``MemoryProfiler.check_finite``: are the loss components and the global gradient norm
finite? It costs one device-to-host read per call (one ``.item()`` of a boolean computed
on the device from the losses and a ``torch._foreach_norm`` of the gradients). When it
trips it gathers, once, what a person needs: which component went non-finite first,
which parameters hold NaN or Inf gradients, the losses of the last iterations — and
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
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from gpuscope._warnings import warn_user
from gpuscope.names import module_names, named_parameters

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
    """A loss value kept without a device sync: a detached 0-d tensor, or a float."""
    if isinstance(value, torch.Tensor):
        return value.detach().reshape(())
    return float(value)


def _as_float(value: torch.Tensor | float) -> float:
    return float(value.item()) if isinstance(value, torch.Tensor) else value


def _all_finite(values: list[torch.Tensor | float], norms: list[torch.Tensor]) -> bool:
    """One boolean for every value and gradient norm, read with one sync per device."""
    if not all(math.isfinite(v) for v in values if isinstance(v, float)):
        return False
    by_device: dict[torch.device, list[torch.Tensor]] = {}
    for t in values:
        if isinstance(t, torch.Tensor):
            by_device.setdefault(t.device, []).append(t.float())
    norms_by_device: dict[torch.device, list[torch.Tensor]] = {}
    for n in norms:
        norms_by_device.setdefault(n.device, []).append(n)
    for device, ns in norms_by_device.items():
        # A device's gradient norms as one figure: stacking them is the one pass over them.
        total = torch.linalg.vector_norm(torch.stack(ns).float()).reshape(())
        by_device.setdefault(device, []).append(total)
    return all(bool(torch.isfinite(torch.stack(ts)).all().item()) for ts in by_device.values())


class NonfiniteCheck:
    """The per-iteration check of one profiler (see ``MemoryProfiler.check_finite``)."""

    def __init__(
        self,
        model: torch.nn.Module | None,
        optimizer: torch.optim.Optimizer | None,
        policy: Policy,
        history: int,
        write: Callable[[dict[str, Any], bool], Path | None],
        rank: int,
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"on_nonfinite must be one of {POLICIES}, not {policy!r}")
        if history < 0:
            raise ValueError(f"nonfinite_history must be >= 0, not {history}")
        self.model = model
        self.optimizer = optimizer
        self.policy = policy
        self.write = write
        self.rank = rank
        self.history: deque[tuple[int, dict[str, torch.Tensor | float]]] = deque(maxlen=history)
        self.streak = 0
        self.events = 0
        self.reports = 0
        self.warned = False

    def _parameters(self) -> list[tuple[str, torch.Tensor]]:
        """The model's parameters by name, then those only the optimizer holds (a learned
        temperature beside the model), named by their group and place in it."""
        named = named_parameters(self.model) if self.model is not None else []
        seen = {id(p) for _, p in named}
        if self.optimizer is not None:
            for g, group in enumerate(self.optimizer.param_groups):
                for k, p in enumerate(group["params"]):
                    if id(p) not in seen:
                        seen.add(id(p))
                        named.append((f"optimizer.param_groups[{g}][{k}]", p))
        return named

    def _gradients(self) -> list[tuple[str, torch.Tensor]]:
        return [(n, p.grad) for n, p in self._parameters() if p.grad is not None]

    def check(
        self, iteration: int, losses: Mapping[str, Any] | None, loss: Any
    ) -> tuple[bool, NonfiniteError | None]:
        """(whether the optimizer should step, the error to raise if any)."""
        parts = {str(k): _scalar(v) for k, v in (losses or {}).items()}
        if loss is not None:
            parts["total"] = _scalar(loss)
        grads = self._gradients()
        norms = list(torch._foreach_norm([g for _, g in grads])) if grads else []
        if _all_finite(list(parts.values()), norms):
            self.streak = 0
            self.history.append((iteration, parts))
            return True, None
        self.streak += 1
        event = self._event(iteration, parts, grads, norms)
        self.history.append((iteration, parts))
        report = self._record(event)
        if self.policy == "skip":
            # Dropped gradients make optimizer.step() leave every parameter alone, even
            # in a loop that ignores check_finite's answer.
            for _, p in self._parameters():
                p.grad = None
        if self.policy == "raise":
            return False, NonfiniteError(_headline(event, report), iteration, report)
        return self.policy == "continue", None

    def _event(
        self,
        iteration: int,
        parts: dict[str, torch.Tensor | float],
        grads: list[tuple[str, torch.Tensor]],
        norms: list[torch.Tensor],
    ) -> dict[str, Any]:
        values = {k: _as_float(v) for k, v in parts.items()}
        bad: list[dict[str, Any]] = []
        for (name, g), norm in zip(grads, norms, strict=True):
            if math.isfinite(float(norm.item())):
                continue
            nan = int(torch.isnan(g).sum().item())
            inf = int(torch.isinf(g).sum().item())
            if nan or inf:
                bad.append({"name": name, "nan": nan, "inf": inf, "elements": g.numel()})
        grad_norm = math.sqrt(sum(float(n.item()) ** 2 for n in norms)) if grads else None
        return {
            "kind": "nonfinite",
            "iteration": int(iteration),
            "time": time.time(),
            "rank": self.rank,
            "losses": values,
            "nonfinite_components": [k for k, v in values.items() if not math.isfinite(v)],
            "grad_norm": grad_norm,
            "nonfinite_parameters": bad,
            "parameters_checked": len(grads),
            "history": [
                {"iteration": it, "losses": {k: _as_float(v) for k, v in p.items()}}
                for it, p in self.history
            ],
            "action": self.policy,
            "streak": self.streak,
            "report": None,
        }

    def _record(self, event: dict[str, Any]) -> Path | None:
        """Writes the event (and, at the start of a streak, its report); warns once."""
        if self.events >= MAX_EVENTS:
            return None
        self.events += 1
        with_report = self.streak == 1 and self.reports < MAX_REPORTS
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
