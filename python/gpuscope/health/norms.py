"""Per-tensor norms of the gradients, shared by the checks of one iteration.

The gradient flow (clipping count, or the full measurement) and the non-finite check both
need every gradient's L2 norm; on a large model each ``torch._foreach_norm`` is a pass
over all gradient memory. Computed once while the gradients stay the same, one pass
serves both.
"""

from __future__ import annotations

import weakref

import torch

__all__ = ["GradientNorms"]


class GradientNorms:
    """``of(grads)`` returns ``torch._foreach_norm(grads)``, recomputed only when the
    gradients changed: a gradient changed in place (clipping, a scaler's unscaling) bumps
    its version counter, and a new one is another object. The gradients are held weakly
    (with their versions), not kept alive: a freed gradient's ``id()`` may be reused by
    the next iteration's, which an identity alone would mistake for the same one (a loop
    that skips ``step()`` after ``check_finite`` raises never calls :meth:`forget`)."""

    def __init__(self) -> None:
        self._key: list[tuple[weakref.ref[torch.Tensor], int]] = []
        self._norms: list[torch.Tensor] = []

    def of(self, grads: list[torch.Tensor]) -> list[torch.Tensor]:
        if not self._same(grads):
            self._norms = list(torch._foreach_norm(grads))
            self._key = [(weakref.ref(g), g._version) for g in grads]
        return self._norms

    def _same(self, grads: list[torch.Tensor]) -> bool:
        return len(grads) == len(self._key) and all(
            ref() is g and version == g._version
            for g, (ref, version) in zip(grads, self._key, strict=True)
        )

    def forget(self) -> None:
        self._key = []
        self._norms = []
