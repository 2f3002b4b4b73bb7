"""Per-tensor norms of the gradients, shared by the checks of one iteration.

The gradient flow (clipping count, or the full measurement) and the non-finite check both
need every gradient's L2 norm; on a large model each ``torch._foreach_norm`` is a pass
over all gradient memory. Computed once while the gradients stay the same, one pass
serves both.
"""

from __future__ import annotations

import torch

__all__ = ["GradientNorms"]


class GradientNorms:
    """``of(grads)`` returns ``torch._foreach_norm(grads)``, recomputed only when the
    gradients changed: a gradient changed in place (clipping, a scaler's unscaling) bumps
    its version counter, and a new one is another object. Only identities and versions
    are kept, not the gradients; :meth:`forget` at the end of each iteration, before
    freed gradients' identities can be reused."""

    def __init__(self) -> None:
        self._key: tuple[tuple[int, int], ...] | None = None
        self._norms: list[torch.Tensor] = []

    def of(self, grads: list[torch.Tensor]) -> list[torch.Tensor]:
        key = tuple((id(g), g._version) for g in grads)
        if key != self._key:
            self._norms = list(torch._foreach_norm(grads))
            self._key = key
        return self._norms

    def forget(self) -> None:
        self._key = None
        self._norms = []
