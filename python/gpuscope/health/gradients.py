"""Gradient flow: norms of the gradients after ``backward()`` and before the optimizer
step, globally, per parameter group and per submodule, the share of zero gradients, and
how often clipping bit; as an opt-in, the update/weight ratio
(how far the optimizer step moved the weights, relative to their size), which needs a
copy of the weights from before the step.

The norms come from one ``torch._foreach_norm`` over all gradients (no Python loop over
elements; bench/bench_gradients.py measures it beside the loops people write); group
and module norms combine the per-tensor norms (the L2 norm of a set of tensors is the L2
norm of their norms).

Between records nothing here reads a tensor's value (a read stops the CPU until the
GPU catches up): the clipping count and the sum of the clip factors accumulate in
tensors on the gradients' device and are read when the next record takes them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch

from gpuscope.health.norms import GradientNorms
from gpuscope.names import ParameterList, module_of

__all__ = ["GradientFlow"]


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _combined(norms: Iterable[float]) -> float:
    return math.sqrt(sum(n * n for n in norms))


class GradientFlow:
    """Measures gradients of ``model``'s parameters (grouped by ``optimizer``'s groups
    when given, and by submodule up to ``module_depth`` dots of the user's names)."""

    def __init__(
        self,
        model: torch.nn.Module | None,
        optimizer: torch.optim.Optimizer | None,
        module_depth: int,
        update_ratio: bool = False,
        norms: GradientNorms | None = None,
    ) -> None:
        self.model = model
        self._parameters = ParameterList(model)
        self.norms = norms or GradientNorms()
        self.update_ratio = update_ratio
        # (module of each parameter, the parameters, their values before the step).
        self._before: tuple[list[str], list[torch.Tensor], list[torch.Tensor]] | None = None
        self.optimizer = optimizer
        self.module_depth = module_depth
        self._pending: dict[str, Any] | None = None
        self._measured = 0
        self._finite = 0
        self._clipped = 0
        self._factors: list[float] = []
        # Clipping between records, on the device: times clipped, sum of the factors,
        # iterations whose norm was finite.
        self._on_device: torch.Tensor | None = None

    def measure(self, iteration: int, clip_max_norm: float | None, full: bool) -> None:
        """One measurement; ``full`` keeps the norms for the next record (otherwise only
        the clipping count is kept, which needs the global norm alone)."""
        if self.model is None:
            return
        named = [(n, p) for n, p in self._parameters.get() if p.requires_grad]
        with_grad = [(n, p) for n, p in named if p.grad is not None]
        grads = [p.grad for _, p in with_grad if p.grad is not None]
        self._measured += 1
        if not grads:
            norms: list[float] = []
            global_norm = 0.0
        elif full:
            norms = [float(x) for x in torch.stack(self.norms.of(grads)).tolist()]
            global_norm = _combined(norms)
        else:
            # The global norm alone, compared with the clipping threshold on the device.
            if clip_max_norm is not None:
                self._count_clipping(grads, clip_max_norm)
            return
        # A NaN or infinite norm neither clips nor passes: the share is of the finite ones.
        finite = math.isfinite(global_norm)
        self._finite += finite
        if clip_max_norm is not None and finite and global_norm > clip_max_norm:
            self._clipped += 1
            self._factors.append(clip_max_norm / global_norm)
        if not full:
            return
        by_id = {id(p): k for k, (_, p) in enumerate(with_grad)}
        groups = []
        if self.optimizer is not None:
            for g in self.optimizer.param_groups:
                ks = [by_id[id(p)] for p in g["params"] if id(p) in by_id]
                groups.append(_finite(_combined(norms[k] for k in ks)))
        modules: dict[str, list[float]] = {}
        for (name, _), n in zip(with_grad, norms, strict=True):
            modules.setdefault(module_of(name, self.module_depth), []).append(n)
        if self.update_ratio:
            params = [p.detach() for _, p in with_grad]
            copies = list(torch._foreach_mul(params, 1.0)) if params else []
            self._before = ([module_of(n, self.module_depth) for n, _ in with_grad], params, copies)
        # The L0 "norm" counts the non-zero elements, all tensors in one pass (float32:
        # exact up to 2^24 elements per tensor, a rounding beyond).
        nonzero = (
            float(torch.stack(torch._foreach_norm(grads, 0, dtype=torch.float32)).sum().item())
            if grads
            else 0.0
        )
        elements = sum(g.numel() for g in grads)
        zeros = elements - nonzero
        self._pending = {
            "iteration": int(iteration),
            "global_norm": _finite(global_norm),
            "group_norms": groups,
            "module_norms": {m: _finite(_combined(ns)) for m, ns in modules.items()},
            "zero_percent": zeros * 100.0 / elements if elements else 0.0,
            "missing": len(named) - len(with_grad),
            "clip_max_norm": clip_max_norm,
        }

    def _count_clipping(self, grads: list[torch.Tensor], clip_max_norm: float) -> None:
        """Adds this call's clipping to the device counters, reading nothing."""
        norm = torch.linalg.vector_norm(torch.stack(self.norms.of(grads)).double())
        # `norm < inf` is false for NaN and infinity alike, which neither clip nor pass.
        finite = norm < math.inf
        clipped = (norm > clip_max_norm).logical_and_(finite)
        if self._on_device is None:
            self._on_device = torch.zeros(3, dtype=torch.float64, device=norm.device)
        factor = torch.where(clipped, clip_max_norm / norm, 0.0)
        self._on_device.add_(torch.stack([clipped, factor, finite]))  # one add for three

    def after_step(self) -> None:
        """After the optimizer step of a measured iteration: the update/weight ratios,
        ‖w_after − w_before‖ / ‖w_before‖, globally and per module."""
        if self._before is None or self._pending is None:
            return
        modules, params, before = self._before
        self._before = None
        if not params:
            return
        moved = torch._foreach_norm(torch._foreach_sub(params, before))
        sizes = torch._foreach_norm(before)
        pairs = torch.stack([*moved, *sizes]).tolist()
        moved_f, sizes_f = pairs[: len(params)], pairs[len(params) :]

        def ratio(ks: list[int]) -> float | None:
            size = _combined(sizes_f[k] for k in ks)
            return _finite(_combined(moved_f[k] for k in ks) / size) if size > 0 else None

        by_module: dict[str, list[int]] = {}
        for k, m in enumerate(modules):
            by_module.setdefault(m, []).append(k)
        self._pending["update_ratio"] = ratio(list(range(len(params))))
        self._pending["module_update_ratios"] = {m: ratio(ks) for m, ks in by_module.items()}

    def relabel(self, iteration: int) -> None:
        """Gives the pending measurement the iteration ``step()`` names (the
        optimizer-step hook measured it under the profiler's guess of that number)."""
        if self._pending is not None:
            self._pending["iteration"] = int(iteration)

    def take(self) -> dict[str, Any] | None:
        """The latest full measurement with the clipping counts since the last call."""
        if self._pending is None:
            return None
        clipped, factors, finite = self._clipped, sum(self._factors), self._finite
        if self._on_device is not None:
            # The one read of the counters, at record time.
            more, more_factors, more_finite = self._on_device.tolist()
            clipped, factors = clipped + round(more), factors + more_factors
            finite += round(more_finite)
            self._on_device = None
        out = {
            **self._pending,
            "measured": self._measured,
            "finite": finite,
            "clipped": clipped,
            "mean_clip_factor": factors / clipped if clipped else None,
        }
        self._pending = None
        self._measured = self._finite = self._clipped = 0
        self._factors = []
        return out
